"""Streamed mini-batch k-means over the passage embedding shards (EVE-Agent appendix F).

Memory stays flat in the corpus size: shards are read block by block with plain file reads (a
memory map would leave every touched page resident and counted in RSS), each block goes to
MiniBatchKMeans.partial_fit, and a second streamed pass writes each passage's cluster and
distance straight into a Parquet writer. Only O(N) int32 labels and float32 distances are kept.

A result lives in `<out_dir>/k=<K>-<key>/` and is reused whenever the key (inputs, K, seed and
fitting parameters) matches, so a fixed schedule (alpha = 0) clusters once for all iterations.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipeline.core.contracts import read_shard
from pipeline.core.io import atomic_path, atomic_write_text
from schemas.tables import CLUSTERS

log = logging.getLogger(__name__)

CLUSTERS_FILE = "clusters.parquet"
CENTROIDS_FILE = "centroids.npy"
META_FILE = "cluster_meta.json"  # written last: its presence commits the directory
ALGORITHM_VERSION = 1  # bump when the fitting procedure changes, so cached results are redone


# ---- reading .npy shards without a memory map ---------------------------------------------


@dataclass(frozen=True)
class NpyShard:
    """Where the rows of one C-ordered 2-D .npy file start and what they look like."""

    path: Path
    offset: int  # bytes before the first row (magic + header)
    rows: int
    dim: int
    dtype: np.dtype
    row_start: int  # global row of this shard's first vector

    @property
    def row_bytes(self) -> int:
        return self.dim * self.dtype.itemsize


def open_shards(paths: Sequence[str | Path]) -> list[NpyShard]:
    """Parse the .npy headers of consecutive shards (global rows run on across shards)."""
    shards: list[NpyShard] = []
    start, dim = 0, None
    for p in map(Path, paths):
        with p.open("rb") as fh:
            version = np.lib.format.read_magic(fh)
            if version == (1, 0):
                shape, fortran, dtype = np.lib.format.read_array_header_1_0(fh)
            else:
                shape, fortran, dtype = np.lib.format.read_array_header_2_0(fh)
            offset = fh.tell()
        if len(shape) != 2 or fortran or dtype.kind != "f":
            raise ValueError(f"{p}: expected a C-ordered 2-D float array, got {shape} {dtype}")
        if dim is not None and shape[1] != dim:
            raise ValueError(f"{p}: dimension {shape[1]} differs from earlier shards ({dim})")
        dim = int(shape[1])
        shards.append(NpyShard(p, offset, int(shape[0]), dim, np.dtype(dtype), start))
        start += int(shape[0])
    if not shards:
        raise ValueError("no embedding shards given")
    return shards


def _read_exact(fd: int, nbytes: int, offset: int) -> bytes:
    chunks, got = [], 0
    while got < nbytes:
        chunk = os.pread(fd, nbytes - got, offset + got)
        if not chunk:
            raise OSError(f"short read: wanted {nbytes} bytes at {offset}, got {got}")
        chunks.append(chunk)
        got += len(chunk)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def read_block(shard: NpyShard, start: int, stop: int) -> np.ndarray:
    """Rows [start, stop) of one shard (shard-local), as a fresh float32 array."""
    fd = os.open(shard.path, os.O_RDONLY)
    try:
        raw = _read_exact(
            fd, (stop - start) * shard.row_bytes, shard.offset + start * shard.row_bytes
        )
    finally:
        os.close(fd)
    return np.frombuffer(raw, dtype=shard.dtype).reshape(stop - start, shard.dim).astype(np.float32)


def read_rows(shards: Sequence[NpyShard], rows: np.ndarray) -> np.ndarray:
    """Scattered global rows (sorted or not) via one pread each; for small samples only."""
    rows = np.asarray(rows, dtype=np.int64)
    starts = np.array([s.row_start for s in shards], dtype=np.int64)
    which = np.searchsorted(starts, rows, side="right") - 1
    out = np.empty((len(rows), shards[0].dim), dtype=np.float32)
    for si in np.unique(which):
        shard = shards[si]
        fd = os.open(shard.path, os.O_RDONLY)
        try:
            for i in np.flatnonzero(which == si):
                local = int(rows[i] - shard.row_start)
                raw = _read_exact(fd, shard.row_bytes, shard.offset + local * shard.row_bytes)
                out[i] = np.frombuffer(raw, dtype=shard.dtype)
        finally:
            os.close(fd)
    return out


def _blocks(shards: Sequence[NpyShard], block_rows: int) -> list[tuple[int, int, int]]:
    """(shard index, local start, local stop) for fixed-size blocks that never cross shards."""
    out = []
    for i, s in enumerate(shards):
        out += [(i, a, min(a + block_rows, s.rows)) for a in range(0, s.rows, block_rows)]
    return out


# ---- result --------------------------------------------------------------------------------


@dataclass
class ClusterResult:
    """One clustering of the corpus: centroids plus each passage's cluster and distance."""

    dir: Path
    key: str
    iteration: int  # self-evolution iteration that first computed this clustering
    k: int  # clusters actually used (k_requested capped by the corpus size)
    k_requested: int
    seed: int
    centroids: np.ndarray  # (k, dim) float32
    assignments: np.ndarray  # (N,) int32 cluster id per passage row
    distances: np.ndarray  # (N,) float32 ||z_d - mu_k||
    passage_ids: pa.Array  # (N,) string, passage id per row
    inertia: float  # sum of squared distances

    @property
    def n_rows(self) -> int:
        return len(self.assignments)

    def members(self) -> tuple[np.ndarray, np.ndarray]:
        """(order, starts): rows of cluster c are order[starts[c]:starts[c + 1]], ascending."""
        order = np.argsort(self.assignments, kind="stable").astype(np.int64)
        counts = np.bincount(self.assignments, minlength=self.k)
        starts = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        return order, starts

    def sizes(self) -> np.ndarray:
        return np.bincount(self.assignments, minlength=self.k)

    @classmethod
    def load(cls, path: str | Path) -> ClusterResult:
        """Load a committed clustering directory (refuses one whose meta file is missing)."""
        path = Path(path)
        meta_path = path / META_FILE
        if not meta_path.exists():
            raise FileNotFoundError(f"{path}: no {META_FILE}; not a completed clustering")
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        tbl = read_shard(path / CLUSTERS_FILE, "clusters")
        rows = tbl.column("passage_row").to_numpy()
        if not np.array_equal(rows, np.arange(len(rows))):
            raise ValueError(f"{path / CLUSTERS_FILE}: passage_row is not 0..N-1 in order")
        return cls(
            dir=path,
            key=meta["key"],
            iteration=int(meta["iteration"]),
            k=int(meta["k"]),
            k_requested=int(meta["k_requested"]),
            seed=int(meta["seed"]),
            centroids=np.load(path / CENTROIDS_FILE),
            assignments=tbl.column("cluster_id").to_numpy().astype(np.int32),
            distances=tbl.column("distance").to_numpy().astype(np.float32),
            passage_ids=tbl.column("passage_id").combine_chunks(),
            inertia=float(meta["inertia"]),
        )


