"""Obfuscated subjects: the start entity named by what the graph says of it.

"Where did Niels Bohr die?" is one lookup; "Where did the physicist born in 1885 die?" makes
a searcher find who is meant first (BrowseComp, DeepDive, NeMo Data Designer's rewrite). A
description is the entity's class (a person's occupation, anything else's `instance of`) and
one or two of its facts, and it is offered only when the ingested graph makes it unique: no
other item has that class and those values. An ambiguous description is never offered.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import duckdb

from pipeline.core.parquet_sql import path_list
from pipeline.kg.dump import part_files

# How a fact reads inside a description, by property: "the physicist born in 1885". Order is
# preference: dates name no other entity, so they leak no bridge of a question; facts are
# written in RENDER order ("the physicist from Denmark born in 1885 who died in 1962").
PHRASES: dict[str, str] = {
    "P569": "born in {}",
    "P570": "who died in {}",
    "P571": "founded in {}",
    "P577": "published in {}",
    "P86": "composed by {}",
    "P50": "written by {}",
    "P170": "created by {}",
    "P175": "performed by {}",
    "P112": "founded by {}",
    "P27": "from {}",
    "P19": "born in {}",
    "P20": "who died in {}",
    "P131": "in {}",
    "P17": "in {}",
    "P30": "in {}",
}
# A person's class is an occupation; "the human born in 1885" describes nobody.
CLASS_PIDS = ("P106", "P31")
_NOT_A_CLASS = ("Q5",)
# Facts that only say where (or whose citizen): "the river in France" may single out one item
# of a small graph, but few of the world; such a fact describes only beside another.
WHERE = frozenset({"P131", "P17", "P30", "P27"})
RENDER = (
    "P27",
    "P131",
    "P17",
    "P30",
    "P86",
    "P50",
    "P170",
    "P175",
    "P112",
    "P571",
    "P577",
    "P19",
    "P569",
    "P20",
    "P570",
)


@dataclass(frozen=True)
class Description:
    text: str  # "the physicist born in 1885"
    facts: tuple[tuple[str, str], ...]  # (property id, value) pairs it states, for audit
    names: tuple[str, ...]  # labels of the values it names (a question's bridge must not be one)


def _year(value_sql: str) -> str:
    """SQL rendering a time literal ('+1885-10-07T00:00:00Z') as its year ('1885', '753 BC')."""
    digits = f"ltrim(split_part(ltrim({value_sql}, '+-'), '-', 1), '0')"
    return f"CASE WHEN starts_with({value_sql}, '-') THEN {digits} || ' BC' ELSE {digits} END"


def _connect(ingest_dir: Path) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    for table in ("entities", "edges"):
        files = part_files(ingest_dir, table)
        if not files:
            raise FileNotFoundError(f"{ingest_dir} has no {table} part files")
        con.execute(f"CREATE VIEW {table} AS SELECT * FROM read_parquet({path_list(files)})")
    pids = ", ".join(f"'{p}'" for p in PHRASES)
    con.execute(
        f"""
        CREATE TEMP TABLE attr AS
        SELECT DISTINCT subject, pid,
               CASE WHEN value_type = 'time' THEN {_year("value")} ELSE object_qid END AS v
        FROM edges
        WHERE pid IN ({pids}) AND rank <> 'deprecated'
          AND (object_qid IS NOT NULL OR (value_type = 'time' AND time_precision >= 9))
        """
    )
    classes = ", ".join(f"'{p}'" for p in CLASS_PIDS)
    not_classes = ", ".join(f"'{q}'" for q in _NOT_A_CLASS)
    con.execute(
        f"""
        CREATE TEMP TABLE cls AS
        SELECT DISTINCT subject, object_qid AS c FROM edges
        WHERE pid IN ({classes}) AND rank <> 'deprecated' AND object_qid IS NOT NULL
          AND object_qid NOT IN ({not_classes})
        """
    )
    return con


# Every (class, one or two facts) of the asked items, with how many items of the graph match.
_MATCHES = """
WITH me_c AS (SELECT subject AS q, c FROM cls WHERE subject IN (SELECT unnest($1::VARCHAR[]))),
me_a AS (SELECT subject AS q, pid, v FROM attr WHERE subject IN (SELECT unnest($1::VARCHAR[]))),
cand AS (
    SELECT c.q, c.c, a.pid AS p1, a.v AS v1, NULL::VARCHAR AS p2, NULL::VARCHAR AS v2
    FROM me_c c JOIN me_a a ON a.q = c.q
    UNION ALL
    SELECT c.q, c.c, a1.pid, a1.v, a2.pid, a2.v
    FROM me_c c JOIN me_a a1 ON a1.q = c.q
    JOIN me_a a2 ON a2.q = c.q AND (a2.pid, a2.v) > (a1.pid, a1.v) AND a2.v <> a1.v
),
counted AS (
    SELECT k.q, k.c, k.p1, k.v1, k.p2, k.v2, count(DISTINCT x.subject) AS matches
    FROM cand k
    JOIN cls x ON x.c = k.c
    JOIN attr y1 ON y1.subject = x.subject AND y1.pid = k.p1 AND y1.v = k.v1
    LEFT JOIN attr y2 ON y2.subject = x.subject AND y2.pid = k.p2 AND y2.v = k.v2
    WHERE k.p2 IS NULL OR y2.subject IS NOT NULL
    GROUP BY ALL
)
SELECT k.q, cl.label AS class_label, k.p1, k.v1, l1.label AS label1, k.p2, k.v2,
       l2.label AS label2, k.matches
