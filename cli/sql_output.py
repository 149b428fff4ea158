"""Printing query results for `curriculum sql` and `curriculum audit`: a table for people,
csv / json for pipes, and a note on stderr when a result was cut at its row limit."""

from __future__ import annotations

import csv
import io
import sys
from enum import StrEnum
from typing import TYPE_CHECKING, Any

import typer

if TYPE_CHECKING:  # the CLI imports this module at start-up; duckdb loads on first query
    from pipeline.catalog.bounded_sql import Table


class Format(StrEnum):
    table = "table"
    csv = "csv"
    json = "json"


def _cell(v: Any) -> str:
    return "NULL" if v is None else str(v)


def print_tables(tables: list[Table], fmt: Format) -> None:
    """Print every table in `fmt`; truncation is noted on stderr, so pipes get only data."""
    _print(tables, fmt)
    for t in tables:
        if t.truncated:
            typer.secho(
                f"note: {t.title}: showing the first {len(t.rows)} rows; the query returned "
                "more (raise --limit or sql.max_rows, or narrow the query)",
                fg="yellow",
                err=True,
            )


def _print(tables: list[Table], fmt: Format) -> None:
    if fmt is Format.json:
        import orjson

        doc = [
            {"title": t.title, "columns": t.columns, "rows": t.records(), "truncated": t.truncated}
            for t in tables
        ]
        opts = orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS
        typer.echo(orjson.dumps(doc if len(doc) != 1 else doc[0], default=str, option=opts))
        return
    if fmt is Format.csv:
        for i, t in enumerate(tables):
            buf = io.StringIO()
            w = csv.writer(buf, lineterminator="\n")
            if len(tables) > 1:
                buf.write(("\n" if i else "") + f"# {t.title}\n")
            w.writerow(t.columns)
            w.writerows(["" if v is None else v for v in r] for r in t.rows)
            typer.echo(buf.getvalue(), nl=False)
        return
    from rich.console import Console
    from rich.table import Table as RichTable

    console = Console(width=None if sys.stdout.isatty() else 200)
    for t in tables:
        table = RichTable(title=t.title, title_justify="left", show_lines=False)
        for c in t.columns:
            table.add_column(c, overflow="fold")
        for r in t.rows:
            table.add_row(*(_cell(v) for v in r))
        console.print(table)
        if not t.rows:
            console.print("  (no rows)")


__all__ = ["Format", "print_tables"]
