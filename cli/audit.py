"""`curriculum audit`: named audits and ad-hoc SQL files over the catalog, read-only.

curriculum audit --list                 the audits and what each checks
curriculum audit evidence [--run-id R]  one named audit; exit 1 when its rule fails
curriculum audit --sql checks.sql       an auditor's SELECT / EXPLAIN statements
"""

from __future__ import annotations

from typing import Annotated

import typer

from cli.common import (
    FormatOpt,
    LimitOpt,
    ProfileOpt,
    SetOpt,
    config_or_fail,
    fail,
    identifier_or_fail,
    sql_limits,
)
from cli.sql_output import Format, print_tables
from pipeline.core.display import display_text


def audit(
    name: Annotated[
        str | None,
        typer.Argument(help="Audit to run (see --list); `list` is the same as --list."),
    ] = None,
    list_: Annotated[bool, typer.Option("--list", help="List the audits and exit.")] = False,
    sql_file: Annotated[
        str | None,
        typer.Option("--sql", help="Run a SQL file of SELECT / EXPLAIN statements instead."),
    ] = None,
    run_id: Annotated[
        str | None, typer.Option("--run-id", help="Audit one run (default: all runs).")
    ] = None,
    fmt: FormatOpt = Format.table,
    limit: LimitOpt = None,
    profile: ProfileOpt = "configs/embedded.yaml",
    overrides: SetOpt = None,
) -> None:
    """Run a named audit or an ad-hoc SQL file against the catalog (read-only).

    Exit code 0 when the audit passes or only reports, 1 when its rule fails, 2 on an error
    (unknown audit or run, a statement that could write or fails, a query past an sql.*
    limit, no catalog)."""
    from pipeline.catalog.audit import (
        AuditError,
        SQLLimitError,
        list_audits,
        run_audit,
        run_sql_file,
    )
    from pipeline.catalog.readonly_sql import UnsafeSQLError
    from pipeline.core.errors import first_line
    from pipeline.store.store import StoreError

    if list_ or name == "list":
        if fmt is Format.table:
            width = max(len(n) for n, _ in list_audits())
            for n, desc in list_audits():
                typer.echo(f"{n:<{width}}  {desc}")
        else:
            from pipeline.catalog.audit import Table

            print_tables([Table("audits", ["name", "description"], list_audits())], fmt)
        return
    if (name is None) == (sql_file is None):
        fail(
            "give an audit name or --sql FILE (not both)",
            "curriculum audit --list shows the audits",
        )
    if sql_file is not None and run_id is not None:
        fail("--run-id applies to named audits", "filter on run_id inside the SQL file")
    run_id = identifier_or_fail(run_id)
    cfg = config_or_fail(profile, overrides)
    catalog = cfg.resolve_path(cfg.store.catalog)
    limits = sql_limits(cfg, limit)
    try:
        if sql_file is not None:
            print_tables(run_sql_file(catalog, sql_file, limits), fmt)
            return
        result = run_audit(catalog, name, run_id, limits)
    except (UnsafeSQLError, AuditError, SQLLimitError) as exc:  # DuckDB's: a caret display
        fail(first_line(exc), exc.hint)
    except StoreError as exc:
        fail(str(exc), exc.hint or "run `make demo` (or `curriculum nightly`) first")
    print_tables(result.tables, fmt)
    # Keep stdout clean for piping; the verdict goes to stderr there.
    if result.passed is not None:  # report-only audits have no verdict to print
        color = "green" if result.passed else "red"
        typer.secho(display_text(result.message), fg=color, err=fmt is not Format.table)
    raise typer.Exit(result.exit_code)


__all__ = ["Format", "audit"]
