"""Stage entry points the Prefect flows call: plain functions, no orchestration here."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pipeline.embedding import Embedder
from pipeline.generation import GenerationContext, GenerationReport, run_generation
from pipeline.index import Retriever
from pipeline.index_build import IndexArtifacts, ensure_index
from pipeline.llm import make_generator
from pipeline.runs import finish_run, start_run
from pipeline.store import Store, connect_readonly, utcnow

log = logging.getLogger(__name__)


def index_stage(cfg, run_id: str, progress: bool = True) -> IndexArtifacts:
    """Build or reuse the index; the corpus lines it rejected are listed in this run's rejects."""
    art = ensure_index(cfg, progress=progress)
    rejects = art.rejects()
    store = Store.from_config(cfg)
    if rejects and "corpus" not in store.completed_shards(run_id, verify=False):
        rows = [{**r, "run_id": run_id} for r in rejects]
        f = store.write_shard("rejects", run_id, utcnow().date(), "corpus", rows)
        store.commit(run_id, "corpus", [f])
    return art


def generate_stage(
    cfg,
    art: IndexArtifacts,
    run_id: str,
    on_shard: Callable[[int, int], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> GenerationReport:
    store = Store.from_config(cfg)
    n_shards = -(-cfg.generation.num_sources // cfg.generation.shard_size)
    record = start_run(store, cfg, run_id, n_shards)
    status = "failed"
    try:
        embedder = Embedder.from_config(cfg)
        ctx = GenerationContext(
            cfg=cfg,
            store=store,
            generator=make_generator(cfg.llm),
            retriever=Retriever(art.dir, embedder, cfg.index.nprobe, threads=cfg.index.threads),
            run_id=run_id,
            run_date=record["run_date"],
            embedder_model=embedder.model_ref,
        )
        try:
            report = run_generation(ctx, on_shard=on_shard, should_stop=should_stop)
        except KeyboardInterrupt:
            status = "stopped"  # committed shards stay; the rest is redone on resume
            raise
        done = report.shards_done_before + report.shards_written
        status = "completed" if done == report.shards_planned else "stopped"
        return report
    finally:
        finish_run(store, record, status)


@dataclass
class RunSummary:
    run_id: str
    records: int
    valid: int
    verbatim: int
    mean_v: float | None
    mean_reward: float | None
    catalog: Path


def land_stage(cfg, art: IndexArtifacts, run_id: str) -> RunSummary:
    """Refresh the DuckDB catalog over all committed shards and summarise this run."""
    store = Store.from_config(cfg)
    catalog = store.refresh_catalog({"passages": [art.passages_path]})
    with connect_readonly(catalog) as con:
        row = con.execute(
            """
            SELECT count(*), count(*) FILTER (WHERE is_valid),
                   count(*) FILTER (WHERE is_valid AND is_verbatim),
                   avg(verifier_v), avg(proposer_reward)
            FROM curriculum WHERE run_id = ?
            """,
            [run_id],
        ).fetchone()
    return RunSummary(run_id, row[0], row[1], row[2], row[3], row[4], catalog)
