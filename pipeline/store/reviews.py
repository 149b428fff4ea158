"""Reviews: a person's accept/reject verdicts on curriculum records.

Each submission (one record, or a bulk action over many) is one new Parquet file under
<out>/reviews/, written through the io layer (temporary name, fsync, rename), so a crash or a
concurrent catalog rebuild never loses or half-writes one; a verdict is never edited, a later
one wins (view `review_latest`). The files live in the store, not the catalog: they survive a
catalog rebuild and every new night.

The catalog lists the review files present at its last refresh; `attach_reviews` (called by
every read-only connection) replaces that listing with the files on disk now, so a verdict is
seen by SQL, audits and `curriculum export` the moment it is written, with no rebuild.

A file a submission is a file for every connection to bind (about 10 KB of DuckDB state each:
a year of daily reviewing is thousands), so landing folds them: `compact_reviews`
writes the live files' rows into `compacted-*` files whose Parquet metadata names every file
each holds, and from its rename on the listing (`review_files`) leaves those out. A compacted
file of SEALED_ROWS rows is left as it is, so a fold rewrites the reviews since, never all of
them. `sweep_reviews` deletes the held files a GRACE after the fold, and only once a catalog
refresh listed the compacted file instead: a reader that listed them before the fold (an
export, a `curriculum sql` session, a browser request) reads them until then.
"""

from __future__ import annotations

import datetime as dt
import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import duckdb
import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.core.contracts import conform, read_shard
from pipeline.core.errors import BadInputError, first_line
from pipeline.core.io import exclusive_lock, utcnow, write_parquet_atomic
from pipeline.core.parquet_sql import files_select, path_list, sql_string
from schemas.tables import REVIEW_REASONS, REVIEW_VERDICTS

log = logging.getLogger(__name__)

REVIEWS_DIR = "reviews"
COMPACTED_PREFIX = "compacted-"
COVERS = b"curriculum.covers"  # a compacted file's metadata: the names of the files it holds
SEALED_ROWS = 8_192  # a compacted file this large is not rewritten again
GRACE = dt.timedelta(hours=24)  # how long the files a fold held stay for earlier readers
_STAMP = "%Y%m%dT%H%M%S%f"  # a file name's first part: when it was written (UTC)
MAX_NOTE = 2000  # characters of free text
MAX_REVIEWER = 100


class ReviewError(BadInputError):
    """A review that cannot be recorded (unknown verdict or reason, no reviewer, ...);
    `field` names the value at fault, so a form can point at it."""

    def __init__(self, field: str, msg: str) -> None:
        super().__init__(msg)
        self.field = field


@dataclass(frozen=True)
class Verdict:
    """What a reviewer says about one or more records."""

    verdict: str
    reviewer: str
    reason: str | None = None
    note: str | None = None

    def __post_init__(self) -> None:
        if self.verdict not in REVIEW_VERDICTS:
            raise ReviewError("verdict", f"verdict must be one of {', '.join(REVIEW_VERDICTS)}")
        reviewer = self.reviewer.strip()
        if not reviewer or len(reviewer) > MAX_REVIEWER:
            raise ReviewError("reviewer", f"a name of 1 to {MAX_REVIEWER} characters")
        if self.verdict == "reject" and self.reason not in REVIEW_REASONS:
            reasons = ", ".join(REVIEW_REASONS)
            raise ReviewError("reason", f"a rejection needs a reason: one of {reasons}")
        if self.verdict == "accept" and self.reason is not None:
            raise ReviewError("reason", "an acceptance takes no reason (write it in the note)")
        if self.note is not None and len(self.note) > MAX_NOTE:
            raise ReviewError("note", f"note is longer than {MAX_NOTE} characters")

    def rows(self, records: Sequence[tuple[str, str]], now: dt.datetime) -> list[dict]:
        """One reviews row per (record_id, run_id)."""
        note = (self.note or "").strip() or None
        return [
            {
                "review_id": uuid.uuid4().hex,
                "record_id": record_id,
                "run_id": run_id,
                "verdict": self.verdict,
                "reason": self.reason,
                "note": note,
                "reviewer": self.reviewer.strip(),
                "reviewed_at": now,
            }
            for record_id, run_id in records
        ]


def _committed(root: Path) -> list[Path]:
    """The review files written (a dot-named file is a write in progress or a leftover)."""
    return sorted(p for p in (root / REVIEWS_DIR).glob("*.parquet") if not p.name.startswith("."))


