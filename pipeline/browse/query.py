"""The record browser's reads: every page is a few parameterised DuckDB queries.

The records page reads `record_index` (one row per record with what the page filters and sorts
on: each run's record_facts, written when the run was compacted, joined with the verdicts the
catalog materialises at each refresh), and pages by key (`(sort key,
record_id)` after the last row shown), so a page at a million records is one filtered top-N
scan; nothing loads a table into Python. Reviews are joined live from `review_latest`. A record
page reads its run's shard files only (as its run's manifest lists them), not the catalog's
views over every run's files.

No value from a request is ever part of SQL text: filters are bound parameters, and a sort is
a key of `SORTS`.
"""

from __future__ import annotations

import base64
import datetime as dt
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import orjson

from pipeline.core.parquet_sql import files_select
from pipeline.store.store import Store

PAGE_SIZE = 50
SORTS = {  # name -> (column of record_index, shown as)
    "v": ("v_key", "V"),
    "difficulty": ("difficulty_key", "difficulty"),
    "time": ("created_at", "time"),
}
REVIEW_STATES = ("unreviewed", "accept", "reject")
STATUSES = ("accepted", "rejected")


class CursorError(ValueError):
    """A page cursor that this server did not make (or that names another sort)."""


@dataclass(frozen=True)
class RecordFilter:
    """The records page's filters and sort; every field comes from the query string."""

    run_id: str | None = None
    status: str | None = None  # accepted | rejected
    rejected_by: str | None = None
    gate: str | None = None
    gate_verdict: str | None = None
    task_type: str | None = None
    hop_count: int | None = None
    v_min: float | None = None
    v_max: float | None = None
    review: str | None = None  # unreviewed | accept | reject
    q: str | None = None
    sort: str = "v"
    desc: bool = True

    def where(self) -> tuple[list[str], list[Any]]:
        """SQL conditions over record_index `r` and review_latest `rv`, with their values."""
        conds: list[str] = []
        args: list[Any] = []
        for column, value in (
            ("r.run_id", self.run_id),
            ("r.rejected_by", self.rejected_by),
            ("r.task_type", self.task_type),
            ("r.hop_count", self.hop_count),
        ):
            if value is not None:
                conds.append(f"{column} = ?")
                args.append(value)
        if self.status is not None:
            conds.append("r.accepted" if self.status == "accepted" else "NOT r.accepted")
        if self.gate is not None and self.gate_verdict is not None:
            conds.append(
                "len(list_filter(r.gate_verdicts, lambda g: g.gate = ? AND g.verdict = ?)) > 0"
            )
            args += [self.gate, self.gate_verdict]
        elif self.gate is not None:
            conds.append("len(list_filter(r.gate_verdicts, lambda g: g.gate = ?)) > 0")
            args.append(self.gate)
        elif self.gate_verdict is not None:
            conds.append("len(list_filter(r.gate_verdicts, lambda g: g.verdict = ?)) > 0")
            args.append(self.gate_verdict)
        if self.v_min is not None:
            conds.append("r.verifier_v >= ?")
            args.append(self.v_min)
        if self.v_max is not None:
            conds.append("r.verifier_v <= ?")
            args.append(self.v_max)
        if self.review == "unreviewed":
            conds.append("rv.verdict IS NULL")
        elif self.review is not None:
            conds.append("rv.verdict = ?")
            args.append(self.review)
        if self.q:
            conds.append("contains(r.search_text, ?)")
            args.append(self.q.lower())
        return conds, args


@dataclass(frozen=True)
class Page:
    rows: list[dict[str, Any]]
    next_cursor: str | None
    sort: str
    desc: bool
    filters: RecordFilter = field(default_factory=RecordFilter)


