"""Prefect flow for the land stage alone: rebuild the DuckDB catalog over every committed shard
and (re)write a run's report — after a manual fix, a schema-compatible upgrade of views.sql, or
a run whose report failed. The nightly flow runs the same two tasks at its end."""

from __future__ import annotations

from prefect import flow, get_run_logger

from flows.nightly import land_task
from flows.report import report_task
from pipeline.core.config import load_config
from pipeline.core.identifiers import check_identifier
from pipeline.retrieval.index_build import find_index
from pipeline.run_context import RunContext
from pipeline.stages import RunSummary, find_kg
from pipeline.store.store import Store


@flow(name="land", log_prints=True)
def land(
    profile: str = "configs/embedded.yaml",
    overrides: list[str] | None = None,
    run_id: str | None = None,
) -> RunSummary:
    """Refresh the catalog; report on `run_id` (default: the newest run in the store)."""
    if run_id is not None:
        check_identifier(run_id, "run id")
    cfg = load_config(profile, overrides or [])
    store = Store.from_config(cfg)
    run_id = run_id or store.latest_run_id()
    if run_id is None:
        raise ValueError(f"no runs under {store.root}; run the nightly flow first")
    ctx = RunContext.open(cfg, run_id, store)
    summary = land_task(ctx, find_index(cfg, ctx.corpus, store.root), find_kg(ctx))
    report = report_task(ctx)
    get_run_logger().info("catalog %s, report %s", summary.catalog, report.markdown_path)
    return summary
