"""The knowledge-graph stage: Wikidata dump -> entities/edges -> LLM-guided subgraphs.

Each artifact directory is named by a fingerprint of what determines its content, so an
unchanged dump and configuration reuse it and any change builds a new one beside it:

    <store.out_dir>/kg/<ingest key>/                 entities/, edges/, rejects/ part files
        linked-<corpus sha>/entities.parquet         entities with their corpus passages
        subgraphs-<extract key>/subgraphs.parquet    + rejects.parquet, stats.json
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from pipeline.catalog.store import (
    atomic_write_bytes,
    read_shard,
    sha256_file,
    utcnow,
    write_parquet_atomic,
)
from pipeline.kg.dump import (
    FORMAT_VERSION,
    DumpError,
    IngestReport,
    dump_fingerprint,
    ingest_dump,
    part_files,
    read_report,
)
from pipeline.kg.graph import KnowledgeGraph, RelationFilter
from pipeline.kg.subgraph_stats import format_stats, subgraph_stats
from pipeline.kg.subgraphs import (
    PROMPT_VERSION,
    ExpansionSettings,
    llm_guided_subgraphs,
    to_table,
)
from pipeline.llm.chat import make_renderer, rendering
from pipeline.retrieval.corpus import CorpusError, load_corpus
from schemas.tables import REJECTS

log = logging.getLogger(__name__)

SUBGRAPHS_FILE = "subgraphs.parquet"
STATS_FILE = "stats.json"


class KGNotReadyError(RuntimeError):
    """An artifact the command needs has not been built for this configuration."""


def _key(ident: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:16]


def _file_sha(path: Path | None) -> str | None:
    return sha256_file(path) if path is not None else None


def kg_root(cfg) -> Path:
    return cfg.resolve_path(cfg.store.out_dir) / "kg"


def ingest_dir(cfg) -> tuple[Path, Path, str]:
    """(dump path, ingest directory, ingest key) for the configured dump."""
    dump = cfg.resolve_path(cfg.kg.dump_path)
    if not dump.exists():
        raise DumpError(f"Wikidata dump not found: {dump} (kg.dump_path)")
    ident = {
        "dump_sha256": dump_fingerprint(dump, kg_root(cfg)),
        "format_version": FORMAT_VERSION,
        "enwiki_only": cfg.kg.enwiki_only,
        "chunk_lines": cfg.kg.chunk_lines,
    }
    key = _key(ident)
    return dump, kg_root(cfg) / key, key


def ingest(cfg, workers: int | None = None) -> IngestReport:
    """Read the configured dump into entity/edge/reject part files (or reuse them)."""
    dump, out, key = ingest_dir(cfg)
    return ingest_dump(
        dump,
        out,
        enwiki_only=cfg.kg.enwiki_only,
        workers=workers or cfg.kg.workers,
        chunk_lines=cfg.kg.chunk_lines,
        error_budget=cfg.kg.error_budget,
        run_id=f"kg-{key}",
        compression=cfg.store.compression,
        compression_level=cfg.store.compression_level,
    )


def passages_path(cfg) -> tuple[Path, str]:
    """The corpus as a passages table (row order = index order), cached by corpus sha."""
    corpus = cfg.resolve_path(cfg.corpus.path)
    if not corpus.exists():
        raise CorpusError(f"corpus not found: {corpus} (corpus.path)")
    sha = sha256_file(corpus)
    path = kg_root(cfg) / "passages" / f"{sha[:16]}.parquet"
    if not path.exists():
        load_corpus(corpus, path, cfg.corpus.format, cfg.corpus.on_error, cfg.corpus.error_budget)
    return path, sha


def relation_filter(cfg) -> RelationFilter:
    return RelationFilter.from_files(
        cfg.resolve_path(cfg.kg.block_list), cfg.resolve_path(cfg.kg.allow_list)
    )


@dataclass
class ExtractResult:
    dir: Path
    key: str
    entities_path: Path
    subgraphs: int
    rejected: int
    seeds: int
    reused: bool
    stats: dict[str, Any]

    @property
    def subgraphs_path(self) -> Path:
        return self.dir / SUBGRAPHS_FILE

    @classmethod
    def load(cls, out: Path, key: str, entities_path: Path) -> ExtractResult:
        stats = json.loads((out / STATS_FILE).read_text())
        run = stats.get("run", {})
        return cls(
            out,
            key,
            entities_path,
            stats.get("subgraphs", 0),
            run.get("rejected", 0),
            run.get("seeds", 0),
            True,
            stats,
        )


def _extract_dir(cfg, ingest_key: str, corpus_sha: str) -> tuple[Path, str]:
    kg = cfg.kg
    ident = {
        "ingest": ingest_key,
        "corpus_sha256": corpus_sha,
        "block_list": _file_sha(cfg.resolve_path(kg.block_list)),
        "allow_list": _file_sha(cfg.resolve_path(kg.allow_list)),
        "settings": asdict(ExpansionSettings.from_config(kg, cfg.seed)),
        "num_seeds": kg.num_seeds,
        "enwiki_only": kg.enwiki_only,
        "model": cfg.llm.model,
        "prompt": PROMPT_VERSION,
    }
    if cfg.llm.chat_template != "none":  # only then: keys of plain-prompt extractions stay
        ident["chat"] = [cfg.llm.chat_template, cfg.llm.system_prompt]
    key = _key(ident)
    return kg_root(cfg) / ingest_key / f"subgraphs-{key}", key


def choose_seeds(graph: KnowledgeGraph, num_seeds: int, seed: int) -> list[str]:
    """Seeds = items linked to corpus passages that have somewhere to go; a seeded sample."""
    pool = graph.seed_pool(require_passages=True)
    if num_seeds and len(pool) > num_seeds:
        picked = set(random.Random(seed).sample(pool, num_seeds))
        pool = [q for q in pool if q in picked]
    return pool


def extract(cfg, generator=None) -> ExtractResult:
    """Ingest if needed, link passages, run Algorithm 1 for the seeds, write the tables.

    The LLM is loaded only when there is work: a finished extraction is reused as is."""
    ingest(cfg)
    _, ing_dir, ing_key = ingest_dir(cfg)
    passages, corpus_sha = passages_path(cfg)
    out, key = _extract_dir(cfg, ing_key, corpus_sha)
    linked = ing_dir / f"linked-{corpus_sha[:16]}" / "entities.parquet"
    if (out / ".complete").exists():
        return ExtractResult.load(out, key, linked)
    with KnowledgeGraph(ing_dir, passages, relation_filter(cfg), cfg.kg.enwiki_only) as graph:
        if not linked.exists():
            write_parquet_atomic(linked, graph.linked_entities(), cfg.store.compression)
        seeds = choose_seeds(graph, cfg.kg.num_seeds, cfg.seed)
        if not seeds:
            raise KGNotReadyError(
                f"no seed entities: no item of {ing_dir} has an enwiki title matching a passage "
                f"title of {cfg.corpus.path}"
            )
        if generator is None:
            from pipeline.llm import make_generator
            from pipeline.llm.cache import default_cache_path

            generator = make_generator(cfg.llm, default_cache_path(cfg), cfg.seed)
        generator = rendering(generator, make_renderer(cfg))
        settings = ExpansionSettings.from_config(cfg.kg, cfg.seed)
        ex = llm_guided_subgraphs(graph, generator, seeds, settings, key=key)
    table = to_table(ex.records)
    write_parquet_atomic(out / SUBGRAPHS_FILE, table, cfg.store.compression)
    now = utcnow()
    rejects = [
        {
            "run_id": f"kg-{key}",
            "stage": "kg",
            "source_file": None,
            "source_line": None,
            "record_key": r["seed"],
            "reason": r["reason"],
            "raw": " | ".join(r["outputs"])[:2000],
            "created_at": now,
        }
        for r in ex.rejected
    ]
    rejects_tbl = pa.Table.from_pylist(rejects, schema=REJECTS)
    write_parquet_atomic(out / "rejects.parquet", rejects_tbl, cfg.store.compression)
    stats = subgraph_stats(table)
    stats["run"] = {
        "seeds": len(seeds),
        "rejected": len(ex.rejected),
        "generate_calls": ex.generate_calls,
        "prompts": ex.prompts,
        "llm_seconds": ex.llm_seconds,
        "seconds": ex.seconds,
        "model": getattr(generator, "model_id", None),
    }
    atomic_write_bytes(out / STATS_FILE, json.dumps(stats, indent=2).encode() + b"\n")
    atomic_write_bytes(out / ".complete", b"")
    log.info(
        "%d subgraphs from %d seeds (%d rejected) in %.1fs, %d generate calls",
        len(ex.records),
        len(seeds),
        len(ex.rejected),
        ex.seconds,
        ex.generate_calls,
    )
    result = ExtractResult.load(out, key, linked)
    result.reused = False
    return result


def find_extract(cfg) -> ExtractResult:
    """The finished extraction for this configuration, without building anything."""
    dump, ing_dir, ing_key = ingest_dir(cfg)
    if read_report(ing_dir) is None:
        raise KGNotReadyError(f"{dump} is not ingested yet; run `curriculum kg ingest`")
    corpus_sha = sha256_file(cfg.resolve_path(cfg.corpus.path))
    out, key = _extract_dir(cfg, ing_key, corpus_sha)
    if not (out / ".complete").exists():
        raise KGNotReadyError(
            f"no subgraphs for this configuration at {out}; run `curriculum kg extract`"
        )
    return ExtractResult.load(out, key, ing_dir / f"linked-{corpus_sha[:16]}" / "entities.parquet")


def read_subgraphs(result: ExtractResult) -> pa.Table:
    return read_shard(result.subgraphs_path, "subgraphs")


def artifacts(cfg) -> dict[str, list[Path]]:
    """Files for the DuckDB catalog: entities, edges, subgraphs, and the ingest's rejects
    (`kg_rejects`, shown in the catalog's `rejects` view)."""
    res = find_extract(cfg)
    _, ing_dir, _ = ingest_dir(cfg)
    return {
        "entities": [res.entities_path],
        "edges": part_files(ing_dir, "edges"),
        "subgraphs": [res.subgraphs_path],
        "kg_rejects": part_files(ing_dir, "rejects"),
    }


__all__ = [
    "DumpError",
    "ExtractResult",
    "IngestReport",
    "KGNotReadyError",
    "artifacts",
    "choose_seeds",
    "extract",
    "find_extract",
    "format_stats",
    "ingest",
    "ingest_dir",
    "passages_path",
    "read_subgraphs",
    "relation_filter",
]
