"""What every `curriculum` sub-command shares: the --profile/--set options, the one-line
error with a hint, loading the configuration with that error on a bad profile or key, and the
exit codes of stage commands (0 done, 1 unexpected error, 2 bad usage or input, 130 aborted)."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import Annotated, NoReturn

import typer

from cli.console import run_console, stage_log
from cli.sql_output import Format
from pipeline.core import progress
from pipeline.core.config import ConfigError, PipelineConfig, load_config
from pipeline.core.errors import BadInputError
from pipeline.core.identifiers import BadIdentifierError, check_identifier
from pipeline.executors.base import ExecutorError

ProfileOpt = Annotated[
    str, typer.Option("--profile", "-p", help="YAML profile path or name under configs/.")
]
SetOpt = Annotated[
    list[str] | None,
    typer.Option("--set", "-s", help="Override one key, e.g. --set store.out_dir=/data/out."),
]
VerboseOpt = Annotated[
    bool,
    typer.Option(
        "--verbose",
        "-v",
        help="Show the engines' own logs (vLLM, Prefect, torch) on the console too; they are "
        "in the log file either way.",
    ),
]
LimitOpt = Annotated[
    int | None,
    typer.Option(
        "--limit", min=1, max=1_000_000, help="Rows printed per query (default: sql.max_rows)."
    ),
]
FormatOpt = Annotated[
    Format, typer.Option("--format", "-f", help="table, or csv / json for piping.")
]

EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


def fail(msg: str, hint: str | None = None) -> NoReturn:
    """Bad usage or input: one red line, an optional hint, exit code 2."""
    typer.secho(f"error: {msg}", fg="red", err=True)
    if hint:
        typer.echo(f"hint: {hint}", err=True)
    raise typer.Exit(EXIT_USAGE)


def identifier_or_fail(value: str | None, what: str = "run id") -> str | None:
    """A run id (or other name that becomes a path) from the command line: the identifier
    rule (pipeline.core.identifiers) or one line and exit 2; None passes."""
    if value is None:
        return None
    try:
        return check_identifier(value, what)
    except BadIdentifierError as exc:
        fail(str(exc), exc.hint)


def sql_limits(cfg: PipelineConfig, limit: int | None):
    """The `sql:` limits of a catalog query command, with --limit over sql.max_rows."""
    return cfg.sql if limit is None else cfg.sql.model_copy(update={"max_rows": limit})


def config_or_fail(profile: str, overrides: list[str] | None):
    try:
        return load_config(profile, overrides or [])
    except ConfigError as exc:
        fail(str(exc), "check the profile path and --set keys (curriculum config show)")


@contextlib.contextmanager
def stage_errors(hint: str, aborted: str = "aborted") -> Iterator[None]:
    """Run a stage command's body with the documented exit codes: bad input (BadInputError: a
    corpus or dump line, a truncated or mislabelled file) is one line and exit 2, Ctrl-C is
    exit 130; anything else reaches the console entry point (one line, exit 1). `hint` is
    for errors that carry none of their own."""
    try:
        yield
    except BadInputError as exc:
        fail(str(exc), exc.hint or hint)
    except ExecutorError as exc:
        fail(str(exc), exc.hint)
    except KeyboardInterrupt:
        typer.secho(aborted, fg="yellow", err=True)
        raise typer.Exit(EXIT_INTERRUPTED) from None


@contextlib.contextmanager
def stage_command(
    cfg: PipelineConfig, command: str, verbose: bool, hint: str, aborted: str = "aborted"
) -> Iterator[None]:
    """The body of a stage command (`index build`, `kg extract`, `cluster`): its errors as
    `stage_errors` reports them, the engines' output in the store's log of the command, and
    one console line per stage, the Prefect flow's first."""
    log_path = stage_log(cfg.resolve_path(cfg.store.out_dir), command)
    with stage_errors(hint, aborted), run_console(log_path, command, verbose):
        progress.until_next("prefect", "flow run started")
        yield


def quiet_input_tracebacks() -> None:
    """Log records about bad input or an unusable Ray cluster lose their traceback (Prefect
    logs one per failed task and flow); the CLI prints the error itself as one line.
    `--debug` does not call this."""
    base = logging.getLogRecordFactory()

    def factory(*args, **kwargs) -> logging.LogRecord:
        record = base(*args, **kwargs)
        if record.exc_info and isinstance(record.exc_info[1], BadInputError | ExecutorError):
            record.exc_info = None
        return record

    logging.setLogRecordFactory(factory)


__all__ = [
    "EXIT_INTERRUPTED",
    "EXIT_USAGE",
    "FormatOpt",
    "LimitOpt",
    "ProfileOpt",
    "SetOpt",
    "VerboseOpt",
    "config_or_fail",
    "fail",
    "identifier_or_fail",
    "quiet_input_tracebacks",
    "sql_limits",
    "stage_errors",
]
