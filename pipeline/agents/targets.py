"""Answer first: what a record asks for is decided before the LLM writes a word.

KG tasks take the answer from the graph (KG-paths): the end entity of the subgraph's target
path, in any of its surface forms (label, aliases, or the formatted variants of a date or a
quantity). The evidence is a verbatim sentence of a passage -- the source, the final hop's
subject's own passages, or what a search for the final hop retrieves -- that contains the answer
and names the final hop's subject, so it supports the hop that decides the answer. Passage
tasks take a span of the source passage (a date, a number or a name, by task type) as the
answer and its sentence as the evidence. The LLM then only words the question.

A task whose answer no passage supports is not posed (`Target.reason` says why), and counted.
All functions here are pure; `chains.kg_targets` builds a KG task's chain with one batched
search, `composed` the two-passage tasks.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from pipeline.agents.evidence import OPENING_WORDS, Span, sentences
from pipeline.agents.properties import states
from pipeline.agents.rewards import normalize
from pipeline.kg.graph import MONTHS
from pipeline.kg.valency import MANY_VALUED

_MONTH = "(?:" + "|".join(MONTHS) + ")"
# Abbreviations as passages write units; the KG renders the unit's English label.
UNIT_FORMS = {
    "square kilometre": ("square kilometres", "km2", "km²", "sq km"),
    "square metre": ("square metres", "m2", "m²"),
    "kilometre": ("kilometres", "km"),
    "metre": ("metres", "m"),
    "centimetre": ("centimetres", "cm"),
    "kilogram": ("kilograms", "kg"),
    "minute": ("minutes", "min"),
    "second": ("seconds", "s"),
    "year": ("years",),
    "United States dollar": ("US dollars", "dollars", "USD"),
    "euro": ("euros", "EUR"),
    "pound sterling": ("pounds", "GBP"),
    "degree Celsius": ("°C", "degrees Celsius"),
}
_TIME_ID = re.compile(r"^time:([+-]?)(\d+)-(\d\d)-(\d\d)T[^/]*(?:/(\d+))?$")
_QUANTITY_ID = re.compile(r"^quantity:([+-]?[\d.]+)")


@dataclass(frozen=True)
class Hop:
    """One link of a record's evidence chain: a verbatim sentence of a passage stating one hop
    (its subject named or the sentence in the subject's article, the property's cue, the
    object), as 2WikiMultiHopQA ships its evidence triples, but as auditable text."""

    passage_id: str
    start: int  # 0-based offsets of the sentence in the passage text, end exclusive
    end: int
    text: str
    subject: str  # the hop's subject, as the graph or the passage names it
    relation: str  # the property the sentence states ('place of death')
    object: str  # the hop's object as the sentence writes it
    source: str  # article (the subject's own) | source (the slot's passage) | retrieved


def hop_evidence(hop: Hop) -> dict[str, Any]:
    """A target's evidence fields (its span and where it lies) from the hop whose sentence
    holds the answer: the chain's last."""
    return {"evidence": hop.text, "passage_id": hop.passage_id, "start": hop.start, "end": hop.end}


def chain_text(chain: Sequence[Hop]) -> str:
    """The chain as the verifier, the gold-evidence check and the solver's reward read it:
    its sentences in hop order."""
    return " ".join(h.text for h in chain)


@dataclass(frozen=True)
class Target:
    """What one record asks for, fixed before the question is written (None fields and a
    `reason` when nothing supports it)."""

    kind: str  # kg | passage (one sentence) | bridge | comparison (two passages)
    answer: str | None = None  # the surface form as the evidence writes it
    aliases: tuple[str, ...] = ()  # every accepted form, the answer first
    evidence: str | None = None  # the final hop's sentence
    passage_id: str | None = None
    start: int | None = None
    end: int | None = None
    answer_at: int | None = None  # offset of the answer inside the evidence
    source: str = "none"  # source | retrieved | article | none: where the final hop was found
    subject: str = ""  # what the question must name: the start entity (or its description)
    facts: str | None = None  # the (sub-)path the question follows, rendered
    path: dict | None = None  # that sub-path: {"nodes": [...], "relations": [...]}
    waypoints: list[str] = field(default_factory=list)  # labels of v_0 .. v_{h-1}
    span_kind: str | None = None  # date | number | name (passage tasks)
    answer_kind: str = "name"  # date | number | person | place | name: what the question asks
    chain: tuple[Hop, ...] = ()  # one verbatim span per hop, the final hop last
    # names the question must not contain: the bridge entities (and the start entity when it is
    # described instead of named)
    hidden: tuple[str, ...] = ()
    style: str = "plain"  # plain | obfuscated: the start entity named, or described
    options: tuple[str, ...] = ()  # comparison: the two entities the question must name
    missing_hop: int | None = None  # no_supporting_passage: the first hop no passage states
    ruled: str | None = None  # the rule-built question, where the task words one itself
    # not posed: no_supporting_passage | no_answer_span | many_valued_relation |
    # duplicate_target (the shard asks for the same answer and evidence already)
    reason: str | None = None

    @property
    def posed(self) -> bool:
        return self.reason is None

    @property
    def hops(self) -> int:
        """The question's own hops: its chain's length (a KG path not posed: its relations)."""
        if self.chain:
            return len(self.chain)
        return len(self.path["relations"]) if self.path and self.kind == "kg" else 1

    @property
    def chain_evidence(self) -> str | None:
        """What the verifier and the gates hand the solver as evidence: the whole chain."""
        return chain_text(self.chain) if self.chain else self.evidence


