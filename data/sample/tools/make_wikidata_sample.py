#!/usr/bin/env python3
"""Write the embedded Wikidata sample dump, data/sample/wikidata_sample.json.

The file has exactly the layout of the Wikidata JSON dump (latest-all.json): a line "[",
one compact JSON entity per line, every entity line but the last ending in ",", and a
closing line "]".  Items and properties are interleaved by numeric id, as in a real dump.

The facts live in the tables below.  They are real Wikidata ids and true, well-known facts
about 85 "covered" entities (people, places, works and institutions that have English
Wikipedia articles) plus the supporting entities and properties their claims point to.
The data deliberately includes the things that make truthy-statement handling matter:
several values with one "preferred" (populations with a P585 point-in-time qualifier,
Germany's capital), "deprecated" statements, "somevalue"/"novalue" snaks, Julian-calendar
and BCE dates, qualifiers, references, and media / identifier / URL statements.

The output is deterministic: no randomness and no clock.  Statement ids are the subject id,
"$" and a uuid5 of (subject, property, index); hashes are SHA-1 of the canonical snak JSON.

    python data/sample/tools/make_wikidata_sample.py [--out PATH]

Standard library only.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import uuid
from pathlib import Path

OUT_DEFAULT = Path(__file__).resolve().parents[1] / "wikidata_sample.json"
MODIFIED = "2026-10-01T00:00:00Z"
NAMESPACE = uuid.UUID("3b0c5e2a-7d41-5f8e-9a6b-1c2d3e4f5a60")
WD = "http://www.wikidata.org/entity/"
GREGORIAN = WD + "Q1985727"
JULIAN = WD + "Q1985786"
EARTH = WD + "Q2"

SOME = "<somevalue>"  # mainsnak of snaktype "somevalue"
NONE = "<novalue>"  # mainsnak of snaktype "novalue"

# Default units of quantity properties (Q712226 square kilometre, Q828224 kilometre,
# Q174728 centimetre, Q7727 minute; "1" means dimensionless).
UNITS = {
    "P1082": "1",
    "P2046": "Q712226",
    "P2053": "Q712226",
    "P2043": "Q828224",
    "P2048": "Q174728",
    "P2049": "Q174728",
    "P2047": "Q7727",
}

# --------------------------------------------------------------------------------------
# Properties: id, datatype, English label, English description, English aliases.
# --------------------------------------------------------------------------------------
PROPERTIES = [
    (
        "P17",
        "wikibase-item",
        "country",
        "sovereign state that this item is in (not to be used for human beings)",
        ["sovereign state", "state"],
    ),
    (
        "P18",
        "commonsMedia",
        "image",
        "image of relevant illustration of the subject",
        ["picture", "photo"],
    ),
    (
        "P19",
        "wikibase-item",
        "place of birth",
        "most specific known birth location of a person, animal or fictional character",
        ["birthplace", "born in"],
    ),
    (
        "P20",
        "wikibase-item",
        "place of death",
        "most specific known death location of a person, animal or fictional character",
        ["deathplace", "died in"],
    ),
    (
        "P21",
        "wikibase-item",
        "sex or gender",
        "sex or gender identity of human or animal",
        ["gender", "sex"],
    ),
    ("P22", "wikibase-item", "father", "male parent of the subject", ["dad", "parent"]),
    (
        "P26",
        "wikibase-item",
        "spouse",
        "the subject has the object as their spouse (husband, wife, partner, etc.)",
        ["husband", "wife", "married to"],
    ),
    (
        "P27",
        "wikibase-item",
        "country of citizenship",
        "the object is a country that recognizes the subject as its citizen",
        ["citizenship", "nationality"],
    ),
    ("P30", "wikibase-item", "continent", "continent of which the subject is a part", []),
    (
        "P31",
        "wikibase-item",
        "instance of",
        "that class of which this subject is a particular example and member",
        ["is a", "is an", "type"],
    ),
    (
        "P36",
        "wikibase-item",
        "capital",
        "seat of government of a country, province, state or other type of administrative territorial entity",
        ["capital city"],
    ),
    (
        "P37",
        "wikibase-item",
        "official language",
        "language designated as official by this item",
        [],
    ),
    ("P38", "wikibase-item", "currency", "currency used by item", ["money"]),
    (
        "P39",
        "wikibase-item",
        "position held",
        "subject currently or formerly holds the object position or public office",
        ["office held"],
    ),
    ("P40", "wikibase-item", "child", "subject has object as child", ["son", "daughter"]),
    (
        "P47",
        "wikibase-item",
        "shares border with",
        "countries or administrative subdivisions, of equal level, that this item borders, either by land or water",
        ["borders", "neighbour"],
    ),
    ("P50", "wikibase-item", "author", "main creator(s) of a written work", ["writer"]),
    (
        "P61",
        "wikibase-item",
        "discoverer or inventor",
        "subject who discovered, first described, invented, or developed this discovery or invention",
        ["inventor", "discovered by"],
    ),
    (
        "P69",
        "wikibase-item",
        "educated at",
        "educational institution attended by subject",
        ["alma mater", "studied at"],
    ),
    ("P86", "wikibase-item", "composer", "person(s) who wrote the music", ["music by"]),
    (
        "P87",
        "wikibase-item",
        "librettist",
        "author of the libretto (words) of an opera, operetta, oratorio or cantata",
        ["libretto by"],
    ),
    (
        "P102",
        "wikibase-item",
        "member of political party",
        "the political party of which a person is or has been a member",
        ["party"],
    ),
    ("P106", "wikibase-item", "occupation", "occupation of a person", ["profession", "job"]),
    (
        "P108",
        "wikibase-item",
        "employer",
        "person or organization for which the subject works or worked",
        ["worked for"],
    ),
    (
        "P112",
        "wikibase-item",
        "founded by",
        "founder or co-founder of this organization, religion, place or entity",
        ["founder"],
    ),
    (
        "P131",
        "wikibase-item",
        "located in the administrative territorial entity",
        "the item is located on the territory of the following administrative entity",
        ["located in", "in"],
    ),
    ("P136", "wikibase-item", "genre", "creative work's genre or an artist's field of work", []),
    (
        "P138",
        "wikibase-item",
        "named after",
        "entity or event that inspired the subject's name, or namesake",
        ["eponym"],
    ),
    (
        "P143",
        "wikibase-item",
        "imported from Wikimedia project",
        "source of this claim's value; used in references section by bots or humans importing data from Wikimedia projects",
        ["imported from"],
    ),
    (
        "P150",
        "wikibase-item",
        "contains the administrative territorial entity",
        "(list of) direct subdivisions of an administrative territorial entity",
        ["subdivisions"],
    ),
    (
        "P159",
        "wikibase-item",
        "headquarters location",
        "city, where an organization's headquarters is or has been situated",
        ["headquarters", "HQ"],
    ),
    (
        "P166",
        "wikibase-item",
        "award received",
        "award or recognition received by a person, organization or creative work",
        ["award", "prize received"],
    ),
    (
        "P170",
        "wikibase-item",
        "creator",
        "maker of this creative work or other object",
        ["artist", "made by"],
    ),
    (
        "P175",
        "wikibase-item",
        "performer",
        "actor, musician, band or other performer associated with this role or musical work",
        ["artist", "performed by"],
    ),
    (
        "P195",
        "wikibase-item",
        "collection",
        "art, museum, archival, or bibliographic collection the subject is part of",
        [],
    ),
    (
        "P206",
        "wikibase-item",
        "located in or next to body of water",
        "body of water on or next to which a place is located",
        ["on the river", "next to body of water"],
    ),
    (
        "P214",
        "external-id",
        "VIAF ID",
        "identifier for the Virtual International Authority File database",
        ["VIAF"],
    ),
    (
        "P227",
        "external-id",
        "GND ID",
        "identifier from an international authority file of names, subjects, and organizations",
        ["GND"],
    ),
    (
        "P248",
        "wikibase-item",
        "stated in",
        "to be used in the references field to refer to the information document or database in which a claim is made",
        ["source"],
    ),
    (
        "P264",
        "wikibase-item",
        "record label",
        "brand and trademark associated with the marketing of subject music recordings and music videos",
        ["label"],
    ),
    ("P276", "wikibase-item", "location", "location of the object, structure or event", ["place"]),
    (
        "P279",
        "wikibase-item",
        "subclass of",
        "this item is a subclass (subset) of that item; all instances of these items are instances of those items",
        ["is a type of"],
    ),
    (
        "P281",
        "string",
        "postal code",
        "identifier assigned by postal authorities for the subject area or building",
        ["postcode", "ZIP code"],
    ),
    (
        "P287",
        "wikibase-item",
        "designed by",
        "person or organization which designed the object",
        ["designer"],
    ),
    ("P361", "wikibase-item", "part of", "object of which the subject is a part", []),
    (
        "P373",
        "string",
        "Commons category",
        'name of the Wikimedia Commons category containing files related to this item (without the prefix "Category:")',
        ["commonscat"],
    ),
    (
        "P403",
        "wikibase-item",
        "mouth of the watercourse",
        "the body of water to which the watercourse drains",
        ["mouth", "river mouth"],
    ),
    (
        "P407",
        "wikibase-item",
        "language of work or name",
        "language associated with this creative work (such as books, shows, songs or websites) or a name",
        ["language"],
    ),
    (
        "P463",
        "wikibase-item",
        "member of",
        "organization, club or musical group to which the subject belongs",
        ["membership"],
    ),
    (
        "P495",
        "wikibase-item",
        "country of origin",
        "country of origin of this item (creative work, food, phrase, product, etc.)",
        ["origin"],
    ),
    ("P527", "wikibase-item", "has part(s)", "part of this subject", ["has part", "members"]),
    ("P569", "time", "date of birth", "date on which the subject was born", ["born on", "DOB"]),
    ("P570", "time", "date of death", "date on which the subject died", ["died on", "DOD"]),
    (
        "P571",
        "time",
        "inception",
        "time when an entity begins to exist; for date of official opening use P1619",
        ["founded", "established"],
    ),
    (
        "P576",
        "time",
        "dissolved, abolished or demolished date",
        "point in time at which the subject (organisation, building) ceased to exist",
        ["dissolved", "disbanded"],
    ),
    (
        "P577",
        "time",
        "publication date",
        "date or point in time when a work was first published or released",
        ["released", "published"],
    ),
    (
        "P580",
        "time",
        "start time",
        "time an entity begins to exist or a statement starts being valid",
        ["from", "since"],
    ),
    (
        "P582",
        "time",
        "end time",
        "moment when an entity ceases to exist or a statement stops being valid",
        ["until", "to"],
    ),
    (
        "P585",
        "time",
        "point in time",
        "date something took place, existed or a statement was true",
        ["date", "as of"],
    ),
    (
        "P625",
        "globe-coordinate",
        "coordinate location",
        "geocoordinates of the subject",
        ["coordinates", "location on Earth"],
    ),
    (
        "P646",
        "external-id",
        "Freebase ID",
        "identifier for a page in the Freebase database",
        ["Freebase"],
    ),
    (
        "P737",
        "wikibase-item",
        "influenced by",
        "this person, idea, etc. is informed by that other person, idea, etc.",
        [],
    ),
    (
        "P740",
        "wikibase-item",
        "location of formation",
        "location where a group or organization was formed",
        ["formed in"],
    ),
    (
        "P800",
        "wikibase-item",
        "notable work",
        "notable scientific, artistic or literary work, or other work of significance among subject's works",
        ["known for", "famous work"],
    ),
    (
        "P813",
        "time",
        "retrieved",
        "date or point in time that information was retrieved from a database or website",
        ["accessed"],
    ),
    (
        "P840",
        "wikibase-item",
        "narrative location",
        "the narrative of the work is set in this location",
        ["set in"],
    ),
    ("P854", "url", "reference URL", "should be used for Internet URLs as references", ["URL"]),
    (
        "P856",
        "url",
        "official website",
        "URL of the official page of an item",
        ["website", "homepage"],
    ),
    (
        "P885",
        "wikibase-item",
        "origin of the watercourse",
        "main source of a river, stream or lake",
        ["source of river"],
    ),
    (
        "P1001",
        "wikibase-item",
        "applies to jurisdiction",
        "the item (institution, law, public office, public register...) or statement belongs to or has power over or applies to the value",
        ["jurisdiction"],
    ),
    (
        "P1027",
        "wikibase-item",
        "conferred by",
        "person or organization who grants an award, certification, grant, or role",
        ["awarded by"],
    ),
    ("P1066", "wikibase-item", "student of", "person who has taught this person", ["teacher"]),
    (
        "P1082",
        "quantity",
        "population",
        "number of people inhabiting the place; number of people of subject",
        ["inhabitants"],
    ),
    (
        "P1191",
        "time",
        "date of first performance",
        "date a work was first debuted, performed or live-broadcast",
        ["premiere date"],
    ),
    (
        "P1376",
        "wikibase-item",
        "capital of",
        "country, state, department, canton or other administrative division of which the municipality is the governmental seat",
        ["seat of"],
    ),
    (
        "P1412",
        "wikibase-item",
        "languages spoken, written or signed",
        "language(s) that a person or a people speaks, writes or signs",
        ["language spoken"],
    ),
    (
        "P1448",
        "monolingualtext",
        "official name",
        "official name of the subject in its official language(s)",
        ["long name"],
    ),
    (
        "P1449",
        "monolingualtext",
        "nickname",
        "informal name (for a pseudonym use P742)",
        ["epithet"],
    ),
    (
        "P1476",
        "monolingualtext",
        "title",
        "published name of a work, such as a newspaper article, a literary work, piece of music, a website, or a performance work",
        [],
    ),
    (
        "P1477",
        "monolingualtext",
        "birth name",
        "full name of a person at birth, if different from their current, generally used name",
        ["born as"],
    ),
    (
        "P1636",
        "time",
        "date of baptism in early childhood",
        "date when a person was baptized",
        ["baptism date"],
    ),
    (
        "P1932",
        "string",
        "object named as",
        "use as qualifier to indicate how the object's value was given in the source",
        ["stated as"],
    ),
    ("P2043", "quantity", "length", "measured dimension of an object", []),
    ("P2046", "quantity", "area", "area occupied by an object", ["surface area"]),
    ("P2047", "quantity", "duration", "length of time of an event or process", ["running time"]),
    ("P2048", "quantity", "height", "vertical length of an entity", []),
    ("P2049", "quantity", "width", "width of an object", []),
    (
        "P2053",
        "quantity",
        "watershed area",
        "size of a stream's watershed (drainage basin)",
        ["drainage basin area", "catchment area"],
    ),
    (
        "P4647",
        "wikibase-item",
        "location of first performance",
        "location where a work was first debuted, performed or broadcast",
        ["premiere venue"],
    ),
]

# --------------------------------------------------------------------------------------
# The 85 covered entities: id -> (enwiki title = English label, English description,
# English aliases, extra labels {lang: label}).
# --------------------------------------------------------------------------------------
COVERED = {
    # science
    "Q937": (
        "Albert Einstein",
        "German-born theoretical physicist (1879–1955)",
        [],
        {"de": "Albert Einstein", "fr": "Albert Einstein"},
    ),
    "Q7186": (
        "Marie Curie",
        "Polish-French physicist and chemist (1867–1934)",
        ["Maria Skłodowska-Curie", "Marie Skłodowska Curie"],
        {"fr": "Marie Curie", "pl": "Maria Skłodowska-Curie"},
    ),
    "Q37463": ("Pierre Curie", "French physicist (1859–1906)", [], {"fr": "Pierre Curie"}),
    "Q935": (
        "Isaac Newton",
        "English physicist and mathematician (1642–1727)",
        ["Sir Isaac Newton"],
        {"de": "Isaac Newton", "fr": "Isaac Newton"},
    ),
    "Q307": (
        "Galileo Galilei",
        "Italian astronomer, physicist and engineer (1564–1642)",
        ["Galileo"],
        {"it": "Galileo Galilei", "fr": "Galilée"},
    ),
    "Q1035": (
        "Charles Darwin",
        "English naturalist and biologist (1809–1882)",
        ["Charles Robert Darwin"],
        {"de": "Charles Darwin"},
    ),
    "Q9036": (
        "Nikola Tesla",
        "Serbian-American inventor and engineer (1856–1943)",
        [],
        {"de": "Nikola Tesla"},
    ),
    "Q8743": (
        "Thomas Edison",
        "American inventor and businessman (1847–1931)",
        ["Thomas Alva Edison"],
        {"de": "Thomas Alva Edison"},
    ),
    "Q7085": (
        "Niels Bohr",
        "Danish physicist (1885–1962)",
        ["Niels Henrik David Bohr"],
        {"da": "Niels Bohr"},
    ),
    "Q9021": (
        "Max Planck",
        "German theoretical physicist (1858–1947)",
        ["Max Karl Ernst Ludwig Planck"],
        {"de": "Max Planck", "fr": "Max Planck"},
    ),
    "Q7251": (
        "Alan Turing",
        "English mathematician and computer scientist (1912–1954)",
        ["Alan Mathison Turing"],
        {},
    ),
    "Q7259": (
        "Ada Lovelace",
        "English mathematician and writer (1815–1852)",
        ["Augusta Ada King, Countess of Lovelace", "Ada Byron"],
        {},
    ),
    "Q46633": (
        "Charles Babbage",
        "English mathematician, inventor and mechanical engineer (1791–1871)",
        [],
        {},
    ),
    "Q9123": (
        "Ernest Rutherford",
        "New Zealand physicist (1871–1937)",
        ["Lord Rutherford of Nelson"],
        {},
    ),
    "Q9130": (
        "Erwin Schrödinger",
        "Austrian theoretical physicist (1887–1961)",
        ["Erwin Schrodinger", "Erwin Schroedinger"],
        {"de": "Erwin Schrödinger"},
    ),
    "Q17714": (
        "Stephen Hawking",
        "English theoretical physicist and cosmologist (1942–2018)",
        ["Stephen William Hawking"],
        {},
    ),
    "Q38104": (
        "Nobel Prize in Physics",
        "annual award for outstanding contributions to physics",
        ["Nobel Physics Prize"],
        {"de": "Nobelpreis für Physik", "fr": "prix Nobel de physique"},
    ),
    "Q123885": (
        "Royal Society",
        "learned society for science in the United Kingdom",
        ["Royal Society of London"],
        {},
    ),
    "Q20124": (
        "On the Origin of Species",
        "1859 book by Charles Darwin",
        ["The Origin of Species"],
        {"de": "Über die Entstehung der Arten"},
    ),
    "Q11942": (
        "ETH Zurich",
        "public research university in Zürich, Switzerland",
        ["ETH", "Swiss Federal Institute of Technology in Zurich"],
        {"de": "ETH Zürich"},
    ),
    "Q21578": (
        "Princeton University",
        "private research university in Princeton, New Jersey, United States",
        ["Princeton"],
        {},
    ),
    # music, art, literature
    "Q254": (
        "Wolfgang Amadeus Mozart",
        "Austrian composer of the Classical period (1756–1791)",
        ["Mozart"],
        {"de": "Wolfgang Amadeus Mozart"},
    ),
    "Q255": (
        "Ludwig van Beethoven",
        "German composer and pianist (1770–1827)",
        ["Beethoven"],
        {"de": "Ludwig van Beethoven"},
    ),
    "Q1339": (
        "Johann Sebastian Bach",
        "German composer and musician (1685–1750)",
        ["J. S. Bach", "Bach"],
        {"de": "Johann Sebastian Bach"},
    ),
    "Q1268": (
        "Frédéric Chopin",
        "Polish composer and pianist (1810–1849)",
        ["Fryderyk Chopin", "Chopin"],
        {"pl": "Fryderyk Chopin", "fr": "Frédéric Chopin"},
    ),
    "Q7312": (
        "Franz Schubert",
        "Austrian composer (1797–1828)",
        ["Franz Peter Schubert"],
        {"de": "Franz Schubert"},
    ),
    "Q7349": (
        "Joseph Haydn",
        "Austrian composer of the Classical period (1732–1809)",
        ["Franz Joseph Haydn"],
        {"de": "Joseph Haydn"},
    ),
    "Q1511": (
        "Richard Wagner",
        "German composer and theatre director (1813–1883)",
        ["Wilhelm Richard Wagner"],
        {"de": "Richard Wagner"},
    ),
    "Q1203": (
        "John Lennon",
        "English musician, member of the Beatles (1940–1980)",
        ["John Winston Lennon", "John Ono Lennon"],
        {},
    ),
    "Q2599": (
        "Paul McCartney",
        "English musician, member of the Beatles (born 1942)",
        ["Sir Paul McCartney", "James Paul McCartney"],
        {},
    ),
    "Q2643": (
        "George Harrison",
        "English musician, lead guitarist of the Beatles (1943–2001)",
        [],
        {},
    ),
    "Q2632": (
        "Ringo Starr",
        "English musician, drummer of the Beatles (born 1940)",
        ["Richard Starkey"],
        {},
    ),
    "Q1299": (
        "The Beatles",
        "English rock band formed in Liverpool in 1960",
        ["Beatles", "the Fab Four"],
        {"de": "The Beatles", "fr": "The Beatles"},
    ),
    "Q173643": ("Abbey Road", "1969 studio album by the Beatles", [], {}),
    "Q5064": (
        "The Magic Flute",
        "1791 opera by Wolfgang Amadeus Mozart",
        ["Die Zauberflöte"],
        {"de": "Die Zauberflöte", "fr": "La Flûte enchantée"},
    ),
    "Q11989": (
        "Symphony No. 9 (Beethoven)",
        "choral symphony by Ludwig van Beethoven, first performed in 1824",
        ["Ninth Symphony", "Choral Symphony"],
        {"de": "9. Sinfonie (Beethoven)"},
    ),
    "Q762": (
        "Leonardo da Vinci",
        "Italian Renaissance polymath (1452–1519)",
        ["Leonardo"],
        {"it": "Leonardo da Vinci", "fr": "Léonard de Vinci"},
    ),
    "Q5592": (
        "Michelangelo",
        "Italian Renaissance sculptor, painter and architect (1475–1564)",
        ["Michelangelo Buonarroti"],
        {"it": "Michelangelo Buonarroti"},
    ),
    "Q12418": (
        "Mona Lisa",
        "painting by Leonardo da Vinci",
        ["La Gioconda", "La Joconde"],
        {"fr": "La Joconde", "it": "Gioconda"},
    ),
    "Q692": (
        "William Shakespeare",
        "English playwright and poet (1564–1616)",
        ["Shakespeare", "the Bard"],
        {},
    ),
    "Q41567": (
        "Hamlet",
        "tragedy by William Shakespeare",
        ["The Tragedy of Hamlet, Prince of Denmark"],
        {},
    ),
    "Q517": (
        "Napoleon",
        "Emperor of the French (1769–1821)",
        ["Napoleon Bonaparte", "Napoleon I"],
        {"fr": "Napoléon Ier", "de": "Napoleon Bonaparte"},
    ),
    # cities and people
    "Q90": (
        "Paris",
        "capital and largest city of France",
        ["City of Light"],
        {"fr": "Paris", "de": "Paris"},
    ),
    "Q64": ("Berlin", "capital and largest city of Germany", [], {"de": "Berlin", "fr": "Berlin"}),
    "Q84": (
        "London",
        "capital and largest city of the United Kingdom",
        [],
        {"de": "London", "fr": "Londres"},
    ),
    "Q220": (
        "Rome",
        "capital and largest city of Italy",
        ["Roma", "the Eternal City"],
        {"it": "Roma", "de": "Rom"},
    ),
    "Q1741": (
        "Vienna",
        "capital and largest city of Austria",
        ["Wien"],
        {"de": "Wien", "fr": "Vienne"},
    ),
    "Q270": (
        "Warsaw",
        "capital and largest city of Poland",
        ["Warszawa"],
        {"pl": "Warszawa", "de": "Warschau"},
    ),
    "Q1726": (
        "Munich",
        "capital city of Bavaria, Germany",
        ["München"],
        {"de": "München", "fr": "Munich"},
    ),
    "Q24826": ("Liverpool", "city in North West England", [], {}),
    "Q2044": (
        "Florence",
        "capital city of Tuscany, Italy",
        ["Firenze"],
        {"it": "Firenze", "de": "Florenz"},
    ),
    "Q34713": (
        "Salzburg",
        "city in Austria, capital of the state of Salzburg",
        [],
        {"de": "Salzburg"},
    ),
    "Q586": (
        "Bonn",
        "city in North Rhine-Westphalia, Germany; former capital of West Germany",
        [],
        {"de": "Bonn"},
    ),
    "Q3012": ("Ulm", "city in Baden-Württemberg, Germany", [], {"de": "Ulm"}),
    "Q13375": ("Pisa", "city in Tuscany, Italy", [], {"it": "Pisa"}),
    "Q350": ("Cambridge", "city in Cambridgeshire, England", [], {}),
    "Q1748": (
        "Copenhagen",
        "capital and most populous city of Denmark",
        ["København"],
        {"da": "København", "de": "Kopenhagen"},
    ),
    "Q72": ("Zürich", "largest city in Switzerland", ["Zurich"], {"de": "Zürich", "fr": "Zurich"}),
    "Q60": (
        "New York City",
        "most populous city in the United States",
        ["NYC", "New York", "the Big Apple"],
        {"de": "New York City"},
    ),
    "Q2079": ("Leipzig", "city in Saxony, Germany", [], {"de": "Leipzig"}),
    "Q7070": ("Eisenach", "town in Thuringia, Germany", [], {"de": "Eisenach"}),
    "Q189288": ("Stratford-upon-Avon", "market town in Warwickshire, England", ["Stratford"], {}),
    "Q18125": ("Manchester", "city in North West England", [], {}),
    "Q9439": (
        "Queen Victoria",
        "Queen of the United Kingdom from 1837 to 1901",
        ["Victoria", "Alexandrina Victoria"],
        {"de": "Victoria (Vereinigtes Königreich)"},
    ),
    # countries, rivers, universities
    "Q142": (
        "France",
        "country in Western Europe",
        ["French Republic"],
        {"fr": "France", "de": "Frankreich"},
    ),
    "Q183": (
        "Germany",
        "country in Central Europe",
        ["Federal Republic of Germany", "Deutschland"],
        {"de": "Deutschland", "fr": "Allemagne"},
    ),
    "Q145": (
        "United Kingdom",
        "country in north-west Europe",
        ["UK", "Britain", "Great Britain"],
        {"de": "Vereinigtes Königreich", "fr": "Royaume-Uni"},
    ),
    "Q38": (
        "Italy",
        "country in Southern Europe",
        ["Italia", "Italian Republic"],
        {"it": "Italia", "de": "Italien", "fr": "Italie"},
    ),
    "Q40": (
        "Austria",
        "country in Central Europe",
        ["Republic of Austria"],
        {"de": "Österreich", "fr": "Autriche"},
    ),
    "Q36": (
        "Poland",
        "country in Central Europe",
        ["Republic of Poland"],
        {"pl": "Polska", "de": "Polen", "fr": "Pologne"},
    ),
    "Q35": (
        "Denmark",
        "country in Northern Europe",
        ["Kingdom of Denmark"],
        {"da": "Danmark", "de": "Dänemark", "fr": "Danemark"},
    ),
    "Q39": (
        "Switzerland",
        "country in Central Europe",
        ["Swiss Confederation"],
        {"de": "Schweiz", "fr": "Suisse"},
    ),
    "Q30": (
        "United States",
        "country in North America",
        ["USA", "U.S.", "United States of America", "America"],
        {"de": "Vereinigte Staaten", "fr": "États-Unis"},
    ),
    "Q1471": ("Seine", "river in northern France", [], {"fr": "Seine"}),
    "Q19686": (
        "River Thames",
        "river in southern England",
        ["Thames"],
        {"de": "Themse", "fr": "Tamise"},
    ),
    "Q1653": ("Danube", "second-longest river in Europe", [], {"de": "Donau", "fr": "Danube"}),
    "Q548": ("Vistula", "longest river in Poland", ["Wisła"], {"pl": "Wisła", "de": "Weichsel"}),
    "Q13712": (
        "Tiber",
        "river in central Italy that flows through Rome",
        ["Tevere"],
        {"it": "Tevere", "fr": "Tibre"},
    ),
    "Q1314": ("Arno", "river in Tuscany, Italy", [], {"it": "Arno"}),
    "Q1684": ("Spree", "river in eastern Germany that flows through Berlin", [], {"de": "Spree"}),
    "Q35794": (
        "University of Cambridge",
        "collegiate public research university in Cambridge, England",
        ["Cambridge University"],
        {},
    ),
    "Q209842": (
        "University of Paris",
        "university in Paris, France (c. 1150–1970)",
        ["Sorbonne"],
        {"fr": "université de Paris"},
    ),
    "Q332342": (
        "Trinity College, Cambridge",
        "constituent college of the University of Cambridge",
        ["Trinity College"],
        {},
    ),
    "Q186285": (
        "University of Copenhagen",
        "public research university in Copenhagen, Denmark",
        ["UCPH", "Copenhagen University"],
        {"da": "Københavns Universitet"},
    ),
    "Q8016": (
        "Winston Churchill",
        "Prime Minister of the United Kingdom (1874–1965)",
        ["Sir Winston Churchill", "Winston Leonard Spencer Churchill"],
        {},
    ),
}

# --------------------------------------------------------------------------------------
# Supporting entities: id -> (English label, English description, enwiki title or None).
# --------------------------------------------------------------------------------------
SUPPORT = {
    # classes
    "Q5": ("human", "any member of Homo sapiens", "Human"),
    "Q486972": (
        "human settlement",
        "community of people living in a particular location",
        "Human settlement",
    ),
    "Q515": ("city", "large human settlement", "City"),
    "Q5119": (
        "capital city",
        "primary city of a country, state or other administrative division",
        "Capital city",
    ),
    "Q1549591": ("big city", "city with a population of more than 100,000 inhabitants", None),
    "Q484170": ("commune of France", "level-four administrative division of France", None),
    "Q747074": ("comune of Italy", "administrative division of Italy", None),
    "Q42744322": (
        "urban municipality of Germany",
        "municipality with town privileges in Germany",
        None,
    ),
    "Q70208": (
        "municipality of Switzerland",
        "lowest level of administrative division in Switzerland",
        None,
    ),
    "Q1093829": (
        "city in the United States",
        "incorporated municipality in the United States",
        None,
    ),
    "Q3957": ("town", "settlement that is bigger than a village but smaller than a city", "Town"),
    "Q6256": ("country", "distinct territorial body or political entity", "Country"),
    "Q3624078": (
        "sovereign state",
        "state that has the highest authority over a territory",
        "Sovereign state",
    ),
    "Q3024240": ("historical country", "state or territory that no longer exists", None),
    "Q4022": ("river", "natural flowing watercourse", "River"),
    "Q3918": ("university", "academic institution for further education", "University"),
    "Q902104": (
        "private university",
        "university not operated by a government",
        "Private university",
    ),
    "Q189004": ("college", "educational institution or a constituent part of one", None),
    "Q955824": (
        "learned society",
        "organization that exists to promote an academic discipline",
        "Learned society",
    ),
    "Q33506": (
        "museum",
        "institution that holds artifacts and other objects of scientific, artistic, cultural or historical importance",
        "Museum",
    ),
    "Q207694": ("art museum", "building or space for the exhibition of art", "Art museum"),
    "Q3305213": ("painting", "artwork produced with paint", None),
    "Q25379": ("play", "form of literature written by a playwright", "Play (theatre)"),
    "Q80930": ("tragedy", "form of drama based on human suffering", "Tragedy"),
    "Q1344": (
        "opera",
        "artform combining sung text and musical score in a theatrical setting",
        "Opera",
    ),
    "Q9734": ("symphony", "extended musical composition", "Symphony"),
    "Q2142754": ("choral symphony", "symphony that includes parts for a choir", "Choral symphony"),
    "Q377258": (
        "Singspiel",
        "form of German-language music drama with spoken dialogue",
        "Singspiel",
    ),
    "Q482994": ("album", "collection of recorded music", "Album"),
    "Q215380": ("musical group", "musical ensemble which performs music", None),
    "Q5741069": ("rock band", "musical group that plays rock music", None),
    "Q11399": ("rock music", "genre of popular music", "Rock music"),
    "Q37073": ("pop music", "genre of popular music", "Pop music"),
    "Q134307": ("portrait", "artistic representation of a person", "Portrait"),
    "Q47461344": ("written work", "any work expressed in writing", None),
    "Q618779": ("award", "something given in recognition of an achievement", "Award"),
    "Q7191": ("Nobel Prize", "set of annual international awards", "Nobel Prize"),
    "Q6581097": (
        "male",
        'to be used in "sex or gender" (P21) to indicate that the human subject is a male',
        None,
    ),
    "Q6581072": (
        "female",
        'to be used in "sex or gender" (P21) to indicate that the human subject is a female',
        None,
    ),
    # occupations
    "Q169470": ("physicist", "scientist who does research in physics", "Physicist"),
    "Q19350898": (
        "theoretical physicist",
        "physicist who specialises in theoretical physics",
        None,
    ),
    "Q593644": ("chemist", "scientist trained in the study of chemistry", "Chemist"),
    "Q170790": (
        "mathematician",
        "person with an extensive knowledge of mathematics",
        "Mathematician",
    ),
    "Q11063": ("astronomer", "scientist who studies celestial bodies", "Astronomer"),
    "Q18805": ("naturalist", "person who studies natural history", None),
    "Q520549": ("geologist", "scientist who studies geology", "Geologist"),
    "Q82594": (
        "computer scientist",
        "scientist specialised in computer science",
        "Computer scientist",
    ),
    "Q15442776": ("cryptographer", "person who practises cryptography", None),
    "Q205375": ("inventor", "person who devises new machines or processes", "Inventor"),
    "Q81096": ("engineer", "professional practitioner of engineering", "Engineer"),
    "Q1326886": ("electrical engineer", "engineer specialising in electrical engineering", None),
    "Q43845": (
        "businessperson",
        "person involved in activities for the purpose of generating revenue",
        "Businessperson",
    ),
    "Q36834": ("composer", "person who creates music", "Composer"),
    "Q486748": ("pianist", "musician who plays the piano", "Pianist"),
    "Q765778": ("organist", "musician who plays the organ", "Organist"),
    "Q158852": ("conductor", "person who directs a musical ensemble", None),
    "Q177220": ("singer", "person who sings", None),
    "Q488205": (
        "singer-songwriter",
        "musician who writes, composes and sings",
        "Singer-songwriter",
    ),
    "Q855091": ("guitarist", "person who plays the guitar", "Guitarist"),
    "Q386854": ("drummer", "percussionist who plays drums", "Drummer"),
    "Q12360214": ("bass guitarist", "musician who plays the bass guitar", None),
    "Q639669": ("musician", "person who composes, conducts or performs music", "Musician"),
    "Q33999": ("actor", "person who acts in a dramatic or comic production", "Actor"),
    "Q1028181": ("painter", "person who creates paintings", None),
    "Q1281618": ("sculptor", "artist who creates sculptures", None),
    "Q42973": ("architect", "person trained to plan and design buildings", "Architect"),
    "Q214917": ("playwright", "person who writes plays", "Playwright"),
    "Q49757": ("poet", "person who writes poetry", "Poet"),
    "Q36180": ("writer", "person who uses written words to communicate ideas", "Writer"),
    "Q201788": ("historian", "person who studies and writes about the past", "Historian"),
    "Q82955": ("politician", "person involved in politics", "Politician"),
    "Q189290": (
        "military officer",
        "member of an armed force who holds a position of authority",
        None,
    ),
    "Q39018": ("emperor", "type of monarch", "Emperor"),
    "Q116": ("monarch", "head of state of a monarchy", "Monarch"),
    # languages
    "Q188": ("German", "West Germanic language", "German language"),
    "Q150": ("French", "Romance language", "French language"),
    "Q1860": ("English", "West Germanic language", "English language"),
    "Q652": ("Italian", "Romance language", "Italian language"),
    "Q809": ("Polish", "West Slavic language", "Polish language"),
    "Q9035": ("Danish", "North Germanic language", "Danish language"),
    "Q397": ("Latin", "Indo-European language of the Italic branch", "Latin"),
    "Q13199": ("Romansh", "Romance language of Switzerland", "Romansh language"),
    # currencies
    "Q4916": ("euro", "official currency of the eurozone", "Euro"),
    "Q25224": ("pound sterling", "official currency of the United Kingdom", "Pound sterling"),
    "Q123213": ("Polish złoty", "currency of Poland", "Polish złoty"),
    "Q25417": ("Danish krone", "currency of Denmark", "Danish krone"),
    "Q25344": ("Swiss franc", "currency of Switzerland and Liechtenstein", "Swiss franc"),
    "Q4917": (
        "United States dollar",
        "official currency of the United States",
        "United States dollar",
    ),
    # continents, organisations
    "Q46": ("Europe", "continent", "Europe"),
    "Q49": ("North America", "continent in the Northern and Western Hemispheres", "North America"),
    "Q458": (
        "European Union",
        "political and economic union of 27 European states",
        "European Union",
    ),
    "Q191583": (
        "Royal Swedish Academy of Sciences",
        "Swedish royal academy",
        "Royal Swedish Academy of Sciences",
    ),
    "Q188771": (
        "French Academy of Sciences",
        "learned society in France",
        "French Academy of Sciences",
    ),
    "Q338432": ("Accademia dei Lincei", "Italian science academy", "Accademia dei Lincei"),
    "Q328": ("English Wikipedia", "English-language edition of Wikipedia", "English Wikipedia"),
    # other countries
    "Q31": ("Belgium", "country in Western Europe", "Belgium"),
    "Q32": ("Luxembourg", "country in Western Europe", "Luxembourg"),
    "Q29": ("Spain", "country in south-western Europe", "Spain"),
    "Q228": ("Andorra", "country in south-western Europe", "Andorra"),
    "Q235": ("Monaco", "city-state on the French Riviera", "Monaco"),
    "Q55": ("Netherlands", "country in north-western Europe", "Netherlands"),
    "Q213": ("Czech Republic", "country in Central Europe", "Czech Republic"),
    "Q347": ("Liechtenstein", "country in Central Europe", "Liechtenstein"),
    "Q214": ("Slovakia", "country in Central Europe", "Slovakia"),
    "Q28": ("Hungary", "country in Central Europe", "Hungary"),
    "Q215": ("Slovenia", "country in Central Europe", "Slovenia"),
    "Q238": ("San Marino", "country in Southern Europe", "San Marino"),
    "Q237": ("Vatican City", "city-state enclaved in Rome", "Vatican City"),
    "Q212": ("Ukraine", "country in Eastern Europe", "Ukraine"),
    "Q184": ("Belarus", "country in Eastern Europe", "Belarus"),
    "Q37": ("Lithuania", "country in Northern Europe", "Lithuania"),
    "Q159": ("Russia", "country in Eastern Europe and Northern Asia", "Russia"),
    "Q27": ("Ireland", "country in north-western Europe", "Republic of Ireland"),
    "Q16": ("Canada", "country in North America", "Canada"),
    "Q96": ("Mexico", "country in North America", "Mexico"),
    "Q34": ("Sweden", "country in Northern Europe", "Sweden"),
    "Q664": ("New Zealand", "island country in the Pacific Ocean", "New Zealand"),
    "Q224": ("Croatia", "country in Central and Southeast Europe", "Croatia"),
    # historical states
    "Q179876": (
        "Kingdom of England",
        "sovereign state on the island of Great Britain (927–1707)",
        "Kingdom of England",
    ),
    "Q161885": (
        "Kingdom of Great Britain",
        "sovereign state in Western Europe (1707–1800)",
        "Kingdom of Great Britain",
    ),
    "Q174193": (
        "United Kingdom of Great Britain and Ireland",
        "sovereign state (1801–1922)",
        "United Kingdom of Great Britain and Ireland",
    ),
    "Q131964": ("Austrian Empire", "empire in Central Europe (1804–1867)", "Austrian Empire"),
    "Q12548": (
        "Holy Roman Empire",
        "polity in Central and Western Europe (800/962–1806)",
        "Holy Roman Empire",
    ),
    "Q153015": ("Kingdom of Saxony", "German state (1806–1918)", "Kingdom of Saxony"),
    "Q7904317": (
        "Electorate of Cologne",
        "ecclesiastical principality of the Holy Roman Empire",
        "Electorate of Cologne",
    ),
    "Q701614": (
        "Prince-Archbishopric of Salzburg",
        "ecclesiastical state of the Holy Roman Empire",
        "Prince-Archbishopric of Salzburg",
    ),
    "Q34266": ("Russian Empire", "empire in Eurasia (1721–1917)", "Russian Empire"),
    "Q207272": (
        "Second Polish Republic",
        "Polish state between the world wars (1918–1939)",
        "Second Polish Republic",
    ),
    "Q1206012": ("German Reich", "official name of the German state from 1871 to 1945", None),
    "Q154849": ("Grand Duchy of Tuscany", "Italian state (1569–1859)", "Grand Duchy of Tuscany"),
    "Q148540": (
        "Republic of Florence",
        "medieval and early modern state in Tuscany",
        "Republic of Florence",
    ),
    # regions
    "Q21": ("England", "country within the United Kingdom", "England"),
    "Q22": ("Scotland", "country within the United Kingdom", "Scotland"),
    "Q25": ("Wales", "country within the United Kingdom", "Wales"),
    "Q26": ("Northern Ireland", "part of the United Kingdom", "Northern Ireland"),
    "Q23306": ("Greater London", "ceremonial county and region of England", "Greater London"),
    "Q13917": ("Île-de-France", "region of France", "Île-de-France"),
    "Q980": ("Bavaria", "state of Germany", "Bavaria"),
    "Q985": ("Baden-Württemberg", "state of Germany", "Baden-Württemberg"),
    "Q1202": ("Saxony", "state of Germany", "Saxony"),
    "Q1205": ("Thuringia", "state of Germany", "Thuringia"),
    "Q1198": ("North Rhine-Westphalia", "state of Germany", "North Rhine-Westphalia"),
    "Q1194": ("Schleswig-Holstein", "state of Germany", "Schleswig-Holstein"),
    "Q1197": ("Lower Saxony", "state of Germany", "Lower Saxony"),
    "Q1273": ("Tuscany", "region of Italy", "Tuscany"),
    "Q1282": ("Lazio", "region of Italy", "Lazio"),
    "Q54169": ("Masovian Voivodeship", "voivodeship of Poland", "Masovian Voivodeship"),
    "Q11943": ("canton of Zürich", "canton of Switzerland", None),
    "Q43325": ("Salzburg", "state of Austria", "Salzburg (state)"),
    "Q1384": ("New York", "state of the United States of America", "New York (state)"),
    "Q1408": ("New Jersey", "state of the United States of America", "New Jersey"),
    "Q1397": ("Ohio", "state of the United States of America", "Ohio"),
    "Q34497": ("Saint Helena", "island in the South Atlantic Ocean", "Saint Helena"),
    # places
    "Q70": ("Bern", "de facto capital of Switzerland", "Bern"),
    "Q61": ("Washington, D.C.", "capital city of the United States", "Washington, D.C."),
    "Q641": ("Venice", "city in Veneto, Italy", "Venice"),
    "Q490": ("Milan", "city in Lombardy, Italy", "Milan"),
    "Q34217": ("Oxford", "city in Oxfordshire, England", "Oxford"),
    "Q65": ("Los Angeles", "city in California, United States", "Los Angeles"),
    "Q138518": ("Princeton", "municipality in New Jersey, United States", "Princeton, New Jersey"),
    "Q1707": ("Kiel", "capital city of Schleswig-Holstein, Germany", "Kiel"),
    "Q3033": ("Göttingen", "city in Lower Saxony, Germany", "Göttingen"),
    "Q40104": ("Ajaccio", "city on the island of Corsica, France", "Ajaccio"),
    "Q578060": (
        "Longwood House",
        "residence of Napoleon during his exile on Saint Helena",
        "Longwood House",
    ),
    "Q208181": (
        "Blenheim Palace",
        "country house in Woodstock, Oxfordshire, England",
        "Blenheim Palace",
    ),
    "Q5953682": ("Hyde Park Gate", "street in Kensington, London", "Hyde Park Gate"),
    "Q122744": ("Maida Vale", "residential district in west London", "Maida Vale"),
    "Q2011497": ("Wilmslow", "town in Cheshire, England", "Wilmslow"),
    "Q1231883": ("Walworth", "district of south London", "Walworth"),
    "Q123634": ("Marylebone", "area in central London", "Marylebone"),
    "Q367211": ("Smiljan", "village in Lika, Croatia", "Smiljan"),
    "Q1645063": ("Milan", "village in Ohio, United States", "Milan, Ohio"),
    "Q932601": ("West Orange", "township in New Jersey, United States", "West Orange, New Jersey"),
    "Q2412935": ("The Mount", "house in Shrewsbury, England; birthplace of Charles Darwin", None),
    "Q3038318": ("Down House", "home of Charles Darwin in Downe, Kent", "Down House"),
    "Q65430768": ("Spring Grove", "settlement in the Tasman District, New Zealand", None),
    "Q154184": ("Anchiano", "village near Vinci, Tuscany", None),
    "Q1122731": ("Clos Lucé", "mansion in Amboise, France", "Clos Lucé"),
    "Q205116": ("Amboise", "commune in Indre-et-Loire, France", "Amboise"),
    "Q52069": (
        "Caprese Michelangelo",
        "comune in the Province of Arezzo, Tuscany",
        "Caprese Michelangelo",
    ),
    "Q2031761": ("Arcetri", "area of Florence, Italy", "Arcetri"),
    "Q2364887": ("Sancellemoz", "sanatorium in Passy, Haute-Savoie, France", None),
    "Q687026": ("Himmelpfortgrund", "former suburb of Vienna, now part of Alsergrund", None),
    "Q19675": ("Louvre", "art museum in Paris, France", "Louvre"),
    "Q673479": ("Theater auf der Wieden", "former theatre in Vienna", "Theater auf der Wieden"),
    "Q165636": ("Theater am Kärntnertor", "former theatre in Vienna", "Theater am Kärntnertor"),
    # water
    "Q584": ("Rhine", "river in Western Europe", "Rhine"),
    "Q34640": (
        "English Channel",
        "arm of the Atlantic Ocean between England and France",
        "English Channel",
    ),
    "Q1693": ("North Sea", "marginal sea of the Atlantic Ocean", "North Sea"),
    "Q166": (
        "Black Sea",
        "marginal sea of the Atlantic Ocean between Europe and Asia",
        "Black Sea",
    ),
    "Q545": ("Baltic Sea", "arm of the Atlantic Ocean in Northern Europe", "Baltic Sea"),
    "Q38882": (
        "Tyrrhenian Sea",
        "part of the Mediterranean Sea off the western coast of Italy",
        "Tyrrhenian Sea",
    ),
    "Q42820": ("Ligurian Sea", "arm of the Mediterranean Sea", "Ligurian Sea"),
    "Q97": ("Atlantic Ocean", "ocean between Europe, Africa and the Americas", "Atlantic Ocean"),
    # institutions
    "Q206702": (
        "University of Zurich",
        "public university in Zürich, Switzerland",
        "University of Zurich",
    ),
    "Q152087": (
        "Humboldt University of Berlin",
        "public university in Berlin, Germany",
        "Humboldt University of Berlin",
    ),
    "Q635642": (
        "Institute for Advanced Study",
        "independent research centre in Princeton, New Jersey",
        "Institute for Advanced Study",
    ),
    "Q55044": (
        "Ludwig Maximilian University of Munich",
        "public university in Munich, Germany",
        "Ludwig Maximilian University of Munich",
    ),
    "Q156737": ("University of Kiel", "public university in Kiel, Germany", None),
    "Q645663": ("University of Pisa", "public university in Pisa, Italy", "University of Pisa"),
    "Q193510": ("University of Padua", "public university in Padua, Italy", "University of Padua"),
    "Q714717": (
        "Christ's College, Cambridge",
        "constituent college of the University of Cambridge",
        "Christ's College, Cambridge",
    ),
    "Q924289": (
        "King's College, Cambridge",
        "constituent college of the University of Cambridge",
        "King's College, Cambridge",
    ),
    "Q650068": (
        "Peterhouse, Cambridge",
        "constituent college of the University of Cambridge",
        "Peterhouse, Cambridge",
    ),
    "Q160302": (
        "University of Edinburgh",
        "public university in Edinburgh, Scotland",
        "University of Edinburgh",
    ),
    "Q689775": (
        "Graz University of Technology",
        "public university in Graz, Austria",
        "Graz University of Technology",
    ),
    "Q31519": (
        "Charles University",
        "public university in Prague, Czech Republic",
        "Charles University",
    ),
    "Q632404": (
        "Westinghouse Electric Corporation",
        "American manufacturing company",
        "Westinghouse Electric Corporation",
    ),
    "Q867530": (
        "Victoria University of Manchester",
        "university in Manchester, England (1851–2004)",
        "Victoria University of Manchester",
    ),
    "Q432475": (
        "University of Canterbury",
        "public university in Christchurch, New Zealand",
        "University of Canterbury",
    ),
    "Q201492": ("McGill University", "public university in Montreal, Canada", "McGill University"),
    "Q165980": (
        "University of Vienna",
        "public university in Vienna, Austria",
        "University of Vienna",
    ),
    "Q34433": (
        "University of Oxford",
        "collegiate research university in Oxford, England",
        "University of Oxford",
    ),
    "Q3151953": (
        "Dublin Institute for Advanced Studies",
        "research institute in Dublin, Ireland",
        "Dublin Institute for Advanced Studies",
    ),
    "Q154804": (
        "Leipzig University",
        "public university in Leipzig, Germany",
        "Leipzig University",
    ),
    "Q699668": ("Thomasschule", "school in Leipzig, Germany", None),
    "Q3835519": ("Liverpool College of Art", "art school in Liverpool, England", None),
    "Q15242531": (
        "Liverpool Institute High School for Boys",
        "former grammar school in Liverpool, England",
        "Liverpool Institute High School for Boys",
    ),
    "Q1247373": ("Harrow School", "public school in Harrow, London", "Harrow School"),
    "Q273480": ("École Militaire", "military academy in Paris, France", "École Militaire"),
    "Q213710": ("Apple Records", "British record label founded by the Beatles", "Apple Records"),
    "Q208909": ("Parlophone", "British record label", "Parlophone"),
    "Q9626": (
        "Conservative Party",
        "political party in the United Kingdom",
        "Conservative Party (UK)",
    ),
    "Q5373953": (
        "Emperor of the French",
        "title of the monarch of the First and Second French Empires",
        "Emperor of the French",
    ),
    "Q14211": (
        "Prime Minister of the United Kingdom",
        "head of government of the United Kingdom",
        "Prime Minister of the United Kingdom",
    ),
    # awards
    "Q44585": (
        "Nobel Prize in Chemistry",
        "annual award for outstanding contributions to chemistry",
        "Nobel Prize in Chemistry",
    ),
    "Q37922": (
        "Nobel Prize in Literature",
        "annual award for outstanding contributions to literature",
        "Nobel Prize in Literature",
    ),
    "Q721743": (
        "Congressional Gold Medal",
        "award bestowed by the United States Congress",
        "Congressional Gold Medal",
    ),
    "Q833163": ("Knight Bachelor", "rank of knighthood in the United Kingdom", "Knight Bachelor"),
    "Q832424": (
        "Wollaston Medal",
        "geology award of the Geological Society of London",
        "Wollaston Medal",
    ),
    # people
    "Q76346": (
        "Mileva Marić",
        "Serbian physicist and mathematician, first wife of Albert Einstein",
        "Mileva Marić",
    ),
    "Q68761": ("Elsa Einstein", "second wife of Albert Einstein", "Elsa Einstein"),
    "Q7504": ("Irène Joliot-Curie", "French chemist and physicist", "Irène Joliot-Curie"),
    "Q230068": ("Ève Curie", "French-American writer and journalist", "Ève Curie"),
    "Q242147": ("Emma Darwin", "wife of Charles Darwin", "Emma Darwin"),
    "Q22087338": ("Mina Miller", "second wife of Thomas Edison", None),
    "Q84464": ("Constanze Mozart", "wife of Wolfgang Amadeus Mozart", "Constanze Mozart"),
    "Q156280": (
        "Leopold Mozart",
        "German composer and violinist, father of Wolfgang Amadeus Mozart",
        "Leopold Mozart",
    ),
    "Q57212": (
        "Anna Magdalena Bach",
        "German singer, second wife of Johann Sebastian Bach",
        "Anna Magdalena Bach",
    ),
    "Q76428": (
        "Carl Philipp Emanuel Bach",
        "German composer, son of Johann Sebastian Bach",
        "Carl Philipp Emanuel Bach",
    ),
    "Q75789": (
        "Cosima Wagner",
        "daughter of Franz Liszt and second wife of Richard Wagner",
        "Cosima Wagner",
    ),
    "Q117012": ("Yoko Ono", "Japanese multimedia artist and musician", "Yoko Ono"),
    "Q357974": ("Julian Lennon", "English musician, son of John Lennon", "Julian Lennon"),
    "Q311238": ("Sean Lennon", "American musician, son of John Lennon", "Sean Ono Lennon"),
    "Q228899": ("Linda McCartney", "American photographer and musician", "Linda McCartney"),
    "Q232812": ("Stella McCartney", "English fashion designer", "Stella McCartney"),
    "Q237251": (
        "Anne Hathaway",
        "wife of William Shakespeare",
        "Anne Hathaway (wife of Shakespeare)",
    ),
    "Q2794279": ("Susanna Hall", "eldest daughter of William Shakespeare", "Susanna Hall"),
    "Q171480": (
        "Joséphine de Beauharnais",
        "Empress of the French, first wife of Napoleon",
        "Joséphine de Beauharnais",
    ),
    "Q157491": (
        "Marie Louise",
        "Empress of the French, second wife of Napoleon",
        "Marie Louise, Duchess of Parma",
    ),
    "Q7723": ("Napoleon II", "son of Napoleon", "Napoleon II"),
    "Q263454": ("Clementine Churchill", "wife of Winston Churchill", "Clementine Churchill"),
    "Q152245": ("Albert, Prince Consort", "husband of Queen Victoria", "Albert, Prince Consort"),
    "Q235597": (
        "Victoria, Princess Royal",
        "eldest child of Queen Victoria",
        "Victoria, Princess Royal",
    ),
    "Q155566": ("Princess Alice", "daughter of Queen Victoria", None),
    "Q5679": ("Lord Byron", "English poet (1788–1824)", "Lord Byron"),
    "Q4426480": (
        "William King-Noel, 1st Earl of Lovelace",
        "British nobleman, husband of Ada Lovelace",
        None,
    ),
    "Q208448": ("Augustus De Morgan", "British mathematician and logician", "Augustus De Morgan"),
    "Q47285": ("J. J. Thomson", "British physicist", "J. J. Thomson"),
    "Q92741": ("Alonzo Church", "American mathematician and logician", "Alonzo Church"),
    "Q51088": ("Antonio Salieri", "Italian composer", "Antonio Salieri"),
    "Q183458": ("Andrea del Verrocchio", "Italian painter and sculptor", "Andrea del Verrocchio"),
    "Q191423": ("Domenico Ghirlandaio", "Italian painter", "Domenico Ghirlandaio"),
    "Q213547": (
        "Emanuel Schikaneder",
        "German impresario, librettist and actor",
        "Emanuel Schikaneder",
    ),
    "Q38370": ("Henry VIII", "King of England from 1509 to 1547", "Henry VIII"),
    "Q76148325": ("Georgiana Whitmore", "wife of Charles Babbage", None),
    # works and concepts
    "Q11452": (
        "general relativity",
        "theory of gravitation published by Albert Einstein in 1915",
        "General relativity",
    ),
    "Q11455": (
        "special relativity",
        "theory of the relationship between space and time",
        "Special relativity",
    ),
    "Q205921": (
        "Philosophiæ Naturalis Principia Mathematica",
        "1687 book by Isaac Newton",
        "Philosophiæ Naturalis Principia Mathematica",
    ),
    "Q192039": ("Don Giovanni", "opera by Wolfgang Amadeus Mozart", "Don Giovanni"),
    "Q207875": ("Requiem", "mass for the dead by Wolfgang Amadeus Mozart", "Requiem (Mozart)"),
    "Q193778": ("Fidelio", "opera by Ludwig van Beethoven", "Fidelio"),
    "Q208224": (
        "Brandenburg Concertos",
        "collection of six concertos by Johann Sebastian Bach",
        "Brandenburg Concertos",
    ),
    "Q379111": ("St Matthew Passion", "Passion by Johann Sebastian Bach", "St Matthew Passion"),
    "Q611529": ("Winterreise", "song cycle by Franz Schubert", "Winterreise"),
    "Q190237": (
        "Der Ring des Nibelungen",
        "cycle of four operas by Richard Wagner",
        "Der Ring des Nibelungen",
    ),
    "Q1324254": ("Tristan und Isolde", "opera by Richard Wagner", "Tristan und Isolde"),
    "Q128910": (
        "The Last Supper",
        "mural painting by Leonardo da Vinci",
        "The Last Supper (Leonardo)",
    ),
    "Q215486": ("Vitruvian Man", "drawing by Leonardo da Vinci", "Vitruvian Man"),
    "Q179900": ("David", "marble sculpture by Michelangelo", "David (Michelangelo)"),
    "Q844675": (
        "Sistine Chapel ceiling",
        "frescoes painted by Michelangelo",
        "Sistine Chapel ceiling",
    ),
    "Q83186": ("Romeo and Juliet", "tragedy by William Shakespeare", "Romeo and Juliet"),
    "Q130283": ("Macbeth", "tragedy by William Shakespeare", "Macbeth"),
    "Q163310": ("Turing machine", "abstract model of computation", "Turing machine"),
    "Q485257": (
        "Analytical Engine",
        "proposed mechanical general-purpose computer designed by Charles Babbage",
        "Analytical engine",
    ),
    "Q628007": (
        "difference engine",
        "mechanical calculator designed to tabulate polynomial functions",
        "Difference engine",
    ),
    "Q165498": (
        "Schrödinger equation",
        "equation describing the wave function of a quantum system",
        "Schrödinger equation",
    ),
    "Q116434": ("phonograph", "device for the recording and reproduction of sound", "Phonograph"),
    "Q47616": (
        "incandescent light bulb",
        "electric light with a wire filament",
        "Incandescent light bulb",
    ),
}

# --------------------------------------------------------------------------------------
# Claims.  Each entry is (property, value) or (property, value, options); a list value
# makes one statement per element.  Values are read according to the property datatype:
#   wikibase-item "Q90"; time "1879-03-14" (day), "1879-03" (month), "1879" (year),
#   a leading "J" for the Julian calendar, a leading "-" for BCE; quantity int/str amount
#   or (amount, lower, upper); monolingualtext (text, lang); globe-coordinate (lat, lon);
#   string / external-id / url / commonsMedia a str.  SOME / NONE make somevalue / novalue.
# Options: rank, q (qualifiers {pid: value or [values]}), ref (list of {pid: value}).
# --------------------------------------------------------------------------------------
ENWIKI_REF = [{"P143": "Q328"}]
PREF = {"rank": "preferred"}
DEPR = {"rank": "deprecated"}
MALE, FEMALE, HUMAN = "Q6581097", "Q6581072", "Q5"


def span(start=None, end=None, **extra):
    """Qualifiers for a start / end time."""
    q = {}
    if start:
        q["P580"] = start
    if end:
        q["P582"] = end
    q.update(extra)
    return {"q": q}


def award(year):
    return {"q": {"P585": year}}


def pop(*pairs, ref=None):
    """Population values (point in time, amount); the newest one is preferred."""
    out = []
    for i, (when, amount) in enumerate(pairs):
        opts = {"q": {"P585": when}}
        if len(pairs) > 1 and i == len(pairs) - 1:
            opts["rank"] = "preferred"
        if ref:
            opts["ref"] = ref
        out.append(("P1082", amount, opts))
    return out


def person(sex, born, died=None, dob=None, dod=None):
    out = [("P31", HUMAN), ("P21", sex), ("P19", born, {"ref": ENWIKI_REF})]
    if died:
        out.append(("P20", died, {"ref": ENWIKI_REF}))
    if dob:
        out.append(("P569", dob))
    if dod:
        out.append(("P570", dod))
    return out


INSEE = [{"P854": "https://www.insee.fr/fr/statistiques", "P813": "2026-09-01"}]
ONS = [{"P854": "https://www.ons.gov.uk/", "P813": "2026-09-01"}]

CLAIMS = {
    # ---------------------------------------------------------------- science people
    "Q937": person(MALE, "Q3012", "Q138518", "1879-03-14", "1955-04-18")
    + [
        ("P569", "1879-03-15", DEPR),
        ("P27", ["Q183", "Q39", "Q30"]),
        ("P106", ["Q169470", "Q19350898"]),
        ("P69", ["Q11942", "Q206702"]),
        ("P108", ["Q11942", "Q206702", "Q152087", "Q635642"]),
        ("P166", "Q38104", award("1921")),
        ("P26", "Q76346", span("1903", "1919")),
        ("P26", "Q68761", span("1919", "1936")),
        ("P463", "Q123885"),
        ("P800", ["Q11452", "Q11455"]),
        ("P737", "Q935"),
        ("P1412", "Q188"),
        ("P18", "Albert Einstein Head.jpg"),
        ("P373", "Albert Einstein"),
        ("P214", "75121530"),
        ("P227", "118529579"),
        ("P646", "/m/0jcx"),
    ],
    "Q7186": person(FEMALE, "Q270", "Q2364887", "1867-11-07", "1934-07-04")
    + [
        ("P27", ["Q142", "Q34266", "Q207272"]),
        ("P106", ["Q169470", "Q593644"]),
        ("P69", "Q209842"),
        ("P108", "Q209842"),
        ("P166", "Q38104", award("1903")),
        ("P166", "Q44585", award("1911")),
        ("P26", "Q37463", span("1895-07-26", "1906-04-19")),
        ("P40", ["Q7504", "Q230068"]),
        ("P1412", ["Q809", "Q150"]),
        ("P1477", ("Maria Salomea Skłodowska", "pl")),
        ("P18", "Marie Curie c. 1920s.jpg"),
        ("P373", "Marie Curie"),
    ],
    "Q37463": person(MALE, "Q90", "Q90", "1859-05-15", "1906-04-19")
    + [
        ("P27", "Q142"),
        ("P106", "Q169470"),
        ("P69", "Q209842"),
        ("P108", "Q209842"),
        ("P166", "Q38104", award("1903")),
        ("P26", "Q7186", span("1895-07-26", "1906-04-19")),
        ("P40", ["Q7504", "Q230068"]),
        ("P463", "Q188771"),
        ("P1412", "Q150"),
    ],
    "Q935": person(MALE, "Q21", "Q84", "J1642-12-25", "J1727-03-20")
    + [
        ("P27", ["Q179876", "Q161885"]),
        ("P106", ["Q169470", "Q170790", "Q11063"]),
        ("P69", ["Q332342", "Q35794"]),
        ("P108", "Q35794"),
        ("P463", "Q123885"),
        ("P800", "Q205921"),
        ("P22", SOME, {"q": {"P1932": "Isaac Newton"}}),
        ("P26", NONE),
        ("P1412", ["Q1860", "Q397"]),
        ("P373", "Isaac Newton"),
    ],
    "Q307": person(MALE, "Q13375", "Q2031761", "J1564-02-15", "1642-01-08")
    + [
        ("P570", "1642-01-09", DEPR),
        ("P27", "Q154849"),
        ("P106", ["Q169470", "Q11063", "Q170790"]),
        ("P69", "Q645663"),
        ("P108", ["Q645663", "Q193510"]),
        ("P463", "Q338432"),
        ("P1412", ["Q652", "Q397"]),
        ("P373", "Galileo Galilei"),
    ],
    "Q1035": person(MALE, "Q2412935", "Q3038318", "1809-02-12", "1882-04-19")
    + [
        ("P27", "Q174193"),
        ("P106", ["Q18805", "Q520549"]),
        ("P69", ["Q35794", "Q714717", "Q160302"]),
        ("P166", "Q832424", award("1859")),
        ("P26", "Q242147", span("1839-01-29", "1882-04-19")),
        ("P463", "Q123885"),
        ("P800", "Q20124"),
        ("P1412", "Q1860"),
        ("P18", "Charles Darwin portrait.jpg"),
        ("P373", "Charles Darwin"),
    ],
    "Q9036": person(MALE, "Q367211", "Q60", "1856-07-10", "1943-01-07")
    + [
        ("P27", ["Q131964", "Q30"]),
        ("P106", ["Q205375", "Q1326886", "Q169470"]),
        ("P69", ["Q689775", "Q31519"]),
        ("P108", "Q632404"),
        ("P26", NONE),
        ("P18", "Tesla circa 1890.jpeg"),
        ("P373", "Nikola Tesla"),
    ],
    "Q8743": person(MALE, "Q1645063", "Q932601", "1847-02-11", "1931-10-18")
    + [
        ("P27", "Q30"),
        ("P106", ["Q205375", "Q43845", "Q81096"]),
        ("P166", "Q721743", award("1928")),
        ("P26", "Q22087338", span("1886-02-24", "1931-10-18")),
        ("P800", ["Q116434", "Q47616"]),
        ("P1412", "Q1860"),
        ("P373", "Thomas Edison"),
    ],
    "Q7085": person(MALE, "Q1748", "Q1748", "1885-10-07", "1962-11-18")
    + [
        ("P27", "Q35"),
        ("P106", "Q169470"),
        ("P69", "Q186285"),
        ("P108", "Q186285"),
        ("P166", "Q38104", award("1922")),
        ("P463", "Q123885"),
        ("P1066", "Q9123"),
        ("P1412", "Q9035"),
    ],
    "Q9021": person(MALE, "Q1707", "Q3033", "1858-04-23", "1947-10-04")
    + [
        ("P27", "Q1206012"),
        ("P106", ["Q169470", "Q19350898"]),
        ("P69", ["Q55044", "Q152087"]),
        ("P108", ["Q152087", "Q156737", "Q55044"]),
        ("P166", "Q38104", award("1918")),
        ("P463", "Q123885"),
        ("P1412", "Q188"),
        ("P18", "Max Planck (1858-1947).jpg"),
        ("P373", "Max Planck"),
        ("P214", "34487615"),
        ("P227", "118594818"),
    ],
    "Q7251": person(MALE, "Q122744", "Q2011497", "1912-06-23", "1954-06-07")
    + [
        ("P27", "Q145"),
        ("P106", ["Q170790", "Q82594", "Q15442776"]),
        ("P69", ["Q924289", "Q21578"]),
        ("P108", ["Q35794", "Q867530"]),
        ("P463", "Q123885"),
        ("P800", "Q163310"),
        ("P1066", "Q92741"),
        ("P26", NONE),
        ("P1412", "Q1860"),
        ("P373", "Alan Turing"),
    ],
    "Q7259": person(FEMALE, "Q84", "Q123634", "1815-12-10", "1852-11-27")
    + [
        ("P27", "Q174193"),
        ("P106", ["Q170790", "Q36180"]),
        ("P22", "Q5679"),
        ("P26", "Q4426480", span("1835-07-08", "1852-11-27")),
        ("P737", "Q46633"),
        ("P1066", "Q208448"),
        ("P1412", "Q1860"),
        ("P1477", ("Augusta Ada Byron", "en")),
        ("P373", "Ada Lovelace"),
    ],
    "Q46633": person(MALE, "Q1231883", "Q123634", "1791-12-26", "1871-10-18")
    + [
        ("P27", "Q174193"),
        ("P106", ["Q170790", "Q205375", "Q81096"]),
        ("P69", ["Q332342", "Q650068"]),
        ("P108", "Q35794"),
        ("P463", "Q123885"),
        ("P800", ["Q485257", "Q628007"]),
        ("P26", "Q76148325"),
        ("P1412", "Q1860"),
    ],
    "Q9123": person(MALE, "Q65430768", "Q350", "1871-08-30", "1937-10-19")
    + [
        ("P27", "Q664"),
        ("P106", ["Q169470", "Q593644"]),
        ("P69", ["Q332342", "Q35794", "Q432475"]),
        ("P108", ["Q201492", "Q867530", "Q35794"]),
        ("P166", "Q44585", award("1908")),
        ("P463", "Q123885"),
        ("P1066", "Q47285"),
        ("P1412", "Q1860"),
    ],
    "Q9130": person(MALE, "Q1741", "Q1741", "1887-08-12", "1961-01-04")
    + [
        ("P27", ["Q40", "Q27"]),
        ("P106", ["Q169470", "Q19350898"]),
        ("P69", "Q165980"),
        ("P108", ["Q206702", "Q152087", "Q34433", "Q3151953"]),
        ("P166", "Q38104", award("1933")),
        ("P463", "Q123885"),
        ("P800", "Q165498"),
        ("P1412", "Q188"),
    ],
    "Q17714": person(MALE, "Q34217", "Q350", "1942-01-08", "2018-03-14")
    + [
        ("P27", "Q145"),
        ("P106", ["Q169470", "Q19350898"]),
        ("P69", ["Q34433", "Q35794"]),
        ("P108", "Q35794"),
        ("P463", "Q123885"),
        ("P1412", "Q1860"),
        ("P373", "Stephen Hawking"),
    ],
    # ---------------------------------------------------------------- science institutions, works
    "Q38104": [
        ("P31", "Q618779"),
        ("P279", "Q7191"),
        ("P361", "Q7191"),
        ("P1027", "Q191583"),
        ("P17", "Q34"),
        ("P571", "1901"),
        ("P373", "Nobel Prize in Physics"),
        ("P856", "https://www.nobelprize.org/prizes/physics/"),
    ],
    "Q123885": [
        ("P31", "Q955824"),
        ("P17", "Q145"),
        ("P159", "Q84"),
        ("P571", "1660-11-28"),
        ("P1448", ("The Royal Society of London for Improving Natural Knowledge", "en")),
        ("P856", "https://royalsociety.org/"),
        ("P18", "RoyalSociety20040420CopyrightKaihsuTai.jpg"),
        ("P373", "Royal Society"),
    ],
    "Q20124": [
        ("P31", "Q47461344"),
        ("P50", "Q1035"),
        ("P577", "1859-11-24"),
        ("P407", "Q1860"),
        ("P495", "Q145"),
        ("P1476", ("On the Origin of Species", "en")),
        ("P18", "Origin of Species title page.jpg"),
        ("P373", "On the Origin of Species"),
    ],
    "Q11942": [
        ("P31", "Q3918"),
        ("P17", "Q39"),
        ("P131", "Q72"),
        ("P159", "Q72"),
        ("P571", "1855"),
        ("P1448", ("Eidgenössische Technische Hochschule Zürich", "de")),
        ("P625", (47.3763, 8.5476)),
        ("P856", "https://ethz.ch/"),
    ],
    "Q21578": [
        ("P31", ["Q3918", "Q902104"]),
        ("P17", "Q30"),
        ("P131", "Q138518"),
        ("P159", "Q138518"),
        ("P571", "1746"),
        ("P625", (40.3487, -74.6593)),
        ("P1448", ("The Trustees of Princeton University", "en")),
        ("P856", "https://www.princeton.edu/"),
    ],
    # ---------------------------------------------------------------- composers, musicians
    "Q254": person(MALE, "Q34713", "Q1741", "1756-01-27", "1791-12-05")
    + [
        ("P19", "Q1741", DEPR),
        ("P27", "Q701614"),
        ("P106", ["Q36834", "Q486748"]),
        ("P22", "Q156280"),
        ("P26", "Q84464", span("1782-08-04", "1791-12-05")),
        ("P800", ["Q5064", "Q192039", "Q207875"]),
        ("P1412", "Q188"),
        ("P18", "Wolfgang-amadeus-mozart 1.jpg"),
        ("P373", "Wolfgang Amadeus Mozart"),
    ],
    "Q255": person(MALE, "Q586", "Q1741", "1770-12-16", "1827-03-26")
    + [
        ("P1636", "1770-12-17"),
        ("P27", ["Q7904317", "Q131964"]),
        ("P106", ["Q36834", "Q486748"]),
        ("P1066", "Q7349"),
        ("P800", ["Q11989", "Q193778"]),
        ("P26", NONE),
        ("P1412", "Q188"),
        ("P18", "Beethoven.jpg"),
        ("P373", "Ludwig van Beethoven"),
    ],
    "Q1339": person(MALE, "Q7070", "Q2079", "1685-03-31", "1750-07-28")
    + [
        ("P27", "Q12548"),
        ("P106", ["Q36834", "Q765778"]),
        ("P108", "Q699668"),
        ("P26", "Q57212", span("1721-12-03", "1750-07-28")),
        ("P40", "Q76428"),
        ("P800", ["Q208224", "Q379111"]),
        ("P1412", "Q188"),
        ("P373", "Johann Sebastian Bach"),
    ],
    "Q1268": person(MALE, "Q54169", "Q90", None, "1849-10-17")
    + [
        ("P569", "1810-03-01", PREF),
        ("P569", "1810-02-22"),
        ("P27", "Q142"),
        ("P106", ["Q36834", "Q486748"]),
        ("P22", SOME, {"q": {"P1932": "Nicolas Chopin"}}),
        ("P1412", ["Q809", "Q150"]),
        ("P373", "Frédéric Chopin"),
    ],
    "Q7312": person(MALE, "Q687026", "Q1741", "1797-01-31", "1828-11-19")
    + [
        ("P27", "Q131964"),
        ("P106", ["Q36834", "Q486748"]),
        ("P1066", "Q51088"),
        ("P800", "Q611529"),
        ("P1412", "Q188"),
    ],
    "Q7349": person(MALE, "Q40", "Q1741", "1732-03-31", "1809-05-31")
    + [
        ("P27", "Q12548"),
        ("P106", ["Q36834", "Q158852"]),
        ("P1412", "Q188"),
        ("P373", "Joseph Haydn"),
    ],
    "Q1511": person(MALE, "Q2079", "Q641", "1813-05-22", "1883-02-13")
    + [
        ("P27", "Q153015"),
        ("P106", ["Q36834", "Q158852", "Q36180"]),
        ("P69", "Q154804"),
        ("P26", "Q75789", span("1870-08-25", "1883-02-13")),
        ("P800", ["Q190237", "Q1324254"]),
        ("P1412", "Q188"),
    ],
    "Q1203": person(MALE, "Q24826", "Q60", "1940-10-09", "1980-12-08")
    + [
        ("P27", "Q145"),
        ("P106", ["Q177220", "Q488205", "Q855091", "Q36834"]),
        ("P69", "Q3835519"),
        ("P463", "Q1299", span("1960", "1970")),
        ("P26", "Q117012", span("1969-03-20", "1980-12-08")),
        ("P40", ["Q357974", "Q311238"]),
        ("P264", "Q213710"),
        ("P1412", "Q1860"),
        ("P18", "John Lennon, 1974 (cropped).jpg"),
        ("P373", "John Lennon"),
    ],
    "Q2599": person(MALE, "Q24826", None, "1942-06-18")
    + [
        ("P27", "Q145"),
        ("P106", ["Q177220", "Q488205", "Q12360214", "Q36834"]),
        ("P69", "Q15242531"),
        ("P463", "Q1299", span("1960", "1970")),
        ("P26", "Q228899", span("1969-03-12", "1998-04-17")),
        ("P40", "Q232812"),
        ("P166", "Q833163", award("1997")),
        ("P1412", "Q1860"),
        ("P1449", ("Macca", "en")),
        ("P856", "https://www.paulmccartney.com/"),
        ("P373", "Paul McCartney"),
    ],
    "Q2643": person(MALE, "Q24826", "Q65", "1943-02-25", "2001-11-29")
    + [
        ("P27", "Q145"),
        ("P106", ["Q855091", "Q488205"]),
        ("P69", "Q15242531"),
        ("P463", "Q1299", span("1960", "1970")),
        ("P1412", "Q1860"),
        ("P1449", ("the quiet Beatle", "en")),
    ],
    "Q2632": person(MALE, "Q24826", None, "1940-07-07")
    + [
        ("P27", "Q145"),
        ("P106", ["Q386854", "Q177220", "Q33999"]),
        ("P463", "Q1299", span("1962", "1970")),
        ("P1412", "Q1860"),
        ("P1477", ("Richard Starkey", "en")),
    ],
    "Q1299": [
        ("P31", ["Q215380", "Q5741069"]),
        ("P740", "Q24826"),
        ("P495", "Q145"),
        ("P571", "1960"),
        ("P576", "1970-04-10"),
        ("P527", ["Q1203", "Q2599", "Q2643", "Q2632"]),
        ("P136", ["Q11399", "Q37073"]),
        ("P264", ["Q208909", "Q213710"]),
        ("P800", "Q173643"),
        ("P1449", ("the Fab Four", "en")),
        ("P856", "https://www.thebeatles.com/"),
        ("P373", "The Beatles"),
    ],
    "Q173643": [
        ("P31", "Q482994"),
        ("P175", "Q1299"),
        ("P577", "1969-09-26"),
        ("P264", "Q213710"),
        ("P495", "Q145"),
        ("P407", "Q1860"),
        ("P136", "Q11399"),
        ("P2047", 47),
        ("P1476", ("Abbey Road", "en")),
        ("P373", "Abbey Road (album)"),
    ],
    "Q5064": [
        ("P31", "Q1344"),
        ("P136", "Q377258"),
        ("P86", "Q254"),
        ("P87", "Q213547"),
        ("P407", "Q188"),
        ("P1191", "1791-09-30"),
        ("P4647", "Q673479"),
        ("P1476", ("Die Zauberflöte", "de")),
        ("P373", "Die Zauberflöte"),
    ],
    "Q11989": [
        ("P31", ["Q9734", "Q2142754"]),
        ("P86", "Q255"),
        ("P571", "1824"),
        ("P1191", "1824-05-07"),
        ("P4647", "Q165636"),
        ("P577", "1826"),
        ("P407", "Q188"),
        ("P373", "Symphony No. 9 (Beethoven)"),
    ],
    # ---------------------------------------------------------------- art, literature, history
    "Q762": person(MALE, "Q154184", "Q1122731", "J1452-04-15", "J1519-05-02")
    + [
        ("P27", "Q148540"),
        ("P106", ["Q1028181", "Q1281618", "Q42973", "Q81096"]),
        ("P1066", "Q183458"),
        ("P800", ["Q12418", "Q128910", "Q215486"]),
        ("P26", NONE),
        ("P1412", "Q652"),
        ("P18", "Francesco Melzi - Portrait of Leonardo.png"),
        ("P373", "Leonardo da Vinci"),
    ],
    "Q5592": person(MALE, "Q52069", "Q220", "J1475-03-06", "J1564-02-18")
    + [
        ("P27", "Q148540"),
        ("P106", ["Q1028181", "Q1281618", "Q42973", "Q49757"]),
        ("P1066", "Q191423"),
        ("P800", ["Q179900", "Q844675"]),
        ("P1412", "Q652"),
        ("P373", "Michelangelo Buonarroti"),
    ],
    "Q12418": [
        ("P31", "Q3305213"),
        ("P170", "Q762"),
        ("P571", "1503"),
        ("P136", "Q134307"),
        ("P276", "Q19675"),
        ("P195", "Q19675"),
        ("P17", "Q142"),
        ("P2048", 77),
        ("P2049", 53),
        ("P18", "Mona Lisa, by Leonardo da Vinci, from C2RMF retouched.jpg"),
        ("P373", "Mona Lisa"),
    ],
    "Q692": person(MALE, "Q189288", "Q189288", "1564", "J1616-04-23")
    + [
        ("P569", "1564-04-23", DEPR),
        ("P1636", "J1564-04-26"),
        ("P27", "Q179876"),
        ("P106", ["Q214917", "Q49757", "Q33999"]),
        ("P26", "Q237251", span("1582")),
        ("P40", "Q2794279"),
        ("P800", ["Q41567", "Q83186", "Q130283"]),
        ("P1412", "Q1860"),
        ("P1449", ("the Bard of Avon", "en")),
        ("P18", "Shakespeare.jpg"),
        ("P373", "William Shakespeare"),
    ],
    "Q41567": [
        ("P31", "Q25379"),
        ("P136", "Q80930"),
        ("P50", "Q692"),
        ("P407", "Q1860"),
        ("P577", "1603"),
        ("P840", "Q35"),
        ("P495", "Q179876"),
        ("P1476", ("The Tragedy of Hamlet, Prince of Denmark", "en")),
    ],
    "Q517": person(MALE, "Q40104", "Q578060", "1769-08-15", "1821-05-05")
    + [
        ("P569", "1768-08-15", DEPR),
        ("P27", "Q142"),
        ("P106", ["Q189290", "Q82955", "Q39018"]),
        ("P39", "Q5373953", span("1804-05-18", "1814-04-06")),
        ("P39", "Q5373953", span("1815-03-20", "1815-06-22")),
        ("P69", "Q273480"),
        ("P26", "Q171480", span("1796-03-09", "1810-01-10")),
        ("P26", "Q157491", span("1810-04-01", "1821-05-05")),
        ("P40", "Q7723"),
        ("P463", "Q188771"),
        ("P1412", "Q150"),
        ("P1449", ("le Petit Caporal", "fr")),
        ("P373", "Napoleon I of France"),
    ],
    "Q9439": person(FEMALE, "Q84", "Q21", "1819-05-24", "1901-01-22")
    + [
        ("P27", "Q174193"),
        ("P106", "Q116"),
        ("P26", "Q152245", span("1840-02-10", "1861-12-14")),
        ("P40", ["Q235597", "Q155566"]),
        ("P1412", "Q1860"),
        ("P1449", ("the grandmother of Europe", "en")),
        ("P1477", ("Alexandrina Victoria", "en")),
        ("P373", "Queen Victoria"),
    ],
    "Q8016": person(MALE, "Q208181", "Q5953682", "1874-11-30", "1965-01-24")
    + [
        ("P27", "Q145"),
        ("P106", ["Q82955", "Q201788", "Q36180"]),
        ("P39", "Q14211", span("1940-05-10", "1945-07-26")),
        ("P39", "Q14211", span("1951-10-26", "1955-04-05")),
        ("P69", "Q1247373"),
        ("P166", "Q37922", award("1953")),
        ("P26", "Q263454", span("1908-09-12", "1965-01-24")),
        ("P102", "Q9626"),
        ("P463", "Q123885"),
        ("P1412", "Q1860"),
        ("P373", "Winston Churchill"),
    ],
    # ---------------------------------------------------------------- cities
    "Q90": [
        ("P31", ["Q484170", "Q5119", "Q1549591"]),
        ("P17", "Q142", {"ref": ENWIKI_REF}),
        ("P131", "Q13917"),
        ("P1376", "Q142"),
        ("P206", "Q1471"),
        *pop(("2013-01-01", 2229621), ("2019-01-01", 2165423), ("2023-01-01", 2102650), ref=INSEE),
        ("P2046", "105.4"),
        ("P625", (48.8567, 2.3522)),
        ("P281", "75001"),
        ("P1448", ("Paris", "fr")),
        ("P1449", ("City of Light", "en")),
        ("P1449", ("Ville Lumière", "fr")),
        ("P856", "https://www.paris.fr/"),
        ("P373", "Paris"),
        ("P646", "/m/05qtj"),
    ],
    "Q64": [
        ("P31", ["Q515", "Q5119", "Q1549591"]),
        ("P17", "Q183"),
        ("P131", "Q183"),
        ("P1376", "Q183"),
        ("P206", "Q1684"),
        *pop(("2011-05-09", 3292365), ("2022-12-31", 3755251)),
        ("P2046", "891.1"),
        ("P625", (52.52, 13.405)),
        ("P281", "10115"),
        ("P856", "https://www.berlin.de/"),
        ("P373", "Berlin"),
    ],
    "Q84": [
        ("P31", ["Q515", "Q5119", "Q1549591"]),
        ("P17", "Q145"),
        ("P131", "Q23306"),
        ("P1376", ["Q145", "Q21"]),
        ("P206", "Q19686"),
        *pop(("2011-03-27", 8173941), ("2021-03-21", 8799800), ref=ONS),
        ("P2046", 1572),
        ("P625", (51.5072, -0.1275)),
        ("P1449", ("the Big Smoke", "en")),
        ("P373", "London"),
        ("P646", "/m/04jpl"),
    ],
    "Q220": [
        ("P31", ["Q747074", "Q5119", "Q1549591"]),
        ("P17", "Q38"),
        ("P131", "Q1282"),
        ("P1376", ["Q38", "Q1282"]),
        ("P206", "Q13712"),
        ("P571", "J-0753-04-21"),
        *pop(("2011-10-09", 2617175), ("2023-01-01", 2755309)),
        ("P2046", "1285.31"),
        ("P625", (41.8931, 12.4828)),
        ("P281", "00100"),
        ("P1449", ("the Eternal City", "en")),
        ("P373", "Rome"),
    ],
    "Q1741": [
        ("P31", ["Q515", "Q5119", "Q1549591"]),
        ("P17", "Q40"),
        ("P131", "Q40"),
        ("P1376", "Q40"),
        ("P206", "Q1653"),
        *pop(("2011-01-01", 1714142), ("2024-01-01", 2005760)),
        ("P2046", "414.87"),
        ("P625", (48.2083, 16.3725)),
        ("P281", "1010"),
        ("P856", "https://www.wien.gv.at/"),
    ],
    "Q270": [
        ("P31", ["Q515", "Q5119", "Q1549591"]),
        ("P17", "Q36"),
        ("P131", "Q54169"),
        ("P1376", ["Q36", "Q54169"]),
        ("P206", "Q548"),
        *pop(("2011-03-31", 1708491), ("2022-12-31", 1861975)),
        ("P2046", "517.24"),
        ("P625", (52.23, 21.0111)),
        ("P281", "00-001"),
    ],
    "Q1726": [
        ("P31", ["Q42744322", "Q1549591"]),
        ("P17", "Q183"),
        ("P131", "Q980"),
        ("P1376", "Q980"),
        *pop(("2011-05-09", 1364920), ("2022-12-31", 1512491)),
        ("P2046", "310.7"),
        ("P625", (48.1375, 11.575)),
        ("P281", "80331"),
        ("P856", "https://www.muenchen.de/"),
    ],
    "Q24826": [
        ("P31", ["Q515", "Q1549591"]),
        ("P17", "Q145"),
        ("P131", "Q21"),
        *pop(("2011-03-27", 466415), ("2021-03-21", 486100), ref=ONS),
        ("P2046", "111.8"),
        ("P625", (53.4075, -2.9919)),
    ],
    "Q2044": [
        ("P31", ["Q747074", "Q1549591"]),
        ("P17", "Q38"),
        ("P131", "Q1273"),
        ("P1376", "Q1273"),
        ("P206", "Q1314"),
        ("P1082", 360930, {"q": {"P585": "2023-01-01"}}),
        ("P2046", "102.41"),
        ("P625", (43.7714, 11.2542)),
        ("P281", "50121"),
    ],
    "Q34713": [
        ("P31", ["Q515", "Q1549591"]),
        ("P17", "Q40"),
        ("P131", "Q43325"),
        ("P1376", "Q43325"),
        ("P1082", 155021, {"q": {"P585": "2023-01-01"}}),
        ("P2046", "65.65"),
        ("P625", (47.8, 13.045)),
        ("P281", "5020"),
        ("P373", "Salzburg"),
    ],
    "Q586": [
        ("P31", ["Q42744322", "Q1549591"]),
        ("P17", "Q183"),
        ("P131", "Q1198"),
        ("P1376", "Q183", span("1949-05-23", "1990-10-03")),
        ("P206", "Q584"),
        ("P1082", 330579, {"q": {"P585": "2022-12-31"}}),
        ("P2046", "141.06"),
        ("P625", (50.7339, 7.0997)),
        ("P281", "53111"),
        ("P373", "Bonn"),
    ],
    "Q3012": [
        ("P31", ["Q42744322", "Q1549591"]),
        ("P17", "Q183"),
        ("P131", "Q985"),
        ("P206", "Q1653"),
        ("P1082", 126329, {"q": {"P585": "2022-12-31"}}),
        ("P2046", "118.69"),
        ("P625", (48.4, 9.9833)),
        ("P281", "89073"),
        ("P373", "Ulm"),
    ],
    "Q13375": [
        ("P31", "Q747074"),
        ("P17", "Q38"),
        ("P131", "Q1273"),
        ("P206", "Q1314"),
        ("P1082", 88737, {"q": {"P585": "2023-01-01"}}),
        ("P2046", "185.07"),
        ("P625", (43.7167, 10.4)),
        ("P373", "Pisa"),
    ],
    "Q350": [
        ("P31", "Q515"),
        ("P17", "Q145"),
        ("P131", "Q21"),
        ("P1082", 145700, {"q": {"P585": "2021-03-21"}}),
        ("P2046", "40.7"),
        ("P625", (52.2053, 0.1192)),
        ("P373", "Cambridge"),
    ],
    "Q1748": [
        ("P31", ["Q515", "Q5119", "Q1549591"]),
        ("P17", "Q35"),
        ("P131", "Q35"),
        ("P1376", "Q35"),
        *pop(("2014-01-01", 569557), ("2024-01-01", 660842)),
        ("P2046", "86.2"),
        ("P625", (55.6761, 12.5683)),
    ],
    "Q72": [
        ("P31", ["Q70208", "Q1549591"]),
        ("P17", "Q39"),
        ("P131", "Q11943"),
        ("P1376", "Q11943"),
        *pop(("2010-12-31", 372857), ("2022-12-31", 427721)),
        ("P2046", "87.88"),
        ("P625", (47.3744, 8.5411)),
        ("P281", "8001"),
    ],
    "Q60": [
        ("P31", ["Q1093829", "Q1549591"]),
        ("P17", "Q30"),
        ("P131", "Q1384"),
        ("P206", "Q97"),
        *pop(("2010-04-01", 8175133), ("2020-04-01", 8804190)),
        ("P2046", "1223.59"),
        ("P625", (40.7128, -74.006)),
        ("P1449", ("the Big Apple", "en")),
        ("P856", "https://www.nyc.gov/"),
    ],
    "Q2079": [
        ("P31", ["Q42744322", "Q1549591"]),
        ("P17", "Q183"),
        ("P131", "Q1202"),
        ("P1082", 616093, {"q": {"P585": "2022-12-31"}}),
        ("P2046", "297.8"),
        ("P625", (51.34, 12.375)),
        ("P281", "04109"),
        ("P373", "Leipzig"),
    ],
    "Q7070": [
        ("P31", "Q42744322"),
        ("P17", "Q183"),
        ("P131", "Q1205"),
        ("P1082", 42250, {"q": {"P585": "2022-12-31"}}),
        ("P2046", "104.2"),
        ("P625", (50.9747, 10.3244)),
        ("P281", "99817"),
        ("P373", "Eisenach"),
    ],
    "Q189288": [
        ("P31", "Q3957"),
        ("P17", "Q145"),
        ("P131", "Q21"),
        ("P1082", 30495, {"q": {"P585": "2021-03-21"}, "ref": ONS}),
        ("P625", (52.1928, -1.7064)),
        ("P281", "CV37"),
        ("P373", "Stratford-upon-Avon"),
    ],
    "Q18125": [
        ("P31", ["Q515", "Q1549591"]),
        ("P17", "Q145"),
        ("P131", "Q21"),
        ("P1082", 551938, {"q": {"P585": "2021-03-21"}}),
        ("P2046", "115.6"),
        ("P625", (53.4794, -2.2453)),
        ("P373", "Manchester"),
    ],
    # ---------------------------------------------------------------- countries
    "Q142": [
        ("P31", ["Q3624078", "Q6256"]),
        ("P36", "Q90"),
        ("P37", "Q150"),
        ("P38", "Q4916"),
        ("P30", "Q46"),
        ("P47", ["Q183", "Q38", "Q39", "Q31", "Q32", "Q29", "Q228", "Q235"]),
        ("P150", "Q13917"),
        ("P463", "Q458"),
        *pop(("2020-01-01", 67391582), ("2024-01-01", 68401997), ref=INSEE),
        ("P2046", 643801),
        ("P1448", ("République française", "fr")),
        ("P646", "/m/0f8l9c"),
    ],
    "Q183": [
        ("P31", ["Q3624078", "Q6256"]),
        ("P36", "Q64", {"rank": "preferred", "q": {"P580": "1990-10-03"}}),
        ("P36", "Q586", span("1949-05-23", "1990-10-03")),
        ("P37", "Q188"),
        ("P38", "Q4916"),
        ("P30", "Q46"),
        ("P47", ["Q142", "Q40", "Q39", "Q36", "Q35", "Q55", "Q31", "Q32", "Q213"]),
        ("P150", ["Q980", "Q985", "Q1202", "Q1205", "Q1198", "Q1194", "Q1197", "Q64"]),
        ("P463", "Q458"),
        ("P571", "1949-05-23"),
        *pop(("2011-05-09", 80219695), ("2022-12-31", 84358845)),
        ("P2046", 357588),
        ("P1448", ("Bundesrepublik Deutschland", "de")),
        ("P646", "/m/0345h"),
    ],
    "Q145": [
        ("P31", ["Q3624078", "Q6256"]),
        ("P36", "Q84"),
        ("P37", "Q1860"),
        ("P38", "Q25224"),
        ("P30", "Q46"),
        ("P47", "Q27"),
        ("P150", ["Q21", "Q22", "Q25", "Q26"]),
        ("P463", "Q458", span("1973-01-01", "2020-01-31")),
        *pop(("2011-03-27", 63182178), ("2021-03-21", 67026292), ref=ONS),
        ("P2046", 242495),
        ("P1448", ("United Kingdom of Great Britain and Northern Ireland", "en")),
        ("P646", "/m/07ssc"),
    ],
    "Q38": [
        ("P31", ["Q3624078", "Q6256"]),
        ("P36", "Q220"),
        ("P37", "Q652"),
        ("P38", "Q4916"),
        ("P30", "Q46"),
        ("P47", ["Q142", "Q39", "Q40", "Q215", "Q238", "Q237"]),
        ("P150", ["Q1273", "Q1282"]),
        ("P463", "Q458"),
        *pop(("2011-10-09", 59433744), ("2023-01-01", 58850717)),
        ("P2046", 301340),
        ("P1448", ("Repubblica Italiana", "it")),
        ("P646", "/m/03rjj"),
    ],
    "Q40": [
        ("P31", ["Q3624078", "Q6256"]),
        ("P36", "Q1741"),
        ("P37", "Q188"),
        ("P38", "Q4916"),
        ("P30", "Q46"),
        ("P47", ["Q183", "Q39", "Q38", "Q347", "Q213", "Q214", "Q28", "Q215"]),
        ("P150", "Q43325"),
        ("P463", "Q458"),
        ("P1082", 9104772, {"q": {"P585": "2023-01-01"}}),
        ("P2046", 83879),
        ("P1448", ("Republik Österreich", "de")),
    ],
    "Q36": [
        ("P31", ["Q3624078", "Q6256"]),
        ("P36", "Q270"),
        ("P37", "Q809"),
        ("P38", "Q123213"),
        ("P30", "Q46"),
        ("P47", ["Q183", "Q213", "Q214", "Q212", "Q184", "Q37", "Q159"]),
        ("P150", "Q54169"),
        ("P463", "Q458"),
        ("P1082", 37636508, {"q": {"P585": "2023-01-01"}}),
        ("P2046", 312696),
        ("P1448", ("Rzeczpospolita Polska", "pl")),
    ],
    "Q35": [
        ("P31", ["Q3624078", "Q6256"]),
        ("P36", "Q1748"),
        ("P37", "Q9035"),
        ("P38", "Q25417"),
        ("P30", "Q46"),
        ("P47", "Q183"),
        ("P463", "Q458"),
        ("P1082", 5932654, {"q": {"P585": "2023-01-01"}}),
        ("P2046", 42933),
        ("P1448", ("Kongeriget Danmark", "da")),
    ],
    "Q39": [
        ("P31", ["Q3624078", "Q6256"]),
        ("P36", "Q70"),
        ("P37", ["Q188", "Q150", "Q652", "Q13199"]),
        ("P38", "Q25344"),
        ("P30", "Q46"),
        ("P47", ["Q183", "Q142", "Q38", "Q40", "Q347"]),
        ("P150", "Q11943"),
        ("P1082", 8815385, {"q": {"P585": "2022-12-31"}}),
        ("P2046", 41285),
        ("P1448", ("Schweizerische Eidgenossenschaft", "de")),
    ],
    "Q30": [
        ("P31", ["Q3624078", "Q6256"]),
        ("P36", "Q61"),
        ("P38", "Q4917"),
        ("P30", "Q49"),
        ("P47", ["Q16", "Q96"]),
        ("P150", ["Q1384", "Q1408", "Q1397"]),
        ("P571", "1776-07-04"),
        *pop(("2010-04-01", 308745538), ("2020-04-01", 331449281)),
        ("P2046", 9833520),
        ("P1448", ("United States of America", "en")),
        ("P646", "/m/09c7w0"),
    ],
    # ---------------------------------------------------------------- rivers
    "Q1471": [
        ("P31", "Q4022"),
        ("P17", "Q142"),
        ("P131", "Q13917"),
        ("P403", "Q34640"),
        ("P2043", 777),
        ("P2053", 79000),
        ("P373", "Seine"),
    ],
    "Q19686": [
        ("P31", "Q4022"),
        ("P17", "Q145"),
        ("P131", ["Q21", "Q23306"]),
        ("P403", "Q1693"),
        ("P2043", 346),
        ("P2053", 12935),
        ("P373", "River Thames"),
    ],
    "Q1653": [
        ("P31", "Q4022"),
        ("P17", ["Q183", "Q40", "Q214", "Q28"]),
        ("P131", ["Q985", "Q980"]),
        ("P403", "Q166"),
        ("P2043", (2850, 2840, 2860)),
        ("P2053", 801463),
        ("P373", "Danube"),
    ],
    "Q548": [
        ("P31", "Q4022"),
        ("P17", "Q36"),
        ("P131", "Q54169"),
        ("P403", "Q545"),
        ("P2043", 1047),
        ("P2053", 193960),
    ],
    "Q13712": [
        ("P31", "Q4022"),
        ("P17", "Q38"),
        ("P131", "Q1282"),
        ("P403", "Q38882"),
        ("P2043", 406),
        ("P2053", 17375),
        ("P373", "Tiber"),
    ],
    "Q1314": [
        ("P31", "Q4022"),
        ("P17", "Q38"),
        ("P131", "Q1273"),
        ("P403", "Q42820"),
        ("P2043", 241),
        ("P2053", 8228),
        ("P373", "Arno"),
    ],
    "Q1684": [
        ("P31", "Q4022"),
        ("P17", "Q183"),
        ("P131", ["Q1202", "Q64"]),
        ("P2043", 400),
        ("P2053", 10100),
        ("P373", "Spree"),
    ],
    # ---------------------------------------------------------------- universities
    "Q35794": [
        ("P31", "Q3918"),
        ("P17", "Q145"),
        ("P131", "Q350"),
        ("P159", "Q350"),
        ("P571", "1209"),
        ("P527", ["Q332342", "Q924289", "Q714717", "Q650068"]),
        ("P1448", ("The Chancellor, Masters, and Scholars of the University of Cambridge", "en")),
        ("P856", "https://www.cam.ac.uk/"),
    ],
    "Q209842": [
        ("P31", "Q3918"),
        ("P17", "Q142"),
        ("P131", "Q90"),
        ("P159", "Q90"),
        ("P571", "1150"),
        ("P576", "1970"),
        ("P1448", ("Université de Paris", "fr")),
    ],
    "Q332342": [
        ("P31", "Q189004"),
        ("P361", "Q35794"),
        ("P17", "Q145"),
        ("P131", "Q350"),
        ("P112", "Q38370"),
        ("P571", "1546"),
        ("P856", "https://www.trin.cam.ac.uk/"),
    ],
    "Q186285": [
        ("P31", "Q3918"),
        ("P17", "Q35"),
        ("P131", "Q1748"),
        ("P159", "Q1748"),
        ("P571", "J1479-06-01"),
        ("P625", (55.6801, 12.5724)),
        ("P1448", ("Københavns Universitet", "da")),
        ("P856", "https://www.ku.dk/"),
    ],
    # ---------------------------------------------------------------- supporting entities
    "Q515": [("P279", "Q486972")],
    "Q5119": [("P279", "Q515")],
    "Q1549591": [("P279", "Q515")],
    "Q3624078": [("P279", "Q6256")],
    "Q902104": [("P279", "Q3918")],
    "Q207694": [("P279", "Q33506")],
    "Q7191": [("P279", "Q618779")],
    "Q19350898": [("P279", "Q169470")],
    "Q2142754": [("P279", "Q9734")],
    "Q19675": [
        ("P31", "Q207694"),
        ("P17", "Q142"),
        ("P131", "Q90"),
        ("P571", "1793-08-10"),
        ("P856", "https://www.louvre.fr/"),
    ],
    "Q44585": [("P31", "Q618779"), ("P279", "Q7191"), ("P1027", "Q191583")],
    "Q37922": [("P31", "Q618779"), ("P279", "Q7191")],
    "Q191583": [("P31", "Q955824"), ("P17", "Q34")],
    "Q188771": [("P31", "Q955824"), ("P17", "Q142"), ("P159", "Q90")],
    "Q338432": [("P31", "Q955824"), ("P17", "Q38"), ("P159", "Q220")],
    "Q458": [("P30", "Q46")],
    "Q21": [("P31", "Q6256"), ("P17", "Q145"), ("P131", "Q145"), ("P36", "Q84"), ("P30", "Q46")],
    "Q22": [("P17", "Q145"), ("P131", "Q145")],
    "Q25": [("P17", "Q145"), ("P131", "Q145")],
    "Q26": [("P17", "Q145"), ("P131", "Q145")],
    "Q23306": [("P17", "Q145"), ("P131", "Q21")],
    "Q13917": [("P17", "Q142"), ("P131", "Q142"), ("P36", "Q90")],
    "Q980": [("P17", "Q183"), ("P131", "Q183"), ("P36", "Q1726")],
    "Q985": [("P17", "Q183"), ("P131", "Q183")],
    "Q1202": [("P17", "Q183"), ("P131", "Q183")],
    "Q1205": [("P17", "Q183"), ("P131", "Q183")],
    "Q1198": [("P17", "Q183"), ("P131", "Q183")],
    "Q1194": [("P17", "Q183"), ("P131", "Q183"), ("P36", "Q1707")],
    "Q1197": [("P17", "Q183"), ("P131", "Q183")],
    "Q1273": [("P17", "Q38"), ("P131", "Q38"), ("P36", "Q2044")],
    "Q1282": [("P17", "Q38"), ("P131", "Q38"), ("P36", "Q220")],
    "Q54169": [("P17", "Q36"), ("P131", "Q36"), ("P36", "Q270")],
    "Q11943": [("P17", "Q39"), ("P131", "Q39"), ("P36", "Q72")],
    "Q43325": [("P17", "Q40"), ("P131", "Q40"), ("P36", "Q34713")],
    "Q1384": [("P17", "Q30"), ("P131", "Q30")],
    "Q1408": [("P17", "Q30"), ("P131", "Q30")],
    "Q1397": [("P17", "Q30"), ("P131", "Q30")],
    "Q34497": [("P17", "Q145")],
    "Q179876": [("P31", "Q3024240"), ("P36", "Q84"), ("P30", "Q46")],
    "Q161885": [("P31", "Q3024240"), ("P36", "Q84"), ("P30", "Q46")],
    "Q174193": [("P31", "Q3024240"), ("P36", "Q84"), ("P30", "Q46")],
    "Q131964": [("P31", "Q3024240"), ("P36", "Q1741"), ("P30", "Q46")],
    "Q12548": [("P31", "Q3024240"), ("P30", "Q46")],
    "Q153015": [("P31", "Q3024240"), ("P30", "Q46")],
    "Q7904317": [("P31", "Q3024240"), ("P36", "Q586")],
    "Q701614": [("P31", "Q3024240"), ("P36", "Q34713")],
    "Q34266": [("P31", "Q3024240"), ("P30", "Q46")],
    "Q207272": [("P31", "Q3024240"), ("P36", "Q270"), ("P30", "Q46")],
    "Q1206012": [("P31", "Q3024240"), ("P36", "Q64"), ("P30", "Q46")],
    "Q154849": [("P31", "Q3024240"), ("P36", "Q2044")],
    "Q148540": [("P31", "Q3024240"), ("P36", "Q2044")],
    "Q70": [("P31", "Q5119"), ("P17", "Q39"), ("P1376", "Q39")],
    "Q61": [("P31", "Q5119"), ("P17", "Q30"), ("P1376", "Q30")],
    "Q641": [("P31", "Q747074"), ("P17", "Q38")],
    "Q490": [("P31", "Q747074"), ("P17", "Q38")],
    "Q34217": [("P31", "Q515"), ("P17", "Q145"), ("P131", "Q21")],
    "Q65": [("P31", "Q1093829"), ("P17", "Q30")],
    "Q138518": [("P17", "Q30"), ("P131", "Q1408")],
    "Q1707": [("P31", "Q42744322"), ("P17", "Q183"), ("P131", "Q1194"), ("P1376", "Q1194")],
    "Q3033": [("P31", "Q42744322"), ("P17", "Q183"), ("P131", "Q1197")],
    "Q40104": [("P31", "Q484170"), ("P17", "Q142")],
    "Q578060": [("P17", "Q145"), ("P131", "Q34497")],
    "Q208181": [("P17", "Q145"), ("P131", "Q21")],
    "Q5953682": [("P17", "Q145"), ("P131", "Q84")],
    "Q122744": [("P17", "Q145"), ("P131", "Q84")],
    "Q2011497": [("P31", "Q3957"), ("P17", "Q145"), ("P131", "Q21")],
    "Q1231883": [("P17", "Q145"), ("P131", "Q84")],
    "Q123634": [("P17", "Q145"), ("P131", "Q84")],
    "Q367211": [("P17", "Q224")],
    "Q1645063": [("P17", "Q30"), ("P131", "Q1397")],
    "Q932601": [("P17", "Q30"), ("P131", "Q1408")],
    "Q2412935": [("P17", "Q145"), ("P131", "Q21")],
    "Q3038318": [("P17", "Q145"), ("P131", "Q21")],
    "Q65430768": [("P17", "Q664")],
    "Q154184": [("P17", "Q38"), ("P131", "Q1273")],
    "Q1122731": [("P17", "Q142"), ("P131", "Q205116")],
    "Q205116": [("P31", "Q484170"), ("P17", "Q142")],
    "Q52069": [("P31", "Q747074"), ("P17", "Q38"), ("P131", "Q1273")],
    "Q2031761": [("P17", "Q38"), ("P131", "Q2044")],
    "Q2364887": [("P17", "Q142")],
    "Q687026": [("P17", "Q40"), ("P131", "Q1741")],
    "Q673479": [("P17", "Q40"), ("P131", "Q1741")],
    "Q165636": [("P17", "Q40"), ("P131", "Q1741")],
    "Q584": [("P31", "Q4022"), ("P17", ["Q39", "Q183", "Q55"]), ("P403", "Q1693")],
    "Q206702": [("P31", "Q3918"), ("P17", "Q39"), ("P131", "Q72")],
    "Q152087": [("P31", "Q3918"), ("P17", "Q183"), ("P131", "Q64")],
    "Q635642": [("P17", "Q30"), ("P131", "Q138518")],
    "Q55044": [("P31", "Q3918"), ("P17", "Q183"), ("P131", "Q1726")],
    "Q156737": [("P31", "Q3918"), ("P17", "Q183"), ("P131", "Q1707")],
    "Q645663": [("P31", "Q3918"), ("P17", "Q38"), ("P131", "Q13375")],
    "Q193510": [("P31", "Q3918"), ("P17", "Q38")],
    "Q714717": [("P31", "Q189004"), ("P361", "Q35794"), ("P131", "Q350")],
    "Q924289": [("P31", "Q189004"), ("P361", "Q35794"), ("P131", "Q350")],
    "Q650068": [("P31", "Q189004"), ("P361", "Q35794"), ("P131", "Q350")],
    "Q160302": [("P31", "Q3918"), ("P17", "Q145")],
    "Q689775": [("P31", "Q3918"), ("P17", "Q40")],
    "Q31519": [("P31", "Q3918"), ("P17", "Q213")],
    "Q632404": [("P17", "Q30")],
    "Q867530": [("P31", "Q3918"), ("P17", "Q145"), ("P131", "Q18125")],
    "Q432475": [("P31", "Q3918"), ("P17", "Q664")],
    "Q201492": [("P31", "Q3918"), ("P17", "Q16")],
    "Q165980": [("P31", "Q3918"), ("P17", "Q40"), ("P131", "Q1741")],
    "Q34433": [("P31", "Q3918"), ("P17", "Q145"), ("P131", "Q34217")],
    "Q3151953": [("P17", "Q27")],
    "Q154804": [("P31", "Q3918"), ("P17", "Q183"), ("P131", "Q2079")],
    "Q699668": [("P17", "Q183"), ("P131", "Q2079")],
    "Q3835519": [("P17", "Q145"), ("P131", "Q24826")],
    "Q15242531": [("P17", "Q145"), ("P131", "Q24826")],
    "Q1247373": [("P17", "Q145"), ("P131", "Q84")],
    "Q273480": [("P17", "Q142"), ("P131", "Q90")],
    "Q213710": [("P17", "Q145"), ("P112", "Q1299")],
    "Q208909": [("P17", "Q145")],
    "Q9626": [("P17", "Q145")],
    "Q5373953": [("P1001", "Q142")],
    "Q14211": [("P1001", "Q145")],
    "Q205921": [("P31", "Q47461344"), ("P50", "Q935"), ("P577", "1687"), ("P407", "Q397")],
    "Q192039": [("P31", "Q1344"), ("P86", "Q254")],
    "Q207875": [("P86", "Q254")],
    "Q193778": [("P31", "Q1344"), ("P86", "Q255")],
    "Q208224": [("P86", "Q1339")],
    "Q379111": [("P86", "Q1339")],
    "Q611529": [("P86", "Q7312")],
    "Q190237": [("P86", "Q1511")],
    "Q1324254": [("P31", "Q1344"), ("P86", "Q1511")],
    "Q128910": [("P31", "Q3305213"), ("P170", "Q762"), ("P276", "Q490")],
    "Q215486": [("P170", "Q762")],
    "Q179900": [("P170", "Q5592"), ("P276", "Q2044")],
    "Q844675": [("P170", "Q5592")],
    "Q83186": [("P31", "Q25379"), ("P50", "Q692")],
    "Q130283": [("P31", "Q25379"), ("P50", "Q692")],
    "Q163310": [("P61", "Q7251"), ("P138", "Q7251")],
    "Q485257": [("P287", "Q46633")],
    "Q628007": [("P287", "Q46633")],
    "Q11452": [("P61", "Q937")],
    "Q11455": [("P61", "Q937")],
    "Q165498": [("P61", "Q9130"), ("P138", "Q9130")],
    "Q116434": [("P61", "Q8743")],
}

# Spouses and relatives are plain humans; give them the basics.
for _qid, _sex in [
    ("Q76346", FEMALE),
    ("Q68761", FEMALE),
    ("Q7504", FEMALE),
    ("Q230068", FEMALE),
    ("Q242147", FEMALE),
    ("Q22087338", FEMALE),
    ("Q84464", FEMALE),
    ("Q156280", MALE),
    ("Q57212", FEMALE),
    ("Q76428", MALE),
    ("Q75789", FEMALE),
    ("Q117012", FEMALE),
    ("Q357974", MALE),
    ("Q311238", MALE),
    ("Q228899", FEMALE),
    ("Q232812", FEMALE),
    ("Q237251", FEMALE),
    ("Q2794279", FEMALE),
    ("Q171480", FEMALE),
    ("Q157491", FEMALE),
    ("Q7723", MALE),
    ("Q263454", FEMALE),
    ("Q152245", MALE),
    ("Q235597", FEMALE),
    ("Q155566", FEMALE),
    ("Q5679", MALE),
    ("Q4426480", MALE),
    ("Q208448", MALE),
    ("Q47285", MALE),
    ("Q92741", MALE),
    ("Q51088", MALE),
    ("Q183458", MALE),
    ("Q191423", MALE),
    ("Q213547", MALE),
    ("Q38370", MALE),
    ("Q76148325", FEMALE),
]:
    CLAIMS.setdefault(_qid, [("P31", HUMAN), ("P21", _sex)])

# Relatives and teachers that are themselves linked back to the covered people.
CLAIMS["Q7504"] += [("P22", "Q37463")]
CLAIMS["Q76428"] += [("P22", "Q1339")]
CLAIMS["Q357974"] += [("P22", "Q1203")]
CLAIMS["Q311238"] += [("P22", "Q1203")]
CLAIMS["Q232812"] += [("P22", "Q2599")]
CLAIMS["Q7723"] += [("P22", "Q517")]
CLAIMS["Q47285"] += [("P27", "Q145"), ("P106", "Q169470"), ("P108", "Q35794")]
CLAIMS["Q38370"] += [("P27", "Q179876"), ("P106", "Q116")]
CLAIMS["Q5679"] += [("P27", "Q161885"), ("P106", "Q49757"), ("P40", "Q7259")]

# --------------------------------------------------------------------------------------
# Building the JSON.
# --------------------------------------------------------------------------------------
DATATYPE = {pid: dt for pid, dt, *_ in PROPERTIES}
_TIME_RE = re.compile(r"^(J)?(-)?(\d{1,4})(?:-(\d{2}))?(?:-(\d{2}))?$")


def _hash(obj) -> str:
    return hashlib.sha1(
        json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    ).hexdigest()


def _amount(x) -> str:
    text = str(x)
    return text if text.startswith(("+", "-")) else "+" + text


def datavalue(pid: str, value):
    dt = DATATYPE[pid]
    if dt == "wikibase-item":
        if not (isinstance(value, str) and value.startswith("Q")):
            raise ValueError(f"{pid}: expected an item id, got {value!r}")
        return {
            "value": {"entity-type": "item", "numeric-id": int(value[1:]), "id": value},
            "type": "wikibase-entityid",
        }
    if dt == "time":
        m = _TIME_RE.match(value)
        if not m:
            raise ValueError(f"{pid}: bad time {value!r}")
        julian, bce, year, month, day = m.groups()
        precision = 11 if day else 10 if month else 9
        time = f"{'-' if bce else '+'}{int(year):04d}-{month or '00'}-{day or '00'}T00:00:00Z"
        return {
            "value": {
                "time": time,
                "timezone": 0,
                "before": 0,
                "after": 0,
                "precision": precision,
                "calendarmodel": JULIAN if julian else GREGORIAN,
            },
            "type": "time",
        }
    if dt == "quantity":
        unit = UNITS.get(pid, "1")
        unit = unit if unit == "1" else WD + unit
        if isinstance(value, tuple):
            amount, lower, upper = value
            q = {
                "amount": _amount(amount),
                "unit": unit,
                "upperBound": _amount(upper),
                "lowerBound": _amount(lower),
            }
        else:
            q = {"amount": _amount(value), "unit": unit}
        return {"value": q, "type": "quantity"}
    if dt == "monolingualtext":
        text, lang = value
        return {"value": {"text": text, "language": lang}, "type": "monolingualtext"}
    if dt == "globe-coordinate":
        lat, lon = value
        return {
            "value": {
                "latitude": lat,
                "longitude": lon,
                "altitude": None,
                "precision": 0.0001,
                "globe": EARTH,
            },
            "type": "globecoordinate",
        }
    if dt in ("string", "external-id", "url", "commonsMedia"):
        if not isinstance(value, str):
            raise ValueError(f"{pid}: expected a string, got {value!r}")
        return {"value": value, "type": "string"}
    raise ValueError(f"unknown datatype {dt!r}")


def snak(pid: str, value, with_hash: bool = True) -> dict:
    if value in (SOME, NONE):
        out = {"snaktype": "somevalue" if value == SOME else "novalue", "property": pid}
        body = dict(out, datatype=DATATYPE[pid])
    else:
        out = {"snaktype": "value", "property": pid}
        body = dict(out, datavalue=datavalue(pid, value), datatype=DATATYPE[pid])
    if not with_hash:
        return body
    out["hash"] = _hash(body)
    if "datavalue" in body:
        out["datavalue"] = body["datavalue"]
    out["datatype"] = body["datatype"]
    return out


def _as_list(v):
    return v if isinstance(v, list) else [v]


def statement(subject: str, pid: str, index: int, value, opts: dict) -> dict:
    st = {"mainsnak": snak(pid, value), "type": "statement"}
    quals = opts.get("q") or {}
    if quals:
        st["qualifiers"] = {qp: [snak(qp, qv) for qv in _as_list(qvs)] for qp, qvs in quals.items()}
        st["qualifiers-order"] = list(quals)
    sid = str(uuid.uuid5(NAMESPACE, f"{subject}|{pid}|{index}")).upper()
    st["id"] = f"{subject}${sid}"
    st["rank"] = opts.get("rank", "normal")
    refs = []
    for ref in opts.get("ref") or []:
        snaks = {
            rp: [snak(rp, rv, with_hash=False) for rv in _as_list(rvs)] for rp, rvs in ref.items()
        }
        refs.append({"hash": _hash(snaks), "snaks": snaks, "snaks-order": list(ref)})
    if refs:
        st["references"] = refs
    return st


def build_claims(subject: str) -> dict:
    claims: dict[str, list] = {}
    for entry in CLAIMS.get(subject, []):
        pid, values = entry[0], entry[1]
        opts = entry[2] if len(entry) > 2 else {}
        if pid not in DATATYPE:
            raise ValueError(f"{subject}: property {pid} is not defined")
        for value in _as_list(values):
            bucket = claims.setdefault(pid, [])
            bucket.append(statement(subject, pid, len(bucket), value, opts))
    return claims


def _lastrevid(eid: str) -> int:
    return 2_300_000_000 + int(hashlib.sha1(eid.encode()).hexdigest()[:8], 16) % 100_000_000


def _terms(en: str, extra: dict[str, str]) -> dict:
    out = {"en": {"language": "en", "value": en}}
    for lang in sorted(extra):
        out[lang] = {"language": lang, "value": extra[lang]}
    return out


def item(qid: str) -> dict:
    if qid in COVERED:
        label, desc, aliases, extra = COVERED[qid]
        enwiki = label
    else:
        label, desc, enwiki = SUPPORT[qid]
        aliases, extra = [], {}
    ent = {
        "type": "item",
        "id": qid,
        "labels": _terms(label, extra),
        "descriptions": {"en": {"language": "en", "value": desc}},
        "aliases": {"en": [{"language": "en", "value": a} for a in aliases]} if aliases else {},
        "claims": build_claims(qid),
        "sitelinks": {"enwiki": {"site": "enwiki", "title": enwiki, "badges": []}}
        if enwiki
        else {},
        "lastrevid": _lastrevid(qid),
        "modified": MODIFIED,
    }
    # A few foreign-language sitelinks, as in the real dump.
    if qid in COVERED and "de" in extra:
        ent["sitelinks"]["dewiki"] = {"site": "dewiki", "title": extra["de"], "badges": []}
    return ent


def prop(pid: str, datatype: str, label: str, desc: str, aliases: list[str]) -> dict:
    return {
        "type": "property",
        "datatype": datatype,
        "id": pid,
        "labels": {"en": {"language": "en", "value": label}},
        "descriptions": {"en": {"language": "en", "value": desc}},
        "aliases": {"en": [{"language": "en", "value": a} for a in aliases]} if aliases else {},
        "claims": {},
        "lastrevid": _lastrevid(pid),
        "modified": MODIFIED,
    }


def build() -> list[dict]:
    overlap = set(COVERED) & set(SUPPORT)
    if overlap:
        raise ValueError(f"ids both covered and supporting: {sorted(overlap)}")
    known = set(COVERED) | set(SUPPORT)
    unknown = set(CLAIMS) - known
    if unknown:
        raise ValueError(f"claims for undefined entities: {sorted(unknown)}")
    entities = [item(q) for q in known] + [prop(*p) for p in PROPERTIES]
    # Every item a claim, qualifier or reference points to must be in the file.
    for ent in entities:
        for stmts in ent["claims"].values():
            for st in stmts:
                snaks = [st["mainsnak"]] + [
                    s for ss in st.get("qualifiers", {}).values() for s in ss
                ]
                snaks += [
                    s for r in st.get("references", []) for ss in r["snaks"].values() for s in ss
                ]
                for s in snaks:
                    v = s.get("datavalue", {}).get("value")
                    if (
                        isinstance(v, dict)
                        and v.get("entity-type") == "item"
                        and v["id"] not in known
                    ):
                        raise ValueError(
                            f"{ent['id']}: {s['property']} points to undefined {v['id']}"
                        )
    titles = [
        e["sitelinks"]["enwiki"]["title"] for e in entities if "enwiki" in e.get("sitelinks", {})
    ]
    if len(titles) != len(set(titles)):
        raise ValueError("duplicate enwiki titles")
    # Interleave items and properties by numeric id, as page order does in the real dump.
    entities.sort(key=lambda e: (int(e["id"][1:]), e["type"]))
    return entities


def write(path: Path) -> int:
    entities = build()
    lines = ["["]
    for i, ent in enumerate(entities):
        text = json.dumps(ent, ensure_ascii=False, separators=(",", ":"))
        lines.append(text + ("," if i < len(entities) - 1 else ""))
    lines.append("]")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return len(entities)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out", type=Path, default=OUT_DEFAULT, help="output path (default: %(default)s)"
    )
    args = parser.parse_args()
    n = write(args.out)
    print(f"wrote {n} entities to {args.out}")


if __name__ == "__main__":
    main()
