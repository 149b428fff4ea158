"""The export formats: each writes one folder of an export from the rows of its splits.

Which formats exist is pipeline/core/variants.py:EXPORT_FORMATS (name -> an ExportFormat
here); `curriculum export --format` offers its names, and `export_curriculum` writes each
chosen format into <export>/<name>/ and lists its files in the manifest. Adding a format is an
ExportFormat (a writer) plus one entry there.

The built-in formats stream (`ExportFormat.open`): an export hands them each split's rows a
batch at a time, in order, so no format holds a whole split. A format given only
`write` gets every row at once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.catalog.export_splits import SPLITS
from pipeline.core.io import sha256_file
from schemas.exports import EXTRA_INFO, RECORD_SCHEMA, VERL_SCHEMA

DEFAULT_ABILITY = "fact-reasoning"

Rows = dict[str, list[dict[str, Any]]]  # split -> trainer-neutral rows (export.record_row)
Written = list[tuple[Path, str | None, int | None]]  # each file written: path, split, rows


class SplitWriter(Protocol):
    """A format being written a batch at a time: `add` a split's rows in order (any split,
    any number of times), then `close` once: the files, in the order the manifest lists them."""

    def add(self, split: str, rows: list[dict[str, Any]]) -> None: ...

    def close(self) -> Written: ...


@dataclass(frozen=True)
class ExportFormat:
    # write(folder, rows by split, ability): create `folder` (<export>/<name>, not there yet),
    # write the format's files into it, return them in the order the manifest lists them.
    # A format gives this or `open` (below); the built-in ones stream.
    write: Callable[[Path, Rows, str], Written] | None = None
    # The dataset card's TRL example loads the train split with `trl_train(folder)` (a Python
    # expression, `folder` as it is in the finished export); of the formats exported, the one
    # with the lowest `trl_rank` is shown. None: the card shows no loader for this format.
    trl_train: Callable[[Path], str] | None = None
    trl_rank: int = 0
    # The dataset card's `configs` (what `datasets.load_dataset(<export>)` and the Hub read):
    # `data_files(split)` is the split's file or glob inside `folder`; of the formats exported
    # with one, the lowest `trl_rank` is the card's config. None: never the card's config.
    data_files: Callable[[str], str] | None = None
    # open(folder, ability, scratch): the format's files written a batch at a time (see
    # SplitWriter); `scratch` is an empty folder the writer may use until `close`.
    open: Callable[[Path, str, Path], SplitWriter] | None = None

    def __post_init__(self) -> None:
        if self.write is None and self.open is None:
            raise ValueError("an export format writes its files: give `write` or `open`")


@dataclass
class _Collect:
    """A format with `write` only: its rows gathered, written at `close`."""

    fmt: ExportFormat
    folder: Path
    ability: str
    rows: Rows = field(default_factory=lambda: {s: [] for s in SPLITS})

    def add(self, split: str, rows: list[dict[str, Any]]) -> None:
        self.rows[split] += rows

    def close(self) -> Written:
        return self.fmt.write(self.folder, self.rows, self.ability)


def open_format(fmt: ExportFormat, folder: Path, ability: str, scratch: Path) -> SplitWriter:
    """The format's streaming writer, or one that gathers the rows for its `write`."""
    if fmt.open is None:
        return _Collect(fmt, folder, ability)
    return fmt.open(folder, ability, scratch)


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
                    "evidence_chain": [h["text"] for h in r.get("evidence_chain") or []],
                    "waypoints": r["waypoints"],
                },
            },
            "extra_info": {k: r[k] for k in EXTRA_INFO},
        }
        for r in records
    ]
    return pa.Table.from_pylist(out, schema=VERL_SCHEMA)


def write_jsonl(path: Path, rows: Iterable[dict[str, Any]]) -> int:
    """One JSON object per line; returns the number of rows."""
    n = 0
    with path.open("wb") as fh:
        for n, row in enumerate(rows, 1):  # noqa: B007 - the count is returned
            fh.write(orjson.dumps(row) + b"\n")
    return n