def _compacted(files: Sequence[Path]) -> list[Path]:
    return [p for p in files if p.name.startswith(COMPACTED_PREFIX)]


def holdings(
    files: Sequence[Path], con: duckdb.DuckDBPyConnection | None = None
) -> dict[Path, list[str]]:
    """Each compacted file of `files` and the names of the review files it holds
    (transitively: a compaction that folds a compacted file names what that one held too,
    so they may go in any order). Read by DuckDB, on a reader's own connection (`con`) or an
    in-memory one: pyarrow's Parquet reader would add 7 MB to every reader's process."""
    compacted = _compacted(files)
    if not compacted:
        return {}
    db = duckdb.connect() if con is None else con
    try:
        try:
            rows = _covers(db, compacted)
        except duckdb.Error:
            # a sweep deleted one since it was listed: what it held, a newer one holds too
            compacted = [p for p in compacted if p.exists()]
            rows = _covers(db, compacted)
    except duckdb.Error:
        for path in compacted:  # name the file at fault
            try:
                _covers(db, [path])
            except duckdb.Error as exc:
                raise BadInputError(f"{path}: {first_line(exc)}") from None
        raise
    finally:
        if con is None:
            db.close()
    out = {}
    for path in compacted:
        try:
            out[path] = orjson.loads(rows[path])
        except (KeyError, orjson.JSONDecodeError):
            raise BadInputError(
                f"{path}: a compacted review file that does not name the files it holds"
            ) from None
    return out


def _covers(con: duckdb.DuckDBPyConnection, files: Sequence[Path]) -> dict[Path, bytes]:
    if not files:
        return {}
    rows = con.execute(
        "SELECT file_name, value FROM parquet_kv_metadata(?) WHERE key = ?",
        [[str(p) for p in files], COVERS],
    ).fetchall()
    return {Path(name): value for name, value in rows}


def review_files(root: Path, con: duckdb.DuckDBPyConnection | None = None) -> list[Path]:
    """The live review files: those written, less those a compacted file holds (`con`: the
    reader's connection, see holdings)."""
    files = _committed(root)
    return _live(files, holdings(files, con))


def _live(files: Sequence[Path], held_by: dict[Path, list[str]]) -> list[Path]:
    held = {name for names in held_by.values() for name in names}
    return [p for p in files if p.name not in held]


def _lock(root: Path) -> object:
    return exclusive_lock(root / REVIEWS_DIR / ".compaction.lock")


def compact_reviews(root: Path, sealed_rows: int = SEALED_ROWS) -> list[Path]:
    """Fold the live review files (but sealed compacted ones) into compacted files of about
    `sealed_rows` rows each, in name order (the last one smaller: the one the next landing
    folds again); their paths. Two files or more make a compacted file, and one fold holds
    at most `sealed_rows` plus one file's rows in memory. The rename is the switch: a kill
    before it leaves the files as they were (and a dot-named leftover), after it the new
    file alone is live. A submission written meanwhile is not listed, so not held: the next
    compaction folds it."""
    with _lock(root):
        present = _committed(root)
        held_by = holdings(present)  # read once: each fold's files inherit from it
        live = _live(present, held_by)
        size = {p: pq.read_metadata(p).num_rows for p in live}  # the writer reads with pyarrow
        sealed = {p for p in _compacted(live) if size[p] >= sealed_rows}
        chunks, chunk, rows = [], [], 0
        for p in (p for p in live if p not in sealed):
            chunk.append(p)
            rows += size[p]
            if rows >= sealed_rows:
                chunks.append(chunk)
                chunk, rows = [], 0
        names = {p.name for p in present}
        return [_fold(root, c, held_by, names) for c in [*chunks, chunk] if len(c) >= 2]


def _fold(root: Path, files: list[Path], held_by: dict[Path, list[str]], present: set[str]) -> Path:
    """One compacted file of `files`' rows, holding them and what they hold (`held_by`) that
    is still on disk (`present`): a name swept since can never come back (names are
    unique), so the lists stay a day or two of files long instead of naming every
    submission ever folded."""
    inherited = {n for p in files for n in held_by.get(p, ()) if n in present}
    held = sorted({p.name for p in files} | inherited)
    rows = pa.concat_tables([read_shard(p, "reviews") for p in files])
    rows = rows.sort_by([("reviewed_at", "ascending"), ("review_id", "ascending")])
    meta = {**(rows.schema.metadata or {}), COVERS: orjson.dumps(held)}
    name = f"{COMPACTED_PREFIX}{utcnow():{_STAMP}}-{uuid.uuid4().hex[:12]}.parquet"
    path = root / REVIEWS_DIR / name
    write_parquet_atomic(path, rows.replace_schema_metadata(meta), within=root)
    log.info("compacted %d review files (%d reviews) into %s", len(files), rows.num_rows, name)
    return path