# ---- surface forms ------------------------------------------------------------------------


def date_forms(node_id: str, label: str) -> list[str]:
    """'time:+1949-05-23T00:00:00Z/11' -> 23 May 1949, May 23, 1949, May 1949, 1949: the
    exact value first, then coarser ones a passage may write instead."""
    m = _TIME_ID.match(node_id)
    if not m:
        return [label]
    sign, year, month, day, prec = m.groups()
    y, mo, d = int(year), int(month), int(day)
    p = int(prec) if prec else 9
    era = " BC" if sign == "-" else ""
    out = [label]
    if p >= 11 and mo and d:
        out += [f"{d} {MONTHS[mo - 1]} {y}{era}", f"{MONTHS[mo - 1]} {d}, {y}{era}"]
    if p >= 10 and mo:
        out.append(f"{MONTHS[mo - 1]} {y}{era}")
    if p >= 9:
        out.append(f"{y}{era}")
    return list(dict.fromkeys(out))


def quantity_forms(node_id: str, label: str) -> list[str]:
    """'1,047 kilometre' -> 1,047 kilometres, 1,047 km, 1047 km, 1,047, 1047; the value also
    rounded as passages write it, within 2 % (`_close`): a million or more in millions ('2.8
    million', '84 million'), a fraction to a whole number ('105' for 105.4), a large number
    to the nearest 10 ... 10,000 ('890' for 891.1, '357,600' for 357,588)."""
    m = _QUANTITY_ID.match(node_id)
    amount = m.group(1).lstrip("+") if m else label.split(" ")[0].replace(",", "")
    unit = label.partition(" ")[2]
    try:
        num = float(amount)
    except ValueError:
        return [label]
    plain = f"{int(num)}" if num.is_integer() else amount
    grouped = f"{int(num):,}" if num.is_integer() else amount
    numbers = [grouped, plain]
    for scale, word in ((1e9, "billion"), (1e6, "million")):
        if abs(num) >= scale:  # 2,755,309 -> "2.8 million", as a passage rounds it
            for d in (1, 2, 0):
                r = round(num / scale, d)
                if _close(r * scale, num):
                    numbers.append(f"{r:.{d}f}".rstrip("0").rstrip(".") + f" {word}")
            break
    else:
        rounded = [round(num, d) for d in (0, -1, -2, -3, -4) if abs(num) >= 10 ** (1 - d)]
        numbers += [f"{r:,.0f}" for r in rounded if _close(r, num)]
    numbers = list(dict.fromkeys(numbers))
    out = [label]
    for n in numbers:
        out += [f"{n} {u}" for u in (unit, *UNIT_FORMS.get(unit, ())) if u]
    out += numbers
    return list(dict.fromkeys(out))


def _close(rounded: float, value: float) -> bool:
    """A rounding a passage may write for the value: within 2 % of it ('84 million' for
    84,358,845; not '3 million' for 2,755,309)."""
    return abs(rounded - value) <= 0.02 * abs(value)


def entity_forms(label: str, aliases: Sequence[str] = ()) -> list[str]:
    """The label, the label without a disambiguation '(...)', then the aliases."""
    base = re.sub(r"\s*\([^)]*\)$", "", label).strip()
    return [f for f in dict.fromkeys([label, base, *aliases]) if f and normalize(f)]


def answer_kind(node: dict, answer_type: str | None = None) -> str:
    """What an end node's question asks for: a date, a number, a person, a place, a name."""
    if node["id"].startswith("time:"):
        return "date"
    if node["id"].startswith("quantity:"):
        return "number"
    return {"Person": "person", "Location": "place"}.get(answer_type or "", "name")


