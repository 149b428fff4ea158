"""The SQL the catalog reads Parquet files with, in one place: the store's views, the review
listing every read-only connection makes, and the browser's read of one run's shards all use
the same options. Every file a view lists has its contract's columns (the refresh checks each
file it did not write itself under this schema version), so a view binds from the first
file's footer instead of reading every file's (union_by_name), which at a year of nights cost
more than the rest of a refresh."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path


def sql_string(value: Path | str) -> str:
    """An SQL string literal (for statements that cannot take bound parameters: views,
    ATTACH)."""
    return "'" + str(value).replace("'", "''") + "'"


def path_list(paths: Iterable[Path | str]) -> str:
    """An SQL list literal of file paths (a view cannot take bound parameters)."""
    return "[" + ", ".join(sql_string(p) for p in paths) + "]"


def files_select(listing: str, hive: bool, empty: str) -> str:
    """SELECT over the files of `listing` (a `path_list`, or `?` bound to a list) unioned by
    name with `empty`, the table's contract as an empty table. DuckDB guesses hive partitions
    from key=value directories (selector state lives under iteration=0001/) and would replace
    typed columns with strings: `hive` says whether there are any."""
    opts = f"hive_partitioning = {str(hive).lower()}, union_by_name = false"
    return f"SELECT * FROM read_parquet({listing}, {opts}) UNION ALL BY NAME SELECT * FROM {empty}"
