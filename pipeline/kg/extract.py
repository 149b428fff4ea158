"""The knowledge-graph stage: Wikidata dump -> entities/edges -> LLM-guided subgraphs.

Each artifact directory is named by a fingerprint of what determines its content, so an
unchanged dump and configuration reuse it and any change builds a new one beside it:

    <store.out_dir>/kg/<ingest key>/                 entities/, edges/, rejects/ part files
        linked-<corpus sha>/entities.parquet         entities with their corpus passages
        subgraphs-<extract key>/subgraphs.parquet    + rejects.parquet, stats.json
"""

from __future__ import annotations

import json
import logging
import random
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.core.config import PipelineConfig
from pipeline.core.contracts import read_shard
from pipeline.core.io import (
    ArtifactDir,
    atomic_write_bytes,
    content_key,
    sha256_file,
    utcnow,
    write_parquet_atomic,
)
from pipeline.kg.descriptions import Description, describe
from pipeline.kg.dump import (
    FORMAT_VERSION,
    DumpError,
    IngestReport,
    dump_fingerprint,
    ingest_dump,
    part_files,
    read_report,
)
from pipeline.kg.entity_facts import EntityFacts, entity_facts
from pipeline.kg.graph import KnowledgeGraph, RelationFilter
from pipeline.kg.subgraph_stats import format_stats, subgraph_stats
from pipeline.kg.subgraphs import (
    PROMPT_VERSION,
    ExpansionSettings,
    llm_guided_subgraphs,
    to_table,
)
from pipeline.llm.base import Generator
from pipeline.llm.chat import make_renderer, rendering
from pipeline.retrieval.corpus import CorpusFile, load_corpus
from schemas.tables import REJECTS

log = logging.getLogger(__name__)

SUBGRAPHS_FILE = "subgraphs.parquet"
STATS_FILE = "stats.json"


class KGNotReadyError(RuntimeError):
    """An artifact the command needs has not been built for this configuration."""


def _file_sha(path: Path | None) -> str | None:
    return sha256_file(path) if path is not None else None


def kg_root(out_dir: Path) -> Path:
    """The KG's artifacts under the store's root (`Store.root`)."""
    return out_dir / "kg"


@dataclass(frozen=True)
class KGInputs:
    """The KG stage's input files, resolved once (relative paths are the project's): the
    dump, and the relation block and allow lists."""

    dump: Path
    block_list: Path
    allow_list: Path | None

    @classmethod
    def from_config(cls, cfg: PipelineConfig) -> KGInputs:
        kg, resolve = cfg.kg, cfg.resolve_path
        return cls(resolve(kg.dump_path), resolve(kg.block_list), resolve(kg.allow_list))

    def relation_filter(self) -> RelationFilter:
        return RelationFilter.from_files(self.block_list, self.allow_list)


def ingest_dir(cfg: PipelineConfig, dump: Path, out_dir: Path) -> tuple[Path, str]:
    """(ingest directory, ingest key) for the dump `dump` (`KGInputs.dump`)."""
    if not dump.exists():
        raise DumpError(f"Wikidata dump not found: {dump} (kg.dump_path)")
    if not dump.is_file():  # a directory or a device: hashed below, so refused first
        what = "a directory" if dump.is_dir() else "not a regular file"
        raise DumpError(f"{dump}: is {what}; kg.dump_path must name a file")
    ident = {
        "dump_sha256": dump_fingerprint(dump, kg_root(out_dir)),
        "format_version": FORMAT_VERSION,
        "enwiki_only": cfg.kg.enwiki_only,
        "chunk_lines": cfg.kg.chunk_lines,
    }
    key = content_key(ident)
    return kg_root(out_dir) / key, key


def ingest(
    cfg: PipelineConfig, dump: Path, out_dir: Path, workers: int | None = None
) -> IngestReport:
    """Read the dump into entity/edge/reject part files (or reuse them)."""
    out, key = ingest_dir(cfg, dump, out_dir)
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


def passages_path(cfg: PipelineConfig, corpus: CorpusFile, out_dir: Path) -> Path:
    """The corpus as a passages table (row order = index order), cached by corpus sha."""
    path = kg_root(out_dir) / "passages" / f"{corpus.sha256[:16]}.parquet"
    if not path.exists():
        c = cfg.corpus
        load_corpus(corpus.path, path, c.format, c.on_error, c.error_budget)
    return path


