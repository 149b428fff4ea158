"""Prefect flow for the export stage: trainers trigger it (UI, API or `prefect deployment run`)
to cut a dataset from the catalog; the manifest summary is published as an artifact."""

from __future__ import annotations

from prefect import flow, get_run_logger
from prefect.artifacts import create_markdown_artifact

from pipeline.catalog.export import DEFAULT_WHERE, export_curriculum
from pipeline.core.config import load_config


@flow(name="export", log_prints=True)
def export(
    out: str,
    profile: str = "configs/embedded.yaml",
    overrides: list[str] | None = None,
    where: str = DEFAULT_WHERE,
    run_ids: list[str] | None = None,
    formats: list[str] | None = None,
    validation_fraction: float = 0.1,
    split_by: str = "passage",
    overwrite: bool = False,
    include_contaminated: bool = False,
    include_shortcuts: bool = False,
    include_ambiguous: bool = False,
    include_undetermined: bool = False,
    reviewed_only: bool = False,
) -> str:
    """Filtered, deduplicated, leak-free train/validation export; returns the export dir."""
    cfg = load_config(profile, overrides or [])
    res = export_curriculum(
        cfg.resolve_path(cfg.store.catalog),
        cfg.resolve_path(out),
        where=where,
        run_ids=run_ids or [],
        formats=formats or ["verl"],
        validation_fraction=validation_fraction,
        split_by=split_by,
        overwrite=overwrite,
        limits=cfg.sql,
        include_contaminated=include_contaminated,
        include_shortcuts=include_shortcuts,
        include_ambiguous=include_ambiguous,
        include_undetermined=include_undetermined,
        reviewed_only=reviewed_only,
    )
    lines = [f"# Export {res.out}", "", f"filter: `{where}`", ""]
    lines += [f"- {k}: {v}" for k, v in res.counts.items()]
    lines += [f"- warning: {w}" for w in res.warnings]
    create_markdown_artifact(markdown="\n".join(lines), description=f"export to {res.out}")
    get_run_logger().info("export written to %s (%s)", res.out, res.counts)
    return str(res.out)
