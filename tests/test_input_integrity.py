"""Truncated, corrupt or mislabelled inputs fail naming the file and leave nothing
behind; identity problems (id whitespace, BOM, duplicate entities, non-id edge objects) follow
one rule each and are counted; KG rejects reach the catalog. Every input is written here."""

from __future__ import annotations

import bz2
import gzip
import os
import shutil
from collections import Counter
from pathlib import Path

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard

from pipeline.core.compressed import CompressedInputError
from pipeline.core.contracts import read_shard
from pipeline.core.errors import BadInputError
from pipeline.core.io import COMPLETE_MARKER
from pipeline.kg.dump import ingest_dump, part_files
from pipeline.kg.entity_parse import parse_entity
from pipeline.retrieval.corpus import CorpusError, find_duplicate_ids, load_corpus
from pipeline.store.store import Store

ROOT = Path(__file__).resolve().parent.parent
SAMPLE_DUMP = ROOT / "data" / "sample" / "wikidata_sample.json"

COMPRESS = {
    "gz": gzip.compress,
    "bz2": bz2.compress,
    "zst": lambda data: zstandard.ZstdCompressor().compress(data),
}


def corpus_bytes(n: int = 30_000) -> bytes:
    """Enough distinct lines that the compressed stream spans several bz2 blocks."""
    return b"".join(
        orjson.dumps({"id": str(i), "contents": f'"Title {i}"\nPassage {i} about {i * 7919}.'})
        + b"\n"
        for i in range(n)
    )


