"""Streaming, parallel reader for Wikidata JSON dumps (.json, .json.gz, .json.bz2).

The dump is one JSON array with one entity per line, so chunks of lines are independent work
units: the parent only reads and splits lines, worker processes parse them with orjson and write
each chunk's entities, truthy edges and rejects as Parquet part files, then a small marker that
commits the chunk. A rerun skips committed chunks, so a crash loses at most the chunks in flight.

Each line is parsed by `pipeline.kg.entity_parse`; only a line that is not an entity at all
(broken JSON, wrong field types) is a reject, and too many rejects abort the run with a message
naming the file.
"""

from __future__ import annotations

import itertools
import json
import logging
import shutil
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from multiprocessing import get_context
from pathlib import Path
from typing import IO

import duckdb
import orjson
import pyarrow as pa
from tqdm import tqdm

from pipeline.core.compressed import CompressedInputError, open_checked
from pipeline.core.errors import BadInputError
from pipeline.core.io import ArtifactDir, atomic_write_bytes, utcnow, write_parquet_atomic
from pipeline.kg.entity_parse import EntityError, parse_entity
from schemas.tables import EDGES, ENTITIES, REJECTS

log = logging.getLogger(__name__)

# Bump when parsing semantics change: it is part of the ingest fingerprint.
# 2: repaired lines are listed in rejects; 3: duplicate entities and non-id edge objects rejected
FORMAT_VERSION = "3"
TABLE_DIRS = {"entities": ENTITIES, "edges": EDGES, "rejects": REJECTS}
REPORT_FILE = "ingest.json"
_RAW_LIMIT = 2000


class DumpError(BadInputError):
    """A dump that cannot be ingested; the message names the file (and line, if one)."""


# ---- opening and chunking --------------------------------------------------------------------


@contextmanager
def open_dump(path: str | Path) -> Iterator[IO[bytes]]:
    """A byte stream of the decompressed dump, read sequentially (never the whole file).

    .bz2 is decompressed by lbzip2/pbzip2 in a subprocess when installed (parallel, ~10x
    Python's bz2 module), which is the bottleneck for the 100 GB official dump otherwise. A
    truncated or corrupt stream, on either path, raises CompressedInputError naming the file.
    """
    path = Path(path)
    if not path.exists():
        raise DumpError(f"dump file not found: {path}")
    if path.is_dir():
        raise DumpError(f"{path}: is a directory; kg.dump_path must name a file")
    with open_checked(path) as fh:
        yield fh


def iter_chunks(fh: IO[bytes], chunk_lines: int) -> Iterator[tuple[int, int, list[bytes]]]:
    """(chunk index, 1-based number of its first line, its raw lines), in file order."""
    first = 1
    for index in itertools.count():
        lines = list(itertools.islice(fh, chunk_lines))
        if not lines:
            return
        yield index, first, lines
        first += len(lines)


# ---- chunk processing (runs in worker processes) ----------------------------------------------


@dataclass(frozen=True)
class ChunkSettings:
    out_dir: str
    source_file: str
    run_id: str
    enwiki_only: bool = True
    compression: str = "zstd"
    compression_level: int = 3


@dataclass
class ChunkResult:
    index: int
    first_line: int
    lines: int = 0  # entity lines (brackets and blank lines excluded)
    items: int = 0
    properties: int = 0
    edges: int = 0
    rejects: int = 0
    not_enwiki: int = 0
    duplicates: int = 0  # later copies of an entity already read (kept first, listed in rejects)
    repaired: int = 0  # lines kept after a repair (listed in rejects too)
    skipped: dict[str, int] = field(default_factory=dict)
    issues: dict[str, int] = field(default_factory=dict)
    first_reject: tuple[int, str] | None = None

    @classmethod
    def from_json(cls, data: bytes) -> ChunkResult:
        d = orjson.loads(data)
        if d.get("first_reject"):
            d["first_reject"] = tuple(d["first_reject"])
        return cls(**d)


def _part(out_dir: Path, table: str, index: int) -> Path:
    return out_dir / table / f"part-{index:06d}.parquet"


