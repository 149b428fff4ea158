"""A streamed export writes what the whole-in-memory export wrote: every split of
every format, row for row, and dropped.jsonl byte for byte, while it reads the full rows a
few runs at a time. The store is a small synthetic history (benchmarks/synthetic_store.py
through the real Store API, as tests/test_retention.py builds it), with reviews, a
contaminated record and near-duplicate clusters; the reference is the old path rebuilt from
the export's pure parts, with every kept record's full row read at once."""

from __future__ import annotations

import dataclasses
import datetime as dt
import sys
from pathlib import Path

import duckdb
import numpy as np
import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from synthetic_store import Corpus, review, run_name, table, write_night  # noqa: E402

from pipeline.catalog import export_selection, export_stream  # noqa: E402
from pipeline.catalog.export import export_curriculum, record_row  # noqa: E402
from pipeline.catalog.export_formats import records_table, verl_table  # noqa: E402
from pipeline.catalog.export_process import attach_solver_process  # noqa: E402
from pipeline.catalog.export_selection import default_selection  # noqa: E402
from pipeline.catalog.export_splits import DROP_CATEGORIES, SPLITS  # noqa: E402
from pipeline.catalog.readonly_sql import connect_audit  # noqa: E402
from pipeline.core.io import write_parquet_atomic  # noqa: E402
from pipeline.store.store import Store  # noqa: E402
from schemas.tables import schema_for  # noqa: E402
from tests.export_reference import assign_splits, drop_and_dedupe, select_all  # noqa: E402

NIGHTS, RECORDS = 4, 60
NOW = dt.datetime(2025, 2, 1, tzinfo=dt.UTC)


def _quality(store: Store, ids: list[tuple[str, str, str]]) -> None:
    """A benchmark check that flags ids[:4], and ids[4:10] in two near-duplicate clusters."""
    matches = [
        {"record_id": a, "run_id": b, "benchmark": "nq", "item_id": str(i), "method": "exact",
         "score": 1.0, "benchmark_question": q, "checked_at": NOW}
        for i, (a, b, q) in enumerate(ids[:4])
    ]  # fmt: skip
    schema = schema_for("benchmark_matches")
    write_parquet_atomic(
        store.quality_path("benchmark_matches", "nq"), pa.Table.from_pylist(matches, schema=schema)
    )
    dups = []
    for group in (sorted(ids[4:7]), sorted(ids[7:10])):
        dups += [
            {"record_id": a, "run_id": b, "cluster_id": group[0][0], "cluster_size": 3,
             "nearest_record_id": group[0][0], "method": "minhash", "score": 0.9,
             "computed_at": NOW}
            for a, b, _ in group
        ]  # fmt: skip
    schema = schema_for("question_duplicates")
    write_parquet_atomic(
        store.quality_path("question_duplicates", "all"), pa.Table.from_pylist(dups, schema=schema)
    )


@pytest.fixture(scope="module")
def history(tmp_path_factory) -> Path:
    """The catalog of NIGHTS synthetic nights, reviewed and quality-checked."""
    root = tmp_path_factory.mktemp("stream") / "out"
    c = Corpus(np.random.default_rng(11), 300)
    store = Store(root, root / "curriculum.duckdb")
    n = len(c.pids)
    passages = root / "index/passages.parquet"
    write_parquet_atomic(passages, table("passages", n, {
        "id": c.pids, "title": c.titles, "text": c.ptext, "char_len": [len(t) for t in c.ptext],
        "row": np.arange(n), "source_file": "corpus.jsonl", "source_line": np.arange(1, n + 1),
    }))  # fmt: skip
    for r in range(NIGHTS):
        write_night(store, c, r, RECORDS, 30, 5)
    with duckdb.connect() as con:
        ids = con.execute(
            "SELECT record_id, run_id, question FROM read_parquet(?) WHERE question IS NOT NULL "
            "ORDER BY md5(record_id) LIMIT 30",
            [str(root / "shards/curriculum/*/*/*.parquet")],
        ).fetchall()
    review(root, [(a, b) for a, b, _ in ids[10:20]], reject=False)
    review(root, [(a, b) for a, b, _ in ids[20:26]], reject=True)
    _quality(store, ids)
    store.refresh_catalog({"passages": [passages]})
    return store.catalog_path


