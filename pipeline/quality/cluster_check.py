"""The near-duplicate check over the landed catalog, a night at a time:
`cluster_catalog`. A run's questions are MinHashed once (`question_minhash/<run_id>.parquet`:
every record, its Norm(question) and LSH band keys); a new night's keys are joined in DuckDB
with every stored key, an edge kept at the true Jaccard, and the edges merged into the
earlier clusters (`merge_clusters`). The rows of clusters of two or more are one file,
`question_duplicates/catalog.parquet`, rewritten when a night's questions join or merge
clusters (streamed through DuckDB: a pass holds the clusters it touches, not the year's); any
other checked question is its own cluster, so the earlier runs' files are never rewritten.
The `question_clusters` view (schemas/views.sql) puts the two together. The embedding method
(quality.embedding with an encoder) has no incremental form here (k-nearest-neighbour edges
can vanish when records arrive): with it, every pass is a full recompute. The catalog helpers
it shares with decontamination are in checks.py.
"""

from __future__ import annotations

import datetime as dt
import itertools
from collections import defaultdict
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.agents.rewards import normalize
from pipeline.core.config import PipelineConfig
from pipeline.core.io import path_within, utcnow, write_parquet_parts_atomic
from pipeline.core.parquet_sql import sql_string
from pipeline.quality.checks import QUESTIONS_SQL, Encode, open_catalog, run_counts, select_runs
from pipeline.quality.near_duplicates import (
    MINHASH_SEED,
    Clustered,
    Edge,
    band_keys,
    cluster,
    jaccard,
    lsh_shape,
    merge_clusters,
    semantic_edges,
    shared_key_pairs,
)
from pipeline.quality.state import (
    STATE_DIR,
    file_settings,
    parquet_files,
    quality_lock,
    same_settings,
    write_rows,
)
from pipeline.store.store import Store
from schemas.tables import QUESTION_DUPLICATES

# ---- near-duplicates ------------------------------------------------------------------

DUPLICATES = "catalog"  # question_duplicates/catalog.parquet, the table's one file
WRITE_ROWS = 8_192  # rows of question_duplicates a rewrite holds at a time (a row group each)


@dataclass
class ClusterResult:
    records: int  # questions clustered in the catalog
    clusters: int  # clusters of two or more records
    duplicates: int  # records beyond one per cluster (what an export drops at most)
    edges: dict[str, int]  # pairs this pass found (all of them when full)
    checked: int = 0  # questions this pass clustered (new ones unless full)
    full: bool = True  # recomputed from the whole catalog
    changed: int = 0  # earlier questions whose cluster row this pass changed
    reason: str = ""  # why a full recompute


def _minhash_settings(cfg: PipelineConfig, embedding: str | None) -> dict[str, Any]:
    q = cfg.quality
    bands, rows = lsh_shape(q.minhash_threshold, q.minhash_num_perm)
    return {
        "minhash_threshold": q.minhash_threshold,
        "num_perm": q.minhash_num_perm,
        "bands": bands,
        "rows": rows,
        "seed": MINHASH_SEED,
        # what else made the clusters question_duplicates holds (None: MinHash alone)
        "embedding": embedding,
    }


def _marker(store: Store) -> Path:
    """Present while the near-duplicate files are being written: a pass that finds it (a
    write that died half way) recomputes everything."""
    return path_within(store.root, "quality", STATE_DIR, "near_duplicates.incomplete")


def _folder(store: Store, table: str) -> Path:
    return store.quality_path(table, DUPLICATES).parent