def _marker(out_dir: Path, index: int) -> Path:
    return out_dir / "chunks" / f"{index:06d}.json"


_IDS_SCHEMA = pa.schema([("qid", pa.string()), ("line", pa.int64())])


def duplicate_reason(qid: str, first_line: int) -> str:
    return f"duplicate entity {qid} (first on line {first_line}); this copy not kept"


_REPAIRED = "empty "  # issue keys of PHP-style [] maps read as {} (see parse_entity)


def _reject_row(s: ChunkSettings, lineno: int, key, reason: str, raw: bytes, now) -> dict:
    return {
        "run_id": s.run_id,
        "stage": "kg",
        "source_file": s.source_file,
        "source_line": lineno,
        "record_key": key,
        "reason": reason,
        "raw": raw.decode("utf-8", "replace").rstrip("\n")[:_RAW_LIMIT],
        "created_at": now,
    }


def process_chunk(index: int, first_line: int, lines: list[bytes], s: ChunkSettings) -> ChunkResult:
    """Parse one chunk of dump lines and commit its part files (entities, edges, rejects)."""
    res = ChunkResult(index, first_line)
    ents: list[dict] = []
    edges: list[dict] = []
    rejects: list[dict] = []
    skipped: Counter = Counter()
    issues: Counter = Counter()
    first_line_of: dict[str, int] = {}  # one chunk's ids: bounded by kg.chunk_lines
    now = utcnow()
    for lineno, raw in enumerate(lines, first_line):
        line = raw.strip()
        if not line or line in (b"[", b"]"):
            continue
        if line.endswith(b","):
            line = line[:-1]
        res.lines += 1
        key = None
        try:
            try:
                obj = orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                raise EntityError(f"not valid JSON ({exc})") from None
            if isinstance(obj, dict) and isinstance(obj.get("id"), str):
                key = obj["id"]
            before = {k: v for k, v in issues.items() if k.startswith(_REPAIRED)}
            entity, entity_edges, skip = parse_entity(obj, issues)
            repaired = sorted(
                k for k, v in issues.items() if k.startswith(_REPAIRED) and v > before.get(k, 0)
            )
            if repaired:
                # The entity is kept; the line is still listed so auditors see what the dump
                # got wrong. Repairs do not count against the error budget.
                res.repaired += 1
                rejects.append(
                    _reject_row(
                        s, lineno, key, "repaired, entity kept: " + "; ".join(repaired), raw, now
                    )
                )
        except EntityError as exc:
            res.rejects += 1
            if res.first_reject is None:
                res.first_reject = (lineno, str(exc))
            rejects.append(_reject_row(s, lineno, key, str(exc), raw, now))
            continue
        if entity is None:
            skipped[skip] += 1
            continue
        if entity["kind"] == "item" and s.enwiki_only and entity["enwiki_title"] is None:
            res.not_enwiki += 1
            continue
        if entity["qid"] in first_line_of:
            # Keep the first copy; later chunks are checked against this one after the pass.
            res.duplicates += 1
            reason = duplicate_reason(entity["qid"], first_line_of[entity["qid"]])
            rejects.append(_reject_row(s, lineno, key, reason, raw, now))
            continue
        first_line_of[entity["qid"]] = lineno
        if entity["kind"] == "item":
            res.items += 1
        else:
            res.properties += 1
        ents.append(entity)
        edges.extend(entity_edges)
    res.edges = len(edges)
    res.skipped, res.issues = dict(skipped), dict(issues)
    out = Path(s.out_dir)
    for table, rows in (("entities", ents), ("edges", edges), ("rejects", rejects)):
        if rows:
            tbl = pa.Table.from_pylist(rows, schema=TABLE_DIRS[table])
            write_parquet_atomic(_part(out, table, index), tbl, s.compression, s.compression_level)
    # Entity ids with their lines, for the duplicate check across chunks after the pass.
    ids = pa.table(
        {"qid": list(first_line_of), "line": list(first_line_of.values())},
        schema=_IDS_SCHEMA,
    )
    write_parquet_atomic(_part(out, "ids", index), ids, s.compression, s.compression_level)
    # The marker is the commit point of the chunk: written last, atomically.
    atomic_write_bytes(_marker(out, index), orjson.dumps(asdict(res)))
    return res


