"""`curriculum kg ingest|extract|stats`: the knowledge-graph stage from the command line."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from cli.common import (
    ProfileOpt,
    SetOpt,
    VerboseOpt,
    config_or_fail,
    fail,
    stage_command,
    stage_errors,
)

# For bad input whose error carries no hint of its own (a missing or truncated dump);
# an error over kg.error_budget says to raise it itself.
HINT = "fix or replace the file named above (kg.dump_path) and rerun"

kg_app = typer.Typer(
    help="Wikidata dump -> entity/edge tables -> LLM-guided subgraphs.", no_args_is_help=True
)


@kg_app.command("ingest")
def ingest_command(
    profile: ProfileOpt = "configs/embedded.yaml",
    overrides: SetOpt = None,
    workers: Annotated[
        int | None, typer.Option("--workers", "-w", help="Worker processes (kg.workers).")
    ] = None,
) -> None:
    """Stream the dump (kg.dump_path) into entities / edges / rejects Parquet parts."""
    from pipeline.kg.extract import KGInputs
    from pipeline.kg.extract import ingest as run_ingest
    from pipeline.store.store import Store

    cfg = config_or_fail(profile, overrides)
    dump, root = KGInputs.from_config(cfg).dump, Store.from_config(cfg).root
    with stage_errors(HINT, "aborted: committed chunks are kept; rerun to resume"):
        rep = run_ingest(cfg, dump, root, workers)
    state = "unchanged, reused" if rep.reused else f"{rep.seconds:.1f}s"
    # One count of reject rows, the number the rejects table holds, with what makes it up.
    parts = [f"{rep.rejects} bad line(s)"]
    parts += [f"{rep.duplicates} duplicate entit(ies)"] if rep.duplicates else []
    parts += [f"{rep.repaired} repaired line(s), entity kept"] if rep.repaired else []
    typer.echo(
        f"{rep.source_file}: {rep.lines} lines -> {rep.items} items, {rep.properties} "
        f"properties, {rep.edges} truthy edges, {rep.reject_rows} rejects "
        f"({', '.join(parts)}) ({state})"
    )
    if rep.duplicates:
        typer.echo(f"  {rep.duplicates} later copies of an entity rejected (first copy kept)")
    if rep.not_enwiki:
        typer.echo(f"  {rep.not_enwiki} items without an enwiki sitelink left out (kg.enwiki_only)")
    for what, counts in (("skipped", rep.skipped), ("statements", rep.issues)):
        if counts:
            typer.echo(f"  {what}: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    typer.echo(f"  {rep.dir}")


@kg_app.command("extract")
def extract_command(
    profile: ProfileOpt = "configs/embedded.yaml",
    overrides: SetOpt = None,
    verbose: VerboseOpt = False,
) -> None:
    """Ingest if needed, then LLM-guided path expansion + distractors (a Prefect flow)."""
    cfg = config_or_fail(profile, overrides)
    from flows.extract_subgraphs import extract_subgraphs

    aborted = "aborted: committed work is kept; rerun to resume"
    with stage_command(cfg, "kg extract", verbose, HINT, aborted):
        res = extract_subgraphs(profile=profile, overrides=overrides or [])
    state = "unchanged, reused" if res.reused else "extracted"
    typer.echo(
        f"{res.subgraphs} subgraphs from {res.seeds} seeds ({res.rejected} seeds without one), "
        f"{state}"
    )
    typer.echo(f"  {res.subgraphs_path}")


@kg_app.command("stats")
def stats(
    profile: ProfileOpt = "configs/embedded.yaml",
    overrides: SetOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the raw statistics.")] = False,
) -> None:
    """Figure-5 style report: path lengths, answer types, relations, relations per subgraph."""
    from pipeline.kg.extract import KGNotReadyError, find_extract, format_stats
    from pipeline.retrieval.corpus import locate_corpus
    from pipeline.store.store import Store

    cfg = config_or_fail(profile, overrides)
    try:
        res = find_extract(cfg, locate_corpus(cfg), Store.from_config(cfg).root)
    except (KGNotReadyError, FileNotFoundError) as exc:
        fail(str(exc), "run `curriculum kg extract` with the same profile and --set flags")
    if as_json:
        typer.echo(json.dumps(res.stats, indent=2))
        return
    typer.echo(format_stats(res.stats))
    run = res.stats.get("run", {})
    if run:
        typer.echo(
            f"seeds {run.get('seeds')}, rejected {run.get('rejected')}, "
            f"{run.get('generate_calls')} generate calls ({run.get('prompts')} prompts, "
            f"{run.get('llm_seconds')}s in the LLM), model {run.get('model')}"
        )
