"""Parsing one Wikidata entity (one dump line) into an entity row and its truthy edges.

Claims are parsed by hand, defensively: real dumps contain value snaks without `datatype`
(qwikidata's snak class raises on those), datavalue types a parser has never seen, somevalue /
novalue snaks, deprecated ranks, redirects and lexemes. None of these is an error; only an
object that is not an entity at all (wrong field types) raises `EntityError`, which the dump
reader turns into a reject row.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

ENTITY_URI = "http://www.wikidata.org/entity/"
GREGORIAN = "Q1985727"
# English first; "mul" (multilingual default labels, used for names since 2024) as fallback.
LABEL_LANGS = ("en", "mul")
_ID_RE = {"item": re.compile(r"Q[1-9]\d*"), "property": re.compile(r"P[1-9]\d*")}
_PID_RE = re.compile(r"P[1-9]\d*")
_ID_PREFIX = {"item": "Q", "property": "P", "lexeme": "L"}
_RANKS = ("preferred", "normal", "deprecated")


class EntityError(ValueError):
    """One line that is not a usable entity (becomes a reject row)."""


def _json_type(value: object) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean"}.get(
        type(value), "null" if value is None else "number"
    )


def _term(terms: dict, langs: tuple[str, ...] = LABEL_LANGS) -> str | None:
    for lang in langs:
        t = terms.get(lang)
        if isinstance(t, dict) and isinstance(t.get("value"), str):
            return t["value"]
    return None


def _aliases(aliases: dict) -> list[str]:
    out: list[str] = []
    for lang in LABEL_LANGS:
        values = aliases.get(lang)
        if isinstance(values, list):
            out.extend(
                a["value"]
                for a in values
                if isinstance(a, dict) and isinstance(a.get("value"), str) and a["value"] not in out
            )
    return out


def _entity_id(value: dict) -> tuple[str, str] | None:
    """(entity type, id) of a wikibase-entityid value; old dumps carry only numeric-id."""
    etype = value.get("entity-type")
    eid = value.get("id")
    if not isinstance(eid, str):
        num = value.get("numeric-id")
        if not isinstance(num, int) or isinstance(num, bool) or etype not in _ID_PREFIX:
            return None
        eid = f"{_ID_PREFIX[etype]}{num}"
    if not isinstance(etype, str):
        etype = {"Q": "item", "P": "property", "L": "lexeme"}.get(eid[:1])
        if etype is None:
            return None
    return etype, eid


def _strip_uri(value: str) -> str:
    return value[len(ENTITY_URI) :] if value.startswith(ENTITY_URI) else value


def decode_datavalue(dv: object) -> dict[str, Any]:
    """Edge fields of one datavalue; raises ValueError(category) when it cannot be used."""
    if not isinstance(dv, dict):
        raise ValueError("value snak without datavalue")
    vtype, v = dv.get("type"), dv.get("value")
    row: dict[str, Any] = {
        "object_qid": None,
        "value_type": vtype,
        "value": None,
        "time_precision": None,
        "time_calendar": None,
        "quantity_unit": None,
        "language": None,
    }
    if vtype == "wikibase-entityid":
        ident = _entity_id(v) if isinstance(v, dict) else None
        if ident is None:
            raise ValueError("malformed datavalue")
        etype, eid = ident
        if etype in _ID_RE and not _ID_RE[etype].fullmatch(eid):
            # "", "Q-5", free text: an edge to it would join to nothing (or to the wrong node).
            raise ValueError(f"invalid {etype} id as value")
        row["value_type"] = f"wikibase-{etype}"
        row["value"] = eid
        if etype == "item":
            row["object_qid"] = eid
    elif vtype == "string":
        if not isinstance(v, str):
            raise ValueError("malformed datavalue")
        row["value"] = v
    elif vtype == "monolingualtext":
        if not isinstance(v, dict) or not isinstance(v.get("text"), str):
            raise ValueError("malformed datavalue")
        row["value"] = v["text"]
        lang = v.get("language")
        row["language"] = lang if isinstance(lang, str) else None
    elif vtype == "time":
        if not isinstance(v, dict) or not isinstance(v.get("time"), str):
            raise ValueError("malformed datavalue")
        prec = v.get("precision")
        if not isinstance(prec, int) or isinstance(prec, bool) or not 0 <= prec <= 14:
            raise ValueError("malformed datavalue")
        cal = v.get("calendarmodel")
        row["value"] = v["time"]
        row["time_precision"] = prec
        row["time_calendar"] = _strip_uri(cal) if isinstance(cal, str) else GREGORIAN
    elif vtype == "quantity":
        amount = v.get("amount") if isinstance(v, dict) else None
        if isinstance(amount, int | float) and not isinstance(amount, bool):
            amount = repr(amount)
        if not isinstance(amount, str):
            raise ValueError("malformed datavalue")
        unit = v.get("unit")
        row["value"] = amount.removeprefix("+")
        row["quantity_unit"] = _strip_uri(unit) if isinstance(unit, str) and unit != "1" else None
    elif vtype == "globecoordinate":
        lat = v.get("latitude") if isinstance(v, dict) else None
        lon = v.get("longitude") if isinstance(v, dict) else None
        if not all(isinstance(x, int | float) and not isinstance(x, bool) for x in (lat, lon)):
            raise ValueError("malformed datavalue")
        row["value"] = f"{lat},{lon}"
    else:
        raise ValueError("unknown datavalue type")
    return row


def truthy(statements: list[dict]) -> tuple[list[dict], int]:
    """Wikidata's truthy statements of one property: the preferred ones if any, else all
    normal ones; deprecated never. Returns (truthy statements, number left out by rank)."""
    preferred = [s for s in statements if s.get("rank", "normal") == "preferred"]
    best = preferred or [s for s in statements if s.get("rank", "normal") == "normal"]
    return best, len(statements) - len(best)


def parse_entity(
    obj: object, issues: Counter
) -> tuple[dict[str, Any] | None, list[dict[str, Any]], str | None]:
    """(entity row, truthy edge rows, skip reason) of one decoded dump line.

    Raises EntityError when the line is not a usable entity. Statement-level problems
    (unknown datavalue types, malformed snaks) skip the statement and are counted in `issues`.
    """
    if not isinstance(obj, dict):
        raise EntityError(f"expected a JSON object, got {_json_type(obj)}")
    if "redirect" in obj or "redirects" in obj:
        return None, [], "redirect"
    etype = obj.get("type")
    if etype is None:
        raise EntityError("missing field 'type'")
    if not isinstance(etype, str):
        raise EntityError(f"field 'type' must be a string, got {_json_type(etype)}")
    if etype not in _ID_RE:
        return None, [], etype  # lexemes, mediainfo, ...: not part of the item graph
    eid = obj.get("id")
    if not isinstance(eid, str) or not _ID_RE[etype].fullmatch(eid):
        raise EntityError(f"invalid {etype} id {eid!r}")
    parts = {}
    for key in ("labels", "descriptions", "aliases", "sitelinks", "claims"):
        value = obj.get(key)
        if value is None:
            value = {}
        elif isinstance(value, list) and not value:
            # PHP serializes an empty map as []; real dumps carry it (e.g. "aliases": []).
            issues[f"empty {key} as []"] += 1
            value = {}
        if not isinstance(value, dict):
            raise EntityError(f"field {key!r} is {_json_type(value)}, expected an object")
        parts[key] = value
    sitelinks = parts["sitelinks"]
    enwiki = sitelinks.get("enwiki")
    enwiki_title = enwiki.get("title") if isinstance(enwiki, dict) else None
    datatype = obj.get("datatype") if etype == "property" else None
    entity = {
        "qid": eid,
        "kind": etype,
        "label": _term(parts["labels"]),
        "description": _term(parts["descriptions"]),
        "aliases": _aliases(parts["aliases"]),
        "enwiki_title": enwiki_title if isinstance(enwiki_title, str) else None,
        "sitelink_count": len(sitelinks) if etype == "item" else None,
        "datatype": datatype if isinstance(datatype, str) else None,
        "passage_ids": None,
    }
    edges: list[dict[str, Any]] = []
    for pid, statements in parts["claims"].items():
        if not _PID_RE.fullmatch(pid) or not isinstance(statements, list):
            issues["malformed statement"] += 1
            continue
        valid = []
        for st in statements:
            if (
                isinstance(st, dict)
                and isinstance(st.get("mainsnak"), dict)
                and st.get("rank", "normal") in _RANKS
            ):
                valid.append(st)
            else:
                issues["malformed statement"] += 1
        best, dropped = truthy(valid)
        if dropped:
            issues["not truthy (rank)"] += dropped
        for st in best:
            snak = st["mainsnak"]
            snaktype = snak.get("snaktype")
            if snaktype != "value":
                issues[snaktype if snaktype in ("somevalue", "novalue") else "bad snaktype"] += 1
                continue
            try:
                row = decode_datavalue(snak.get("datavalue"))
            except ValueError as exc:
                issues[str(exc)] += 1
                continue
            row["subject"] = eid
            row["pid"] = pid
            row["rank"] = st.get("rank", "normal")
            edges.append(row)
    return entity, edges, None


__all__ = ["GREGORIAN", "EntityError", "decode_datavalue", "parse_entity", "truthy"]