def _reference(catalog: Path, where: str | None, kw: dict) -> dict:
    """The whole-in-memory export's rows: every selected record's full row at once."""
    included = {k: kw.get(f"include_{k}", False)
                for k in ("contaminated", "shortcuts", "ambiguous", "undetermined")}  # fmt: skip
    default = where == "accepted"
    if default:
        where = default_selection(k for k, on in included.items() if on)
    _, rows, rejected = select_all(catalog, where, kw.get("run_ids", ()), rejections=default)
    kept, drops = drop_and_dedupe(rows, rejected, included, kw.get("reviewed_only", False))
    split = assign_splits(kept, kw.get("validation_fraction", 0.1), kw.get("split_by", "passage"))
    with connect_audit(catalog) as con:  # every kept record's full row, all at once
        full = con.table("curriculum_verdicts").to_arrow_table().to_pylist()
        by_id = {r["record_id"]: r for r in full}
        kept = [by_id[r["record_id"]] for r in kept]
        views = {v for (v,) in con.execute("SELECT view_name FROM duckdb_views()").fetchall()}
        attach_solver_process(con, kept, views)
    by = {s: [r for r, t in zip(kept, split.splits, strict=True) if t == s] for s in SPLITS}
    rows = {s: [record_row(r, s, i) for i, r in enumerate(by[s])] for s in SPLITS}
    in_order = (d for name in DROP_CATEGORIES for d in getattr(drops, name))
    dropped = b"".join(orjson.dumps(dataclasses.asdict(d)) + b"\n" for d in in_order)
    return {"rows": rows, "dropped": dropped}


def _check(out: Path, want: dict) -> None:
    assert (out / "dropped.jsonl").read_bytes() == want["dropped"]
    for s in SPLITS:
        rows = want["rows"][s]
        lines = b"".join(orjson.dumps(r) + b"\n" for r in rows)
        assert (out / "jsonl" / f"{s}.jsonl").read_bytes() == lines, s
        got = pq.read_table(out / "verl" / f"{s}.parquet")
        assert got.schema == verl_table([]).schema and got.equals(verl_table(rows)), s
        arrow = next((out / "hf" / s).glob("*.arrow"))
        got = pa.ipc.open_stream(arrow.read_bytes()).read_all()
        assert got.equals(records_table(rows).cast(got.schema)), s  # datasets: all nullable


CASES = {
    "default": ("accepted", {"validation_fraction": 0.3}),
    "where": (
        "is_valid",
        {
            "include_ambiguous": True,
            "include_undetermined": True,
            "split_by": "cluster",
            "validation_fraction": 0.25,
        },
    ),
    "runs": ("accepted", {"run_ids": [run_name(1), run_name(3)], "include_shortcuts": True}),
}


@pytest.mark.parametrize("case", CASES)
def test_streamed_export_writes_what_the_in_memory_export_wrote(history, tmp_path, case,
                                                                 monkeypatch):  # fmt: skip
    """Small batches and buckets: several of each, the splits still in record_id order; every
    batch of full rows holds at most BATCH_ROWS records plus one run's, and the first pass
    reads no column that only a rendered record needs."""
    where, kw = CASES[case]
    want = _reference(history, where, kw)
    assert want["rows"]["train"] and want["rows"]["validation"] and want["dropped"]
    monkeypatch.setattr(export_stream, "BATCH_ROWS", 20)
    monkeypatch.setattr(export_stream, "BUCKET_ROWS", 7)
    batches, narrow = [], []
    full_rows, narrow_rows = export_stream.full_rows, export_selection.narrow_rows

    def counted(con, columns, run_ids, record_ids, views):
        rows = full_rows(con, columns, run_ids, record_ids, views)
        batches.append((len(run_ids), len(rows)))
        return rows

    def spied(rel, columns):  # each batch the selection reads
        rows = narrow_rows(rel, columns)
        narrow.append(not any("evidence" in r or "kg_path" in r for r in rows))
        return rows

    monkeypatch.setattr(export_stream, "full_rows", counted)
    monkeypatch.setattr(export_selection, "narrow_rows", spied)
    res = export_curriculum(history, tmp_path / "small", where=where,
                            formats=["verl", "hf", "jsonl"], **kw)  # fmt: skip
    _check(res.out, want)
    assert narrow and all(narrow)
    per_run = max(res.manifest["runs"], key=lambda r: r["records_exported"])["records_exported"]
    assert len(batches) > 1 or len(res.manifest["runs"]) == 1
    assert all(n <= 20 + per_run for _, n in batches)
    assert sum(n for _, n in batches) == res.counts["exported"]
    assert len(list((tmp_path / "small").rglob(".scratch"))) == 0