def encode_cursor(sort: str, key: Any, record_id: str) -> str:
    value = key.isoformat() if isinstance(key, dt.datetime) else key
    raw = orjson.dumps([sort, value, record_id])
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str, sort: str) -> tuple[Any, str]:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        name, value, record_id = orjson.loads(base64.urlsafe_b64decode(padded))
    except (ValueError, TypeError) as exc:
        raise CursorError("not a cursor of this browser") from exc
    if name != sort or not isinstance(record_id, str):
        raise CursorError("the cursor belongs to another sort")
    if sort == "time":
        if not isinstance(value, str):
            raise CursorError("not a time cursor")
        try:
            value = dt.datetime.fromisoformat(value)
        except ValueError as exc:
            raise CursorError("not a time cursor") from exc
    elif isinstance(value, bool) or not isinstance(value, int | float) or abs(value) > 1e300:
        raise CursorError("not a numeric cursor")  # (an integer past a double's range)
    if not 0 < len(record_id) <= 128:
        raise CursorError("not a cursor of this browser")
    return (float(value) if sort != "time" else value), record_id


LIST_COLUMNS = (
    "r.record_id, r.run_id, r.created_at, r.task_type, r.hop_count, r.question, r.answer, "
    "r.verifier_v, r.difficulty, r.accepted, r.rejected_by, r.gate_verdicts, "
    "rv.verdict AS review_verdict, rv.reason AS review_reason, rv.reviewer"
)


def records_page(
    con: duckdb.DuckDBPyConnection,
    flt: RecordFilter,
    after: str | None = None,
    limit: int = PAGE_SIZE,
) -> Page:
    """One page of records in `flt`'s order, after the cursor's row (keyset paging)."""
    key = SORTS[flt.sort][0]
    conds, args = flt.where()
    if after:
        value, record_id = decode_cursor(after, flt.sort)
        op = "<" if flt.desc else ">"
        conds.append(f"(r.{key} {op} ? OR (r.{key} = ? AND r.record_id {op} ?))")
        args += [value, value, record_id]
    direction = "DESC" if flt.desc else "ASC"
    where = " AND ".join(conds) or "TRUE"
    sql = (
        f"SELECT {LIST_COLUMNS}, r.{key} AS sort_key FROM record_index r "
        f"LEFT JOIN review_latest rv ON rv.record_id = r.record_id WHERE {where} "
        f"ORDER BY r.{key} {direction}, r.record_id {direction} LIMIT {int(limit) + 1}"
    )
    cur = con.execute(sql, args)
    names = [d[0] for d in cur.description]
    rows = [dict(zip(names, row, strict=True)) for row in cur.fetchall()]
    more = len(rows) > limit
    rows = rows[:limit]
    last = rows[-1] if rows and more else None
    nxt = encode_cursor(flt.sort, last["sort_key"], last["record_id"]) if last else None
    return Page(rows, nxt, flt.sort, flt.desc, flt)


def facets(con: duckdb.DuckDBPyConnection) -> dict[str, list[Any]]:
    """The values the filters offer (stored with the browser's index: one row)."""
    cur = con.execute(
        "SELECT run_id, rejected_by, task_type, hop_count, gate, gate_verdict FROM record_facets"
    )
    names = [d[0] for d in cur.description]
    return {n: v or [] for n, v in zip(names, cur.fetchone(), strict=True)}


