"""Base views over some runs' files: what a reader of a few runs (a run's report and audit, an
export's batch, the refresh computing a night's per-run results) binds instead of a year of
nights. The catalog's table `catalog_files` says which files of which per-run view are whose."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from pathlib import Path

import duckdb

from pipeline.core.parquet_sql import files_select, path_list
from pipeline.store.reviews import scope_reviews


def view_select(name: str, paths: Sequence[Path | str], hive: bool) -> str:
    """A base view's SELECT: its files unioned by name with `_empty_<name>`, or that alone."""
    if paths:
        return files_select(path_list(paths), hive, f"_empty_{name}")
    cols = ", CAST(NULL AS DATE) AS run_date" if hive else ""
    return f"SELECT *{cols} FROM _empty_{name}"


def scope_to_runs(con: duckdb.DuckDBPyConnection, run_ids: Sequence[str] | None) -> None:
    """Temporary views over the files of `run_ids` alone standing in for the per-run base
    views (the sharded tables and `runs`), for a reader of those runs only (a run's report
    and audit, an export's batch of runs): DuckDB checks every listed file at each bind,
    and holds state for each, so at a year of nights each query would pay for 365 files per
    table. What spans runs stays whole: the quality tables, passages and the materialised
    tables; the reviews narrow to those naming one of the runs (scope_reviews).
    None: the whole catalog again (scopes do not nest). A catalog from before lists no
    files."""
    scope_reviews(con, run_ids)
    try:
        rows = con.execute(
            "SELECT view, hive, list(path ORDER BY path) FILTER (WHERE list_contains(?, run_id)) "
            "FROM catalog_files GROUP BY view, hive ORDER BY view",
            [list(run_ids or ())],
        ).fetchall()
    except duckdb.CatalogException:
        return
    for view, hive, paths in rows:
        if run_ids is None:
            con.execute(f"DROP VIEW IF EXISTS temp.{view}")
        else:
            con.execute(f"CREATE OR REPLACE TEMP VIEW {view} AS {view_select(view, paths, hive)}")


@contextlib.contextmanager
def scoped_to_runs(con: duckdb.DuckDBPyConnection, run_ids: Sequence[str]) -> Iterator[None]:
    """scope_to_runs for a block: the whole catalog again after it, however it ends (a scope
    left half made included)."""
    try:
        scope_to_runs(con, run_ids)
        yield
    finally:
        scope_to_runs(con, None)


__all__ = ["scope_to_runs", "scoped_to_runs", "view_select"]
