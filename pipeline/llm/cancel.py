"""Co-operative cancellation of backend work from outside the thread that runs it.

The OpenAI-compatible server runs each request's model work in a worker thread under a
CancelToken; when the client disconnects or the request's time limit passes it cancels the
token, and the transformers backend stops at its next `checkpoint()` (between decode steps,
scoring chunks and batches), so the model is free for the next request within one step.
Outside a `cancellable` block `checkpoint()` does nothing, so in-process callers are unaffected.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar


class Cancelled(Exception):
    """The work was cancelled; the message says why."""


class CancelToken:
    def __init__(self) -> None:
        self._event = threading.Event()
        self.reason = ""

    def cancel(self, reason: str) -> None:
        if not self._event.is_set():
            self.reason = reason
            self._event.set()

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()


_current: ContextVar[CancelToken | None] = ContextVar("cancel_token", default=None)


@contextmanager
def cancellable(token: CancelToken) -> Iterator[CancelToken]:
    """Make `checkpoint()` in this thread (context) honour `token`."""
    reset = _current.set(token)
    try:
        yield token
    finally:
        _current.reset(reset)


def checkpoint() -> None:
    """Raise Cancelled when the work running in this context has been cancelled."""
    token = _current.get()
    if token is not None and token.cancelled:
        raise Cancelled(token.reason or "cancelled")
