"""Shards on a Ray cluster: a pool of long-lived actors, each loading its step once.

The driver (this process) keeps the queue and receives every result, so the caller stays the
single writer of its manifest. A worker is given a unit only once its `setup()` has finished
(a worker that cannot be placed never holds a unit). A worker that dies — its process killed,
its node lost — fails its unit with an actor error: the unit goes back to the front of the
queue (up to `executor.max_unit_attempts` times), a replacement worker is started, and the
run completes on whoever is left. An exception raised by the step itself (bad input, a bug,
an LLM server that stayed down) is not retried here: it is re-raised in the driver as the
original exception, so the flow's retry rules and the CLI's error lines apply unchanged.
"""

from __future__ import annotations

import logging
import os
import time
from collections import Counter, deque
from collections.abc import Callable, Sequence
from typing import Any

from pipeline.core.config import ExecutorConfig
from pipeline.executors.base import (
    CLUSTER_HINT,
    ExecutorError,
    OnProgress,
    OnResult,
    Progress,
    ShardStep,
    Unit,
    WorkerStatus,
    check_address,
)

log = logging.getLogger(__name__)

# Environment every worker gets from the driver (offline hubs, quiet tokenizers), on top of
# whatever the node's `ray start` process had.
FORWARDED_ENV = (
    "HF_HUB_OFFLINE",
    "TRANSFORMERS_OFFLINE",
    "TOKENIZERS_PARALLELISM",
    "HF_HOME",
    "VLLM_CPU_KVCACHE_SPACE",
    "VLLM_LOGGING_STREAM",
)


class _Worker:
    """The actor: holds one step; `setup` once, then `run` per unit."""

    def __init__(self, step: ShardStep) -> None:
        self.step = step

    def setup(self) -> dict[str, Any]:
        import ray

        self.step.setup()
        return {"node": ray.util.get_node_ip_address(), "pid": os.getpid()}

    def run(self, unit: Any) -> Any:
        return self.step.run(unit)


def _requeue(unit: Unit, queue: deque[Unit], attempts: Counter[str], max_attempts: int) -> None:
    """A unit lost with its worker goes back to the front of the queue, up to `max_attempts`
    losses."""
    attempts[unit.name] += 1
    if attempts[unit.name] >= max_attempts:
        raise ExecutorError(
            f"unit {unit.name} was lost with its worker {attempts[unit.name]} times; giving up",
            hint="raise executor.max_unit_attempts, or look at why workers die (`ray status`, "
            "the raylet logs)",
        ) from None
    queue.appendleft(unit)
    log.warning("unit %s re-queued (attempt %d)", unit.name, attempts[unit.name] + 1)


