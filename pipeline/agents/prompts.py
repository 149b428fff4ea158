"""Few-shot prompts for base (not instruction-tuned) models.

The few-shot examples live in data/prompts/ so prompt changes are data changes, recorded in
the config hash, and never require code edits.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import orjson

from pipeline.agents.evidence import sentences

PROPOSER_INSTRUCTION = (
    "Write one question for each answer. The question names its topic, asks for exactly the "
    "given answer, follows the facts, and does not contain the answer."
)
ANSWER_INSTRUCTION = "Answer each question with a short phrase."
SOLVER_INSTRUCTION = (
    "Answer each question. Reason inside <think> and </think>. To look something up, write "
    "<search> query </search>; results appear between <information> and </information>. Search "
    "as often as you need, then give the short final answer inside <answer> and </answer>."
)
EVALACT_INSTRUCTION = (
    "Answer each question. Reason inside <think> and </think>. To look something up, write "
    "<search> query </search>; results appear between <information> and </information>. After "
    'every search, evaluate its results exactly once: <evaluate>{"evaluation": "your '
    'assessment", "score": 0-10}</evaluate>; feedback appears between <feedback> and '
    "</feedback>. Then search again or give the short final answer inside <answer> and </answer>."
)
# Where a base model would start the next few-shot block (multi-turn rollouts also stop at
# </search> and at the agent's final closing tag).
PROPOSER_STOP = ("\nTopic:",)
SOLVER_STOP = ("\nQuestion:",)
ANSWER_STOP = ("\n",)


@dataclass(frozen=True)
class FewShot:
    title: str
    text: str
    question: str
    answer: str
    evidence_sentence: int  # 1-based


def _jsonl(path: str | Path, what: str) -> list[dict]:
    rows = []
    with Path(path).open("rb") as fh:
        for lineno, raw in enumerate(fh, 1):
            if raw.strip():
                try:
                    rows.append(orjson.loads(raw))
                except orjson.JSONDecodeError as exc:
                    raise ValueError(f"{path}:{lineno}: bad {what}: {exc}") from exc
    if not rows:
        raise ValueError(f"{path}: no {what}s")
    return rows


def load_few_shot(path: str | Path) -> list[FewShot]:
    try:
        return [FewShot(**row) for row in _jsonl(path, "few-shot example")]
    except TypeError as exc:
        raise ValueError(f"{path}: bad few-shot example: {exc}") from exc


def render_path(path: dict) -> str:
    """A KG path as text: 'Albert Einstein -> place of birth -> Ulm -> country -> Germany'."""
    parts = [path["nodes"][0]["label"] or path["nodes"][0]["id"]]
    for rel, node in zip(path["relations"], path["nodes"][1:], strict=True):
        parts += [rel["label"] or rel["id"], node["label"] or node["id"]]
    return " -> ".join(parts)


def _doc(s: FewShot) -> str:
    return f"Doc 1(Title: {s.title}) {s.text}"


@dataclass(frozen=True)
class KGShot:
    """A worked KG question: the path the question follows, its end entity, the question."""

    topic: str
    facts: str
    answer: str
    question: str


def load_kg_shots(path: str | Path) -> list[KGShot]:
    return [KGShot(**row) for row in _jsonl(path, "KG question example")]


def _question_block(topic: str, context: str, answer: str, kg: bool) -> list[str]:
    return [f"Topic: {topic}", f"{'Facts' if kg else 'Fact'}: {context}", f"Answer: {answer}"]


def proposer_prompt(
    topic: str,
    context: str,
    answer: str,
    kg: bool,
    shots: Sequence[FewShot],
    kg_shots: Sequence[KGShot] = (),
) -> str:
    """Answer first: the worked examples, then the task's topic, its facts (a KG path) or
    fact (the evidence sentence) and the answer; the model writes only the <question>.

    Demos of the task's own kind come last, next to the task (a base model imitates the
    nearest example most)."""
    passage_demos = [
        [
            *_question_block(s.title, sentences(s.text)[s.evidence_sentence - 1].text, s.answer,
                             False),
            f"<question>{s.question}</question>",
            "",
        ]
        for s in shots[:2]
    ]  # fmt: skip
    kg_demos = [
        [
            *_question_block(s.topic, s.facts, s.answer, True),
            f"<question>{s.question}</question>",
            "",
        ]
        for s in kg_shots[:2]
    ]
    demos = passage_demos + kg_demos if kg else kg_demos + passage_demos
    blocks = [PROPOSER_INSTRUCTION, ""] + [line for d in demos for line in d]
    blocks += _question_block(topic, context, answer, kg)
    return "\n".join(blocks) + "\n"


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


def solver_prompt(question: str, shots: Sequence[FewShot], evalact: bool = False) -> str:
    """Search-R1 protocol: the agent searches, reads <information>, and answers in tags; with
    `evalact`, each search is followed by one Evaluate and the environment's feedback (the
    demos show the paper's JSON format, appendix B)."""
    blocks = [EVALACT_INSTRUCTION if evalact else SOLVER_INSTRUCTION, ""]
    for s in shots[:2]:
        blocks += [
            f"Question: {s.question}",
            f"<think>I need to look up {s.title}.</think>",
            f"<search>{s.question}</search>",
            "",
            f"<information>{_doc(s)}</information>",
            "",
        ]
        if evalact:
            blocks += [
                f'<evaluate>{{"evaluation": "Doc 1 names {s.answer}.", "score": 9}}</evaluate>',
                "",
                "<feedback>Score 9/10 (High Quality): use them as primary evidence.</feedback>",
                "",
            ]
        blocks += [
            f"<think>Doc 1 says {s.answer}.</think>",
            f"<answer>{s.answer}</answer>",
            "",
        ]
    blocks += [f"Question: {question}"]
    return "\n".join(blocks) + "\n"


