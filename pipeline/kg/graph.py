"""The item graph behind path expansion: filtered candidate edges, labels and passage links.

Tables stay in DuckDB over the ingest's Parquet parts, so the graph of a full dump never has to
fit in Python objects: path expansion asks for the candidate edges of a whole frontier (all live
seeds of one hop) in one query.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pyarrow as pa

with warnings.catch_warnings():  # qwikidata's typedefs use a deprecated TypedDict at import
    warnings.simplefilter("ignore", DeprecationWarning)
    from qwikidata.datavalue import Time

from pipeline.core.contracts import conform
from pipeline.core.errors import BadInputError
from pipeline.core.parquet_sql import path_list
from pipeline.kg.dump import part_files
from pipeline.kg.entity_parse import GREGORIAN
from schemas.tables import EDGES, ENTITIES

# Datatypes never offered as a hop: identifiers, media, links and shapes carry no fact a
# question could be asked about (the block list adds item/string relations on top).
BLOCKED_DATATYPES = frozenset(
    {
        "external-id",
        "commonsMedia",
        "url",
        "geo-shape",
        "tabular-data",
        "musical-notation",
        "math",
        "globe-coordinate",
        "wikibase-property",
        "wikibase-lexeme",
        "wikibase-form",
        "wikibase-sense",
        "entity-schema",
    }
)
# Literal values a path may end in (answers of type Date or Number). Strings and monolingual
# text are left out: postal codes and official names restate a node rather than reach a new one.
LITERAL_TYPES = ("time", "quantity")
# Statements kept for answer typing: class membership and the cues of places / organizations.
TYPING_PIDS = ("P31", "P279", "P625", "P30", "P159", "P452", "P1454", "P112")
_PID_LINE = re.compile(r"^\s*(P[1-9]\d*)\b")


def read_relation_list(path: str | Path | None) -> frozenset[str]:
    """Property ids of a block/allow list file: one id per line, `#` starts a comment."""
    if path is None:
        return frozenset()
    path = Path(path)
    if not path.exists():
        raise BadInputError(f"relation list not found: {path}")
    out = set()
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        m = _PID_LINE.match(text)
        if not m:
            raise ValueError(f"{path}:{lineno}: expected a property id like P31, got {text!r}")
        out.add(m.group(1))
    return frozenset(out)


@dataclass(frozen=True)
class RelationFilter:
    """Which relations a path may use: not blocked (by id or datatype), and allowed if an
    allow list is given."""

    block: frozenset[str] = frozenset()
    allow: frozenset[str] | None = None
    blocked_datatypes: frozenset[str] = BLOCKED_DATATYPES

    @classmethod
    def from_files(cls, block: str | Path | None, allow: str | Path | None = None):
        return cls(read_relation_list(block), read_relation_list(allow) if allow else None)

    def allows(self, pid: str, datatype: str | None) -> bool:
        if pid in self.block or datatype in self.blocked_datatypes:
            return False
        return self.allow is None or pid in self.allow


@dataclass(frozen=True)
class Candidate:
    """One outgoing edge offered to the selector: relation and target (item or literal)."""

    subject: str
    pid: str
    relation: str
    target_id: str  # QID, or "<value_type>:<value>" for a literal
    target_label: str
    value_type: str
    qid: str | None
    linked: bool  # target has corpus passages
    sitelinks: int
    target_outdeg: int  # candidate item edges leaving the target

    @property
    def is_literal(self) -> bool:
        return self.qid is None


# ---- literal rendering -------------------------------------------------------------------

MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]
# Units most quantities use, for dumps (or enwiki-only subsets) that lack the unit's item.
COMMON_UNITS = {
    "Q712226": "square kilometre",
    "Q25343": "square metre",
    "Q828224": "kilometre",
    "Q11573": "metre",
    "Q174728": "centimetre",
    "Q11570": "kilogram",
    "Q7727": "minute",
    "Q11574": "second",
    "Q577": "year",
    "Q4917": "United States dollar",
    "Q4916": "euro",
    "Q25272": "pound sterling",
    "Q11579": "kelvin",
    "Q25267": "degree Celsius",
}


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def render_time(value: str, precision: int | None, calendar: str | None = GREGORIAN) -> str:
    """A Wikidata time as people write it: '14 March 1879', 'March 1879', '1870s', '44 BC'."""
    parsed = Time({"type": "time", "value": {"time": value, "precision": precision}})
    d = parsed.get_parsed_datetime_dict()
    if not d:
        return value
    year, month, day = d["year"], d["month"], d["day"]
    bc = year < 0
    y = abs(year)
    era = " BC" if bc else ""
    p = 9 if precision is None else precision
    if p >= 11 and month and day:
        text = f"{day} {MONTHS[month - 1]} {y}{era}"
    elif p >= 10 and month:
        text = f"{MONTHS[month - 1]} {y}{era}"
    elif p >= 9:
        text = f"{y}{era}"
    elif p == 8:
        text = f"{y // 10 * 10}s{era}"
    elif p == 7:
        text = f"{_ordinal((y - 1) // 100 + 1)} century{era}"
    elif p == 6:
        text = f"{_ordinal((y - 1) // 1000 + 1)} millennium{era}"
    else:
        text = f"{y} years{' ago' if bc else ''}"
    if calendar and calendar not in (GREGORIAN, "Q1985786") and p >= 10:
        text += f" ({calendar})"
    return text


def render_quantity(amount: str, unit_label: str | None) -> str:
    """'+8336817' with unit 'square kilometre' -> '8,336,817 square kilometre'."""
    text = amount.removeprefix("+")
    try:
        if "." not in text and "e" not in text.lower():
            text = f"{int(text):,}"
        else:
            whole, _, frac = text.partition(".")
            text = f"{int(whole):,}.{frac}" if frac and whole.lstrip("-").isdigit() else text
    except ValueError:
        pass
    return f"{text} {unit_label}" if unit_label else text


def render_literal(row: dict) -> str:
    vt, value = row["value_type"], row["value"] or ""
    if vt == "time":
        return render_time(value, row.get("time_precision"), row.get("time_calendar"))
    if vt == "quantity":
        unit = row.get("unit_label") or COMMON_UNITS.get(row.get("quantity_unit") or "")
        return render_quantity(value, unit)
    return value


def literal_id(row: dict) -> str:
    """A stable node id for a literal target (literals have no QID)."""
    extra = row.get("time_precision") if row["value_type"] == "time" else row.get("quantity_unit")
    return f"{row['value_type']}:{row['value']}" + (f"/{extra}" if extra is not None else "")


# ---- the graph -----------------------------------------------------------------------------


class KnowledgeGraph:
    """Filtered candidate edges, entity labels and passage links of one ingest directory."""

    def __init__(
        self,
        kg_dir: str | Path,
        passages: str | Path | None = None,
        relations: RelationFilter | None = None,
        enwiki_only: bool = True,
        database: str = ":memory:",
    ) -> None:
        self.kg_dir = Path(kg_dir)
        self.relations = relations or RelationFilter()
        self.con = duckdb.connect(database)
        self._load(passages, enwiki_only)

    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> KnowledgeGraph:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ---- building -------------------------------------------------------------------
    def _view(self, table: str, schema: pa.Schema) -> None:
        """A view over the ingest's part files: scanned when queried, never copied whole
        (the edges of a full dump do not fit in memory; their filtered subset does)."""
        files = part_files(self.kg_dir, table)
        if files:
            self.con.execute(
                f"CREATE VIEW {table} AS SELECT * FROM read_parquet({path_list(files)})"
            )
        else:
            self.con.register("_empty", pa.Table.from_pylist([], schema=schema))
            self.con.execute(f"CREATE TABLE {table} AS SELECT * FROM _empty")
            self.con.unregister("_empty")

    def _load(self, passages: str | Path | None, enwiki_only: bool) -> None:
        con = self.con
        self._view("entities", ENTITIES)
        self._view("edges", EDGES)
        if passages is not None:
            con.execute(
                "CREATE TABLE links AS SELECT title, list(id ORDER BY row) AS ids "
                f"FROM read_parquet('{Path(passages)}') GROUP BY title"
            )
        else:
            con.execute("CREATE TABLE links (title VARCHAR, ids VARCHAR[])")
        props = con.execute(
            "SELECT qid, label, datatype FROM entities WHERE kind = 'property'"
        ).fetchall()
        allowed = [
            {"pid": pid, "plabel": label}
            for pid, label, dt in props
            if label and self.relations.allows(pid, dt)
        ]
        con.register(
            "_props",
            pa.Table.from_pylist(
                allowed, schema=pa.schema([("pid", pa.string()), ("plabel", pa.string())])
            ),
        )
        con.execute("CREATE TABLE props AS SELECT * FROM _props")
        con.unregister("_props")
        site = "AND e.enwiki_title IS NOT NULL" if enwiki_only else ""
        con.execute(
            f"""
            CREATE TABLE nodes AS
            SELECT e.qid, e.label, e.enwiki_title, coalesce(e.sitelink_count, 0) AS sitelinks,
                   l.ids AS passage_ids
            FROM entities e LEFT JOIN links l ON e.enwiki_title = l.title
            WHERE e.kind = 'item' AND e.label IS NOT NULL {site}
            """
        )
        lits = ", ".join(f"'{x}'" for x in LITERAL_TYPES)
        con.execute(
            f"""
            CREATE TABLE cand AS
            SELECT e.subject, e.pid, p.plabel, e.object_qid, n.label AS olabel, e.value_type,
                   e.value, e.time_precision, e.time_calendar, e.quantity_unit,
                   u.label AS unit_label, coalesce(n.sitelinks, 0) AS sitelinks,
                   n.passage_ids IS NOT NULL AS linked
            FROM edges e
            JOIN props p ON e.pid = p.pid
            JOIN nodes s ON e.subject = s.qid
            LEFT JOIN nodes n ON e.object_qid = n.qid
            LEFT JOIN entities u ON e.quantity_unit = u.qid
            WHERE (e.value_type = 'wikibase-item' AND n.qid IS NOT NULL AND n.qid <> e.subject)
               OR (e.value_type IN ({lits}) AND e.object_qid IS NULL)
            """
        )
        con.execute(
            "CREATE TABLE outdeg AS SELECT subject, count(*) AS items FROM cand "
            "WHERE object_qid IS NOT NULL GROUP BY subject"
        )
        # The few statements that type an answer, kept apart from the (blocked) hop relations.
        pids = ", ".join(f"'{p}'" for p in TYPING_PIDS)
        con.execute(
            "CREATE TABLE typing AS SELECT subject, pid, object_qid FROM edges "
            f"WHERE pid IN ({pids})"
        )

    # ---- queries --------------------------------------------------------------------
    def candidates(self, subjects: Iterable[str]) -> dict[str, list[Candidate]]:
        """Filtered outgoing edges of many nodes at once (one query per expansion step)."""
        subjects = sorted(set(subjects))
        out: dict[str, list[Candidate]] = {s: [] for s in subjects}
        if not subjects:
            return out
        rows = (
            self.con.sql(
                """
                SELECT c.*, coalesce(d.items, 0) AS target_outdeg
                FROM cand c LEFT JOIN outdeg d ON c.object_qid = d.subject
                WHERE c.subject IN (SELECT unnest($1::VARCHAR[]))
                ORDER BY c.subject, c.pid, c.object_qid, c.value
                """,
                params=[subjects],
            )
            .to_arrow_table()
            .to_pylist()
        )
        for r in rows:
            is_item = r["object_qid"] is not None
            out[r["subject"]].append(
                Candidate(
                    subject=r["subject"],
                    pid=r["pid"],
                    relation=r["plabel"],
                    target_id=r["object_qid"] if is_item else literal_id(r),
                    target_label=r["olabel"] if is_item else render_literal(r),
                    value_type=r["value_type"],
                    qid=r["object_qid"],
                    linked=bool(r["linked"]),
                    sitelinks=int(r["sitelinks"]),
                    target_outdeg=int(r["target_outdeg"]),
                )
            )
        return out

    def nodes(self, qids: Iterable[str]) -> dict[str, dict]:
        """label, enwiki_title and passage_ids of items."""
        qids = sorted(set(qids))
        if not qids:
            return {}
        rows = self.con.execute(
            "SELECT qid, label, enwiki_title, passage_ids FROM nodes "
            "WHERE qid IN (SELECT unnest($1::VARCHAR[]))",
            [qids],
        ).fetchall()
        return {
            q: {"label": lab, "enwiki_title": t, "passage_ids": ids or []}
            for q, lab, t, ids in rows
        }

    def seed_pool(self, require_passages: bool = True) -> list[str]:
        """Items a path can start from: with candidate edges (and corpus passages)."""
        linked = "AND n.passage_ids IS NOT NULL" if require_passages else ""
        rows = self.con.execute(
            f"""
            SELECT n.qid FROM nodes n JOIN outdeg d ON n.qid = d.subject
            WHERE d.items > 0 {linked}
            ORDER BY CAST(substr(n.qid, 2) AS BIGINT)
            """
        ).fetchall()
        return [r[0] for r in rows]

    def classes(self, qids: Iterable[str], depth: int = 3) -> dict[str, set[str]]:
        """P31 classes of items plus their P279 superclasses up to `depth` levels."""
        qids = sorted(set(qids))
        if not qids:
            return {}
        rows = self.con.execute(
            """
            WITH RECURSIVE cls(q, c, d) AS (
                SELECT subject, object_qid, 1 FROM typing
                WHERE pid = 'P31' AND object_qid IS NOT NULL
                  AND subject IN (SELECT unnest($1::VARCHAR[]))
                UNION
                SELECT cls.q, e.object_qid, cls.d + 1 FROM cls
                JOIN typing e ON e.subject = cls.c AND e.pid = 'P279'
                WHERE cls.d < $2 AND e.object_qid IS NOT NULL
            )
            SELECT q, list(DISTINCT c) FROM cls GROUP BY q
            """,
            [qids, depth],
        ).fetchall()
        out = {q: set() for q in qids}
        out.update({q: set(cs) for q, cs in rows})
        return out

    def properties_of(self, qids: Iterable[str], pids: Sequence[str]) -> dict[str, set[str]]:
        """Which of `pids` (among TYPING_PIDS) each item has a truthy statement for."""
        qids = sorted(set(qids))
        unknown = set(pids) - set(TYPING_PIDS)
        if unknown:
            raise ValueError(f"not kept for typing: {sorted(unknown)} (see TYPING_PIDS)")
        rows = self.con.execute(
            "SELECT subject, list(DISTINCT pid) FROM typing "
            "WHERE subject IN (SELECT unnest($1::VARCHAR[])) "
            "AND pid IN (SELECT unnest($2::VARCHAR[])) GROUP BY subject",
            [qids, list(pids)],
        ).fetchall()
        out = {q: set() for q in qids}
        out.update({q: set(ps) for q, ps in rows})
        return out

    def linked_entities(self) -> pa.Table:
        """The entities table with passage_ids = corpus passages whose title is the enwiki
        title (the ENTITIES contract)."""
        tbl = self.con.sql(
            "SELECT e.* REPLACE (l.ids AS passage_ids) FROM entities e "
            "LEFT JOIN links l ON e.enwiki_title = l.title ORDER BY e.kind, e.qid"
        ).to_arrow_table()
        return conform("entities", tbl.cast(ENTITIES))

    def counts(self) -> dict[str, int]:
        q = {
            "entities": "SELECT count(*) FROM entities",
            "edges": "SELECT count(*) FROM edges",
            "nodes": "SELECT count(*) FROM nodes",
            "linked_nodes": "SELECT count(*) FROM nodes WHERE passage_ids IS NOT NULL",
            "allowed_relations": "SELECT count(*) FROM props",
            "candidate_edges": "SELECT count(*) FROM cand",
        }
        return {k: int(self.con.execute(sql).fetchall()[0][0]) for k, sql in q.items()}


__all__ = [
    "BLOCKED_DATATYPES",
    "Candidate",
    "KnowledgeGraph",
    "RelationFilter",
    "read_relation_list",
    "render_literal",
    "render_quantity",
    "render_time",
]
