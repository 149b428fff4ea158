"""Few-shot prompts for base (not instruction-tuned) models.

The few-shot examples live in data/prompts/ so prompt changes are data changes, recorded in
the config hash, and never require code edits.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import orjson

from pipeline.evidence import sentences

PROPOSER_INSTRUCTION = (
    "Read each passage and write one factual question that the passage answers, the short "
    "answer copied from the passage, and the supporting evidence."
)
ANSWER_INSTRUCTION = "Answer each question with a short phrase."
# Generation stops where the model would start the next few-shot block.
PROPOSER_STOP = ("\nPassage", "\n\n")
ANSWER_STOP = ("\n",)


@dataclass(frozen=True)
class FewShot:
    title: str
    text: str
    question: str
    answer: str
    evidence_sentence: int  # 1-based


def load_few_shot(path: str | Path) -> list[FewShot]:
    rows = []
    with Path(path).open("rb") as fh:
        for lineno, raw in enumerate(fh, 1):
            if raw.strip():
                try:
                    rows.append(FewShot(**orjson.loads(raw)))
                except (orjson.JSONDecodeError, TypeError) as exc:
                    raise ValueError(f"{path}:{lineno}: bad few-shot example: {exc}") from exc
    if not rows:
        raise ValueError(f"{path}: no few-shot examples")
    return rows


def _numbered(text: str) -> str:
    return "\n".join(f"[{i}] {s.text}" for i, s in enumerate(sentences(text), 1))


def render_path(path: dict) -> str:
    """A KG path as text: 'Albert Einstein -> place of birth -> Ulm -> country -> Germany'."""
    parts = [path["nodes"][0]["label"] or path["nodes"][0]["id"]]
    for rel, node in zip(path["relations"], path["nodes"][1:], strict=True):
        parts += [rel["label"] or rel["id"], node["label"] or node["id"]]
    return " -> ".join(parts)


def proposer_prompt(
    title: str, text: str, shots: Sequence[FewShot], mode: str, facts: str | None = None
) -> str:
    """Constrained mode numbers the sentences and asks for one; free mode asks for a copy.

    `facts` is a KG path linked to the passage, offered as relational context (the answer and
    evidence must still come from the passage)."""
    blocks = [PROPOSER_INSTRUCTION, ""]
    for s in shots:
        if mode == "constrained":
            evidence = f"[{s.evidence_sentence}]"
            body = _numbered(s.text)
        else:
            evidence = sentences(s.text)[s.evidence_sentence - 1].text
            body = s.text
        blocks += [
            f"Passage ({s.title}):",
            body,
            f"Question: {s.question}",
            f"Answer: {s.answer}",
            f"Evidence: {evidence}",
            "",
        ]
    body = _numbered(text) if mode == "constrained" else text
    blocks += [f"Passage ({title}):", body]
    if facts:
        blocks.append(f"Related facts: {facts}")
    blocks.append("Question:")
    return "\n".join(blocks)


def answer_prompt(question: str, shots: Sequence[FewShot], context: str | None = None) -> str:
    """Single-turn, search-disabled answering, with or without an evidence context."""
    blocks = [ANSWER_INSTRUCTION, ""]
    for s in shots:
        if context is not None:
            blocks.append(f"Context: {sentences(s.text)[s.evidence_sentence - 1].text}")
        blocks += [f"Question: {s.question}", f"Answer: {s.answer}", ""]
    if context is not None:
        blocks.append(f"Context: {context}")
    blocks += [f"Question: {question}", "Answer:"]
    return "\n".join(blocks)


def solver_prompt(question: str, docs: str, shots: Sequence[FewShot]) -> str:
    """Retrieval-augmented answering: the top-k search results for the question, then answer."""
    blocks = [ANSWER_INSTRUCTION + " Use the search results.", ""]
    for s in shots[:2]:
        blocks += [
            f"Search results:\nDoc 1(Title: {s.title}) {s.text}",
            f"Question: {s.question}",
            f"Answer: {s.answer}",
            "",
        ]
    blocks += [f"Search results:\n{docs}", f"Question: {question}", "Answer:"]
    return "\n".join(blocks)
