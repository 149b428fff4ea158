"""Dump reader on real Wikidata JSON: labels, sitelinks, truthy edges, bad lines, parallelism."""

from __future__ import annotations

import bz2
import gzip
import shutil
from collections import Counter
from pathlib import Path

import orjson
import pyarrow as pa
import pytest
from qwikidata.entity import WikidataItem

from pipeline.core.contracts import read_shard
from pipeline.kg.dump import (
    DumpError,
    ingest_dump,
    part_files,
)
from pipeline.kg.entity_parse import parse_entity
from pipeline.kg.graph import KnowledgeGraph, RelationFilter, read_relation_list
from pipeline.retrieval.corpus import load_corpus

ROOT = Path(__file__).resolve().parent.parent
SAMPLE_DUMP = ROOT / "data" / "sample" / "wikidata_sample.json"
SAMPLE_CORPUS = ROOT / "data" / "sample" / "corpus.jsonl"
BLOCK = ROOT / "data" / "relations_block.txt"


def read_table(kg_dir: Path, table: str) -> pa.Table:
    """All part files of one table, each checked against its contract."""
    parts = [read_shard(p, table) for p in part_files(kg_dir, table)]
    return pa.concat_tables(parts) if parts else pa.table({})


def raw_entities(path: Path) -> list[dict]:
    """Entities of a dump file, decoded independently of the reader under test."""
    out = []
    for line in path.read_bytes().splitlines():
        line = line.strip().rstrip(b",")
        if line and line not in (b"[", b"]"):
            out.append(orjson.loads(line))
    return out