def answer_forms(node: dict, aliases: Sequence[str] = ()) -> list[str]:
    """Every accepted surface form of a path's end node (id, label)."""
    nid, label = node["id"], node.get("label") or node["id"]
    if nid.startswith("time:"):
        return date_forms(nid, label)
    if nid.startswith("quantity:"):
        return quantity_forms(nid, label)
    return entity_forms(label, aliases)


def find_form(text: str, forms: Sequence[str], whole_names: bool = False) -> tuple[int, int] | None:
    """The first (leftmost, then longest) occurrence of any form on word boundaries (a
    hyphen joins words: 'France' is not in 'Île-de-France'); case is ignored for names, never
    for digits. `whole_names`: a name next to another capitalised word is part of a longer
    name and does not count ('New York' in 'New York City', 'Germany' in 'East Germany')."""
    best: tuple[int, int] | None = None
    tail = r"(?![\w-])(?!(?-i:\s+[A-Z]))" if whole_names else r"(?![\w-])"
    for f in forms:
        for m in re.finditer(rf"(?<![\w-]){re.escape(f)}{tail}", text, re.I):
            if whole_names and _after_name(text, m.start()):
                continue
            key = (m.start(), -(m.end() - m.start()))
            if best is None or key < (best[0], -(best[1] - best[0])):
                best = (m.start(), m.end())
            break
    return best


_NAME_BEFORE = re.compile(r"(?:^|[^\w.])([A-Z][\w'’-]*)\s+$")


def _after_name(text: str, at: int) -> bool:
    """A capitalised word other than a sentence opener right before `at`."""
    m = _NAME_BEFORE.search(text[max(0, at - 40) : at])
    return m is not None and m.group(1) not in OPENING_WORDS


def _sentence_at(text: str, pos: int) -> Span | None:
    return next((s for s in sentences(text) if s.start <= pos < s.end), None)


# ---- KG tasks -----------------------------------------------------------------------------


def sub_path_span(path: dict, hops: int) -> tuple[int, int] | None:
    """(a, b): the sub-path a question follows is the path's relations a..b-1 (nodes a..b).
    The path is cut back to its last single-valued hop (the end of '... Poland -> shares
    border with -> Germany' is one of several countries; Poland, reached by 'located in', is
    one), then to its last `hops` relations (at least 1), shortened so that no relation on it
    is many-valued: an h-hop question starts h nodes before the answer and every hop names one
    thing. None when every hop of the path is many-valued."""
    rels = path["relations"]
    k = len(rels)
    while k and rels[k - 1]["id"] in MANY_VALUED:
        k -= 1
    if k == 0:
        return None
    h = 0
    while h < max(1, min(hops, k)) and rels[k - h - 1]["id"] not in MANY_VALUED:
        h += 1
    return k - h, k


def sub_path(path: dict, hops: int) -> dict | None:
    """The sub-path itself (`sub_path_span`): {"nodes": [...], "relations": [...]}."""
    span = sub_path_span(path, hops)
    if span is None:
        return None
    a, b = span
    return {"nodes": path["nodes"][a : b + 1], "relations": path["relations"][a:b]}


def support_in(
    passage: tuple[str, str, str],
    forms: Sequence[str],
    subject_forms: Sequence[str],
    pid: str,
) -> tuple[Span, int, int] | None:
    """(sentence, answer start, answer end) when the passage (id, title, text) states the
    final hop: a sentence holds the answer and a word stating the property `pid`
    (`properties.states`), and names the hop's subject or is in the subject's own article
    (its title). None otherwise."""
    _, title, text = passage
    own_article = any(normalize(title) == normalize(s) for s in subject_forms)
    fallback = None
    for s in sentences(text):
        hit = find_form(s.text, forms, whole_names=True)
        if hit is None or not states(pid, s.text):
            continue
        a0, a1 = s.start + hit[0], s.start + hit[1]
        rest = s.text[: hit[0]] + " " + s.text[hit[1] :]
        if find_form(rest, subject_forms, whole_names=True) is not None:
            return s, a0, a1
        if own_article and fallback is None:
            fallback = (s, a0, a1)
    return fallback


# ---- passage tasks ------------------------------------------------------------------------

