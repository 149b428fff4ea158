"""Quality checks over the catalog: benchmark decontamination and near-duplicate questions.

Pure rules on authored questions, the real embedder (all-MiniLM-L6-v2 from the registry) for
the semantic methods, a real DuckDB catalog over authored shards for the views and the export,
and the `curriculum quality` commands end to end on a copy of the landed nightly run."""

from __future__ import annotations

import datetime as dt
import gzip
import hashlib
import json
from pathlib import Path

import duckdb
import numpy as np
import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.agents.rewards import normalize
from pipeline.catalog.audit import run_audit
from pipeline.catalog.export import export_curriculum
from pipeline.core.config import QualityConfig, load_config
from pipeline.quality.benchmarks import BenchmarkError, load_benchmark
from pipeline.quality.checks import decontaminate_catalog
from pipeline.quality.cluster_check import cluster_catalog
from pipeline.quality.decontamination import decontaminate, word_ngrams
from pipeline.quality.near_duplicates import (
    brute_force_edges,
    cluster,
    minhash_edges,
    semantic_edges,
)
from pipeline.store.store import Store
from schemas.tables import SCHEMA_VERSION, schema_for
from tests.conftest import landed_copy, run_cli

# Questions as a run would land them; the benchmark below copies r1 re-punctuated (exact), r5
# inside a longer question (n-gram) and paraphrases r2 and r3 (embedding only: no shared
# 5-gram). r4, r6 and r7 are not in it; r7 is r6 with its words reordered (near-duplicate).
QUESTIONS = {
    "r1": "Who painted the ceiling of the Sistine Chapel?",
    "r2": "In which year did the Berlin Wall fall?",
    "r3": "What is the capital city of Australia?",
    "r4": "Which river flows through the city of Vienna?",
    "r5": "Who discovered penicillin in 1928?",
    "r6": "How many moons does the planet Mars have?",
    "r7": "Does the planet Mars have how many moons?",
}
COPIES = [
    {"id": "copy-r1", "question": "who painted the ceiling of sistine chapel"},
    {"id": "para-r2", "question": "When did the Berlin Wall come down?"},
    {"id": "para-r3", "question": "Which city is the capital of Australia?"},
    {"id": "long-r5", "question": "who discovered penicillin in 1928 and where"},
]
NQ_ITEMS = 17
Q = QualityConfig()  # the defaults: what the embedded profile runs with
LEXICAL = (Q.ngram_n, Q.ngram_threshold)
FLAGGED = {"r1": "exact", "r2": "embedding", "r3": "embedding", "r5": "ngram"}


def records(**extra) -> list[dict]:
    return [
        {"record_id": rid, "run_id": "run-a", "question": q, "answer": "x", **extra}
        for rid, q in QUESTIONS.items()
    ]


@pytest.fixture(scope="module")
def bench_file(tmp_path_factory, realdata) -> Path:
    """The NQ sample (unrelated to every record) plus the four authored copies."""
    path = tmp_path_factory.mktemp("bench") / "nq_plus_copies.jsonl"
    lines = (realdata / "nq_test_16.jsonl").read_bytes().splitlines()
    path.write_bytes(b"\n".join(lines + [orjson.dumps(c) for c in COPIES]) + b"\n")
    return path


@pytest.fixture(scope="module")
def encode(embedder):
    return lambda texts: embedder.encode_queries(texts)


# ---- benchmark files -------------------------------------------------------------------


def test_nq_sample_loads_unchanged_as_a_benchmark(realdata):
    path = realdata / "nq_test_16.jsonl"
    raw = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    bench = load_benchmark(path)
    assert bench.name == "nq_test_16"
    assert bench.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert [(i.item_id, i.question, list(i.answers)) for i in bench.items] == [
        (r["id"], r["question"], r["golden_answers"]) for r in raw
    ]
    assert len(bench.items) == NQ_ITEMS  # test_0 .. test_16, despite the file name


