"""The one rule for names that become parts of paths or keys: run ids (typed on the command
line, passed as Prefect deployment parameters, chosen by a web page), profile names, and the
other names the store files things under.

A name is 1 to 128 ASCII letters, digits, `.`, `_` or `-`, starting with a letter or digit,
with no `..` anywhere: so never `.` or `..`, never a path separator, never absolute, never a
hidden (dot) file, never a character a shell, a terminal or a Hive partition (`key=value`)
would read specially. Every entry point checks it with `check_identifier`; the io layer
(`pipeline.core.io.path_within`) checks again that the paths built from it stay inside the
store.
"""

from __future__ import annotations

import re

from pipeline.core.errors import BadInputError

MAX_IDENTIFIER_LENGTH = 128
IDENTIFIER_PATTERN = rf"[A-Za-z0-9][A-Za-z0-9._-]{{0,{MAX_IDENTIFIER_LENGTH - 1}}}"
_IDENTIFIER = re.compile(IDENTIFIER_PATTERN)
IDENTIFIER_RULE = (
    f"1-{MAX_IDENTIFIER_LENGTH} letters, digits, '.', '_' or '-', starting with a letter or "
    "digit, no '..'"
)


class BadIdentifierError(BadInputError):
    """A name that breaks the identifier rule; the message shows it escaped, on one line."""


def is_identifier(value: object) -> bool:
    return isinstance(value, str) and _IDENTIFIER.fullmatch(value) is not None and ".." not in value


def shown(value: object, limit: int = 80) -> str:
    """`value` for an error line: its repr (quotes, control characters escaped), cut to
    `limit` characters, so a hostile name can neither span lines nor flood the terminal."""
    text = ascii(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def check_identifier(value: object, what: str = "run id") -> str:
    """`value` when it follows the identifier rule, else a BadIdentifierError naming `what`."""
    if is_identifier(value):
        return value  # type: ignore[return-value]
    raise BadIdentifierError(
        f"{what} {shown(value)} is not a valid name: use {IDENTIFIER_RULE}",
        hint=f"choose another {what}, e.g. 20261125-nightly",
    )


__all__ = [
    "IDENTIFIER_PATTERN",
    "IDENTIFIER_RULE",
    "MAX_IDENTIFIER_LENGTH",
    "BadIdentifierError",
    "check_identifier",
    "is_identifier",
    "shown",
]