def _load_marker(out_dir: Path, index: int) -> ChunkResult | None:
    path = _marker(out_dir, index)
    if not path.exists():
        return None
    try:
        return ChunkResult.from_json(path.read_bytes())
    except (orjson.JSONDecodeError, TypeError):
        return None


# ---- the whole dump ------------------------------------------------------------------------


@dataclass
class IngestReport:
    dir: str
    source_file: str
    lines: int = 0
    items: int = 0
    properties: int = 0
    edges: int = 0
    rejects: int = 0
    not_enwiki: int = 0
    duplicates: int = 0
    repaired: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    issues: dict[str, int] = field(default_factory=dict)
    chunks: int = 0
    chunks_reused: int = 0
    workers: int = 1
    seconds: float = 0.0
    reused: bool = False

    @property
    def reject_rows(self) -> int:
        """Rows of the rejects table: bad lines, later duplicates and repaired lines."""
        return self.rejects + self.duplicates + self.repaired

    @property
    def entities_per_s(self) -> float:
        return self.lines / self.seconds if self.seconds else 0.0

    def add(self, r: ChunkResult) -> None:
        self.lines += r.lines
        self.items += r.items
        self.properties += r.properties
        self.edges += r.edges
        self.rejects += r.rejects
        self.not_enwiki += r.not_enwiki
        self.duplicates += r.duplicates
        self.repaired += r.repaired
        self.chunks += 1
        for target, src in ((self.skipped, r.skipped), (self.issues, r.issues)):
            for k, v in src.items():
                target[k] = target.get(k, 0) + v


def part_files(kg_dir: str | Path, table: str) -> list[Path]:
    """Committed part files of one table of an ingest directory, in chunk order."""
    return sorted((Path(kg_dir) / table).glob("part-*.parquet"))


def read_report(kg_dir: str | Path) -> IngestReport | None:
    """The report of a finished ingest, or None if the directory holds none."""
    kg_dir = Path(kg_dir)
    if not ArtifactDir(kg_dir).complete:
        return None
    data = json.loads((kg_dir / REPORT_FILE).read_text())
    return IngestReport(**{**data, "reused": True})


def ingest_dump(
    path: str | Path,
    out_dir: str | Path,
    *,
    enwiki_only: bool = True,
    workers: int = 1,
    chunk_lines: int = 5000,
    error_budget: float = 0.05,
    run_id: str = "kg",
    compression: str = "zstd",
    compression_level: int = 3,
    min_lines_for_budget: int = 1000,
) -> IngestReport:
    """Stream a dump into entities / edges / rejects part files under `out_dir`.

    Memory stays bounded by (2 x workers) chunks in flight. Chunks committed by an earlier,
    interrupted run are reused. Raises DumpError naming the file when the share of rejected
    lines exceeds `error_budget` (checked as chunks finish, and at the end).
    """
    path, out = Path(path), Path(out_dir)
    if (done := read_report(out)) is not None:
        return done
    out.mkdir(parents=True, exist_ok=True)
    settings = ChunkSettings(
        str(out), str(path), run_id, enwiki_only, compression, compression_level
    )
    report = IngestReport(str(out), str(path), workers=workers)
    first_reject: list[tuple[int, str]] = []
    t0 = time.perf_counter()
    # A bar on a terminal (tqdm leaves it out when stderr is not one: logs, CI).
    bar = tqdm(unit=" lines", unit_scale=True, desc="wikidata dump", disable=None)

    def collect(r: ChunkResult) -> None:
        seen = report.lines
        report.add(r)
        bar.update(report.lines - seen)
        if r.first_reject:
            first_reject.append(r.first_reject)
        if report.lines >= min_lines_for_budget and report.rejects > error_budget * report.lines:
            _over_budget(path, report, first_reject, error_budget)

    try:
        with open_dump(path) as fh:
            chunks = iter_chunks(fh, chunk_lines)
            if workers <= 1:
                for index, first, lines in chunks:
                    prior = _load_marker(out, index)
                    report.chunks_reused += prior is not None
                    collect(prior or process_chunk(index, first, lines, settings))
            else:
                _run_pool(chunks, out, settings, workers, collect, report)
    except CompressedInputError:
        # The directory is keyed by the dump's bytes, which will never read to the end: its
        # chunks can never complete an ingest, so none of them is kept.
        shutil.rmtree(out, ignore_errors=True)
        raise
    finally:
        bar.close()
    drop_later_duplicates(out, settings, report)
    if report.lines and report.rejects > error_budget * report.lines:
        _over_budget(path, report, first_reject, error_budget)
    if report.items + report.properties == 0:
        raise DumpError(f"{path}: no usable entities in {report.lines} lines")
    report.seconds = round(time.perf_counter() - t0, 3)
    data = asdict(report)
    data.pop("reused")
    atomic_write_bytes(out / REPORT_FILE, json.dumps(data, indent=2).encode() + b"\n")
    ArtifactDir(out).mark_complete()
    log.info(
        "ingested %s: %d items, %d properties, %d edges, %d rejects in %.1fs (%.0f entities/s)",
        path,
        report.items,
        report.properties,
        report.edges,
        report.reject_rows,
        report.seconds,
        report.entities_per_s,
    )
    return report


