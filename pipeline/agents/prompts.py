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
    "Read each passage and write one question of the given task type that the passage answers, "
    "needing the given number of hops. Plan inside <think> and </think>. To look something up, "
    "write <search> query </search>; results appear between <information> and </information>. "
    "Then write the question inside <question> </question>, the short answer copied from the "
    "passage inside <answer> </answer>, and the supporting evidence inside <evidence> </evidence>."
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
PROPOSER_STOP = ("\nPassage (",)
SOLVER_STOP = ("\nQuestion:",)
ANSWER_STOP = ("\n",)
# Task types the selector draws, as the proposer reads them.
TASK_HINTS = {
    "factual": "a fact stated in the passage",
    "comparison": "a comparison between two things",
    "causal": "a cause or an effect",
    "temporal": "a date, a period or an order of events",
    "aggregation": "a count or a total",
}


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


def _doc(s: FewShot) -> str:
    return f"Doc 1(Title: {s.title}) {s.text}"


def _proposer_demo(s: FewShot, mode: str, hops: int) -> list[str]:
    """One worked example of the proposer protocol; 2-hop demos show a search round trip."""
    sentence = sentences(s.text)[s.evidence_sentence - 1].text
    evidence = f"[{s.evidence_sentence}]" if mode == "constrained" else sentence
    body = _numbered(s.text) if mode == "constrained" else s.text
    lines = [f"Passage ({s.title}):", body, f"Hops: {hops}. Task: factual."]
    if hops > 1:
        lines += [
            f"<think>I will look up {s.title}.</think>",
            f"<search>{s.title}</search>",
            "",
            f"<information>{_doc(s)}</information>",
            "",
        ]
    lines += [
        f"<think>Sentence [{s.evidence_sentence}] gives the answer.</think>",
        f"<question>{s.question}</question>",
        f"<answer>{s.answer}</answer>",
        f"<evidence>{evidence}</evidence>",
        "",
    ]
    return lines


def proposer_prompt(
    title: str,
    text: str,
    shots: Sequence[FewShot],
    mode: str,
    facts: str | None = None,
    hops: int = 1,
    task_type: str = "factual",
) -> str:
    """Constrained mode numbers the sentences and asks for one; free mode asks for a copy.

    `facts` is a KG path linked to the passage, offered as relational context (the answer and
    evidence must still come from the passage or a retrieved snippet)."""
    blocks = [PROPOSER_INSTRUCTION, ""]
    demos = list(shots[:2])  # prompt length is the main cost of every turn on CPU
    for i, s in enumerate(demos):
        blocks += _proposer_demo(s, mode, 2 if i == len(demos) - 1 else 1)
    body = _numbered(text) if mode == "constrained" else text
    blocks += [f"Passage ({title}):", body]
    if facts:
        blocks.append(f"Related facts: {facts}")
    hint = TASK_HINTS.get(task_type, task_type)
    blocks.append(f"Hops: {hops}. Task: {task_type} ({hint}).")
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
