"""Progress of the long stages, for whoever shows it.

A stage says that it started, how much it has to do when that is known, what it has done so
far, and one line of result. The library never prints: it calls the reporter installed for
the process (`use`). The command line installs one that draws a live line per stage
(cli/console.py); without one, as in a scheduled flow or a test, each stage's start and
result are INFO log records.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Protocol

log = logging.getLogger(__name__)

# Figures read each time a line is drawn (tokens so far, a rate): short text fragments.
Live = Callable[[], list[str]]


@dataclass
class Stage:
    """One stage as a reporter shows it: a count of `total` (None: unknown) `unit`s, the
    figures the stage set last (`info`), those read when drawn (`live`), and its result."""

    name: str
    total: int | None = None
    unit: str = ""
    done: int = 0
    info: list[str] = field(default_factory=list)
    live: Live | None = None
    result: str = ""
    started: float = field(default_factory=time.monotonic)
    base: int | None = None  # units done before this process began (a resumed run's)
    last_done: float | None = None  # when `done` last moved
    ended: float | None = None
    _reporter: Reporter | None = None

    def update(self, done: int | None = None, info: list[str] | None = None) -> None:
        """`done` units so far (absolute), and the figures shown after the count."""
        if done is not None:
            if self.base is None:
                self.base = done
            elif done != self.done:
                self.last_done = time.monotonic()
            self.done = done
        if info is not None:
            self.info = info
        if self._reporter is not None:
            self._reporter.update(self)

    def finish(self, result: str) -> None:
        """The one line that stays once the stage is over."""
        self.result = result

    def elapsed(self) -> float:
        return (self.ended or time.monotonic()) - self.started

    def eta(self) -> float | None:
        """Seconds left at this process's pace per unit so far, less the time the unit in
        progress has taken (None before a unit is done here, or once the estimate is spent)."""
        done_here = self.done - (self.base or 0)
        if not self.total or done_here <= 0 or self.done >= self.total or not self.last_done:
            return None
        per_unit = (self.last_done - self.started) / done_here
        left = per_unit * (self.total - self.done) - (time.monotonic() - self.last_done)
        return left if left > 0 else None

    def figures(self) -> list[str]:
        """The stage's figures and the live ones (a live figure that fails is left out)."""
        extra: list[str] = []
        if self.live is not None:
            try:
                extra = self.live()
            except Exception:  # a figure must never break the run it describes
                log.debug("live figures of %s failed", self.name, exc_info=True)
        return [*self.info, *extra]


class Reporter(Protocol):
    def begin(self, stage: Stage) -> None: ...

    def update(self, stage: Stage) -> None: ...

    def end(self, stage: Stage, ok: bool) -> None: ...


class LogReporter:
    """Start and result of each stage as INFO log records (no live lines)."""

    def begin(self, stage: Stage) -> None:
        log.info("%s: started", stage.name)

    def update(self, stage: Stage) -> None:
        if stage.total:
            log.info(
                "%s: %d/%d %s, %s",
                stage.name,
                stage.done,
                stage.total,
                stage.unit,
                ", ".join(stage.info),
            )

    def end(self, stage: Stage, ok: bool) -> None:
        what = stage.result or ("done" if ok else "failed")
        log.info("%s: %s (%s)", stage.name, what, duration(stage.elapsed()))


_lock = threading.Lock()
_reporter: Reporter = LogReporter()
_pending: Stage | None = None  # a stage that ends when the next one begins (`until_next`)


@contextmanager
def use(reporter: Reporter) -> Iterator[Reporter]:
    """Install `reporter` for this process while the block runs."""
    global _reporter
    with _lock:
        before, _reporter = _reporter, reporter
    try:
        yield reporter
    finally:
        _end_pending(ok=False)
        with _lock:
            _reporter = before


def until_next(name: str, result: str) -> None:
    """Report stage `name` from now until the next stage begins, as `result` then: work that
    is not ours to wrap (an orchestrator starting before the first task)."""
    global _pending
    _end_pending(ok=True)
    _pending = Stage(name, result=result, _reporter=_reporter)
    _reporter.begin(_pending)


def _end_pending(ok: bool) -> None:
    global _pending
    pending, _pending = _pending, None
    if pending is not None and pending._reporter is not None:
        pending.ended = time.monotonic()
        pending._reporter.end(pending, ok)


@contextmanager
def stage(
    name: str, total: int | None = None, unit: str = "", live: Live | None = None
) -> Iterator[Stage]:
    """Report the block as stage `name`; an exception ends it as failed and goes on."""
    _end_pending(ok=True)
    reporter = _reporter
    st = Stage(name, total, unit, live=live, _reporter=reporter)
    reporter.begin(st)
    try:
        yield st
    except BaseException:
        st.ended = time.monotonic()
        reporter.end(st, ok=False)
        raise
    st.ended = time.monotonic()
    reporter.end(st, ok=True)


def clock(seconds: float) -> str:
    """`0:42`, `2:26`, `1:02:03`: a live line's elapsed time and ETA, in few columns."""
    s = round(seconds)
    if s >= 3600:
        return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"
    return f"{s // 60}:{s % 60:02d}"


def duration(seconds: float) -> str:
    """`42 s`, `3 min 05 s`, `1 h 02 min`: what a person reads at a glance."""
    s = round(seconds)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


__all__ = ["LogReporter", "Reporter", "Stage", "clock", "duration", "stage", "until_next", "use"]
