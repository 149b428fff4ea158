"""Printing query results for `curriculum sql` and `curriculum audit`: a table for people,
csv / json for pipes, and a note on stderr when a result was cut at its row limit.

The table is for reading: floats are rounded for display (csv and json keep every digit),
and a result wider than the terminal is printed as records, one field per line, instead of
a table whose cells wrap over several lines.

Values are untrusted text (pipeline.core.display): the table and csv show every value, column
name and title through `display_text` (control characters escaped, a backslash doubled) with
Rich's markup off; json keeps the exact values, its control and separator characters written
as JSON `\\uXXXX` escapes, so no raw control byte reaches stdout in any format."""

from __future__ import annotations

import csv
import io
import math
import os
import sys
from enum import StrEnum
from typing import TYPE_CHECKING, Any

import typer

from pipeline.core.display import display_text, escape_text

if TYPE_CHECKING:  # the CLI imports this module at start-up; duckdb loads on first query
    from pipeline.catalog.bounded_sql import Table


class Format(StrEnum):
    table = "table"
    csv = "csv"
    json = "json"


# Digits a float keeps in the table (csv and json print it exactly): decimals from 1 up,
# significant digits below 1.
FLOAT_DIGITS = 4


def _cell(v: Any) -> str:
    if isinstance(v, float):
        return display_float(v)
    return display_text(v)


def display_float(v: float) -> str:
    """`0.5495768821173777` as `0.5496`, `0.00012345` as `0.0001234`, `155.123456` as
    `155.1235`, `3.0` as `3.0`; huge or tiny magnitudes in scientific notation, so the
    rounding never turns a value into 0."""
    if not math.isfinite(v):
        return str(v)
    if v == 0 or abs(v) >= 1e9:
        return "0.0" if v == 0 else f"{v:.{FLOAT_DIGITS - 1}e}"
    if abs(v) < 1:
        return f"{v:.{FLOAT_DIGITS}g}"
    text = f"{v:.{FLOAT_DIGITS}f}".rstrip("0")
    return text + "0" if text.endswith(".") else text


def _width() -> int | None:
    """The terminal's width (COLUMNS when set); a pipe gets wide tables (200)."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    return None if sys.stdout.isatty() else 200


def _json_safe(doc: str) -> str:
    """orjson escapes C0 controls inside strings but writes DEL and non-ASCII characters raw;
    the ones a terminal acts on (DEL, C1 controls, line separators, bidi overrides) become
    `\\uXXXX` escapes, which JSON reads back as the same characters. Outside strings JSON text
    is ASCII (the indentation's newlines stay), so only string contents change."""
    if doc.isascii() and "\x7f" not in doc:
        return doc
    return "".join(
        f"\\u{ord(ch):04x}" if ord(ch) >= 0x7F and escape_text(ch) != ch else ch for ch in doc
    )


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
        text = orjson.dumps(doc if len(doc) != 1 else doc[0], default=str, option=opts)
        typer.echo(_json_safe(text.decode("utf-8")))
        return
    if fmt is Format.csv:
        for i, t in enumerate(tables):
            buf = io.StringIO()
            w = csv.writer(buf, lineterminator="\n")
            if len(tables) > 1:
                buf.write(("\n" if i else "") + f"# {display_text(t.title)}\n")
            w.writerow([display_text(c) for c in t.columns])
            w.writerows([display_text(v, null="") for v in r] for r in t.rows)
            typer.echo(buf.getvalue(), nl=False)
        return
    from rich.console import Console
    from rich.table import Table as RichTable
    from rich.text import Text

    # Markup, emoji codes and highlighting off; every string below is a Text, never parsed.
    console = Console(width=_width(), markup=False, emoji=False, highlight=False)
    for t in tables:
        title = Text(display_text(t.title))
        table = RichTable(title=title, title_justify="left", show_lines=False)
        for c in t.columns:
            table.add_column(Text(display_text(c)), overflow="fold")
        cells = [[_cell(v) for v in r] for r in t.rows]
        for r in cells:
            table.add_row(*(Text(v) for v in r))
        natural = console.measure(table, options=console.options.update(max_width=1 << 20))
        if t.rows and natural.maximum > console.width:
            _print_records(console, t, cells)
            continue
        console.print(table)
        if not t.rows:
            console.print("  (no rows)")


def _print_records(console, t: Table, cells: list[list[str]]) -> None:
    """A result too wide for the terminal, one field per line (psql's expanded display): a
    rule per row, then each column's name and its value, folded to the terminal's width."""
    from rich.text import Text

    names = [display_text(c) for c in t.columns]
    console.print(Text(display_text(t.title)))
    width = max(len(n) for n in names)
    room = max(console.width - width - 2, 20)
    for i, row in enumerate(cells, 1):
        console.rule(Text(f"record {i}"), align="left", characters="─")
        for name, value in zip(names, row, strict=True):
            lines = Text(value).wrap(console, room, overflow="fold") if value else [Text("")]
            for j, line in enumerate(lines):
                head = Text(name.ljust(width) if j == 0 else " " * width, style="bold")
                console.print(Text.assemble(head, "  ", line.rstrip() or line), crop=False)


__all__ = ["Format", "print_tables"]
