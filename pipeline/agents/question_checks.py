"""Validity a reader would apply to a (question, answer) pair, each failure a named reason.

The paper's filter (q and a non-empty, Norm(a) not inside Norm(q)) lets through questions a
solver cannot use: ones about "the passage" it never sees, statements, prompt debris, answers
that are sentences. Each rule here rejects one such class; `question_reason` returns the first
that applies (None: valid). Pure functions, so tests feed them authored rows.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from pipeline.agents.evidence import OPENING_WORDS
from pipeline.agents.rewards import contains, normalize, token_f1, validity

# A text the solver never sees: the proposer's passage, sentence or "information".
_UNSEEN = re.compile(
    r"\b(?:(?:the|this|that|these|above|following|given|provided)\s+"
    r"(?:passage|passages|text|texts|sentence|sentences|paragraph|article|document|excerpt|"
    r"context|information|evidence|statement|source|snippet|facts?|story|"
    r"(?:author|writer)(?!\s+of\b))"
    r"|(?:mentioned|stated|described|given|shown)\s+(?:above|below|here|earlier)"
    r"|according to (?:it|this|the (?:passage|text|article|author)))\b",
    re.I,
)
_INTERROGATIVE = re.compile(r"\b(?:what|which|who|whom|whose|when|where|why|how)\b", re.I)
# Prompt-format debris: tags, field names of our prompts, sentence references, newlines.
_DEBRIS = re.compile(
    r"[<>\n\[\]{}]|\b(?:Question|Answer|Evidence|Passage|Facts?|Topic|Hops|Task|Doc \d)\s*:"
    r"|\bDoc \d\b",
    re.I,
)
# Non-answers a base model writes instead of a short answer.
_NON_ANSWER = re.compile(
    r"^(?:i |i'|we |let me|yes\b|no\b|none\b|all of them|unknown|not (?:stated|given|known))",
    re.I,
)


# How a question that asks for each kind of answer opens (guided decoding writes these; the
# check holds them on every backend). A date answers "when / in what year", a number "how
# many / how long", a person "who", a place "where / in which", any name "what / which".
OPENERS = {
    "date": r"When|In (?:what|which) (?:year|decade|century|month)|On what date|What year",
    "number": r"How (?:many|much|long|large|big|high|tall|deep|wide|far|old)"
    r"|What (?:is|was) the (?:population|length|area|height|number)",
    "person": r"Who|Whom|Whose|Which (?:person|man|woman|king|queen|scientist|composer|artist)",
    "place": r"Where|In (?:what|which)|Which|What|On (?:what|which)|From (?:what|which)",
    "name": r"What|Which|Who|Whom|Whose|Where|In (?:what|which)|On (?:what|which)|By whom",
}
_NOT_A_NAME = re.compile(
    r"^(?:when|(?:in |on |at )?(?:what|which) (?:year|date|decade|century|month)|how (?:many|much))"
    r"\b",
    re.I,
)


# The question phrase left in place of the answer (rule-based, "in situ" questions).
IN_SITU = {
    "date": r"\b(?:in|on|by|from|around|since) what (?:year|date|decade)\b|\bwhat (?:year|date)\b",
    "number": r"\bhow (?:many|much)\b",
    "person": r"\b(?:whom|who)\b",
    "place": r"\b(?:what|whom|where)\b",
    "name": r"\b(?:what|whom|who)\b",
}


def asks_for(question: str, kind: str) -> bool:
    """The question opens the way a question for this kind of answer does, or keeps the
    kind's question phrase in place of the answer ('... was founded in what year?')."""
    q = question.strip()
    kind = kind if kind in OPENERS else "name"
    if re.match(rf"(?:{OPENERS[kind]})\b", q, re.I):
        return kind in ("date", "number") or not _NOT_A_NAME.match(q)
    return bool(re.search(IN_SITU[kind], q)) and (
        kind in ("date", "number") or not any(re.search(IN_SITU[k], q) for k in ("date", "number"))
    )


# Words any question may use without its context saying them (question words, generic nouns).
_FREE_WORDS = frozenset(
    [
        "which",
        "what",
        "when",
        "where",
        "whom",
        "whose",
        "does",
        "have",
        "been",
        "were",
        "with",
        "from",
        "into",
        "that",
        "this",
        "than",
        "then",
        "there",
        "their",
        "they",
        "also",
        "year",
        "years",
        "date",
        "decade",
        "century",
        "month",
        "many",
        "much",
        "long",
        "name",
        "named",
        "called",
        "known",
        "kind",
        "type",
        "city",
        "town",
        "country",
        "state",
        "place",
        "person",
        "people",
    ]
)


