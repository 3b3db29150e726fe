"""Error kinds the pipeline tells apart: retry a transient one, dead-letter a permanent one."""


class MnemobusError(Exception):
    """Base of every error mnemobus raises on purpose."""


class ConfigError(MnemobusError):
    """A config file or value is invalid; the message names file, field and reason."""


class InvalidMessage(MnemobusError):
    """A message can never be handled as sent (bad JSON, schema, group id, size). Not retried."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


class StoreUnavailable(MnemobusError):
    """The store cannot be reached or is locked right now; the same write may succeed later."""


class StoreIntegrityError(MnemobusError):
    """The store refused a write for a reason a retry will not fix."""