@dataclass
class ExtractResult:
    """The KG stage's handle: the finished extraction and the ingest it was drawn from."""

    dir: Path
    key: str
    ingest_dir: Path
    entities_path: Path
    subgraphs: int
    rejected: int
    seeds: int
    reused: bool
    stats: dict[str, Any]

    @property
    def subgraphs_path(self) -> Path:
        return self.dir / SUBGRAPHS_FILE

    def catalog_files(self) -> dict[str, list[Path]]:
        """Files for the DuckDB catalog: entities, edges, subgraphs, and the ingest's rejects
        (`kg_rejects`, shown in the catalog's `rejects` view)."""
        return {
            "entities": [self.entities_path],
            "edges": part_files(self.ingest_dir, "edges"),
            "subgraphs": [self.subgraphs_path],
            "kg_rejects": part_files(self.ingest_dir, "rejects"),
        }

    def read_subgraphs(self) -> pa.Table:
        return read_shard(self.subgraphs_path, "subgraphs")

    def subgraphs_for_generation(self) -> list[dict]:
        """Subgraph rows with `answer_aliases` (the answer item's aliases) and `aliases` (every
        path node's, by id), from the entities table read for those items only: a passage
        that writes a hop's object another way still states the hop."""
        graphs = self.read_subgraphs().to_pylist()
        qids = sorted({n["id"] for g in graphs for n in g["target_path"]["nodes"]})
        aliases = self.aliases(qids)
        return [
            {
                **g,
                "answer_aliases": aliases.get(g["answer_qid"], []),
                "aliases": {
                    n["id"]: aliases[n["id"]]
                    for n in g["target_path"]["nodes"]
                    if aliases.get(n["id"])
                },
            }
            for g in graphs
        ]

    def aliases(self, qids: list[str]) -> dict[str, list[str]]:
        rows = (
            pq.read_table(
                self.entities_path, columns=["qid", "aliases"], filters=[("qid", "in", qids)]
            ).to_pylist()
            if qids
            else []
        )
        return {r["qid"]: r["aliases"] or [] for r in rows}

    def entity_facts(self, passage_ids: Iterable[str], properties: Iterable[str]) -> EntityFacts:
        """What the graph says of the entities these passages are about (two-passage tasks)."""
        return entity_facts(self.ingest_dir, self.entities_path, passage_ids, properties)

    def descriptions(self, qids: Iterable[str]) -> dict[str, list[Description]]:
        """Descriptions of these items that single each out in the graph (obfuscation)."""
        return describe(self.ingest_dir, qids)

    @classmethod
    def load(cls, out: Path, key: str, ingest_dir: Path, entities_path: Path) -> ExtractResult:
        stats = json.loads((out / STATS_FILE).read_text())
        run = stats.get("run", {})
        return cls(
            out,
            key,
            ingest_dir,
            entities_path,
            stats.get("subgraphs", 0),
            run.get("rejected", 0),
            run.get("seeds", 0),
            True,
            stats,
        )


def _extract_dir(
    cfg: PipelineConfig, inputs: KGInputs, ingest_key: str, corpus_sha: str, out_dir: Path
) -> tuple[Path, str]:
    kg = cfg.kg
    ident = {
        "ingest": ingest_key,
        "corpus_sha256": corpus_sha,
        "block_list": _file_sha(inputs.block_list),
        "allow_list": _file_sha(inputs.allow_list),
        "settings": asdict(ExpansionSettings.from_config(kg, cfg.seed)),
        "num_seeds": kg.num_seeds,
        "enwiki_only": kg.enwiki_only,
        "model": cfg.llm.model,
        "prompt": PROMPT_VERSION,
    }
    if cfg.llm.chat_template != "none":  # only then: keys of plain-prompt extractions stay
        ident["chat"] = [cfg.llm.chat_template, cfg.llm.system_prompt]
    key = content_key(ident)
    return kg_root(out_dir) / ingest_key / f"subgraphs-{key}", key


def choose_seeds(graph: KnowledgeGraph, num_seeds: int, seed: int) -> list[str]:
    """Seeds = items linked to corpus passages that have somewhere to go; a seeded sample."""
    pool = graph.seed_pool(require_passages=True)
    if num_seeds and len(pool) > num_seeds:
        picked = set(random.Random(seed).sample(pool, num_seeds))
        pool = [q for q in pool if q in picked]
    return pool


def extract(
    cfg: PipelineConfig,
    corpus: CorpusFile,
    out_dir: Path,
    passages: Path,
    generator: Generator | None = None,
) -> ExtractResult:
    """Ingest if needed, link passages, run Algorithm 1 for the seeds, write the tables.

    `passages` is the corpus as a passages table: the index's (`IndexArtifacts.passages_path`,
    the same rows) when the caller has the index, else the KG's own copy (`passages_path`).
    The LLM is loaded only when there is work: a finished extraction is reused as is."""
    inputs = KGInputs.from_config(cfg)
    ingest(cfg, inputs.dump, out_dir)
    ing_dir, ing_key = ingest_dir(cfg, inputs.dump, out_dir)
    out, key = _extract_dir(cfg, inputs, ing_key, corpus.sha256, out_dir)
    linked = ing_dir / f"linked-{corpus.sha256[:16]}" / "entities.parquet"
    done = ArtifactDir(out)
    if done.complete:
        return ExtractResult.load(out, key, ing_dir, linked)
    with KnowledgeGraph(ing_dir, passages, inputs.relation_filter(), cfg.kg.enwiki_only) as graph:
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

            generator = make_generator(cfg.llm, default_cache_path(cfg, out_dir), cfg.seed)
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
    done.mark_complete()
    log.info(
        "%d subgraphs from %d seeds (%d rejected) in %.1fs, %d generate calls",
        len(ex.records),
        len(seeds),
        len(ex.rejected),
        ex.seconds,
        ex.generate_calls,
    )
    result = ExtractResult.load(out, key, ing_dir, linked)
    result.reused = False
    return result


def find_extract(cfg: PipelineConfig, corpus: CorpusFile, out_dir: Path) -> ExtractResult:
    """The finished extraction for this configuration, without building anything."""
    inputs = KGInputs.from_config(cfg)
    ing_dir, ing_key = ingest_dir(cfg, inputs.dump, out_dir)
    if read_report(ing_dir) is None:
        raise KGNotReadyError(f"{inputs.dump} is not ingested yet; run `curriculum kg ingest`")
    out, key = _extract_dir(cfg, inputs, ing_key, corpus.sha256, out_dir)
    if not ArtifactDir(out).complete:
        raise KGNotReadyError(
            f"no subgraphs for this configuration at {out}; run `curriculum kg extract`"
        )
    linked = ing_dir / f"linked-{corpus.sha256[:16]}" / "entities.parquet"
    return ExtractResult.load(out, key, ing_dir, linked)


__all__ = [
    "DumpError",
    "ExtractResult",
    "IngestReport",
    "KGInputs",
    "KGNotReadyError",
    "choose_seeds",
    "extract",
    "find_extract",
    "format_stats",
    "ingest",
    "ingest_dir",
    "passages_path",
]
