"""Proposer: the question for an answer fixed in advance (pipeline.agents.targets).

The answer and its verbatim evidence come from the KG path or the source passage; the LLM
words the question. `propose()` samples `attempts` questions per task in one batched call
(guided to an interrogative sentence where the backend supports it) and keeps the first that
passes every validity rule; a KG task whose samples all fail gets a question built from the
path's relation labels (2WikiMultiHopQA-style), counted as `question_source = template`. A
task without a target is not posed at all.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pipeline.agents.prompts import PROPOSER_STOP, FewShot, KGShot, proposer_prompt
from pipeline.agents.properties import PROPERTIES, value_of
from pipeline.agents.question_checks import (
    KIND_NOUNS,
    OPENERS,
    names_subject,
    person_shaped,
    proper_names,
    question_reason,
)
from pipeline.agents.rollout import Rollout, RolloutConfig, TurnGuide, run_rollouts
from pipeline.agents.targets import Target
from pipeline.llm import usage
from pipeline.llm.base import Generator, SamplingParams
from pipeline.llm.chat import Render, plain
from pipeline.retrieval.base import RetrieverBackend

if TYPE_CHECKING:
    from pipeline.core.config import PipelineConfig

_INFO = re.compile(r"<information>.*?</information>", re.S)


def question_body(kind: str, subject: str | None = None) -> str:
    """What the guide lets the model write after the engine opened <question>: one line that
    opens as a question for this kind of answer does (`question_checks.OPENERS`), names its
    subject verbatim when one is given, has no tags or brackets, and ends in '?'."""
    openers = OPENERS[kind].replace("(?:", "(")  # plain groups: every guided backend reads them
    free = r"[^<>\n?\[\]{}]"
    if not subject:
        return rf"({openers}) {free}{{3,160}}\?</question>"
    named = re.sub(r"([\\.^$*+?()\[\]{}|])", r"\\\1", subject)  # metacharacters only
    return rf"({openers}) {free}{{0,120}}{named}{free}{{0,120}}\?</question>"


@dataclass(frozen=True)
class Proposal:
    question: str | None
    answer: str | None
    evidence: str | None
    evidence_start: int | None
    evidence_end: int | None
    evidence_passage_id: str | None
    evidence_source: str  # source | retrieved | none
    evidence_status: str  # verbatim | missing
    raw: str


def tag(text: str, name: str) -> str | None:
    """Content of the last complete `<name>...</name>` outside tool responses (else None).

    The last one wins: a rollout may draft an answer, search, and then revise it."""
    own = _INFO.sub(" ", text)
    found = re.findall(rf"<{name}>(.*?)</{name}>", own, re.S)
    return found[-1].strip() or None if found else None


@dataclass(frozen=True)
class ProposerTask:
    """One proposer call: a source passage, what the plan asks of it, and its target."""

    passage_id: str
    title: str
    text: str
    hop_count: int
    task_type: str
    target: Target
    record_id: str = ""  # whose LLM tokens the proposal's calls are (pipeline.llm.usage)


@dataclass(frozen=True)
class ProposerSettings:
    temperature: float
    top_p: float
    max_tokens: int
    seed: int
    attempts: int = 4  # questions sampled per task; the first valid one is kept
    guided: bool = True  # constrain each sample to one interrogative sentence
    max_answer_tokens: int = 12
    template_fallback: bool = True  # a rule-built question when no LLM sample passes
    # passage spans: "rules_first" asks the LLM only where the rule-built (in-situ) question
    # fails a rule; "llm_first" keeps a valid, answerable LLM sample before it
    passage_questions: str = "llm_first"
    # KG paths: "rules_first" uses the path's template question first where its final
    # property has a wording (properties.PROPERTIES) and it passes every rule
    kg_questions: str = "llm_first"

    @classmethod
    def from_config(cls, cfg: PipelineConfig, seed: int = 0) -> ProposerSettings:
        g = cfg.generation
        return cls(
            temperature=g.proposer_temperature,
            top_p=g.proposer_top_p,
            max_tokens=g.proposer_max_tokens,
            seed=seed,
            attempts=g.question_attempts,
            guided=g.guided_proposer,
            max_answer_tokens=g.max_answer_tokens,
            template_fallback=g.template_fallback,
            passage_questions=g.passage_questions,
            kg_questions=g.kg_questions,
        )

    def sampling(self) -> SamplingParams:
        return SamplingParams(
            n=self.attempts,
            temperature=self.temperature,
            top_p=self.top_p,
            max_tokens=self.max_tokens,
            seed=self.seed,
        )


@dataclass(frozen=True)
class ProposerResult:
    prompt: str  # what the model saw (rendered); "" when the task was not posed
    rollout: Rollout  # the kept sample (the first one when none passed)
    proposal: Proposal
    valid: bool
    invalid_reason: str | None
    attempts: int  # samples read: up to the kept one, or all when none passed
    question_source: str | None  # llm | template | None (not posed, or nothing valid)


def template_question(t: Target) -> str | None:
    """'Where was the father of Albert Einstein born?': the path's hops, last first, around
    its start entity, each worded by its PROPERTIES entry or else by its relation label."""
    if t.path is None:
        return None
    rels = t.path["relations"]
    chain = t.subject
    for rel in rels[:-1]:
        chain = value_of(rel["id"], rel.get("label"), chain)
    last = rels[-1]
    if last["id"] in PROPERTIES:
        return PROPERTIES[last["id"]].question.format(x=chain)
    opener = {"date": "In what year was", "number": "How much is", "person": "Who is"}
    label = last.get("label") or last["id"]
    return f"{opener.get(t.answer_kind, 'What is')} the {label} of {chain}?"


_PRONOUN = re.compile(
    r"^(He|She|It|They|His|Her|Its|Their|The (?:country|city|town|college|university|river|"
    r"band|group|company|island|state|region|party|book|work|prize|wall))\b",
    re.I,
)
# not "the city": in "on a hill at the edge of the city" it is not the subject (ETH Zurich)
_INNER_PRONOUN = re.compile(r"\b(he|she|him|they|them|his|its|their)\b")
_PREP_DATE = re.compile(r"(?:\b(?:in|on|by|from|since|around|until|after|before) )$", re.I)
_CLAUSE = re.compile(r", (?:and|but|while|whereas) |; ")


def insitu_question(t: Target) -> str | None:
    """The evidence clause with its answer replaced by a question phrase, as rule-based
    question generation does: 'Leipzig was first mentioned in what year in the chronicle of
    Thietmar of Merseburg?'. The clause holding the answer is kept (the sentence when the
    clause has no subject of its own: ', and released ...'); a pronoun or 'The city' before the
    question phrase becomes the subject when it can stand for it ('He was tried by' ->
    'Galileo Galilei was tried by'; see `_stands_for`). None for an answer in apposition
    (', X,') or a clause too long to read as a question."""
    if t.evidence is None or t.answer_at is None or t.answer is None:
        return None
    ev, a0 = t.evidence.rstrip(" .!;:"), t.answer_at
    a1 = a0 + len(t.answer)
    cuts = [0, *(m.end() for m in _CLAUSE.finditer(ev) if m.end() <= a0)]
    stop = next((m.start() for m in _CLAUSE.finditer(ev) if m.start() >= a1), len(ev))
    between = re.search(r"\bbetween\b", ev[cuts[-1] : stop])
    if between and " and " not in ev[cuts[-1] + between.end() : stop]:
        stop = len(ev)  # "between X, ..., and Y": the "and Y" belongs to the clause
    q = None
    for start, end in ((cuts[-1], stop), (0, len(ev))):  # the clause, else the sentence
        if start and not _OWN_SUBJECT.match(ev[start:]):
            continue  # "..., and released the double album": its subject is before the cut
        q = _insitu(t, ev[:start], ev[start:a0], ev[a1:end])
        if q is not None and (names_subject(q, t.subject) or start == 0):
            break
    return q if q is not None and len(q.split()) <= 30 else None


# A clause that opens with its own subject (or an adverbial before it), not with a verb.
_OWN_SUBJECT = re.compile(
    r"(?:[A-Z0-9\"'“]|(?:he|she|it|they|we|the|a|an|this|these|that|his|her|its|their|in|on|at"
    r"|after|before|by|during|from|with|since|until|when|while|later|then|there|many|some"
    r"|most|all|both)\b)"
)
_GENDERED = ("he", "she", "him", "his", "her")
# "After 1949 the city belonged ...": 'the city' as the clause's subject after a short
# adverbial opener (not "At the edge of the city", where it is not the subject).
_LEAD_GENERIC = re.compile(
    r"^((?:In|After|Before|By|From|Until|Since|During|On|At|Later|Today)\b[^,]{0,25}?,? )"
    rf"(?<!\bof )(the (?:{'|'.join(KIND_NOUNS)}))\b(?! of\b)"
)


def _generic_fits(phrase: str, subject: str) -> bool:
    """'the city' can stand for a subject that is not a person and names no other kind of
    thing ('Trinity College, Cambridge' is a college: its 'the city' is Cambridge)."""
    noun = phrase.split()[-1].lower()
    kinds = {w.lower().strip(",.") for w in subject.split()} & _KINDS
    return not person_shaped(subject) and kinds <= {noun}


_KINDS = frozenset(KIND_NOUNS) | {"school", "church", "museum", "kingdom", "republic", "empire"}


def _stands_for(pronoun: str, subject: str, prior: str) -> bool:
    """Whether a pronoun can stand for the passage's subject: 'he' / 'she' for a person's
    name when no other person is named before it ('Albert Einstein was born in Ulm ...; he
    later studied' is not about Ulm), 'it' / 'the city' for anything but a person, 'they' for
    any subject."""
    p = pronoun.lower()
    if p in _GENDERED:
        others = [n for n in proper_names(prior) if person_shaped(n) and n != subject]
        return person_shaped(subject) and not others
    if p in ("they", "them", "their"):
        return True
    return not person_shaped(subject)


def _insitu(t: Target, prior: str, before: str, after: str) -> str | None:
    if before.endswith(", ") and after.startswith(","):
        return None  # apposition: "His stepfather, Harry Graves, encouraged ..."
    if t.answer_kind == "date":
        before = re.sub(r"\bthe $", "", before)
        year = re.fullmatch(r"\d{3,4}", t.answer)
        phrase = "what year" if year else "what decade" if t.answer.endswith("s") else "what date"
        if _PREP_DATE.search(before) is None:
            phrase = f"in {phrase}"
    elif t.answer_kind == "number":
        before = re.sub(r"\b(?:about|around|some|nearly|almost|over|more than) $", "", before)
        unit = re.sub(r"^[\d,.]+(?: (?:million|billion|thousand|hundred))?", "", t.answer)
        phrase = f"how many{unit}"
    else:
        before = re.sub(r"\b[Tt]he $", "", before)
        phrase = "whom" if re.search(r"\b(?:by|married)\s*$", before) else "what"
    q = f"{before}{phrase}{after}".strip()
    pro = _PRONOUN.match(q)
    if pro and _stands_for(pro.group(1).split()[0], t.subject, prior):
        owner = pro.group(1).lower() in ("his", "her", "its", "their")
        q = (f"{t.subject}'s" if owner else t.subject) + q[pro.end() :]
    elif (lead := _LEAD_GENERIC.match(q)) and _generic_fits(lead.group(2), t.subject):
        q = q[: lead.start(2)] + t.subject + q[lead.end(2) :]  # "After 1949 Leipzig belonged"
    elif not pro:  # "in 1836 he married" -> "in 1836 Richard Wagner married"
        m = _INNER_PRONOUN.search(q)
        # before the question phrase, or anywhere when the answer is a date or a number: after
        # a name, the answer may be the pronoun's antecedent ("a statue of whom holding a chair
        # leg in place of his sceptre"); and only where the subject is not named before it
        if (
            m
            and (m.start() < len(before) or t.answer_kind in ("date", "number"))
            and not names_subject(q[: m.start()], t.subject)
            and _stands_for(m.group(1), t.subject, prior + q[: m.start()])
        ):
            owner = m.group(1) in ("his", "its", "their")
            q = q[: m.start()] + (f"{t.subject}'s" if owner else t.subject) + q[m.end() :]
    return f"{q[0].upper()}{q[1:]}?" if q else None


def rule_question(t: Target) -> str | None:
    """The rule-built question of a target: its own (a comparison's or a bridge's, built with
    it), the path's template (KG), or the evidence clause in situ (one passage)."""
    if t.ruled is not None:
        return t.ruled
    if t.kind == "kg":
        return template_question(t)
    return insitu_question(t)


def task_prompt(t: Target, shots: Sequence[FewShot], kg_shots: Sequence[KGShot]) -> str:
    """What the LLM words a question from: a passage task's evidence sentence, or the facts
    of a KG path or a two-passage task (its subject described where it is obfuscated)."""
    facts = t.evidence if t.kind == "passage" else t.facts
    return proposer_prompt(t.subject, facts, t.answer, t.kind != "passage", shots, kg_shots)


def _proposal(t: Target, question: str | None, raw: str) -> Proposal:
    status = "verbatim" if t.evidence is not None else "missing"
    return Proposal(
        question, t.answer, t.evidence, t.start, t.end, t.passage_id,
        t.source if t.evidence is not None else "none", status, raw,
    )  # fmt: skip


def propose(
    gen: Generator,
    retriever: RetrieverBackend | None,
    tasks: Sequence[ProposerTask],
    shots: Sequence[FewShot],
    kg_shots: Sequence[KGShot],
    settings: ProposerSettings,
    render: Render = plain,
    count_tokens: Callable[[str], int] | None = None,
    answerable: Callable[[Sequence[tuple[Target, str]]], list[bool]] | None = None,
) -> list[ProposerResult]:
    """`settings.attempts` questions per posed task in one batched call, then the checks.

    `answerable` (round-trip consistency, as QG pipelines filter): given (target, question)
    pairs, whether a solver handed the target's evidence answers the question with the target's
    answer; among a task's valid samples the first answerable one is kept, else the first
    valid one. One batched call for every valid sample of the shard."""
    s = settings
    examples = [x.question for x in shots] + [x.question for x in kg_shots]

    def reason(q: str | None, t: Target, built: bool = False) -> str | None:
        # a rule-built question draws only on the task's relations and names: grounded
        extra = q if built else None
        context = " ".join(x for x in (t.chain_evidence, t.facts, t.subject, extra) if x)
        return question_reason(
            q, t.answer, t.aliases, t.subject, t.answer_kind, count_tokens=count_tokens,
            max_answer_tokens=s.max_answer_tokens, examples=examples, context=context,
            max_unsupported=0 if t.kind == "passage" else 1, names_suffice=t.kind == "passage",
            hidden=t.hidden, options=t.options,
        )  # fmt: skip

    def rules_first(t: Target) -> bool:
        if t.kind == "comparison":
            return True  # its question is the property's comparison template
        if t.kind != "kg":
            return s.passage_questions == "rules_first"
        worded = t.path is not None and t.path["relations"][-1]["id"] in PROPERTIES
        return s.kg_questions == "rules_first" and worded

    def rule_built(t: Target) -> str | None:
        return rule_question(t) if s.template_fallback or t.ruled else None

    ruled: dict[int, str] = {}  # slots whose rule-built question goes first
    for i, task in enumerate(tasks):
        q = rule_built(task.target) if task.target.posed and rules_first(task.target) else None
        if q is not None and reason(q, task.target, built=True) is None:
            ruled[i] = q
    posed = [i for i, t in enumerate(tasks) if t.target.posed and i not in ruled]
    prompts = {i: render(task_prompt(tasks[i].target, shots, kg_shots)) for i in posed}
    rcfg = RolloutConfig(
        "<question>", "</question>", max_turns=1, search=False,
        extra_stop=(*PROPOSER_STOP, "\n"), force_final="<question>",
    )  # fmt: skip
    kinds = [(tasks[i].target.answer_kind, tasks[i].target.subject) for i in posed]
    guides = [TurnGuide("<question>", question_body(*k)) for k in kinds] if s.guided else None
    with usage.owned(roots := [prompts[i] for i in posed], [tasks[i].record_id for i in posed]):
        groups = run_rollouts(gen, retriever, roots, s.sampling(), rcfg, None, guides)
    by_task = dict(zip(posed, groups, strict=True)) if posed else {}

    reasons = {i: [reason(r.final, tasks[i].target) for r in by_task[i]] for i in posed}
    valid = [(i, k) for i in posed for k, why in enumerate(reasons[i]) if why is None]
    ok = (
        answerable([(tasks[i].target, by_task[i][k].final) for i, k in valid])
        if answerable and valid
        else [True] * len(valid)
    )
    first_valid: dict[int, int] = {}
    first_answerable: dict[int, int] = {}
    for (i, k), good in zip(valid, ok, strict=True):
        first_valid.setdefault(i, k)
        if good:
            first_answerable.setdefault(i, k)
    results = []
    for i, task in enumerate(tasks):
        t = task.target
        if i in ruled:  # built by rules, no LLM call: the rollout records that
            none = Rollout(prompt="", sample=0, stop_reason="rule_built")
            results.append(
                ProposerResult("", none, _proposal(t, ruled[i], ""), True, None, 0, "template")
            )
            continue
        if i not in by_task:
            empty = Rollout(prompt="", sample=0, stop_reason="not_posed")
            results.append(
                ProposerResult("", empty, _proposal(t, None, ""), False, t.reason, 0, None)
            )
            continue
        group = by_task[i]
        # with a round-trip check, a question the solver cannot answer from its own evidence
        # is not kept (the template is tried instead); without one, the first valid sample
        kept = first_answerable.get(i) if answerable else first_valid.get(i)
        if kept is not None:
            r = group[kept]
            results.append(
                ProposerResult(prompts[i], r, _proposal(t, r.final, r.transcript), True, None,
                               kept + 1, "llm")
            )  # fmt: skip
            continue
        fallback = rule_built(t)
        r = group[0]
        # the question stored is the last one tried, with the reason it failed (if it did):
        # the rule-built one when there is one, else the first sample (all are in raw output)
        q, source = (fallback, "template") if fallback else (r.final, None)
        why = reason(fallback, t, built=True) if fallback else reasons[i][0]
        results.append(
            ProposerResult(prompts[i], r, _proposal(t, q, r.transcript), why is None, why,
                           len(group), source)
        )  # fmt: skip
    return results
