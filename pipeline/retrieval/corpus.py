"""Streaming reader for passage corpora (FlashRAG/Search-R1 JSONL, plain JSONL, Parquet; gz/zst).

Every bad line is reported with its file and line number; in `reject` mode it is counted and
kept for the rejects table while the rest of the corpus still loads. A truncated or corrupt file
(compressed stream, Parquet footer) is never a short corpus: it fails naming the file.

Identity rules: ids are compared after stripping surrounding whitespace (the stripped id is
stored, and the repair counted), a UTF-8 byte order mark on the first line is skipped (counted),
NUL characters are removed from titles and texts (each line so repaired counted),
and a later line repeating an id is a reject naming both lines. Duplicates are found after the
pass with DuckDB over the passages file just written, so memory stays bounded at 21M ids.
"""

from __future__ import annotations

import codecs
import tempfile
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import duckdb
import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.core.compressed import open_checked
from pipeline.core.config import PipelineConfig
from pipeline.core.errors import BadInputError
from pipeline.core.io import atomic_path, sha256_file
from schemas.tables import PASSAGES

Format = Literal["auto", "flashrag", "plain"]


class CorpusError(BadInputError):
    """A corpus line that cannot be used; the message names file and line."""


# corpus.on_error=raise stops at the first bad line; reject mode is the other way through.
_RAISE_HINT = (
    "fix the line named above, or set corpus.on_error=reject to skip bad lines (listed in the "
    "rejects table, within corpus.error_budget)"
)


@dataclass(frozen=True)
class Passage:
    id: str
    title: str
    text: str
    source_file: str
    source_line: int


@dataclass(frozen=True)
class CorpusReject:
    source_file: str
    source_line: int
    record_key: str | None
    reason: str
    raw: str


@dataclass(frozen=True)
class CorpusFile:
    """The configured corpus file and its content hash, taken once per run: every artifact
    derived from the corpus (the index, the KG's passage links) is keyed by this hash, and
    hashing a 14 GB file is not free."""

    path: Path
    sha256: str


def locate_corpus(cfg: PipelineConfig) -> CorpusFile:
    path = cfg.resolve_path(cfg.corpus.path)
    if not path.exists():
        raise CorpusError(f"corpus not found: {path} (corpus.path)")
    if not path.is_file():
        raise CorpusError(f"{path}: is a directory; corpus.path must name a file")
    return CorpusFile(path, sha256_file(path))


def split_contents(contents: str) -> tuple[str, str]:
    """FlashRAG `contents` is '"Title"\\nText': the first line, unquoted, is the title."""
    head, sep, body = contents.partition("\n")
    title = head.strip()
    if len(title) >= 2 and title[0] == '"' and title[-1] == '"':
        title = title[1:-1]
    return title, (body.strip() if sep else "")


def _json(line: str) -> object:
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON ({exc})") from None


def parse_record(obj: object, fmt: Format) -> tuple[str, str, str]:
    """Validate one decoded record (JSONL line or Parquet row) into (id, title, text)."""
    if not isinstance(obj, dict):
        raise ValueError(f"expected a JSON object, got {type(obj).__name__}")
    if obj.get("id") is None:
        raise ValueError("missing field 'id'")
    pid = obj["id"]
    if isinstance(pid, int) and not isinstance(pid, bool):
        pid = str(pid)
    if not isinstance(pid, str) or not pid.strip():
        raise ValueError("field 'id' must be a non-empty string")
    # ' 12' and '12' are one passage to every consumer that trims; store the trimmed id.
    pid = pid.strip()
    use_flashrag = fmt == "flashrag" or (fmt == "auto" and obj.get("contents") is not None)
    if use_flashrag:
        contents = obj.get("contents")
        if contents is None:
            raise ValueError("missing field 'contents'")
        if not isinstance(contents, str):
            raise ValueError("field 'contents' must be a string")
        title, text = split_contents(contents)
    else:
        title, text = obj.get("title"), obj.get("text")
        if fmt == "auto" and title is None and text is None:
            raise ValueError("missing field 'contents' (or 'title' and 'text')")
        if not isinstance(title, str):
            raise ValueError("field 'title' must be a string")
        if not isinstance(text, str):
            raise ValueError("field 'text' must be a string")
        title, text = title.strip(), text.strip()
    if not text:
        raise ValueError("passage text is empty")
    return pid, title, text


