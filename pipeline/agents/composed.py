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
from dataclasses import dataclass, replace

from pipeline.agents.chains import state_hop
from pipeline.agents.properties import PROPERTIES, value_of
from pipeline.agents.proposer import insitu_question
from pipeline.agents.targets import (
    Hop,
    Target,
    answer_forms,
    answer_kind,
    entity_forms,
    find_form,
    hop_evidence,
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
    """A bridge through one of the entity's links to another article (chosen by `pick`): a
    fact of the linked entity its own article states, asked through the link ("What is the
    population of the place of birth of Albert Einstein?"), else a span of that article asked
    in situ. None when no link is stated in the entity's article, or neither fits."""
    links = [
        f
        for f in entity.facts
        if f.pid in PROPERTIES
        and f.pid not in MANY_VALUED
        and f.passage_ids
        and f.node["id"] in facts.entities
        # "the region containing ETH Zurich" names Zurich: no hidden bridge
        and find_form(
            entity.label, entity_forms(f.node["label"], facts.entities[f.node["id"]].aliases)
        )
        is None
    ]
    for k in range(len(links)):
        link = links[(pick + k) % len(links)]
        hop1 = _stated(_articles(entity, texts, source), link, entity)
        if hop1 is None:
            continue
        bridge = facts.entities[link.node["id"]]
        hidden = tuple(dict.fromkeys([*entity_forms(bridge.label, bridge.aliases), hop1.object]))
        link_part = Link(entity, link, bridge, hop1, hidden)
        found = _fact_bridge(link_part, texts, pick) or _span_bridge(
            link_part, texts, task_type, pick
        )
        if found is not None:
            return found
    return None


@dataclass(frozen=True)
class Link:
    """The first hop of a bridge: the entity, its stated link to another article, and the
    names the question must not contain (the bridge entity's, as written too)."""

    entity: Entity
    fact: Fact
    bridge: Entity
    hop: Hop
    hidden: tuple[str, ...]

    @property
    def described(self) -> str:
        return value_of(self.fact.pid, self.fact.relation, self.entity.label)

    def path(self, *more: tuple[dict, dict]) -> dict:
        nodes = [{"id": self.entity.qid, "label": self.entity.label}, self.fact.node]
        rels = [{"id": self.fact.pid, "label": self.fact.relation}]
        for rel, node in more:
            rels.append(rel)
            nodes.append(node)
        return {"nodes": nodes, "relations": rels}


def _fact_bridge(link: Link, texts: Mapping[str, Passage], pick: int) -> Target | None:
    """The bridge entity's own fact (a worded property, stated in its article) as the answer:
    a two-hop question from the graph's relations, which no sentence of the corpus reads as
    it is."""
    bridge, named = link.bridge, entity_forms(link.entity.label, link.entity.aliases)
    own = [f for f in bridge.facts if f.pid in PROPERTIES and f.pid not in MANY_VALUED]
    for j in range(len(own)):
        fact = own[(pick + j) % len(own)]
        if fact.node["id"] == link.entity.qid:
            continue  # back to where it started
        hop2 = _stated(_articles(bridge, texts), fact, bridge)
        if hop2 is None or find_form(hop2.object, [*named, *link.hidden]):
            continue
        if find_form(link.hop.text, [hop2.object]):
            continue  # the first sentence already says the answer
        described = link.described
        question = PROPERTIES[fact.pid].question.format(x=described)
        forms = answer_forms(fact.node)
        return Target(
            kind="bridge",
            answer=hop2.object,
            aliases=tuple(dict.fromkeys([hop2.object, *forms])),
            **hop_evidence(hop2),
            answer_at=hop2.text.find(hop2.object),
            source="article",
            subject=described,
            facts=f"{link.entity.label} -> {link.fact.relation} -> {bridge.label} -> "
            f"{fact.relation} -> {fact.node['label']}",
            path=link.path(({"id": fact.pid, "label": fact.relation}, fact.node)),
            waypoints=[link.entity.label, bridge.label],
            span_kind=None,
            answer_kind=answer_kind(fact.node),
            chain=(link.hop, hop2),
            hidden=link.hidden,
            ruled=question[0].upper() + question[1:],
        )
    return None


def _span_bridge(
    link: Link, texts: Mapping[str, Passage], task_type: str, pick: int
) -> Target | None:
    """A span of the bridge entity's article (by task type) asked in situ through the link."""
    bridge, named = link.bridge, entity_forms(link.entity.label, link.entity.aliases)
    spans = (
        passage_target(texts[pid], task_type, pick + off, subject=bridge.label)
        for pid in bridge.passage_ids
        if pid in texts
        for off in range(SPANS_TRIED)
    )
    for t in spans:
        if not t.posed or t.answer is None:
            continue
        if find_form(t.answer, [*named, *link.hidden]) or find_form(link.hop.text, [t.answer]):
            continue  # the answer is a name of the chain, or hop 1 already says it
        question = bridge_question(t, link.described, link.hidden)
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
        return replace(
            t,
            kind="bridge",
            source="article",
            subject=link.described,
            facts=f"{link.entity.label} -> {link.fact.relation} -> {bridge.label}",
            path=link.path(),
            waypoints=[link.entity.label, bridge.label],
            chain=(link.hop, hop2),
            hidden=link.hidden,
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
        **hop_evidence(hop_b),
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
    """A bridge where the entity's article states a link, else a comparison (the task type
    words a bridge's second hop); None when neither fits. A bridge first: its question
    composes the graph's relations, while a comparison names its own answer among two options,
    which a small verifier cannot tell from chance."""
    return bridge_target(source, entity, facts, texts, task_type, pick) or comparison_target(
        source, entity, facts, texts, pick
    )
