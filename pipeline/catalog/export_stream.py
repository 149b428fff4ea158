"""The second pass of an export: the kept records' full rows, read a few runs at a
time and written in each split's order, so an export holds one batch of full rows (plus the
narrow keys of the first pass), never all of them.

A split's order is record_id order, and record ids are hashes: every run has records all
over a split. So each batch's rendered rows are spilled (pickled: the exact Python values the
formats convert) into buckets of BUCKET_ROWS consecutive positions of their split, and the
buckets are then read back in order, one at a time, into the formats' writers.
"""

from __future__ import annotations

import pickle
import shutil
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from pipeline.catalog.export_formats import SplitWriter
from pipeline.catalog.export_process import attach_solver_process
from pipeline.catalog.export_selection import group_runs
from pipeline.catalog.export_splits import SPLITS
from pipeline.store.scoping import scoped_to_runs

# Full rows read from the catalog at once: whole runs, at most this many kept records a batch
# (one run larger than that is one batch).
BATCH_ROWS = 2000
# Consecutive rows of a split held at once while writing it.
BUCKET_ROWS = 2000

Render = Callable[[dict[str, Any], str, int], dict[str, Any]]


def full_rows(
    con: duckdb.DuckDBPyConnection,
    columns: Sequence[str],
    run_ids: Sequence[str],
    record_ids: set[str],
    views: set[str],
) -> list[dict[str, Any]]:
    """The `columns` of the curriculum rows of `record_ids` (all in `run_ids`), with their
    solver_process; read run by run (`run_id = ?` reads that run's files only), over views
    of the batch's own files (scoped_to_runs; every run's again after)."""
    tables, wanted = [], pa.array(list(record_ids), pa.string())
    with scoped_to_runs(con, run_ids):
        for run_id in run_ids:
            rel = con.table("curriculum").filter(
                duckdb.ColumnExpression("run_id") == duckdb.ConstantExpression(run_id)
            )
            tbl = rel.select(*columns).to_arrow_table()
            tables.append(tbl.filter(pc.is_in(tbl["record_id"], value_set=wanted)))
        rows = pa.concat_tables(tables).to_pylist() if tables else []
        attach_solver_process(con, rows, views)
    return rows


class Spill:
    """Rendered rows parked by (split, position // BUCKET_ROWS) in `folder`, then read back
    bucket by bucket in each split's order."""

    def __init__(self, folder: Path, bucket_rows: int = BUCKET_ROWS) -> None:
        folder.mkdir()
        self.folder, self.bucket_rows = folder, bucket_rows
        self.buckets: dict[str, set[int]] = {s: set() for s in SPLITS}

    def _path(self, split: str, bucket: int) -> Path:
        return self.folder / f"{split}-{bucket:06d}.pickle"

    def add(self, placed: list[tuple[str, int, dict[str, Any]]]) -> None:
        """Park (split, position, row) triples."""
        by_bucket: dict[tuple[str, int], list[tuple[int, dict[str, Any]]]] = {}
        for split, pos, row in placed:
            by_bucket.setdefault((split, pos // self.bucket_rows), []).append((pos, row))
        for (split, bucket), rows in by_bucket.items():
            with self._path(split, bucket).open("ab") as fh:
                pickle.dump(rows, fh, protocol=pickle.HIGHEST_PROTOCOL)
            self.buckets[split].add(bucket)

    def drain(self, split: str) -> Iterator[list[dict[str, Any]]]:
        """The split's rows in position order, one bucket at a time."""
        for bucket in sorted(self.buckets[split]):
            path, rows = self._path(split, bucket), []
            with path.open("rb") as fh:
                while True:
                    try:
                        rows += pickle.load(fh)  # this export's own file
                    except EOFError:
                        break
            path.unlink()
            rows.sort(key=lambda pr: pr[0])
            yield [r for _, r in rows]

    def remove(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


def stream_records(
    con: duckdb.DuckDBPyConnection,
    columns: Sequence[str],
    views: set[str],
    kept_per_run: Sequence[tuple[str, int]],
    placement: Callable[[Sequence[str]], dict[str, tuple[str, int]]],
    render: Render,
    writers: Sequence[SplitWriter],
    scratch: Path,
) -> None:
    """Read the kept records' full rows batch by batch (`kept_per_run`: how many each run
    has, in run_id order; `placement(runs)`: their record_id -> split and position in it),
    render them and hand each split to `writers` in position order."""
    spill = Spill(scratch / "records")
    try:
        for runs in group_runs(kept_per_run, BATCH_ROWS):
            place = placement(runs)
            rows = full_rows(con, columns, runs, set(place), views)
            spill.add([(*place[r["record_id"]], render(r, *place[r["record_id"]])) for r in rows])
            del rows
        for split in SPLITS:
            for rows in spill.drain(split):
                for w in writers:
                    w.add(split, rows)
                del rows  # before the next bucket is read: one bucket held at a time, not two
    finally:
        spill.remove()
