"""Streamed mini-batch k-means over .npy embedding shards (selector clustering)."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pyarrow as pa
import pytest

from pipeline.core.contracts import read_shard
from pipeline.core.io import write_parquet_atomic
from pipeline.selector import ClusterResult, cluster_count, cluster_embeddings, cluster_index
from pipeline.selector.clustering import open_shards, read_block, read_rows
from schemas.tables import EMBEDDINGS_MANIFEST, PASSAGES


def blobs(n_per: int, centers: np.ndarray, seed: int = 0, noise: float = 0.05) -> np.ndarray:
    """Well-separated Gaussian blobs, rows interleaved so shards are not topical."""
    rng = np.random.default_rng(seed)
    labels = np.tile(np.arange(len(centers)), n_per)
    x = centers[labels] + noise * rng.normal(size=(len(labels), centers.shape[1]))
    return x.astype(np.float32), labels


def write_shards(tmp_path, x: np.ndarray, sizes: list[int], dtype=np.float32) -> list:
    paths, start = [], 0
    for i, size in enumerate(sizes):
        p = tmp_path / f"emb-{i:05d}.npy"
        np.save(p, x[start : start + size].astype(dtype))
        paths.append(p)
        start += size
    assert start == len(x)
    return paths


CENTERS = np.array(
    [[1, 0, 0, 0, 0, 0], [0, 1, 0, 0, 0, 0], [0, 0, 1, 0, 0, 0], [0, 0, 0, 1, 0, 0]], float
)


def test_schedule_k_t():
    # K_t = K0 + floor(alpha t): K0 = 10, alpha = 0.5 -> t = 0, 1, 2, 3 -> 10, 10, 11, 11
    assert [cluster_count(10, 0.5, t) for t in range(4)] == [10, 10, 11, 11]
    assert [cluster_count(10, 0.0, t) for t in (0, 50)] == [10, 10]
    with pytest.raises(ValueError):
        cluster_count(10, -1.0, 1)


def test_reader_matches_numpy_without_mmap(tmp_path):
    x = np.random.default_rng(0).normal(size=(23, 5)).astype(np.float32)
    paths = write_shards(tmp_path, x, [10, 13])
    (tmp_path / "half").mkdir()
    paths16 = write_shards(tmp_path / "half", x, [23], dtype=np.float16)
    shards = open_shards(paths)
    assert [(s.rows, s.row_start) for s in shards] == [(10, 0), (13, 10)]
    np.testing.assert_array_equal(read_block(shards[1], 2, 7), x[12:17])
    np.testing.assert_array_equal(read_rows(shards, np.array([22, 0, 11, 9])), x[[22, 0, 11, 9]])
    half = read_block(open_shards(paths16)[0], 0, 23)
    assert half.dtype == np.float32
    np.testing.assert_allclose(half, x, atol=1e-2)


def test_recovers_blobs_streamed_over_shards(tmp_path):
    x, labels = blobs(150, CENTERS)  # 600 rows
    paths = write_shards(tmp_path, x, [250, 100, 250])
    ids = [f"doc-{i}" for i in range(len(x))]
    res = cluster_embeddings(paths, ids, 4, seed=3, out_dir=tmp_path / "clusters", batch_size=64)
    assert res.k == 4 and res.n_rows == 600
    # every true blob is exactly one cluster
    pairs = set(zip(labels.tolist(), res.assignments.tolist(), strict=True))
    assert len(pairs) == 4 and len({c for _, c in pairs}) == 4
    # each assignment is the nearest centroid and the distance is exact
    d = np.linalg.norm(x[:, None, :] - res.centroids[None, :, :], axis=2)
    np.testing.assert_array_equal(res.assignments, d.argmin(axis=1))
    np.testing.assert_allclose(res.distances, d.min(axis=1), rtol=1e-5, atol=1e-6)
    assert res.inertia == pytest.approx(float(np.sum(d.min(axis=1) ** 2)), rel=1e-4)
    # the CLUSTERS table honours its contract and matches the in-memory result
    tbl = read_shard(res.dir / "clusters.parquet", "clusters")
    assert tbl.num_rows == 600
    assert tbl.column("passage_id").to_pylist() == ids
    assert tbl.column("passage_row").to_pylist() == list(range(600))
    assert set(tbl.column("k").to_pylist()) == {4}
    np.testing.assert_array_equal(tbl.column("cluster_id").to_numpy(), res.assignments)
    # and loads back identically
    again = ClusterResult.load(res.dir)
    np.testing.assert_array_equal(again.centroids, res.centroids)
    np.testing.assert_array_equal(again.distances, res.distances)
    assert again.key == res.key and again.passage_ids.equals(res.passage_ids)


def test_deterministic_reused_and_keyed_by_k(tmp_path):
    x, _ = blobs(50, CENTERS, seed=1)
    paths = write_shards(tmp_path, x, [200])
    a = cluster_embeddings(paths, None, 4, seed=5, out_dir=tmp_path / "a", batch_size=32)
    b = cluster_embeddings(paths, None, 4, seed=5, out_dir=tmp_path / "b", batch_size=32)
    np.testing.assert_array_equal(a.centroids, b.centroids)
    np.testing.assert_array_equal(a.assignments, b.assignments)
    assert a.key == b.key and a.passage_ids.to_pylist()[:2] == ["0", "1"]
    # same inputs and parameters -> the committed directory is reused, not recomputed
    stamp = (a.dir / "clusters.parquet").stat().st_mtime_ns
    c = cluster_embeddings(paths, None, 4, seed=5, out_dir=tmp_path / "a", batch_size=32)
    assert c.dir == a.dir and (a.dir / "clusters.parquet").stat().st_mtime_ns == stamp
    # a different K is a different clustering next to it
    d = cluster_embeddings(paths, None, 6, seed=5, out_dir=tmp_path / "a", batch_size=32)
    assert d.dir != a.dir and d.k == 6
    assert sorted(p.name.split("-")[0] for p in (tmp_path / "a").iterdir()) == [
        "k=0004",
        "k=0006",
    ]


def test_k_capped_by_corpus_size(tmp_path):
    x = np.random.default_rng(0).normal(size=(3, 4)).astype(np.float32)
    res = cluster_embeddings(write_shards(tmp_path, x, [3]), ["a", "b", "c"], 10, 0, tmp_path / "c")
    assert (res.k, res.k_requested) == (3, 10)
    assert sorted(res.assignments.tolist()) == [0, 1, 2]
    assert res.distances == pytest.approx([0, 0, 0], abs=1e-5)


def test_rejects_mismatched_ids(tmp_path):
    x = np.zeros((5, 2), np.float32)
    with pytest.raises(ValueError, match="4 passage ids for 5"):
        cluster_embeddings(write_shards(tmp_path, x, [5]), ["a"] * 4, 2, 0, tmp_path / "c")


def test_cluster_index_reads_manifest_and_passages(tmp_path):
    index = tmp_path / "index" / "abc123"
    emb = index / "emb"
    emb.mkdir(parents=True)
    x, labels = blobs(20, CENTERS, seed=2)  # 80 rows in two shards
    write_shards(emb, x, [50, 30])
    now = dt.datetime.now(dt.UTC)
    manifest = [
        {
            "shard": s,
            "path": f"emb-{s:05d}.npy",
            "row_start": a,
            "row_end": b,
            "dim": 6,
            "model": "m",
            "passage_prompt": "",
            "normalized": False,
            "sha256": f"sha{s}",
            "corpus_fingerprint": "fp",
            "created_at": now,
        }
        for s, a, b in ((1, 50, 80), (0, 0, 50))  # out of order on purpose
    ]
    write_parquet_atomic(
        emb / "embeddings_manifest.parquet", pa.Table.from_pylist(manifest, EMBEDDINGS_MANIFEST)
    )
    passages = [
        {
            "id": f"w{i}",
            "title": "t",
            "text": "x",
            "char_len": 1,
            "row": i,
            "source_file": "f",
            "source_line": i + 1,
        }
        for i in range(80)
    ]
    write_parquet_atomic(index / "passages.parquet", pa.Table.from_pylist(passages, PASSAGES))
    res = cluster_index(index, 4, 0, tmp_path / "clusters", batch_size=16)
    assert res.passage_ids.to_pylist() == [f"w{i}" for i in range(80)]
    assert len(set(zip(labels.tolist(), res.assignments.tolist(), strict=True))) == 4
