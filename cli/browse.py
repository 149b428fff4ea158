"""`curriculum browse`: the auditor's record browser over the catalog (pipeline/browse).

Registered in cli/main.py with `app.command("browse")(browse)`.
"""

from __future__ import annotations

import os
from typing import Annotated

import typer

from cli.common import ProfileOpt, SetOpt, config_or_fail, fail

TOKEN_ENV = "CURRICULUM_BROWSE_TOKEN"


def browse(
    profile: ProfileOpt = "configs/embedded.yaml",
    overrides: SetOpt = None,
    host: Annotated[
        str,
        typer.Option(help="Bind address: a loopback one unless --expose (then the token too)."),
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port (1 to 65535).")] = 8765,
    reviewer: Annotated[
        str, typer.Option(help="Reviewer name the forms start with (default: $USER).")
    ] = "",
    expose: Annotated[
        bool,
        typer.Option(
            "--expose",
            help=f"Allow a --host beyond this machine; every request must then carry the "
            f"access token in ${TOKEN_ENV} (a ?token= link, a cookie or a Bearer header).",
        ),
    ] = False,
) -> None:
    """Serve the runs, records and record pages, and record reviews (read-only otherwise).

    It answers requests addressed to its own names only (the loopback names and --host)."""
    from pipeline.browse.app import BindError, bind_socket, serve
    from pipeline.store.store import StoreError, check_catalog_file

    cfg = config_or_fail(profile, overrides)
    catalog = cfg.resolve_path(cfg.store.catalog)
    token = os.environ.get(TOKEN_ENV) or None
    try:
        sock = bind_socket(host, port, expose, token)  # checked before the catalog is read
    except BindError as exc:
        fail(str(exc), exc.hint)
    try:
        check_catalog_file(catalog)
    except StoreError as exc:
        fail(str(exc), "run `make demo` (or `curriculum nightly`) with the same profile first")
    shown = f"[{host}]" if ":" in host else host
    typer.echo(f"browsing {catalog} at http://{shown}:{port}/ (Ctrl-C stops)")
    if expose:
        typer.echo(f"every request needs the access token: open /?token=<${TOKEN_ENV}> first")
    serve(catalog, host, port, reviewer, expose, token, sock)
