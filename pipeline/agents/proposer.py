"""Proposer: a batch of source passages -> tagged rollouts -> (question, answer, evidence) with
the evidence checked against the source and what the rollout retrieved.

`propose()` is the proposer's step as `solve()` and `verify_*()` are the solver's and the
verifier's: tasks in, results out, one generate call per turn for the whole batch."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from pipeline.agents.evidence import locate, sentences
from pipeline.agents.prompts import PROPOSER_STOP, FewShot, proposer_prompt
from pipeline.agents.rewards import token_f1
from pipeline.agents.rollout import Rollout, RolloutConfig, TurnGuide, run_rollouts
from pipeline.llm.base import Generator, SamplingParams
from pipeline.llm.chat import Render, plain
from pipeline.retrieval.base import RetrieverBackend

_INFO = re.compile(r"<information>.*?</information>", re.S)
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


def tag(text: str, name: str) -> str | None:
    """Content of the last complete `<name>...</name>` outside tool responses (else None).

    The last one wins: a rollout may draft a question, search, and then revise it."""
    own = _INFO.sub(" ", text)
    found = re.findall(rf"<{name}>(.*?)</{name}>", own, re.S)
    return found[-1].strip() or None if found else None


def parse_proposal(
    transcript: str,
    passage_id: str,
    passage_text: str,
    mode: str,
    retrieved: Sequence[tuple[str, str]] = (),
) -> Proposal:
    """Read <question>/<answer>/<evidence> from a rollout and check the evidence.

    Constrained mode: the evidence is a sentence number of the source, verbatim by construction.
    Free mode: the span must occur verbatim in the source or in a retrieved snippet; which one
    and the offsets are recorded."""
    q, a, ev = tag(transcript, "question"), tag(transcript, "answer"), tag(transcript, "evidence")
    if ev is None:
        return Proposal(q, a, None, None, None, None, "none", "missing", transcript)
    if mode == "constrained":
        m = _SENT_REF.match(ev)
        sents = sentences(passage_text)
        if not m or not 1 <= int(m.group(1)) <= len(sents):
            return Proposal(q, a, ev, None, None, None, "none", "bad_sentence_ref", transcript)
        s = sents[int(m.group(1)) - 1]
        return Proposal(q, a, s.text, s.start, s.end, passage_id, "source", "verbatim", transcript)
    loc = locate(ev, passage_id, passage_text, retrieved)
    if loc is None:
        return Proposal(q, a, ev, None, None, None, "none", "not_in_source", transcript)
    return Proposal(
        q, a, ev, loc.start, loc.end, loc.passage_id, loc.source, "verbatim", transcript
    )


def proposer_guide(mode: str, passage_text: str) -> TurnGuide:
    """The proposer's turn regex: the final block is question, answer and evidence, where
    constrained evidence names one of this passage's sentences ([1] .. [k])."""
    if mode == "constrained":
        k = max(len(sentences(passage_text)), 1)
        evidence = r"\[(" + "|".join(str(i) for i in range(1, k + 1)) + r")\]"
    else:
        evidence = r"[^<\s][^<]{0,1023}"  # about L_max = 256 tokens
    # Each field starts with a visible character, so none is empty once stripped; the
    # question and answer lengths keep a rambling model from running out of tokens.
    body = (
        r"[^<\s][^<]{0,199}</question>\n<answer>[^<\s][^<]{0,79}</answer>\n"
        rf"<evidence>{evidence}</evidence>"
    )
    return TurnGuide("<question>", body)


def copies_example(question: str | None, shots: list[FewShot], threshold: float = 0.8) -> bool:
    """A base model often repeats a few-shot question verbatim for an unrelated passage; such a
    record is a prompt artifact, and its answer is in the verifier's prompt too."""
    return bool(question) and any(token_f1(question, s.question) >= threshold for s in shots)


@dataclass(frozen=True)
class ProposerTask:
    """One proposer call: a source passage and what the plan asks of it."""

    passage_id: str
    title: str
    text: str
    hop_count: int
    task_type: str
    kg_facts: str | None = None  # the linked subgraph's target path, rendered


@dataclass(frozen=True)
class ProposerSettings:
    evidence_mode: str  # constrained | free
    temperature: float
    top_p: float
    max_tokens: int  # per assistant turn
    seed: int
    max_turns: int = 5
    topk: int = 3
    max_doc_tokens: int = 512
    search: bool = True
    force_final: bool = True  # open <question> on the last allowed turn / past the budget
    guided: bool = False  # constrain the final block's shape by guided decoding

    def sampling(self) -> SamplingParams:
        return SamplingParams(
            n=1,
            temperature=self.temperature,
            top_p=self.top_p,
            max_tokens=self.max_tokens,
            seed=self.seed,
        )


@dataclass(frozen=True)
class ProposerResult:
    prompt: str  # what the model saw first (rendered)
    rollout: Rollout
    proposal: Proposal


def propose(
    gen: Generator,
    retriever: RetrieverBackend,
    tasks: Sequence[ProposerTask],
    shots: Sequence[FewShot],
    settings: ProposerSettings,
    render: Render = plain,
) -> list[ProposerResult]:
    """One proposer rollout per task, read back into a checked Proposal.

    An h-hop task may search h - 1 times before it must write its final block (when
    `force_final`), so the question needs the hops the plan drew."""
    s = settings
    prompts = [
        render(
            proposer_prompt(
                t.title, t.text, shots, s.evidence_mode, t.kg_facts, t.hop_count, t.task_type
            )
        )
        for t in tasks
    ]
    rcfg = RolloutConfig(
        "<evidence>",
        "</evidence>",
        s.max_turns,
        s.topk,
        s.max_doc_tokens,
        s.search,
        PROPOSER_STOP,
        "<question>" if s.force_final else None,
    )
    budgets = [max(t.hop_count - 1, 0) if s.force_final else None for t in tasks]
    guides = [proposer_guide(s.evidence_mode, t.text) for t in tasks] if s.guided else None
    groups = run_rollouts(gen, retriever, prompts, s.sampling(), rcfg, budgets, guides)
    results = []
    for task, prompt, group in zip(tasks, prompts, groups, strict=True):
        roll = group[0]
        snippets = roll.retrieved_passages()  # full texts of the hits, not the cut tool docs
        proposal = parse_proposal(
            roll.transcript, task.passage_id, task.text, s.evidence_mode, snippets
        )
        results.append(ProposerResult(prompt, roll, proposal))
    return results
