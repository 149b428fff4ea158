"""Proposer: turn a source passage into (question, answer, evidence) and check the evidence."""

from __future__ import annotations

import re
from dataclasses import dataclass

from pipeline.agents.prompts import FewShot
from pipeline.evidence import locate, sentences
from pipeline.rewards import token_f1

_FIELD = re.compile(r"^\s*(Question|Answer|Evidence)\s*:\s*(.*)$", re.IGNORECASE)
_SENT_REF = re.compile(r"^\[?\s*(\d{1,3})\s*\]?")


@dataclass(frozen=True)
class Proposal:
    question: str | None
    answer: str | None
    evidence: str | None
    evidence_start: int | None
    evidence_end: int | None
    evidence_passage_id: str | None
    evidence_source: str  # source | retrieved | none
    evidence_status: str  # verbatim | not_in_source | bad_sentence_ref | missing
    raw: str


def parse_fields(raw: str) -> dict[str, str]:
    """Read `Question:/Answer:/Evidence:` lines; the completion starts after 'Question:'."""
    fields: dict[str, str] = {}
    lines = ("Question:" + raw).splitlines()
    for line in lines:
        m = _FIELD.match(line)
        if m:
            key = m.group(1).lower()
            if key not in fields:  # first occurrence wins; later ones are run-on text
                fields[key] = m.group(2).strip()
    return fields


def parse_proposal(raw: str, passage_id: str, passage_text: str, mode: str) -> Proposal:
    """Parse a completion; the evidence is verbatim by construction (constrained) or located."""
    f = parse_fields(raw)
    q, a, ev = f.get("question") or None, f.get("answer") or None, f.get("evidence") or None
    if ev is None:
        return Proposal(q, a, None, None, None, None, "none", "missing", raw)
    if mode == "constrained":
        m = _SENT_REF.match(ev)
        sents = sentences(passage_text)
        if not m or not 1 <= int(m.group(1)) <= len(sents):
            return Proposal(q, a, ev, None, None, None, "none", "bad_sentence_ref", raw)
        s = sents[int(m.group(1)) - 1]
        return Proposal(q, a, s.text, s.start, s.end, passage_id, "source", "verbatim", raw)
    loc = locate(ev, passage_id, passage_text)
    if loc is None:
        return Proposal(q, a, ev, None, None, None, "none", "not_in_source", raw)
    return Proposal(q, a, ev, loc.start, loc.end, loc.passage_id, loc.source, "verbatim", raw)


def copies_example(question: str | None, shots: list[FewShot], threshold: float = 0.8) -> bool:
    """A base model often repeats a few-shot question verbatim for an unrelated passage; such a
    record is a prompt artifact, and its answer is in the verifier's prompt too."""
    return bool(question) and any(token_f1(question, s.question) >= threshold for s in shots)
