"""The stages of a nightly run, one shape each: `stage(ctx, upstream handles) -> handle`.

Plain functions over a `RunContext` (pipeline/run_context.py), no orchestration: flows/ wires
them into Prefect tasks, and whatever runs them (a flow, a test, an executor) hands each stage
the handles of the stages before it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pyarrow.compute as pc

from pipeline.agents.properties import PROPERTIES
from pipeline.core import progress
from pipeline.core.config import PipelineConfig
from pipeline.core.errors import BadInputError
from pipeline.core.io import utcnow
from pipeline.generation.run import GenerationReport, GenerationStep, run_generation, shard_name
from pipeline.kg import extract as kg
from pipeline.llm import usage
from pipeline.retrieval.index_build import IndexArtifacts, ensure_index, find_index
from pipeline.run_context import RunContext
from pipeline.selector.run_plan import Plan, apply_feedback, load_plan, make_plan, selector_dirs
from pipeline.store.compaction import DERIVED_MACROS, compact_finished, sweep
from pipeline.store.runs import finish_run, start_run
from pipeline.store.store import Listed, Store, connect_readonly, macro_catalog

log = logging.getLogger(__name__)


def index_stage(ctx: RunContext, progress: bool = True) -> IndexArtifacts:
    """Build or reuse the index; the corpus lines it rejected are listed in this run's rejects."""
    art = ensure_index(
        ctx.cfg, progress=progress, corpus=ctx.corpus, out_dir=ctx.store.root, executor=ctx.executor
    )
    rejects = art.rejects()
    if rejects:
        rows = [{**r, "run_id": ctx.run_id} for r in rejects]
        ctx.store.commit_once("rejects", ctx.run_id, utcnow().date(), "corpus", rows)
    return art


def kg_stage(ctx: RunContext, index: IndexArtifacts) -> kg.ExtractResult | None:
    """Dump -> graph -> LLM-guided subgraphs (each reused when unchanged), if enabled; the
    corpus's passages are the index's passages table (not parsed again)."""
    if not ctx.cfg.kg.nightly:
        return None
    return kg.extract(ctx.cfg, ctx.corpus, ctx.store.root, index.passages_path)


