"""Which Wikidata properties a question can chain through.

"The country that borders Switzerland" names no single country: an entity commonly holds
several values of these properties (borders, members, awards, rivers it lies on, ...), so a
question may not chain through them nor ask for their value, and path expansion offers them
only as distractor branches (`ExpansionSettings.chainable_only`).
"""

from __future__ import annotations

MANY_VALUED = frozenset(
    {
        "P47",  # shares border with
        "P150",  # contains the administrative territorial entity
        "P463",  # member of
        "P166",  # award received
        "P527",  # has part(s)
        "P206",  # located in or next to body of water
        "P1376",  # capital of
        "P27",  # country of citizenship
        "P106",  # occupation
        "P69",  # educated at
        "P108",  # employer
        "P800",  # notable work
        "P190",  # twinned administrative body
        "P26",  # spouse
        "P40",  # child
        "P1344",  # participant in
        "P793",  # significant event
        "P361",  # part of
        "P31",  # instance of
        "P279",  # subclass of
    }
)