def unsupported_words(question: str, context: str) -> list[str]:
    """Content words of the question (4+ letters) that no word of the context shares a
    4-letter stem with: what the question asserts beyond its evidence, KG facts and subject."""
    have = {w[:4] for w in normalize(context).split() if len(w) >= 4}
    return [
        w for w in normalize(question).split()
        if len(w) >= 4 and w not in _FREE_WORDS and w[:4] not in have
    ]  # fmt: skip


def asks_for_date(question: str, answer: str) -> bool:
    """A date question asks at the answer's grain: a year for '1015', a decade for '1960s', a
    date for '2 December 1804' ('When' fits any)."""
    q = question.lower()
    if re.search(r"\bwhen\b", q):
        return True
    if re.fullmatch(r"\d{3,4}s", answer.strip()):
        return "decade" in q
    if re.fullmatch(r"\d{3,4}(?: BC)?", answer.strip()):
        return "year" in q
    return bool(re.search(r"\b(?:date|day|month)\b", q))


def _glued(question: str, subject: str) -> bool:
    """The subject run into the word or punctuation before it ('...its finalLudwig van
    Beethoven?', '...hits,Paul McCartney?'): what guided decoding leaves when a weak model
    forgets the subject until the end."""
    return re.search(rf"[^\s\"'(“‘]{re.escape(subject)}", question) is not None


def question_reason(
    question: str | None,
    answer: str | None,
    aliases: Sequence[str] = (),
    subject: str | None = None,
    kind: str | None = None,
    *,
    context: str | None = None,
    max_unsupported: int = 1,
    count_tokens: Callable[[str], int] | None = None,
    max_answer_tokens: int = 12,
    examples: Sequence[str] = (),
    names_suffice: bool = False,
    hidden: Sequence[str] = (),
    options: Sequence[str] = (),
) -> str | None:
    """The first rule the pair breaks, or None.

    `aliases`: every accepted form of the answer (none may appear in the question).
    `subject`: what the question must name (the path's start entity, the passage's title):
    without it "When was it founded?" is not self-contained. `kind`: what the answer is (date,
    number, person, place, name): "In which year ...?" for a person is the wrong question.
    `context`: what the question may draw on (the evidence, the KG facts, the subject); more
    than `max_unsupported` content words outside it is a question about something else.
    `examples`: few-shot questions a base model tends to copy. `names_suffice` (passage
    tasks, whose subject is only the passage's title): a question that `stands_alone`, naming
    what it asks about otherwise, need not name the title. `hidden`: the names of a multi-hop
    question's bridge entities (and of its start entity when it is described): naming one is
    `bridge_leak`. `options`: a comparison's two entities, which it must name, one of them
    its answer (the paper's filter does not apply to a question that names its options)."""
    q, a = (question or "").strip(), (answer or "").strip()
    if options:
        if not normalize(q) or not normalize(a):
            return "empty_question" if not normalize(q) else "empty_answer"
        if not all(contains(q, o) for o in options) or not any(contains(a, o) for o in options):
            return "wrong_options"
    else:
        ok, why = validity(q, a)  # the paper's filter: q, a non-empty, Norm(a) not in Norm(q)
        if not ok:
            return why
        if any(contains(q, x) for x in aliases):
            return "answer_in_question"
    if any(contains(q, x) for x in hidden):
        return "bridge_leak"
    if _DEBRIS.search(q) or _DEBRIS.search(a) or (subject and _glued(q, subject)):
        return "format_debris"
    if _UNSEEN.search(q):
        return "refers_to_unseen_text"
    if not q.endswith("?") or not _INTERROGATIVE.search(q):
        return "not_a_question"
    if (kind and not asks_for(q, kind)) or (kind == "date" and not asks_for_date(q, a)):
        return "wrong_question_type"
    if _NON_ANSWER.search(a):
        return "non_answer"
    n_tokens = count_tokens(a) if count_tokens else len(a.split())
    if n_tokens > max_answer_tokens:
        return "answer_too_long"
    if subject and not names_subject(q, subject) and not (names_suffice and stands_alone(q)):
        return "no_named_subject"
    if context is not None and len(unsupported_words(q, context)) > max_unsupported:
        return "not_grounded"
    if any(token_f1(q, e) >= 0.8 for e in examples):
        return "copies_few_shot_example"
    return None


