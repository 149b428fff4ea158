"""The export formats: each writes one folder of an export from the rows of its splits.

Which formats exist is pipeline/core/variants.py:EXPORT_FORMATS (name -> an ExportFormat
here); `curriculum export --format` offers its names, and `export_curriculum` writes each
chosen format into <export>/<name>/ and lists its files in the manifest. Adding a format is an
ExportFormat (a writer) plus one entry there.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.catalog.export_splits import SPLITS
from schemas.exports import EXTRA_INFO, RECORD_SCHEMA, VERL_SCHEMA

DEFAULT_ABILITY = "fact-reasoning"

Rows = dict[str, list[dict[str, Any]]]  # split -> trainer-neutral rows (export.record_rows)
Written = list[tuple[Path, str | None, int | None]]  # each file written: path, split, rows


@dataclass(frozen=True)
class ExportFormat:
    # write(folder, rows by split, ability): create `folder` (<export>/<name>, not there yet),
    # write the format's files into it, return them in the order the manifest lists them.
    write: Callable[[Path, Rows, str], Written]
    # The dataset card's TRL example loads the train split with `trl_train(folder)` (a Python
    # expression, `folder` as it is in the finished export); of the formats exported, the one
    # with the lowest `trl_rank` is shown. None: the card shows no loader for this format.
    trl_train: Callable[[Path], str] | None = None
    trl_rank: int = 0
    # The dataset card's `configs` (what `datasets.load_dataset(<export>)` and the Hub read):
    # `data_files(split)` is the split's file or glob inside `folder`; of the formats exported
    # with one, the lowest `trl_rank` is the card's config. None: never the card's config.
    data_files: Callable[[str], str] | None = None


def records_table(records: list[dict[str, Any]]) -> pa.Table:
    return pa.Table.from_pylist(records, schema=RECORD_SCHEMA)


def verl_table(records: list[dict[str, Any]], ability: str = DEFAULT_ABILITY) -> pa.Table:
    """verl / Search-R1 rows: reward_model.ground_truth.target is the list the EM reward reads."""
    out = [
        {
            "data_source": r["data_source"],
            "prompt": r["prompt"],
            "ability": ability,
            "reward_model": {
                "style": "rule",
                "ground_truth": {
                    "target": r["golden_answers"],
                    "evidence": r["evidence"],
                    "waypoints": r["waypoints"],
                },
            },
            "extra_info": {k: r[k] for k in EXTRA_INFO},
        }
        for r in records
    ]
    return pa.Table.from_pylist(out, schema=VERL_SCHEMA)


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    with path.open("wb") as fh:
        for row in rows:
            fh.write(orjson.dumps(row) + b"\n")


def _verl(folder: Path, records: Rows, ability: str) -> Written:
    folder.mkdir()
    out: Written = []
    for s in SPLITS:
        path = folder / f"{s}.parquet"
        pq.write_table(verl_table(records[s], ability), path, compression="zstd")
        out.append((path, s, len(records[s])))
    return out


def _hf(folder: Path, records: Rows, ability: str) -> Written:
    import datasets

    tables = {s: records_table(records[s]) for s in SPLITS}
    dd = datasets.DatasetDict(
        {s: datasets.Dataset(t, split=datasets.NamedSplit(s)) for s, t in tables.items()}
    )
    # datasets writes no shard for an empty split, and then cannot load it back: ask for one.
    shards = {s: 1 for s, t in tables.items() if t.num_rows == 0}
    bars = datasets.is_progress_bar_enabled()
    datasets.disable_progress_bars()
    try:
        dd.save_to_disk(str(folder), num_shards=shards or None)
    finally:
        if bars:
            datasets.enable_progress_bars()
    out: Written = []
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            rel = path.relative_to(folder).parts
            s = rel[0] if len(rel) > 1 else None
            out.append((path, s, len(records[s]) if s and path.suffix == ".arrow" else None))
    return out


def _jsonl(folder: Path, records: Rows, ability: str) -> Written:
    folder.mkdir()
    out: Written = []
    for s in SPLITS:
        path = folder / f"{s}.jsonl"
        write_jsonl(path, records[s])
        out.append((path, s, len(records[s])))
    return out


VERL = ExportFormat(
    _verl,
    trl_train=lambda d: f"load_dataset('parquet', data_files='{d / 'train.parquet'}')['train']",
    trl_rank=2,
    data_files=lambda split: f"{split}.parquet",
)
HF = ExportFormat(
    _hf,
    trl_train=lambda d: f"load_from_disk('{d}')['train']",
    trl_rank=0,
    data_files=lambda split: f"{split}/*.arrow",
)
JSONL = ExportFormat(
    _jsonl,
    trl_train=lambda d: f"load_dataset('json', data_files='{d / 'train.jsonl'}')['train']",
    trl_rank=1,
    data_files=lambda split: f"{split}.jsonl",
)