def test_benchmark_files_in_other_layouts_and_bad_ones(tmp_path, realdata):
    gz = tmp_path / "nq.jsonl.gz"
    gz.write_bytes(gzip.compress((realdata / "nq_test_16.jsonl").read_bytes()))
    assert load_benchmark(gz).name == "nq"
    assert load_benchmark(gz).items == load_benchmark(realdata / "nq_test_16.jsonl").items

    # Parquet with a question field and no id: items are named by their 1-based row.
    pq.write_table(pa.table({"question": ["Q one?", "", "Q three?"], "answer": ["a", "b", "c"]}),
                   tmp_path / "plain.parquet")  # fmt: skip
    items = load_benchmark(tmp_path / "plain.parquet").items
    assert [(i.item_id, i.question, i.answers) for i in items] == [
        ("1", "Q one?", ("a",)),
        ("3", "Q three?", ("c",)),
    ]

    # FlashRAG HotpotQA layout: the passages' titles and texts come from metadata.
    hotpot = {
        "id": "h1",
        "question": "Which band did the singer of Polly front?",
        "golden_answers": ["Nirvana"],
        "metadata": {
            "supporting_facts": {"title": ["Polly (song)"], "sent_id": [0]},
            "context": {"title": ["Polly (song)", "Nirvana"],
                        "sentences": [["Polly is a song by Nirvana."], ["Nirvana was a band."]]},
        },
    }  # fmt: skip
    (tmp_path / "hotpot.jsonl").write_bytes(orjson.dumps(hotpot) + b"\n")
    item = load_benchmark(tmp_path / "hotpot.jsonl").items[0]
    assert set(item.titles) == {"Polly (song)", "Nirvana"}
    assert "Polly is a song by Nirvana." in item.texts

    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "fine?"}\n{"question": \n')
    with pytest.raises(BenchmarkError, match=r"bad\.jsonl:2: not a JSON object"):
        load_benchmark(bad)
    nofield = tmp_path / "nofield.jsonl"
    nofield.write_text('{"text": "no question here"}\n')
    with pytest.raises(BenchmarkError, match=r"nofield\.jsonl:1: no question field"):
        load_benchmark(nofield)
    with pytest.raises(BenchmarkError, match="no such benchmark file"):
        load_benchmark(tmp_path / "missing.jsonl")


# ---- decontamination -------------------------------------------------------------------


def test_word_ngrams_are_sized_for_short_questions():
    # 8 words, 7 after Norm (the article goes): three 5-grams.
    assert word_ngrams("Who got the first Nobel Prize in physics?", 5) == {
        "who got first nobel prize",
        "got first nobel prize in",
        "first nobel prize in physics",
    }
    assert word_ngrams("Who wrote Hamlet?", 5) == {"who wrote hamlet"}  # shorter: one gram
    assert word_ngrams("?!", 5) == set()


def test_ngram_containment_flags_copies_not_questions_about_another_entity(tmp_path):
    (tmp_path / "b.jsonl").write_text(
        '{"id": "m", "question": "who was the first person to walk on the moon"}\n'
    )
    bench = load_benchmark(tmp_path / "b.jsonl")
    asked = {
        "longer": "Who was the first person to walk on the Moon, and in which year?",
        "shorter": "the first person to walk on the moon",
        "mars": "Who was the first person to walk on Mars?",
    }
    recs = [{"record_id": k, "run_id": "r", "question": q} for k, q in asked.items()]
    got = {m.record_id: m.score for m in decontaminate(recs, bench, *LEXICAL)}
    # "mars" shares 3 of its 4 5-grams (all but the last word): another question, below 0.8.
    assert got == {"longer": 1.0, "shorter": 1.0}


def test_benchmark_copies_flag_exactly_those_records(bench_file, encode):
    bench = load_benchmark(bench_file)
    matches = decontaminate(records(), bench, *LEXICAL, Q.embedding_threshold, encode)
    flagged = {m.record_id for m in matches}
    assert flagged == set(FLAGGED)
    for rid, method in FLAGGED.items():
        mine = [m for m in matches if m.record_id == rid]
        assert method in {m.method for m in mine}, (rid, mine)
        assert {m.item_id for m in mine} <= {c["id"] for c in COPIES}  # never an NQ item
    best = {(m.record_id, m.method): m for m in matches}
    assert best["r1", "exact"].score == 1.0 and best["r1", "exact"].item_id == "copy-r1"
    assert best["r5", "ngram"].score == 1.0 and best["r5", "ngram"].item_id == "long-r5"
    assert best["r2", "embedding"].item_id == "para-r2"
    # The paraphrases share no 5-gram with their record: only the embedding finds them.
    assert {m.method for m in matches if m.record_id in ("r2", "r3")} == {"embedding"}

    # Without the embedder, the lexical methods alone flag exactly the copies they can see.
    lexical = decontaminate(records(), bench, *LEXICAL)
    assert {m.record_id for m in lexical} == {"r1", "r5"}


def test_answer_and_evidence_passage_match_flags_a_reworded_record(tmp_path):
    item = {
        "id": "h1",
        "question": "Which band did the singer of Polly front?",
        "golden_answers": ["Nirvana"],
        "metadata": {"context": {"title": ["Polly"],
                                 "sentences": [["Polly is a song by the band Nirvana."]]}},
    }  # fmt: skip
    (tmp_path / "hotpot.jsonl").write_bytes(orjson.dumps(item) + b"\n")
    bench = load_benchmark(tmp_path / "hotpot.jsonl")
    base = {"run_id": "r", "question": "Name the group behind a 1991 song.", "answer": "nirvana"}
    recs = [
        {**base, "record_id": "by-title", "evidence": "x", "evidence_title": "Polly"},
        {**base, "record_id": "by-span", "evidence": "a song by the band", "evidence_title": "X"},
        {**base, "record_id": "other-passage", "evidence": "grunge", "evidence_title": "Seattle"},
        {**base, "record_id": "other-answer", "answer": "Pearl Jam", "evidence_title": "Polly"},
    ]  # fmt: skip
    got = {(m.record_id, m.method) for m in decontaminate(recs, bench, *LEXICAL)}
    assert got == {("by-title", "answer_evidence"), ("by-span", "answer_evidence")}


# ---- near-duplicates -------------------------------------------------------------------


def test_word_order_and_punctuation_variants_cluster_together():
    qs = [
        "How many moons does the planet Mars have?",
        "Does the planet Mars have how many moons",  # word order
        "how many moons, does the planet MARS have?!",  # case, punctuation
        "How many moons does the planet Jupiter have?",  # another question: J = 6/8
        "Who painted the Sistine Chapel ceiling?",
    ]
    edges = minhash_edges(qs, threshold=0.8, num_perm=128)
    assert {(e.i, e.j) for e in edges} == {(0, 1), (0, 2), (1, 2)}
    assert all(e.score == 1.0 and e.method == "minhash" for e in edges)
    assert {(e.i, e.j) for e in brute_force_edges(qs, 0.8)} == {(e.i, e.j) for e in edges}
    rows = cluster(["d", "b", "c", "a", "e"], edges)
    assert [r.cluster_id for r in rows] == ["b", "b", "b", "a", "e"]  # smallest id names it
    assert [r.cluster_size for r in rows] == [3, 3, 3, 1, 1]
    assert rows[3].nearest_record_id is None and rows[0].nearest_record_id in {"b", "c"}


def test_semantic_edges_join_paraphrases_only(encode):
    qs = [
        "What is the capital city of Australia?",
        "Australia's capital city is which one?",
        "Who wrote the film Titanic?",
        "Who directed the film Titanic?",
    ]
    vecs = encode(qs)
    got = {(e.i, e.j) for e in semantic_edges(vecs, 0.9, neighbours=3)}
    assert (0, 1) in got
    assert (2, 3) not in {(e.i, e.j) for e in semantic_edges(vecs, 0.95, neighbours=3)}
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-4)


