"""Evidence spans: sentence segmentation with character offsets.

Offsets are 0-based, end-exclusive Python string offsets into the passage text, so an auditor
can re-check a span with `substr(text, start + 1, end - start)` in SQL.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# A sentence ends at . ! or ? followed by whitespace and an upper-case letter, digit or quote;
# common abbreviations, titles and initials ("St.", "Dr.", "Sgt. Pepper's", "J.") do not end a
# sentence.
_BOUNDARY = re.compile(r"(?<=[.!?])[\"')\]]?\s+(?=[A-Z0-9\"'(])")
_NO_BREAK = re.compile(
    r"(?:\b(?:St|Dr|Mr|Mrs|Ms|Prof|Jr|Sr|Mt|No|vs|c|ca|e\.g|i\.e"
    r"|Sgt|Capt|Col|Gen|Lt|Maj|Cpl|Adm|Gov|Rev|Fr|Sen|Rep|Hon)|\b[A-Z])\.$"
)

# Capitalised words that open a sentence or clause and are not names ("In 1860 ...", "He ...").
OPENING_WORDS = frozenset(
    [
        "The",
        "A",
        "An",
        "It",
        "He",
        "She",
        "They",
        "This",
        "These",
        "Those",
        "In",
        "On",
        "At",
        "By",
        "For",
        "From",
        "During",
        "After",
        "Before",
        "When",
        "While",
        "However",
        "Its",
        "His",
        "Her",
        "Their",
        "There",
        "Today",
        "Later",
        "Within",
        "Under",
        "Through",
        "Across",
        "Among",
        "Despite",
        "Although",
        "Because",
        "With",
        "Without",
        "As",
        "At",
    ]
)


@dataclass(frozen=True)
class Span:
    text: str
    start: int
    end: int


def sentences(text: str) -> list[Span]:
    """Split a passage into sentences, keeping exact offsets into `text`."""
    spans: list[Span] = []
    start = 0
    for m in _BOUNDARY.finditer(text):
        if _NO_BREAK.search(text[start : m.start()]):
            continue
        # Keep a closing quote/bracket that follows the full stop inside the sentence.
        end = m.start() + (len(m.group(0)) - len(m.group(0).lstrip("\"')]")))
        spans.append(_trimmed(text, start, end))
        start = m.end()
    if start < len(text):
        spans.append(_trimmed(text, start, len(text)))
    return [s for s in spans if s.text]


def _trimmed(text: str, start: int, end: int) -> Span:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return Span(text[start:end], start, end)
