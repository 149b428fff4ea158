"""`curriculum` command line: run the nightly flow, inspect config, query the catalog."""

from __future__ import annotations

import logging
import os
import sys
from typing import Annotated

import typer

from cli import console
from cli.audit import audit as audit_command
from cli.browse import browse as browse_command
from cli.common import (
    FormatOpt,
    LimitOpt,
    ProfileOpt,
    SetOpt,
    VerboseOpt,
    config_or_fail,
    fail,
    identifier_or_fail,
    quiet_input_tracebacks,
    sql_limits,
    stage_command,
    stage_errors,
)
from cli.console import run_console, shown_path
from cli.export import export_command
from cli.kg import kg_app
from cli.quality import quality_app
from cli.report import report as report_command
from cli.runs import runs_app
from cli.sql_output import Format, print_tables
from pipeline.core import progress
from pipeline.core.config import ConfigError, PipelineConfig, load_config
from pipeline.core.display import display_text
from pipeline.core.errors import BadInputError
from pipeline.executors.base import ExecutorError, check_address

app = typer.Typer(
    help="Evidence-verified curriculum pipeline for search agents.",
    no_args_is_help=True,
    # Errors are one line plus a hint (see run()); the traceback is behind --debug.
    pretty_exceptions_enable=False,
)
_DEBUG = False
config_app = typer.Typer(help="Show the resolved configuration.", no_args_is_help=True)
app.add_typer(config_app, name="config")
index_app = typer.Typer(help="Build, query and serve the passage index.", no_args_is_help=True)
app.add_typer(index_app, name="index")
selector_app = typer.Typer(help="Inspect the bandit source selector.", no_args_is_help=True)
app.add_typer(selector_app, name="selector")
app.add_typer(kg_app, name="kg", help="Wikidata dump ingest, subgraph extraction and stats.")
app.add_typer(quality_app, name="quality")
app.add_typer(runs_app, name="runs")
llm_app = typer.Typer(help="Serve the configured LLM.", no_args_is_help=True)
app.add_typer(llm_app, name="llm")


INPUT_HINT = "fix or replace the file named above (corpus.path / kg.dump_path) and rerun"
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_STOPPED = 3  # a run stopped on request; resume it with the same --run-id
EXIT_INTERRUPTED = 130