def runs_overview(con: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    """Every run, newest first, with its funnel (stored with the browser's index) and its
    time."""
    cur = con.execute(
        "SELECT r.run_id, r.status, r.started_at, r.finished_at, r.config_hash, r.profile, "
        "r.shards_completed, r.shards_planned, f.* EXCLUDE (run_id) "
        "FROM runs r LEFT JOIN run_funnel f ON f.run_id = r.run_id "
        "ORDER BY r.started_at DESC, r.run_id DESC"
    )
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def _rows(con: duckdb.DuckDBPyConnection, sql: str, args: list[Any]) -> list[dict[str, Any]]:
    cur = con.execute(sql, args)
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def _run_files(root: Path, run_id: str) -> dict[str, list[str]] | None:
    """The run's committed shard files by table, from its manifest in the store at `root`:
    what the catalog's views list for this run (and any shard it committed since the
    refresh). None when the store is not where the catalog says it is."""
    if not (root / "runs" / run_id / "manifest.jsonl").is_file():
        return None
    files: dict[str, list[str]] = {}
    for entry in Store(root).manifest(run_id).values():
        for f in entry["files"]:
            files.setdefault(f["table"], []).append(str(root / f["path"]))
    return files


def _run_rows(
    con: duckdb.DuckDBPyConnection,
    table: str,
    files: dict[str, list[str]] | None,
    scoped: list[str],
    order: str = "",
) -> list[dict[str, Any]]:
    """`table`'s rows of one record, read from its run's files only. The catalog's view of a
    sharded table lists every run's files, and DuckDB reads the schema of each (union by
    name) whenever a query binds it: 2,000 files, half a second, at a million records. The
    same SELECT over the run's files (`files_select`, as the views) binds in milliseconds."""
    where = " WHERE run_id = ? AND record_id = ?" + order
    if files is None:
        return _rows(con, f"SELECT * FROM {table}{where}", scoped)
    if not files.get(table):
        return []
    src = files_select("?", hive=True, empty=f"_empty_{table}")
    return _rows(con, f"SELECT * FROM ({src}){where}", [files[table], *scoped])


def record_detail(
    con: duckdb.DuckDBPyConnection, record_id: str, store_root: Path
) -> dict[str, Any] | None:
    """Everything the record page shows: the record, its passage, KG subgraph, solver
    rollouts, verifier samples and controls, gate rollouts, and its reviews. `store_root` is
    the store the catalog names (`catalog_info`), whose manifests list each run's files."""
    head = _rows(
        con,
        "SELECT run_id, accepted, rejected_by, duplicate_of, gate_verdicts FROM record_index "
        "WHERE record_id = ?",
        [record_id],
    )
    if not head:
        return None
    run_id = head[0]["run_id"]
    scoped = [run_id, record_id]
    files = _run_files(store_root, run_id)
    rec = _run_rows(con, "curriculum", files, scoped)
    if not rec:
        return None
    record = {**rec[0], **head[0]}
    passage_id = record["evidence_passage_id"] or record["source_passage_id"]
    passage = _rows(con, "SELECT id, title, text FROM passages WHERE id = ?", [passage_id])
    chain_ids = sorted({h["passage_id"] for h in record.get("evidence_chain") or []})
    chain_passages = _rows(
        con, "SELECT id, title, text FROM passages WHERE list_contains(?, id)", [chain_ids]
    )
    subgraph = (
        _rows(
            con,
            "SELECT subgraph_id, answer_qid, answer_label, answer_type, waypoints, hops, "
            "target_path, distractors FROM subgraphs WHERE subgraph_id = ?",
            [record["subgraph_id"]],
        )
        if record["subgraph_id"]
        else []
    )
    return {
        "record": record,
        "passage": passage[0] if passage else None,
        "chain_passages": {p["id"]: p for p in chain_passages},
        "subgraph": subgraph[0] if subgraph else None,
        "solver": _run_rows(con, "solver_rollouts", files, scoped, " ORDER BY sample"),
        "verifier": _run_rows(
            con, "verifier_samples", files, scoped, " ORDER BY method, condition, sample"
        ),
        "controls": _run_rows(con, "control_scores", files, scoped, " ORDER BY method, control"),
        "gates": _run_rows(con, "gate_rollouts", files, scoped, ' ORDER BY "check", sample'),
        "proposer": _run_rows(con, "proposer_rollouts", files, scoped),
        "reviews": _rows(
            con, "SELECT * FROM reviews WHERE record_id = ? ORDER BY reviewed_at DESC", [record_id]
        ),
    }


def run_of(con: duckdb.DuckDBPyConnection, record_ids: list[str]) -> list[tuple[str, str]]:
    """(record_id, run_id) of the records that exist, for a review of `record_ids`."""
    rows = con.execute(
        "SELECT record_id, run_id FROM record_index WHERE list_contains(?, record_id)",
        [record_ids],
    ).fetchall()
    return [(r[0], r[1]) for r in rows]
