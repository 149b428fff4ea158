"""Peak memory of the corpus duplicate-id check: an in-memory dict vs the DuckDB check.

A Python dict of every id seen (id -> line) takes ~1.5 GB at the 21M passages of
Wikipedia-2018; the corpus reader checks after the pass with DuckDB over the passages
file it just wrote (`pipeline.retrieval.corpus.find_duplicate_ids`, memory-limited,
spilling to disk).
This writes a passages-shaped Parquet file of N ids (FlashRAG-style decimal ids, default 5M,
with three duplicated ids at known lines), then runs each check in a fresh child process and
reads the child's own peak RSS (ru_maxrss via os.wait4). Both children import the same
modules first, so their baselines match; the table shows peak RSS, the growth over that
baseline, time and the duplicates found, and the ratio old / new side by side:
    .venv/bin/python benchmarks/bench_duplicate_ids.py [--ids 5000000]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pipeline.retrieval.corpus import find_duplicate_ids  # noqa: E402
from schemas.tables import PASSAGES  # noqa: E402

DUPLICATED = (7, 1_000, 40_000)  # ids repeated once more at the end of the file


def write_ids(path: Path, n: int, batch: int = 500_000) -> None:
    """A passages file with n + len(DUPLICATED) rows (real schema, short text)."""
    with pq.ParquetWriter(path, PASSAGES, compression="zstd") as writer:
        for start in range(0, n, batch):
            ids = [str(i) for i in range(start, min(n, start + batch))]
            writer.write_table(_rows(ids, start))
        writer.write_table(_rows([str(i) for i in DUPLICATED], n))


def _rows(ids: list[str], first_row: int) -> pa.Table:
    k = len(ids)
    return pa.table(
        {
            "id": ids,
            "title": ["T"] * k,
            "text": ["x"] * k,
            "char_len": [1] * k,
            "row": list(range(first_row, first_row + k)),
            "source_file": ["corpus.jsonl"] * k,
            "source_line": list(range(first_row + 1, first_row + k + 1)),
        },
        schema=PASSAGES,
    )


def check_in_memory(path: Path) -> list[tuple[str, int, int]]:
    """The reader's old check: one dict entry per id for the whole pass."""
    seen: dict[str, int] = {}
    dups = []
    for batch in pq.ParquetFile(path).iter_batches(columns=["id", "source_line"]):
        lines = batch["source_line"].to_pylist()
        for pid, line in zip(batch["id"].to_pylist(), lines, strict=True):
            if pid in seen:
                dups.append((pid, line, seen[pid]))
            else:
                seen[pid] = line
    return dups


def check_duckdb(path: Path) -> list[tuple[str, int, int]]:
    return [(d.id, d.source_line, d.first_line) for d in find_duplicate_ids(path)]


def child(method: str, path: Path) -> None:
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    dups = (check_in_memory if method == "dict" else check_duckdb)(path)
    out = {"base_kb": base, "seconds": time.perf_counter() - t0, "dups": len(dups)}
    print(json.dumps(out), flush=True)


def run_child(method: str, path: Path) -> dict:
    proc = subprocess.Popen(
        [sys.executable, __file__, "--child", method, "--path", str(path)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    if status != 0:
        raise SystemExit(f"{method} child failed with status {status}")
    return json.loads(line) | {"peak_kb": usage.ru_maxrss}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ids", type=int, default=5_000_000)
    ap.add_argument("--child", choices=["dict", "duckdb"])
    ap.add_argument("--path", type=Path)
    args = ap.parse_args()
    if args.child:
        child(args.child, args.path)
        return
    work = Path(tempfile.mkdtemp(prefix="bench-dup-ids-"))
    try:
        path = work / "passages.parquet"
        write_ids(path, args.ids)
        print(f"{args.ids:,} ids (+{len(DUPLICATED)} duplicated) in {path.stat().st_size:,} bytes")
        res = {m: run_child(m, path) for m in ("dict", "duckdb")}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{'check':<22} {'peak RSS MB':>12} {'growth MB':>10} {'seconds':>8} {'dups':>5}")
    for m, label in (("dict", "in-memory dict (old)"), ("duckdb", "DuckDB on disk (new)")):
        r = res[m]
        growth = (r["peak_kb"] - r["base_kb"]) / 1024
        print(
            f"{label:<22} {r['peak_kb'] / 1024:>12.0f} {growth:>10.0f} "
            f"{r['seconds']:>8.1f} {r['dups']:>5}"
        )
    old, new = res["dict"], res["duckdb"]
    print(
        f"ratio old/new: peak RSS {old['peak_kb'] / new['peak_kb']:.2f}x, growth over baseline "
        f"{(old['peak_kb'] - old['base_kb']) / max(new['peak_kb'] - new['base_kb'], 1):.2f}x, "
        f"time {old['seconds'] / new['seconds']:.2f}x"
    )


if __name__ == "__main__":
    main()