# ---- the catalog: tables, views, export ------------------------------------------------


def _curriculum_row(**values) -> dict:
    """A contract-conforming curriculum row: valid, verbatim, V given; neutral elsewhere."""

    def default(t: pa.DataType):
        if pa.types.is_string(t):
            return "x"
        if pa.types.is_boolean(t):
            return True
        if pa.types.is_integer(t):
            return 1
        if pa.types.is_floating(t):
            return 0.1
        if pa.types.is_list(t):
            return []
        if pa.types.is_timestamp(t):
            return dt.datetime(2026, 1, 2, tzinfo=dt.UTC)
        return None

    neutral = {
        "shortcut": False,
        "unique_answer": True,
        "shortcut_verdict": "pass",
        "uniqueness_verdict": "pass",
        "invalid_reason": None,
        "one_search_answerable": False,
        "one_search_verdict": "pass",
        "disconnected": False,
        "connected_verdict": "not_applicable",
        "single_hop_share": 1.0,  # no cap on one-hop records
    }  # the LLM gates passed
    return {**{f.name: default(f.type) for f in schema_for("curriculum")}, **neutral, **values}


def _land(store: Store, run_id: str, rows: list[dict]) -> None:
    cfg = load_config(None, [])
    t0 = dt.datetime(2026, 1, 2, tzinfo=dt.UTC)
    store.write_run({
        "run_id": run_id, "run_date": t0.date(), "profile": "embedded",
        "config_hash": cfg.config_hash(), "config_yaml": cfg.to_yaml(), "started_at": t0,
        "finished_at": t0, "status": "completed", "shards_planned": 1, "shards_completed": 1,
        "schema_version": SCHEMA_VERSION,
    })  # fmt: skip
    f = store.write_shard("curriculum", run_id, t0.date(), "00000", rows)
    store.commit(run_id, "00000", [f])