# ---- ARR (arr-reasoner-verifier.txt appendix A.3): the two roles' prompts ------------------
ARR_REASONER_INSTRUCTION = (
    "Answer each question as a reasoner working with a verifier. Reason inside <think> and "
    "</think>. To look something up, write <search> query </search>; the verifier reads the "
    "results and replies between <feedback> and </feedback> with the most relevant document "
    "and its opinion. Every time you receive feedback, first verify its relevance and "
    "usefulness inside <verify> and </verify>, then reason again inside <think> and </think>. "
    "When no more knowledge is needed, give the short final answer inside <answer> and "
    "</answer>."
)
ARR_VERIFIER_INSTRUCTION = (
    "You are a verifier working with a reasoner to answer each question. When the reasoner "
    "searches, you see its reasoning, its query and the results inside <information> and "
    "</information>. Check inside <verify> and </verify> whether the query helps answer the "
    "question. If it does, name the single most relevant document inside <selected_doc> and "
    "</selected_doc> (e.g. <selected_doc>Doc 1</selected_doc>) and reply to the reasoner inside "
    "<response> and </response>; if it does not, justify that inside <response> and "
    "</response>. When the reasoner gives an answer inside <answer> and </answer>, verify it "
    "inside <verify> and </verify> and give the final verified answer inside <final_answer> "
    "and </final_answer>."
)
# Where the verifier's view hands the floor back (and where a base model would continue the
# other role's part): both stop there.
ARR_REASONER_TURN, ARR_VERIFIER_TURN = "\nReasoner:", "\nVerifier:"


def arr_reasoner_prompt(question: str, shots: Sequence[FewShot]) -> str:
    """The reasoner's role prompt: the paper's reasoner instructions, then demos whose
    <feedback> blocks are what the engine hands back (selected document + response)."""
    blocks = [ARR_REASONER_INSTRUCTION, ""]
    for s in shots[:1]:  # one demo: every verifier turn re-reads the whole dialogue too
        blocks += [
            f"Question: {s.question}",
            f"<think>I need to look up {s.title}.</think>",
            f"<search>{s.question}</search>",
            "",
            f"<feedback>{_doc(s)}\nDoc 1 answers the question: {s.answer}.</feedback>",
            "",
            "<verify>The feedback is relevant and names the answer.</verify>",
            f"<think>Doc 1 says {s.answer}.</think>",
            f"<answer>{s.answer}</answer>",
            "",
        ]
    blocks += [f"Question: {question}"]
    return "\n".join(blocks) + "\n"


def arr_verifier_prompt(question: str, shots: Sequence[FewShot]) -> str:
    """The verifier's role prompt: the paper's verifier instructions, then demos of one
    critique (verify, selected_doc, response) and one answer check (verify, final_answer)."""
    blocks = [ARR_VERIFIER_INSTRUCTION, ""]
    for s in shots[:1]:  # one demo: the prompt is prefilled on every verifier turn
        blocks += [
            f"Question: {s.question}",
            f"Reasoner: <think>I need to look up {s.title}.</think>",
            f"<search>{s.question}</search>",
            f"<information>{_doc(s)}</information>",
            "Verifier: <verify>The query asks for what the question needs; Doc 1 is on "
            "topic.</verify>",
            "<selected_doc>Doc 1</selected_doc>",
            f"<response>Doc 1 answers the question: {s.answer}.</response>",
            f"Reasoner: <verify>The feedback is relevant.</verify><answer>{s.answer}</answer>",
            f"Verifier: <verify>Doc 1 supports {s.answer}.</verify>",
            f"<final_answer>{s.answer}</final_answer>",
            "",
        ]
    blocks += [f"Question: {question}"]
    return "\n".join(blocks)