def cluster_catalog(
    cfg: PipelineConfig, store: Store, encode: Encode | None = None, full: bool = False
) -> ClusterResult:
    """Near-duplicate clusters over every question of the catalog: the questions of runs not
    clustered yet are added to the clusters computed before (unless `full`, or the embedding
    method is on). Commits question_minhash (the new runs' files) and question_duplicates."""
    q = cfg.quality
    embedding = encode is not None and q.embedding
    emb = f"cosine>={q.duplicate_embedding_threshold},k={q.duplicate_neighbours}"
    settings = _minhash_settings(cfg, emb if embedding else None)
    with quality_lock(store.root):
        with open_catalog(store.catalog_path) as con:
            counts = run_counts(con)
            state = {p.stem: file_settings(p) for p in parquet_files(_folder(store, MINHASH))}
            reason = _full_reason(store, settings, counts, state, full, embedding)
            if reason:
                records = select_runs(con, QUESTIONS_SQL, None)
            else:
                todo = [r for r, n in counts.items() if state.get(r, (0, None))[0] != n]
                records = select_runs(con, QUESTIONS_SQL, todo)
        if reason:
            res = _cluster_full(cfg, store, records, settings, encode if embedding else None)
            res.reason = reason
        else:
            gone = sorted(set(state) - set(counts))
            res = _cluster_new(cfg, store, records, settings, state, gone)
        res.records, res.clusters, res.duplicates = _cluster_totals(store)
    return res


MINHASH = "question_minhash"
# Files of the one-table layout before question_minhash + question_duplicates.
LEGACY_CLUSTERS = ("quality", "question_clusters")


def _full_reason(
    store: Store,
    settings: dict[str, Any],
    counts: dict[str, int],
    state: dict[str, tuple[int, Any]],
    full: bool,
    embedding: bool,
) -> str:
    """Why this pass must recompute everything ('' when the new runs can be added and the
    runs that left the catalog taken out)."""
    shrunk = sorted(r for r, (n, _) in state.items() if r in counts and n > counts[r])
    if full:
        return "--full"
    if embedding:
        return "the embedding method is on (no incremental form)"
    if not state:
        return "nothing clustered before"
    if _marker(store).exists():
        return "an earlier pass stopped while writing"
    if parquet_files(path_within(store.root, *LEGACY_CLUSTERS)):
        return "clusters in the layout of an earlier version"
    if any(not same_settings(s, settings) for _, s in state.values()):
        return "other settings than the earlier pass"
    if shrunk:
        return f"run(s) {', '.join(shrunk[:3])} lost records since"
    return ""


def _clusterable(question: str | None) -> bool:
    return bool((question or "").strip())


def _signature_rows(
    records: list[dict[str, Any]], norms: list[str], key_of: dict[int, list[int]], at: dt.datetime
) -> dict[str, list[dict[str, Any]]]:
    """question_minhash rows by run: every record, its band keys when it has words."""
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for k, r in enumerate(records):
        out[r["run_id"]].append({
            "record_id": r["record_id"], "run_id": r["run_id"],
            "clustered": _clusterable(r["question"]),
            "question_norm": norms[k] if r["question"] is not None else None,
            "band_keys": key_of.get(k), "checked_at": at,
        })  # fmt: skip
    return out


def _cluster_full(
    cfg: PipelineConfig,
    store: Store,
    records: list[dict[str, Any]],
    settings: dict[str, Any],
    encode: Encode | None,
) -> ClusterResult:
    """Every record of the catalog, from scratch: every file is written again."""
    q = cfg.quality
    norms = [normalize(r["question"]) for r in records]
    asked = [k for k, r in enumerate(records) if _clusterable(r["question"])]
    at = {k: i for i, k in enumerate(asked)}  # record -> position among the clustered
    live = [k for k in asked if norms[k]]
    sets = {k: frozenset(norms[k].split()) for k in live}
    keys = band_keys([sets[k] for k in live], q.minhash_threshold, q.minhash_num_perm)
    edges = []
    for a, b in sorted(shared_key_pairs(keys)):
        i, j = live[a], live[b]
        if (score := jaccard(sets[i], sets[j])) >= q.minhash_threshold:
            edges.append(Edge(at[i], at[j], "minhash", score))
    n_minhash = len(edges)
    if encode is not None and asked:
        vectors = encode([records[k]["question"] for k in asked])
        edges += semantic_edges(vectors, q.duplicate_embedding_threshold, q.duplicate_neighbours)
    clustered = cluster([records[k]["record_id"] for k in asked], edges)
    now = utcnow()
    dups = [
        {**c.__dict__, "run_id": records[k]["run_id"], "computed_at": now}
        for k, c in zip(asked, clustered, strict=True)
        if c.cluster_size > 1
    ]
    sigs = _signature_rows(records, norms, dict(zip(live, keys.tolist(), strict=True)), now)
    marker = _marker(store)
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.touch()
    for path in parquet_files(path_within(store.root, *LEGACY_CLUSTERS)):
        path.unlink()
    for path in parquet_files(_folder(store, MINHASH)):
        if path.stem not in sigs:
            path.unlink()  # a run that left the catalog
    with duckdb.connect() as con:
        dup = _Duplicates(con, store, keep=False)
        dup.replace([], dups)
        dup.write()
    for run, rows in sigs.items():
        write_rows(store.quality_path(MINHASH, run), MINHASH, rows, settings)
    marker.unlink()
    return ClusterResult(
        len(asked), 0, 0, {"minhash": n_minhash, "embedding": len(edges) - n_minhash}, len(asked)
    )