@pytest.fixture
def gated(tmp_path, bench_file, encode):
    """A catalog of the authored questions (each on its own passage), checked by both gates."""
    out = tmp_path / "out"
    cfg = load_config(None, [f"store.out_dir={out}", f"store.catalog={out / 'c.duckdb'}"])
    store = Store.from_config(cfg)
    v = {"r6": 0.2, "r7": 0.5}
    rows = [
        _curriculum_row(record_id=rid, run_id="run-a", question=q, answer=f"ans {rid}",
                        source_passage_id=f"p-{rid}", evidence_passage_id=f"p-{rid}",
                        verifier_v=v.get(rid, 0.1))
        for rid, q in QUESTIONS.items()
    ]  # fmt: skip
    _land(store, "run-a", rows)
    store.refresh_catalog()
    results = decontaminate_catalog(cfg, store, [bench_file], encode, "minilm")
    clusters = cluster_catalog(cfg, store, encode)
    catalog = store.refresh_catalog()
    return cfg, store, catalog, results, clusters


def test_gates_are_committed_tables_that_the_views_read(gated):
    _, store, catalog, results, clusters = gated
    assert set(results[0].flagged) == set(FLAGGED)
    # one file per run (every benchmark's matches of it), one summary row per benchmark
    assert (store.root / "quality" / "benchmark_matches" / "run-a.parquet").exists()
    assert (store.root / "quality" / "benchmark_checks" / "nq_plus_copies.parquet").exists()
    assert clusters.clusters == 1 and clusters.duplicates == 1
    with duckdb.connect(str(catalog), read_only=True) as con:
        flagged = dict(con.execute("SELECT record_id, methods FROM contamination").fetchall())
        assert set(flagged) == set(FLAGGED)
        assert all(FLAGGED[rid] in methods for rid, methods in flagged.items())
        funnel = con.execute("SELECT above_v_threshold, not_contaminated FROM funnel").fetchone()
        assert funnel == (7, 7 - len(FLAGGED))
        dup = con.execute(
            "SELECT record_id, cluster_id, best_in_cluster FROM near_duplicates ORDER BY 1"
        ).fetchall()
        assert dup == [("r6", "r6", False), ("r7", "r6", True)]  # r7 has the higher V
        cov = con.execute("SELECT items, records_checked, runs_unchecked FROM benchmark_coverage")
        assert cov.fetchone() == (NQ_ITEMS + len(COPIES), 7, [])
    audit = run_audit(catalog, "quality")
    assert audit.exit_code == 0, audit.message
    [row] = audit.tables[0].records()
    assert (row["contaminated"], row["in_duplicate_clusters"], row["not_clustered"]) == (4, 2, 0)
    assert row["benchmarks_checked"] == ["nq_plus_copies"]


