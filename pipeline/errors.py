"""The error class every stage raises for bad input, so the CLI and the retry rule can tell it
from a bug or a transient failure without listing each stage's exceptions."""

from __future__ import annotations


class BadInputError(ValueError):
    """Input that fails the same way on every attempt; the message names the file (and line).

    The CLI prints it as one line and exits 2; Prefect tasks never retry it."""


__all__ = ["BadInputError"]
