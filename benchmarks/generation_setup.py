"""What the generation benchmarks share: the engine on the embedded profile and a fixed set of
plan items (run them as scripts, so this module is importable from the benchmarks directory)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from pipeline.agents.prompts import FewShot, load_few_shot
from pipeline.core.config import PipelineConfig
from pipeline.generation.shards import GenerationContext
from pipeline.llm import make_generator
from pipeline.retrieval.corpus import locate_corpus
from pipeline.retrieval.embedding import Embedder
from pipeline.retrieval.faiss_index import Retriever
from pipeline.retrieval.index_build import ensure_index
from pipeline.selector.run_plan import PlanItem
from pipeline.store.store import Store

TASKS = ("factual", "comparison", "causal", "temporal", "aggregation")


@dataclass
class Engine:
    embedder: Embedder
    generator: object
    retriever: Retriever
    shots: list[FewShot]

    def context(self, cfg: PipelineConfig) -> GenerationContext:
        """A generation context for `cfg` (same model, index and few-shot examples)."""
        return GenerationContext(
            cfg, Store.from_config(cfg), self.generator, self.retriever, "bench",
            dt.date.today(), self.embedder.model_ref, list(self.shots),
        )  # fmt: skip


def load_engine(cfg: PipelineConfig) -> Engine:
    embedder = Embedder.from_config(cfg)
    root = Store.from_config(cfg).root
    art = ensure_index(cfg, embedder, progress=False, corpus=locate_corpus(cfg), out_dir=root)
    retriever = Retriever(art.dir, embedder, cfg.index.nprobe, threads=cfg.index.threads)
    shots = load_few_shot(cfg.resolve_path(cfg.generation.few_shot))
    return Engine(embedder, make_generator(cfg.llm), retriever, shots)


def plan_items(retriever: Retriever, n: int) -> list[PlanItem]:
    """n passages spread evenly over the corpus, cycling task types and 1-4 hops."""
    step = max(len(retriever.passages) // n, 1)
    rows = [i * step for i in range(n)]
    ids = [pid for pid, _, _ in retriever.passages.get(rows)]
    return [
        PlanItem(i, r, pid, 0, TASKS[i % len(TASKS)], 1 + i % 4)
        for i, (r, pid) in enumerate(zip(rows, ids, strict=True))
    ]
