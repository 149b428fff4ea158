"""One nightly run's shared state, built once when the run starts and handed to every stage.

Rather than each stage rebuilding it from the config — a `Store` per stage, the corpus hashed
by each stage that keys an artifact on it — the flow builds one `RunContext` (the typed config, the
run's one `Store`, its id, the corpus file hashed once) and each stage has one shape,
`stage(ctx, upstream handles) -> handle`, where a handle (IndexArtifacts, ExtractResult,
GenerationReport, RunSummary) carries what later stages need, so nothing is re-derived.

`choose_run` picks the run an invocation works on before its context is opened.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pipeline.core.config import PipelineConfig
from pipeline.core.identifiers import check_identifier
from pipeline.executors.base import Executor, LocalExecutor
from pipeline.retrieval.corpus import CorpusFile, locate_corpus
from pipeline.selector.run_plan import feedback_pending
from pipeline.store.runs import default_run_id
from pipeline.store.store import Store


@dataclass(frozen=True)
class RunContext:
    cfg: PipelineConfig
    store: Store
    run_id: str
    corpus: CorpusFile
    # Where the stages' shards run (generation, the index's embedding pass): chosen by the
    # caller from `executor:` (flows use pipeline.executors.open_executor, which closes it).
    executor: Executor = field(default_factory=LocalExecutor)

    @classmethod
    def open(
        cls,
        cfg: PipelineConfig,
        run_id: str,
        store: Store,
        executor: Executor | None = None,
    ) -> RunContext:
        """The context of run `run_id` on the run's one `store` (the flow opened it to choose
        the run); hashes the corpus (once for the whole run)."""
        return cls(cfg, store, run_id, locate_corpus(cfg), executor or LocalExecutor())

    @property
    def run_dir(self) -> Path:
        return self.store.run_dir(self.run_id)


@dataclass(frozen=True)
class RunChoice:
    """The run a nightly invocation works on; `resumed` is the unfinished run's record when
    the default picked one to resume."""

    run_id: str
    resumed: dict | None = None

    def message(self) -> str | None:
        r = self.resumed
        if r is None:
            return None
        return (
            f"resuming unfinished run {r['run_id']} (started {r['started_at']:%Y-%m-%d %H:%M} "
            f"UTC, {r['status']}, {r['shards_completed']}/{r['shards_planned']} shards); "
            "pass --run-id NAME for another run"
        )


def choose_run(store: Store, cfg: PipelineConfig, run_id: str | None = None) -> RunChoice:
    """The run to work on: `run_id` when given; else the latest run of this configuration
    (same config hash) if it did not complete or its selector feedback is pending, so a run
    that crashed before midnight resumes after it; else a new run named by today's date."""
    if run_id:
        return RunChoice(check_identifier(run_id, "run id"))
    latest = store.latest_run(cfg.config_hash())
    if latest is None:
        return RunChoice(default_run_id(cfg))
    if latest["status"] != "completed":
        return RunChoice(latest["run_id"], latest)
    # Generation marks a run completed; one killed before its selector feedback is not done.
    if feedback_pending(store, latest["run_id"]):
        return RunChoice(latest["run_id"], {**latest, "status": "generated, feedback pending"})
    return RunChoice(default_run_id(cfg))


__all__ = ["RunChoice", "RunContext", "choose_run"]
