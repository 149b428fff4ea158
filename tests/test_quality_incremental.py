"""The quality checks a night at a time: a pass reads and compares only the runs no
earlier pass checked, and the tables it leaves equal what a full recheck of the catalog gives.

Real stores (Store.write_shard / commit, refreshed catalogs) of authored questions, lexical
methods only (no model); the pure parts (band keys, the cluster merge) against datasketch's
LSH and against clustering everything at once."""

from __future__ import annotations

import datetime as dt
import random

import duckdb
import orjson
import pyarrow.parquet as pq
import pytest

from pipeline.core.config import load_config
from pipeline.quality.checks import decontaminate_catalog
from pipeline.quality.cluster_check import cluster_catalog
from pipeline.quality.near_duplicates import (
    MINHASH_SEED,
    Edge,
    cluster,
    jaccard,
    merge_clusters,
    minhash_edges,
    word_set,
)
from pipeline.store.store import Store
from tests.test_quality import _curriculum_row, _land

# Two nights of history, then a third. In the third: m1 rewords m5 (n1) and, a smaller id,
# renames its cluster; b9 joins the cluster b3 (n1) + b7 (n2) already had; x1 repeats d2
# (n2), a larger id; z9 copies a benchmark question; c1 (n1) is another benchmark copy.
HISTORY = {
    "n1": {
        "m5": "How many moons does the planet Mars have?",
        "b3": "Which river flows through the city of Vienna?",
        "c1": "Who painted the ceiling of the Sistine Chapel?",
        "e1": None,  # not posed: counted, never clustered
    },
    "n2": {
        "b7": "Through the city of Vienna, which river flows?",
        "d2": "In which year did the Berlin Wall fall?",
        "k4": "Who discovered penicillin in 1928?",
    },
}
NIGHT = {
    "m1": "Does the planet Mars have how many moons",
    "b9": "which river flows through the city of Vienna",
    "x1": "In which year did the Berlin Wall fall?",
    "z9": "What is the capital city of Australia?",
}
BENCH = [
    {"id": "q1", "question": "who painted the ceiling of sistine chapel", "golden_answers": ["x"]},
    {"id": "q2", "question": "What is the capital city of Australia", "golden_answers": ["y"]},
]
STAMPS = {  # the tables' files, and the column that says when a row was written
    "question_minhash": "checked_at",
    "question_duplicates": "computed_at",
    "benchmark_matches": "checked_at",
    "benchmark_checks": "checked_at",
}


def _rows(run_id: str, questions: dict[str, str | None]) -> list[dict]:
    return [
        _curriculum_row(record_id=rid, run_id=run_id, question=q, answer=f"ans {rid}",
                        source_passage_id=f"p-{rid}", evidence_passage_id=f"p-{rid}")
        for rid, q in questions.items()
    ]  # fmt: skip


def _tables(root) -> dict[str, list[tuple]]:
    """Every quality table's rows but their timestamps, in one order."""
    out = {}
    for table, stamp in STAMPS.items():
        files = [str(p) for p in sorted((root / "quality" / table).glob("*.parquet"))]
        sql = f"SELECT * EXCLUDE ({stamp}) FROM read_parquet(?) ORDER BY ALL"
        out[table] = duckdb.sql(sql, params=[files]).fetchall() if files else []
    return out


def _full_recheck(cfg, store: Store, bench, tmp_path) -> dict[str, list[tuple]]:
    """The tables a full recheck of the same catalog writes (into a fresh quality folder)."""
    fresh = Store(tmp_path / "fresh", store.catalog_path)
    assert not (fresh.root / "quality").exists()
    assert cluster_catalog(cfg, fresh).full
    assert decontaminate_catalog(cfg, fresh, [bench])[0].full
    return _tables(fresh.root)


@pytest.fixture
def history(tmp_path):
    """Two nights landed and checked by both gates (the first pass: everything)."""
    out = tmp_path / "out"
    cfg = load_config(
        None,
        [f"store.out_dir={out}", f"store.catalog={out / 'c.duckdb'}", "quality.embedding=false"],
    )
    store = Store.from_config(cfg)
    bench = tmp_path / "bench.jsonl"
    bench.write_bytes(b"\n".join(orjson.dumps(b) for b in BENCH) + b"\n")
    for run_id, questions in HISTORY.items():
        _land(store, run_id, _rows(run_id, questions))
    store.refresh_catalog()
    clustered = cluster_catalog(cfg, store)
    [checked] = decontaminate_catalog(cfg, store, [bench])
    assert clustered.full and checked.full and checked.runs_checked == ["n1", "n2"]
    return cfg, store, bench


