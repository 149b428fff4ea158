"""Every core this process may use goes to the LLM engine on CPU.

vLLM's CPU engine binds its worker's OpenMP threads with `VLLM_CPU_OMP_THREADS_BIND=auto`,
which keeps one core out of the binding for its scheduler and frontend: on a 2-core machine
the model computes on one core (`core ids=[0], reserved_cpus=[1]` in its log). Those two
processes mostly wait on the worker, so the cores of the process's affinity mask
(`os.sched_getaffinity`, which a container or `taskset` narrows) all go to the worker: the
embedded nightly's LLM steps took 143 s instead of 255 s on 2 cores. The user's own
`VLLM_CPU_OMP_THREADS_BIND` wins (`auto` restores vLLM's choice), then `llm.cpu_threads_bind`.
GPU engines are not touched. The transformers backend takes as many torch threads.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, MutableMapping

log = logging.getLogger(__name__)

BIND = "VLLM_CPU_OMP_THREADS_BIND"
_logged: set[str] = set()


def usable_cores() -> list[int]:
    """The CPU ids this process may run on, ascending."""
    return sorted(os.sched_getaffinity(0))


def core_list(cores: Iterable[int]) -> str:
    """`[0, 1, 2, 5]` -> "0-2,5" (the form vLLM's binding and `taskset -c` read)."""
    out: list[str] = []
    ids = sorted(set(cores))
    i = 0
    while i < len(ids):
        j = i
        while j + 1 < len(ids) and ids[j + 1] == ids[j] + 1:
            j += 1
        out.append(str(ids[i]) if i == j else f"{ids[i]}-{ids[j]}")
        i = j + 1
    return ",".join(out)


def split_cores(cores: list[int], parts: int) -> str:
    """`parts` contiguous, equal lists joined by "|": one per tensor-parallel worker, as
    vLLM's binding takes them (cores left over by an uneven split stay unbound)."""
    if parts < 1 or len(cores) < parts:
        raise ValueError(f"cannot give {parts} workers a core each from {len(cores)} cores")
    size = len(cores) // parts
    return "|".join(core_list(cores[k * size : (k + 1) * size]) for k in range(parts))


def vllm_cpu_env(
    configured: str | None = None,
    workers: int = 1,
    environ: MutableMapping[str, str] | None = None,
) -> dict[str, str]:
    """Set the CPU engine's thread binding in `environ` (default os.environ), before the
    engine starts; returns the settings it chose (empty when the environment decided).

    `configured` is `llm.cpu_threads_bind`: None binds every usable core, split over the
    `workers` (tensor-parallel size); "auto" leaves vLLM its own choice; anything else is
    vLLM's syntax ("0-3", "0-3|4-7"). An explicit `VLLM_CPU_OMP_THREADS_BIND` wins.
    """
    env = os.environ if environ is None else environ
    cores = usable_cores()
    chosen: dict[str, str] = {}
    if BIND in env:
        _log_once(f"{BIND}={env[BIND]!r} from the environment (of {core_list(cores)})")
    elif configured == "auto":
        _log_once(f"vLLM's own thread binding (llm.cpu_threads_bind: auto), of {core_list(cores)}")
    else:
        # An explicit list reserves no core (VLLM_CPU_NUM_OF_RESERVED_CPU counts only for
        # "auto"; setting it below 1 there draws a warning), so the list alone does it.
        chosen[BIND] = configured or split_cores(cores, workers)
        _log_once(
            f"vLLM CPU engine: OpenMP threads bound to cores {chosen[BIND]} of "
            f"{core_list(cores)} ({BIND}; set it, or llm.cpu_threads_bind, to change)"
        )
    # vLLM's engine core drops to one torch thread without it.
    if "OMP_NUM_THREADS" not in env:
        chosen["OMP_NUM_THREADS"] = str(len(cores))
    env.update(chosen)
    return chosen


def torch_threads() -> int:
    """The transformers backend's thread count: OMP_NUM_THREADS if set, else every usable
    core (2 OpenMP threads on a busy 2-core machine can be slower than 1: set it to 1)."""
    n = os.environ.get("OMP_NUM_THREADS")
    count = int(n) if n and n.isdigit() and int(n) > 0 else len(usable_cores())
    source = "OMP_NUM_THREADS" if n else f"cores {core_list(usable_cores())}"
    _log_once(f"transformers backend on CPU: {count} torch thread(s) ({source})")
    return count


def _log_once(message: str) -> None:
    if message not in _logged:
        _logged.add(message)
        log.info("%s", message)
