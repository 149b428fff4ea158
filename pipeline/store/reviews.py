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
import os
import re
import stat
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import duckdb
import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.core.contracts import SchemaMismatchError, check_schema, conform, read_shard
from pipeline.core.errors import BadInputError, first_line
from pipeline.core.io import (
    exclusive_lock,
    remove_contained,
    rename_durably,
    utcnow,
    write_parquet_atomic,
)
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
MAX_RECORDS = 10_000  # records one submission reviews (the browser's bulk review: 500)


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
        for name in ("verdict", "reviewer", "reason", "note"):
            value = getattr(self, name)
            if not (isinstance(value, str) or (value is None and name in ("reason", "note"))):
                raise ReviewError(name, f"{name} must be text")
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


def _committed(root: Path, con: duckdb.DuckDBPyConnection | None = None) -> list[Path]:
    """The review files written (a dot-named file is a write in progress or a leftover), each
    checked as input (`_inspect`) but those a valid compacted file holds (never read again:
    the sweep deletes them); one that fails is moved aside to `reviews/.quarantine/` with
    one warning line naming it and why, and every reader (SQL, audits, exports, the browser,
    landing) carries on with the rest. `con`: the reader's connection, if it has one."""
    folder = root / REVIEWS_DIR
    files = sorted(p for p in folder.glob("*.parquet") if not p.name.startswith("."))
    compacted = _compacted(files)
    checked = _inspect(compacted, con)
    held = {n for p in compacted if checked[p][0] is None for n in checked[p][1]}
    checked |= _inspect([p for p in files if p not in checked and p.name not in held], con)
    out = []
    for path in files:
        why = checked[path][0] if path in checked else None
        if why is None:
            out.append(path)
        elif why != _GONE:
            quarantine(root, path, why)
    return out


def _compacted(files: Sequence[Path]) -> list[Path]:
    return [p for p in files if p.name.startswith(COMPACTED_PREFIX)]


QUARANTINE_DIR = ".quarantine"  # under reviews/: files that are not review files
MAX_FILE_BYTES = 256 * 2**20  # a compacted file of SEALED_ROWS full notes is ~20 MB
MAX_ID = 256  # characters of a record or run id
# A file named in a compacted file's list: a plain name of the reviews folder.
_HELD_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*(\.[A-Za-z0-9_-]+)*\.parquet$")
_GONE = "gone"  # deleted since it was listed (a sweep): nothing to move aside
Checked = tuple[str | None, list[str]]  # (why it is not a review file, the names it holds)
# (path, inode, size, mtime) -> Checked: a long-lived reader (the browser) checks each once.
_INSPECTED: dict[tuple[str, int, int, int], Checked] = {}


def _inspect(paths: Sequence[Path], con: duckdb.DuckDBPyConnection | None) -> dict[Path, Checked]:
    """Each file's check (`_file_problem`, then the rows of those that pass, read by DuckDB in
    one query over them all: pyarrow's compute would add 20 MB to every reader's process)."""
    out: dict[Path, Checked] = {}
    keys, todo = {}, {}
    for path in paths:
        try:
            st = path.lstat()
        except FileNotFoundError:
            out[path] = (_GONE, [])
            continue
        keys[path] = (str(path), st.st_ino, st.st_size, st.st_mtime_ns)
        if (hit := _INSPECTED.get(keys[path])) is not None:
            out[path] = hit
        elif (first := _file_problem(path, st))[0] is not None:
            out[path] = first
        else:
            todo[path] = first[1]
    if todo:
        rows = _rows_problems(list(todo), con)
        out |= {p: (rows[p], [] if rows[p] else held) for p, held in todo.items()}
    if len(_INSPECTED) > 100_000:
        _INSPECTED.clear()
    _INSPECTED.update((keys[p], checked) for p, checked in out.items() if p in keys)
    return out


def review_file_problem(path: Path) -> str | None:
    """Why the file at `path` is not a review file this store wrote (None: it is one)."""
    return _inspect([path], None)[path][0]


