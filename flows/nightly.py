"""The nightly Prefect flow: index -> kg -> generate (selector plan) -> feedback -> land
(-> quality, with quality.nightly) -> report.

Thin wiring over pipeline.stages; one nightly run is one self-evolution iteration.
"""

from __future__ import annotations

import dataclasses

from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE

from flows.report import report_task
from flows.retry import RETRY
from pipeline.core import progress
from pipeline.core.config import load_config
from pipeline.core.identifiers import check_identifier
from pipeline.core.run_control import StopRequest, store_run_lock
from pipeline.executors import open_executor
from pipeline.generation.run import GenerationReport
from pipeline.kg.extract import ExtractResult
from pipeline.llm import usage
from pipeline.retrieval.index_build import IndexArtifacts
from pipeline.run_context import RunContext, choose_run
from pipeline.stages import (
    RunSummary,
    TokenRate,
    feedback_stage,
    generate_stage,
    index_stage,
    kg_stage,
    land_stage,
    quality_stage,
)
from pipeline.store.store import Store, check_catalog_file


@task(name="index", **RETRY)
def index_task(ctx: RunContext) -> IndexArtifacts:
    with progress.stage("index") as st:
        art = index_stage(ctx)
        st.finish(f"{art.passages:,} passages, {'reused' if art.reused else 'built'}")
    get_run_logger().info(
        "index %s: %d passages (%s)",
        art.fingerprint,
        art.passages,
        "reused" if art.reused else "built",
    )
    return art


@task(name="kg", **RETRY)
def kg_task(ctx: RunContext, index: IndexArtifacts) -> ExtractResult | None:
    if not ctx.cfg.kg.nightly:
        return None
    with usage.metered() as meter, progress.stage("kg") as st:
        st.live = TokenRate(meter)
        res = kg_stage(ctx, index)
        if res is not None:
            how = "reused" if res.reused else "extracted"
            st.finish(f"{res.subgraphs} subgraphs from {res.seeds} seeds, {how}")
    if res is not None:
        get_run_logger().info(
            "kg: %d subgraphs (%s) at %s",
            res.subgraphs,
            "reused" if res.reused else "extracted",
            res.dir,
        )
    return res


@task(name="generate", **RETRY)
def generate_task(
    ctx: RunContext, index: IndexArtifacts, subgraphs: ExtractResult | None, stop: StopRequest
) -> GenerationReport:
    log = get_run_logger()
    report = generate_stage(
        ctx,
        index,
        subgraphs,
        on_shard=lambda s, n: log.info("shard %d/%d committed", s + 1, n),
        should_stop=stop.requested,
    )
    log.info(
        "generation: %d shards planned, %d already done, %d written now",
        report.shards_planned,
        report.shards_done_before,
        report.shards_written,
    )
    return report


@task(name="selector-feedback", cache_policy=NO_CACHE)
def feedback_task(ctx: RunContext, index: IndexArtifacts) -> bool:
    with progress.stage("feedback") as st:
        applied = feedback_stage(ctx, index)
        st.finish("selector updated" if applied else "nothing to feed back")
    get_run_logger().info(
        "selector: %s", "feedback applied" if applied else "nothing to apply (incomplete or done)"
    )
    return applied


@task(name="land", **RETRY)
def land_task(
    ctx: RunContext, index: IndexArtifacts, subgraphs: ExtractResult | None
) -> RunSummary:
    with progress.stage("landing") as st:
        summary = land_stage(ctx, index, subgraphs)
        st.finish(f"catalog of {summary.records} records, {summary.accepted} accepted")
    return summary


@task(name="quality", cache_policy=NO_CACHE)
def quality_task(
    ctx: RunContext, index: IndexArtifacts, subgraphs: ExtractResult | None
) -> RunSummary | None:
    if not ctx.cfg.quality.nightly:
        return None
    with progress.stage("quality") as st:
        summary = quality_stage(ctx, index, subgraphs)
        st.finish("benchmarks and near-duplicates checked, catalog refreshed")
    return summary


@flow(name="nightly", log_prints=True)
def nightly(
    profile: str = "configs/embedded.yaml",
    overrides: list[str] | None = None,
    run_id: str | None = None,
) -> RunSummary:
    """One self-evolution iteration on the configured corpus; rerun with the same id resumes
    (without one, the latest run of this configuration resumes if it did not complete).
    `run_id` may come from a deployment's parameters: it must be a name (the identifier rule),
    checked before anything is loaded or written."""
    if run_id is not None:
        check_identifier(run_id, "run id")
    cfg = load_config(profile, overrides or [])
    store = Store.from_config(cfg)  # the run's one Store, handed to every stage in ctx
    check_catalog_file(store.catalog_path, must_exist=False)  # before hours of work, not after
    choice = choose_run(store, cfg, run_id)
    stop = StopRequest()
    # One run per store at a time (fails fast naming the holder); signals ask for a clean stop.
    # The executor (executor.kind) runs the embedding and generation shards.
    with (
        store_run_lock(store.root, choice.run_id),
        stop.installed(),
        open_executor(cfg) as executor,
    ):
        if choice.message():
            get_run_logger().warning(choice.message())
        ctx = RunContext.open(cfg, choice.run_id, store, executor)
        log = get_run_logger()
        log.info(
            "run %s (profile %s, config %s, executor %s)",
            ctx.run_id, cfg.profile, cfg.config_hash(), executor.kind,
        )  # fmt: skip
        index = index_task(ctx)
        subgraphs = kg_task(ctx, index)
        generate_task(ctx, index, subgraphs, stop)
        feedback_task(ctx, index)
        summary = land_task(ctx, index, subgraphs)
        # The gates read the landed catalog; failing, they are logged, not a failed run.
        checked = quality_task(ctx, index, subgraphs, return_state=True)
        if checked.is_completed():
            summary = checked.result() or summary
        else:
            log.warning(
                "quality checks failed (%s); run them with `curriculum quality decontaminate` "
                "and `curriculum quality near-duplicates`",
                checked.message,
            )
        # The shards and catalog have landed; a failing report is logged, not a failed run.
        state = report_task(ctx, return_state=True)
        if state.is_completed():
            return dataclasses.replace(summary, report=state.result().markdown_path)
        get_run_logger().warning(
            "run report failed (%s); regenerate it with `curriculum report --run-id %s`",
            state.message,
            ctx.run_id,
        )
        return summary
