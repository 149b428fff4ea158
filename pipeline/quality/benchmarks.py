"""Benchmark files for decontamination: FlashRAG / Search-R1 JSONL (`{"id", "question",
"golden_answers"}`), or any JSONL / Parquet with a question field, compressed or not.

Items keep what the checks compare: the question, the gold answers, and, where the format
carries them (HotpotQA / 2Wiki `metadata.context` and `supporting_facts`, MuSiQue
`paragraphs`, DPR `positive_ctxs`), the titles and texts of the item's passages, which the
answer+evidence check needs. A bad line is one error naming the file and line.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pyarrow.parquet as pq

from pipeline.core.compressed import open_checked
from pipeline.core.errors import BadInputError
from pipeline.core.io import sha256_file

QUESTION_FIELDS = ("question", "query", "input")
ID_FIELDS = ("id", "_id", "qid", "question_id")
ANSWER_FIELDS = ("golden_answers", "answers", "answer", "answer_aliases")
SUFFIXES = (".gz", ".bz2", ".zst", ".zstd", ".jsonl", ".json", ".parquet")


class BenchmarkError(BadInputError):
    """A benchmark file that cannot be read; names the file (and line)."""


@dataclass(frozen=True)
class BenchmarkItem:
    item_id: str
    question: str
    answers: tuple[str, ...]
    titles: tuple[str, ...] = ()  # titles of the item's passages (context / supporting)
    texts: tuple[str, ...] = ()  # the passages' texts


@dataclass(frozen=True)
class Benchmark:
    name: str
    path: Path
    sha256: str
    items: list[BenchmarkItem]


def benchmark_name(path: Path) -> str:
    """The file name without its data / compression suffixes: nq_test_16.jsonl.gz -> nq_test_16."""
    name = path.name
    while name.lower().endswith(SUFFIXES):
        name = name[: name.rfind(".")]
    return name or path.name


def _strings(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value] if value.strip() else []
    if isinstance(value, dict):  # {"target": [...]} (Search-R1 ground truth), {"text": ...}
        for key in ("target", "text", "value", "aliases"):
            if key in value:
                return _strings(value[key])
        return []
    if isinstance(value, list | tuple):
        return [s for v in value for s in _strings(v)]
    return [str(value)]


def _passages(row: dict[str, Any]) -> tuple[list[str], list[str]]:
    """Titles and texts of an item's passages from the layouts FlashRAG and the originals use."""
    titles: list[str] = []
    texts: list[str] = []
    meta = row.get("metadata") if isinstance(row.get("metadata"), dict) else {}
    for src in (row, meta):
        ctx = src.get("context")
        if isinstance(ctx, dict):  # FlashRAG HotpotQA / 2Wiki: {"title": [...], "sentences"}
            titles += _strings(ctx.get("title"))
            texts += [" ".join(_strings(s)) for s in ctx.get("sentences") or []]
        elif isinstance(ctx, list):  # original HotpotQA: [[title, [sentences]], ...]
            for pair in ctx:
                if isinstance(pair, list | tuple) and len(pair) == 2:
                    titles += _strings(pair[0])
                    texts.append(" ".join(_strings(pair[1])))
        elif isinstance(ctx, str):
            texts.append(ctx)
        sup = src.get("supporting_facts")
        if isinstance(sup, dict):
            titles += _strings(sup.get("title"))
        elif isinstance(sup, list):
            titles += [p[0] for p in sup if isinstance(p, list | tuple) and p]
        for key in ("paragraphs", "positive_ctxs", "ctxs", "passages"):
            for p in src.get(key) or []:
                if isinstance(p, dict):
                    titles += _strings(p.get("title"))
                    texts += _strings(p.get("paragraph_text") or p.get("text"))
    return titles, texts


def parse_item(row: dict[str, Any], fallback_id: str) -> BenchmarkItem | None:
    """One benchmark item, or None for a row without a question (nothing to compare)."""
    question = next((row[k] for k in QUESTION_FIELDS if isinstance(row.get(k), str)), None)
    if question is None or not question.strip():
        return None
    item_id = next((str(row[k]) for k in ID_FIELDS if row.get(k) is not None), fallback_id)
    answers: list[str] = []
    for key in ANSWER_FIELDS:
        answers += _strings(row.get(key))
    if not answers and isinstance(row.get("reward_model"), dict):  # Search-R1 Parquet
        answers = _strings(row["reward_model"].get("ground_truth"))
    titles, texts = _passages(row)
    return BenchmarkItem(item_id, question, tuple(answers), tuple(titles), tuple(texts))


def _jsonl_rows(path: Path) -> Iterator[tuple[int, Any]]:
    with open_checked(path) as fh:
        for lineno, raw in enumerate(fh, 1):
            if lineno == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
            if not raw.strip():
                continue
            try:
                yield lineno, orjson.loads(raw)
            except orjson.JSONDecodeError as exc:
                raise BenchmarkError(f"{path}:{lineno}: not a JSON object ({exc})") from None


def _rows(path: Path) -> Iterator[tuple[int, Any]]:
    if path.name.lower().endswith(".parquet"):
        try:
            pf = pq.ParquetFile(path)
        except Exception as exc:  # pyarrow raises several types for a file that is not Parquet
            raise BenchmarkError(f"{path}: not a readable Parquet file ({exc})") from None
        n = 0
        for batch in pf.iter_batches(batch_size=10_000):
            for row in batch.to_pylist():
                n += 1
                yield n, row
        return
    yield from _jsonl_rows(path)


def load_benchmark(path: str | Path) -> Benchmark:
    """Every item with a question; an item without an id is named by its 1-based line/row."""
    path = Path(path)
    if not path.exists():
        raise BenchmarkError(f"{path}: no such benchmark file")
    if path.is_dir():
        raise BenchmarkError(f"{path}: is a directory, expected a benchmark file")
    items: list[BenchmarkItem] = []
    for lineno, row in _rows(path):
        if not isinstance(row, dict):
            raise BenchmarkError(f"{path}:{lineno}: expected a JSON object, got {type(row)}")
        if not any(k in row for k in QUESTION_FIELDS):
            raise BenchmarkError(
                f"{path}:{lineno}: no question field (one of {', '.join(QUESTION_FIELDS)})",
                "benchmark files are FlashRAG/Search-R1 JSONL or JSONL/Parquet with a "
                "'question' field",
            )
        item = parse_item(row, str(lineno))
        if item is not None:
            items.append(item)
    if not items:
        raise BenchmarkError(f"{path}: no benchmark item with a question")
    return Benchmark(benchmark_name(path), path.resolve(), sha256_file(path), items)


__all__ = ["Benchmark", "BenchmarkError", "BenchmarkItem", "benchmark_name", "load_benchmark"]