class RayExecutor:
    kind = "ray"

    def __init__(self, cfg: ExecutorConfig, env: dict[str, str] | None = None) -> None:
        self.cfg = cfg
        self.env = {k: os.environ[k] for k in FORWARDED_ENV if k in os.environ} | (env or {})
        self._started_cluster = False

    # ---- the cluster ------------------------------------------------------------------
    def connect(self) -> None:
        import ray

        if ray.is_initialized():
            return
        check_address(self.cfg)
        address = self.cfg.address
        kwargs: dict[str, Any] = {
            "logging_level": logging.WARNING,
            "runtime_env": {"env_vars": self.env},
            "configure_logging": True,
        }
        try:
            if address:
                ray.init(address=address, **kwargs)
            else:
                # A new cluster of this machine for this run only ("local": never one found in
                # /tmp/ray, which may be a stopped cluster or somebody else's).
                ray.init(address="local", include_dashboard=False, **kwargs)
                self._started_cluster = True
        except (ConnectionError, RuntimeError) as exc:
            where = address or "a new local cluster"
            raise ExecutorError(f"cannot connect to Ray at {where}: {exc}", CLUSTER_HINT) from None
        log.info("Ray cluster: %s", ray.cluster_resources())

    def _check_resources(self) -> None:
        """Refuse at once a cluster that cannot hold the requested workers (instead of
        waiting forever for actors that cannot be placed)."""
        import ray

        have = ray.cluster_resources()
        c = self.cfg
        for res, per in (("GPU", c.num_gpus), ("CPU", c.num_cpus)):
            if per <= 0:
                continue
            total = have.get(res, 0.0)
            if total < per * c.workers:
                raise ExecutorError(
                    f"the Ray cluster has {total:g} {res}s; executor.workers={c.workers} × "
                    f"executor.num_{res.lower()}s={per:g} needs {per * c.workers:g}",
                    hint=f"lower executor.workers or executor.num_{res.lower()}s, or add "
                    f"nodes with {res}s (`ray start --address HEAD:PORT` on them)",
                )

    # ---- the work ---------------------------------------------------------------------
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
        import ray
        from ray.exceptions import RayActorError, RayTaskError, WorkerCrashedError

        self.connect()
        self._check_resources()
        c = self.cfg
        actor_cls = ray.remote(_Worker).options(
            num_cpus=c.num_cpus, num_gpus=c.num_gpus, max_restarts=0, max_task_retries=0
        )
        step_ref = ray.put(step)  # shipped once, shared by every worker
        queue: deque[Unit] = deque(units)
        attempts: Counter[str] = Counter()
        statuses: list[WorkerStatus] = []
        actors: dict[int, Any] = {}
        inflight: dict[Any, tuple[int, Unit | None]] = {}
        progress = Progress(len(units), 0, statuses)
        replacements = 0

        def report() -> None:
            if on_progress:
                on_progress(progress)

        def start_worker() -> None:
            wid = len(statuses)
            statuses.append(WorkerStatus(wid))
            actors[wid] = actor_cls.remote(step_ref)
            inflight[actors[wid].setup.remote()] = (wid, None)

        for _ in range(c.workers):
            start_worker()
        report()
        last_ready = time.monotonic()
        try:
            while queue or any(u is not None for _, u in inflight.values()):
                stopping = bool(should_stop and should_stop())
                if stopping and queue:
                    log.info("stop requested; %d units left undispatched", len(queue))
                    queue.clear()
                for st in statuses:
                    if st.state == "ready" and queue:
                        unit = queue.popleft()
                        st.state, st.unit, st.since = "running", unit.name, time.time()
                        inflight[actors[st.worker].run.remote(unit)] = (st.worker, unit)
                        report()
                if not any(u is not None for _, u in inflight.values()) and not queue:
                    break
                if not inflight:
                    raise ExecutorError(
                        f"every Ray worker died ({len(queue)} units left)",
                        hint="raise executor.max_replacements, or look at why workers die "
                        "(`ray status`, the raylet logs)",
                    )
                if not any(st.state in ("ready", "running") for st in statuses):
                    waited = time.monotonic() - last_ready
                    if waited > c.setup_timeout_s:
                        raise ExecutorError(
                            f"no Ray worker became ready in {waited:.0f} s "
                            f"({len(queue)} units waiting); each worker asks for "
                            f"{c.num_cpus:g} CPUs and {c.num_gpus:g} GPUs of "
                            f"{ray.available_resources()} available",
                            hint="raise executor.setup_timeout_s for slow model loads, or "
                            "check the cluster with `ray status`",
                        )
                else:
                    last_ready = time.monotonic()
                done, _ = ray.wait(list(inflight), num_returns=1, timeout=1.0)
                for ref in done:
                    wid, unit = inflight.pop(ref)
                    st = statuses[wid]
                    try:
                        result = ray.get(ref)
                    except (RayActorError, WorkerCrashedError) as exc:
                        st.state, st.unit = "dead", None
                        ray.kill(actors.pop(wid), no_restart=True)
                        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
                        log.warning("worker %d (node %s) died: %s", wid, st.node, first)
                        if unit is not None:
                            _requeue(unit, queue, attempts, c.max_unit_attempts)
                        if replacements < c.max_replacements:
                            replacements += 1
                            start_worker()
                        report()
                        continue
                    except RayTaskError as exc:
                        # The step raised: re-raise its own exception (with its attributes:
                        # hints, transient or not) in the driver.
                        cause = getattr(exc, "cause", None)
                        if isinstance(cause, BaseException):
                            raise cause from None
                        raise
                    if unit is None:
                        st.state, st.node, st.pid = "ready", result["node"], result["pid"]
                        log.info("worker %d ready on %s (pid %s)", wid, st.node, st.pid)
                    else:
                        st.state, st.unit = "ready", None
                        st.units_done += 1
                        progress.units_done += 1
                        on_result(unit, result, st)
                    report()
        finally:
            for actor in actors.values():
                ray.kill(actor, no_restart=True)
        return progress.units_done

    def close(self) -> None:
        if self._started_cluster:
            import ray

            ray.shutdown()
            self._started_cluster = False


__all__ = ["RayExecutor"]