def _file_problem(path: Path, st: os.stat_result) -> Checked:
    """What a file's footer tells: a regular file of a bounded size, Parquet with exactly the
    reviews contract's columns, and a compacted file's list of the files it holds a list of
    plain names of its folder (its rows are checked next: `_rows_problems`)."""
    if not stat.S_ISREG(st.st_mode):
        return "not a regular file (a folder or a symbolic link)", []
    if st.st_size > MAX_FILE_BYTES:
        return f"larger than {MAX_FILE_BYTES // 2**20} MB", []
    try:
        schema = pq.read_schema(path)
        check_schema("reviews", schema, where=path.name)
    except SchemaMismatchError as exc:
        return first_line(exc).removeprefix(f"{path.name}: "), []
    except Exception as exc:  # pyarrow raises many kinds for a file that is not Parquet
        return f"not a Parquet file ({first_line(exc)[:200]})", []
    if not path.name.startswith(COMPACTED_PREFIX):
        return None, []
    try:
        _written_at(path)
        held = orjson.loads((schema.metadata or {})[COVERS])
    except (BadInputError, KeyError, orjson.JSONDecodeError):
        return "a compacted review file that does not say when it was written and what it holds", []
    if not isinstance(held, list) or not all(
        isinstance(n, str) and _HELD_NAME.match(n) and n != path.name for n in held
    ):
        return "a compacted review file whose list of held files is not plain names", []
    return None, held


def _rows_sql() -> str:
    """Per file, the rows that `Verdict` would not have written, by kind."""

    def listed(values: Sequence[str]) -> str:
        return ", ".join(map(sql_string, values))

    lengths = " OR ".join(f"length({c}) > {n}" for c, n in (
        ("note", MAX_NOTE), ("reviewer", MAX_REVIEWER), ("record_id", MAX_ID),
        ("run_id", MAX_ID), ("review_id", MAX_ID)))  # fmt: skip
    required = " OR ".join(f"{c} IS NULL" for c in (
        "review_id", "record_id", "run_id", "verdict", "reviewer", "reviewed_at"))  # fmt: skip
    return f"""
        SELECT filename,
            count(*) FILTER (WHERE {required}) AS missing,
            count(*) FILTER (WHERE verdict NOT IN ({listed(REVIEW_VERDICTS)})) AS verdict,
            count(*) FILTER (WHERE CASE WHEN verdict = 'reject'
                THEN reason IS NULL OR reason NOT IN ({listed(REVIEW_REASONS)})
                ELSE reason IS NOT NULL END) AS reason,
            count(*) FILTER (WHERE {lengths}) AS length,
            count(*) FILTER (WHERE reviewed_at > ?::TIMESTAMPTZ
                OR reviewed_at < ?::TIMESTAMPTZ) AS time
        FROM read_parquet(?, filename = true, union_by_name = false,
                          hive_partitioning = false)
        GROUP BY filename"""


_WHY = {
    "missing": "an id, verdict, reviewer or time is missing in {n} row(s)",
    "verdict": f"{{n}} row(s) with a verdict that is not {' or '.join(REVIEW_VERDICTS)}",
    "reason": "{n} rejection(s) without a known reason, or acceptance(s) with one",
    "length": f"{{n}} row(s) with a note over {MAX_NOTE}, a reviewer over {MAX_REVIEWER} or "
    f"an id over {MAX_ID} characters",
    "time": "{n} row(s) reviewed before 2000 or more than a day from now",
}


def _rows_problems(
    paths: list[Path], con: duckdb.DuckDBPyConnection | None
) -> dict[Path, str | None]:
    """Why each file's rows are not reviews `Verdict` would write (None: they are), in one
    query over every file; a file DuckDB cannot read is found by reading each alone."""
    db = duckdb.connect() if con is None else con
    args = [utcnow() + FUTURE, EARLIEST]
    try:
        try:
            found = db.execute(_rows_sql(), [*args, [str(p) for p in paths]]).fetchall()
        except duckdb.Error:
            if len(paths) == 1:
                raise
            out: dict[Path, str | None] = {}
            for p in paths:
                out |= _rows_problems([p], db)
            return out
    except duckdb.Error as exc:
        return {paths[0]: f"not a readable Parquet file ({first_line(exc)[:200]})"}
    finally:
        if con is None:
            db.close()
    by_file = {Path(row[0]): row[1:] for row in found}
    out = {}
    for p in paths:
        counts = dict(zip(_WHY, by_file.get(p, (0,) * len(_WHY)), strict=True))
        out[p] = next((_WHY[k].format(n=n) for k, n in counts.items() if n), None)
    return out