def drop_later_duplicates(out: Path, s: ChunkSettings, report: IngestReport) -> int:
    """Remove the later copies of entities that an earlier chunk already had (keep first).

    Within a chunk the worker did this already; across chunks DuckDB joins the per-chunk id
    files on disk (bounded memory). Each affected chunk's entities and edges lose the copy, its
    rejects gain a row naming both lines, and its marker is rewritten with the new counts, so
    a rerun after a crash here finds nothing left to do. Returns the number removed.
    """
    if not any((out / "ids").glob("part-*.parquet")):
        return 0
    glob = str(out / "ids" / "part-*.parquet")
    with duckdb.connect() as con:
        con.execute("SET memory_limit = '512MB'")
        con.execute(f"SET temp_directory = '{out / 'duckdb_tmp'}'")
        rows = con.execute(
            """
            WITH ids AS (
                SELECT qid, line,
                       CAST(regexp_extract(filename, 'part-(\\d+)', 1) AS INTEGER) AS chunk
                FROM read_parquet(?, filename = true)
            ), d AS (SELECT qid, min(line) AS first_line FROM ids GROUP BY qid HAVING count(*) > 1)
            SELECT ids.chunk, ids.qid, ids.line, d.first_line
            FROM ids JOIN d USING (qid) WHERE ids.line > d.first_line ORDER BY ids.line
            """,
            [glob],
        ).fetchall()
    shutil.rmtree(out / "duckdb_tmp", ignore_errors=True)
    by_chunk: dict[int, list[tuple[str, int, int]]] = {}
    for chunk, qid, line, first in rows:
        by_chunk.setdefault(chunk, []).append((qid, line, first))
    for chunk, dups in by_chunk.items():
        _drop_from_chunk(out, s, chunk, dups, report)
    return len(rows)