def test_export_leaves_out_contaminated_and_keeps_one_per_cluster(gated, tmp_path):
    _, store, catalog, _, _ = gated
    res = export_curriculum(catalog, tmp_path / "exp", formats=["jsonl"])
    exported = {
        orjson.loads(line)["record_id"]
        for split in ("train", "validation")
        for line in (tmp_path / "exp" / "jsonl" / f"{split}.jsonl").read_bytes().splitlines()
    }
    assert exported == {"r4", "r7"}
    dropped = [
        orjson.loads(x) for x in (tmp_path / "exp" / "dropped.jsonl").read_bytes().splitlines()
    ]
    reasons = {d["record_id"]: (d["reason"], d["kept_record_id"]) for d in dropped}
    assert reasons == {
        **{rid: ("contaminated", None) for rid in FLAGGED},
        "r6": ("near_duplicate", "r7"),
    }
    assert "nq_plus_copies" in next(d["detail"] for d in dropped if d["record_id"] == "r1")
    assert res.counts["contaminated_dropped"] == len(FLAGGED)
    assert res.counts["near_duplicates_dropped"] == 1
    assert res.manifest["decontamination"]["benchmark_checks"][0]["benchmark"] == "nq_plus_copies"

    kept_all = export_curriculum(
        catalog, tmp_path / "exp2", formats=["jsonl"], include_contaminated=True
    )
    assert kept_all.counts["exported"] == 7 - 1 and kept_all.counts["contaminated_dropped"] == 0

    # A run landed after the checks: the export says which gates have not seen it.
    late_row = _curriculum_row(
        record_id="s1", run_id="run-b", question="Where is the Louvre?", answer="Paris",
        source_passage_id="p-s1", evidence_passage_id=None,
    )  # fmt: skip
    _land(store, "run-b", [late_row])
    catalog = store.refresh_catalog()
    late = export_curriculum(catalog, tmp_path / "exp3", formats=["jsonl"])
    assert any("run-b landed after benchmark nq_plus_copies" in w for w in late.warnings)
    assert any("near-duplicate check" in w for w in late.warnings)
    with duckdb.connect(str(catalog), read_only=True) as con:
        assert con.execute("SELECT runs_unchecked FROM benchmark_coverage").fetchone() == (
            ["run-b"],
        )
    audit = run_audit(catalog, "quality")
    assert audit.exit_code == 1 and "run-b (nq_plus_copies)" in audit.message


# ---- end to end: the commands on a copy of the landed run ------------------------------


