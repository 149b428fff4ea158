"""The whole-in-memory export the streaming one is checked against: the export's pure rules
(pipeline/catalog/export_splits.py) composed over a list of row dicts, as the export applied
them before it kept its per-record state in a ledger (export_ledger), and the split's
grouping as the export computed it then, in numpy (the ledger's is SQL). Tests only."""

from __future__ import annotations

import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pipeline.catalog.export_ledger import Ledger
from pipeline.catalog.export_selection import Selection, select_records
from pipeline.catalog.export_splits import (
    DROP_CATEGORIES,
    SPLIT_BY,
    SPLITS,
    Dropped,
    Drops,
    SplitResult,
    anchors_of,
    check_fraction,
    dedupe_by,
    drop_rows,
    forced_move,
    near_duplicate_key,
    question_key,
    split_hash,
    view_drops,
)


def dedupe_questions(
    rows: Iterable[dict[str, Any]],
) -> tuple[list[dict[str, Any]], list[Dropped]]:
    """One record per Norm(question) (see `dedupe_by`).

    Returns the kept rows (sorted by record_id) and one `Dropped` per removed duplicate."""
    return dedupe_by(rows, question_key, "duplicate_question")


def dedupe_near_duplicates(
    rows: Iterable[dict[str, Any]],
) -> tuple[list[dict[str, Any]], list[Dropped]]:
    """One record per near-duplicate cluster (`duplicate_cluster_id`, written by `curriculum
    quality near-duplicates`); a record not clustered yet stands alone."""
    return dedupe_by(rows, near_duplicate_key, "near_duplicate")


def drop_and_dedupe(
    rows: Sequence[dict[str, Any]],
    rejected: Sequence[Dropped],
    included: dict[str, bool],
    reviewed_only: bool = False,
) -> tuple[list[dict[str, Any]], Drops]:
    """The rows an export keeps of `rows`, and what it drops: `drop_rows`, then duplicate
    questions and near-duplicate clusters; `rejected` (what the accepted view left out) joins
    under the same names, after the export's own drops of each category. `included` names
    the gates whose rejections stay in (contaminated, shortcuts, ambiguous, undetermined).

    Reviews come after the gates and before the dedupe, as the gates do in the view: one
    record per question among those left. (With the default selection the view has deduped
    already, before any review: a rejected record does not bring back a duplicate of it.)"""
    usable, drops = drop_rows(rows, included, reviewed_only)
    kept, drops.duplicates = dedupe_questions(usable)
    kept, drops.near_duplicates = dedupe_near_duplicates(kept)
    by_view = view_drops(rejected)
    for name in DROP_CATEGORIES:
        getattr(drops, name).extend(getattr(by_view, name))
    return kept, drops


def group_records(rows: Sequence[dict[str, Any]], by: str = "passage") -> list[str]:
    """Group key per row: rows sharing any passage (source or evidence), transitively, get the
    same key (`anchor_groups`); the key is the group's smallest anchor, stable across
    exports."""
    if by not in SPLIT_BY:
        raise ValueError(f"split_by must be one of {SPLIT_BY}, not {by!r}")
    names, edge_row, edge_anchor = anchor_edges(rows, by)
    return [names[g] for g in anchor_groups(len(rows), edge_row, edge_anchor)]


@dataclass(frozen=True)
class AssignedSplits(SplitResult):
    """The split's summary with each input row's side (the pipeline keeps those in its
    ledger instead)."""

    splits: list[str]  # per input row: train | validation


def assign_splits(
    rows: Sequence[dict[str, Any]],
    validation_fraction: float = 0.1,
    by: str = "passage",
    seed: int = 0,
) -> AssignedSplits:
    """Put whole groups (see `group_records`) into validation by `group_sides`."""
    check_fraction(validation_fraction)
    keys = group_records(rows, by)
    names = sorted(set(keys))
    draws = np.array([split_hash(k, seed) for k in names], np.float64)
    val, counts, forced = group_sides(draws, validation_fraction, names.__getitem__)
    side = {k: SPLITS[int(v)] for k, v in zip(names, val, strict=True)}
    return AssignedSplits(counts, forced, [side[k] for k in keys])