def _iter_raw(path: Path, counts: Counter) -> Iterator[tuple[int, object | bytes]]:
    """(line or row number, raw bytes of a JSONL line | decoded Parquet row dict)."""
    if path.is_dir():
        raise CorpusError(f"{path}: is a directory; corpus.path must name a file")
    if path.name.lower().endswith(".parquet"):
        try:
            pf = pq.ParquetFile(path)
            cols = [c for c in ("id", "contents", "title", "text") if c in pf.schema_arrow.names]
            row = 0
            for batch in pf.iter_batches(columns=cols, batch_size=65_536):
                for rec in batch.to_pylist():
                    row += 1
                    yield row, rec
        except (pa.ArrowException, OSError) as exc:
            raise CorpusError(
                f"{path}: not a readable Parquet file, truncated or corrupt ({exc}); "
                "nothing from it was kept"
            ) from None
        return
    with open_checked(path) as fh:
        for lineno, raw in enumerate(fh, 1):
            if lineno == 1 and raw.startswith(codecs.BOM_UTF8):
                counts["utf-8 byte order mark skipped"] += 1
                raw = raw[len(codecs.BOM_UTF8) :]
            yield lineno, raw


def iter_corpus(
    path: str | Path, fmt: Format = "auto", counts: Counter | None = None
) -> Iterator[Passage | CorpusReject]:
    """Yield passages and line rejects in file order; repairs are added to `counts`.

    Duplicate ids are not checked here (that needs the whole pass): `load_corpus` does it.
    """
    path = Path(path)
    if not path.exists():
        raise CorpusError(f"corpus file not found: {path}")
    counts = Counter() if counts is None else counts
    for lineno, raw in _iter_raw(path, counts):
        try:
            obj = raw
            if isinstance(raw, bytes):
                if not raw.strip():
                    continue
                try:
                    obj = _json(raw.decode("utf-8"))
                except UnicodeDecodeError as exc:
                    raise ValueError(f"invalid UTF-8 ({exc.reason})") from None
            pid, title, text = parse_record(obj, fmt)
            raw_id = obj.get("id")  # a dict: parse_record checked
            nul = "\x00" in title or "\x00" in text
            if nul:  # NUL ends a C string (tokenizers, FAISS metadata, terminals): drop it
                title, text = title.replace("\x00", ""), text.replace("\x00", "").strip()
                if not text:
                    raise ValueError("passage text is empty (after removing NUL characters)")
        except ValueError as exc:
            yield CorpusReject(str(path), lineno, None, str(exc), _shown(raw))
            continue
        if nul:
            counts["NUL characters removed"] += 1
        if isinstance(raw_id, str) and raw_id != pid:
            counts["id whitespace stripped"] += 1
        yield Passage(pid, title, text, str(path), lineno)


def _shown(raw: object) -> str:
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else repr(raw)
    return text.rstrip("\n")[:2000]


@dataclass
class CorpusStats:
    passages: int = 0
    rejected: int = 0
    duplicates: int = 0  # of `rejected`: later lines repeating an earlier id
    repaired: dict[str, int] = field(default_factory=dict)  # kept lines fixed up, by kind


@dataclass(frozen=True)
class Duplicate:
    id: str
    source_line: int
    first_line: int


def find_duplicate_ids(passages: str | Path, memory_limit: str = "256MB") -> Iterator[Duplicate]:
    """Every row of a passages file whose id an earlier line already had, in line order.

    DuckDB groups the ids with a memory limit and spills to a temporary directory, so the
    check costs bounded memory at 21M ids (a Python set of them was ~1.5 GB).
    """
    with tempfile.TemporaryDirectory(prefix="dup-ids-") as spill, duckdb.connect() as con:
        con.execute(f"SET memory_limit = '{memory_limit}'")
        con.execute("SET threads = 2")
        con.execute("SET preserve_insertion_order = false")
        con.execute(f"SET temp_directory = '{spill}'")
        cur = con.execute(
            """
            WITH dups AS (
                SELECT id, min(source_line) AS first_line
                FROM read_parquet(?) GROUP BY id HAVING count(*) > 1
            )
            SELECT p.id, p.source_line, d.first_line
            FROM read_parquet(?) p JOIN dups d USING (id)
            WHERE p.source_line > d.first_line
            ORDER BY p.source_line
            """,
            [str(passages), str(passages)],
        )
        while batch := cur.fetchmany(10_000):
            for pid, line, first in batch:
                yield Duplicate(pid, line, first)


