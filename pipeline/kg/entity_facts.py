"""What the graph says of the entities a run's passages are about, for two-passage tasks.

A passage slot becomes a two-passage question where the graph links its article's entity to
another article (a bridge: Einstein -> place of birth -> Ulm, then a fact of Ulm's own
article) or gives it a value another entity of its class has too (a comparison: who was born
first). This module reads those facts once per run, in the driver, for the plan's passages
only: the entity each passage is about, its single-valued facts, and for each comparable
value the other linked entities of its class that have one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from pipeline.core.parquet_sql import path_list
from pipeline.kg.dump import part_files
from pipeline.kg.graph import literal_id, render_literal
from pipeline.kg.valency import MANY_VALUED

# Values two entities can be compared by, and which way the answer goes: the earlier date
# ("first") or the larger amount.
COMPARABLE = {
    "P569": "earlier",  # date of birth
    "P570": "earlier",  # date of death
    "P571": "earlier",  # inception
    "P577": "earlier",  # publication date
    "P1082": "larger",  # population
    "P2043": "larger",  # length
    "P2046": "larger",  # area
    "P2048": "larger",  # height
}


@dataclass(frozen=True)
class Fact:
    pid: str
    relation: str  # the property's label
    node: dict  # the value as a KG path node: {"id": qid or literal id, "label": ...}
    sort_key: float | None = None  # comparable literals: the value as a number (days, amount)
    passage_ids: tuple[str, ...] = ()  # an item value's own article


@dataclass(frozen=True)
class Entity:
    qid: str
    label: str
    aliases: tuple[str, ...]
    classes: frozenset[str]
    passage_ids: tuple[str, ...]
    facts: tuple[Fact, ...] = ()


@dataclass
class EntityFacts:
    """The plan's passages' entities and what a two-passage task may draw on (picklable: it
    travels to every worker with the shard's context)."""

    by_passage: dict[str, str] = field(default_factory=dict)  # passage id -> qid
    entities: dict[str, Entity] = field(default_factory=dict)  # qid -> entity (and partners)
    partners: dict[tuple[str, str], list[str]] = field(default_factory=dict)  # (qid, pid) -> qids

    def about(self, passage_id: str) -> Entity | None:
        q = self.by_passage.get(passage_id)
        return self.entities.get(q) if q else None


_EDGES = """
SELECT e.subject, e.pid, p.label AS relation, e.object_qid, o.label AS olabel,
       o.passage_ids AS opassages, e.value_type, e.value, e.time_precision, e.time_calendar,
       e.quantity_unit, u.label AS unit_label, e.rank
FROM edges e
JOIN linked p ON p.qid = e.pid
LEFT JOIN linked o ON o.qid = e.object_qid
LEFT JOIN linked u ON u.qid = e.quantity_unit
WHERE e.subject IN (SELECT unnest($1::VARCHAR[])) AND e.rank <> 'deprecated'
  AND (e.pid IN (SELECT unnest($2::VARCHAR[])) OR e.pid IN ('P31', 'P106'))
"""


def _numeric(row: dict) -> float | None:
    """A comparable literal as a number: a time as (signed) year*10^4 + month*100 + day."""
    value = row["value"] or ""
    if row["value_type"] == "time":
        sign = -1 if value.startswith("-") else 1
        y, m, d = [*value.lstrip("+-").split("T")[0].split("-"), "0", "0"][:3]
        try:
            return sign * int(y) * 10_000 + int(m) * 100 + int(d)
        except ValueError:
            return None
    if row["value_type"] == "quantity":
        try:
            return float(value)
        except ValueError:
            return None
    return None


def _fact(row: dict) -> Fact | None:
    if row["object_qid"]:
        if not row["olabel"]:
            return None
        node = {"id": row["object_qid"], "label": row["olabel"]}
        return Fact(row["pid"], row["relation"], node, None, tuple(row["opassages"] or ()))
    if row["value_type"] not in ("time", "quantity"):
        return None
    node = {"id": literal_id(row), "label": render_literal(row)}
    return Fact(row["pid"], row["relation"], node, _numeric(row))


def entity_facts(
    ingest_dir: Path,
    linked_entities: Path,
    passage_ids: Iterable[str],
    properties: Iterable[str],
    partners: int = 12,
) -> EntityFacts:
    """The entities whose articles hold `passage_ids`, their facts by the single-valued
    `properties` (plus the comparable ones), the entities those facts point to, and up to
    `partners` other linked entities of the same class per comparable value."""
    pids = sorted(set(properties) - MANY_VALUED | set(COMPARABLE))
    con = duckdb.connect()
    try:
        files = part_files(ingest_dir, "edges")
        con.execute(f"CREATE VIEW edges AS SELECT * FROM read_parquet({path_list(files)})")
        con.execute(f"CREATE VIEW linked AS SELECT * FROM read_parquet('{linked_entities}')")
        wanted = sorted(set(passage_ids))
        subjects = con.execute(
            "SELECT qid, p FROM (SELECT qid, unnest(passage_ids) AS p FROM linked "
            "WHERE kind = 'item' AND passage_ids IS NOT NULL) "
            "WHERE p IN (SELECT unnest($1::VARCHAR[]))",
            [wanted],
        ).fetchall()
        out = EntityFacts(by_passage={p: q for q, p in subjects})
        firsts = sorted(set(out.by_passage.values()))
        rows = _rows(con, firsts, pids)
        # partners: linked entities sharing a class with a source and holding a comparable value
        comparable = sorted(COMPARABLE)
        cand = con.execute(
            """
            WITH src AS (
                SELECT DISTINCT e.subject AS q, e.object_qid AS c FROM edges e
                WHERE e.pid IN ('P31', 'P106') AND e.subject IN (SELECT unnest($1::VARCHAR[]))
            )
            SELECT DISTINCT src.q, v.pid, x.subject
            FROM src
            JOIN edges x ON x.object_qid = src.c AND x.pid IN ('P31', 'P106')
            JOIN edges v ON v.subject = x.subject AND v.pid IN (SELECT unnest($2::VARCHAR[]))
                AND v.rank <> 'deprecated'
            JOIN edges own ON own.subject = src.q AND own.pid = v.pid
            JOIN linked l ON l.qid = x.subject AND l.passage_ids IS NOT NULL
            WHERE x.subject <> src.q
            ORDER BY src.q, v.pid, hash(src.q || x.subject)
            """,
            [firsts, comparable],
        ).fetchall()
        for q, pid, other in cand:
            group = out.partners.setdefault((q, pid), [])
            if len(group) < partners:
                group.append(other)
        seconds = sorted({o for group in out.partners.values() for o in group} - set(firsts))
        rows += _rows(con, seconds, pids)
        meta = con.execute(
            "SELECT qid, label, aliases, passage_ids FROM linked "
            "WHERE qid IN (SELECT unnest($1::VARCHAR[]))",
            [firsts + seconds],
        ).fetchall()
    finally:
        con.close()
    out.entities = _entities(meta, rows)
    return out


def _rows(con: duckdb.DuckDBPyConnection, qids: list[str], pids: list[str]) -> list[dict]:
    if not qids:
        return []
    return con.sql(_EDGES, params=[qids, pids]).to_arrow_table().to_pylist()


def _entities(meta: list[tuple], rows: list[dict]) -> dict[str, Entity]:
    """Entities with one value per property: the truthy values (preferred if any, else
    normal), and none where those disagree (a "single-valued" property with two values asks
    about no single thing)."""
    classes: dict[str, set[str]] = {}
    grouped: dict[tuple[str, str], list[dict]] = {}
    for r in rows:
        if r["pid"] in ("P31", "P106"):
            if r["object_qid"]:
                classes.setdefault(r["subject"], set()).add(r["object_qid"])
            continue
        grouped.setdefault((r["subject"], r["pid"]), []).append(r)
    facts: dict[str, list[Fact]] = {}
    for (subject, _), group in sorted(grouped.items()):
        best = [r for r in group if r["rank"] == "preferred"] or group
        found = {f.node["id"]: f for r in best if (f := _fact(r)) is not None}
        if len(found) == 1:
            facts.setdefault(subject, []).extend(found.values())
    out = {}
    for qid, label, aliases, passages in meta:
        if label:
            out[qid] = Entity(
                qid,
                label,
                tuple(aliases or ()),
                frozenset(classes.get(qid, ())),
                tuple(passages or ()),
                tuple(facts.get(qid, ())),
            )
    return out


def facts_by_pid(entity: Entity) -> Mapping[str, Fact]:
    return {f.pid: f for f in entity.facts}