def ledger_splits(
    rows: Sequence[dict[str, Any]],
    validation_fraction: float = 0.1,
    by: str = "passage",
    seed: int = 0,
) -> AssignedSplits:
    """The pipeline's split of `rows` (export_ledger.Ledger, in SQL), as `assign_splits`
    returns it, so each split rule's test runs on both."""
    with tempfile.TemporaryDirectory() as scratch, Ledger(Path(scratch), by) as ledger:
        ledger.add(rows, Drops(), Drops())
        res, leaked = ledger.split(validation_fraction, seed)
        assert not leaked
        placed = ledger.placement(sorted({r["run_id"] for r in rows}))
    return AssignedSplits(res.groups, res.forced, [placed[r["record_id"]][0] for r in rows])


def shared_passages(rows: Sequence[dict[str, Any]], splits: Sequence[str]) -> set[str]:
    """Passages (source or evidence) that occur in both splits; empty for a correct split."""
    names, edge_row, edge_anchor = anchor_edges(rows, "passage")
    validation = np.array([s == "validation" for s in splits], bool)
    both = anchors_in_both(validation, edge_row, edge_anchor)
    return {names[k].removeprefix("passage:") for k in both}


def select_all(
    catalog: Any, where: str | None, run_ids: Sequence[str] = (), **kw: Any
) -> tuple[Selection, list[Any], list[Dropped]]:
    """select_records with every batch collected: the selection, its rows and the view's
    rejections, each in record_id order."""
    rows: list[Any] = []
    rejected: list[Dropped] = []

    def collect(got: list[Any], dropped: list[Dropped]) -> None:
        rows.extend(got)
        rejected.extend(dropped)

    sel = select_records(catalog, where, run_ids, on_batch=collect, **kw)
    rows.sort(key=lambda r: r["record_id"])
    rejected.sort(key=lambda d: d.record_id)
    return sel, rows, rejected


def anchor_edges(
    rows: Sequence[dict[str, Any]], by: str
) -> tuple[list[str], np.ndarray, np.ndarray]:
    """The rows' anchors in sorted order, and the (row, anchor code) edges."""
    anchors = [anchors_of(r, by) for r in rows]
    names = sorted({k for keys in anchors for k in keys})
    code = {k: i for i, k in enumerate(names)}
    edge_row = np.array([i for i, keys in enumerate(anchors) for _ in keys], np.int64)
    edge_anchor = np.array([code[k] for keys in anchors for k in keys], np.int64)
    return names, edge_row, edge_anchor


def anchor_groups(rows: int, edge_row: np.ndarray, edge_anchor: np.ndarray) -> np.ndarray:
    """Per row, its group: the smallest anchor code among the rows that share an anchor with
    it, transitively (every row has an anchor). Codes number the anchors in sorted order: the
    smallest code, the smallest anchor. Label propagation with pointer jumping over the
    rows-anchors edges."""
    label = np.arange(int(edge_anchor.max()) + 1 if len(edge_anchor) else 0, dtype=np.int64)
    while True:
        row_label = np.full(rows, np.iinfo(np.int64).max, np.int64)
        np.minimum.at(row_label, edge_row, label[edge_anchor])
        new = label.copy()
        np.minimum.at(new, edge_anchor, row_label[edge_row])
        new = new[new]  # a label is an anchor of the same group: jump to its label
        if np.array_equal(new, label):
            return row_label
        label = new


def group_sides(
    draws: np.ndarray, validation_fraction: float, key_of: Any
) -> tuple[np.ndarray, dict[str, int], str | None]:
    """Which groups go to validation (their hash < fraction, then `forced_move`), given their
    draws in group key order (`key_of(i)`: the i-th key); the mask, the groups per split and
    why a group was moved."""
    val = draws < validation_fraction
    forced = None
    if len(draws):  # the largest (draw, key), the smallest
        big, small = len(draws) - 1 - int(np.argmax(draws[::-1])), int(np.argmin(draws))
        n_val = int(val.sum())
        moved, forced = forced_move(
            len(draws), n_val, validation_fraction, key_of(big), key_of(small)
        )
        if moved is not None:
            k = big if moved == key_of(big) else small
            val[k] = not val[k]
    n = int(val.sum())
    return val, {"train": len(draws) - n, "validation": n}, forced


def anchors_in_both(
    validation: np.ndarray, edge_row: np.ndarray, edge_anchor: np.ndarray
) -> np.ndarray:
    """Codes of the anchors that rows of both splits have (`validation`: per row); none for a
    correct split."""
    size = int(edge_anchor.max()) + 1 if len(edge_anchor) else 0
    on = validation[edge_row]
    seen = np.zeros((2, size), bool)
    seen[0, edge_anchor[~on]] = True
    seen[1, edge_anchor[on]] = True
    return np.flatnonzero(seen[0] & seen[1])
