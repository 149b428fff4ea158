"""How a Wikidata property is asked about and how a passage states it.

A KG question names the final hop's value by its property ("Where did Niels Bohr die?"), and
the evidence must state that hop: a sentence holding the answer and the hop's subject can still
be about something else ("in 1949 two states emerged" does not say Germany was founded in 1949).
`cues` are the words a sentence stating the property uses; a property without cues (country,
located in) is stated by the names alone. A property not listed reads from its label and is
checked by names only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Property:
    noun: str  # names the value inside a chain: "place of death" (of {x}), or with its own {x}
    question: str  # asks for the value of {x}: the entity, or the chain that leads to it
    cues: str = ""  # regex of words a sentence stating it uses ("" = the names suffice)


PROPERTIES: dict[str, Property] = {
    "P17": Property("country", "In which country is {x}?"),
    "P131": Property("region containing {x}", "In which administrative region is {x} located?"),
    "P30": Property("continent", "On which continent is {x}?"),
    "P276": Property("location", "Where is {x}?"),
    "P19": Property("place of birth", "Where was {x} born?", r"born|birth(?:place)?|native"),
    "P20": Property("place of death", "Where did {x} die?", r"died|death|buried"),
    # a lifespan in brackets states both: "Rutherford (30 August 1871 – 19 October 1937)"
    "P569": Property("date of birth", "When was {x} born?", r"born|birth|\d{3,4}\s*[–-]\s*\d"),
    "P570": Property("date of death", "When did {x} die?", r"died|death|\d{3,4}\s*[–-]\s*\d"),
    "P571": Property(
        "founding date",
        "When was {x} founded?",
        r"founded|established|formed|created|founding|incorporated|built|independence",
    ),
    "P577": Property("publication date", "When was {x} published?", r"published|publication"),
    "P1082": Property(
        "population",
        "What is the population of {x}?",
        r"population|inhabitants|residents|people|populous",
    ),
    "P2046": Property("area", "What is the area of {x}?", r"area|covers|square"),
    "P2043": Property("length", "How long is {x}?", r"long|length"),
    "P2048": Property("height", "How tall is {x}?", r"tall|high|height"),
    "P36": Property("capital", "What is the capital of {x}?", r"capital"),
    "P37": Property(
        "official language", "What is the official language of {x}?", r"language|spoken"
    ),
    "P38": Property("currency", "What is the currency of {x}?", r"currency"),
    "P50": Property("author", "Who wrote {x}?", r"wrote|written|author|published"),
    "P86": Property("composer", "Who composed {x}?", r"composed|composer|wrote|written"),
    "P170": Property("creator", "Who created {x}?", r"created|creator|made|designed|painted"),
    "P175": Property("performer", "Who performed {x}?", r"performed|recorded|sang|sung|by"),
    "P112": Property("founder", "Who founded {x}?", r"founded|founder|established"),
    "P61": Property("discoverer", "Who discovered {x}?", r"discovered|invented|discoverer"),
    "P22": Property("father", "Who was the father of {x}?", r"father|son|daughter"),
    "P25": Property("mother", "Who was the mother of {x}?", r"mother|son|daughter"),
    "P159": Property(
        "headquarters", "Where is the headquarters of {x}?", r"headquarter|based|seat"
    ),
    "P403": Property(
        "mouth", "Which body of water does {x} flow into?", r"flow|mouth|empties|reach"
    ),
    "P495": Property("country of origin", "What is the country of origin of {x}?"),
    "P740": Property("place of formation", "Where was {x} formed?", r"formed|founded"),
}


def value_of(pid: str, label: str | None, x: str) -> str:
    """The value of a property of `x` as a noun phrase: 'the place of death of Niels Bohr',
    'the region containing Pisa'; a property not listed reads from its label."""
    p = PROPERTIES.get(pid)
    noun = p.noun if p else label or pid
    return f"the {noun.format(x=x)}" if "{x}" in noun else f"the {noun} of {x}"


def states(pid: str, sentence: str) -> bool:
    """The sentence uses a word that states the property (always true without cues)."""
    p = PROPERTIES.get(pid)
    return p is None or not p.cues or re.search(rf"\b(?:{p.cues})", sentence, re.I) is not None
