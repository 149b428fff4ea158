"""Run the quality checks over the whole landed catalog and commit their tables.

`decontaminate_catalog` checks every record against each benchmark file and replaces that
benchmark's `benchmark_matches` / `benchmark_checks` files; `cluster_catalog` replaces the
`question_clusters` table. Files are written atomically under `<out>/quality/<table>/`, where
every catalog refresh picks them up (`Store.refresh_catalog`), so a benchmark added later is
checked against every existing record without regenerating anything.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from pipeline.core.config import PipelineConfig
from pipeline.core.errors import BadInputError
from pipeline.core.io import utcnow, write_parquet_atomic
from pipeline.quality.benchmarks import Benchmark, BenchmarkError, load_benchmark
from pipeline.quality.decontamination import METHODS, Match, decontaminate
from pipeline.quality.near_duplicates import (
    Clustered,
    cluster,
    minhash_edges,
    semantic_edges,
)
from pipeline.store.store import Store, StoreError, connect_readonly
from schemas.tables import schema_for

Encode = Callable[[list[str]], np.ndarray]

# What the checks read of each record; the evidence passage's title comes from `passages`.
RECORDS_SQL = """
SELECT c.record_id, c.run_id, c.question, c.answer, c.evidence,
       coalesce(p.title, CASE WHEN c.evidence_passage_id = c.source_passage_id
                              THEN c.source_title END) AS evidence_title
FROM curriculum c LEFT JOIN passages p ON p.id = c.evidence_passage_id
ORDER BY c.record_id
"""


def catalog_records(catalog: str | Path) -> list[dict[str, Any]]:
    """Every record of the catalog with the fields the checks compare (read-only)."""
    try:
        con = connect_readonly(catalog)
    except StoreError as exc:
        raise BadInputError(str(exc), "run `curriculum nightly` first") from exc
    with con:
        return con.sql(RECORDS_SQL).to_arrow_table().to_pylist()


def embedder_encode(cfg: PipelineConfig) -> tuple[Encode, str]:
    """The run's embedder on the query side, L2-normalised whatever `embedding.normalize` says
    (thresholds are cosines); loaded once per command."""
    from pipeline.retrieval.embedding import Embedder

    embedder = Embedder.from_config(cfg)

    def encode(texts: list[str]) -> np.ndarray:
        v = embedder.encode_queries(texts)
        return v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)

    return encode, embedder.model_ref


@dataclass
class BenchmarkResult:
    benchmark: Benchmark
    matches: list[Match]
    flagged: list[str]  # record ids with at least one match
    by_method: dict[str, int] = field(default_factory=dict)  # records flagged per method


def decontaminate_catalog(
    cfg: PipelineConfig,
    store: Store,
    benchmarks: Sequence[str | Path],
    encode: Encode | None = None,
    embedder_model: str | None = None,
) -> list[BenchmarkResult]:
    """Check every catalog record against each benchmark and commit the matches (one file per
    benchmark, replacing an earlier check of the same name). The caller refreshes the catalog."""
    q = cfg.quality
    loaded = [load_benchmark(p) for p in benchmarks]
    names = [b.name for b in loaded]
    if dupes := sorted({n for n in names if names.count(n) > 1}):
        raise BenchmarkError(
            f"two benchmark files are both named {dupes[0]!r}",
            "a benchmark is named by its file name: rename one of them",
        )
    records = catalog_records(store.catalog_path)
    run_ids = sorted({r["run_id"] for r in records})
    use_embedding = q.embedding and encode is not None
    results = []
    for bench in loaded:
        checked_at = utcnow()
        matches = decontaminate(
            records,
            bench,
            q.ngram_n,
            q.ngram_threshold,
            q.embedding_threshold if use_embedding else None,
            encode if use_embedding else None,
        )
        flagged = sorted({m.record_id for m in matches})
        by_method = {
            meth: len({m.record_id for m in matches if m.method == meth}) for meth in METHODS
        }
        _write(store, "benchmark_matches", bench.name, [_match_row(m, checked_at) for m in matches])
        check = {
            "benchmark": bench.name,
            "path": str(bench.path),
            "sha256": bench.sha256,
            "items": len(bench.items),
            "records_checked": len(records),
            "run_ids": run_ids,
            "methods": [m for m in METHODS if use_embedding or m != "embedding"],
            "ngram_n": q.ngram_n,
            "ngram_threshold": q.ngram_threshold,
            "embedding_threshold": q.embedding_threshold if use_embedding else None,
            "embedder_model": embedder_model if use_embedding else None,
            "records_flagged": len(flagged),
            "checked_at": checked_at,
        }
        _write(store, "benchmark_checks", bench.name, [check])
        results.append(BenchmarkResult(bench, matches, flagged, by_method))
    return results


def _match_row(m: Match, checked_at: dt.datetime) -> dict[str, Any]:
    return {**m.__dict__, "checked_at": checked_at}


def _write(store: Store, table: str, name: str, rows: list[dict[str, Any]]) -> Path:
    path = store.quality_path(table, name)
    write_parquet_atomic(path, pa.Table.from_pylist(rows, schema=schema_for(table)))
    return path


@dataclass
class ClusterResult:
    records: int
    clusters: int  # clusters of two or more records
    duplicates: int  # records beyond one per cluster (what an export drops at most)
    edges: dict[str, int]


def cluster_catalog(
    cfg: PipelineConfig, store: Store, encode: Encode | None = None
) -> ClusterResult:
    """Near-duplicate clusters over every question of the catalog; replaces the table."""
    q = cfg.quality
    records = [r for r in catalog_records(store.catalog_path) if (r["question"] or "").strip()]
    questions = [r["question"] for r in records]
    edges = minhash_edges(questions, q.minhash_threshold, q.minhash_num_perm)
    n_minhash = len(edges)
    if encode is not None and q.embedding and records:
        edges += semantic_edges(
            encode(questions), q.duplicate_embedding_threshold, q.duplicate_neighbours
        )
    clustered = cluster([r["record_id"] for r in records], edges)
    computed_at = utcnow()
    rows = [
        {**c.__dict__, "run_id": r["run_id"], "computed_at": computed_at}
        for r, c in zip(records, clustered, strict=True)
    ]
    _write(store, "question_clusters", "catalog", rows)
    return ClusterResult(
        len(records),
        len({c.cluster_id for c in clustered if c.cluster_size > 1}),
        sum(1 for c in clustered if c.cluster_size > 1 and c.cluster_id != c.record_id),
        {"minhash": n_minhash, "embedding": len(edges) - n_minhash},
    )


__all__ = [
    "BenchmarkResult",
    "ClusterResult",
    "Clustered",
    "catalog_records",
    "cluster_catalog",
    "decontaminate_catalog",
    "embedder_encode",
]
