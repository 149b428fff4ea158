"""Who may write a store, and how a run is asked to stop.

One nightly run at a time per output directory: a run draws its plan from the selector's
latest iteration and saves the next one at feedback, so a second run started in between would
draw from the same state and its feedback would be dropped. The lock is an OS file lock, so a
crashed or killed run releases it with its process; there is never a stale lock to delete.

A first SIGINT/SIGTERM asks the run to finish the shard in progress and stop (committed shards
stay, the run is resumable); a second one aborts the shard in progress, which is then never
committed and is redone on resume.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import signal
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import orjson

from pipeline.core.io import utcnow

log = logging.getLogger(__name__)

LOCK_FILE = "nightly.lock"


def is_transient(exc: BaseException | None) -> bool:
    """Worth retrying: a server (LLM, retrieval), a network hop or the disk hiccuped. Bad
    config, bad input and bugs fail the same way again, so retrying them only delays the
    alert."""
    from pipeline.core.http import ServerError, ServerUnreachableError

    if isinstance(exc, ServerError):
        return exc.transient
    return isinstance(
        exc, ServerUnreachableError | ConnectionError | TimeoutError | InterruptedError
    )


class RunInProgressError(RuntimeError):
    """Another process holds the store's run lock; the message names it."""


@contextlib.contextmanager
def store_run_lock(out_dir: Path, run_id: str) -> Iterator[None]:
    """Hold the store's exclusive run lock for the body, or fail at once naming the holder."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / LOCK_FILE
    fh = path.open("a+b")
    try:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.seek(0)
            try:
                holder = orjson.loads(fh.read() or b"{}")
            except orjson.JSONDecodeError:
                holder = {}
            raise RunInProgressError(
                f"run {holder.get('run_id', '?')!r} (pid {holder.get('pid', '?')} on "
                f"{holder.get('host', '?')}, since {holder.get('since', '?')}) is writing "
                f"{out_dir}; runs on one store are sequential, so {run_id!r} was not started"
            ) from None
        fh.seek(0)
        fh.truncate()
        info = {"run_id": run_id, "pid": os.getpid(), "host": socket.gethostname()}
        fh.write(orjson.dumps({**info, "since": utcnow().isoformat(timespec="seconds")}))
        fh.flush()
        yield
    finally:
        fh.close()  # closing releases the lock


class StopRequest:
    """A stop flag set by SIGINT/SIGTERM while installed; a second signal aborts."""

    def __init__(self) -> None:
        self._event = threading.Event()

    def requested(self) -> bool:
        return self._event.is_set()

    def request(self, reason: str) -> None:
        if self._event.is_set():
            log.warning("%s again: aborting the shard in progress (it will be redone)", reason)
            raise KeyboardInterrupt
        self._event.set()
        log.warning(
            "%s: finishing the shard in progress, then stopping; send it again to abort "
            "the shard now",
            reason,
        )

    @contextlib.contextmanager
    def installed(self) -> Iterator[StopRequest]:
        """Route SIGINT and SIGTERM here for the body (main thread only; elsewhere the
        default handlers stay and only a hard stop is possible)."""
        if threading.current_thread() is not threading.main_thread():
            log.info("not in the main thread: graceful stop on signals is unavailable")
            yield self
            return
        previous = {}
        for sig in (signal.SIGINT, signal.SIGTERM):
            previous[sig] = signal.signal(
                sig, lambda signum, _frame: self.request(signal.Signals(signum).name)
            )
        try:
            yield self
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


__all__ = ["LOCK_FILE", "RunInProgressError", "StopRequest", "is_transient", "store_run_lock"]
