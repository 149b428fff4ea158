"""Where a stage's shards run, kept apart from what a shard does (datatrove's split).

A `ShardStep` transforms and counts: `setup()` loads what every shard needs (a generator, a
retriever, an embedder) once per worker, `run(unit)` does one independently restartable unit
of work and returns a small result (the files it wrote). An executor decides where steps run:
`LocalExecutor` in this process, one unit after another (the default); `RayExecutor` on
long-lived actors of a Ray cluster. Either way the caller receives every result in the
calling process and is the single writer of its manifest, so a unit is committed once, by
one process, whichever worker computed it.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from pipeline.core.config import ExecutorConfig, PipelineConfig
from pipeline.core.errors import HintedError

log = logging.getLogger(__name__)


@runtime_checkable
class ShardStep(Protocol):
    """A unit of work's code. Picklable (it travels to Ray workers before `setup`)."""

    def setup(self) -> None: ...

    def run(self, unit: Any) -> Any: ...

    def close(self) -> None: ...


class Unit(Protocol):
    name: str  # unique within one map (a shard name); used in logs, progress and errors


@dataclass
class WorkerStatus:
    """One worker as the progress snapshot shows it."""

    worker: int
    node: str | None = None
    pid: int | None = None
    state: str = "starting"  # starting | ready | running | dead
    unit: str | None = None  # the unit in flight
    units_done: int = 0
    since: float = field(default_factory=time.time)


@dataclass
class Progress:
    """What an executor reports while it runs (after every change of a worker's state)."""

    units_total: int
    units_done: int
    workers: list[WorkerStatus]

    def as_dict(self) -> dict[str, Any]:
        return {
            "units_total": self.units_total,
            "units_done": self.units_done,
            "workers": [
                {**vars(w), "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(w.since))}
                for w in self.workers
            ],
        }


OnResult = Callable[[Any, Any, WorkerStatus], None]
OnProgress = Callable[[Progress], None]


class ExecutorError(HintedError, RuntimeError):
    """The executor cannot run the work (cluster unreachable or too small, workers lost): one
    line and a hint on the command line (exit 2), never retried by the flow."""


class Executor(Protocol):
    kind: str

    def map(
        self,
        step: ShardStep,
        units: Sequence[Unit],
        on_result: OnResult,
        should_stop: Callable[[], bool] | None = None,
        on_progress: OnProgress | None = None,
    ) -> int:
        """Run `step` over `units`; call `on_result(unit, result, worker)` in this process as
        each finishes. Stops dispatching when `should_stop()` turns true (units in flight
        finish and are reported). Returns how many units were reported."""
        ...

    def close(self) -> None: ...


CLUSTER_HINT = (
    "start one with `ray start --head --port 6379` (and `ray start --address HEAD:6379` on "
    "the other machines), export the cluster's RAY_AUTH_TOKEN in this shell (Ray's token "
    "authentication is on by default), or leave executor.address unset to start a local "
    "cluster for this run"
)


def check_address(executor_cfg: ExecutorConfig) -> None:
    """Fail in a second when nothing listens at a `host:port` Ray address: `ray.init` would
    retry it for minutes, logging from C++, before failing. Callers run it before starting
    anything else (the nightly command: before Prefect)."""
    address = executor_cfg.address
    if executor_cfg.kind != "ray" or not address or address == "auto":
        return
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ExecutorError(f"executor.address {address!r} is not host:port or 'auto'")
    try:
        timeout = executor_cfg.connect_timeout_s
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            return
    except OSError as exc:
        why = exc.strerror or str(exc) or type(exc).__name__
        msg = f"cannot reach the Ray cluster at {address}: {why}"
        raise ExecutorError(msg, CLUSTER_HINT) from None


def this_worker() -> WorkerStatus:
    return WorkerStatus(0, node=socket.gethostname(), pid=os.getpid(), state="ready")


class LocalExecutor:
    """Everything in this process, one unit after another: today's behaviour."""

    kind = "local"

    def map(
        self,
        step: ShardStep,
        units: Sequence[Unit],
        on_result: OnResult,
        should_stop: Callable[[], bool] | None = None,
        on_progress: OnProgress | None = None,
    ) -> int:
        if not units:
            return 0
        worker = this_worker()
        progress = Progress(len(units), 0, [worker])
        step.setup()
        try:
            for unit in units:
                if should_stop and should_stop():
                    log.info("stop requested; %d units left", len(units) - progress.units_done)
                    break
                worker.state, worker.unit = "running", unit.name
                if on_progress:
                    on_progress(progress)
                result = step.run(unit)
                worker.state, worker.unit = "ready", None
                worker.units_done += 1
                progress.units_done += 1
                on_result(unit, result, worker)
                if on_progress:
                    on_progress(progress)
        finally:
            step.close()
        return progress.units_done

    def close(self) -> None:
        pass


def make_executor(executor_cfg: ExecutorConfig, env: dict[str, str] | None = None) -> Executor:
    """The configured executor (`executor.kind`); Ray is imported only when chosen."""
    if executor_cfg.kind == "local":
        return LocalExecutor()
    from pipeline.executors.ray_executor import RayExecutor

    return RayExecutor(executor_cfg, env=env)


@contextmanager
def open_executor(cfg: PipelineConfig) -> Iterator[Executor]:
    """The executor of `cfg.executor` for the body (a Ray cluster started for the run is shut
    down at the end; an existing one is left running)."""
    executor = make_executor(cfg.executor)
    try:
        yield executor
    finally:
        executor.close()


__all__ = [
    "CLUSTER_HINT",
    "Executor",
    "ExecutorError",
    "LocalExecutor",
    "Progress",
    "ShardStep",
    "Unit",
    "WorkerStatus",
    "check_address",
    "make_executor",
    "open_executor",
]
