"""Which records an export takes: the catalog's accepted view by default (the one definition
the funnel and the run's summary line count), or a user's --where; with the default, also the
valid verbatim records the view left out and why, for dropped.jsonl.

Each selected row carries the reviewers' latest verdict (`review_verdict`, ...),
which the export honours after the selection, whichever it is (`export_splits.drop_reviewed`):
a record a reviewer rejected stays out of a user's --where too, as the gates' drops do — a
--where narrows or widens what the pipeline judged, it does not overrule a person who read
the record. Bringing such a record back is a new review (the latest verdict wins).

Reads the catalog read-only; the filter is parsed as one expression
(`pipeline.catalog.readonly_sql`).
"""

from __future__ import annotations

import contextlib
import os
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from pipeline.catalog.bounded_sql import SQLLimitError
from pipeline.catalog.export_splits import Dropped, contamination_detail, undetermined_detail
from pipeline.catalog.readonly_sql import UnsafeSQLError, connect_audit
from pipeline.catalog.sql_worker import bounded_filter
from pipeline.core.config import SQLConfig
from pipeline.core.errors import first_line
from pipeline.store.reviews import review_files
from pipeline.store.store import (
    CATALOG_RUNS,
    HAS_CATALOG_FILES,
    StoreError,
    catalog_runs,
    store_root,
)
from schemas.exports import QUALITY_COLUMNS, REVIEW_COLUMNS, SOURCE_COLUMNS

# The catalog's one definition of accepted (view curriculum_verdicts): what the funnel and the
# run's summary line count, and what an export ships unless --where says otherwise.
DEFAULT_WHERE = "accepted"
LEGACY_WHERE = "is_valid AND is_verbatim"  # a catalog built before the verdicts existed
# What each --include-* switch adds back to the default selection (rejected_by reasons).
INCLUDE_REASONS = {
    "contaminated": ("contaminated",),
    "shortcuts": ("shortcut",),
    "ambiguous": ("ambiguous",),
    "undetermined": ("shortcut_undetermined", "uniqueness_undetermined", "connected_undetermined"),
}


class ExportError(RuntimeError):
    """An export that cannot be made; `str()` is one line, `hint` says what to do."""

    def __init__(self, msg: str, hint: str | None = None) -> None:
        super().__init__(msg)
        self.hint = hint


@dataclass
class Selection:
    runs: list[dict[str, Any]]  # the runs view rows of the selected records' runs
    # Quality gates: the benchmark checks so far, and whether near-duplicate
    # clusters were ever computed; both empty on a catalog built before the gates existed.
    benchmark_checks: list[dict[str, Any]] = field(default_factory=list)
    clustered: bool = False
    where: str | None = None  # the filter as run (a catalog without the views: the old one)
    # Reviews: whether the catalog has them (one built before has not), and the
    # latest verdicts over all its records, {"accept": n, "reject": n}.
    reviewed: bool = False
    reviews_overall: dict[str, int] = field(default_factory=dict)
    # For the dataset card, the selected runs' rows of the views funnel, gate_funnel and
    # verifier_controls (empty where the catalog has no such view).
    run_views: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    # The catalog's views (the batches' rows are its narrow columns: see NARROW_OMITS).
    views: set[str] = field(default_factory=set)
    selected: int = 0  # the records selected
    review_scope: dict[str | None, int] = field(default_factory=dict)  # their latest verdicts


# What the selection leaves out of each row: the columns only the rendered record reads (an
# export's second pass reads them from the curriculum, a batch at a time, with each record's
# solver_process). The drops, the dedupe, the split and the manifest read the rest.
NARROW_OMITS = (
    "source_title", "task_type", "hop_count", "evidence", "evidence_char_start",
    "evidence_char_end", "kg_path", "waypoints", "difficulty", "proposer_reward",
    "solver_reward_mean", "answer_aliases",
)  # fmt: skip


class NarrowRow(Mapping[str, Any]):
    """One selected record's narrow columns, read-only: a tuple of values and the selection's
    column index, about 0.3 kB where a dict of the same 28 columns takes 1.2 kB (a year of
    nights selects 263k records)."""

    __slots__ = ("_index", "_values")

    def __init__(self, index: dict[str, int], values: tuple[Any, ...]) -> None:
        self._index, self._values = index, values

    def __getitem__(self, key: str) -> Any:
        return self._values[self._index[key]]

    def __iter__(self) -> Iterator[str]:
        return iter(self._index)

    def __len__(self) -> int:
        return len(self._index)

    def __repr__(self) -> str:
        return f"NarrowRow({dict(self)!r})"