def _mtimes(root) -> dict:
    return {p: p.stat().st_mtime_ns for p in (root / "quality").rglob("*.parquet")}


def test_a_new_night_is_checked_alone_and_equals_a_full_recheck(history, tmp_path):
    cfg, store, bench = history
    earlier = _mtimes(store.root)
    _land(store, "n3", _rows("n3", NIGHT))
    catalog = store.refresh_catalog()
    with duckdb.connect(str(catalog), read_only=True) as con:
        cov = con.execute("SELECT runs_unchecked FROM benchmark_coverage").fetchall()
        assert cov == [(["n3"],)]

    clusters = cluster_catalog(cfg, store)
    [checked] = decontaminate_catalog(cfg, store, [bench])
    # Only the night's records were read and compared ...
    assert not clusters.full and clusters.checked == len(NIGHT)
    assert clusters.changed == 4  # m5, b3 + b7 and d2 have new cluster members
    assert (clusters.records, clusters.clusters, clusters.duplicates) == (10, 3, 4)
    assert not checked.full and checked.runs_checked == ["n3"]
    assert checked.records_checked == len(NIGHT) and checked.flagged == ["z9"]
    assert checked.records_flagged == 2  # c1, flagged by the first pass, and z9
    # ... the earlier runs' files were not rewritten (only the one file of duplicates and
    # the per-benchmark summaries were) ...
    now = _mtimes(store.root)
    rewritten = {p.relative_to(store.root).as_posix() for p in earlier if now[p] != earlier[p]}
    assert rewritten == {
        "quality/question_duplicates/catalog.parquet",
        "quality/benchmark_checks/bench.parquet",
        "quality/state/decontamination_runs/bench.parquet",
    }
    # ... and the tables are a full recheck's.
    assert _tables(store.root) == _full_recheck(cfg, store, bench, tmp_path)

    catalog = store.refresh_catalog()
    with duckdb.connect(str(catalog), read_only=True) as con:
        dup = con.execute(
            "SELECT cluster_id, list(record_id ORDER BY record_id), any_value(cluster_size) "
            "FROM near_duplicates GROUP BY 1 ORDER BY 1"
        ).fetchall()
        assert dup == [
            ("b3", ["b3", "b7", "b9"], 3),  # b9 joined the old cluster under its old name
            ("d2", ["d2", "x1"], 2),
            ("m1", ["m1", "m5"], 2),  # m1 < m5: the new record names the merged cluster
        ]
        flagged = con.execute("SELECT record_id FROM contamination ORDER BY 1").fetchall()
        assert flagged == [("c1",), ("z9",)]
        cov = con.execute(
            "SELECT records_checked, records_flagged, runs_unchecked FROM benchmark_coverage"
        ).fetchall()
        assert cov == [(11, 2, [])]
    layout = {t: sorted(p.name for p in (store.root / "quality" / t).glob("*")) for t in STAMPS}
    assert layout == {
        "question_minhash": ["n1.parquet", "n2.parquet", "n3.parquet"],
        "question_duplicates": ["catalog.parquet"],
        "benchmark_matches": ["n1.parquet", "n3.parquet"],  # n2 matched nothing: no file
        "benchmark_checks": ["bench.parquet"],
    }

    # Nothing landed since: nothing is read again, no file is rewritten but the summary row
    # of benchmark_checks (its checked_at is the latest pass).
    stamps = _mtimes(store.root)
    again = cluster_catalog(cfg, store)
    [same] = decontaminate_catalog(cfg, store, [bench])
    assert (again.full, again.checked, same.full, same.records_checked) == (False, 0, False, 0)
    assert same.records_flagged == 2 and again.clusters == 3
    now = _mtimes(store.root)
    assert len(now) == 8 and [p.name for p in now if now[p] != stamps[p]] == ["bench.parquet"]