# Old records sharing a band key with a new one: every stored key is joined with the new
# keys (`nk`: position, band, key); the old record's id, run and Norm(question) come back.
CANDIDATES_SQL = """
SELECT DISTINCT n.i, o.record_id, o.run_id, o.question_norm
FROM (SELECT record_id, run_id, question_norm, unnest(band_keys) AS key,
             generate_subscripts(band_keys, 1) - 1 AS band
      FROM read_parquet($files)) o
JOIN nk n ON n.key = o.key AND n.band = o.band
"""
# What the band keys and Jaccard of some stored records need (`wanted`: record ids).
SIGNATURES_SQL = """
SELECT record_id, question_norm, band_keys FROM read_parquet($files)
WHERE record_id IN (SELECT record_id FROM wanted) ORDER BY record_id
"""


def _keys_edges(
    ids: list[str], norms: list[str], keys: np.ndarray, threshold: float
) -> list[tuple[str, str, str, float]]:
    """Edges among records given their band keys (rows of `keys`) and Norm(question)s."""
    sets = [frozenset(n.split()) for n in norms]
    return [
        (ids[a], ids[b], "minhash", score)
        for a, b in sorted(shared_key_pairs(keys))
        if (score := jaccard(sets[a], sets[b])) >= threshold
    ]


class _Duplicates:
    """question_duplicates as this pass leaves it, in DuckDB: the file's rows less the records
    whose rows were replaced (`dup_kept`), plus their new rows (`fresh`): `dup_now`. A pass
    touches the clusters a night joins; the year of clusters in the file is only streamed
    through, never held."""

    def __init__(self, con: duckdb.DuckDBPyConnection, store: Store, keep: bool = True) -> None:
        """Over the store's file (`keep`), or over nothing (a full pass)."""
        self.con = con
        self.path = store.quality_path("question_duplicates", DUPLICATES)
        con.register("dup_empty", QUESTION_DUPLICATES.empty_table())
        src = "dup_empty"
        if keep and self.path.exists():  # a view takes no parameters: the path is spelled in
            src = f"read_parquet({sql_string(str(self.path))})"
        con.execute("CREATE TEMP TABLE replaced (record_id VARCHAR PRIMARY KEY)")
        con.execute("CREATE TEMP TABLE fresh AS SELECT * FROM dup_empty")
        con.execute(
            f"CREATE TEMP VIEW dup_kept AS SELECT * FROM {src} "
            "WHERE record_id NOT IN (SELECT record_id FROM replaced)"
        )
        con.execute(
            "CREATE TEMP VIEW dup_now AS SELECT * FROM dup_kept UNION ALL BY NAME "
            "SELECT * FROM fresh"
        )

    def clusters_of(self, record_ids: Collection[str]) -> list[dict[str, Any]]:
        """Every row of the clusters that hold one of `record_ids`."""
        asked = pa.table({"record_id": pa.array(sorted(record_ids), pa.string())})
        self.con.register("asked", asked)
        return (
            self.con.sql(
                "SELECT * FROM dup_now WHERE cluster_id IN (SELECT cluster_id FROM dup_now "
                "WHERE record_id IN (SELECT record_id FROM asked)) ORDER BY record_id"
            )
            .to_arrow_table()
            .to_pylist()
        )

    def replace(self, record_ids: Collection[str], rows: list[dict[str, Any]]) -> None:
        """`record_ids`' rows are now `rows` (clusters of two or more; a record in none has
        no row)."""
        ids = pa.table({"record_id": pa.array(sorted(set(record_ids)), pa.string())})
        self.con.register("ids", ids)
        self.con.execute("DELETE FROM fresh WHERE record_id IN (SELECT record_id FROM ids)")
        self.con.execute("INSERT OR IGNORE INTO replaced SELECT record_id FROM ids")
        self.con.register("rows", pa.Table.from_pylist(rows, schema=QUESTION_DUPLICATES))
        self.con.execute("INSERT INTO fresh BY NAME SELECT * FROM rows")

    def write(self) -> None:
        """The file rewritten a batch at a time: its rows that stay, in their order, then the
        replacements by record_id (no sort of the whole table); removed when no cluster of
        two or more is left."""
        if not self.con.sql("SELECT 1 FROM dup_now LIMIT 1").fetchall():
            self.path.unlink(missing_ok=True)
            return
        new = self.con.sql("SELECT * FROM fresh ORDER BY record_id").to_arrow_table()
        kept = self.con.sql("SELECT * FROM dup_kept").to_arrow_reader(WRITE_ROWS)
        parts = (pa.Table.from_batches([b]) for b in kept)
        tables = (t.select(QUESTION_DUPLICATES.names).cast(QUESTION_DUPLICATES)
                  for t in itertools.chain(parts, [new]) if t.num_rows)  # fmt: skip
        write_parquet_parts_atomic(self.path, QUESTION_DUPLICATES, tables)