# Takes one batch of runs' selected rows and the view's rejections of them (select_records).
OnBatch = Callable[[list[NarrowRow], list[Dropped]], None]


def narrow_rows(rel: duckdb.DuckDBPyRelation, columns: Sequence[str]) -> list[NarrowRow]:
    tbl = rel.select(*columns).to_arrow_table()
    index = {c: i for i, c in enumerate(columns)}
    values = zip(*(shared_values(tbl.column(c)) for c in columns), strict=True)
    return [NarrowRow(index, v) for v in values]


def shared_values(col: pa.ChunkedArray) -> list[Any]:
    """The column's Python values, a repeated string as one object: run ids, config hashes,
    verdicts and reasons repeat on every row (about 60 bytes each a row otherwise)."""
    values = col.to_pylist()
    if not pa.types.is_string(col.type) or pc.count_distinct(col).as_py() * 4 > len(values):
        return values
    seen: dict[str, str] = {}
    return [v if v is None else seen.setdefault(v, v) for v in values]


def _gated(views: set[str]) -> bool:
    """Whether the catalog has the gates' views (one built before them has not)."""
    return "curriculum_verdicts" in views


def record_columns(sel: Selection) -> tuple[str, ...]:
    """The curriculum columns a rendered record reads (export.record_row), as the selection
    would have read them: answer_aliases only from a catalog with the gates' views."""
    return SOURCE_COLUMNS + (("answer_aliases",) if _gated(sel.views) else ())


def open_catalog(
    catalog: str | Path, reviews: Sequence[Path] | None = None
) -> duckdb.DuckDBPyConnection:
    """The export's read-only connection (connect_audit; `reviews`: the review files it
    reads, default those on disk now); a store error as an ExportError."""
    try:
        return connect_audit(catalog, reviews=reviews)
    except StoreError as exc:
        raise ExportError(
            str(exc), exc.hint or "run `curriculum nightly` (same --profile/--set) first"
        ) from exc


def default_selection(included: Iterable[str] = ()) -> str:
    """The default filter: the accepted records, plus those rejected only for the reasons the
    --include-* switches name (a record rejected earlier, e.g. below the V threshold, stays
    out)."""
    reasons = [r for k in included for r in INCLUDE_REASONS[k]]
    if not reasons:
        return DEFAULT_WHERE
    listed = ", ".join(f"'{r}'" for r in reasons)
    return f"{DEFAULT_WHERE} OR rejected_by IN ({listed})"


def _isin(column: str, values: Sequence[str]) -> duckdb.Expression:
    """`column IN (values)` as an expression tree: run ids never pass through SQL text."""
    return duckdb.ColumnExpression(column).isin(*(duckdb.ConstantExpression(v) for v in values))


