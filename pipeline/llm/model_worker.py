"""One model, many HTTP requests: run each request's model work alone, and stop abandoned work.

Requests queue for a single worker thread (the model serves one batch at a time). While a
request waits or runs, the event loop checks every `poll_s` whether its client is still
connected and whether its time limit has passed; if not, the request's CancelToken is
cancelled and the transformers backend stops at its next checkpoint (one decode step or
scoring chunk), so an abandoned request no longer holds the model for the next one.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

from starlette.requests import Request

from pipeline.llm.cancel import CancelToken, cancellable, checkpoint

log = logging.getLogger(__name__)

T = TypeVar("T")

DISCONNECTED = "client disconnected"
TIMEOUT = "time limit"


class RequestCancelled(Exception):
    """The request's work was stopped: `reason` is DISCONNECTED or TIMEOUT."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason, self.message = reason, message


class ModelWorker:
    def __init__(self, timeout_s: float, setting: str, poll_s: float = 0.05) -> None:
        self.timeout_s, self.setting, self.poll_s = timeout_s, setting, poll_s
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="model")
        self.cancelled = {DISCONNECTED: 0, TIMEOUT: 0}

    async def run(self, request: Request, fn: Callable[[], T]) -> T:
        """`fn()` in the worker thread; raises RequestCancelled if the client leaves or the
        request outlives `timeout_s` (counted from now, queueing included)."""
        token = CancelToken()
        start = time.monotonic()
        future = asyncio.wrap_future(self._pool.submit(_call, token, fn))
        while True:
            done, _ = await asyncio.wait({future}, timeout=self.poll_s)
            if done:
                return future.result()
            if await request.is_disconnected():
                reason = DISCONNECTED
                message = "the client disconnected; its request was cancelled"
            elif time.monotonic() - start > self.timeout_s:
                reason = TIMEOUT
                message = (
                    f"the request took longer than the server's limit of {self.timeout_s:g} s "
                    f"({self.setting}) and was cancelled"
                )
            else:
                continue
            token.cancel(message)
            future.add_done_callback(_consume)
            self.cancelled[reason] += 1
            log.warning("%s %s: %s", request.method, request.url.path, message)
            raise RequestCancelled(reason, message)

    def shutdown(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


def _call(token: CancelToken, fn: Callable[[], T]) -> T:
    with cancellable(token):
        checkpoint()  # cancelled while it queued: do not start
        return fn()


def _consume(future: Future) -> None:
    """Retrieve an abandoned request's outcome (normally Cancelled) so it is not logged."""
    if not future.cancelled():
        future.exception()