def _drop_runs(
    con: duckdb.DuckDBPyConnection,
    dup: _Duplicates,
    removed: set[str],
    files: list[str],
    threshold: float,
    now: dt.datetime,
) -> int:
    """`removed` records (runs that left the catalog: retention) taken out of `dup`: each
    cluster that held one is reclustered from its other members' stored keys (its edges all
    run inside it). Returns how many rows changed."""
    affected = dup.clusters_of(removed)
    if not affected:
        return 0
    run_of = {r["record_id"]: r["run_id"] for r in affected}
    con.register("wanted", pa.table({"record_id": sorted(set(run_of) - removed)}))
    rows = con.sql(SIGNATURES_SQL, params={"files": files}).to_arrow_table().to_pylist()
    ids = [r["record_id"] for r in rows]
    keys = np.array([r["band_keys"] for r in rows], np.int64).reshape(len(rows), -1)
    edges = _keys_edges(ids, [r["question_norm"] for r in rows], keys, threshold)
    at = {rid: k for k, rid in enumerate(ids)}
    kept = [
        {**c.__dict__, "run_id": run_of[c.record_id], "computed_at": now}
        for c in cluster(ids, [Edge(at[a], at[b], m, x) for a, b, m, x in edges])
        if c.cluster_size > 1
    ]
    dup.replace(run_of, kept)
    return len(affected)