FUTURE = dt.timedelta(days=1)  # clocks disagree; a review from later than that would win forever
EARLIEST = dt.datetime(2000, 1, 1, tzinfo=dt.UTC)


def quarantine(root: Path, path: Path, why: str) -> Path | None:
    """Move a file of reviews/ that is not a review file aside to reviews/.quarantine/ (the
    io layer's rename, inside the store), with one warning line naming it and why; where it
    cannot be moved (a read-only store) it is left out with the same line. Where it went."""
    folder = root / REVIEWS_DIR / QUARANTINE_DIR
    dest = folder / path.name
    n = 1
    while dest.exists() or dest.is_symlink():
        n += 1
        dest = folder / f"{path.name}.{n}"
    try:
        folder.mkdir(exist_ok=True)
        rename_durably(path, dest, within=root)
    except FileNotFoundError:
        return None  # moved aside (or swept) by another reader meanwhile
    except OSError as exc:
        log.warning("review file %s left out: %s (cannot move it aside: %s)", path, why,
                    exc.strerror)  # fmt: skip
        return None
    log.warning("review file %s moved aside to %s: %s", path, dest, why)
    return dest


def holdings(
    files: Sequence[Path], con: duckdb.DuckDBPyConnection | None = None
) -> dict[Path, list[str]]:
    """Each compacted file of `files` and the names of the review files it holds
    (transitively: a compaction that folds a compacted file names what that one held too,
    so they may go in any order), as read when the file was checked (`_inspect`, once per
    file and process); a file deleted since it was listed holds nothing (what it held, a
    newer one holds too)."""
    out = {}
    for path, (why, held) in _inspect(_compacted(files), con).items():
        if why == _GONE:
            continue
        if why is not None:
            raise BadInputError(f"{path}: {why}")
        out[path] = held
    return out


def review_files(root: Path, con: duckdb.DuckDBPyConnection | None = None) -> list[Path]:
    """The live review files: those written and valid, less those a compacted file holds
    (`con`: the reader's connection, that DuckDB reads the rows to check on)."""
    files = _committed(root, con)
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
    folder = root / REVIEWS_DIR
    gone = []
    with _lock(root):
        for p, names in holdings(_committed(root)).items():
            if _written_at(p) >= cutoff:
                continue
            for name in names:  # names read from the file: each must be a file of its folder
                if (held := remove_contained(folder, name, source=p)) is not None:
                    gone.append(held)
        for leftover in folder.glob(f".{COMPACTED_PREFIX}*"):
            remove_contained(folder, leftover.name)
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
    if len(records) > MAX_RECORDS:
        raise ReviewError("record_id", f"at most {MAX_RECORDS} records in one review")
    for ids in records:
        if not (isinstance(ids, tuple | list) and len(ids) == 2
                and all(isinstance(i, str) and 0 < len(i) <= MAX_ID for i in ids)):  # fmt: skip
            raise ReviewError("record_id", f"a record id and a run id of 1 to {MAX_ID} characters")
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
    the catalog's views read in place of the listing made at refresh (none left on disk: the
    contract's empty table, so a file removed since the refresh is not read); the listing
    itself is `_reviews_listed`, which `scope_reviews` narrows."""
    files = review_files(root, con) if files is None else files
    if files:
        select = files_select(path_list(files), hive=False, empty="_empty_reviews")
    else:
        has_empty = con.execute(
            "SELECT count(*) FROM duckdb_tables() WHERE table_name = '_empty_reviews'"
        ).fetchall()
        if has_empty != [(1,)]:
            return  # a catalog from before reviews: it has no reviews view to replace
        select = "SELECT * FROM _empty_reviews"
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
