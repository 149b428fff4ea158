"""The console of a long command (`nightly`, `index build`, `kg ...`, `cluster`): one line per
stage for the person watching, everything else in the run's log file.

The engines write their own logs and bars: vLLM (its engine core is a spawned process that
writes to the stderr it inherited), Prefect's temporary server, torch and transformers
warnings. So the file descriptors 1 and 2 themselves are pointed at the log file for the rest
of the process, children included, and the console is what they were before: the stages'
lines (pipeline.core.progress), a warning a person must act on, and the command's own result.
With `-v` both descriptors feed a pipe whose reader copies every byte to the console and the
log file, and the stages print plain lines among the engines' logs.

On a terminal each stage is one live line (rich) that stays, with its result, once the stage
is over; elsewhere (CI, cron, a pipe) plain lines, no carriage returns: a start line for a
stage still running after a few seconds, a line per unit of work done, a heartbeat a minute,
and the result.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import io
import logging
import os
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

from pipeline.core import progress
from pipeline.core.progress import Stage, clock, duration

# Loggers whose warnings reach the console: ours, and the flow's own (Prefect's run logger).
CONSOLE_WARNING_LOGGERS = ("pipeline", "flows", "cli", "prefect.flow_runs")
# `curriculum -v` / `--debug`: the engines' logs on the console too (set by the CLI's callback).
VERBOSE = False
# The log file of this process's run console, for an error's hint (the engines' side of it).
LOG_FILE: Path | None = None
QUIET_START_S = 3.0  # a plain start line only for a stage still running after this long
HEARTBEAT_S = 60.0  # a plain line per running stage this often


def _stage_line(st: Stage, finished: bool | None) -> str:
    """`index: 425 passages, reused (2 s)` / `generation: 1/2 shards, 16/32 records (1 min)`."""
    if finished is not None:
        what = (st.result or "done") if finished else "failed"
        return f"{st.name}: {what} ({duration(st.elapsed())})"
    return f"{st.name}: {', '.join(_running_figures(st)) or 'running'} ({duration(st.elapsed())})"


def _running_figures(st: Stage) -> list[str]:
    """The count, the ETA, then the stage's figures: the most telling first, so a narrow
    terminal cuts the least."""
    figures = [f"{st.done}/{st.total} {st.unit}".rstrip()] if st.total else []
    eta = st.eta()
    if eta is not None:
        figures.append(f"ETA {clock(eta)}")
    return [*figures, *st.figures()]


class PlainReporter:
    """Stages as whole lines on `stream`, for logs and CI (no carriage return, no colour)."""

    def __init__(self, stream: TextIO, log_records: bool = True) -> None:
        self.stream = stream
        # also the INFO records of the log file (not where the stream is that file already)
        self._log = progress.LogReporter() if log_records else None
        self._lock = threading.Lock()
        self._running: dict[int, tuple[Stage, float]] = {}  # id -> (stage, last line at)
        self._announced: set[int] = set()
        self._stop = threading.Event()
        self._ticker = threading.Thread(target=self._tick, name="progress-lines", daemon=True)
        self._ticker.start()

    def _line(self, text: str) -> None:
        with self._lock:
            self.stream.write(text + "\n")
            self.stream.flush()

    def begin(self, stage: Stage) -> None:
        self._running[id(stage)] = (stage, time.monotonic())
        if self._log:
            self._log.begin(stage)

    def update(self, stage: Stage) -> None:
        if self._log:
            self._log.update(stage)
        key = id(stage)
        if key in self._running and stage.total and 0 < stage.done < stage.total:
            self._running[key] = (stage, time.monotonic())
            self._announced.add(key)
            self._line(_stage_line(stage, None))

    def end(self, stage: Stage, ok: bool) -> None:
        self._running.pop(id(stage), None)
        self._line(_stage_line(stage, ok))
        if self._log:
            self._log.end(stage, ok)

    def warn(self, text: str) -> None:
        self._line(f"warning: {text}")

    def _tick(self) -> None:
        while not self._stop.wait(1.0):
            now = time.monotonic()
            for key, (stage, last) in list(self._running.items()):
                stage.figures()  # live figures sample as they are read (a rate's window)
                if key not in self._announced and stage.elapsed() >= QUIET_START_S:
                    self._announced.add(key)
                    self._running[key] = (stage, now)
                    self._line(_stage_line(stage, None))
                elif key in self._announced and now - last >= HEARTBEAT_S:
                    self._running[key] = (stage, now)
                    self._line(_stage_line(stage, None))

    def close(self) -> None:
        self._stop.set()


class LiveReporter:
    """One live line per stage on a terminal (rich), kept with its result when it ends."""

    def __init__(self, stream: TextIO) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, Progress, ProgressColumn, SpinnerColumn
        from rich.text import Text

        class Status(ProgressColumn):
            def __init__(self) -> None:
                super().__init__()
                self.spinner = SpinnerColumn("dots")

            def render(self, task):
                ok = task.fields.get("ok")
                if ok is None:
                    return self.spinner.render(task)
                return Text("✓", style="green") if ok else Text("✗", style="red")

        class Bar(BarColumn):
            def render(self, task):  # a bar only where the stage knows its size
                if not task.total or task.fields.get("ok") is not None:
                    return Text("")
                return super().render(task)

        class Figures(ProgressColumn):
            def render(self, task):
                st: Stage = task.fields["stage"]
                ok = task.fields.get("ok")
                if ok is None:
                    text = " · ".join(_running_figures(st))
                else:
                    text = st.result or ("done" if ok else "failed")
                return Text(text, no_wrap=True, overflow="ellipsis")

        class Elapsed(ProgressColumn):
            def render(self, task):
                st: Stage = task.fields["stage"]
                return Text(clock(st.elapsed()), style="dim")

        self.console = Console(file=stream, highlight=False, markup=False, emoji=False)
        self._text = Text
        self.progress = Progress(
            Status(),
            "{task.description}",
            Bar(bar_width=10),
            Figures(),
            Elapsed(),
            console=self.console,
            refresh_per_second=4,
            redirect_stdout=False,
            redirect_stderr=False,
        )
        self.progress.start()
        self._tasks: dict[int, object] = {}
        self._log = progress.LogReporter()

    def begin(self, stage: Stage) -> None:
        self._tasks[id(stage)] = self.progress.add_task(
            f"{stage.name:<10}", total=stage.total, stage=stage, ok=None
        )
        self._log.begin(stage)

    def update(self, stage: Stage) -> None:
        self._log.update(stage)
        task = self._tasks.get(id(stage))
        if task is not None:
            self.progress.update(task, completed=stage.done, total=stage.total)

    def end(self, stage: Stage, ok: bool) -> None:
        task = self._tasks.pop(id(stage), None)
        if task is not None:
            self.progress.update(task, ok=ok)
            self.progress.stop_task(task)
        self._log.end(stage, ok)

    def warn(self, text: str) -> None:
        self.console.print(self._text(f"warning: {text}", style="yellow"))

    def close(self) -> None:
        self.progress.stop()


class ConsoleWarnings(logging.Handler):
    """Warnings a person must act on, one line each on the console (no traceback): records at
    WARNING or above from CONSOLE_WARNING_LOGGERS, each message once."""

    def __init__(self, reporter: PlainReporter | LiveReporter) -> None:
        super().__init__(logging.WARNING)
        self.reporter = reporter
        self.shown: set[str] = set()

    def emit(self, record: logging.LogRecord) -> None:
        if not record.name.startswith(CONSOLE_WARNING_LOGGERS):
            return
        if record.name.startswith("prefect") and record.levelno != logging.WARNING:
            return  # the flow's failures: the command prints its own error line
        try:
            text = (record.getMessage().strip().splitlines() or [""])[0]
        except Exception:
            return
        if text and text not in self.shown:
            self.shown.add(text)
            self.reporter.warn(text)

    def seen(self, text: str) -> None:
        """A message the command printed itself: not again when the flow logs it."""
        self.shown.add(text)


class _Tee(threading.Thread):
    """Copies what the process and its children write to descriptors 1 and 2 (through one
    pipe) to the console and the log file (`-v`)."""

    def __init__(self, read_fd: int, console_fd: int, log_fd: int) -> None:
        super().__init__(name="console-tee", daemon=True)
        self.read_fd, self.console_fd, self.log_fd = read_fd, console_fd, log_fd

    def run(self) -> None:
        while chunk := os.read(self.read_fd, 65536):
            for fd in (self.console_fd, self.log_fd):
                with contextlib.suppress(OSError):
                    os.write(fd, chunk)


class RunConsole:
    """What `run_console` hands the command: print through it, warnings included."""

    def __init__(self, reporter: PlainReporter | LiveReporter, warnings: ConsoleWarnings | None):
        self.reporter = reporter
        self._warnings = warnings

    def warn(self, text: str) -> None:
        if self._warnings is not None:
            self._warnings.seen(text)
        self.reporter.warn(text)


def _console_stream(fd: int) -> TextIO:
    return io.TextIOWrapper(
        io.FileIO(fd, "w", closefd=True),
        encoding="utf-8",
        errors="backslashreplace",
        line_buffering=True,
        write_through=True,
    )


@contextlib.contextmanager
def run_console(log_path: Path, command: str, verbose: bool = False) -> Iterator[RunConsole]:
    """Run the block with the engines' output in `log_path` (appended) and the stages' lines
    on the console (see the module's docstring). Inside a harness that captures sys.stdout
    (tests, CliRunner) nothing is redirected: the stages print plain lines to sys.stderr."""
    verbose = verbose or VERBOSE
    own_streams = sys.stdout is sys.__stdout__ and sys.stderr is sys.__stderr__
    if not own_streams:
        reporter = PlainReporter(sys.stderr)
        try:
            with progress.use(reporter):
                yield RunConsole(reporter, None)
        finally:
            reporter.close()
        return

    global LOG_FILE
    log_path.parent.mkdir(parents=True, exist_ok=True)
    log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    LOG_FILE = log_path
    started = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    os.write(log_fd, f"\n==== {started} curriculum {command} (pid {os.getpid()})\n".encode())
    sys.stdout.flush()
    sys.stderr.flush()
    console_out = _console_stream(os.dup(1))
    console_err = _console_stream(os.dup(2))
    tee: _Tee | None = None
    if verbose:
        read_fd, write_fd = os.pipe()
        tee = _Tee(read_fd, console_err.fileno(), log_fd)
        tee.start()
        os.dup2(write_fd, 1)
        os.dup2(write_fd, 2)
        os.close(write_fd)
    else:
        os.dup2(log_fd, 1)
        os.dup2(log_fd, 2)
    logging.captureWarnings(True)  # torch / transformers warnings: a log record, not a print
    console_err.write(f"log: {shown_path(log_path)}\n")
    warnings: ConsoleWarnings | None = None
    if verbose:
        reporter: PlainReporter | LiveReporter = PlainReporter(sys.stderr, log_records=False)
    elif console_err.isatty() and os.environ.get("TERM") != "dumb":
        reporter = LiveReporter(console_err)
    else:
        reporter = PlainReporter(console_err)
    if not verbose:
        warnings = ConsoleWarnings(reporter)
        logging.getLogger().addHandler(warnings)
    try:
        with progress.use(reporter):
            yield RunConsole(reporter, warnings)
    finally:
        reporter.close()
        if warnings is not None:
            logging.getLogger().removeHandler(warnings)
        sys.stdout.flush()
        sys.stderr.flush()
        if tee is not None:
            # -v: the console again, and what is still in the pipe copied before the result;
            # an engine process that still holds the pipe keeps being copied while it runs.
            os.dup2(console_out.fileno(), 1)
            os.dup2(console_err.fileno(), 2)
            tee.join(timeout=2.0)
        else:
            # Descriptors 1 and 2 stay on the log until the process ends (the engines shut
            # down after the command's result and still log); what the command prints from
            # here on goes to the console through Python's own streams.
            sys.stdout, sys.stderr = console_out, console_err


def stage_log(root: Path, command: str) -> Path:
    """The log file of a stage command (`index build`, ...) under the store's root."""
    return root / "logs" / f"{command.replace(' ', '-')}.log"


def shown_path(path: Path) -> str:
    """A path as a person types it: relative to the working directory when inside it."""
    with contextlib.suppress(ValueError):
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    return str(path)


__all__ = [
    "VERBOSE",
    "LiveReporter",
    "PlainReporter",
    "RunConsole",
    "run_console",
    "shown_path",
    "stage_log",
]