def _drop_from_chunk(
    out: Path, s: ChunkSettings, index: int, dups: list[tuple[str, int, int]], report
) -> None:
    """Rewrite one chunk without the later copies. Idempotent, so a crash anywhere in here is
    repaired by the rerun: the marker's counts are recomputed from the rewritten parts, and
    the chunk's id file, which is what finds the copies, is rewritten last."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    qids = pa.array([q for q, _, _ in dups], pa.string())
    lines = pa.array([ln for _, ln, _ in dups], pa.int64())

    def rewrite(table: str, drop) -> pa.Table | None:
        path = _part(out, table, index)
        if not path.exists():
            return None
        tbl = pq.read_table(path)
        tbl = tbl.filter(pc.invert(drop(tbl)))
        write_parquet_atomic(path, tbl, s.compression, s.compression_level)
        return tbl

    ents = rewrite("entities", lambda t: pc.is_in(t["qid"], qids))
    edges = rewrite("edges", lambda t: pc.is_in(t["subject"], qids))
    now = utcnow()
    new = [
        _reject_row(s, line, qid, duplicate_reason(qid, first), b"", now)
        for qid, line, first in dups
    ]
    fresh = {(n["source_line"], n["reason"]) for n in new}
    rej_path = _part(out, "rejects", index)
    old = pq.read_table(rej_path).to_pylist() if rej_path.exists() else []
    rejects = [r for r in old if (r["source_line"], r["reason"]) not in fresh] + new
    write_parquet_atomic(
        rej_path, pa.Table.from_pylist(rejects, schema=REJECTS), s.compression, s.compression_level
    )
    res = _load_marker(out, index)
    if res is not None:
        kinds = Counter(ents["kind"].to_pylist()) if ents is not None else Counter()
        after = {
            "items": kinds["item"],
            "properties": kinds["property"],
            "edges": edges.num_rows if edges is not None else 0,
            "duplicates": sum(r["reason"].startswith("duplicate entity") for r in rejects),
        }
        for name, value in after.items():
            setattr(report, name, getattr(report, name) + value - getattr(res, name))
            setattr(res, name, value)
        atomic_write_bytes(_marker(out, index), orjson.dumps(asdict(res)))
    rewrite("ids", lambda t: pc.is_in(t["line"], lines))


def _run_pool(chunks, out: Path, settings: ChunkSettings, workers: int, collect, report) -> None:
    """Feed chunks to worker processes with at most 2 x workers in flight (bounded memory)."""
    # spawn, not fork: the caller may hold threads (Prefect, torch) that fork would copy broken.
    pool = ProcessPoolExecutor(workers, mp_context=get_context("spawn"))
    pending: set[Future] = set()
    try:
        for index, first, lines in chunks:
            prior = _load_marker(out, index)
            if prior is not None:
                report.chunks_reused += 1
                collect(prior)
                continue
            pending.add(pool.submit(process_chunk, index, first, lines, settings))
            while len(pending) >= 2 * workers:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                for fut in done:
                    collect(fut.result())
        for fut in pending:
            collect(fut.result())
    except BaseException:
        # Budget exceeded or Ctrl-C: drop queued chunks; committed ones stay for a rerun.
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)


def _over_budget(path, report: IngestReport, first: list[tuple[int, str]], budget: float):
    line, reason = min(first) if first else (0, "?")
    raise DumpError(
        f"{path}: {report.rejects} of {report.lines} entity lines rejected, over the error "
        f"budget of {budget:.2%}; first bad line {line}: {reason}",
        hint="check the dump named above, or raise kg.error_budget if this share of bad "
        "lines is acceptable",
    )


def dump_fingerprint(path: str | Path, cache_dir: str | Path | None = None) -> str:
    """sha256 of the dump's bytes, cached by (path, size, mtime) so a 100 GB dump is hashed once."""
    path = Path(path).resolve()
    st = path.stat()
    ident = f"{path}|{st.st_size}|{st.st_mtime_ns}"
    cache = Path(cache_dir) / "dump_sha256.json" if cache_dir else None
    known: dict[str, str] = {}
    if cache and cache.exists():
        try:
            known = json.loads(cache.read_text())
        except json.JSONDecodeError:
            known = {}
    if ident in known:
        return known[ident]
    from pipeline.core.io import sha256_file

    digest = sha256_file(path)
    if cache:
        known[ident] = digest
        atomic_write_bytes(cache, json.dumps(known, indent=1).encode())
    return digest


__all__ = [
    "FORMAT_VERSION",
    "ChunkResult",
    "DumpError",
    "IngestReport",
    "dump_fingerprint",
    "ingest_dump",
    "iter_chunks",
    "open_dump",
    "part_files",
    "process_chunk",
    "read_report",
]