@app.callback()
def main(
    debug: Annotated[
        bool, typer.Option("--debug", help="Verbose logs, and full tracebacks on errors.")
    ] = False,
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose",
            "-v",
            help="Show the engines' own logs (vLLM, Prefect, torch) on the console too; they "
            "are in the run's log file either way.",
        ),
    ] = False,
) -> None:
    global _DEBUG
    _DEBUG = debug
    console.VERBOSE = verbose or debug
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    # The machines that run this have no route to Prefect's telemetry endpoint.
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    # Prefect's temporary API server gets 20 s to start by default; a loaded CI box or laptop
    # (model loading, other jobs) can need longer, and the nightly run should not fail on it.
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")
    logging.basicConfig(
        level=logging.DEBUG if debug else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if not debug:
        quiet_input_tracebacks()
        for noisy in ("httpx", "httpcore", "faiss.loader", "sentence_transformers"):
            logging.getLogger(noisy).setLevel(logging.WARNING)


@app.command("nightly")
def nightly_command(
    profile: ProfileOpt = "configs/embedded.yaml",
    overrides: SetOpt = None,
    run_id: Annotated[
        str | None,
        typer.Option(
            help="Name of the run (new or to resume). Default: resume the latest run of this "
            "configuration if it did not complete, else a new <date>-<profile>-<hash> run."
        ),
    ] = None,
    verbose: VerboseOpt = False,
) -> None:
    """Run the nightly flow (index, kg, selector plan, generate, feedback, land, report).

    The console shows one line per stage; the engines' logs go to runs/<run id>/nightly.log
    under the store (-v shows them too)."""
    run_id = identifier_or_fail(run_id)
    cfg = config_or_fail(profile, overrides)
    from pipeline.core.model_refs import check_model_refs
    from pipeline.core.run_control import RunInProgressError, store_run_lock
    from pipeline.run_context import choose_run
    from pipeline.store.store import Store, check_catalog_file

    try:
        check_model_refs(cfg)  # in seconds, not after the index is built
        check_catalog_file(cfg.resolve_path(cfg.store.catalog), must_exist=False)
        store = Store.from_config(cfg)
    except BadInputError as exc:
        fail(str(exc), exc.hint)
    choice = choose_run(store, cfg, run_id)
    run_id = choice.run_id
    try:
        # Fail in a second, before importing Prefect and starting its server; the flow then
        # holds the lock for the whole run.
        with store_run_lock(store.root, run_id):
            pass
        check_address(cfg.executor)  # a Ray cluster nobody runs at executor.address
        log_path = store.run_dir(run_id) / "nightly.log"
        with run_console(log_path, "nightly", verbose) as shown:
            if choice.message():  # only once the store is free: nothing resumes otherwise
                shown.warn(choice.message())
            progress.until_next("prefect", "flow run started")
            from flows.nightly import nightly as nightly_flow

            s = nightly_flow(profile=profile, overrides=overrides or [], run_id=run_id)
    except RunInProgressError as exc:
        fail(str(exc), "wait for it to finish (or stop it with Ctrl-C / SIGTERM) and rerun")
    except BadInputError as exc:
        fail(str(exc), exc.hint or INPUT_HINT)
    except ExecutorError as exc:
        fail(str(exc), exc.hint)
    except KeyboardInterrupt:
        typer.secho(
            "aborted: the shard in progress was discarded, committed shards are kept; resume "
            f"with: curriculum nightly --profile {profile} --run-id {run_id}",
            fg="yellow",
            err=True,
        )
        raise typer.Exit(EXIT_INTERRUPTED) from None
    print_summary(s, cfg, log_path)
    if s.status != "completed":
        typer.secho(
            f"run {s.run_id} {s.status} after {s.shards_completed}/{s.shards_planned} shards; "
            f"resume it with: curriculum nightly --profile {profile} --run-id {s.run_id}",
            fg="yellow",
            err=True,
        )
        raise typer.Exit(EXIT_STOPPED)


def print_summary(s, cfg: PipelineConfig, log_path) -> None:
    """The run's result and what to do next, the last lines of the console."""
    mean_v = "n/a" if s.mean_v is None else f"{s.mean_v:+.3f}"
    mean_r = "n/a" if s.mean_reward is None else f"{s.mean_reward:.3f}"
    typer.echo(
        f"\nrun {s.run_id}: {s.records} records, {s.valid} valid, {s.verbatim} valid+verbatim, "
        f"{s.accepted} accepted\n  mean V {mean_v}, mean proposer reward {mean_r}"
    )
    typer.echo(f"DuckDB catalog: {shown_path(s.catalog)}")
    if s.report:
        typer.echo(f"run report:     {shown_path(s.report)}")
    else:
        typer.echo(f"run report:     not written; try `curriculum report --run-id {s.run_id}`")
    typer.echo(f"log file:       {shown_path(log_path)}")
    typer.echo("next:")
    typer.echo('  .venv/bin/curriculum sql "SELECT * FROM funnel"   # query the catalog')
    typer.echo("  make browse                                      # read the records")
    typer.echo("  .venv/bin/curriculum export OUT_DIR              # the accepted records")


@app.command()
def sql(
    query: Annotated[str, typer.Argument(help="SQL to run against the catalog (read-only).")],
    fmt: FormatOpt = Format.table,
    limit: LimitOpt = None,
    profile: ProfileOpt = "configs/embedded.yaml",
    overrides: SetOpt = None,
) -> None:
    """Run read-only SQL against the DuckDB catalog and print the result.

    Each statement runs under the sql.* limits (time, memory, printed rows); a statement past
    one fails naming it, exit 2, as does a statement DuckDB rejects."""
    import duckdb

    from pipeline.catalog.bounded_sql import SQLLimitError
    from pipeline.catalog.readonly_sql import UnsafeSQLError, read_only_statements
    from pipeline.catalog.sql_worker import BoundedSQL
    from pipeline.core.errors import first_line
    from pipeline.store.store import StoreError

    cfg = config_or_fail(profile, overrides)
    limits = sql_limits(cfg, limit)
    try:
        statements = read_only_statements(query, where="query")
        session = BoundedSQL(cfg.resolve_path(cfg.store.catalog), limits)
    except UnsafeSQLError as exc:
        fail(first_line(exc), exc.hint)
    except StoreError as exc:
        fail(str(exc), exc.hint or "run `make demo` (or `curriculum nightly`) first")
    tables = []
    with session:
        for i, statement in enumerate(statements, 1):
            where = f"query: statement {i}"
            try:
                tables.append(session.fetch(f"statement {i}", statement, where=where))
            except (SQLLimitError, duckdb.Error) as exc:
                if tables:  # the statements before it keep their results
                    print_tables(tables, fmt)
                if isinstance(exc, SQLLimitError):
                    fail(str(exc), exc.hint)
                fail(f"{where}: {first_line(exc)}")  # the user's SQL, not a bug
    print_tables(tables, fmt)


def _retriever(cfg: PipelineConfig):
    from pipeline.retrieval.corpus import locate_corpus
    from pipeline.retrieval.embedding import Embedder
    from pipeline.retrieval.faiss_index import IndexMismatchError, Retriever
    from pipeline.retrieval.index_build import IndexNotBuiltError, find_index
    from pipeline.store.store import Store

    try:
        art = find_index(cfg, locate_corpus(cfg), Store.from_config(cfg).root)
        return Retriever(art.dir, Embedder.from_config(cfg), cfg.index.nprobe)
    except (IndexNotBuiltError, IndexMismatchError, FileNotFoundError, BadInputError) as exc:
        fail(str(exc), "run `curriculum index build` with the same profile and --set flags")


@index_app.command("build")
def index_build(
    profile: ProfileOpt = "configs/embedded.yaml",
    overrides: SetOpt = None,
    verbose: VerboseOpt = False,
) -> None:
    """Corpus -> passages table -> embedding shards -> FAISS index (a no-op if unchanged)."""
    cfg = config_or_fail(profile, overrides)
    from flows.build_index import build_index

    aborted = "aborted: nothing was marked complete; rerun to resume"
    with stage_command(cfg, "index build", verbose, INPUT_HINT, aborted):
        art = build_index(profile=profile, overrides=overrides or [])
    state = "unchanged, reused" if art.reused else f"built ({art.embedded_shards} shards embedded)"
    typer.echo(f"index {art.fingerprint}: {art.passages} passages, {state}")
    if art.rejected or art.repaired:
        fixed = ", ".join(f"{k} {v}" for k, v in sorted(art.repaired.items())) or "none"
        typer.echo(f"  corpus lines rejected {art.rejected}; kept after a fix-up: {fixed}")
    typer.echo(f"  {art.dir}")


@index_app.command("search")
def index_search(
    queries: Annotated[list[str], typer.Argument(help="One or more queries.")],
    k: Annotated[int, typer.Option("-k", help="Passages per query.")] = 3,
    profile: ProfileOpt = "configs/embedded.yaml",
    overrides: SetOpt = None,
) -> None:
    """Search the index and print the agent-facing `Doc i(Title: ...)` blocks with scores."""
    cfg = config_or_fail(profile, overrides)
    retriever = _retriever(cfg)
    for q, hits in zip(queries, retriever.search(queries, k), strict=True):
        typer.secho(f"> {display_text(q)}", bold=True)
        for i, h in enumerate(hits, 1):
            title, text, id_ = (display_text(v) for v in (h.title, h.text[:160], h.id))
            typer.echo(f"  {h.score:.4f}  Doc {i}(Title: {title}) {text}  [id {id_}]")


@index_app.command("serve")
def index_serve(
    profile: ProfileOpt = "configs/embedded.yaml",
    overrides: SetOpt = None,
    host: Annotated[str | None, typer.Option(help="Bind address (retrieval.host).")] = None,
    port: Annotated[int | None, typer.Option(help="Port (retrieval.port).")] = None,
) -> None:
    """Serve POST /retrieve (Search-R1 protocol) and GET /health over the index."""
    import uvicorn

    from pipeline.retrieval.server import create_retrieval_app

    cfg = config_or_fail(profile, overrides)
    r = cfg.retrieval
    app_ = create_retrieval_app(_retriever(cfg), r)
    uvicorn.run(app_, host=host or r.host, port=port or r.port, log_level="info")


@llm_app.command("serve")
def llm_serve(
    profile: ProfileOpt = "configs/embedded.yaml",
    overrides: SetOpt = None,
    host: Annotated[str, typer.Option(help="Bind address.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port.")] = 8001,
    name: Annotated[str | None, typer.Option(help="Model name clients send.")] = None,
) -> None:
    """Serve the configured model as an OpenAI-compatible completions API (/v1/completions).

    With llm.backend=vllm this becomes vLLM's own OpenAI server (`vllm serve`), started with
    the settings the offline engine would use. Point a trainer, or this pipeline with
    llm.backend=http, at http://HOST:PORT."""
    cfg = config_or_fail(profile, overrides)
    from pipeline.core.model_refs import check_model_refs

    with stage_errors("check the llm.* settings of the profile"):
        check_model_refs(cfg)
    if cfg.llm.backend == "vllm":
        import shlex

        from pipeline.llm.vllm_backend import default_cpu_threads, serve_command

        with stage_errors("check the llm.* settings of the profile"):
            cmd = serve_command(cfg, host, port, name)
        typer.echo(shlex.join(cmd), err=True)
        default_cpu_threads(cfg.llm.cpu_threads_bind, cfg.llm.tensor_parallel_size)
        os.execv(cmd[0], cmd)  # vLLM's server replaces this process (signals reach it)
    from pipeline.llm.openai_server import serve

    serve(cfg, host=host, port=port, served_model_name=name)


@app.command()
def cluster(
    profile: ProfileOpt = "configs/embedded.yaml",
    overrides: SetOpt = None,
    iteration: Annotated[
        int | None, typer.Option(help="Selector iteration (default: the next one).")
    ] = None,
    verbose: VerboseOpt = False,
) -> None:
    """Cluster the indexed corpus with mini-batch k-means for a selector iteration (K_t)."""
    cfg = config_or_fail(profile, overrides)
    from flows.cluster_corpus import cluster_corpus

    with stage_command(cfg, "cluster", verbose, INPUT_HINT):
        res = cluster_corpus(profile=profile, overrides=overrides or [], iteration=iteration)
    sizes = res.sizes()
    typer.echo(
        f"K={res.k} clusters over {res.n_rows} passages (sizes {sizes.min()}..{sizes.max()}); "
        f"inertia {res.inertia:.2f}\n  {res.dir}"
    )


@selector_app.command("show")
def selector_show(
    profile: ProfileOpt = "configs/embedded.yaml",
    overrides: SetOpt = None,
    iteration: Annotated[
        int | None, typer.Option(help="Saved iteration (default: the latest).")
    ] = None,
) -> None:
    """Print both bandits' arms after an iteration: pulls, mean reward and UCB score."""
    import numpy as np
    import pyarrow.parquet as pq

    from pipeline.selector import saved_iterations, ucb_scores
    from pipeline.selector.run_plan import selector_dirs
    from pipeline.selector.state import iteration_dir
    from pipeline.store.store import Store

    cfg = config_or_fail(profile, overrides)
    _, state_dir = selector_dirs(Store.from_config(cfg).root)
    saved = saved_iterations(state_dir)
    if not saved:
        fail(f"no selector state under {state_dir}", "run the nightly flow first")
    t = iteration if iteration is not None else saved[-1]
    if t not in saved:
        fail(f"iteration {t} was not saved; saved: {saved}")
    tbl = pq.read_table(iteration_dir(state_dir, t) / "selector_state.parquet").to_pylist()
    typer.echo(f"selector iteration {t} (saved: {saved}) at {state_dir}")
    for bandit in ("cluster", "task_type"):
        arms = [r for r in tbl if r["bandit"] == bandit]
        pulls = np.array([r["pulls"] for r in arms])
        sums = np.array([r["reward_sum"] for r in arms])
        ucb = ucb_scores(pulls, sums, cfg.selector.beta)
        typer.secho(f"\n{bandit} bandit ({len(arms)} arms)", bold=True)
        typer.echo(f"  {'arm':>14} {'pulls':>8} {'mean':>8} {'ucb':>8}")
        for r, u in zip(arms, ucb, strict=True):
            mean = r["reward_sum"] / max(r["pulls"], 1)
            arm = display_text(r["arm"])
            typer.echo(f"  {arm:>14} {r['pulls']:>8.0f} {mean:>8.3f} {u:>8.3f}")


@config_app.command("show")
def config_show(profile: ProfileOpt = "configs/embedded.yaml", overrides: SetOpt = None) -> None:
    """Print the resolved configuration and its hash."""
    try:
        cfg = load_config(profile, overrides or [])
    except ConfigError as exc:
        fail(str(exc))
    typer.echo(cfg.to_yaml())
    typer.echo(f"# config hash: {cfg.config_hash()}")


# Catalog commands, listed after the ones above in --help.
app.command("audit")(audit_command)
app.command("export")(export_command)
app.command("report")(report_command)
app.command("browse")(browse_command)


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


def run() -> None:
    """Console entry point: an unexpected error is one line plus a hint, unless --debug."""
    try:
        app()  # click handles usage errors, --help and typer.Exit itself
    except SystemExit as done:
        _exit(done.code)
    except Exception as exc:
        if _DEBUG:
            raise
        typer.secho(f"error: {_one_line(exc)}", fg="red", err=True)
        if console.LOG_FILE is not None:  # what the engines said is there
            typer.echo(f"log: {shown_path(console.LOG_FILE)}", err=True)
        typer.echo("hint: rerun with `curriculum --debug ...` for the full traceback", err=True)
        _exit(EXIT_FAILED)


def _exit(code: int | str | None) -> None:
    """End the process with `code` once its own cleanup has run: the vLLM engines this
    process started are stopped and the atexit handlers run (Prefect's temporary server
    stops), then the process exits without the interpreter's teardown of native modules,
    where a finished vLLM run sometimes aborted (SIGABRT, "terminate called without an
    active exception") and turned exit 0 or 3 into -6."""
    import atexit
    import os

    if "pipeline.llm.vllm_backend" in sys.modules:
        sys.modules["pipeline.llm.vllm_backend"].shutdown_engines()
    if isinstance(code, str):  # sys.exit("message"): the message on stderr, exit 1
        print(code, file=sys.stderr)
        code = 1
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code or 0)


if __name__ == "__main__":
    run()
