"""Two-passage tasks for passage slots, HotpotQA's two types, built where the graph allows.

Bridge: the slot's passage states a fact linking its entity A to an entity B that has its own
article ("Einstein was born in Ulm"); the question asks a fact of B's article through that
link without naming B ("The place of birth of Albert Einstein was first mentioned in what
year?"), and both sentences are the chain. Comparison: A and another entity of its class B
have a comparable value each stated in their own article; the question asks which is earlier
or larger ("Who was born first, Albert Einstein or Niels Bohr?"), and the two sentences are
the chain. A slot neither fits keeps its one-sentence question (`targets.passage_target`).
Pure functions: the entities' facts (`pipeline.kg.entity_facts`) and the passages' texts are
looked up once per shard by the caller.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from pipeline.agents.chains import state_hop
from pipeline.agents.properties import PROPERTIES, value_of
from pipeline.agents.proposer import insitu_question
from pipeline.agents.targets import (
    Hop,
    Target,
    entity_forms,
    find_form,
    passage_target,
)
from pipeline.kg.entity_facts import COMPARABLE, Entity, EntityFacts, Fact, facts_by_pid
from pipeline.kg.valency import MANY_VALUED

Passage = tuple[str, str, str]  # (id, title, text)
# A question phrase run into a preposition ("the War of in what year to 1871"): in-situ
# rewriting of a sentence it does not fit.
_GARBLED = re.compile(
    r"\b(?:of|in|on|at|to|by|from) (?:in|on|at|to|by|from|of) (?:what|which|whom|how)\b"
)
# Words after a name that make it a modifier, not the sentence's subject ("Paris proper").
_NOT_A_VERB = r" (?:proper|itself|alone|region|area|city|side)\b"
SPANS_TRIED = 6  # candidate answer spans read per article of a bridge entity

# "Who was born first, X or Y?": how a comparison asks, by property (person or thing).
COMPARISONS = {
    "P569": "Who was born first, {a} or {b}?",
    "P570": "Who died first, {a} or {b}?",
    "P571": "Which was founded first, {a} or {b}?",
    "P577": "Which was published first, {a} or {b}?",
    "P1082": "Which has the larger population, {a} or {b}?",
    "P2043": "Which is longer, {a} or {b}?",
    "P2046": "Which has the larger area, {a} or {b}?",
    "P2048": "Which is taller, {a} or {b}?",
}


def _stated(passages: Sequence[tuple[Passage, str]], fact: Fact, subject: Entity) -> Hop | None:
    """The first sentence of `passages` stating (subject, fact), as a Hop (`chains.state_hop`)."""
    node = {"id": subject.qid, "label": subject.label}
    relation = {"id": fact.pid, "label": fact.relation}
    return state_hop(passages, node, relation, fact.node, {subject.qid: subject.aliases}, set())


def _articles(e: Entity, texts: Mapping[str, Passage], first: Passage | None = None):
    own = [(texts[p], "article") for p in e.passage_ids if p in texts and p != (first or ("",))[0]]
    return ([(first, "source")] if first else []) + own


def bridge_target(
    source: Passage,
    entity: Entity,
    facts: EntityFacts,
    texts: Mapping[str, Passage],
    task_type: str,
    pick: int,
) -> Target | None:
    """A bridge through one of the entity's links to another article (chosen by `pick`), or
    None when no link is stated in the entity's article or the linked article has no span
    for the task type."""
    links = [
        f
        for f in entity.facts
        if f.pid in PROPERTIES
        and f.pid not in MANY_VALUED
        and f.passage_ids
        and f.node["id"] in facts.entities
    ]
    for k in range(len(links)):
        link = links[(pick + k) % len(links)]
        first = _stated(_articles(entity, texts, source), link, entity)
        if first is None:
            continue
        hop1 = first
        bridge = facts.entities[link.node["id"]]
        named = entity_forms(entity.label, entity.aliases)
        hidden = tuple(dict.fromkeys([*entity_forms(bridge.label, bridge.aliases), hop1.object]))
        spans = (
            passage_target(texts[pid], task_type, pick + off, subject=bridge.label)
            for pid in bridge.passage_ids
            if pid in texts
            for off in range(SPANS_TRIED)
        )
        for t in spans:
            if not t.posed or t.answer is None:
                continue
            taken = [*named, *hidden]
            if find_form(t.answer, taken) or find_form(hop1.text, [t.answer]):
                continue  # the answer is a name of the chain, or hop 1 already says it
            described = value_of(link.pid, link.relation, entity.label)
            question = bridge_question(t, described, hidden)
            if question is None:
                continue
            hop2 = Hop(
                t.passage_id,
                t.start,
                t.end,
                t.evidence,
                bridge.label,
                t.span_kind or "",
                t.answer,
                "article",
            )
            return Target(
                kind="bridge",
                answer=t.answer,
                aliases=t.aliases,
                evidence=t.evidence,
                passage_id=t.passage_id,
                start=t.start,
                end=t.end,
                answer_at=t.answer_at,
                source="article",
                subject=described,
                facts=f"{entity.label} -> {link.relation} -> {bridge.label}",
                path={
                    "nodes": [{"id": entity.qid, "label": entity.label}, link.node],
                    "relations": [{"id": link.pid, "label": link.relation}],
                },
                waypoints=[entity.label, bridge.label],
                span_kind=t.span_kind,
                answer_kind=t.answer_kind,
                chain=(hop1, hop2),
                hidden=hidden,
                ruled=question,
            )
    return None


def bridge_question(t: Target, described: str, hidden: Sequence[str]) -> str | None:
    """The in-situ question of the bridge entity's sentence, the bridge entity written as the
    link from the start entity: 'Cambridge was granted city status in what year?' -> 'The
    place of death of Stephen Hawking was granted city status in what year?'. Only where the
    bridge entity (or 'It', 'The city') is the sentence's subject, named once, and the
    question stays short: anything else reads as a riddle, not a question."""
    q = insitu_question(t)  # t.subject is the bridge entity: pronouns become its name
    if q is None or len(q.split()) > 24 or _GARBLED.search(q):
        return None
    names = "|".join(map(re.escape, sorted(hidden, key=len, reverse=True)))
    m = re.match(rf"(?:{names})(?= [a-z])(?! (?:is|was) (?:the|a|an) |{_NOT_A_VERB})", q)
    if m is None:
        return None
    out = described[0].upper() + described[1:] + q[m.end() :]
    return None if find_form(out, list(hidden)) else out


def comparison_target(
    source: Passage,
    entity: Entity,
    facts: EntityFacts,
    texts: Mapping[str, Passage],
    pick: int,
) -> Target | None:
    """A comparison of one of the entity's comparable values (stated in its article) with
    the same value of another entity of its class (stated in that one's), or None."""
    mine = [f for f in entity.facts if f.pid in COMPARABLE and f.sort_key is not None]
    for k in range(len(mine)):
        fact = mine[(pick + k) % len(mine)]
        first = _stated(_articles(entity, texts, source), fact, entity)
        if first is None:
            continue
        others = facts.partners.get((entity.qid, fact.pid), [])
        for j in range(len(others)):
            other = facts.entities.get(others[(pick + j) % len(others)])
            theirs = facts_by_pid(other).get(fact.pid) if other else None
            if other is None or theirs is None or theirs.sort_key in (None, fact.sort_key):
                continue
            second = _stated(_articles(other, texts), theirs, other)
            if second is None:
                continue
            return _comparison(entity, fact, first, other, theirs, second, pick)
    return None


def _comparison(
    a: Entity, fa: Fact, hop_a: Hop, b: Entity, fb: Fact, hop_b: Hop, pick: int
) -> Target:
    earlier = COMPARABLE[fa.pid] == "earlier"
    a_wins = (fa.sort_key < fb.sort_key) if earlier else (fa.sort_key > fb.sort_key)
    winner = a if a_wins else b
    first, second = (a, b) if pick % 2 == 0 else (b, a)
    return Target(
        kind="comparison",
        answer=winner.label,
        aliases=tuple(entity_forms(winner.label, winner.aliases)),
        evidence=hop_b.text,
        passage_id=hop_b.passage_id,
        start=hop_b.start,
        end=hop_b.end,
        source="article",
        subject=first.label,
        facts=f"{a.label}: {fa.relation} {fa.node['label']}; "
        f"{b.label}: {fb.relation} {fb.node['label']}",
        path=None,
        waypoints=[a.label, b.label],
        span_kind="name",
        answer_kind="person" if fa.pid in ("P569", "P570") else "name",
        chain=(hop_a, hop_b),
        options=(first.label, second.label),
        ruled=COMPARISONS[fa.pid].format(a=first.label, b=second.label),
    )


def two_passage_target(
    source: Passage,
    entity: Entity,
    facts: EntityFacts,
    texts: Mapping[str, Passage],
    task_type: str,
    pick: int,
) -> Target | None:
    """A comparison first for the comparison task type, a bridge first for any other; the
    other kind when the first does not fit; None when neither does."""
    bridge = bridge_target(source, entity, facts, texts, task_type, pick)
    if task_type != "comparison" and bridge is not None:
        return bridge
    return comparison_target(source, entity, facts, texts, pick) or bridge