def sweep_reviews(
    root: Path, before: dt.datetime | None, grace: dt.timedelta | None = None
) -> list[Path]:
    """Delete the files held by folds written before `before` (the catalog's last refresh,
    which listed the compacted files instead: None, no refresh yet) and `grace` (default
    GRACE) ago, and the leftovers of killed folds; the deleted paths."""
    if before is None or not (root / REVIEWS_DIR).is_dir():
        return []
    cutoff = min(before, utcnow() - (GRACE if grace is None else grace))
    gone = []
    with _lock(root):
        for p, names in holdings(_committed(root)).items():
            if _written_at(p) >= cutoff:
                continue
            for name in names:
                held = p.parent / name
                if held.exists():
                    held.unlink()
                    gone.append(held)
        for leftover in (root / REVIEWS_DIR).glob(f".{COMPACTED_PREFIX}*"):
            leftover.unlink(missing_ok=True)
    return gone


def _written_at(path: Path) -> dt.datetime:
    stamp = path.name.removeprefix(COMPACTED_PREFIX).split("-", 1)[0]
    try:
        return dt.datetime.strptime(stamp, _STAMP).replace(tzinfo=dt.UTC)
    except ValueError:
        raise BadInputError(
            f"{path}: a compacted review file's name starts with when it was written "
            f"({COMPACTED_PREFIX}YYYYmmddTHHMMSSffffff-...)"
        ) from None


def write_reviews(root: Path, verdict: Verdict, records: Sequence[tuple[str, str]]) -> Path:
    """Record `verdict` for every (record_id, run_id) in one new file; returns its path."""
    if not records:
        raise ReviewError("record_id", "no records to review")
    now = utcnow()
    table = conform("reviews", verdict.rows(records, now))
    path = root / REVIEWS_DIR / f"{now:%Y%m%dT%H%M%S%f}-{uuid.uuid4().hex[:12]}.parquet"
    write_parquet_atomic(path, table, within=root)
    return path


def attach_reviews(
    con: duckdb.DuckDBPyConnection, root: Path, files: Sequence[Path] | None = None
) -> None:
    """Point this connection's `reviews` at the review files on disk now, or at `files` (a
    listing made before, which a reader's later connections share): a temporary view, which
    the catalog's views read in place of the listing made at refresh; the listing itself is
    `_reviews_listed`, which `scope_reviews` narrows."""
    files = review_files(root, con) if files is None else files
    if not files:
        return
    select = files_select(path_list(files), hive=False, empty="_empty_reviews")
    con.execute(f"CREATE OR REPLACE TEMP VIEW {_LISTED} AS {select}")
    con.execute(f"CREATE OR REPLACE TEMP VIEW reviews AS SELECT * FROM {_LISTED}")


_LISTED = "_reviews_listed"


def scope_reviews(con: duckdb.DuckDBPyConnection, run_ids: Sequence[str] | None) -> None:
    """This connection's `reviews` narrowed to the reviews whose run is one of `run_ids` (each
    review names its record's run; None: every review again), for a reader of those runs
    (store.scope_to_runs): at a year of nights every verdict query would otherwise rank the
    whole history's reviews. It narrows
    the listing `attach_reviews` made, never lists the files again, so a review written
    meanwhile changes no query on this connection (an export's batches, each on a connection
    of its own, are given its first connection's listing). Without that listing (no review
    files) there is nothing to narrow."""
    listed = con.execute(
        "SELECT count(*) FROM duckdb_views() WHERE temporary AND view_name = ?", [_LISTED]
    ).fetchall()
    if listed != [(1,)]:
        return
    ids = ", ".join(map(sql_string, run_ids or ())) or "NULL"  # no run: no review
    where = "" if run_ids is None else f" WHERE run_id IN ({ids})"
    con.execute(f"CREATE OR REPLACE TEMP VIEW reviews AS SELECT * FROM {_LISTED}{where}")


__all__ = [
    "COMPACTED_PREFIX",
    "GRACE",
    "REVIEWS_DIR",
    "SEALED_ROWS",
    "ReviewError",
    "Verdict",
    "attach_reviews",
    "compact_reviews",
    "holdings",
    "review_files",
    "scope_reviews",
    "sweep_reviews",
    "write_reviews",
]
