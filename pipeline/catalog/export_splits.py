"""The pure half of an export, over plain row dicts so each rule is tested on hand-made rows:
drop unusable rows, deduplicate questions (the winner), and the split's rules (a record's
anchors, a group's hash, the forced move that keeps both splits non-empty). The ledger
(export_ledger) applies them to a whole selection, the dedupe's and the split's groups found
in SQL."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, fields
from typing import Any

from pipeline.agents.rewards import normalize

SPLITS = ("train", "validation")
SPLIT_BY = ("passage", "cluster")

# ---- dedupe (pure) ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Dropped:
    record_id: str
    # no_question_or_answer | contaminated | shortcut | ambiguous_answer | duplicate_question
    # | near_duplicate | review_rejected | not_reviewed | a custom gate's name
    reason: str
    kept_record_id: str | None = None
    detail: str | None = None  # the benchmarks/methods, or the near-duplicate cluster


def _winner_key(row: dict[str, Any]) -> tuple[int, float, str]:
    """Sort key whose minimum is the record to keep: highest V (unscored last), then id."""
    v = row.get("verifier_v")
    return (0, -float(v), row["record_id"]) if v is not None else (1, 0.0, row["record_id"])


def drop_unusable(rows: Iterable[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[Dropped]]:
    """Records without a question or an answer cannot be a training example (a permissive
    --where can select invalid ones); drop them and say so rather than export empty prompts."""
    kept, dropped = [], []
    for row in rows:
        if normalize(row.get("question")) and normalize(row.get("answer")):
            kept.append(row)
        else:
            dropped.append(Dropped(row["record_id"], "no_question_or_answer"))
    return kept, dropped


def contamination_detail(row: dict[str, Any]) -> str:
    """'benchmarks: methods' of a contaminated record (the export's drop and the view's)."""
    what = ", ".join(row.get("contamination_benchmarks") or [])
    how = ", ".join(row.get("contamination_methods") or [])
    return f"{what}: {how}"


def drop_contaminated(
    rows: Iterable[dict[str, Any]],
) -> tuple[list[dict[str, Any]], list[Dropped]]:
    """Records a benchmark check flagged (`contaminated`, from the catalog's
    curriculum_quality view) would put evaluation questions into training: drop them."""
    kept, dropped = [], []
    for row in rows:
        if row.get("contaminated"):
            detail = contamination_detail(row)
            dropped.append(Dropped(row["record_id"], "contaminated", None, detail))
        else:
            kept.append(row)
    return kept, dropped


def drop_shortcuts(
    rows: Iterable[dict[str, Any]],
) -> tuple[list[dict[str, Any]], list[Dropped]]:
    """Multi-hop records a closed-book or one-search solver answers (`shortcut`, from
    generation's gates.shortcut) teach no multi-hop search: drop them. NULL (single-hop, not
    checked) is kept."""
    kept, dropped = [], []
    for row in rows:
        if row.get("shortcut_verdict", "fail" if row.get("shortcut") else None) == "fail":
            detail = (
                f"closed-book accuracy {row.get('closed_book_accuracy')}, "
                f"one-search accuracy {row.get('one_search_accuracy')}"
            )
            dropped.append(Dropped(row["record_id"], "shortcut", None, detail))
        else:
            kept.append(row)
    return kept, dropped


def drop_ambiguous(
    rows: Iterable[dict[str, Any]],
) -> tuple[list[dict[str, Any]], list[Dropped]]:
    """Records whose solver rollouts converge on several retrieved-supported answers
    (`unique_answer` false) reward one answer where the corpus backs others: drop them."""
    kept, dropped = [], []
    for row in rows:
        fallback = "fail" if row.get("unique_answer") is False else None
        if row.get("uniqueness_verdict", fallback) == "fail":
            detail = "answers: " + " | ".join(row.get("answer_candidates") or [])
            dropped.append(Dropped(row["record_id"], "ambiguous_answer", None, detail))
        else:
            kept.append(row)
    return kept, dropped


def undetermined_detail(gates: Iterable[str], gold_n: int | None) -> str:
    """Why an undetermined record is left out (the export's drop and the view's rejection)."""
    return f"{' and '.join(gates)} undetermined: gold-evidence answers correct 0 of {gold_n}"


def drop_undetermined(
    rows: Iterable[dict[str, Any]],
) -> tuple[list[dict[str, Any]], list[Dropped]]:
    """Records the shortcut or uniqueness gate could not judge (no solver answer was correct
    even with the gold evidence): nothing shows they are answerable, let alone unique."""
    kept, dropped = [], []
    for row in rows:
        gates = [g for g in ("shortcut", "uniqueness") if row.get(f"{g}_verdict") == "undetermined"]
        if gates:
            detail = undetermined_detail(gates, row.get("gold_n"))
            dropped.append(Dropped(row["record_id"], "undetermined", None, detail))
        else:
            kept.append(row)
    return kept, dropped


def review_detail(row: dict[str, Any]) -> str:
    """Who rejected a record, when and why (dropped.jsonl's detail of a review rejection)."""
    at = row.get("reviewed_at")
    when = at.isoformat() if hasattr(at, "isoformat") else at
    return f"{row.get('review_reason')} (reviewer {row.get('reviewer')}, {when})"


def drop_reviewed(
    rows: Iterable[dict[str, Any]], reviewed_only: bool = False
) -> tuple[list[dict[str, Any]], list[Dropped], list[Dropped]]:
    """A reviewer's latest verdict (`review_verdict`, view review_latest) over the gates':
    records whose latest review is `reject` are dropped; with `reviewed_only`, so are those
    no reviewer accepted (not reviewed). Returns kept, review-rejected, not reviewed."""
    kept, rejected, unreviewed = [], [], []
    for row in rows:
        verdict = row.get("review_verdict")
        if verdict == "reject":
            rejected.append(Dropped(row["record_id"], "review_rejected", None, review_detail(row)))
        elif reviewed_only and verdict != "accept":
            unreviewed.append(Dropped(row["record_id"], "not_reviewed"))
        else:
            kept.append(row)
    return kept, rejected, unreviewed


def dedupe_by(
    rows: Iterable[dict[str, Any]], key: Callable[[dict[str, Any]], str], reason: str
) -> tuple[list[dict[str, Any]], list[Dropped]]:
    """One record per key: the highest verifier_v wins, ties go to the smallest record_id, so
    the result does not depend on the order the catalog returned rows in."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(key(row), []).append(row)
    kept, dropped = [], []
    for group, members in groups.items():
        members.sort(key=_winner_key)
        win = members[0]
        kept.append(win)
        detail = f"cluster {group}" if reason == "near_duplicate" else None
        dropped += [Dropped(m["record_id"], reason, win["record_id"], detail) for m in members[1:]]
    kept.sort(key=lambda r: r["record_id"])
    dropped.sort(key=lambda d: d.record_id)
    return kept, dropped


def question_key(row: dict[str, Any]) -> str:
    """The question dedupe's key: the project's Norm of the question."""
    return normalize(row.get("question"))


def near_duplicate_key(row: dict[str, Any]) -> Any:
    """The near-duplicate dedupe's key: the record's cluster, or the record alone."""
    return row.get("duplicate_cluster_id") or row["record_id"]


@dataclass
class Drops:
    """What an export leaves out of the selected rows, by reason, in the order dropped.jsonl
    lists them (its fields' order: DROP_CATEGORIES)."""

    unusable: list[Dropped] = field(default_factory=list)  # no question or no answer
    below_threshold: list[Dropped] = field(default_factory=list)
    contaminated: list[Dropped] = field(default_factory=list)
    shortcuts: list[Dropped] = field(default_factory=list)
    ambiguous: list[Dropped] = field(default_factory=list)
    undetermined: list[Dropped] = field(default_factory=list)
    # custom generation gates (gates.custom), each under its own reason
    gated: list[Dropped] = field(default_factory=list)
    # the latest review of the record is a reject
    review_rejected: list[Dropped] = field(default_factory=list)
    not_reviewed: list[Dropped] = field(default_factory=list)  # --reviewed-only: none accepted
    duplicates: list[Dropped] = field(default_factory=list)
    near_duplicates: list[Dropped] = field(default_factory=list)


# dropped.jsonl's categories, in its order (a category's rank is its index).
DROP_CATEGORIES = tuple(f.name for f in fields(Drops))
# The view's rejection reasons (export_selection.view_rejection) by category; any other
# reason is a custom gate's (`gated`, listed by reason).
VIEW_CATEGORY = {
    "contaminated": "contaminated",
    "shortcut": "shortcuts",
    "ambiguous_answer": "ambiguous",
    "undetermined": "undetermined",
    "duplicate_question": "duplicates",
    "near_duplicate": "near_duplicates",
    "below_v_threshold": "below_threshold",
}


def view_category(reason: str) -> str:
    return VIEW_CATEGORY.get(reason, "gated")


def drop_counts(sizes: dict[str, int], custom: dict[str, int]) -> dict[str, Any]:
    """The manifest's counts of the drops: `sizes` per category, `custom` per custom gate's
    reason (shown only when a selected run had a custom gate)."""
    return {
        "no_question_or_answer": sizes["unusable"],
        "below_v_threshold_dropped": sizes["below_threshold"],
        "contaminated_dropped": sizes["contaminated"],
        "shortcuts_dropped": sizes["shortcuts"],
        "ambiguous_dropped": sizes["ambiguous"],
        "undetermined_dropped": sizes["undetermined"],
        "review_rejected": sizes["review_rejected"],
        "not_reviewed": sizes["not_reviewed"],
        "duplicates_dropped": sizes["duplicates"],
        "near_duplicates_dropped": sizes["near_duplicates"],
        **({"custom_gates_dropped": dict(sorted(custom.items()))} if custom else {}),
    }


def drop_rows(
    rows: Iterable[dict[str, Any]], included: dict[str, bool], reviewed_only: bool = False
) -> tuple[list[dict[str, Any]], Drops]:
    """The export's per-row drops (each row on its own, so they run on any batch of
    rows): rows without a question or an answer, the gates' rejections (unless included),
    the reviewers' rejections (and, with `reviewed_only`, the records no reviewer
    accepted)."""
    usable, drops = drop_unusable(rows)
    drops = Drops(unusable=drops)
    if not included["contaminated"]:
        usable, drops.contaminated = drop_contaminated(usable)
    if not included["shortcuts"]:
        usable, drops.shortcuts = drop_shortcuts(usable)
    if not included["ambiguous"]:
        usable, drops.ambiguous = drop_ambiguous(usable)
    if not included["undetermined"]:
        usable, drops.undetermined = drop_undetermined(usable)
    usable, drops.review_rejected, drops.not_reviewed = drop_reviewed(usable, reviewed_only)
    return usable, drops


def view_drops(rejected: Iterable[Dropped]) -> Drops:
    """What the accepted view left out, under the export's categories (a custom gate's
    rejections sorted by reason, each kept in the given order)."""
    drops, gated = Drops(), {}
    for d in rejected:
        category = view_category(d.reason)
        if category == "gated":
            gated.setdefault(d.reason, []).append(d)
        else:
            getattr(drops, category).append(d)
    drops.gated = [d for _, ds in sorted(gated.items()) for d in ds]
    return drops


# ---- split (pure) ----------------------------------------------------------------------


def anchors_of(row: dict[str, Any], by: str) -> list[str]:
    """Keys that tie a record to others: its passages, plus its source cluster when by=cluster.

    Cluster ids are numbered per selector iteration, so across runs one id may name different
    clusters; uniting them is coarser than needed but can never leak a cluster."""
    keys = [f"passage:{row['source_passage_id']}"]
    if row.get("evidence_passage_id"):
        keys.append(f"passage:{row['evidence_passage_id']}")
    if by == "cluster" and row.get("cluster_id") is not None:
        keys.append(f"cluster:{row['cluster_id']}")
    return keys


def split_hash(group_key: str, seed: int = 0) -> float:
    """A group's uniform draw in [0, 1): sha256, so it is the same on every machine/Python."""
    digest = hashlib.sha256(f"{seed}\x00{group_key}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


@dataclass(frozen=True)
class SplitResult:
    groups: dict[str, int]  # split -> number of groups
    forced: str | None  # why a group was moved to keep both splits non-empty


def check_fraction(validation_fraction: float) -> None:
    if not 0.0 <= validation_fraction < 1.0:
        raise ValueError(f"validation_fraction must be in [0, 1), not {validation_fraction}")


def forced_move(
    groups: int, validation: int, validation_fraction: float, largest: str, smallest: str
) -> tuple[str | None, str | None]:
    """The group whose side flips so that both splits are non-empty, and why; (None, None)
    when none does. `groups` groups, `validation` of them hashed below the fraction;
    `largest` / `smallest`: the keys of the groups with the largest / smallest (draw, key).

    Small exports: hashing can leave a side empty. With a fraction > 0 and at least two groups,
    the group with the smallest hash moves to validation (or the largest back to train), so
    both splits are non-empty; a single group cannot be split without a leak: it trains."""
    if groups and validation == groups:
        return largest, f"every group hashed into validation; moved group {largest} to train"
    if validation_fraction > 0 and groups >= 2 and not validation:
        why = f"no group hashed below {validation_fraction}; moved group {smallest} to validation"
        return smallest, why
    return None, None