def _cluster_new(
    cfg: PipelineConfig,
    store: Store,
    records: list[dict[str, Any]],
    settings: dict[str, Any],
    state: dict[str, tuple[int, Any]],
    gone: list[str],
) -> ClusterResult:
    """The records of runs not (fully) clustered yet added to the earlier clusters, and the
    records of runs that left the catalog taken out of them: the new runs' question_minhash
    files and question_duplicates are written, the gone runs' files removed, nothing else."""
    q = cfg.quality
    gone_paths = [store.quality_path(MINHASH, run) for run in gone]
    old_files = [str(p) for p in parquet_files(_folder(store, MINHASH)) if p.stem not in gone]
    grown = sorted({r["run_id"] for r in records if state.get(r["run_id"], (0,))[0] > 0})
    known: set[str] = set()
    for run in grown:  # a run that landed more records after it was clustered
        path = store.quality_path(MINHASH, run)
        known.update(pq.read_table(path, columns=["record_id"]).column(0).to_pylist())
    records = [r for r in records if r["record_id"] not in known]
    if not records and not gone:
        return ClusterResult(0, 0, 0, {"minhash": 0, "embedding": 0}, 0, False)
    norms = [normalize(r["question"]) for r in records]
    ids = [r["record_id"] for r in records]
    asked = [k for k, r in enumerate(records) if _clusterable(r["question"])]
    live = [k for k in asked if norms[k]]
    keys = band_keys(
        [frozenset(norms[k].split()) for k in live], q.minhash_threshold, q.minhash_num_perm
    )
    new_ids = [ids[k] for k in live]  # new with new
    edges = _keys_edges(new_ids, [norms[k] for k in live], keys, q.minhash_threshold)
    run_of = {r["record_id"]: r["run_id"] for r in records}
    now = utcnow()
    with duckdb.connect() as con:
        dup, changed = _Duplicates(con, store), 0
        if gone:
            removed = {
                rid for p in gone_paths
                for rid in pq.read_table(p, columns=["record_id"]).column(0).to_pylist()
            }  # fmt: skip
            changed = _drop_runs(con, dup, removed, old_files, q.minhash_threshold, now)
        bands = keys.shape[1]
        con.register("nk", pa.table({
            "i": np.repeat(np.arange(len(live), dtype=np.int64), bands),
            "band": np.tile(np.arange(bands, dtype=np.int64), len(live)),
            "key": keys.reshape(-1),
        }))  # fmt: skip
        cands = []
        if old_files and live:
            cands = con.execute(CANDIDATES_SQL, {"files": old_files}).fetchall()
        for a, old_id, old_run, old_norm in sorted(cands):  # new with old
            i = live[a]
            score = jaccard(frozenset(norms[i].split()), frozenset(old_norm.split()))
            if score >= q.minhash_threshold:
                edges.append((ids[i], old_id, "minhash", score))
                run_of[old_id] = old_run
        touched = set(e[1] for e in edges) - set(ids)
        members = dup.clusters_of(touched)
        seen = {r["record_id"] for r in members}
        old = [Clustered(**{k: r[k] for k in Clustered.__dataclass_fields__}) for r in members]
        old += [Clustered(rid, rid, 1, None, None, None) for rid in sorted(touched - seen)]
        run_of.update((r["record_id"], r["run_id"]) for r in members)
        merged = merge_clusters(old, [ids[k] for k in asked], edges)
        marker = _marker(store)
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.touch()
        if edges or changed:  # the clusters of two or more changed: their one file is rewritten
            rows = [{**c.__dict__, "run_id": run_of[c.record_id], "computed_at": now}
                    for c in merged if c.cluster_size > 1]  # fmt: skip
            dup.replace([c.record_id for c in merged], rows)
            dup.write()
    sigs = _signature_rows(records, norms, dict(zip(live, keys.tolist(), strict=True)), now)
    for run, rows in sorted(sigs.items()):
        path = store.quality_path(MINHASH, run)
        if path.exists():  # a grown run: its earlier records stay as they were
            rows = pq.read_table(path).to_pylist() + rows
        rows.sort(key=lambda r: r["record_id"])
        write_rows(path, MINHASH, rows, settings)
    for path in gone_paths:
        path.unlink()
    marker.unlink()
    return ClusterResult(
        0, 0, 0, {"minhash": len(edges), "embedding": 0}, len(asked), False, changed + len(old)
    )


def _cluster_totals(store: Store) -> tuple[int, int, int]:
    """(questions, clusters of two or more, records beyond one per cluster) over the files."""
    sigs = [str(p) for p in parquet_files(_folder(store, MINHASH))]
    dup = store.quality_path("question_duplicates", DUPLICATES)
    with duckdb.connect() as con:
        sql = "SELECT count(*) FILTER (WHERE clustered) FROM read_parquet(?)"
        (n,) = con.execute(sql, [sigs]).fetchone() if sigs else (0,)
        sql = """SELECT count(DISTINCT cluster_id), count(*) FILTER (WHERE cluster_id <> record_id)
                 FROM read_parquet(?)"""
        clusters, dups = con.execute(sql, [str(dup)]).fetchone() if dup.exists() else (0, 0)
    return n, clusters, dups


__all__ = ["ClusterResult", "Clustered", "cluster_catalog"]
