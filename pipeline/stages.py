"""Stage entry points the Prefect flows call: plain functions, no orchestration here."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pyarrow.compute as pc

from pipeline.catalog.runs import finish_run, start_run
from pipeline.catalog.store import Store, connect_readonly, utcnow
from pipeline.generation.shards import GenerationContext, GenerationReport, run_generation
from pipeline.kg import extract as kg
from pipeline.llm import make_generator
from pipeline.llm.cache import default_cache_path
from pipeline.llm.chat import make_renderer
from pipeline.retrieval.embedding import Embedder
from pipeline.retrieval.faiss_index import Retriever
from pipeline.retrieval.index_build import IndexArtifacts, ensure_index
from pipeline.selector.run_plan import apply_feedback, load_plan, make_plan, selector_dirs

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


def kg_stage(cfg) -> kg.ExtractResult | None:
    """Dump -> graph -> LLM-guided subgraphs (each reused when unchanged), if enabled."""
    if not cfg.kg.nightly:
        return None
    kg.ingest(cfg)
    return kg.extract(cfg)


def load_subgraphs(cfg) -> list[dict]:
    """The finished subgraphs for this configuration, ordered by node count (or none)."""
    if not cfg.kg.nightly:
        return []
    try:
        return kg.read_subgraphs(kg.find_extract(cfg)).to_pylist()
    except kg.KGNotReadyError:
        log.warning("no subgraphs extracted for this configuration; proposing without KG context")
        return []


def generate_stage(
    cfg,
    art: IndexArtifacts,
    run_id: str,
    on_shard: Callable[[int, int], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> GenerationReport:
    """Draw (or reload) the run's plan from the selector and generate every missing shard."""
    store = Store.from_config(cfg)
    n_shards = -(-cfg.generation.num_sources // cfg.generation.shard_size)
    record = start_run(store, cfg, run_id, n_shards)
    subgraphs = load_subgraphs(cfg)
    plan = make_plan(cfg, store, art.dir, run_id, subgraphs)
    status = "failed"
    try:
        embedder = Embedder.from_config(cfg)
        ctx = GenerationContext(
            cfg=cfg,
            store=store,
            generator=make_generator(cfg.llm, default_cache_path(cfg), cfg.seed),
            retriever=Retriever(art.dir, embedder, cfg.index.nprobe, threads=cfg.index.threads),
            run_id=run_id,
            run_date=record["run_date"],
            embedder_model=embedder.model_ref,
            subgraphs={sg["subgraph_id"]: sg for sg in subgraphs},
            render=make_renderer(cfg),
        )
        try:
            report = run_generation(ctx, plan, on_shard=on_shard, should_stop=should_stop)
        except KeyboardInterrupt:
            status = "stopped"  # committed shards stay; the rest is redone on resume
            raise
        done = report.shards_done_before + report.shards_written
        status = "completed" if done == report.shards_planned else "stopped"
        return report
    finally:
        finish_run(store, record, status)


def feedback_stage(cfg, art: IndexArtifacts, run_id: str) -> bool:
    """Once a run is complete, feed its records back into the selector (one iteration).

    Returns False when the run is not complete or its iteration was already applied.
    """
    store = Store.from_config(cfg)
    run = store.read_run(run_id)
    plan = load_plan(store, run_id)
    if run is None or plan is None or run["status"] != "completed":
        return False
    records = store.read_run_table(run_id, "curriculum").to_pylist()
    rollouts = store.read_run_table(run_id, "solver_rollouts")
    # R_sol = EM + λ_E·F1(ê, e) per rollout; normalised by its range in run_score.
    solver_mean = pc.mean(rollouts["solver_reward"]).as_py() if len(rollouts) else None
    return apply_feedback(cfg, art.dir, plan, records, solver_mean)


def selector_artifacts(cfg) -> dict[str, list[Path]]:
    """Selector files for the catalog: clusterings, per-iteration state and usage, run plans."""
    clusters_dir, state_dir = selector_dirs(cfg)
    out = cfg.resolve_path(cfg.store.out_dir)
    return {
        "clusters": sorted(clusters_dir.glob("*/clusters.parquet")),
        "selector_state": sorted(state_dir.glob("iteration=*/selector_state.parquet")),
        "selector_usage": sorted(state_dir.glob("iteration=*/selector_usage.parquet")),
        "run_plan": sorted((out / "runs").glob("*/plan.parquet")),
    }


@dataclass
class RunSummary:
    run_id: str
    records: int
    valid: int
    verbatim: int
    mean_v: float | None
    mean_reward: float | None
    catalog: Path
    status: str = "completed"
    shards_completed: int = 0
    shards_planned: int = 0
    report: Path | None = None  # the run report's Markdown, once written


def land_stage(cfg, art: IndexArtifacts, run_id: str) -> RunSummary:
    """Refresh the DuckDB catalog over all committed shards and summarise this run."""
    store = Store.from_config(cfg)
    artifacts = {"passages": [art.passages_path], **selector_artifacts(cfg)}
    if cfg.kg.nightly:
        with contextlib.suppress(kg.KGNotReadyError):  # kg stage not run for this config
            artifacts.update(kg.artifacts(cfg))
    catalog = store.refresh_catalog(artifacts)
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
    run = store.read_run(run_id) or {}
    return RunSummary(
        run_id,
        row[0],
        row[1],
        row[2],
        row[3],
        row[4],
        catalog,
        status=run.get("status", "unknown"),
        shards_completed=run.get("shards_completed") or 0,
        shards_planned=run.get("shards_planned") or 0,
    )
