"""One nightly run's shared state, built once when the run starts and handed to every stage.

Stages used to rebuild it from the config — a `Store` per stage, the corpus re-hashed by each
stage that keys an artifact on it. Now the flow builds one `RunContext` (the typed config, the
run's one `Store`, its id, the corpus file hashed once) and each stage has one shape,
`stage(ctx, upstream handles) -> handle`, where a handle (IndexArtifacts, ExtractResult,
GenerationReport, RunSummary) carries what later stages need, so nothing is re-derived.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pipeline.core.config import PipelineConfig
from pipeline.executors.base import Executor, LocalExecutor
from pipeline.retrieval.corpus import CorpusFile, locate_corpus
from pipeline.store.store import Store


@dataclass(frozen=True)
class RunContext:
    cfg: PipelineConfig
    store: Store
    run_id: str
    corpus: CorpusFile
    # Where the stages' shards run (generation, the index's embedding pass): chosen by the
    # caller from `executor:` (flows use pipeline.executors.make_executor).
    executor: Executor = field(default_factory=LocalExecutor)

    @classmethod
    def open(
        cls,
        cfg: PipelineConfig,
        run_id: str,
        store: Store | None = None,
        executor: Executor | None = None,
    ) -> RunContext:
        """The context of run `run_id`; hashes the corpus (once for the whole run)."""
        store = store or Store.from_config(cfg)
        return cls(cfg, store, run_id, locate_corpus(cfg), executor or LocalExecutor())

    @property
    def run_dir(self) -> Path:
        return self.store.run_dir(self.run_id)


__all__ = ["RunContext"]