def truncated(path: Path, data: bytes, kind: str) -> Path:
    full = COMPRESS[kind](data)
    path.write_bytes(full[: len(full) // 2])
    return path


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.rglob("*") if "tmp" in p.name)


@pytest.fixture(params=["in-process", "external"])
def bz2_path(request, tmp_path, monkeypatch) -> str:
    """Both ways a .bz2 is read. External: lbzip2/pbzip2 if installed, else bzip2 (same
    `-dc` interface, same non-zero exit on a broken stream) under the name lbzip2 on PATH."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    if request.param == "in-process":
        monkeypatch.setenv("PATH", str(bin_dir))  # no decompressor to find
        return request.param
    if not (shutil.which("lbzip2") or shutil.which("pbzip2")):
        real = shutil.which("bzip2")
        assert real, "neither lbzip2, pbzip2 nor bzip2 is installed"
        (bin_dir / "lbzip2").symlink_to(real)
        monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return request.param


def assert_names_path(err: pytest.ExceptionInfo, path: Path) -> None:
    msg = str(err.value)
    assert str(path) in msg and "\n" not in msg


# ---- 1. truncated compressed input never loads as a shorter one ------------------------


@pytest.mark.parametrize("kind", ["gz", "zst"])
@pytest.mark.parametrize("on_error", ["raise", "reject"])
def test_truncated_compressed_corpus_fails_and_leaves_nothing(tmp_path, kind, on_error):
    src = truncated(tmp_path / f"c.jsonl.{kind}", corpus_bytes(), kind)
    out = tmp_path / "out"
    with pytest.raises(CompressedInputError, match="truncated or corrupt") as err:
        load_corpus(src, out / "p.parquet", on_error=on_error, error_budget=0.5)
    assert_names_path(err, src)
    assert not (out / "p.parquet").exists() and leftovers(out) == []


@pytest.mark.parametrize("on_error", ["raise", "reject"])
def test_truncated_bz2_corpus_fails_on_both_paths(tmp_path, bz2_path, on_error):
    src = truncated(tmp_path / "c.jsonl.bz2", corpus_bytes(), "bz2")
    with pytest.raises(CompressedInputError) as err:
        load_corpus(src, tmp_path / "out" / "p.parquet", on_error=on_error, error_budget=0.5)
    assert_names_path(err, src)
    # Which path read it shows in what the decoder said.
    assert ("lbzip2" in str(err.value) or "pbzip2" in str(err.value)) == (bz2_path == "external")
    assert not (tmp_path / "out" / "p.parquet").exists() and leftovers(tmp_path / "out") == []


@pytest.mark.parametrize("kind", ["gz", "bz2"])
def test_corrupt_stream_in_the_middle_is_detected(tmp_path, kind, bz2_path):
    full = bytearray(COMPRESS[kind](corpus_bytes()))
    middle = len(full) // 2
    full[middle : middle + 64] = bytes(64)  # zeroed block inside the stream
    src = tmp_path / f"c.jsonl.{kind}"
    src.write_bytes(bytes(full))
    # reject mode with no budget: garbage lines decoded before the damage is noticed do not
    # stop the pass, the stream check (CRC / block magic) does.
    with pytest.raises(CompressedInputError) as err:
        load_corpus(src, tmp_path / "out" / "p.parquet", on_error="reject", error_budget=1.0)
    assert_names_path(err, src)
    assert leftovers(tmp_path / "out") == []


def test_multi_frame_zstd_reads_completely(tmp_path):
    data = corpus_bytes(2000)
    c = zstandard.ZstdCompressor()
    src = tmp_path / "c.jsonl.zst"
    src.write_bytes(c.compress(data[:50_000]) + c.compress(data[50_000:]))
    stats, _ = load_corpus(src, tmp_path / "p.parquet")
    assert stats.passages == 2000


def dump_bytes() -> bytes:
    return SAMPLE_DUMP.read_bytes()


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize(
    ("kind", "bz2_path"),
    [("gz", "in-process"), ("zst", "in-process"), ("bz2", "in-process"), ("bz2", "external")],
    indirect=["bz2_path"],  # gz and zst have one reading path; bz2 has two
)
def test_truncated_dump_fails_with_no_complete_marker(tmp_path, kind, workers, bz2_path):
    data = dump_bytes()  # 60-line chunks commit several before the cut
    src = truncated(tmp_path / f"dump.json.{kind}", data, kind)
    out = tmp_path / "kg"
    with pytest.raises(CompressedInputError) as err:
        ingest_dump(src, out, workers=workers, chunk_lines=60)
    assert_names_path(err, src)
    # The partial chunks can never complete this dump: nothing of it is kept.
    assert not out.exists()


def test_bz2_dump_complete_on_both_paths(tmp_path, bz2_path):
    src = tmp_path / "dump.json.bz2"
    src.write_bytes(bz2.compress(dump_bytes()))
    rep = ingest_dump(src, tmp_path / "kg", chunk_lines=60)
    # Counted from the dump itself: one entity per line inside the array; items are the
    # entities of type item with an English Wikipedia page (kg.enwiki_only).
    entities = [
        orjson.loads(line.rstrip().rstrip(b","))
        for line in dump_bytes().splitlines()
        if line.startswith(b"{")
    ]
    items = [e for e in entities if e["type"] == "item" and "enwiki" in e.get("sitelinks", {})]
    assert (rep.lines, rep.items) == (len(entities), len(items)) > (0, 0)
    assert (tmp_path / "kg" / COMPLETE_MARKER).exists()


# ---- 2. files that are not what their name says ---------------------------------------


def test_truncated_parquet_corpus_is_one_line_naming_the_file(tmp_path):
    good = tmp_path / "good.parquet"
    pq.write_table(pa.table({"id": ["1", "2"], "contents": ['"A"\nOne.', '"B"\nTwo.']}), good)
    bad = tmp_path / "c.parquet"
    bad.write_bytes(good.read_bytes()[:-20])
    with pytest.raises(CorpusError, match="not a readable Parquet file") as err:
        load_corpus(bad, tmp_path / "out" / "p.parquet")
    assert_names_path(err, bad)
    assert leftovers(tmp_path / "out") == []


def test_fake_gz_and_directory_are_bad_input(tmp_path):
    fake = tmp_path / "c.jsonl.gz"
    fake.write_bytes(b'{"id": "1", "contents": "plain text, not gzip"}\n')
    with pytest.raises(CompressedInputError, match="Not a gzipped file") as err:
        load_corpus(fake, tmp_path / "p.parquet")
    assert_names_path(err, fake)
    with pytest.raises(BadInputError, match="is a directory") as err:
        load_corpus(tmp_path, tmp_path / "p.parquet")
    assert_names_path(err, tmp_path)
    with pytest.raises(BadInputError, match="is a directory"):
        ingest_dump(tmp_path, tmp_path / "kg")


# ---- 6. identity rules -------------------------------------------------------------------


def line(pid: str, text: str = "Some text.") -> str:
    return orjson.dumps({"id": pid, "contents": f'"T"\n{text}'}).decode() + "\n"


def test_ids_are_stripped_then_checked_for_duplicates(tmp_path):
    src = tmp_path / "c.jsonl"
    src.write_text(line("1") + line(" 2 ") + line("1 ") + line("3"))
    with pytest.raises(CorpusError, match=r"c\.jsonl:3: duplicate id '1' \(first seen on line 1\)"):
        load_corpus(src, tmp_path / "p.parquet")
    assert leftovers(tmp_path) == [] and not (tmp_path / "p.parquet").exists()
    stats, rejects = load_corpus(src, tmp_path / "p.parquet", on_error="reject", error_budget=0.5)
    assert (stats.passages, stats.rejected, stats.duplicates) == (3, 1, 1)
    assert stats.repaired == {"id whitespace stripped": 2}
    assert [(r.source_line, r.record_key) for r in rejects] == [(3, "1")]
    t = pq.read_table(tmp_path / "p.parquet")
    assert t["id"].to_pylist() == ["1", "2", "3"] and t["row"].to_pylist() == [0, 1, 2]
    assert t["source_line"].to_pylist() == [1, 2, 4]


def test_bom_on_the_first_line_is_skipped_and_counted(tmp_path):
    src = tmp_path / "c.jsonl"
    src.write_bytes(b"\xef\xbb\xbf" + (line("1") + line("2")).encode())
    stats, rejects = load_corpus(src, tmp_path / "p.parquet")
    assert (stats.passages, rejects) == (2, [])
    assert stats.repaired == {"utf-8 byte order mark skipped": 1}
    # Only the first line: a BOM later is a broken line.
    src.write_bytes((line("1")).encode() + b"\xef\xbb\xbf" + line("2").encode())
    with pytest.raises(CorpusError, match=r"c\.jsonl:2: not valid JSON"):
        load_corpus(src, tmp_path / "p.parquet")


def test_duplicate_check_reports_id_and_both_lines_from_disk(tmp_path):
    src = tmp_path / "c.jsonl"
    ids = [str(i) for i in range(5000)] + ["17", "4999", "17"]
    src.write_text("".join(line(i) for i in ids))
    stats, rejects = load_corpus(src, tmp_path / "p.parquet", on_error="reject", error_budget=0.01)
    assert stats.passages == 5000 and stats.duplicates == 3
    assert [(r.record_key, r.source_line, r.reason) for r in rejects] == [
        ("17", 5001, "duplicate id '17' (first seen on line 18)"),
        ("4999", 5002, "duplicate id '4999' (first seen on line 5000)"),
        ("17", 5003, "duplicate id '17' (first seen on line 18)"),
    ]
    t = pq.read_table(tmp_path / "p.parquet")
    assert t["row"].to_pylist() == list(range(5000)) and len(set(t["id"].to_pylist())) == 5000
    # The check alone, under a small memory limit, on the passages file the pass wrote.
    raw = tmp_path / "raw.parquet"
    rows = [*t.to_pylist(), {**t.slice(17, 1).to_pylist()[0], "source_line": 9999}]
    pq.write_table(pa.Table.from_pylist(rows, schema=t.schema), raw)
    dups = [(d.id, d.source_line, d.first_line) for d in find_duplicate_ids(raw, "64MB")]
    assert dups == [("17", 9999, 18)]


def entity_line(obj: dict) -> bytes:
    return orjson.dumps(obj) + b",\n"


def test_duplicate_entity_keeps_the_first_copy_within_and_across_chunks(tmp_path):
    lines = dump_bytes().splitlines(keepends=True)
    base = ingest_dump(SAMPLE_DUMP, tmp_path / "base", chunk_lines=60)
    # The first item with an enwiki link and statements: its copies would duplicate edges.
    at, first = next(
        (i, e)
        for i, raw in enumerate(lines)
        if raw.strip() not in (b"[", b"]")
        and (e := orjson.loads(raw.strip().rstrip(b",")))["claims"]
        and "enwiki" in e["sitelinks"]
    )
    label = first["labels"]["en"]["value"]
    edited = {**first, "labels": {"en": {"language": "en", "value": "Changed"}}}
    # A copy right after it (same chunk) and an edited copy at the end (another chunk).
    dup = [*lines[: at + 1], entity_line(first), *lines[at + 1 : -1], entity_line(edited)]
    dup.append(lines[-1])
    src = tmp_path / "dup.json"
    src.write_bytes(b"".join(dup))
    for workers in (1, 2):
        out = tmp_path / f"kg{workers}"
        rep = ingest_dump(src, out, chunk_lines=60, workers=workers)
        assert rep.duplicates == 2 and (rep.items, rep.edges) == (base.items, base.edges)
        ents = pa.concat_tables(read_shard(p, "entities") for p in part_files(out, "entities"))
        qids = ents["qid"].to_pylist()
        assert len(qids) == len(set(qids)) and qids.count(first["id"]) == 1
        kept = ents.filter(pa.compute.equal(ents["qid"], first["id"]))["label"][0].as_py()
        assert kept == label  # the first copy, not the edited one
        rejects = pa.concat_tables(read_shard(p, "rejects") for p in part_files(out, "rejects"))
        dups = [r for r in rejects.to_pylist() if r["reason"].startswith("duplicate entity")]
        assert sorted(r["source_line"] for r in dups) == [at + 2, len(dup) - 1]
        assert all(f"first on line {at + 1}" in r["reason"] for r in dups)
        # Resumed/reused: the report on disk carries the same counts.
        again = ingest_dump(src, out, chunk_lines=60, workers=workers)
        assert again.reused and again.duplicates == 2 and again.edges == base.edges


def test_crash_while_dropping_duplicates_is_repaired_by_the_rerun(tmp_path, monkeypatch):
    import pipeline.kg.dump as dump

    lines = dump_bytes().splitlines(keepends=True)
    base = ingest_dump(SAMPLE_DUMP, tmp_path / "base", chunk_lines=60)
    src = tmp_path / "dup.json"
    src.write_bytes(b"".join([*lines[:-1], lines[3], lines[-1]]))  # line 4 again at the end
    real = dump.write_parquet_atomic

    def crash_on_id_rewrite(path, *args, **kwargs):
        if path.parent.name == "ids" and path.exists():
            raise RuntimeError("killed")
        return real(path, *args, **kwargs)

    monkeypatch.setattr(dump, "write_parquet_atomic", crash_on_id_rewrite)
    with pytest.raises(RuntimeError, match="killed"):
        ingest_dump(src, tmp_path / "kg", chunk_lines=60)
    assert not (tmp_path / "kg" / COMPLETE_MARKER).exists()
    monkeypatch.setattr(dump, "write_parquet_atomic", real)
    rep = ingest_dump(src, tmp_path / "kg", chunk_lines=60)
    assert (rep.duplicates, rep.items, rep.edges) == (1, base.items, base.edges)
    rejects = pa.concat_tables(
        read_shard(p, "rejects") for p in part_files(tmp_path / "kg", "rejects")
    )
    assert sum(r.startswith("duplicate entity") for r in rejects["reason"].to_pylist()) == 1


def test_edge_objects_that_are_not_ids_are_counted_not_stored():
    def claim(value: dict) -> dict:
        dv = {"type": "wikibase-entityid", "value": value}
        return {"mainsnak": {"snaktype": "value", "datavalue": dv}, "rank": "normal"}

    obj = {
        "type": "item",
        "id": "Q1",
        "claims": {
            "P31": [
                claim({"entity-type": "item", "id": ""}),
                claim({"entity-type": "item", "numeric-id": -5}),
                claim({"entity-type": "item", "id": "not an id"}),
                claim({"entity-type": "item", "id": "Q5"}),
            ],
            "P1659": [claim({"entity-type": "property", "id": "P-1"})],
        },
    }
    issues: Counter = Counter()
    _, edges, _ = parse_entity(obj, issues)
    assert [e["object_qid"] for e in edges] == ["Q5"]
    assert issues["invalid item id as value"] == 3
    assert issues["invalid property id as value"] == 1


# ---- 10. KG rejects in the catalog --------------------------------------------------------


def test_kg_rejects_are_in_the_catalogs_rejects_view(realdata, tmp_path):
    kg_dir = tmp_path / "kg"
    ingest_dump(realdata / "wikidata_mock_dump_with_bugs.json", kg_dir, enwiki_only=False)
    parts = part_files(kg_dir, "rejects")
    expected = sum(read_shard(p, "rejects").num_rows for p in parts)
    assert expected > 0
    store = Store(tmp_path / "store")
    store.refresh_catalog({"kg_rejects": parts})
    from pipeline.store.store import connect_readonly

    with connect_readonly(store.catalog_path) as con:
        n, stages = con.execute(
            "SELECT count(*), list(DISTINCT stage) FROM rejects WHERE run_id LIKE 'kg%'"
        ).fetchone()
    assert (n, stages) == (expected, ["kg"])
