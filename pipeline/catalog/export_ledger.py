"""An export's per-record state, kept off the Python heap: the records the per-row drops left
(their dedupe keys and passage anchors), what was dropped and why, and where each kept record
goes (split, position), in a scratch DuckDB database under the export's scratch folder.

A year of nights selects 263k records and the view rejects 360k more: as Python objects that
was 100 MB per 100 nights. Here the export holds one batch of runs in Python at a time, and
the split's groups are found in SQL too (label propagation over numbered records and
anchors), so what a whole history needs past the memory limit spills to the scratch folder.
The rules stay in export_splits and run here unchanged: SQL stores, groups (the dedupe's
groups of two or more records, which `dedupe_by` then decides; the split's groups, which
`split_hash` and `forced_move` then place) and orders (dropped.jsonl's order: Drops'
categories, within one the export's own drops first, then the view's, each by record_id; a
custom gate's by reason).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Sequence
from operator import itemgetter
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from pipeline.catalog.export_splits import (
    DROP_CATEGORIES,
    SPLITS,
    Drops,
    SplitResult,
    anchors_of,
    check_fraction,
    dedupe_by,
    drop_counts,
    forced_move,
    near_duplicate_key,
    question_key,
    split_hash,
)
from pipeline.catalog.sql_worker import size_bytes
from pipeline.core.config import SQLConfig
from pipeline.core.errors import first_line

log = logging.getLogger(__name__)

# The scratch database's memory; beyond it DuckDB spills to the scratch folder (up to the
# `sql:` section's max_temp_size). One thread: each thread's hash tables take their own share
# of the limit, and with two the split of a million kept records failed at 64 MB; with one
# it spills (benchmarks/bench_history.py's year keeps 263k; a production year millions).
MEMORY_LIMIT = "64MB"
THREADS = 1
# Rows fetched from the scratch database at once (dropped.jsonl, the groups' keys).
FETCH_ROWS = 20_000

_TABLES = """
CREATE TABLE kept (record_id VARCHAR, run_id VARCHAR, question_key VARCHAR,
    near_key VARCHAR, verifier_v DOUBLE, clustered BOOLEAN, review_verdict VARCHAR);
CREATE TABLE anchors (record_id VARCHAR, anchor VARCHAR);
CREATE TABLE drops (rank INTEGER, src INTEGER, reason VARCHAR, record_id VARCHAR,
    kept_record_id VARCHAR, detail VARCHAR);
"""
# The split's graph: the kept records and their anchors numbered (a join of integers needs a
# fraction of a join of strings' memory), the edges between them, each anchor its own label.
_GRAPH = """
CREATE TABLE numbered AS SELECT record_id, run_id, row_number() OVER () AS r FROM kept;
CREATE TABLE codes AS SELECT anchor, row_number() OVER () AS code FROM
    (SELECT DISTINCT anchor FROM anchors WHERE record_id IN (SELECT record_id FROM kept));
CREATE TABLE edges AS SELECT n.r, c.code, starts_with(c.anchor, 'passage:') AS passage
    FROM anchors a JOIN numbered n USING (record_id) JOIN codes c USING (anchor);
CREATE TABLE label AS SELECT code, code AS lab FROM codes;
"""
# One step: each record takes its anchors' smallest label, each anchor its records' smallest;
# a label is an anchor of the same group, so each anchor then takes its label's label.
_PROPAGATE = """
CREATE OR REPLACE TABLE row_label AS
    SELECT e.r, min(l.lab) AS lab FROM edges e JOIN label l USING (code) GROUP BY e.r;
CREATE OR REPLACE TABLE step AS
    SELECT e.code, min(r.lab) AS lab FROM edges e JOIN row_label r USING (r) GROUP BY e.code;
CREATE OR REPLACE TABLE jumped AS SELECT s.code, t.lab FROM step s JOIN step t ON t.code = s.lab;
"""
# Each kept record's split and position in it (record_id order).
_PLACE = """
CREATE TABLE placed AS SELECT n.record_id, n.run_id, n.r, s.validation,
    row_number() OVER (PARTITION BY s.validation ORDER BY n.record_id) - 1 AS pos
    FROM numbered n JOIN row_label l USING (r) JOIN sides s USING (lab);
