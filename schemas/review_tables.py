"""The reviewers' table: a person's verdict on a curriculum record, written by the
record browser under <out>/reviews/, one file per submission, never rewritten. Gathered with
the others in schemas/tables.py."""

from __future__ import annotations

import pyarrow as pa

from schemas.fields import TS, contract, f

REVIEW_VERDICTS = ("accept", "reject")
# The short list a reviewer picks a rejection reason from (plus free text in `note`): the
# faults a careful reader finds that the gates may not.
REVIEW_REASONS = (
    "answer_not_in_evidence",
    "not_self_contained",
    "kg_path_wrong",
    "ambiguous",
    "factually_wrong",
    "trivial",
    "other",
)

REVIEWS = contract(
    "reviews",
    "A reviewer's verdict on one curriculum record; append-only, the latest per record wins "
    "(view review_latest).",
    [
        f("review_id", pa.string(), False, "unique id of this verdict"),
        f("record_id", pa.string(), False),
        f("run_id", pa.string(), False),
        f("verdict", pa.string(), False, "accept | reject"),
        f("reason", pa.string(), doc="for a reject: one of REVIEW_REASONS; null for accept"),
        f("note", pa.string(), doc="the reviewer's free text"),
        f("reviewer", pa.string(), False),
        f("reviewed_at", TS, False),
    ],
)
