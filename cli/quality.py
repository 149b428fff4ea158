"""`curriculum quality ...`: quality gates over the landed catalog.

`decontaminate` checks the records against benchmark files; `near-duplicates` clusters the
catalog's questions. Both check only the runs they have not checked before (with the same
benchmark file and settings), `--full` everything again; both write committed tables under
`<out>/quality/`, refresh the catalog and print what they found. Registered in cli/main.py
with `app.add_typer(quality_app, ...)`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from cli.common import ProfileOpt, SetOpt, config_or_fail, fail, stage_errors
from pipeline.core.config import PipelineConfig
from pipeline.core.display import display_text

quality_app = typer.Typer(
    help="Quality gates over the catalog: benchmark decontamination, near-duplicate questions.",
    no_args_is_help=True,
)

NoEmbeddingOpt = Annotated[
    bool,
    typer.Option(
        "--no-embedding", help="Lexical methods only: no embedder is loaded (quality.embedding)."
    ),
]
ShowOpt = Annotated[int, typer.Option("--show", min=0, help="Flagged records printed.")]
FullOpt = Annotated[
    bool,
    typer.Option(
        "--full",
        help="Recheck every record of the catalog, not only the runs no earlier check covered.",
    ),
]
_HINT = "run `curriculum nightly` (same --profile/--set) first, then rerun this command"


def _setup(profile: str, overrides: list[str] | None, no_embedding: bool):
    from pipeline.store.store import Store

    cfg = config_or_fail(profile, overrides)
    if no_embedding:
        cfg = cfg.model_copy(
            update={"quality": cfg.quality.model_copy(update={"embedding": False})}
        )
    return cfg, Store.from_config(cfg)


def _encoder(cfg: PipelineConfig):
    from pipeline.quality.checks import embedder_encode

    return embedder_encode(cfg) if cfg.quality.embedding else (None, None)


@quality_app.command("decontaminate")
def decontaminate_command(
    benchmark: Annotated[
        list[Path] | None,
        typer.Option(
            "--benchmark",
            "-b",
            help="Benchmark file (repeatable): FlashRAG/Search-R1 JSONL or JSONL/Parquet with "
            "a question field, .gz/.bz2/.zst ok. Default: quality.benchmarks.",
        ),
    ] = None,
    no_embedding: NoEmbeddingOpt = False,
    show: ShowOpt = 20,
    full: FullOpt = False,
    profile: ProfileOpt = "configs/embedded.yaml",
    overrides: SetOpt = None,
) -> None:
    """Check the landed records against benchmark files; flagged records leave exports.
    Runs already checked against the same file with the same settings are not read again."""
    from pipeline.quality.checks import decontaminate_catalog
    from pipeline.stages import refresh_catalog

    cfg, store = _setup(profile, overrides, no_embedding)
    paths = list(benchmark or []) or [cfg.resolve_path(p) for p in cfg.quality.benchmarks]
    if not paths:
        fail(
            "no benchmark file given",
            "pass --benchmark FILE (repeatable) or list files in quality.benchmarks",
        )
    with stage_errors(_HINT):
        encode, model = _encoder(cfg)
        results = decontaminate_catalog(cfg, store, paths, encode, model, full=full)
        catalog = refresh_catalog(cfg, store)
    q = cfg.quality
    typer.echo(
        f"methods: exact, {q.ngram_n}-gram containment >= {q.ngram_threshold}, answer+evidence"
        + (f", embedding cosine >= {q.embedding_threshold} ({model})" if encode else "")
    )
    for res in results:
        b = res.benchmark
        methods = ", ".join(f"{k} {v}" for k, v in res.by_method.items() if v)
        runs = len(res.runs_checked)
        typer.echo(
            f"{display_text(b.name)}: {len(b.items)} items; {res.records_flagged} "
            f"contaminated record(s); this check: {res.records_checked} record(s) of {runs} "
            f"run(s){' (all)' if res.full else ' (not checked before)'}, {len(res.flagged)} "
            "flagged" + (f" ({methods})" if methods else "")
        )
        for m in sorted(res.matches, key=lambda m: (m.record_id, -m.score))[:show]:
            typer.echo(
                f"  {display_text(m.record_id)}  {m.method:<15} {m.score:.3f}  item "
                f"{display_text(m.item_id)}: {display_text(m.benchmark_question[:80])}"
            )
        if len(res.matches) > show:
            typer.echo(f"  ... {len(res.matches) - show} more match(es)")
    typer.echo(f"catalog: {catalog}")
    typer.echo('  query it: curriculum sql "SELECT * FROM contamination"')
    typer.echo("  contaminated records are left out of `curriculum export` by default")


@quality_app.command("near-duplicates")
def near_duplicates_command(
    no_embedding: NoEmbeddingOpt = False,
    full: FullOpt = False,
    profile: ProfileOpt = "configs/embedded.yaml",
    overrides: SetOpt = None,
) -> None:
    """Cluster near-duplicate questions of the whole catalog (MinHash LSH + embedding). With
    MinHash alone, the questions of runs clustered before are not read again: a new run's
    are looked up against them. The embedding method reclusters everything."""
    from pipeline.quality.cluster_check import cluster_catalog
    from pipeline.stages import refresh_catalog

    cfg, store = _setup(profile, overrides, no_embedding)
    with stage_errors(_HINT):
        encode, model = _encoder(cfg)
        res = cluster_catalog(cfg, store, encode, full=full)
        catalog = refresh_catalog(cfg, store)
    q = cfg.quality
    new = "" if res.full else " new"
    typer.echo(
        f"{res.records} questions: {res.clusters} near-duplicate cluster(s), {res.duplicates} "
        f"record(s) beyond one per cluster (MinHash Jaccard >= {q.minhash_threshold}: "
        f"{res.edges['minhash']}{new} pair(s)"
        + (
            f"; cosine >= {q.duplicate_embedding_threshold} ({model}): "
            f"{res.edges['embedding']} pair(s))"
            if encode
            else ")"
        )
    )
    if res.full:
        typer.echo(f"  clustered all {res.checked} question(s) ({res.reason})")
    else:
        typer.echo(
            f"  added {res.checked} question(s) of runs not clustered before; "
            f"{res.changed} earlier question(s) had their cluster grow or merge"
        )
    typer.echo(f"catalog: {catalog}")
    typer.echo('  query it: curriculum sql "SELECT * FROM near_duplicates"')
    typer.echo("  `curriculum export` keeps the highest-V record of each cluster")


__all__ = ["quality_app"]
