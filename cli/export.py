"""`curriculum export`: SQL-filtered train/validation datasets for RL trainers.

Kept apart from cli/main.py (which registers it with `app.command()(export)`) and light to
import: duckdb, pyarrow and datasets load only when the command runs.
"""

from __future__ import annotations

import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from cli.common import ProfileOpt, SetOpt, config_or_fail, fail, identifier_or_fail
from pipeline.core import variants
from pipeline.core.display import display_text

# The --format choices: the registry's names (pipeline/core/variants.py), in its order.
ExportFormat = StrEnum("ExportFormat", {n: n for n in variants.names("export format")})


class SplitBy(StrEnum):
    passage = "passage"
    cluster = "cluster"


def export_command(
    out: Annotated[Path, typer.Argument(help="Export directory to create (built beside it).")],
    where: Annotated[
        str,
        typer.Option(
            "--where",
            "-w",
            help="SQL boolean expression over the curriculum_verdicts view (default: the "
            "accepted records); '' exports every record. Records a reviewer rejected stay out "
            "whatever the filter.",
        ),
    ] = "accepted",
    run_ids: Annotated[
        list[str] | None,
        typer.Option("--run-id", "-r", help="Export only this run (repeatable; default all)."),
    ] = None,
    formats: Annotated[
        list[ExportFormat] | None,
        typer.Option(
            "--format",
            "-f",
            help=f"{' | '.join(ExportFormat)} (repeatable; default verl).",
        ),
    ] = None,
    validation_fraction: Annotated[
        float,
        typer.Option(
            "--validation-fraction", help="Share of passage groups for validation, in [0, 1)."
        ),
    ] = 0.1,
    split_by: Annotated[
        SplitBy,
        typer.Option(
            "--split-by",
            help="passage: records sharing a passage stay together; cluster: whole source "
            "clusters too.",
        ),
    ] = SplitBy.passage,
    seed: Annotated[int, typer.Option(help="Salt of the split hash.")] = 0,
    data_source: Annotated[
        str,
        typer.Option(help="verl data_source (selects the trainer's reward function)."),
    ] = "evidence_curriculum",
    overwrite: Annotated[
        bool, typer.Option("--overwrite", help="Replace an existing export at OUT.")
    ] = False,
    include_contaminated: Annotated[
        bool,
        typer.Option(
            "--include-contaminated",
            help="Keep records `curriculum quality decontaminate` flagged (left out by default).",
        ),
    ] = False,
    include_shortcuts: Annotated[
        bool,
        typer.Option(
            "--include-shortcuts",
            help="Keep multi-hop records a closed-book or one-search solver answers "
            "(gates.shortcut; left out by default).",
        ),
    ] = False,
    include_ambiguous: Annotated[
        bool,
        typer.Option(
            "--include-ambiguous",
            help="Keep records whose solver rollouts converge on several retrieved answers "
            "(gates.uniqueness; left out by default).",
        ),
    ] = False,
    include_undetermined: Annotated[
        bool,
        typer.Option(
            "--include-undetermined",
            help="Keep records the shortcut or uniqueness gate could not judge (no answer was "
            "correct even with the gold evidence; left out by default).",
        ),
    ] = False,
    reviewed_only: Annotated[
        bool,
        typer.Option(
            "--reviewed-only",
            help="Export only records whose latest review is accept, within the selection "
            "(the accepted records plus what --include-* adds, or --where's). Without it, "
            "only records whose latest review is reject are left out.",
        ),
    ] = False,
    profile: ProfileOpt = "configs/embedded.yaml",
    overrides: SetOpt = None,
) -> None:
    """Export curriculum records as train/validation datasets (verl Parquet, HF, JSONL).

    Questions are deduplicated by their normalised text and by near-duplicate cluster,
    records a benchmark check flagged or a reviewer rejected (`curriculum browse`; the latest
    review wins) are left out, and records sharing a passage never straddle the split;
    manifest.json in OUT lists runs, counts and file checksums, README.md is the dataset
    card."""
    run_ids = [identifier_or_fail(r) for r in run_ids or []]
    cfg = config_or_fail(profile, overrides)
    from pipeline.catalog.export import ExportError, export_curriculum

    catalog = cfg.resolve_path(cfg.store.catalog)
    try:
        res = export_curriculum(
            catalog,
            out,
            where=where,
            run_ids=run_ids or [],
            formats=[f.value for f in formats or [ExportFormat.verl]],
            validation_fraction=validation_fraction,
            split_by=split_by.value,
            seed=seed,
            data_source=data_source,
            overwrite=overwrite,
            argv=sys.argv,
            include_contaminated=include_contaminated,
            include_shortcuts=include_shortcuts,
            include_ambiguous=include_ambiguous,
            include_undetermined=include_undetermined,
            limits=cfg.sql,
            reviewed_only=reviewed_only,
        )
    except ExportError as exc:
        fail(str(exc), exc.hint)
    c, m = res.counts, res.manifest
    runs = ", ".join(display_text(r["run_id"]) for r in m["runs"])
    typer.echo(
        f"exported {c['exported']} of {c['selected']} selected records from {len(m['runs'])} "
        f"run(s) ({runs}): train {c['train']}, validation {c['validation']} "
        f"({m['split']['groups']['train']}/{m['split']['groups']['validation']} "
        f"{m['split']['by']} groups)"
    )
    typer.echo(
        f"  dropped: {c['duplicates_dropped']} duplicate question(s), "
        f"{c['near_duplicates_dropped']} near-duplicate(s), "
        f"{c['contaminated_dropped']} contaminated, {c['shortcuts_dropped']} shortcut(s), "
        f"{c['ambiguous_dropped']} ambiguous, {c['review_rejected']} rejected by review, "
        + (f"{c['not_reviewed']} not accepted by review, " if reviewed_only else "")
        + f"{c['no_question_or_answer']} without question/answer (listed in dropped.jsonl)"
    )
    for fmt in m["formats"]:
        paths = sorted({f["path"].split("/")[0] for f in m["files"] if f["format"] == fmt})
        typer.echo(f"  {fmt:5} {res.out / paths[0]}")
    typer.echo(f"  manifest {res.out / 'manifest.json'}")
    typer.echo(f"  card     {res.out / 'README.md'}")
    typer.echo(f"  reward   {res.out / 'reward.py'} (verl: compute_score, TRL: curriculum_reward)")
    for w in res.warnings:
        typer.secho(f"warning: {display_text(w)}", fg="yellow", err=True)
