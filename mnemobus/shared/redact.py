"""Secrets out of everything a person reads: URLs keep their user but lose their password, and known secret values
(API keys, MCP tokens, NATS passwords) are replaced wherever they appear, in logs, config errors and doctor output.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable

MASK = "***"

#: `user:password@` in a URL (with or without its scheme, e.g. nats-py's netloc)
_USERINFO = re.compile(r"(?P<head>(?:[A-Za-z][A-Za-z0-9+.-]*://)?[^\s:/@'\"]+):(?P<secret>[^\s@/'\"]+)@")

#: field names whose values are never shown back (config errors name the field and the reason only)
SECRET_FIELDS = ("password", "token", "api_key", "secret")


def mask_urls(text: str) -> str:
    """Every `scheme://user:password@host` in `text` with the password replaced."""
    return _USERINFO.sub(lambda m: f"{m['head']}:{MASK}@", text)


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """`text` with URL passwords masked and each of `secrets` (values at least 4 characters long) replaced."""
    for secret in secrets:
        if len(secret) >= 4:
            text = text.replace(secret, MASK)
    return mask_urls(text)


def is_secret_field(loc: Iterable[object]) -> bool:
    return any(isinstance(p, str) and any(s in p.lower() for s in SECRET_FIELDS) for p in loc)


class RedactingFormatter(logging.Formatter):
    """Formats as usual, then masks: a library that logs a URL or an exception naming a password cannot leak it."""

    def __init__(self, fmt: str, secrets: Iterable[str] = ()) -> None:
        super().__init__(fmt)
        self.secrets = [s for s in secrets if s]

    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record), self.secrets)


def secret_values(model: object) -> list[str]:
    """Every secret a settings tree holds (SecretStr fields, at any depth), to mask wherever it would be shown."""
    from pydantic import BaseModel, SecretStr

    if isinstance(model, SecretStr):
        return [model.get_secret_value()]
    if isinstance(model, BaseModel):
        return [s for name in type(model).model_fields for s in secret_values(getattr(model, name))]
    if isinstance(model, (list, tuple)):
        return [s for item in model for s in secret_values(item)]
    return []
