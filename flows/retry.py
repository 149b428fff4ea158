"""The one retry rule every Prefect task of this project uses (nightly and standalone flows).

Only transient failures (LLM server 5xx/429/timeouts, dropped connections) are retried: bad
configuration, bad input and bugs fail the same way again, and a retry would only delay the
one-line error by the back-off and print its traceback twice.
"""

from __future__ import annotations

from prefect.cache_policies import NO_CACHE

from pipeline.core.run_control import is_transient


def retry_transient(task, task_run, state) -> bool:
    """Prefect retry condition: only transient failures (see pipeline.core.run_control)."""
    return is_transient(state.data if isinstance(state.data, BaseException) else None)


# Every stage is idempotent (reuses what is finished, commits shards atomically), so a retry
# after a transient failure continues where the failed attempt stopped.
RETRY = {
    "retries": 2,
    "retry_delay_seconds": [30, 120],
    "retry_condition_fn": retry_transient,
    "cache_policy": NO_CACHE,
}

__all__ = ["RETRY", "retry_transient"]