def test_every_batch_reads_the_catalog_and_reviews_the_first_connection_found(
    history, tmp_path, monkeypatch
):
    """Each batch of runs has a connection of its own (DuckDB keeps state for each query a
    connection ran), yet every batch reads what the selection's first connection found: a
    review written during the selection reaches no batch, and a catalog a refresh replaced
    meanwhile is refused rather than read half old, half new."""
    from pipeline.catalog.export_selection import ExportError, select_records
    from pipeline.store.reviews import Verdict, write_reviews

    monkeypatch.setattr(export_selection, "BATCH_RECORDS", RECORDS)  # a batch a night
    with connect_audit(history) as con:
        last = con.execute(
            "SELECT record_id, run_id FROM curriculum_verdicts WHERE accepted AND run_id = ? "
            "AND review_verdict IS NULL ORDER BY record_id LIMIT 1",
            [run_name(NIGHTS - 1)],
        ).fetchall()
    assert last
    verdicts, written = [], []

    def on_batch(rows, dropped):
        if not written:  # during the first batch: a reject of a record of the last night
            verdict = Verdict("reject", "test", "answer_not_in_evidence")
            written.append(write_reviews(history.parent, verdict, last))
        verdicts.extend(r["review_verdict"] for r in rows if r["record_id"] == last[0][0])

    try:
        sel = select_records(history, "accepted", on_batch=on_batch)
        with connect_audit(history) as con:  # a new reader sees it
            now = con.execute(
                "SELECT review_verdict FROM curriculum_verdicts WHERE record_id = ?", [last[0][0]]
            ).fetchall()
    finally:
        for path in written:
            path.unlink()
    assert len(written) == 1 and verdicts == [None] and now == [("reject",)]
    assert sum(sel.review_scope.values()) == sel.selected

    replaced = []

    def refresh(rows, dropped):  # the catalog file replaced, as a refresh replaces it
        if not replaced:
            copy = tmp_path / "catalog.duckdb"
            copy.write_bytes(history.read_bytes())
            replaced.append(copy.replace(history))

    with pytest.raises(ExportError, match="refreshed during the export"):
        select_records(history, "accepted", on_batch=refresh)


def test_the_ledger_splits_under_its_memory_limit_as_the_reference_does(
    tmp_path, monkeypatch, caplog
):
    """The split finds its groups in SQL, under the ledger's memory limit, spilling past it,
    and splits again under the sql: section's memory_limit when that is too little: here
    100,000 records over 70,000 passages (one giant group and a few hundred small ones, so
    the labels take many steps to settle), for which 16 MB is too little, split under 24 MB
    (the fallback's 16 MB could not have) and, past a 16 MB ledger, under 2 GB, each time
    exactly as the in-memory reference splits them: each record's side, the groups, the
    positions in record_id order."""
    from pipeline.catalog import export_ledger
    from pipeline.catalog.export_splits import Drops
    from pipeline.core.config import SQLConfig

    n, rng = 100_000, np.random.default_rng(3)
    source, evidence = rng.integers(0, 70_000, n), rng.integers(0, 70_000, n)
    rows = [
        {"record_id": f"r{i:07d}", "run_id": f"night-{i % 365:03d}", "question": f"q{i}",
         "verifier_v": 0.5, "source_passage_id": f"p{s:07d}", "evidence_passage_id": f"p{e:07d}"}
        for i, s, e in zip(range(n), source, evidence, strict=True)
    ]  # fmt: skip
    expected = assign_splits(rows, 0.1, "passage", seed=7)
    runs = sorted({r["run_id"] for r in rows})
    with export_ledger.Ledger(tmp_path, "passage") as ledger:
        ledger.add(rows, Drops(), Drops())
        for own, fallback in (("16MB", "16MB"), ("24MB", "16MB"), ("16MB", "2GB")):
            monkeypatch.setattr(export_ledger, "MEMORY_LIMIT", own)
            ledger.limits = SQLConfig(memory_limit=fallback)
            ledger.reopen()
            setting = "SELECT current_setting('memory_limit')"
            own_limit = ledger.con.execute(setting).fetchall()
            if fallback == own:
                with pytest.raises(duckdb.OutOfMemoryException):
                    ledger.split(0.1, seed=7)
                continue
            caplog.clear()
            split, leaked = ledger.split(0.1, seed=7)
            assert ledger.con.execute(setting).fetchall() == own_limit  # the ledger's again
            retried = [r for r in caplog.records if "splitting again" in r.getMessage()]
            assert len(retried) == (fallback == "2GB"), retried
            placed = ledger.placement(runs)
            assert not leaked
            assert (split.groups, split.forced) == (expected.groups, expected.forced)
            sides = [placed[r["record_id"]][0] for r in rows]
            assert sides == expected.splits and 0 < sides.count("validation") < n
            for side in SPLITS:  # positions 0.. in record_id order
                ids = [r["record_id"] for r, s in zip(rows, sides, strict=True) if s == side]
                assert [placed[i][1] for i in ids] == list(range(len(ids)))
