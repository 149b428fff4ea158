"""`curriculum runs ...`: housekeeping of the store's runs (retention).

`prune` removes the runs older than a cutoff, or only their bulky columns; the library is
pipeline/catalog/retention.py. Registered in cli/main.py with `app.add_typer(runs_app, ...)`.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from pathlib import Path
from typing import Annotated

import typer

from cli.common import ProfileOpt, SetOpt, config_or_fail, fail, stage_errors
from pipeline.core.display import display_text

runs_app = typer.Typer(help="Housekeeping of the store's runs: retention.", no_args_is_help=True)

_HINT = "check the profile's store.out_dir, then rerun the same command"
# --keep-days at most a century: a cutoff the calendar can hold (800,000 days overflowed it).
MAX_KEEP_DAYS = 36_600
_APPLY_HINT = (
    "nothing is lost: rerun the same command to finish (runs already moved out wait in "
    "<out>/.trash/runs/, left out of the catalog, until their files are deleted)"
)


def _refresh(cfg, store) -> Path:
    """Rebuild the catalog the way landing does (compaction, catalog, sweep)."""
    from pipeline.stages import refresh_catalog

    return refresh_catalog(cfg, store)


def _size(n: int) -> str:
    for unit in ("bytes", "kB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1000
    raise AssertionError


@runs_app.command("prune")
def prune_command(
    keep_days: Annotated[
        int | None,
        typer.Option(
            "--keep-days",
            min=0,
            max=MAX_KEEP_DAYS,
            help="Keep the runs of the last N days: prune those dated before today (UTC) - N.",
        ),
    ] = None,
    before: Annotated[
        str | None,
        typer.Option("--before", help="Prune the runs dated before this day (YYYY-MM-DD)."),
    ] = None,
    bulky_only: Annotated[
        bool,
        typer.Option(
            "--bulky-only",
            help="Keep the runs' records, verdicts and facts; empty only their prompts, raw "
            "outputs and transcripts (NULL, or '' where the column may not be NULL).",
        ),
    ] = False,
    apply: Annotated[
        bool,
        typer.Option("--apply", help="Remove for real. Without it: a dry run, nothing changes."),
    ] = False,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Also prune runs an export manifest lists or the selector has not learned "
            "from yet (skipped by default, with the reason).",
        ),
    ] = False,
    exports: Annotated[
        list[Path] | None,
        typer.Option(
            "--exports",
            help="Also look for export manifests (manifest.json) under DIR (repeatable; "
            "<out>/exports/ is always looked at).",
        ),
    ] = None,
    profile: ProfileOpt = "configs/embedded.yaml",
    overrides: SetOpt = None,
) -> None:
    """Prune old runs: a dry run unless --apply.

    Selects the finished runs dated before the cutoff (--keep-days N or --before DATE), never
    the newest run and never an unfinished one. By default prints what it would remove (runs,
    files, bytes) and changes nothing; --apply removes each run whole (its shard files and
    runs/<id>/; a killed prune is finished by running it again), or with --bulky-only
    rewrites its compacted files with the bulky columns emptied. Runs an export's manifest
    lists, or whose records the selector has not learned from yet, are skipped with the
    reason unless --force. The catalog is then rebuilt the way landing does."""
    from pipeline.catalog.retention import apply_prune, bulky_fill, plan_prune
    from pipeline.core.io import utcnow
    from pipeline.core.run_control import RunInProgressError, store_run_lock
    from pipeline.store.store import Store

    if (keep_days is None) == (before is None):
        fail("give one of --keep-days N or --before YYYY-MM-DD", "e.g. --keep-days 90")
    if before is not None:
        try:
            cutoff = dt.date.fromisoformat(before)
        except ValueError:
            fail(f"--before {display_text(before)}: not a date", "write it as YYYY-MM-DD")
    else:
        cutoff = utcnow().date() - dt.timedelta(days=keep_days)
    for folder in exports or []:
        if not folder.is_dir():
            fail(f"--exports {display_text(str(folder))}: not a folder", "give a folder of exports")
    cfg = config_or_fail(profile, overrides)
    store = Store.from_config(cfg)
    try:
        # --apply plans under the store's run lock: no nightly lands a run in between
        with contextlib.ExitStack() as held:
            if apply:
                held.enter_context(store_run_lock(store.root, "runs-prune"))
            with stage_errors(_HINT):
                plan = plan_prune(
                    store, cutoff, bulky_only=bulky_only, force=force, export_dirs=exports or []
                )
            _show_plan(plan, apply)
            if not apply:
                return
            if not plan.pending:
                typer.echo("nothing to prune")
                return
            with stage_errors(_APPLY_HINT):
                res = apply_prune(store, plan, lambda: _refresh(cfg, store))
    except RunInProgressError as exc:
        fail(str(exc), "wait for it to finish and rerun")
    if res.finished:
        typer.echo(f"finished an earlier prune of: {', '.join(res.finished)}")
    verb = "slimmed" if bulky_only else "removed"
    typer.echo(
        f"{verb} {len(res.runs)} run(s){': ' + ', '.join(res.runs) if res.runs else ''}; "
        f"{res.files} file(s) deleted, {_size(res.bytes_freed)} freed"
    )
    if bulky_only and res.runs:
        cols = ", ".join(f"{t}.{c} -> {v}" for t, c, v in bulky_fill())
        typer.echo(f"  emptied: {cols}")
    if res.refreshed:
        typer.echo(f"catalog refreshed: {store.catalog_path}")


def _show_plan(plan, apply: bool) -> None:
    from pipeline.catalog.retention import TRASH_DIR

    mode = "bulky columns only" if plan.bulky_only else "whole runs"
    head = "pruning" if apply else "dry run (nothing changes; add --apply to act): would prune"
    typer.echo(
        f"{head} the runs dated before {plan.cutoff.isoformat()} ({mode}); the newest run "
        f"({plan.newest or 'none'}) is always kept"
    )
    for w in plan.warnings:
        typer.secho(f"warning: {display_text(w)}", fg="yellow", err=True)
    for run_id in plan.unfinished:
        typer.echo(f"  kept, not finished: {run_id}")
    for run_id in plan.already_slim:
        typer.echo(f"  kept, already slim: {run_id}")
    for c in plan.skipped:
        typer.echo(f"  skipped, still referenced (--force to prune it anyway): {c.run_id}")
        for why in c.references:
            typer.echo(f"    {display_text(why)}")
    sel = plan.selected
    files = sum(len(c.files) for c in sel)
    size = _size(sum(c.bytes for c in sel))
    if plan.bulky_only:
        verb = "slimming" if apply else "would slim"
        typer.echo(f"{verb} {len(sel)} run(s): {files} file(s) with bulky columns, about {size} "
                   "of them")  # fmt: skip
    else:
        verb = "removing" if apply else "would remove"
        typer.echo(f"{verb} {len(sel)} run(s): {files} file(s), {size}")
    for c in sel:
        note = "" if c.compacted or not plan.bulky_only else " (compacted first)"
        typer.echo(
            f"  {c.run_id}  {c.run_date.isoformat()}  {c.records} records  "
            f"{len(c.files)} files  {_size(c.bytes)}{note}"
        )
        for why in c.references:  # forced
            typer.echo(f"    referenced, pruned by --force: {display_text(why)}")
    if plan.leftover:
        typer.echo(
            f"an earlier prune was interrupted: {', '.join(plan.leftover)} wait(s) in "
            f"<out>/{TRASH_DIR}/ to be deleted; "
            + ("finishing it" if apply else "--apply finishes it")
        )


__all__ = ["runs_app"]