@pytest.fixture(scope="module")
def real_kg(realdata, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("real") / "kg"
    ingest_dump(realdata / "wikidata_real_entities.json", out)
    return out


def test_real_entities_labels_sitelinks_and_kinds(real_kg, realdata):
    ents = {r["qid"]: r for r in read_table(real_kg, "entities").to_pylist()}
    raw = {e["id"]: e for e in raw_entities(realdata / "wikidata_real_entities.json")}
    assert set(ents) == set(raw)  # 6 items + 2 properties, all with enwiki or properties
    beatles = ents["Q1299"]
    assert beatles["kind"] == "item"
    assert beatles["label"] == "The Beatles"
    assert beatles["enwiki_title"] == "The Beatles"
    assert beatles["sitelink_count"] == 178 == len(raw["Q1299"]["sitelinks"])
    assert ents["Q20145"]["enwiki_title"] == "IU (entertainer)"
    assert ents["Q8646"]["label"] == "Hong Kong"
    # Shin Jung-hyeon's aliases are serialized as [] (PHP's empty map): read as no aliases.
    assert raw["Q494290"]["aliases"] == []
    assert ents["Q494290"]["aliases"] == []
    p = ents["P2003"]
    assert (p["kind"], p["label"], p["datatype"]) == (
        "property",
        "Instagram username",
        "external-id",
    )
    assert p["enwiki_title"] is None and p["sitelink_count"] is None
    for qid, e in raw.items():
        en = e["labels"].get("en", {}).get("value")
        assert ents[qid]["label"] == en


def test_real_entities_truthy_edge_counts_match_qwikidata(real_kg, realdata):
    edges = read_table(real_kg, "edges").to_pylist()
    per_subject = Counter(e["subject"] for e in edges)
    for e in raw_entities(realdata / "wikidata_real_entities.json"):
        if e["type"] != "item":
            continue
        if e.get("aliases") == []:
            e["aliases"] = {}  # qwikidata itself cannot read the PHP empty-map form
        truthy = WikidataItem(e).get_truthy_claim_groups()
        expected = sum(1 for g in truthy.values() for c in g if c.mainsnak.snaktype == "value")
        assert per_subject[e["id"]] == expected, e["id"]
    # Hard facts read off the file: The Beatles have 77 truthy value statements (79 in all;
    # P434 and P1728 each have a preferred one that hides a normal one).
    assert per_subject["Q1299"] == 77
    # Hong Kong's population: 13 statements, one preferred -> exactly that value is truthy.
    pop = [e for e in edges if e["subject"] == "Q8646" and e["pid"] == "P1082"]
    assert [(e["value"], e["rank"], e["value_type"]) for e in pop] == [
        ("7409800", "preferred", "quantity")
    ]
    # Its capital (P36) is a novalue snak: no edge. Deprecated P242 values are dropped.
    assert not [e for e in edges if e["subject"] == "Q8646" and e["pid"] == "P36"]
    assert len([e for e in edges if e["subject"] == "Q8646" and e["pid"] == "P242"]) == 1
    inception = [e for e in edges if e["subject"] == "Q1299" and e["pid"] == "P571"]
    assert [(e["value"], e["time_precision"], e["time_calendar"]) for e in inception] == [
        ("+1960-00-00T00:00:00Z", 9, "Q1985727")
    ]
    label = [e for e in edges if e["subject"] == "Q1299" and e["pid"] == "P31"]
    assert [(e["object_qid"], e["value_type"]) for e in label] == [("Q5741069", "wikibase-item")]


def test_mock_dump_with_bugs_ingests_and_keeps_its_quirky_lines(realdata, tmp_path):
    """The 'bugs' are empty maps serialized as [] (labels of Q8, claims of P53): the same
    PHP quirk real entities carry, so they are read as empty objects, counted, and the two
    lines are listed in rejects as repaired (entity kept, not charged to the error budget)."""
    rep = ingest_dump(realdata / "wikidata_mock_dump_with_bugs.json", tmp_path, enwiki_only=False)
    assert (rep.lines, rep.items, rep.properties, rep.rejects) == (101, 55, 46, 0)
    assert rep.issues == {"empty labels as []": 1, "empty claims as []": 1}
    listed = sorted(
        (r["source_line"], r["record_key"], r["reason"])
        for r in read_table(tmp_path, "rejects").to_pylist()
    )
    assert listed == [
        (3, "Q8", "repaired, entity kept: empty labels as []"),
        (19, "P53", "repaired, entity kept: empty claims as []"),
    ]
    ents = {r["qid"]: r for r in read_table(tmp_path, "entities").to_pylist()}
    assert ents["Q8"]["label"] is None and ents["P53"]["kind"] == "property"
    edges = read_table(tmp_path, "edges")
    assert "P53" not in edges["subject"].to_pylist()
    # Old-format entity values (numeric-id only) still become item edges.
    q1 = [e for e in edges.to_pylist() if e["subject"] == "Q1" and e["pid"] == "P31"]
    assert q1[0]["object_qid"] == "Q1454986"
    # enwiki_only (the default) keeps the properties but none of these label-less items.
    only = ingest_dump(realdata / "wikidata_mock_dump_with_bugs.json", tmp_path / "enwiki")
    assert (only.items, only.properties, only.not_enwiki) == (0, 46, 55)


def _broken_dump(realdata: Path, tmp_path: Path) -> Path:
    """The bugs dump plus lines that are truly not entities, and ones that are not items."""
    lines = (realdata / "wikidata_mock_dump_with_bugs.json").read_bytes().splitlines()
    assert lines[-1] == b"]"
    extra = [
        b'{"type":"item","id":"Q900001","labels":{"en":{"language":"en","value":"cut',
        b'["not", "an", "entity"]',
        b'{"type":"item","id":"X12","claims":{}}',
        b'{"type":"item","id":"Q900002","labels":["en"]}',
        b'{"id":"Q900003","claims":{}}',
        b'{"type":"lexeme","id":"L1","lemmas":{}}',
        b'{"type":"item","id":"Q900004","redirects":{"from":"Q900004","to":"Q1"}}',
    ]
    body = lines[:-1]
    body[-1] = body[-1].rstrip(b",") + b","
    out = tmp_path / "broken.json"
    out.write_bytes(b"\n".join(body + [x + b"," for x in extra[:-1]] + [extra[-1], b"]"]) + b"\n")
    return out


def test_bad_lines_go_to_rejects_with_line_and_reason(realdata, tmp_path):
    dump = _broken_dump(realdata, tmp_path)
    rep = ingest_dump(dump, tmp_path / "kg", enwiki_only=False, run_id="kg-test")
    assert rep.rejects == 5
    assert rep.skipped == {"lexeme": 1, "redirect": 1}
    rejects = read_table(tmp_path / "kg", "rejects").to_pylist()
    by_line = {r["source_line"]: r for r in rejects}
    # "[" is line 1, 101 entities follow; lines 3 and 19 are the repaired [] maps (kept)
    assert sorted(by_line) == [3, 19, 103, 104, 105, 106, 107]
    assert by_line[3]["reason"].startswith("repaired, entity kept")
    assert by_line[103]["reason"].startswith("not valid JSON")
    assert by_line[104]["reason"] == "expected a JSON object, got array"
    assert by_line[105]["reason"] == "invalid item id 'X12'"
    assert by_line[106]["reason"] == "field 'labels' is array, expected an object"
    assert by_line[106]["record_key"] == "Q900002"
    assert by_line[107]["reason"] == "missing field 'type'"
    assert all(r["stage"] == "kg" and r["run_id"] == "kg-test" for r in rejects)
    assert all(r["source_file"] == str(dump) for r in rejects)
    assert by_line[104]["raw"] == '["not", "an", "entity"],'


def test_error_budget_aborts_naming_the_file(realdata, tmp_path):
    dump = _broken_dump(realdata, tmp_path)
    with pytest.raises(DumpError) as err:
        ingest_dump(dump, tmp_path / "kg", enwiki_only=False, error_budget=0.02)
    msg = str(err.value)
    assert str(dump) in msg and "error budget of 2.00%" in msg
    assert "first bad line 103: not valid JSON" in msg
    assert not (tmp_path / "kg" / ".complete").exists()


def test_claims_are_parsed_defensively_with_truthy_semantics():
    """Snaks without datatype, unknown value types, somevalue/novalue and ranks."""

    def st(rank, snak):
        return {"rank": rank, "mainsnak": snak, "type": "statement"}

    def item(qid):
        return {
            "snaktype": "value",
            "property": "P1",
            "datavalue": {"type": "wikibase-entityid", "value": {"entity-type": "item", "id": qid}},
        }  # no "datatype": recent dumps omit it in places

    entity = {
        "type": "item",
        "id": "Q1",
        "labels": {"mul": {"language": "mul", "value": "Default name"}},
        "sitelinks": {"enwiki": {"site": "enwiki", "title": "One"}},
        "claims": {
            "P1": [
                st("normal", item("Q2")),
                st("preferred", item("Q3")),
                st("deprecated", item("Q4")),
            ],
            "P2": [st("normal", item("Q5")), st("deprecated", item("Q6"))],
            "P3": [st("normal", {"snaktype": "somevalue", "property": "P3"})],
            "P4": [st("normal", {"snaktype": "novalue", "property": "P4"})],
            "P5": [
                st("normal", {"snaktype": "value", "datavalue": {"type": "bogus", "value": 1}}),
                st("normal", {"snaktype": "value", "datavalue": {"type": "string", "value": "x"}}),
            ],
            "P6": ["not a statement"],
        },
    }
    issues: Counter = Counter()
    ent, edges, skip = parse_entity(entity, issues)
    assert skip is None and ent["label"] == "Default name" and ent["enwiki_title"] == "One"
    got = sorted((e["pid"], e["value"], e["rank"]) for e in edges)
    assert got == [("P1", "Q3", "preferred"), ("P2", "Q5", "normal"), ("P5", "x", "normal")]
    assert issues == {
        "not truthy (rank)": 3,
        "somevalue": 1,
        "novalue": 1,
        "unknown datavalue type": 1,
        "malformed statement": 1,
    }
    # qwikidata's snak class refuses the datatype-less snak that parse_entity took above.
    with pytest.raises(ValueError):
        WikidataItem(entity).get_truthy_claim_groups()


def test_compressed_and_parallel_ingest_give_the_same_tables(tmp_path):
    plain = ingest_dump(SAMPLE_DUMP, tmp_path / "plain")
    gz = tmp_path / "sample.json.gz"
    gz.write_bytes(gzip.compress(SAMPLE_DUMP.read_bytes()))
    bz = tmp_path / "sample.json.bz2"
    bz.write_bytes(bz2.compress(SAMPLE_DUMP.read_bytes()))
    ref_e = read_table(tmp_path / "plain", "entities")
    ref_g = read_table(tmp_path / "plain", "edges")
    for name, src, workers in (("gz", gz, 1), ("bz2", bz, 1), ("par", SAMPLE_DUMP, 2)):
        rep = ingest_dump(src, tmp_path / name, workers=workers, chunk_lines=60)
        assert (rep.items, rep.properties, rep.edges) == (
            plain.items,
            plain.properties,
            plain.edges,
        )
        # Parts are read back in chunk order: same rows, same order, whatever the layout.
        assert read_table(tmp_path / name, "entities").equals(ref_e)
        assert read_table(tmp_path / name, "edges").equals(ref_g)
    par = ingest_dump(SAMPLE_DUMP, tmp_path / "par", workers=2, chunk_lines=60)
    assert par.reused and par.chunks == 8
    # 463 entity lines: 336 items with enwiki, 89 properties, 38 items without enwiki.
    assert (plain.lines, plain.items, plain.properties, plain.not_enwiki) == (463, 336, 89, 38)


def test_interrupted_ingest_resumes_from_committed_chunks(tmp_path):
    out = tmp_path / "kg"
    first = ingest_dump(SAMPLE_DUMP, out, chunk_lines=100)
    edges = read_table(out, "edges")
    # Simulate a crash during chunk 2: its marker and parts are gone, the run never finished.
    (out / ".complete").unlink()
    (out / "chunks" / "000002.json").unlink()
    for table in ("entities", "edges"):
        (out / table / "part-000002.parquet").unlink()
    again = ingest_dump(SAMPLE_DUMP, out, chunk_lines=100)
    assert not again.reused and again.chunks_reused == first.chunks - 1
    assert (again.items, again.edges) == (first.items, first.edges)
    assert read_table(out, "edges").equals(edges)


def test_graph_filters_and_passage_links(tmp_path):
    kg_dir = tmp_path / "kg"
    ingest_dump(SAMPLE_DUMP, kg_dir)
    passages = tmp_path / "passages.parquet"
    load_corpus(SAMPLE_CORPUS, passages)
    block = read_relation_list(BLOCK)
    assert {"P31", "P279", "P18", "P373"} <= block
    with KnowledgeGraph(kg_dir, passages, RelationFilter.from_files(BLOCK)) as g:
        counts = g.counts()
        assert counts["linked_nodes"] == 85  # the covered entities of the sample
        ents = g.linked_entities()
        einstein = next(r for r in ents.to_pylist() if r["qid"] == "Q937")
        rows = read_shard(passages, "passages").to_pylist()
        expected = [r["id"] for r in rows if r["title"] == "Albert Einstein"]
        assert expected and einstein["passage_ids"] == expected
        assert all(r["passage_ids"] is None for r in ents.to_pylist() if r["kind"] == "property")
        cands = g.candidates(["Q937"])["Q937"]
        pids = {c.pid for c in cands}
        assert pids and not pids & block  # no blocked relation (P31, P21, ...)
        assert "P214" not in pids and "P18" not in pids  # external-id, commonsMedia by datatype
        assert all(c.target_label for c in cands)
        birth = [c for c in cands if c.pid == "P569"]
        assert [c.target_label for c in birth] == ["14 March 1879"]
    allow = tmp_path / "allow.txt"
    allow.write_text("P19  # place of birth\nP31  # instance of (still blocked)\n")
    with KnowledgeGraph(kg_dir, passages, RelationFilter.from_files(BLOCK, allow)) as g:
        assert {c.pid for c in g.candidates(["Q937"])["Q937"]} == {"P19"}
    bad = tmp_path / "bad.txt"
    bad.write_text("instance of\n")
    with pytest.raises(ValueError, match=r"bad\.txt:1"):
        read_relation_list(bad)
    shutil.rmtree(kg_dir)