FROM counted k
JOIN entities cl ON cl.qid = k.c
LEFT JOIN entities l1 ON l1.qid = k.v1
LEFT JOIN entities l2 ON l2.qid = k.v2
WHERE cl.label IS NOT NULL
"""


def describe(ingest_dir: Path, qids: Iterable[str], limit: int = 6) -> dict[str, list[Description]]:
    """Unique descriptions of each item, one fact before two, in PHRASES order (at most
    `limit` each; an item the graph cannot single out gets none)."""
    qids = sorted(set(qids))
    if not qids:
        return {}
    con = _connect(Path(ingest_dir))
    try:
        rows = con.execute(_MATCHES, [qids]).fetchall()
    finally:
        con.close()
    order = {p: i for i, p in enumerate(PHRASES)}
    found: dict[str, list[tuple[tuple, Description]]] = {}
    for q, cls_label, p1, v1, l1, p2, v2, l2, matches in rows:
        if matches != 1:
            continue  # another item of the graph fits it too: ambiguous
        parts = [(p1, v1, l1)] + ([(p2, v2, l2)] if p2 else [])
        if any(lbl is None and not _is_year(v) for _, v, lbl in parts):
            continue  # an item value without a label cannot be written
        if all(p in WHERE for p, _, _ in parts) and len(parts) < 2:
            continue  # "the river in France": a place names few things in a whole graph
        phrases = [PHRASES[p].format(lbl or v) for p, v, lbl in sorted(parts, key=_rendered)]
        if len({ph.split()[0] for ph in phrases}) < len(phrases):
            continue  # "in Bavaria in Baden-Württemberg", "born in Ulm born in 1879"
        words = " ".join(phrases)
        desc = Description(
            f"the {cls_label} {words}",
            tuple((p, lbl or v) for p, v, lbl in parts),
            tuple(lbl for _, _, lbl in parts if lbl),
        )
        key = (len(parts), *(order[p] for p, _, _ in parts), desc.text)
        found.setdefault(q, []).append((key, desc))
    out = {}
    for q, ds in found.items():
        texts = list(dict.fromkeys(d.text for _, d in sorted(ds)))[:limit]
        by_text = {d.text: d for _, d in ds}
        out[q] = [by_text[t] for t in texts]
    return out


def _rendered(part: tuple) -> int:
    return RENDER.index(part[0])


def _is_year(v: str | None) -> bool:
    return v is not None and v.removesuffix(" BC").isdigit()


def pick(descriptions: Sequence[Description], avoid: Sequence[str], leaks) -> Description | None:
    """The first description that names none of `avoid` (the question's bridge entities and
    its answer): `leaks(text, forms)` says whether a text contains any of the forms."""
    return next((d for d in descriptions if not leaks(d.text, avoid)), None)
