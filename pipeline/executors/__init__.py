"""Executors: where a stage's shards run (this process, or a Ray cluster)."""

from pipeline.executors.base import (
    Executor,
    ExecutorError,
    LocalExecutor,
    Progress,
    ShardStep,
    WorkerStatus,
    make_executor,
    open_executor,
)

__all__ = [
    "Executor",
    "ExecutorError",
    "LocalExecutor",
    "Progress",
    "ShardStep",
    "WorkerStatus",
    "make_executor",
    "open_executor",
]
