"""Streaming reader for passage corpora (FlashRAG/Search-R1 JSONL, plain JSONL, Parquet; gz/zst).

Every bad line is reported with its file and line number; in `reject` mode it is counted and
kept for the rejects table while the rest of the corpus still loads.
"""

from __future__ import annotations

import gzip
import io
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Literal

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from schemas.tables import PASSAGES

Format = Literal["auto", "flashrag", "plain"]


class CorpusError(ValueError):
    """A corpus line that cannot be used; the message names file and line."""


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


def open_bytes(path: Path) -> IO[bytes]:
    """Open plain, gzip or zstd files as a byte stream (streaming, never the whole file).

    Lines are decoded one by one so a single bad UTF-8 byte is a reject of its line, not a
    crash of the whole load.
    """
    name = path.name.lower()
    if name.endswith(".gz"):
        return gzip.open(path, "rb")
    if name.endswith((".zst", ".zstd")):
        import zstandard

        raw = zstandard.ZstdDecompressor().stream_reader(path.open("rb"), closefd=True)
        return io.BufferedReader(raw, buffer_size=1 << 20)
    return path.open("rb")


def split_contents(contents: str) -> tuple[str, str]:
    """FlashRAG `contents` is '"Title"\\nText': the first line, unquoted, is the title."""
    head, sep, body = contents.partition("\n")
    title = head.strip()
    if len(title) >= 2 and title[0] == '"' and title[-1] == '"':
        title = title[1:-1]
    return title, (body.strip() if sep else "")


def parse_line(line: str, fmt: Format) -> tuple[str, str, str]:
    """Return (id, title, text) of one JSONL line or raise ValueError with the reason."""
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON ({exc})") from None
    return parse_record(obj, fmt)


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


def _iter_raw(path: Path) -> Iterator[tuple[int, object | bytes]]:
    """(line or row number, raw bytes of a JSONL line | decoded Parquet row dict)."""
    if path.name.lower().endswith(".parquet"):
        pf = pq.ParquetFile(path)
        cols = [c for c in ("id", "contents", "title", "text") if c in pf.schema_arrow.names]
        row = 0
        for batch in pf.iter_batches(columns=cols, batch_size=65_536):
            for rec in batch.to_pylist():
                row += 1
                yield row, rec
        return
    with open_bytes(path) as fh:
        yield from enumerate(fh, 1)


def iter_corpus(path: str | Path, fmt: Format = "auto") -> Iterator[Passage | CorpusReject]:
    """Yield passages and rejects in file order; duplicates of an earlier id are rejects."""
    path = Path(path)
    if not path.exists():
        raise CorpusError(f"corpus file not found: {path}")
    seen: dict[str, int] = {}
    for lineno, raw in _iter_raw(path):
        try:
            if isinstance(raw, bytes):
                if not raw.strip():
                    continue
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise ValueError(f"invalid UTF-8 ({exc.reason})") from None
                pid, title, text = parse_line(line, fmt)
            else:
                pid, title, text = parse_record(raw, fmt)
        except ValueError as exc:
            yield CorpusReject(str(path), lineno, None, str(exc), _shown(raw))
            continue
        if pid in seen:
            reason = f"duplicate id {pid!r} (first seen on line {seen[pid]})"
            yield CorpusReject(str(path), lineno, pid, reason, _shown(raw))
            continue
        seen[pid] = lineno
        yield Passage(pid, title, text, str(path), lineno)


def _shown(raw: object) -> str:
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else repr(raw)
    return text.rstrip("\n")[:2000]


@dataclass
class CorpusStats:
    passages: int = 0
    rejected: int = 0


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
    share of bad lines exceeds `error_budget` in `reject` mode.
    """
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_path.with_name(f".{out_path.name}.tmp")
    stats, rejects = CorpusStats(), []
    cols: dict[str, list] = {f.name: [] for f in PASSAGES}

    def flush(writer: pq.ParquetWriter) -> None:
        if cols["id"]:
            writer.write_table(pa.table(cols, schema=PASSAGES))
            for v in cols.values():
                v.clear()

    with pq.ParquetWriter(tmp, PASSAGES, compression="zstd") as writer:
        for item in iter_corpus(path, fmt):
            if isinstance(item, CorpusReject):
                if on_error == "raise":
                    raise CorpusError(f"{item.source_file}:{item.source_line}: {item.reason}")
                rejects.append(item)
                stats.rejected += 1
                # Abort early on a badly broken file instead of reading 14 GB to find out.
                seen = stats.passages + stats.rejected
                if seen >= min_lines_for_budget and stats.rejected > error_budget * seen:
                    _over_budget(path, tmp, stats, rejects, error_budget)
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
    total = stats.passages + stats.rejected
    if total and stats.rejected / total > error_budget:
        _over_budget(path, tmp, stats, rejects, error_budget)
    if stats.passages == 0:
        tmp.unlink(missing_ok=True)
        raise CorpusError(f"{path}: no usable passages")
    tmp.replace(out_path)
    return stats, rejects


def _over_budget(path, tmp: Path, stats: CorpusStats, rejects: list[CorpusReject], budget: float):
    tmp.unlink(missing_ok=True)
    first = rejects[0]
    raise CorpusError(
        f"{path}: {stats.rejected} of {stats.passages + stats.rejected} lines rejected so far, "
        f"over the error budget of {budget:.2%}; first: line {first.source_line}: {first.reason}"
    )
