"""Reviews (issue 27): a person's accept/reject verdicts on curriculum records.

Append-only: each submission (one record, or a bulk action over many) is one new Parquet file
under <out>/reviews/, written through the io layer (temporary name, fsync, rename), so a crash
or a concurrent catalog rebuild never loses or half-writes one, and nothing is rewritten. The
latest verdict per record wins (view `review_latest`). The files live in the store, not the
catalog: they survive a catalog rebuild and every new night.

The catalog lists the review files present at its last refresh; `attach_reviews` (called by
every read-only connection) replaces that listing with the files on disk now, so a verdict is
seen by SQL, audits and `curriculum export` the moment it is written, with no rebuild.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import duckdb

from pipeline.core.contracts import conform
from pipeline.core.errors import BadInputError
from pipeline.core.io import utcnow, write_parquet_atomic
from pipeline.core.parquet_sql import files_select, path_list, sql_string
from schemas.tables import REVIEW_REASONS, REVIEW_VERDICTS

REVIEWS_DIR = "reviews"
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


def review_files(root: Path) -> list[Path]:
    """The committed review files (a dot-named file is a write in progress or a leftover)."""
    return sorted(p for p in (root / REVIEWS_DIR).glob("*.parquet") if not p.name.startswith("."))


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
    files = review_files(root) if files is None else files
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
    "REVIEWS_DIR",
    "ReviewError",
    "Verdict",
    "attach_reviews",
    "review_files",
    "scope_reviews",
    "write_reviews",
]