class _FilePerSplit:
    """<folder>/<split><SUFFIX>, one open sink per split, appended a batch at a time."""

    SUFFIX = ""

    def __init__(self, folder: Path, ability: str, scratch: Path) -> None:
        folder.mkdir()
        self.ability = ability
        self.paths = {s: folder / f"{s}{self.SUFFIX}" for s in SPLITS}
        self.sinks = {s: self._open(p) for s, p in self.paths.items()}
        self.rows = dict.fromkeys(SPLITS, 0)

    def _open(self, path: Path) -> Any:
        raise NotImplementedError

    def _write(self, sink: Any, rows: list[dict[str, Any]]) -> None:
        raise NotImplementedError

    def add(self, split: str, rows: list[dict[str, Any]]) -> None:
        self._write(self.sinks[split], rows)
        self.rows[split] += len(rows)

    def close(self) -> Written:
        for sink in self.sinks.values():
            sink.close()
        return [(self.paths[s], s, self.rows[s]) for s in SPLITS]


class _VerlWriter(_FilePerSplit):
    """verl/<split>.parquet, one ParquetWriter per split."""

    SUFFIX = ".parquet"

    def _open(self, path: Path) -> pq.ParquetWriter:
        return pq.ParquetWriter(path, VERL_SCHEMA, compression="zstd")

    def _write(self, sink: pq.ParquetWriter, rows: list[dict[str, Any]]) -> None:
        sink.write_table(verl_table(rows, self.ability))


class _JsonlWriter(_FilePerSplit):
    """jsonl/<split>.jsonl."""

    SUFFIX = ".jsonl"

    def _open(self, path: Path) -> Any:
        return path.open("wb")

    def _write(self, sink: Any, rows: list[dict[str, Any]]) -> None:
        sink.write(b"".join(orjson.dumps(r) + b"\n" for r in rows))


class _HFWriter:
    """Each split's records staged as an Arrow stream in `scratch`, then saved by `datasets`
    from the memory-mapped stream (`save_to_disk`, for `load_from_disk`): no split is held in
    memory. The dataset's fingerprint is the staged file's sha256, so the same rows give the
    same state.json."""

    def __init__(self, folder: Path, ability: str, scratch: Path) -> None:
        self.folder = folder
        self.paths = {s: scratch / f"hf-{s}.arrow" for s in SPLITS}
        self.sinks = {s: pa.OSFile(str(p), "wb") for s, p in self.paths.items()}
        self.writers = {s: pa.ipc.new_stream(self.sinks[s], RECORD_SCHEMA) for s in SPLITS}
        self.rows = dict.fromkeys(SPLITS, 0)

    def add(self, split: str, rows: list[dict[str, Any]]) -> None:
        self.writers[split].write_table(records_table(rows))
        self.rows[split] += len(rows)

    def close(self) -> Written:
        import datasets
        from datasets.table import MemoryMappedTable

        for s in SPLITS:
            if not self.rows[s]:  # a batch of none: a stream without one has no column types
                self.writers[s].write_batch(pa.RecordBatch.from_pylist([], schema=RECORD_SCHEMA))
            self.writers[s].close()
            self.sinks[s].close()
        dd = datasets.DatasetDict(
            {
                s: datasets.Dataset(
                    MemoryMappedTable.from_file(str(p)),
                    split=datasets.NamedSplit(s),
                    fingerprint=sha256_file(p)[:16],
                )
                for s, p in self.paths.items()
            }
        )
        return _save_dataset_dict(dd, self.folder, self.rows)


def _save_dataset_dict(dd: Any, folder: Path, rows: dict[str, int]) -> Written:
    """`dd.save_to_disk(folder)`, quietly; its files, with the rows of each split's shards."""
    import datasets

    # datasets writes no shard for an empty split, and then cannot load it back: ask for one.
    shards = {s: 1 for s, n in rows.items() if n == 0}
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
            out.append((path, s, rows[s] if s and path.suffix == ".arrow" else None))
    return out


VERL = ExportFormat(
    trl_train=lambda d: (
        f"load_dataset('parquet', data_files={str(d / 'train.parquet')!r})['train']"
    ),
    trl_rank=2,
    data_files=lambda split: f"{split}.parquet",
    open=_VerlWriter,
)
HF = ExportFormat(
    trl_train=lambda d: f"load_from_disk({str(d)!r})['train']",
    trl_rank=0,
    data_files=lambda split: f"{split}/*.arrow",
    open=_HFWriter,
)
JSONL = ExportFormat(
    trl_train=lambda d: f"load_dataset('json', data_files={str(d / 'train.jsonl')!r})['train']",
    trl_rank=1,
    data_files=lambda split: f"{split}.jsonl",
    open=_JsonlWriter,
)
