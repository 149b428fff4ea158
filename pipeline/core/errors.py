"""Error classes the CLI reads: what went wrong (the message) and, where the raiser knows it,
what to do next (the hint). Stages raise BadInputError for bad input, so the CLI and the retry
rule can tell it from a bug or a transient failure without listing each stage's exceptions."""

from __future__ import annotations


class HintedError(Exception):
    """An error whose raiser knows the fix: `hint` is the next step, or None when the message
    says it all. The hint lives with the error, not with the command that happens to catch
    it, so one command's errors of different kinds never share a hint that fits only one."""

    hint: str | None = None

    def __init__(self, msg: str, hint: str | None = None) -> None:
        super().__init__(msg)
        if hint is not None:
            self.hint = hint


class BadInputError(HintedError, ValueError):
    """Input that fails the same way on every attempt; the message names the file (and line).

    The CLI prints it as one line and exits 2; Prefect tasks never retry it."""


def first_line(exc: BaseException) -> str:
    """The one-line form of an error whose message may span lines (DuckDB's caret display,
    vLLM's and decoders' details): its first line, or its type when it has no message."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


__all__ = ["BadInputError", "HintedError", "first_line"]
