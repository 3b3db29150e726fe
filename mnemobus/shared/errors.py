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


def episode_id_taken(episode_id: str, group_id: str, owner: str) -> InvalidMessage:
    """Episode ids are global (as Graphiti's uuids are): one reused in another group is refused, never
    taken for a replay of the other group's episode. Ids derived with `episode_id_for` cannot collide."""
    return InvalidMessage("episode_id_conflict", f"episode id {episode_id!r} for group {group_id!r} is already "
                          f"stored in group {owner!r}; derive ids from the group (episode_id_for)")


class EntityExists(MnemobusError):
    """A caller named an entity that is already there under another id; `entity_id` says which."""

    def __init__(self, detail: str, entity_id: str) -> None:
        super().__init__(detail)
        self.entity_id = entity_id


class StoreUnavailable(MnemobusError):
    """The store cannot be reached or is locked right now; the same write may succeed later."""


class StoreBusy(StoreUnavailable):
    """Another writer holds the store's write lock (an erasure rebuilding its full-text indexes, a backup): the store
    answers reads meanwhile, so nothing else tells this from a write that fails on its own, and the same write
    succeeds once the lock is let go."""


class StoreCorrupt(StoreUnavailable):
    """A part of the store's file is damaged (a full-text index, the file itself): the same write fails the same way
    until someone repairs it (`mnemobus doctor --repair` rebuilds a full-text index from its rows), so no wait ends
    it and the message names the repair."""


class StoreIntegrityError(MnemobusError):
    """The store refused a write for a reason a retry will not fix."""