def test_a_run_that_lands_more_records_is_checked_for_those(history, tmp_path):
    cfg, store, bench = history
    more = {"m7": "Which river flows through Vienna city?", "c8": "who painted the Sistine Chapel?"}
    f = store.write_shard("curriculum", "n2", dt.date(2026, 1, 2), "00001", _rows("n2", more))
    store.commit("n2", "00001", [f])
    store.refresh_catalog()
    clusters = cluster_catalog(cfg, store)
    [checked] = decontaminate_catalog(cfg, store, [bench])
    assert not clusters.full and clusters.checked == len(more)
    assert not checked.full and checked.runs_checked == ["n2"] and checked.records_checked == 5
    assert _tables(store.root) == _full_recheck(cfg, store, bench, tmp_path)


def test_a_run_that_leaves_the_catalog_is_taken_out_of_clusters_and_checks(history, tmp_path):
    """Retention moves a whole run out of the store (runs/<id>/ renamed away, then a
    refresh): the next pass takes its records out of their clusters (b7 leaves b3's, d2's
    cluster is gone) without reclustering the rest, and out of the benchmark checks."""
    cfg, store, bench = history
    (store.root / "runs" / "n2").rename(tmp_path / "pruned-n2")
    store.refresh_catalog()
    clusters = cluster_catalog(cfg, store)
    [checked] = decontaminate_catalog(cfg, store, [bench])
    assert not clusters.full and clusters.checked == 0 and clusters.changed == 2  # b3, b7
    assert (clusters.records, clusters.clusters) == (3, 0)
    assert not checked.full and checked.records_checked == 0
    assert _tables(store.root) == _full_recheck(cfg, store, bench, tmp_path / "a")
    assert not (store.root / "quality" / "question_minhash" / "n2.parquet").exists()

    _land(store, "n3", _rows("n3", NIGHT))  # b9 joins b3 again; x1 has no d2 to join
    store.refresh_catalog()
    clusters = cluster_catalog(cfg, store)
    [checked] = decontaminate_catalog(cfg, store, [bench])
    assert not clusters.full and not checked.full and checked.runs_checked == ["n3"]
    assert _tables(store.root) == _full_recheck(cfg, store, bench, tmp_path / "b")
    catalog = store.refresh_catalog()
    with duckdb.connect(str(catalog), read_only=True) as con:
        dup = con.execute(
            "SELECT cluster_id, list(record_id ORDER BY record_id) FROM near_duplicates "
            "GROUP BY 1 ORDER BY 1"
        ).fetchall()
        assert dup == [("b3", ["b3", "b9"]), ("m1", ["m1", "m5"])]
        cov = con.execute("SELECT records_checked, run_ids FROM benchmark_checks").fetchall()
        assert cov == [(8, ["n1", "n3"])]


def test_a_changed_benchmark_file_or_setting_rechecks_every_run(history, tmp_path):
    cfg, store, bench = history
    [before] = decontaminate_catalog(cfg, store, [bench])
    assert before.records_checked == 0 and before.records_flagged == 1  # c1
    # The same file name with another item: its sha256 changed, every run is read again.
    extra = {"id": "q3", "question": "Who discovered penicillin in 1928", "golden_answers": ["z"]}
    bench.write_bytes(bench.read_bytes() + orjson.dumps(extra) + b"\n")
    [after] = decontaminate_catalog(cfg, store, [bench])
    assert after.full and after.runs_checked == ["n1", "n2"] and after.records_checked == 7
    assert after.flagged == ["c1", "k4"] and after.records_flagged == 2
    # Another n-gram threshold: another check, of everything.
    looser = cfg.model_copy(
        update={"quality": cfg.quality.model_copy(update={"ngram_threshold": 0.5})}
    )
    [relaxed] = decontaminate_catalog(looser, store, [bench])
    assert relaxed.full and relaxed.records_checked == 7
    [again] = decontaminate_catalog(looser, store, [bench])
    assert not again.full and again.records_checked == 0
    # --full rechecks everything whatever the state says.
    assert decontaminate_catalog(looser, store, [bench], full=True)[0].records_checked == 7
    assert cluster_catalog(cfg, store, full=True).reason == "--full"
    other = cfg.model_copy(
        update={"quality": cfg.quality.model_copy(update={"minhash_threshold": 0.7})}
    )
    assert cluster_catalog(other, store).reason == "other settings than the earlier pass"


