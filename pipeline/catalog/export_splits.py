"""The pure half of an export: drop unusable rows, deduplicate questions, and split train /
validation by whole passage (or cluster) groups, over plain row dicts so each rule is tested on
hand-made rows."""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, fields
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


def _dedupe_by(
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


def dedupe_questions(
    rows: Iterable[dict[str, Any]],
) -> tuple[list[dict[str, Any]], list[Dropped]]:
    """One record per Norm(question) (see `_dedupe_by`).

    Returns the kept rows (sorted by record_id) and one `Dropped` per removed duplicate."""
    return _dedupe_by(rows, lambda r: normalize(r.get("question")), "duplicate_question")


def dedupe_near_duplicates(
    rows: Iterable[dict[str, Any]],
) -> tuple[list[dict[str, Any]], list[Dropped]]:
    """One record per near-duplicate cluster (`duplicate_cluster_id`, written by `curriculum
    quality near-duplicates`); a record not clustered yet stands alone."""
    return _dedupe_by(
        rows, lambda r: r.get("duplicate_cluster_id") or r["record_id"], "near_duplicate"
    )


@dataclass
class Drops:
    """What an export leaves out of the selected rows, by reason, in the order dropped.jsonl
    lists them."""

    unusable: list[Dropped]  # no question or no answer
    below_threshold: list[Dropped]
    contaminated: list[Dropped]
    shortcuts: list[Dropped]
    ambiguous: list[Dropped]
    undetermined: list[Dropped]
    gated: list[Dropped]  # custom generation gates (gates.custom), each under its own reason
    review_rejected: list[Dropped]  # the latest review of the record is a reject
    not_reviewed: list[Dropped]  # --reviewed-only: no reviewer accepted it
    duplicates: list[Dropped]
    near_duplicates: list[Dropped]

    def in_order(self) -> list[Dropped]:
        return [d for f in fields(self) for d in getattr(self, f.name)]

    def counts(self) -> dict[str, int]:
        return {
            "no_question_or_answer": len(self.unusable),
            "below_v_threshold_dropped": len(self.below_threshold),
            "contaminated_dropped": len(self.contaminated),
            "shortcuts_dropped": len(self.shortcuts),
            "ambiguous_dropped": len(self.ambiguous),
            "undetermined_dropped": len(self.undetermined),
            "review_rejected": len(self.review_rejected),
            "not_reviewed": len(self.not_reviewed),
            "duplicates_dropped": len(self.duplicates),
            "near_duplicates_dropped": len(self.near_duplicates),
            # by reason, and only when a selected run had a custom gate
            **({"custom_gates_dropped": custom} if (custom := self._custom()) else {}),
        }

    def _custom(self) -> dict[str, int]:
        return dict(sorted(Counter(d.reason for d in self.gated).items()))


def drop_and_dedupe(
    rows: Sequence[dict[str, Any]],
    rejected: Sequence[Dropped],
    included: dict[str, bool],
    reviewed_only: bool = False,
) -> tuple[list[dict[str, Any]], Drops]:
    """The rows an export keeps of `rows`, and what it drops: rows without a question or an
    answer, the gates' rejections (unless included), the reviewers' rejections (and, with
    `reviewed_only`, the records no reviewer accepted), duplicate questions and near-duplicate
    clusters; `rejected` (what the accepted view left out) joins under the same names.
    `included` names the gates whose rejections stay in (contaminated, shortcuts, ambiguous,
    undetermined).

    Reviews come after the gates and before the dedupe, as the gates do in the view: one
    record per question among those left. (With the default selection the view has deduped
    already, before any review: a rejected record does not bring back a duplicate of it.)"""
    usable, unusable = drop_unusable(rows)
    contaminated: list[Dropped] = []
    if not included["contaminated"]:
        usable, contaminated = drop_contaminated(usable)
    shortcuts: list[Dropped] = []
    if not included["shortcuts"]:
        usable, shortcuts = drop_shortcuts(usable)
    ambiguous: list[Dropped] = []
    if not included["ambiguous"]:
        usable, ambiguous = drop_ambiguous(usable)
    undetermined: list[Dropped] = []
    if not included["undetermined"]:
        usable, undetermined = drop_undetermined(usable)
    usable, review_rejected, not_reviewed = drop_reviewed(usable, reviewed_only)
    kept, duplicates = dedupe_questions(usable)
    kept, near_duplicates = dedupe_near_duplicates(kept)
    by_view: dict[str, list[Dropped]] = {}
    for d in rejected:  # what the accepted view left out, under the same names
        by_view.setdefault(d.reason, []).append(d)
    contaminated += by_view.pop("contaminated", [])
    shortcuts += by_view.pop("shortcut", [])
    ambiguous += by_view.pop("ambiguous_answer", [])
    undetermined += by_view.pop("undetermined", [])
    duplicates += by_view.pop("duplicate_question", [])
    near_duplicates += by_view.pop("near_duplicate", [])
    below_threshold = by_view.pop("below_v_threshold", [])
    gated = [d for _, ds in sorted(by_view.items()) for d in ds]  # the rest: custom gates
    drops = Drops(
        unusable,
        below_threshold,
        contaminated,
        shortcuts,
        ambiguous,
        undetermined,
        gated,
        review_rejected,
        not_reviewed,
        duplicates,
        near_duplicates,
    )
    return kept, drops


# ---- split (pure) ----------------------------------------------------------------------


class _UnionFind:
    def __init__(self, n: int) -> None:
        self.parent = list(range(n))

    def find(self, i: int) -> int:
        root = i
        while self.parent[root] != root:
            root = self.parent[root]
        while self.parent[i] != root:  # path compression
            self.parent[i], i = root, self.parent[i]
        return root

    def union(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)


def _anchors(row: dict[str, Any], by: str) -> list[str]:
    """Keys that tie a record to others: its passages, plus its source cluster when by=cluster.

    Cluster ids are numbered per selector iteration, so across runs one id may name different
    clusters; uniting them is coarser than needed but can never leak a cluster."""
    keys = [f"passage:{row['source_passage_id']}"]
    if row.get("evidence_passage_id"):
        keys.append(f"passage:{row['evidence_passage_id']}")
    if by == "cluster" and row.get("cluster_id") is not None:
        keys.append(f"cluster:{row['cluster_id']}")
    return keys


def group_records(rows: Sequence[dict[str, Any]], by: str = "passage") -> list[str]:
    """Group key per row: rows sharing any passage (source or evidence), transitively, get the
    same key (union-find); the key is the group's smallest anchor, stable across exports."""
    if by not in SPLIT_BY:
        raise ValueError(f"split_by must be one of {SPLIT_BY}, not {by!r}")
    uf = _UnionFind(len(rows))
    first: dict[str, int] = {}
    anchors = [_anchors(r, by) for r in rows]
    for i, keys in enumerate(anchors):
        for k in keys:
            j = first.setdefault(k, i)
            if j != i:
                uf.union(i, j)
    key_of_root: dict[int, str] = {}
    for i, keys in enumerate(anchors):
        root = uf.find(i)
        smallest = min(keys)
        if root not in key_of_root or smallest < key_of_root[root]:
            key_of_root[root] = smallest
    return [key_of_root[uf.find(i)] for i in range(len(rows))]


def split_hash(group_key: str, seed: int = 0) -> float:
    """A group's uniform draw in [0, 1): sha256, so it is the same on every machine/Python."""
    digest = hashlib.sha256(f"{seed}\x00{group_key}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


@dataclass(frozen=True)
class SplitResult:
    splits: list[str]  # per input row: train | validation
    groups: dict[str, int]  # split -> number of groups
    forced: str | None  # why a group was moved to keep both splits non-empty


def assign_splits(
    rows: Sequence[dict[str, Any]],
    validation_fraction: float = 0.1,
    by: str = "passage",
    seed: int = 0,
) -> SplitResult:
    """Put whole groups (see `group_records`) into validation when their hash < fraction.

    Small exports: hashing can leave a side empty. With a fraction > 0 and at least two groups,
    the group with the smallest hash moves to validation (or the largest back to train), so
    both splits are non-empty; a single group cannot be split without a leak: it trains."""
    if not 0.0 <= validation_fraction < 1.0:
        raise ValueError(f"validation_fraction must be in [0, 1), not {validation_fraction}")
    keys = group_records(rows, by)
    draws = {k: split_hash(k, seed) for k in set(keys)}
    side = {k: "validation" if h < validation_fraction else "train" for k, h in draws.items()}
    forced = None
    val = [k for k in side if side[k] == "validation"]
    if draws and len(val) == len(side):
        k = max(draws, key=lambda g: (draws[g], g))
        side[k] = "train"
        forced = f"every group hashed into validation; moved group {k} to train"
    elif validation_fraction > 0 and len(draws) >= 2 and not val:
        k = min(draws, key=lambda g: (draws[g], g))
        side[k] = "validation"
        forced = f"no group hashed below {validation_fraction}; moved group {k} to validation"
    counts = {s: sum(1 for v in side.values() if v == s) for s in SPLITS}
    return SplitResult([side[k] for k in keys], counts, forced)


def shared_passages(rows: Sequence[dict[str, Any]], splits: Sequence[str]) -> set[str]:
    """Passages (source or evidence) that occur in both splits; empty for a correct split."""
    seen: dict[str, set[str]] = {s: set() for s in SPLITS}
    for row, s in zip(rows, splits, strict=True):
        seen[s].add(row["source_passage_id"])
        if row.get("evidence_passage_id"):
            seen[s].add(row["evidence_passage_id"])
    return seen["train"] & seen["validation"]