def generate_stage(
    ctx: RunContext,
    index: IndexArtifacts,
    subgraphs: kg.ExtractResult | None,
    on_shard: Callable[[int, int], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> GenerationReport:
    """Draw (or reload) the run's plan from the selector and generate every missing shard on
    the run's executor (this process, or Ray workers that each load their models once)."""
    cfg, store, run_id = ctx.cfg, ctx.store, ctx.run_id
    n_shards = -(-cfg.generation.num_sources // cfg.generation.shard_size)
    record = start_run(store, cfg, run_id, n_shards)
    graphs = subgraphs.subgraphs_for_generation() if subgraphs is not None else []
    with progress.stage("clusters") as st:
        plan = make_plan(cfg, store, index.dir, run_id, graphs)
        k = len({item.cluster_id for item in plan.items})
        st.finish(f"{len(plan.items)} sources from {k} clusters (iteration {plan.iteration})")
    status = "failed"
    try:
        step = GenerationStep(
            cfg=cfg,
            store=store,
            run_id=run_id,
            run_date=record["run_date"],
            index_dir=index.dir,
            subgraphs={sg["subgraph_id"]: sg for sg in graphs},
            **generation_kg(cfg, subgraphs, graphs, plan),
        )
        with usage.metered() as meter, progress.stage("generation", n_shards, "shards") as st:
            watch = GenerationProgress(store, run_id, len(plan.items), cfg.generation.shard_size)
            st.live = TokenRate(meter)
            watch.show(st)

            def committed(shard: int, total: int) -> None:
                watch.committed(shard, st)
                if on_shard:
                    on_shard(shard, total)

            try:
                report = run_generation(step, plan, ctx.executor, committed, should_stop)
            except KeyboardInterrupt:
                status = "stopped"  # committed shards stay; the rest is redone on resume
                raise
            done = report.shards_done_before + report.shards_written
            status = "completed" if done == report.shards_planned else "stopped"
            st.finish(watch.result(status))
        return report
    finally:
        finish_run(store, record, status)


def generation_kg(
    cfg: PipelineConfig, subgraphs: kg.ExtractResult | None, graphs: list[dict], plan: Plan
) -> dict:
    """What the plan's slots need of the graph beyond their subgraphs, read once here: the
    facts of the entities the plan's passages are about (two-passage tasks), and descriptions
    that single out each path node or passage entity (obfuscated questions)."""
    if subgraphs is None:
        return {}
    facts = (
        subgraphs.entity_facts([it.passage_id for it in plan.items], PROPERTIES)
        if cfg.generation.two_passage
        else None
    )
    qids = {n["id"] for g in graphs for n in g["target_path"]["nodes"]}
    qids |= set(facts.by_passage.values()) if facts else set()
    share = cfg.generation.obfuscation_share
    return {"facts": facts, "descriptions": subgraphs.descriptions(qids) if share > 0 else {}}


class GenerationProgress:
    """What the generation line shows: shards and records committed, the records that pass
    the run's own gates so far (the `accepted` view's count before the checks across runs:
    contamination and duplicates) and the engine's generated tokens per second."""

    def __init__(self, store: Store, run_id: str, records: int, shard_size: int) -> None:
        self.store, self.run_id = store, run_id
        self.records, self.shard_size = records, shard_size
        names = {shard_name(s) for s in range(-(-records // shard_size))}
        self.done = sorted(int(n) for n in store.completed_shards(run_id, verify=False) & names)
        self.passing = passing_so_far(store, run_id) if self.done else None

    def _size(self, shard: int) -> int:
        return min(self.shard_size, self.records - shard * self.shard_size)

    def committed(self, shard: int, st: progress.Stage) -> None:
        self.done.append(shard)
        self.passing = passing_so_far(self.store, self.run_id)
        self.show(st)

    def show(self, st: progress.Stage) -> None:
        made = sum(self._size(s) for s in self.done)
        info = [f"{made}/{self.records} records"]
        if self.passing is not None:
            info.append(f"{self.passing} accepted so far")
        st.update(len(self.done), info)

    def result(self, status: str) -> str:
        made = sum(self._size(s) for s in self.done)
        passing = "" if self.passing is None else f", {self.passing} pass the run's gates"
        stopped = "" if status == "completed" else f" ({status})"
        return f"{made} records{passing}{stopped}"


class TokenRate:
    """A stage's live figure: the engine's generated tokens per second (a shard's steps hand
    their counts over as each step ends; shards on Ray workers report none here). The rate
    runs from the first count seen to the latest change, so neither loading the model nor the
    wait for the next step's count dilutes it; before a second count, the tokens so far."""

    def __init__(self, meter: usage.Meter) -> None:
        self.meter = meter
        self.first: tuple[float, int] | None = None  # (when, tokens) of the first count seen
        self.last: tuple[float, int] | None = None  # of the latest change

    def __call__(self) -> list[str]:
        n = self.meter.usage.generated_tokens or 0
        if not n:
            return []
        now = time.monotonic()
        if self.first is None:
            self.first = self.last = (now, n)
        elif self.last is not None and n != self.last[1]:
            self.last = (now, n)
        (t0, n0), (t1, n1) = self.first, self.last or self.first
        if t1 - t0 < 1:
            return [f"{n:,} tokens"]
        return [f"{(n1 - n0) / (t1 - t0):.0f} tok/s"]


def passing_so_far(store: Store, run_id: str) -> int:
    """Records of the run's committed shards that pass its own gates so far (valid, verbatim,
    V above the controls' bar, every generation gate), by views.sql's record_facts_of: what
    the `accepted` view will hold before contamination and duplicates are ruled out."""
    sources = ("curriculum", "control_scores")
    listing = [
        Listed(run_id, f["table"], store.root / f["path"], False, f["rows"])
        for entry in store.manifest(run_id).values()
        for f in entry["files"]
        if f["table"] in sources
    ]
    with duckdb.connect() as con:
        macro_catalog(con, listing, sources, DERIVED_MACROS)
        row = con.execute(
            "SELECT count(*) FROM record_facts_of('curriculum', 'control_scores') "
            "WHERE before_quality IS NULL AND gate_rejected_by IS NULL"
        ).fetchone()
    return int(row[0]) if row else 0


def feedback_stage(ctx: RunContext, index: IndexArtifacts) -> bool:
    """Once a run is complete, feed its records back into the selector (one iteration).

    Returns False when the run is not complete or its iteration was already applied.
    """
    store, run_id = ctx.store, ctx.run_id
    run = store.read_run(run_id)
    plan = load_plan(store, run_id)
    if run is None or plan is None or run["status"] != "completed":
        return False
    records = store.read_run_table(run_id, "curriculum").to_pylist()
    rollouts = store.read_run_table(run_id, "solver_rollouts")
    # R_sol = EM + λ_E·F1(ê, e) per rollout; normalised by its range in run_score.
    solver_mean = pc.mean(rollouts["solver_reward"]).as_py() if len(rollouts) else None
    return apply_feedback(ctx.cfg, store, index.dir, plan, records, solver_mean)


def find_kg(ctx: RunContext) -> kg.ExtractResult | None:
    """The finished KG extraction of this configuration, for commands that do not build it
    (None when the nightly does not run the KG stage or it has not run yet)."""
    if not ctx.cfg.kg.nightly:
        return None
    try:
        return kg.find_extract(ctx.cfg, ctx.corpus, ctx.store.root)
    except kg.KGNotReadyError:
        log.warning("no subgraphs extracted for this configuration")
        return None


def selector_artifacts(ctx: RunContext) -> dict[str, list[Path]]:
    """Selector files for the catalog: clusterings, per-iteration state and usage, run plans."""
    out = ctx.store.root
    clusters_dir, state_dir = selector_dirs(out)
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
    accepted: int  # view `accepted`: what the export ships by default
    mean_v: float | None
    mean_reward: float | None
    catalog: Path
    status: str = "completed"
    shards_completed: int = 0
    shards_planned: int = 0
    report: Path | None = None  # the run report's Markdown, once written


def land_stage(
    ctx: RunContext, index: IndexArtifacts, subgraphs: kg.ExtractResult | None
) -> RunSummary:
    """Compact the finished runs, refresh the DuckDB catalog over all committed shards, delete
    what the compactions replaced, and summarise this run."""
    store, run_id = ctx.store, ctx.run_id
    artifacts = {"passages": [index.passages_path], **selector_artifacts(ctx)}
    if subgraphs is not None:
        artifacts.update(subgraphs.catalog_files())
    compact_finished(store)
    catalog = store.refresh_catalog(artifacts)
    sweep(store)
    with connect_readonly(catalog) as con:
        row = con.execute(
            """
            SELECT count(*), count(*) FILTER (WHERE is_valid),
                   count(*) FILTER (WHERE is_valid AND is_verbatim),
                   count(*) FILTER (WHERE accepted),
                   avg(verifier_v), avg(proposer_reward)
            FROM curriculum_verdicts WHERE run_id = ?
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
        row[5],
        catalog,
        status=run.get("status", "unknown"),
        shards_completed=run.get("shards_completed") or 0,
        shards_planned=run.get("shards_planned") or 0,
    )


def quality_stage(
    ctx: RunContext, index: IndexArtifacts, subgraphs: kg.ExtractResult | None
) -> RunSummary | None:
    """With `quality.nightly`: check the catalog against `quality.benchmarks` and cluster
    near-duplicate questions, then refresh the catalog so the report and exports see them (the
    checks of `curriculum quality ...`): only the runs the checks have not seen (this night's)
    are read and compared, the earlier ones stay as they were checked (the embedding method of
    near-duplicates reclusters everything). None when the step is off."""
    cfg = ctx.cfg
    if not cfg.quality.nightly:
        return None
    from pipeline.quality.checks import decontaminate_catalog, embedder_encode
    from pipeline.quality.cluster_check import cluster_catalog

    encode, model = embedder_encode(cfg) if cfg.quality.embedding else (None, None)
    if cfg.quality.benchmarks:
        paths = [cfg.resolve_path(p) for p in cfg.quality.benchmarks]
        decontaminate_catalog(cfg, ctx.store, paths, encode, model)
    cluster_catalog(cfg, ctx.store, encode)
    return land_stage(ctx, index, subgraphs)


def refresh_catalog(cfg: PipelineConfig, store: Store) -> Path:
    """Land again, outside a nightly (after `curriculum quality ...` wrote its tables): rebuild
    the catalog the way landing does (passages, selector, KG files and the quality tables) for
    the latest run, so the views see the new tables at once."""
    run_id = store.latest_run_id()
    if run_id is None:
        raise BadInputError(f"no runs under {store.root}", "run `curriculum nightly` first")
    ctx = RunContext.open(cfg, run_id, store)
    return land_stage(ctx, find_index(cfg, ctx.corpus, store.root), find_kg(ctx)).catalog