"""
# What the split writes: its working tables, then `placed`, what it leaves.
SPLIT_TABLES = ("numbered", "codes", "edges", "label", "row_label", "step", "jumped", "groups",
                "drawn", "sides", "placed")  # fmt: skip
# Where a drop comes from, in dropped.jsonl's order within a category.
OWN, VIEW = 0, 1


class Ledger:
    """The scratch database of one export (`folder` is its own; `by`: the split's anchors)."""

    def __init__(self, folder: Path, by: str, limits: SQLConfig | None = None) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.by, self.limits, self.folder = by, limits or SQLConfig(), folder
        self.con = self._connect()
        self.con.execute(_TABLES)

    def _connect(self) -> duckdb.DuckDBPyConnection:
        con = duckdb.connect(str(self.folder / "ledger.duckdb"))
        spill = str(self.folder / "spill").replace("'", "''")
        con.execute(
            f"SET memory_limit = '{MEMORY_LIMIT}'; SET temp_directory = '{spill}'; "
            f"SET max_temp_directory_size = '{self.limits.max_temp_size}'; "
            f"SET threads = {THREADS}; SET preserve_insertion_order = false"
        )
        return con

    def reopen(self) -> None:
        """Close and open the database again: what DuckDB caches of its tables and keeps for
        each query a connection ran goes (a year of nights' batches on one connection held
        50 MB more than one batch), what was written stays."""
        self.con.close()
        self.con = self._connect()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.con.close()

    def _insert(self, table: str, columns: dict[str, pa.Array | list]) -> None:
        self.con.register("_rows", pa.table(columns))
        try:
            self.con.execute(f"INSERT INTO {table} SELECT * FROM _rows")
        finally:
            self.con.unregister("_rows")

    # ---- the selection, a batch at a time --------------------------------------------------

    def add(self, kept: Sequence[Any], own: Drops, view: Drops) -> None:
        """A batch's rows left by the per-row drops, and its drops (the export's, the view's),
        on a fresh connection (`reopen`)."""
        self.reopen()
        self.add_drops(own, OWN)
        self.add_drops(view, VIEW)
        if not kept:
            return
        self._insert("kept", {
            "record_id": [r["record_id"] for r in kept],
            "run_id": [r["run_id"] for r in kept],
            "question_key": [question_key(r) for r in kept],
            "near_key": [str(near_duplicate_key(r)) for r in kept],
            "verifier_v": pa.array([r.get("verifier_v") for r in kept], pa.float64()),
            "clustered": [r.get("duplicate_cluster_id") is not None for r in kept],
            "review_verdict": pa.array([r.get("review_verdict") for r in kept], pa.string()),
        })  # fmt: skip
        anchors = [(r["record_id"], a) for r in kept for a in anchors_of(r, self.by)]
        self._insert("anchors", {
            "record_id": [r for r, _ in anchors], "anchor": [a for _, a in anchors],
        })  # fmt: skip

    def add_drops(self, drops: Drops, src: int) -> None:
        rows = [
            (rank, d) for rank, name in enumerate(DROP_CATEGORIES) for d in getattr(drops, name)
        ]
        if not rows:
            return
        self._insert("drops", {
            "rank": pa.array([k for k, _ in rows], pa.int32()),
            "src": pa.array([src] * len(rows), pa.int32()),
            "reason": [d.reason for _, d in rows],
            "record_id": [d.record_id for _, d in rows],
            "kept_record_id": pa.array([d.kept_record_id for _, d in rows], pa.string()),
            "detail": pa.array([d.detail for _, d in rows], pa.string()),
        })  # fmt: skip

    # ---- the dedupe ------------------------------------------------------------------------

    def dedupe(self) -> None:
        """One record per question, then per near-duplicate cluster (`dedupe_by`, on the
        records that share a key with another only)."""
        for column, reason, category in (
            ("question_key", "duplicate_question", "duplicates"),
            ("near_key", "near_duplicate", "near_duplicates"),
        ):
            shared = self.con.sql(
                f"SELECT record_id, verifier_v, {column} AS key FROM kept WHERE {column} IN "
                f"(SELECT {column} FROM kept GROUP BY {column} HAVING count(*) > 1)"
            ).to_arrow_table()
            _, dropped = dedupe_by(shared.to_pylist(), itemgetter("key"), reason)
            self.add_drops(Drops(**{category: dropped}), OWN)
            self.con.register("_lost", pa.table({"record_id": [d.record_id for d in dropped]}))
            try:
                self.con.execute("DELETE FROM kept WHERE record_id IN (SELECT * FROM _lost)")
            finally:
                self.con.unregister("_lost")

    # ---- what is left ----------------------------------------------------------------------

    def kept_count(self) -> int:
        ((n,),) = self.con.execute("SELECT count(*) FROM kept").fetchall()
        return n

    def kept_facts(self) -> dict[str, Any]:
        """What the manifest says of the kept records: per run, unclustered, reviewed."""
        per_run = dict(
            self.con.execute("SELECT run_id, count(*) FROM kept GROUP BY run_id").fetchall()
        )
        ((unclustered, accepted),) = self.con.execute(
            "SELECT count(*) FILTER (WHERE NOT clustered), "
            "count(*) FILTER (WHERE review_verdict = 'accept') FROM kept"
        ).fetchall()
        return {"per_run": per_run, "unclustered": unclustered, "accepted": accepted}

    def drop_counts(self) -> dict[str, Any]:
        """Drops.counts() of what was dropped."""
        sizes = dict.fromkeys(DROP_CATEGORIES, 0)
        custom: dict[str, int] = {}
        sql = "SELECT rank, reason, count(*) FROM drops GROUP BY rank, reason"
        for rank, reason, n in self.con.execute(sql).fetchall():
            sizes[DROP_CATEGORIES[rank]] += n
            if DROP_CATEGORIES[rank] == "gated":
                custom[reason] = n
        return drop_counts(sizes, custom)

    def dropped(self) -> Iterator[dict[str, Any]]:
        """dropped.jsonl's rows, in its order (as Dropped's fields)."""
        reader = self.con.sql(
            "SELECT record_id, reason, kept_record_id, detail FROM drops "
            "ORDER BY rank, src, reason, record_id"
        ).to_arrow_reader(FETCH_ROWS)
        for batch in reader:
            yield from batch.to_pylist()

    # ---- the split -------------------------------------------------------------------------

    def split(self, validation_fraction: float, seed: int) -> tuple[SplitResult, list[str]]:
        """Split the kept records by whole groups and record each one's split and position
        (record_id order); returns the split's summary and the passages both splits share
        (none, unless the grouping has a bug). Again: the previous split is replaced.

        A group is the records that share an anchor (`anchors_of`), transitively, keyed by
        its smallest anchor; it goes to validation when `split_hash(key, seed)` is below the
        fraction, then `forced_move` keeps both splits non-empty.

        Under the ledger's memory limit, spilling past it. DuckDB's joins still need a
        working set that grows slowly with the graph (a million records over 667k passages
        split in 64 MB; 100k need more than 16 MB), so a split that does not fit is done
        again under the `sql:` section's memory_limit rather than failing the export."""
        check_fraction(validation_fraction)
        try:
            return self._split(validation_fraction, seed)
        except duckdb.OutOfMemoryException as exc:
            if size_bytes(self.limits.memory_limit) <= size_bytes(MEMORY_LIMIT):
                raise  # no more memory to try with
            why = first_line(exc)
        self.reopen()
        log.warning(
            "the split of %d kept records needs more than %s (%s); splitting again under "
            "sql.memory_limit %s",
            self.kept_count(), MEMORY_LIMIT, why, self.limits.memory_limit,
        )  # fmt: skip
        self.con.execute(f"SET memory_limit = '{self.limits.memory_limit}'")
        try:
            return self._split(validation_fraction, seed)
        finally:
            self.reopen()  # the ledger's own limit again

    def _split(self, validation_fraction: float, seed: int) -> tuple[SplitResult, list[str]]:
        con = self.con
        self._drop(SPLIT_TABLES)
        con.execute(_GRAPH)
        while True:  # label propagation with pointer jumping, to the group's smallest code
            con.execute(_PROPAGATE)
            ((changed,),) = con.execute(
                "SELECT count(*) FROM jumped j JOIN label l USING (code) WHERE j.lab <> l.lab"
            ).fetchall()
            con.execute("DROP TABLE label; ALTER TABLE jumped RENAME TO label")
            if not changed:  # so row_label is the last label's
                break
        con.execute(
            "CREATE TABLE groups AS SELECT l.lab, min(c.anchor) AS key "
            "FROM label l JOIN codes c USING (code) GROUP BY l.lab"
        )
        con.execute("CREATE TABLE drawn (lab BIGINT, key VARCHAR, draw DOUBLE)")
        with con.cursor() as reader:  # the groups read while their draws are written
            for batch in reader.sql("SELECT lab, key FROM groups").to_arrow_reader(FETCH_ROWS):
                keys = batch.column(1).to_pylist()
                self._insert("drawn", {
                    "lab": batch.column(0), "key": keys,
                    "draw": pa.array([split_hash(k, seed) for k in keys], pa.float64()),
                })  # fmt: skip
        ((groups, below),) = con.execute(
            "SELECT count(*), count(*) FILTER (WHERE draw < $f) FROM drawn",
            {"f": validation_fraction},
        ).fetchall()
        largest, smallest = self._first_key("draw DESC, key DESC"), self._first_key("draw, key")
        moved, forced = forced_move(groups, below, validation_fraction, largest, smallest)
        con.execute(
            "CREATE TABLE sides AS SELECT lab, "
            "(draw < $f) <> coalesce(key = $moved, false) AS validation FROM drawn",
            {"f": validation_fraction, "moved": moved},
        )
        con.execute(_PLACE)
        ((validation,),) = con.execute("SELECT count(*) FROM sides WHERE validation").fetchall()
        shared = [
            a.removeprefix("passage:")
            for (a,) in con.execute(
                "SELECT anchor FROM codes WHERE code IN (SELECT e.code FROM edges e "
                "JOIN placed p USING (r) WHERE e.passage GROUP BY e.code "
                "HAVING bool_or(p.validation) AND NOT bool_and(p.validation))"
            ).fetchall()
        ]
        self._drop(t for t in SPLIT_TABLES if t != "placed")
        counts = {"train": groups - validation, "validation": validation}
        return SplitResult(counts, forced), shared

    def _drop(self, tables: Iterable[str]) -> None:
        self.con.execute("".join(f"DROP TABLE IF EXISTS {t};" for t in tables))

    def _first_key(self, order: str) -> str | None:
        """The key of the first drawn group in `order`."""
        rows = self.con.execute(f"SELECT key FROM drawn ORDER BY {order} LIMIT 1").fetchall()
        return rows[0][0] if rows else None

    # ---- the second pass -------------------------------------------------------------------

    def split_sizes(self) -> dict[str, int]:
        """Kept records per split."""
        sql = "SELECT count(*) FILTER (WHERE NOT validation), count(*) FILTER (WHERE validation)"
        ((train, validation),) = self.con.execute(sql + " FROM placed").fetchall()
        return {"train": train, "validation": validation}

    def kept_per_run(self) -> list[tuple[str, int]]:
        """(run_id, kept records) in run_id order."""
        sql = "SELECT run_id, count(*) FROM placed GROUP BY run_id ORDER BY run_id"
        return self.con.execute(sql).fetchall()

    def placement(self, run_ids: Sequence[str]) -> dict[str, tuple[str, int]]:
        """record_id -> (split, position in it) of the kept records of `run_ids`."""
        self.con.register("_runs", pa.table({"run_id": list(run_ids)}))
        try:
            tbl = self.con.sql(
                "SELECT record_id, validation, pos FROM placed "
                "WHERE run_id IN (SELECT run_id FROM _runs)"
            ).to_arrow_table()
        finally:
            self.con.unregister("_runs")
        ids, val, pos = (tbl.column(c).to_pylist() for c in ("record_id", "validation", "pos"))
        return {r: (SPLITS[v], p) for r, v, p in zip(ids, val, pos, strict=True)}
