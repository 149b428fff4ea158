"""Review files as written (one per submission) against the same reviews folded by landing:
what every read-only connection pays for them, side by side in one run.

A reviewer's submission is one Parquet file under <out>/reviews/, and every read-only
connection (an audit, `curriculum sql`, each of an export's batches, the browser) binds all
live review files; the refresh checks each one's schema. A team that reviews every day
writes thousands a year. Landing folds them (pipeline/store/reviews.py: compacted files of
about SEALED_ROWS reviews; a sweep a day later deletes what they hold). This writes a
small synthetic store (benchmarks/synthetic_store.py) with --submissions submissions of 1 to
10 reviews each, then measures, each in a fresh interpreter:

  open      connect_readonly and the latest verdict per record (view review_latest)
  refresh   the catalog refresh (it lists the review files and checks their schemas)

on the files as written, then folds them (timed: compact_reviews, the refresh, the sweep)
and measures the same again: "folded" (the held files still on disk, as for the day after
the fold), then "swept" (deleted, as the sweep a GRACE later leaves them). Peak MB is the
interpreter's VmHWM (the floor, duckdb and the pipeline imported, is printed).

    .venv/bin/python benchmarks/bench_reviews.py --submissions 5000
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from synthetic_store import Corpus, artifacts, review, write_artifacts, write_night  # noqa: E402

from pipeline.store.store import Store  # noqa: E402

NIGHTS, RECORDS = 3, 400


def peak_mb() -> float:
    return int(re.search(r"VmHWM:\s+(\d+)", Path("/proc/self/status").read_text())[1]) / 1024


def child(op: str, root: Path) -> dict[str, float]:
    """One measurement in this (fresh) interpreter."""
    from pipeline.store.store import connect_readonly

    store, floor = Store(root, root / "curriculum.duckdb"), peak_mb()
    t = time.perf_counter()
    if op == "open":
        with connect_readonly(store.catalog_path) as con:
            con.execute("SELECT count(*) FROM review_latest").fetchall()
    elif op == "refresh":
        store.refresh_catalog(artifacts(root))
    return {"s": time.perf_counter() - t, "mb": peak_mb(), "floor": floor}


def measure(op: str, root: Path, repeat: int) -> dict[str, float]:
    """The median seconds of `repeat` fresh interpreters, and their largest peak."""
    runs = []
    for _ in range(repeat):
        cmd = [sys.executable, __file__, "--op", op, "--root", str(root)]
        p = subprocess.run(cmd, capture_output=True, text=True, check=True, cwd=ROOT)
        runs.append(json.loads(p.stdout.strip().splitlines()[-1]))
    return {
        "s": float(np.median([r["s"] for r in runs])),
        "mb": max(r["mb"] for r in runs),
        "floor": min(r["floor"] for r in runs),
    }


def build(root: Path, submissions: int, seed: int) -> int:
    """The store, its catalog, then the submissions (as a reviewer writes them, after the
    refresh); the number of reviews."""
    import duckdb

    c = Corpus(np.random.default_rng(seed), 300)
    store = Store(root, root / "curriculum.duckdb")
    write_artifacts(root, c)
    for r in range(NIGHTS):
        write_night(store, c, r, RECORDS, RECORDS // 2, seed)
    store.refresh_catalog(artifacts(root))
    with duckdb.connect() as con:
        ids = con.execute(
            "SELECT record_id, run_id FROM read_parquet(?) ORDER BY record_id",
            [str(root / "shards/curriculum/*/*/*.parquet")],
        ).fetchall()
    rng, reviews = np.random.default_rng(seed), 0
    for i in range(submissions):
        picked = rng.choice(len(ids), int(rng.integers(1, 11)), replace=False)
        review(root, [ids[k] for k in picked], reject=i % 7 == 0)
        reviews += len(picked)
    return reviews


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--submissions", type=int, default=5000)
    ap.add_argument("--repeat", type=int, default=3, help="fresh interpreters per figure")
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--op", help=argparse.SUPPRESS)
    ap.add_argument("--root", type=Path, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.op:
        print(json.dumps(child(a.op, a.root)))
        return
    from pipeline.store.compaction import sweep
    from pipeline.store.reviews import compact_reviews, review_files, sweep_reviews

    root = Path(tempfile.mkdtemp(prefix="bench-reviews-")) / "out"
    try:
        t = time.perf_counter()
        reviews = build(root, a.submissions, a.seed)
        files = len(review_files(root))
        print(f"{a.submissions} submissions ({reviews} reviews, {files} files) written in "
              f"{time.perf_counter() - t:.0f} s", flush=True)  # fmt: skip
        written = {op: measure(op, root, a.repeat) for op in ("refresh", "open")}
        store, t = Store(root, root / "curriculum.duckdb"), time.perf_counter()
        folded_into = compact_reviews(root)
        store.refresh_catalog(artifacts(root))
        sweep(store)  # as landing does: the held files stay for earlier readers
        fold_s = time.perf_counter() - t
        print(f"folded into {len(folded_into)} files ({len(review_files(root))} live) in "
              f"{fold_s:.2f} s (the fold, a refresh, the sweep)", flush=True)  # fmt: skip
        folded = {op: measure(op, root, a.repeat) for op in ("refresh", "open")}
        gone = sweep_reviews(root, dt.datetime.now(dt.UTC), dt.timedelta(0))
        print(f"swept {len(gone)} held files, as the sweep a GRACE later does", flush=True)
        swept = {op: measure(op, root, a.repeat) for op in ("refresh", "open")}
    finally:
        shutil.rmtree(root.parent, ignore_errors=True)
    runs = {"as written": written, "folded": folded, "swept": swept}
    floor = min(r["floor"] for by_op in runs.values() for r in by_op.values())
    print(f"\nmedian of {a.repeat} fresh interpreters; peak MB (floor {floor:.0f})")
    print(f"{'':8}" + "".join(f"{k:>19}" for k in runs) + f"{'written/swept s':>17}")
    for op in ("open", "refresh"):
        cells = "".join(f"{r[op]['s']:9.3f} s {r[op]['mb']:4.0f} MB" for r in runs.values())
        print(f"{op:8}{cells}{written[op]['s'] / swept[op]['s']:16.1f}x")


if __name__ == "__main__":
    main()
