"""`curriculum browse`: the auditor's record browser over the catalog (pipeline/browse).

Registered in cli/main.py with `app.command("browse")(browse)`.
"""

from __future__ import annotations

from typing import Annotated

import typer

from cli.common import ProfileOpt, SetOpt, config_or_fail, fail


def browse(
    profile: ProfileOpt = "configs/embedded.yaml",
    overrides: SetOpt = None,
    host: Annotated[
        str, typer.Option(help="Bind address; anything but 127.0.0.1 exposes reviews.")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port.")] = 8765,
    reviewer: Annotated[
        str, typer.Option(help="Reviewer name the forms start with (default: $USER).")
    ] = "",
) -> None:
    """Serve the runs, records and record pages, and record reviews (read-only otherwise)."""
    from pipeline.browse.app import serve
    from pipeline.store.store import StoreError, check_catalog_file

    cfg = config_or_fail(profile, overrides)
    catalog = cfg.resolve_path(cfg.store.catalog)
    try:
        check_catalog_file(catalog)
    except StoreError as exc:
        fail(str(exc), "run `make demo` (or `curriculum nightly`) with the same profile first")
    typer.echo(f"browsing {catalog} at http://{host}:{port}/ (Ctrl-C stops)")
    serve(catalog, host=host, port=port, reviewer=reviewer)