def _drop_rows(src: Path, dst: Path, lines: set[int]) -> None:
    """Copy a passages file without the given source lines, renumbering `row` densely."""
    next_row = 0
    with pq.ParquetWriter(dst, PASSAGES, compression="zstd") as writer:
        for batch in pq.ParquetFile(src).iter_batches(batch_size=65_536):
            tbl = pa.Table.from_batches([batch])
            keep = pa.array([ln not in lines for ln in tbl["source_line"].to_pylist()])
            tbl = tbl.filter(keep)
            rows = pa.array(range(next_row, next_row + tbl.num_rows), pa.int64())
            tbl = tbl.set_column(tbl.schema.get_field_index("row"), "row", rows)
            writer.write_table(tbl.cast(PASSAGES))
            next_row += tbl.num_rows


def load_corpus(
    path: str | Path,
    out_path: str | Path,
    fmt: Format = "auto",
    on_error: Literal["raise", "reject"] = "raise",
    error_budget: float = 0.01,
    batch_rows: int = 50_000,
    min_lines_for_budget: int = 1000,
) -> tuple[CorpusStats, list[CorpusReject]]:
    """Stream a corpus into a passages Parquet file (row = FAISS vector id).

    Raises CorpusError naming file and line at the first bad line in `raise` mode, or when the
    share of bad lines exceeds `error_budget` in `reject` mode; a truncated or corrupt file
    raises too. On any error no output and no temporary file is left behind.
    """
    with atomic_path(Path(out_path)) as tmp:
        return _load(Path(path), tmp, fmt, on_error, error_budget, batch_rows, min_lines_for_budget)


def _load(
    path: Path,
    tmp: Path,
    fmt: Format,
    on_error: str,
    error_budget: float,
    batch_rows: int,
    min_lines_for_budget: int,
) -> tuple[CorpusStats, list[CorpusReject]]:
    stats, rejects = CorpusStats(), []
    repaired: Counter = Counter()
    cols: dict[str, list] = {f.name: [] for f in PASSAGES}

    def flush(writer: pq.ParquetWriter) -> None:
        if cols["id"]:
            writer.write_table(pa.table(cols, schema=PASSAGES))
            for v in cols.values():
                v.clear()

    with pq.ParquetWriter(tmp, PASSAGES, compression="zstd") as writer:
        for item in iter_corpus(path, fmt, repaired):
            if isinstance(item, CorpusReject):
                if on_error == "raise":
                    raise CorpusError(
                        f"{item.source_file}:{item.source_line}: {item.reason}", hint=_RAISE_HINT
                    )
                rejects.append(item)
                stats.rejected += 1
                # Abort early on a badly broken file instead of reading 14 GB to find out.
                seen = stats.passages + stats.rejected
                if seen >= min_lines_for_budget and stats.rejected > error_budget * seen:
                    _over_budget(path, stats, rejects, error_budget)
                continue
            cols["id"].append(item.id)
            cols["title"].append(item.title)
            cols["text"].append(item.text)
            cols["char_len"].append(len(item.text))
            cols["row"].append(stats.passages)
            cols["source_file"].append(item.source_file)
            cols["source_line"].append(item.source_line)
            stats.passages += 1
            if len(cols["id"]) >= batch_rows:
                flush(writer)
        flush(writer)
    stats.repaired = dict(repaired)
    dup_lines: set[int] = set()
    for d in find_duplicate_ids(tmp):
        reason = f"duplicate id {d.id!r} (first seen on line {d.first_line})"
        if on_error == "raise":
            raise CorpusError(f"{path}:{d.source_line}: {reason}", hint=_RAISE_HINT)
        raw = orjson.dumps({"id": d.id}).decode()
        rejects.append(CorpusReject(str(path), d.source_line, d.id, reason, raw))
        dup_lines.add(d.source_line)
    if dup_lines:
        rejects.sort(key=lambda r: r.source_line)
        stats.duplicates = len(dup_lines)
        stats.rejected += len(dup_lines)
        stats.passages -= len(dup_lines)
        with atomic_path(tmp) as dedup:
            _drop_rows(tmp, dedup, dup_lines)
    total = stats.passages + stats.rejected
    if total and stats.rejected / total > error_budget:
        _over_budget(path, stats, rejects, error_budget)
    if stats.passages == 0:
        raise CorpusError(f"{path}: no usable passages")
    return stats, rejects


def _over_budget(path, stats: CorpusStats, rejects: list[CorpusReject], budget: float):
    first = rejects[0]
    raise CorpusError(
        f"{path}: {stats.rejected} of {stats.passages + stats.rejected} lines rejected so far, "
        f"over the error budget of {budget:.2%}; first: line {first.source_line}: {first.reason}",
        hint="fix the lines named above, or raise corpus.error_budget if this share of bad "
        "lines is acceptable",
    )
