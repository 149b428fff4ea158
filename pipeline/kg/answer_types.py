"""What kind of thing a KG path's answer is: Person / Location / Organization / Date / Number /
Other, from the answer item's classes, then its typing properties, then the relation's range.

The task-type mix of a curriculum is balanced on these labels, so they are computed once per
subgraph at extraction time and stored with it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from pipeline.kg.graph import KnowledgeGraph

if TYPE_CHECKING:
    from pipeline.kg.subgraphs import PathState

ANSWER_TYPES = ("Person", "Location", "Organization", "Date", "Number", "Other")

PERSON_CLASSES = frozenset({"Q5", "Q15632617"})
ORGANIZATION_CLASSES = frozenset(
    {
        "Q43229",  # organization
        "Q4830453",  # business
        "Q783794",  # company
        "Q891723",  # public company
        "Q6881511",  # enterprise
        "Q3918",  # university
        "Q875538",  # public university
        "Q902104",  # private university
        "Q189004",  # college
        "Q2385804",  # educational institution
        "Q4671277",  # academic institution
        "Q31855",  # research institute
        "Q1664720",  # institute
        "Q955824",  # learned society
        "Q748019",  # scientific society
        "Q7278",  # political party
        "Q484652",  # international organization
        "Q327333",  # government agency
        "Q163740",  # nonprofit organization
        "Q215380",  # musical group
        "Q5741069",  # rock band
        "Q2088357",  # musical ensemble
        "Q476028",  # association football club
        "Q1331793",  # media company
        "Q207694",  # art museum
        "Q33506",  # museum
    }
)
LOCATION_CLASSES = frozenset(
    {
        "Q17334923",  # location
        "Q2221906",  # geographic location
        "Q486972",  # human settlement
        "Q515",  # city
        "Q1549591",  # big city
        "Q5119",  # capital city
        "Q3957",  # town
        "Q532",  # village
        "Q6256",  # country
        "Q3624078",  # sovereign state
        "Q3024240",  # historical country
        "Q7275",  # state
        "Q56061",  # administrative territorial entity
        "Q10864048",  # first-level administrative country subdivision
        "Q35657",  # state of the United States
        "Q15284",  # municipality
        "Q1093829",  # city in the United States
        "Q747074",  # comune of Italy
        "Q484170",  # commune of France
        "Q42744322",  # urban municipality of Germany
        "Q70208",  # municipality of Switzerland
        "Q5107",  # continent
        "Q82794",  # geographic region
        "Q4022",  # river
        "Q23397",  # lake
        "Q165",  # sea
        "Q9430",  # ocean
        "Q8502",  # mountain
        "Q46831",  # mountain range
        "Q23442",  # island
        "Q41176",  # building
        "Q12280",  # bridge
    }
)
LOCATION_CUES = frozenset({"P625", "P30"})  # coordinate location, continent
ORGANIZATION_CUES = frozenset({"P159", "P452", "P1454", "P112"})  # HQ, industry, legal form


def _pids(text: str) -> list[str]:
    return text.split()


# Last resort when the answer item has no typing statements (common in subsets): the type the
# relation that reached it points to (its Wikidata value-type constraint, in short).
RELATION_RANGE = {
    **dict.fromkeys(
        _pids(
            "P17 P19 P20 P27 P30 P36 P47 P131 P150 P159 P206 P276 P403 P495 P551 P740 P840 "
            "P915 P1001 P1376 P4647"
        ),
        "Location",
    ),
    **dict.fromkeys(_pids("P54 P69 P102 P108 P123 P176 P195 P264 P463 P749 P1027"), "Organization"),
    **dict.fromkeys(
        _pids(
            "P6 P22 P25 P26 P35 P40 P50 P57 P61 P86 P87 P112 P170 P175 P287 P737 P802 P1066 P3373"
        ),
        "Person",
    ),
}


def answer_types(graph: KnowledgeGraph, paths: Sequence[PathState]) -> dict[str, str]:
    """Person / Location / Organization / Date / Number / Other for each path's answer."""
    out: dict[str, str] = {}
    items = [p.last.qid for p in paths if p.last is not None and p.last.qid]
    classes = graph.classes(items)
    cues = graph.properties_of(items, sorted(LOCATION_CUES | ORGANIZATION_CUES))
    for p in paths:
        c = p.last
        if c is None:
            continue
        if c.value_type == "time":
            kind = "Date"
        elif c.value_type == "quantity":
            kind = "Number"
        elif c.qid is None:
            kind = "Other"
        else:
            cls, has = classes.get(c.qid, set()), cues.get(c.qid, set())
            if cls & PERSON_CLASSES:
                kind = "Person"
            elif cls & ORGANIZATION_CLASSES:
                kind = "Organization"
            elif cls & LOCATION_CLASSES:
                kind = "Location"
            elif has & ORGANIZATION_CUES:
                kind = "Organization"
            elif has & LOCATION_CUES:
                kind = "Location"
            else:
                kind = RELATION_RANGE.get(c.pid, "Other")
        out[p.seed] = kind
    return out