def select_records(
    catalog: str | Path,
    where: str | None = DEFAULT_WHERE,
    run_ids: Sequence[str] = (),
    rejections: bool = False,
    limits: SQLConfig | None = None,
    *,
    on_batch: OnBatch,
) -> Selection:
    """Rows of the curriculum view matching `where` (and `run_ids`), read-only, `where` under
    `limits` (default: the sql: section's defaults); with `rejections`, also the valid
    verbatim records it leaves out, with the view's reasons. Without the columns only a
    rendered record reads (NARROW_OMITS). Each batch of runs' rows and rejections go to
    `on_batch`, so that an export holds one batch of a year of nights at a time; the
    Selection says what spans them (runs, counts, checks, reviews)."""
    snap = _Snapshot(catalog)
    with snap.connect() as con:
        snap.list_reviews(con)
        if run_ids:  # only then is the list of known runs needed
            ((indexed,),) = con.execute(HAS_CATALOG_FILES).fetchall()
            known = {r for (r,) in con.execute(catalog_runs(indexed)).fetchall()}
            unknown = sorted(set(run_ids) - known)
            if unknown:
                raise ExportError(
                    f"unknown run id(s) {', '.join(unknown)} in {catalog}",
                    f"known runs: {', '.join(sorted(known)) or 'none'}",
                )
        views = {v for (v,) in con.execute("SELECT view_name FROM duckdb_views()").fetchall()}
        gated = _gated(views)
        source = "curriculum_verdicts" if gated else "curriculum"
        reviewed = gated and set(REVIEW_COLUMNS) <= set(con.table(source).columns)
        batches = run_batches(con, run_ids)
    columns = SOURCE_COLUMNS + (QUALITY_COLUMNS if gated else ())
    columns += REVIEW_COLUMNS if reviewed else ()
    columns = tuple(c for c in columns if c not in NARROW_OMITS)
    if rejections and not gated:  # no verdicts to read: the valid verbatim records
        where, rejections = LEGACY_WHERE, False
    seen = _Seen()
    try:
        # the sql.* limits, the predicate evaluated over the requested runs only, a batch of
        # runs at a time, each on its own connection (closed here even when a batch fails)
        filtered = bounded_filter(snap.connect, catalog, source, where, limits, batches)
        with contextlib.closing(filtered):
            for batch, (con, rel) in zip(batches, filtered, strict=True):
                got = narrow_rows(rel, columns)
                seen.add(got)
                dropped = _rejections(con, source, where, batch) if rejections else []
                on_batch(got, dropped)
    except UnsafeSQLError as exc:
        raise ExportError(str(exc), _FILTER_HINT) from exc
    except SQLLimitError as exc:
        raise ExportError(str(exc), exc.hint) from exc
    except duckdb.Error as exc:  # errors only evaluation finds (casts, division by zero)
        raise ExportError(
            f"filter {where!r} over {source}: {first_line(exc)}", _FILTER_HINT
        ) from exc
    with snap.connect() as con:
        picked = sorted(seen.hashes)
        runs = []
        if picked:
            cols = ("run_id", "run_date", "profile", "config_hash", "status", "started_at")
            cols += ("finished_at", "schema_version")
            runs = con.table("runs").filter(_isin("run_id", picked)).select(*cols)
            runs = runs.order("run_id").to_arrow_table().to_pylist()
        # A run whose run.parquet is missing still says which config made its records.
        for run_id in sorted(set(picked) - {r["run_id"] for r in runs}):
            hashes = sorted(seen.hashes[run_id])
            runs.append({"run_id": run_id, "config_hash": ",".join(hashes), "status": "unknown"})
        checks, clustered = [], False
        if gated:
            checks = con.table("benchmark_checks").order("benchmark").to_arrow_table()
            checks = checks.drop_columns(["checked_at"]).to_pylist()
            sql = "SELECT count(*) > 0 FROM question_clusters"
            ((clustered,),) = con.execute(sql).fetchall()  # all: the connection is used on
        overall = _latest_reviews(con) if reviewed else {}
        facts = {v: _run_rows(con, v, picked) for v in CARD_VIEWS if v in views}
    return Selection(
        runs, checks, bool(clustered), where, reviewed, overall, facts, views,
        seen.selected, dict(seen.verdicts),
    )  # fmt: skip


class _Snapshot:
    """The catalog as the selection's first connection found it, for each later connection (a
    batch's own, the summary's) to read the same: its file, which a refresh replaces (then
    refused: the export has written nothing yet), and its review files (one written
    meanwhile waits for the next export, rather than reaching only the later batches)."""

    def __init__(self, catalog: str | Path) -> None:
        self.catalog, self.file = catalog, _file_identity(catalog)
        self.reviews: list[Path] | None = None

    def list_reviews(self, con: duckdb.DuckDBPyConnection) -> None:
        root = store_root(con)  # a catalog from before: it attaches no reviews
        if root is not None:
            self.reviews = review_files(root, con)

    def connect(self) -> duckdb.DuckDBPyConnection:
        con = open_catalog(self.catalog, self.reviews)
        if _file_identity(self.catalog) != self.file:  # opened after a refresh replaced it
            con.close()
            raise ExportError(
                f"the catalog {self.catalog} was refreshed during the export",
                "export again (nothing was written)",
            )
        return con


def _file_identity(path: str | Path) -> tuple[int, ...] | None:
    try:
        st = os.stat(path)
    except OSError:  # open_catalog says what is wrong with it
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


class _Seen:
    """What the manifest says of the selected rows, counted a batch at a time: how many, the
    config hashes of each run, the latest review verdicts."""

    def __init__(self) -> None:
        self.selected = 0
        self.hashes: dict[str, set[str]] = {}
        self.verdicts: Counter[str | None] = Counter()

    def add(self, rows: list[NarrowRow]) -> None:
        self.selected += len(rows)
        for r in rows:
            self.hashes.setdefault(r["run_id"], set()).add(r["config_hash"])
            self.verdicts[r.get("review_verdict")] += 1


