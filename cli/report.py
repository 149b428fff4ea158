"""`curriculum report`: regenerate a landed run's Markdown + PNG report from the catalog.

Registered in cli/main.py with `app.command("report")(report)`.
"""

from __future__ import annotations

from typing import Annotated

import typer

from cli.common import ProfileOpt, SetOpt, config_or_fail, fail, identifier_or_fail


def report(
    run_id: Annotated[
        str | None,
        typer.Option("--run-id", help="Run to report on (default: the newest in the catalog)."),
    ] = None,
    profile: ProfileOpt = "configs/embedded.yaml",
    overrides: SetOpt = None,
) -> None:
    """Write runs/<run id>/report/ (report.md + PNG plots) for a landed run; print its path."""
    import duckdb

    from pipeline.catalog.report import known_run_ids, write_run_report
    from pipeline.store.store import Store, StoreError

    run_id = identifier_or_fail(run_id)
    cfg = config_or_fail(profile, overrides)
    catalog = cfg.resolve_path(cfg.store.catalog)
    try:
        known = known_run_ids(catalog)  # oldest first: the newest is the default
        run_id = run_id or (known[-1] if known else None)
    except StoreError as exc:
        hint = "run `make demo` (or `curriculum nightly`) with the same profile first"
        fail(str(exc), exc.hint or hint)
    except duckdb.IOException as exc:
        fail(f"cannot open the catalog {catalog}: {exc}", "is a nightly run landing right now?")
    if run_id is None:
        fail(f"no runs in the catalog {catalog}", "run `curriculum nightly` first")
    if run_id not in known:
        shown = ", ".join(known[-5:]) or "none"
        fail(
            f"run {run_id!r} is not in the catalog {catalog}",
            f"known runs (newest last): {shown}; a run appears once its land step has run",
        )
    rep = write_run_report(catalog, Store.from_config(cfg).run_dir(run_id), run_id)
    f = rep.funnel
    typer.echo(
        f"run {run_id} ({rep.status}): {f['generated']} generated, {f['valid']} valid, "
        f"{f['verbatim']} valid+verbatim, {f['above_v_threshold']} above the V threshold, "
        f"{f['accepted']} accepted"
    )
    typer.echo(f"run report: {rep.markdown_path}")
    typer.echo(f"  plots: {', '.join(p.name for p in rep.plots.values())} in {rep.dir}")