_DATE_RE = re.compile(
    rf"\b(?:\d{{1,2}} {_MONTH} \d{{3,4}}|{_MONTH} \d{{1,2}}, \d{{3,4}}|{_MONTH} \d{{3,4}}"
    r"|(?:1[0-9]|20)\d\d(?:s)?)\b"
)
_NUMBER_RE = re.compile(
    r"(?<![\w.,])\d(?:[\d,]*\d)?(?:\.\d+)?(?: (?:million|billion|thousand|hundred))?"
    r"(?: (?:square )?[a-z]+metres?| km| kg| per cent| percent|%)?(?![\w])"
)
_NAME_RE = re.compile(r"\b[A-Z][\w'’-]+(?:\s+(?:of|de|von|the)?\s*[A-Z][\w'’-]+)*")
# Which span kinds each task type asks for, in order of preference.
SPAN_PREFERENCE = {
    "temporal": ("date", "number", "name"),
    "aggregation": ("number", "date", "name"),
    "factual": ("name", "date", "number"),
    "comparison": ("name", "number", "date"),
    "causal": ("name", "date", "number"),
}


def answer_spans(text: str, title: str) -> dict[str, list[tuple[int, int]]]:
    """Candidate answers of a passage as offsets, by kind: dates (and years), numbers (not
    years) and names (capitalised runs, not the title's own words, not a lone sentence
    opener)."""
    dates = [(m.start(), m.end()) for m in _DATE_RE.finditer(text)]
    in_date = {i for a, b in dates for i in range(a, b)}
    numbers = [
        (m.start(), m.end())
        for m in _NUMBER_RE.finditer(text)
        if m.start() not in in_date and not re.fullmatch(r"\d", m.group(0))
    ]
    title_words = {w for w in normalize(title).split() if len(w) >= 4}
    starts = {s.start for s in sentences(text)}
    multi, single = [], []
    for m in _NAME_RE.finditer(text):
        words = m.group(0).split()
        start = m.start()
        while words and (words[0] in OPENING_WORDS or words[0].islower()):
            start = text.index(words[1], start + len(words[0])) if len(words) > 1 else start
            words = words[1:]
        words = [w.removesuffix("'s").removesuffix("’s") for w in words]
        if not words or any(_MONTH_WORD.fullmatch(w) for w in words):
            continue
        span = " ".join(words)
        if not text.startswith(span, start) or set(normalize(span).split()) & title_words:
            continue  # the passage's own subject is what the question names, not its answer
        end = start + len(span)
        if len(words) > 1:
            multi.append((start, end))
        elif start not in starts and len(span) >= 4 and not text.startswith(".", end):
            single.append((start, end))  # not a capitalised sentence opener, not "Sgt."
    names = multi or single
    return {"date": dates, "number": numbers, "name": names}


_MONTH_WORD = re.compile(_MONTH)


def passage_target(
    passage: tuple[str, str, str], task_type: str, pick: int, subject: str | None = None
) -> Target:
    """A span of the source passage as the answer, its sentence as the evidence; the kind
    follows the task type, and `pick` (a hash of the record id) chooses among its spans."""
    pid, title, text = passage
    spans = answer_spans(text, title)
    for kind in SPAN_PREFERENCE.get(task_type, ("name", "date", "number")):
        cands = spans[kind]
        while cands:
            a0, a1 = cands[pick % len(cands)]
            sent = _sentence_at(text, a0)
            if sent is not None and a1 <= sent.end:
                answer = text[a0:a1]
                named = subject or re.sub(r"\s*\([^)]*\)$", "", title)
                hop = Hop(pid, sent.start, sent.end, sent.text, named, kind, answer, "source")
                return Target(
                    kind="passage",
                    answer=answer,
                    aliases=(answer,),
                    evidence=sent.text,
                    passage_id=pid,
                    start=sent.start,
                    end=sent.end,
                    source="source",
                    answer_at=a0 - sent.start,
                    subject=named,
                    span_kind=kind,
                    answer_kind=kind,
                    chain=(hop,),
                )
            cands = [c for c in cands if c != (a0, a1)]
    return Target(kind="passage", subject=title, reason="no_answer_span")


# ---- obfuscated subjects --------------------------------------------------------------------


def obfuscate(t: Target, entity: str, descriptions: Sequence[str]) -> Target:
    """The target with its start entity (`entity`, as the subject names it) described instead
    of named: the first of `descriptions` (each unique in the graph) that names none of the
    chain's other entities nor the answer. Unchanged when none qualifies."""
    forms = entity_forms(entity)
    avoid = [*t.hidden, *t.aliases, *forms]  # nor the entity itself ('the city in Salzburg')
    for d in descriptions:
        if find_form(d, avoid) is not None:
            continue
        subject = t.subject.replace(entity, d) if entity in t.subject else d
        return replace(
            t,
            subject=subject,
            style="obfuscated",
            facts=t.facts.replace(entity, d, 1) if t.facts else t.facts,
            hidden=tuple(dict.fromkeys([*t.hidden, *forms])),
            ruled=t.ruled.replace(entity, d) if t.ruled else None,
        )
    return t