def _rejections(
    con: duckdb.DuckDBPyConnection, source: str, where: str | None, batch: Sequence[str]
) -> list[Dropped]:
    """The valid verbatim records of a batch of runs that the (default) filter leaves out."""
    cols = ("record_id", "rejected_by", "duplicate_of", "contamination_benchmarks",
            "contamination_methods", "verifier_v", "v_threshold", "gold_n")  # fmt: skip
    rel = con.table(source).filter(_isin("run_id", batch))
    rel = rel.filter(f"is_valid AND is_verbatim AND NOT ({where})")
    return [view_rejection(r) for r in narrow_rows(rel, cols)]


# Records a batch of runs holds at most (unless one run holds more): the verdict views' joins
# over one batch, not a year of nights, at a time.
BATCH_RECORDS = 20_000


def run_batches(con: duckdb.DuckDBPyConnection, run_ids: Sequence[str] = ()) -> list[list[str]]:
    """The runs that have records (of `run_ids` when given), in order, in batches of at most
    BATCH_RECORDS records (a larger run alone)."""
    rel = con.table("curriculum")
    if run_ids:
        rel = rel.filter(_isin("run_id", sorted(set(run_ids))))
    counts = rel.aggregate("run_id, count(*)", "run_id").order("run_id").fetchall()
    return group_runs(counts, BATCH_RECORDS)


def group_runs(counts: Iterable[tuple[str, int]], most: int) -> list[list[str]]:
    """Runs (with their row counts), in the given order, in consecutive batches of at most
    `most` rows (a larger run alone): the export's one way of reading a batch of runs."""
    batches: list[list[str]] = []
    size = 0
    for run_id, n in counts:
        if not batches or size + n > most:
            batches.append([])
            size = 0
        batches[-1].append(run_id)
        size += n
    return batches


# The views the dataset card reports per selected run, in its order.
CARD_VIEWS = ("funnel", "gate_funnel", "verifier_controls", "hop_funnel")


def _run_rows(con: duckdb.DuckDBPyConnection, view: str, run_ids: list[str]) -> list[dict]:
    if not run_ids:
        return []
    rel = con.table(view).filter(_isin("run_id", run_ids))
    keys = [c for c in ("run_id", "position", "gate", "method") if c in rel.columns]
    return rel.order(", ".join(keys)).to_arrow_table().to_pylist()


def _latest_reviews(con: duckdb.DuckDBPyConnection) -> dict[str, int]:
    """The latest review verdicts over every record of the catalog, from the reviews and the
    catalog's table of files: the records are counted from the manifests, so a one-run
    export reads no other run's files for it. A review counts while its run is in the
    catalog (a pruned run's do not; a run id a new run took since counts its old reviews,
    whose records usually share its ids)."""
    verdicts = (
        "SELECT count(*) FILTER (WHERE verdict = 'accept'), "
        "count(*) FILTER (WHERE verdict = 'reject') FROM review_latest "
    )
    try:
        ((accept, reject),) = con.execute(f"{verdicts} WHERE run_id IN ({CATALOG_RUNS})").fetchall()
        ((total,),) = con.execute(
            "SELECT coalesce(sum(rows), 0) FROM catalog_files WHERE view = 'curriculum'"
        ).fetchall()
    except (duckdb.CatalogException, duckdb.BinderException):  # a catalog from before: read
        ((accept, reject),) = con.execute(  # every record
            f"{verdicts} WHERE record_id IN (SELECT record_id FROM curriculum)"
        ).fetchall()
        ((total,),) = con.execute("SELECT count(*) FROM curriculum").fetchall()
    return {"accept": accept, "reject": reject, "not_reviewed": max(0, total - accept - reject)}


# The view's reasons as the export's drop reasons (the Python drops use the same names).
VIEW_REASONS = {
    "ambiguous": "ambiguous_answer",
    "shortcut_undetermined": "undetermined",
    "uniqueness_undetermined": "undetermined",
    "connected_undetermined": "undetermined",
}


def view_rejection(r: Mapping[str, Any]) -> Dropped:
    why = r["rejected_by"]
    if why == "contaminated":
        detail = contamination_detail(r)
    elif why == "below_v_threshold":
        detail = f"V {r['verifier_v']} <= the run's control threshold {r['v_threshold']}"
    elif why.endswith("_undetermined"):
        detail = undetermined_detail([why.removesuffix("_undetermined")], r.get("gold_n"))
    else:
        detail = None
    return Dropped(r["record_id"], VIEW_REASONS.get(why, why), r.get("duplicate_of"), detail)


_FILTER_HINT = (
    "--where takes one SQL boolean expression over the columns of the curriculum view (and "
    "the quality gates' contaminated, duplicate_cluster_id, ...), "
    'e.g. --where "is_valid AND is_verbatim AND hop_count >= 2"'
)
