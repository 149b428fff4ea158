"""An export's per-record state, kept off the Python heap: the records the per-row drops left
(their dedupe keys and passage anchors), what was dropped and why, and where each kept record
goes (split, position), in a scratch DuckDB database under the export's scratch folder.

A year of nights selects 263k records and the view rejects 360k more: as Python objects that
was 100 MB per 100 nights. Here the export holds one batch of runs in Python at a time, plus
a few numpy columns over the kept records for the split. The rules stay in export_splits and
run here unchanged: SQL only stores, groups (the dedupe's groups of two or more records, which
`dedupe_by` then decides) and orders (dropped.jsonl's order: Drops' categories, within one the
export's own drops first, then the view's, each by record_id; a custom gate's by reason).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from operator import itemgetter
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa

from pipeline.catalog.export_splits import (
    DROP_CATEGORIES,
    SPLITS,
    Drops,
    SplitResult,
    anchor_groups,
    anchors_in_both,
    anchors_of,
    check_fraction,
    dedupe_by,
    drop_counts,
    group_sides,
    near_duplicate_key,
    question_key,
    split_hash,
)
from pipeline.core.config import SQLConfig

# The scratch database's memory while the export selects; beyond it DuckDB spills to the
# scratch folder. The split (every kept record's anchors numbered and joined, at once) runs
# under the `sql:` section's memory_limit instead: at 64 MB it failed from about a million
# kept records (benchmarks/bench_history.py's year keeps 263k; a production year millions).
MEMORY_LIMIT = "64MB"
# Rows fetched from the scratch database at once (dropped.jsonl, the groups' keys).
FETCH_ROWS = 20_000

_TABLES = """
CREATE TABLE kept (record_id VARCHAR, run_id VARCHAR, question_key VARCHAR,
    near_key VARCHAR, verifier_v DOUBLE, clustered BOOLEAN, review_verdict VARCHAR);
CREATE TABLE anchors (record_id VARCHAR, anchor VARCHAR);
CREATE TABLE drops (rank INTEGER, src INTEGER, reason VARCHAR, record_id VARCHAR,
    kept_record_id VARCHAR, detail VARCHAR);
"""
# Where a drop comes from, in dropped.jsonl's order within a category.
OWN, VIEW = 0, 1


class Ledger:
    """The scratch database of one export (`folder` is its own; `by`: the split's anchors)."""

    def __init__(self, folder: Path, by: str, limits: SQLConfig | None = None) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.by, self.limits = by, limits or SQLConfig()
        self.con = duckdb.connect(str(folder / "ledger.duckdb"))
        spill = str(folder / "spill").replace("'", "''")
        self.con.execute(
            f"SET memory_limit = '{MEMORY_LIMIT}'; SET temp_directory = '{spill}'; "
            f"SET max_temp_directory_size = '{self.limits.max_temp_size}'; "
            "SET threads = 2; SET preserve_insertion_order = false"
        )
        self.con.execute(_TABLES)

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
        """A batch's rows left by the per-row drops, and its drops (the export's, the view's)."""
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
        """Split the kept records by whole groups (export_splits: `anchor_groups`,
        `split_hash`, `group_sides`) and record each one's split and position (record_id
        order); returns the split's summary and the passages both splits
        share (none, unless the grouping has a bug)."""
        check_fraction(validation_fraction)
        self.con.execute(f"SET memory_limit = '{self.limits.memory_limit}'")
        try:
            return self._split(validation_fraction, seed)
        finally:
            self.con.execute(f"SET memory_limit = '{MEMORY_LIMIT}'")

    def _split(self, validation_fraction: float, seed: int) -> tuple[SplitResult, list[str]]:
        con = self.con
        con.execute(
            "CREATE TABLE numbered AS SELECT record_id, run_id, "
            "row_number() OVER (ORDER BY record_id) - 1 AS i FROM kept"
        )
        con.execute(
            "CREATE TABLE codes AS SELECT anchor, row_number() OVER (ORDER BY anchor) - 1 AS code "
            "FROM (SELECT DISTINCT anchor FROM anchors WHERE record_id IN "
            "(SELECT record_id FROM kept))"
        )
        edges = con.execute(
            "SELECT n.i, c.code, starts_with(c.anchor, 'passage:') AS passage "
            "FROM anchors a JOIN numbered n USING (record_id) JOIN codes c USING (anchor)"
        ).fetchnumpy()
        edge_row, edge_anchor = np.asarray(edges["i"], np.int64), np.asarray(edges["code"])
        edge_anchor = edge_anchor.astype(np.int64)
        rows = self.kept_count()
        group = anchor_groups(rows, edge_row, edge_anchor)
        groups = np.unique(group)  # in key order
        names = self._anchor_names(groups)
        draws = np.fromiter((split_hash(k, seed) for k in names), np.float64)
        val, counts, forced = group_sides(draws, validation_fraction, self._group_key(groups))
        validation = val[np.searchsorted(groups, group)]
        on = np.asarray(edges["passage"], bool)
        leaked = anchors_in_both(validation, edge_row[on], edge_anchor[on])
        position = np.where(validation, np.cumsum(validation), np.cumsum(~validation)) - 1
        self.con.register("_placed", pa.table({
            "i": np.arange(rows, dtype=np.int64), "validation": validation, "pos": position,
        }))  # fmt: skip
        try:
            con.execute(
                "CREATE TABLE placed AS SELECT n.record_id, n.run_id, p.validation, p.pos "
                "FROM numbered n JOIN _placed p USING (i)"
            )
        finally:
            con.unregister("_placed")
        shared = [k.removeprefix("passage:") for k in list(self._anchor_names(leaked))]
        return SplitResult(counts, forced), shared

    def _group_key(self, groups: np.ndarray) -> Callable[[int], str]:
        """The i-th group's key (its smallest anchor)."""
        return lambda i: "".join(self._anchor_names(groups[i : i + 1]))

    def _anchor_names(self, codes: np.ndarray) -> Iterator[str]:
        """The anchors of sorted `codes`, in their order (read FETCH_ROWS at a time)."""
        self.con.register("_codes", pa.table({"code": np.asarray(codes, np.int64)}))
        try:
            reader = self.con.sql(
                "SELECT anchor FROM codes WHERE code IN (SELECT code FROM _codes) ORDER BY code"
            ).to_arrow_reader(FETCH_ROWS)
            for batch in reader:
                yield from batch.column(0).to_pylist()
        finally:
            self.con.unregister("_codes")

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