# Last words that name a kind of thing, not one thing ("Amazon River" is not named by "River").
_GENERIC = frozenset(
    [
        "river",
        "sea",
        "lake",
        "ocean",
        "mountain",
        "island",
        "city",
        "town",
        "state",
        "kingdom",
        "republic",
        "empire",
        "college",
        "university",
        "school",
        "museum",
        "library",
        "church",
        "cathedral",
        "prize",
        "award",
        "war",
        "battle",
        "wall",
        "species",
        "physics",
        "chemistry",
        "medicine",
        "society",
        "company",
        "band",
        "party",
        "voivodeship",
        "group",
        "team",
        "corps",
        "records",
        "studios",
        "county",
        "province",
        "district",
        "union",
        "club",
        "hall",
        "house",
        "abbey",
        "tower",
        "bridge",
        "square",
        "street",
        "park",
        "academy",
        "institute",
        "orchestra",
        "album",
        "symphony",
    ]
)


def names_subject(question: str, subject: str) -> bool:
    """The question names its subject: every content word of it, or all but one of a long
    one ('Amazon' does not name 'Amazon River'; 'University of Paris' names 'University of
    Paris (1896-1968)'), or a person's surname as the question writes it ('Wagner' names
    'Richard Wagner', 'McCartney' names 'Paul McCartney')."""
    words = [w for w in normalize(subject).split() if len(w) > 2 or w.isdigit()]
    if not words:
        return True
    q = f" {normalize(question)} "
    found = sum(f" {w} " in q for w in words)
    if found == len(words) or (len(words) >= 3 and found >= len(words) - 1):
        return True
    last = subject.split()[-1] if subject.split() else ""
    return (
        2 <= len(subject.split()) <= 3
        and all(w[:1].isupper() for w in subject.split() if len(w) > 3)
        and len(last) >= 4
        and last.lower() not in _GENERIC
        and re.search(rf"\b{re.escape(last)}\b", question) is not None
    )


# Nouns by which a passage refers to its subject as a kind of thing ("the city", "the band").
KIND_NOUNS = ("country", "city", "town", "college", "university", "river", "band", "island",
              "state", "region", "party")  # fmt: skip
# A proper name: a capitalised word, or a run of them joined by lower-case particles.
_PROPER = re.compile(r"[A-Z][\w'’.-]*(?:\s+(?:(?:of|de|von|van|the)\s+)?[A-Z][\w'’.-]*)*")
# What refers to something named outside the question: a personal pronoun, or a bare "the
# city" standing for the passage's subject ("the city of Florence" names it).
_REFERENCE = re.compile(
    r"\b(?:he|she|him|her|his|hers|they|them|their|its"
    rf"|the (?:{'|'.join((*KIND_NOUNS, 'group', 'company', 'team', 'club'))}))\b(?! of\b)",
    re.I,
)
# Not names at a question's start: sentence openers ("In", "He", "It") and question words.
_OPENING_WORDS = OPENING_WORDS | {"What", "Which", "Who", "Whom", "Whose", "Where", "Why", "How",
                                  "Since", "Until"}  # fmt: skip


def proper_names(question: str) -> list[str]:
    """Capitalised names in the question, not counting a capitalised opening word ('In 1860
    ...'), question words or 'I'."""
    out = []
    for m in _PROPER.finditer(question):
        words = m.group(0).split()
        if m.start() == 0 and words[0] in _OPENING_WORDS:
            words = words[1:]
        name = " ".join(words).strip(".")
        if name and name != "I":
            out.append(name)
    return out


def stands_alone(question: str) -> bool:
    """A question a reader can search for without its passage: it names what it asks about (a
    name of two or more words, or two names) and nothing in it points back at a text it does
    not quote (no 'he', 'their', 'the city' whose referent it leaves unnamed)."""
    names = proper_names(question)
    named = any(len(n.split()) >= 2 for n in names) or len(set(names)) >= 2
    return named and _REFERENCE.search(question) is None


_NAME_PARTICLES = frozenset(["van", "von", "de", "da", "di", "del", "der", "du", "le", "la", "bin"])


def person_shaped(name: str) -> bool:
    """A name shaped like a person's: two to four capitalised words (particles allowed), no
    leading 'The', no comma, bracket or digit, no word naming a kind of place or body ('United
    Kingdom', 'Royal Society', 'Trinity College, Cambridge' are not). A one-word title is not:
    'he' in the Ulm article is somebody else."""
    words = name.split()
    return (
        2 <= len(words) <= 4
        and words[0] != "The"
        and not re.search(r"[,()\d]", name)
        and all(w[:1].isupper() or w in _NAME_PARTICLES for w in words)
        and not any(w.lower().removesuffix("'s").strip(".") in _GENERIC for w in words)
    )