@pytest.mark.slow
def test_quality_commands_on_the_landed_run(landed_run, tmp_path, realdata):
    """A benchmark with re-punctuated copies of two landed questions (plus the NQ sample)
    flags exactly the records with those questions; export leaves them out."""
    out, settings = landed_copy(landed_run, tmp_path)
    sets = [arg for s in settings for arg in ("--set", s)]
    with duckdb.connect(str(out / "catalog.duckdb"), read_only=True) as con:
        rows = con.execute(
            "SELECT record_id, question FROM curriculum WHERE is_valid ORDER BY record_id"
        ).fetchall()
    picked = [q for _, q in rows if len(normalize(q).split()) >= 2][:2]
    assert picked, "the landed run has no valid question to copy"
    bench = tmp_path / "landed_copies.jsonl"
    copies = [{"id": f"c{i}", "question": q.upper().rstrip("?.") + " ?!", "golden_answers": ["x"]}
              for i, q in enumerate(picked)]  # fmt: skip
    lines = (realdata / "nq_test_16.jsonl").read_bytes().splitlines()
    bench.write_bytes(b"\n".join(lines + [orjson.dumps(c) for c in copies]) + b"\n")
    want = {rid for rid, q in rows if normalize(q) in {normalize(p) for p in picked}}

    done = run_cli("quality", "decontaminate", "--benchmark", str(bench), *sets)
    assert done.returncode == 0, done.stderr
    assert f"landed_copies: {NQ_ITEMS + len(copies)} items; {len(want)} contaminated" in done.stdout
    with duckdb.connect(str(out / "catalog.duckdb"), read_only=True) as con:
        sql = "SELECT record_id FROM benchmark_matches WHERE method = 'exact'"
        exact = {r for (r,) in con.execute(sql).fetchall()}
        items = {i for (i,) in con.execute("SELECT item_id FROM benchmark_matches").fetchall()}
        flagged = {r for (r,) in con.execute("SELECT record_id FROM contamination").fetchall()}
    assert exact == want == flagged
    assert items <= {c["id"] for c in copies}

    done = run_cli("quality", "near-duplicates", *sets)
    assert done.returncode == 0, done.stderr
    assert "near-duplicate cluster(s)" in done.stdout
    with duckdb.connect(str(out / "catalog.duckdb"), read_only=True) as con:
        clustered = con.execute("SELECT count(*) FROM question_clusters").fetchone()[0]
        asked = con.execute("SELECT count(*) FROM curriculum WHERE trim(question) <> ''")
        assert clustered == asked.fetchone()[0]

    with duckdb.connect(str(out / "catalog.duckdb"), read_only=True) as con:
        sql = "SELECT record_id FROM curriculum WHERE is_valid AND is_verbatim"
        selected = {r for (r,) in con.execute(sql).fetchall()}
    # the valid verbatim records whatever the LLM gates said: contamination alone drops here
    keep = ("--include-shortcuts", "--include-ambiguous", "--include-undetermined")
    done = run_cli("export", str(tmp_path / "exp"), "--format", "jsonl", "--where",
                   "is_valid AND is_verbatim", *keep, *sets)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"{len(want & selected)} contaminated" in done.stdout
    lines = (tmp_path / "exp" / "dropped.jsonl").read_bytes().splitlines()
    dropped = [orjson.loads(line) for line in lines]
    assert {d["record_id"] for d in dropped if d["reason"] == "contaminated"} == want & selected

    missing = run_cli("quality", "decontaminate", "--benchmark", str(tmp_path / "no.jsonl"), *sets)
    assert missing.returncode == 2 and "no such benchmark file" in missing.stderr


@pytest.mark.slow
def test_nightly_quality_step_checks_the_landed_catalog(landed_run, tmp_path, realdata):
    """quality.nightly: the step the nightly flow runs after landing, on a copy of the run."""
    from pipeline.retrieval.index_build import find_index
    from pipeline.run_context import RunContext
    from pipeline.stages import find_kg, quality_stage

    out, settings = landed_copy(landed_run, tmp_path)
    nq = realdata / "nq_test_16.jsonl"
    off = load_config(None, settings)
    ctx = RunContext.open(off, landed_run.run_id, Store.from_config(off))
    index, kg = find_index(off, ctx.corpus, ctx.store.root), find_kg(ctx)
    assert quality_stage(ctx, index, kg) is None  # off by default: nothing written
    assert not (out / "quality").exists()

    on = load_config(None, [*settings, "quality.nightly=true", f"quality.benchmarks=[{nq}]"])
    assert on.config_hash() == off.config_hash()  # the checks never change a run's identity
    ctx = RunContext.open(on, landed_run.run_id, Store.from_config(on))
    summary = quality_stage(ctx, index, kg)
    assert summary is not None and summary.run_id == landed_run.run_id
    with duckdb.connect(str(summary.catalog), read_only=True) as con:
        check = con.execute("SELECT benchmark, items, run_ids FROM benchmark_checks").fetchall()
        assert check == [("nq_test_16", NQ_ITEMS, [landed_run.run_id])]
        clustered = con.execute("SELECT count(*) FROM question_clusters").fetchone()[0]
        asked = con.execute("SELECT count(*) FROM curriculum WHERE trim(question) <> ''")
        assert clustered == asked.fetchone()[0] > 0
        f = con.execute("SELECT above_v_threshold, not_contaminated FROM funnel").fetchone()
        flagged = con.execute("SELECT count(*) FROM contamination").fetchone()[0]
    assert f[1] <= f[0] and f[0] - f[1] <= flagged
