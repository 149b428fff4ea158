"""What every `curriculum` sub-command shares: the --profile/--set options, the one-line
error with a hint, and loading the configuration with that error on a bad profile or key."""

from __future__ import annotations

from typing import Annotated, NoReturn

import typer

from pipeline.config import ConfigError, load_config

ProfileOpt = Annotated[
    str, typer.Option("--profile", "-p", help="YAML profile path or name under configs/.")
]
SetOpt = Annotated[
    list[str] | None,
    typer.Option("--set", "-s", help="Override one key, e.g. --set store.out_dir=/data/out."),
]

EXIT_USAGE = 2


def fail(msg: str, hint: str | None = None) -> NoReturn:
    """Bad usage or input: one red line, an optional hint, exit code 2."""
    typer.secho(f"error: {msg}", fg="red", err=True)
    if hint:
        typer.echo(f"hint: {hint}", err=True)
    raise typer.Exit(EXIT_USAGE)


def config_or_fail(profile: str, overrides: list[str] | None):
    try:
        return load_config(profile, overrides or [])
    except ConfigError as exc:
        fail(str(exc), "check the profile path and --set keys (curriculum config show)")


__all__ = ["EXIT_USAGE", "ProfileOpt", "SetOpt", "config_or_fail", "fail"]