# ---- fitting -------------------------------------------------------------------------------


def _input_fingerprint(shards: Sequence[NpyShard]) -> str:
    h = hashlib.sha256()
    for s in shards:
        st = s.path.stat()
        h.update(f"{s.path.resolve()}|{st.st_size}|{st.st_mtime_ns}|{s.rows}\n".encode())
    return h.hexdigest()[:16]


def _as_id_array(
    passage_ids: pa.Array | pa.ChunkedArray | Sequence[str] | None, n: int
) -> pa.Array:
    if passage_ids is None:  # row numbers as ids, cast in Arrow (no Python strings)
        return pc.cast(pa.array(np.arange(n, dtype=np.int64)), pa.string())
    if isinstance(passage_ids, pa.ChunkedArray):
        arr = passage_ids.combine_chunks()
    elif isinstance(passage_ids, pa.Array):
        arr = passage_ids
    else:
        arr = pa.array(list(passage_ids), type=pa.string())
    if len(arr) != n:
        raise ValueError(f"{len(arr)} passage ids for {n} embedding rows")
    return arr.cast(pa.string())


def _assign(
    x: np.ndarray, centroids: np.ndarray, c_sq: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Nearest centroid and the exact Euclidean distance to it for one block."""
    d2 = np.einsum("ij,ij->i", x, x)[:, None] - 2.0 * (x @ centroids.T) + c_sq[None, :]
    labels = np.argmin(d2, axis=1)
    dist = np.linalg.norm(x - centroids[labels], axis=1)
    return labels.astype(np.int32), dist.astype(np.float32)


def cluster_embeddings(
    shard_paths: Sequence[str | Path],
    passage_ids: pa.Array | pa.ChunkedArray | Sequence[str] | None,
    k: int,
    seed: int,
    out_dir: str | Path,
    *,
    iteration: int = 0,
    batch_size: int = 4096,
    epochs: int = 2,
    min_steps: int = 50,
    reassignment_ratio: float = 0.01,
    fingerprint: str | None = None,
    reuse: bool = True,
    threads: int | None = 1,
) -> ClusterResult:
    """Cluster the embedding shards into min(k, N) clusters with streamed mini-batch k-means.

    Init: k-means++ on a random sample of max(3k, batch_size) rows. Fit: `epochs` passes (more
    when a pass has fewer than `min_steps` blocks, so a small corpus still converges) over
    fixed-size blocks in a seeded random order, one partial_fit per block. Then one streamed
    pass writes the CLUSTERS table. `fingerprint` identifies the inputs for reuse (e.g. the
    index fingerprint); by default it is derived from the shard files' paths, sizes and mtimes.

    `threads` caps OpenMP/BLAS threads while fitting (None: library default). Per-block work
    is small, and on a busy host OpenMP threads spin: one 4096x384 block took 90 ms with two
    contended threads and 10 ms with one, so 1 is the default.
    """
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=threads):
        return _cluster_corpus(
            shard_paths,
            passage_ids,
            k,
            seed,
            Path(out_dir),
            iteration=iteration,
            batch_size=batch_size,
            epochs=epochs,
            min_steps=min_steps,
            reassignment_ratio=reassignment_ratio,
            fingerprint=fingerprint,
            reuse=reuse,
        )


def _cluster_corpus(
    shard_paths: Sequence[str | Path],
    passage_ids: pa.Array | pa.ChunkedArray | Sequence[str] | None,
    k: int,
    seed: int,
    out_dir: Path,
    *,
    iteration: int,
    batch_size: int,
    epochs: int,
    min_steps: int,
    reassignment_ratio: float,
    fingerprint: str | None,
    reuse: bool,
) -> ClusterResult:
    from sklearn.cluster import MiniBatchKMeans, kmeans_plusplus

    shards = open_shards(shard_paths)
    n, dim = shards[-1].row_start + shards[-1].rows, shards[0].dim
    if n == 0:
        raise ValueError("the embedding shards hold no rows")
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    ids = _as_id_array(passage_ids, n)
    k_eff = min(k, n)
    if k_eff < k:
        log.warning("corpus has %d passages < K=%d: using K=%d clusters", n, k, k_eff)
    params = {
        "inputs": fingerprint or _input_fingerprint(shards),
        "n": n,
        "dim": dim,
        "k": k_eff,
        "seed": seed,
        "batch_size": batch_size,
        "epochs": epochs,
        "min_steps": min_steps,
        "reassignment_ratio": reassignment_ratio,
        "version": ALGORITHM_VERSION,
    }
    key = hashlib.sha256(json.dumps(params, sort_keys=True).encode()).hexdigest()[:16]
    target = Path(out_dir) / f"k={k_eff:04d}-{key}"
    if reuse and (target / META_FILE).exists():
        log.info("reusing clustering %s", target)
        return ClusterResult.load(target)

    # Init on a random sample spread over the whole corpus (shard order may be topical).
    rng = np.random.default_rng([seed, 0])
    m = min(n, max(3 * k_eff, batch_size))
    sample = read_rows(shards, np.sort(rng.choice(n, size=m, replace=False)))
    init, _ = kmeans_plusplus(sample, k_eff, random_state=seed)
    km = MiniBatchKMeans(
        n_clusters=k_eff,
        init=init,
        n_init=1,
        batch_size=batch_size,
        compute_labels=False,
        reassignment_ratio=reassignment_ratio,
        random_state=seed,
    )
    km.partial_fit(sample)
    del sample

    blocks = _blocks(shards, batch_size)
    passes = max(epochs, math.ceil(min_steps / len(blocks)))
    for epoch in range(passes):
        order = np.random.default_rng([seed, 1, epoch]).permutation(len(blocks))
        for bi in order:
            si, a, b = blocks[bi]
            km.partial_fit(read_block(shards[si], a, b))
    centroids = np.ascontiguousarray(km.cluster_centers_, dtype=np.float32)

    # Assignment pass, streamed into a temp Parquet file that is renamed when complete.
    target.mkdir(parents=True, exist_ok=True)
    assignments = np.empty(n, dtype=np.int32)
    distances = np.empty(n, dtype=np.float32)
    c_sq = np.einsum("ij,ij->i", centroids, centroids)
    inertia = 0.0
    with (
        atomic_path(target / CLUSTERS_FILE) as tmp,
        pq.ParquetWriter(tmp, CLUSTERS, compression="zstd", compression_level=3) as writer,
    ):
        for si, a, b in blocks:
            g0 = shards[si].row_start + a
            labels, dist = _assign(read_block(shards[si], a, b), centroids, c_sq)
            assignments[g0 : g0 + len(labels)] = labels
            distances[g0 : g0 + len(labels)] = dist
            inertia += float(np.sum(dist.astype(np.float64) ** 2))
            writer.write_table(
                pa.Table.from_arrays(
                    [
                        pa.array(np.full(len(labels), iteration, dtype=np.int32)),
                        pa.array(np.full(len(labels), k_eff, dtype=np.int32)),
                        pa.array(np.arange(g0, g0 + len(labels), dtype=np.int64)),
                        ids.slice(g0, len(labels)),
                        pa.array(labels),
                        pa.array(dist),
                    ],
                    schema=CLUSTERS,
                )
            )
    with atomic_path(target / CENTROIDS_FILE) as tmp_c:
        np.save(tmp_c, centroids)
    meta = {
        **params,
        "key": key,
        "iteration": iteration,
        "k_requested": k,
        "inertia": inertia,
        "passes": passes,
        "created_at": dt.datetime.now(dt.UTC).isoformat(),
    }
    atomic_write_text(target / META_FILE, json.dumps(meta, indent=2, sort_keys=True) + "\n")
    log.info(
        "clustered %d passages into %d clusters (inertia %.4g) -> %s", n, k_eff, inertia, target
    )
    return ClusterResult(
        target, key, iteration, k_eff, k, seed, centroids, assignments, distances, ids, inertia
    )


def index_inputs(index_dir: str | Path) -> tuple[list[Path], pa.Array, str | None]:
    """Embedding shard paths (manifest order), passage ids (row order) and a content
    fingerprint (hash of the shards' recorded sha256, None without a manifest) of an index."""
    index_dir = Path(index_dir)
    emb = index_dir / "emb"
    manifest = emb / "embeddings_manifest.parquet"
    fingerprint = None
    if manifest.exists():
        rows = sorted(
            read_shard(manifest, "embeddings_manifest").to_pylist(), key=lambda r: r["shard"]
        )
        paths = [emb / r["path"] for r in rows]
        digest = hashlib.sha256("|".join(r["sha256"] for r in rows).encode())
        fingerprint = digest.hexdigest()[:16]
    else:
        paths = sorted(emb.glob("emb-*.npy"))
    tbl = pq.read_table(index_dir / "passages.parquet", columns=["id", "row"])
    if not np.array_equal(tbl.column("row").to_numpy(), np.arange(tbl.num_rows)):
        tbl = tbl.sort_by("row")
    return paths, tbl.column("id").combine_chunks(), fingerprint


def cluster_index(
    index_dir: str | Path, k: int, seed: int, out_dir: str | Path, **kwargs
) -> ClusterResult:
    """`cluster_embeddings` over an index directory's embedding shards and passages table."""
    paths, ids, fingerprint = index_inputs(index_dir)
    kwargs.setdefault("fingerprint", fingerprint)
    return cluster_embeddings(paths, ids, k, seed, out_dir, **kwargs)


__all__ = [
    "ClusterResult",
    "NpyShard",
    "cluster_embeddings",
    "cluster_index",
    "index_inputs",
    "open_shards",
    "read_block",
    "read_rows",
]
