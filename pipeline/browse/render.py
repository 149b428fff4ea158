"""Pure helpers that turn stored values into what a page draws: the evidence inside its
passage (from the stored character offsets) and the KG path as positioned SVG parts.

They return plain values; the templates escape every string (autoescape), so a record's text
is only ever text."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Highlight:
    before: str
    evidence: str
    after: str
    exact: bool  # the offsets cut out exactly the stored evidence
    note: str | None = None


def highlight(text: str, evidence: str, start: int | None, end: int | None) -> Highlight:
    """Split `text` around the evidence at [start, end). When the offsets do not cut out the
    evidence (a record written before offsets, or a mismatch), the first exact occurrence is
    marked instead and the note says so."""
    if start is not None and end is not None and 0 <= start <= end <= len(text):
        if text[start:end] == evidence:
            return Highlight(text[:start], text[start:end], text[end:], True)
        note = f"stored offsets [{start}, {end}) do not cut out the evidence"
    else:
        note = "no stored offsets"
    at = text.find(evidence) if evidence else -1
    if at < 0:
        return Highlight(text, "", "", False, f"{note}; the evidence is not in this passage")
    return Highlight(
        text[:at], evidence, text[at + len(evidence) :], False, f"{note}; found at {at}"
    )


@dataclass(frozen=True)
class ChainHop:
    hop: dict[str, Any]  # the evidence_chain entry: hop, subject, relation, object, source, ...
    title: str | None  # its passage's title (None: the passage is not in the catalog)
    marked: Highlight | None


def chain_marks(chain: list[dict] | None, passages: dict[str, dict]) -> list[ChainHop]:
    """Each hop of a record's evidence chain marked inside its own passage."""
    out = []
    for h in chain or []:
        p = passages.get(h["passage_id"])
        marked = (
            highlight(p["text"], h["text"] or "", h["char_start"], h["char_end"]) if p else None
        )
        out.append(ChainHop(h, p["title"] if p else None, marked))
    return out


@dataclass(frozen=True)
class SvgNode:
    x: int
    y: int
    label: str
    qid: str
    kind: str  # seed | waypoint | answer | distractor


@dataclass(frozen=True)
class SvgEdge:
    x1: int
    y1: int
    x2: int
    y2: int
    label: str
    distractor: bool


@dataclass(frozen=True)
class PathDrawing:
    width: int
    height: int
    nodes: list[SvgNode]
    edges: list[SvgEdge]


STEP_X, ROW_Y, MARGIN, NODE_W = 270, 90, 20, 150  # a 120-pixel gap holds a relation label


def _text(part: Any, key: str) -> str:
    """A node's or relation's `key` as text: a stored path is data, and a NULL label (or a
    part that is not an object) draws as an empty one."""
    value = part.get(key) if isinstance(part, dict) else None
    return "" if value is None else str(value)


def path_drawing(
    kg_path: dict[str, Any] | None,
    waypoints: list[str] | None = None,
    distractors: list[dict[str, Any]] | None = None,
) -> PathDrawing | None:
    """The record's KG path left to right (seed, waypoints, the answer entity last), with each
    distractor branch on its own row under the node it leaves from."""
    if not kg_path or not kg_path.get("nodes"):
        return None
    nodes_in, rels = kg_path["nodes"], kg_path.get("relations") or []
    marked = set(waypoints or [])
    nodes: list[SvgNode] = []
    edges: list[SvgEdge] = []
    x_of: dict[str, int] = {}
    y0 = MARGIN + 20
    for i, n in enumerate(nodes_in):
        x = MARGIN + i * STEP_X
        kind = "seed" if i == 0 else "answer" if i == len(nodes_in) - 1 else "waypoint"
        if kind == "waypoint" and marked and _text(n, "label") not in marked:
            kind = "node"
        nodes.append(SvgNode(x, y0, _text(n, "label"), _text(n, "id"), kind))
        x_of[_text(n, "id")] = x
        if i:
            label = _text(rels[i - 1], "label") if i - 1 < len(rels) else ""
            edges.append(SvgEdge(x - STEP_X + NODE_W, y0, x, y0, label, False))
    row = 1
    for branch in distractors or []:
        if not isinstance(branch, dict):
            continue
        b_nodes, b_rels = branch.get("nodes") or [], branch.get("relations") or []
        if not b_nodes or _text(b_nodes[0], "id") not in x_of:
            continue
        y = y0 + row * ROW_Y
        x_prev, y_prev = x_of[_text(b_nodes[0], "id")], y0
        for j, n in enumerate(b_nodes[1:], start=1):
            x = x_prev + STEP_X
            nodes.append(SvgNode(x, y, _text(n, "label"), _text(n, "id"), "distractor"))
            label = _text(b_rels[j - 1], "label") if j - 1 < len(b_rels) else ""
            edges.append(SvgEdge(x_prev + NODE_W // 2, y_prev + 15, x, y, label, True))
            x_prev, y_prev = x, y
        row += 1
    width = max(n.x for n in nodes) + NODE_W + MARGIN
    height = y0 + (row - 1) * ROW_Y + 40 + MARGIN
    return PathDrawing(width, height, nodes, edges)