def test_the_one_file_layout_of_earlier_checks_is_replaced(history, tmp_path):
    """Stores checked by earlier versions: question_clusters/catalog.parquet (every record's row)
    and one matches file per benchmark, no state. The next pass rechecks all and leaves the
    new layout, with the same rows."""
    cfg, store, bench = history
    q = store.root / "quality"
    want = _tables(store.root)
    with duckdb.connect(str(store.refresh_catalog()), read_only=True) as con:
        clusters = con.sql("SELECT * FROM question_clusters").to_arrow_table()
    (q / "question_clusters").mkdir()
    pq.write_table(clusters, q / "question_clusters" / "catalog.parquet")
    matches = sorted((q / "benchmark_matches").glob("*.parquet"))
    data = duckdb.sql("SELECT * FROM read_parquet(?)", params=[[str(p) for p in matches]])
    pq.write_table(data.to_arrow_table(), q / "benchmark_matches" / "bench.parquet")
    for p in [*matches, *(q / "state").rglob("*.parquet"), *(q / "question_minhash").glob("*")]:
        p.unlink()
    (q / "question_duplicates" / "catalog.parquet").unlink()
    assert cluster_catalog(cfg, store).full
    assert decontaminate_catalog(cfg, store, [bench])[0].full
    assert not (q / "question_clusters" / "catalog.parquet").exists()
    assert not (q / "benchmark_matches" / "bench.parquet").exists()
    assert _tables(store.root) == want


# ---- the pure parts ---------------------------------------------------------------------


def test_band_keys_propose_what_datasketch_lsh_proposes():
    """minhash_edges (stored band keys) finds exactly the pairs datasketch's MinHashLSH does,
    on questions with planted variants (words dropped, added, reordered)."""
    from datasketch import MinHash, MinHashLSH

    rng = random.Random(3)
    words = [f"w{i}" for i in range(300)]
    qs = []
    for _ in range(150):
        base = rng.sample(words, rng.randint(5, 14))
        qs.append(" ".join(base))
        for _ in range(rng.randint(0, 2)):
            v = base[:]
            rng.shuffle(v)
            if rng.random() < 0.5:
                v.pop()
            if rng.random() < 0.3:
                v.append(rng.choice(words))
            qs.append(" ".join(v))
    sets = [word_set(x) for x in qs]
    hashes = MinHash.bulk(([w.encode() for w in s] for s in sets), num_perm=128, seed=MINHASH_SEED)
    lsh = MinHashLSH(threshold=0.8, num_perm=128)
    for i, mh in enumerate(hashes):
        lsh.insert(i, mh)
    want = {
        (i, j, jaccard(sets[i], sets[j]))
        for i, mh in enumerate(hashes)
        for j in lsh.query(mh)
        if j > i and jaccard(sets[i], sets[j]) >= 0.8
    }
    got = {(e.i, e.j, e.score) for e in minhash_edges(qs, 0.8, 128)}
    assert got == want and len(want) > 50


def test_merging_new_records_equals_clustering_everything():
    """On random graphs (scores drawn from a few values, so ties happen), `merge_clusters`
    over the earlier clusters gives every row that `cluster` over all records (in record_id
    order, as the checks read them) gives."""
    rng = random.Random(7)
    for _ in range(300):
        n = rng.randint(2, 25)
        ids = sorted(rng.sample([f"r{k:03d}" for k in range(100)], n))  # catalog order
        pairs = {tuple(sorted(rng.sample(range(n), 2))) for _ in range(rng.randint(0, 2 * n))}
        edges = [Edge(i, j, "minhash", rng.choice([0.8, 0.9, 1.0])) for i, j in sorted(pairs)]
        everything = {c.record_id: c for c in cluster(ids, edges)}
        old = sorted(rng.sample(range(n), rng.randint(1, n - 1)))
        at = {k: x for x, k in enumerate(old)}
        before = cluster(
            [ids[k] for k in old],
            [Edge(at[e.i], at[e.j], e.method, e.score) for e in edges if e.i in at and e.j in at],
        )
        new = [ids[k] for k in range(n) if k not in at]
        fresh = [(ids[e.i], ids[e.j], e.method, e.score) for e in edges
                 if e.i not in at or e.j not in at]  # fmt: skip
        touched = {x for e in fresh for x in e[:2]} - set(new)
        names = {c.cluster_id for c in before if c.record_id in touched}
        members = [c for c in before if c.cluster_id in names]
        merged = merge_clusters(members, new, fresh)
        assert {c.record_id for c in merged} == {c.record_id for c in members} | set(new)
        for c in merged:
            assert c == everything[c.record_id]
        for c in before:  # the rest of the earlier clustering is still right
            if c.cluster_id not in names:
                assert c == everything[c.record_id]
