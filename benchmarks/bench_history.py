"""A year of nights: how the cost of one night grows with history.

Builds histories of --nights nights (each one completed run of --records-per-night records in
shards of --shard-size, through synthetic_store.py's real Store API, with a bulk review of
100 records a night) incrementally: the 100-night store is a hard-linked copy (`cp -al`; the
store only ever adds files or replaces them by rename) of the 10-night one plus nights
10..99. Cached under data/out/bench/history-<M>-<seed>/<N>/. At each size, each operation runs
in a fresh subprocess (`--op`), timed inside it, its peak memory its own VmHWM:

  land      write+commit the next night's 8 shard groups, compact it, refresh the catalog,
            sweep, write its report (on a hard-linked scratch copy, so the cache keeps N
            nights); --landings nights in a row, one of each size in turn, each row their
            median (a machine whose speed drifts slows every size alike); `land, checked`
            the same on the copy quality-prep made (below): a store whose quality tables a
            nightly check keeps (question_duplicates grows with the history)
  funnel    the funnel view, whole history and one run
  audit:X   each named audit, whole history and one run
  export    the default export (jsonl) of one run and of all runs
  near-dup  `curriculum quality near-duplicates` without its catalog refresh, lexical
            (MinHash) only: quality.embedding=false, no model is loaded; one new night: the
            N nights already clustered, night N landed (both untimed, in a process of their
            own, once per size on a hard-linked scratch copy), then night N's check timed
  decontam  `curriculum quality decontaminate` against an NQ file, lexical only, no refresh;
            one new night, like near-dup (the same prepared copy)
  near-dup:full, decontam:full
            the same checks over all N nights from nothing (a fresh quality folder): what
            every night cost before the checks kept their state
  open      connect_readonly (an auditor's first open), then one count(*) over curriculum

With --verify, each size's one-night results are compared with a full recheck of the N+1
nights (every quality table's rows but their timestamps; untimed).

An operation projected (linearly in nights, from the smaller sizes) past --skip-over seconds
is skipped. Prints seconds and peak MB by operation and size, the ratio at the largest size to
the smallest, the store's bytes per record and a linear extrapolation to 50,000 records a
night. Figures are one run's, on whatever machine runs it; nothing is asserted.

    .venv/bin/python benchmarks/bench_history.py --nights 10,100,365 --records-per-night 2000
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import multiprocessing as mp
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import duckdb  # noqa: E402
import numpy as np  # noqa: E402
from synthetic_store import (  # noqa: E402
    Corpus,
    artifacts,
    night_tables,
    review,
    run_name,
    write_artifacts,
    write_night,
)

from pipeline.store.store import Store  # noqa: E402

NQ = Path("/work/shared/realdata/nq_test_16.jsonl")
SCALE = 50_000  # records a night of the extrapolation


def vm_hwm_mb() -> float:
    """Peak resident memory (VmHWM), MB, of this process or of its largest finished child
    (audits and exports run their SQL in a worker process: pipeline/catalog/sql_worker.py)."""
    own = int(re.search(r"VmHWM:\s+(\d+)", Path("/proc/self/status").read_text())[1])
    return max(own, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) / 1024


def linked_copy(src: Path, dst: Path) -> None:
    """`cp -al`, but with private manifests: a commit appends to its run's manifest in place,
    which through a hard link would change the source store too."""
    shutil.rmtree(dst, ignore_errors=True)
    subprocess.run(["cp", "-al", str(src), str(dst)], check=True)
    for m in dst.glob("runs/*/manifest.jsonl"):
        data = m.read_bytes()
        m.unlink()
        m.write_bytes(data)


def compacted(root: Path) -> tuple[Path, float]:
    """The N-night store with every run compacted (as landing leaves it), cached beside it:
    a linked copy, compacted, refreshed and swept; and the seconds that took. Its review
    files are swept too, the day's grace passed: after a year of landings a day or two of
    submissions wait for it, not the history's (the bench writes them all at once)."""
    from pipeline.store.compaction import catalog_refreshed_at, compact_finished, sweep
    from pipeline.store.reviews import sweep_reviews

    out = root.with_name(f"{root.name}-compacted")
    marker = out / "compacted.json"
    if marker.exists():  # brought to this checkout's layout and catalog, as landing would
        store = Store(out, out / "curriculum.duckdb")
        if compact_finished(store):  # a derived table this checkout adds (untimed, once)
            print(f"brought {out} to this checkout's compaction", flush=True)
        store.refresh_catalog(artifacts(out))
        sweep(store)
        sweep_reviews(out, catalog_refreshed_at(store), dt.timedelta(0))
        return out, json.loads(marker.read_text())["compact_s"]
    t = time.perf_counter()
    linked_copy(root, out)
    store = Store(out, out / "curriculum.duckdb")
    compact_finished(store)
    store.refresh_catalog(artifacts(out))
    sweep(store)
    sweep_reviews(out, catalog_refreshed_at(store), dt.timedelta(0))
    took = time.perf_counter() - t
    marker.write_text(json.dumps({"compact_s": took}))
    print(f"compacted {out} in {took:.0f} s", flush=True)
    return out, took


# ---- building -----------------------------------------------------------------------------
def _nights(args: tuple[Path, list[int], int, int, int, int]) -> None:
    """A worker's share of the nights (each night has its own seed: order does not matter)."""
    root, nights, m, shard_size, seed, passages = args
    c, store = (
        Corpus(np.random.default_rng(seed), passages),
        Store(root, root / "curriculum.duckdb"),
    )
    for r in nights:
        write_night(store, c, r, m, shard_size, seed)
        ids = duckdb.execute(
            "SELECT record_id, run_id FROM read_parquet(?) ORDER BY md5(record_id) LIMIT 100",
            [str(root / f"shards/curriculum/*/run_id={run_name(r)}/*.parquet")],
        ).fetchall()
        review(root, ids, reject=r % 10 == 0)


def build(a: argparse.Namespace, sizes: list[int]) -> dict[int, dict[str, float]]:
    """Each size's store (cached), extending the previous size's; build and refresh seconds."""
    base, prev, out = ROOT / f"data/out/bench/history-{a.records_per_night}-{a.seed}", None, {}
    params = [a.records_per_night, a.shard_size, a.seed, a.passages]
    for n in sizes:
        root, marker = base / str(n), base / str(n) / "built.json"
        built = json.loads(marker.read_text()) if marker.exists() else {}
        if built.get("params") == params:
            print(f"reusing {root} (built in {built['build_s']:.0f} s)", flush=True)
            out[n], prev = built, (n, root)
            continue
        shutil.rmtree(root, ignore_errors=True)
        t = time.perf_counter()
        if prev:  # the smaller history, hard-linked, then the nights it lacks
            linked_copy(prev[1], root)
            (root / "built.json").unlink()
            first = prev[0]
        else:
            root.mkdir(parents=True)
            write_artifacts(root, Corpus(np.random.default_rng(a.seed), a.passages))
            first = 0
        todo = list(range(first, n))
        jobs = [(root, todo[i :: a.workers], a.records_per_night, a.shard_size, a.seed, a.passages)
                for i in range(a.workers)]  # fmt: skip
        with mp.get_context("fork").Pool(a.workers) as pool:
            pool.map(_nights, jobs)
        build_s = time.perf_counter() - t
        t = time.perf_counter()
        Store(root, root / "curriculum.duckdb").refresh_catalog(artifacts(root))
        built = {"params": params, "build_s": build_s, "refresh_s": time.perf_counter() - t}
        marker.write_text(json.dumps(built))
        print(f"built {root}: nights {first}..{n - 1} in {build_s:.0f} s, catalog refresh "
              f"{built['refresh_s']:.0f} s", flush=True)  # fmt: skip
        out[n], prev = built, (n, root)
    return out


# ---- operations (each in its own process) -------------------------------------------------
def op_land(root: Path, n: int, a: argparse.Namespace) -> dict[str, float]:
    """Night n + --round on top of the nights before it, landed as `land_stage` lands a
    night: its shards drawn and the day's review submission written first (untimed), then
    committed, its compaction (the reviews' fold too), the catalog refresh, the sweep of what
    the compaction replaced; then its report. What a landing imports the first time in a
    process (pandas, matplotlib), a nightly has imported by then: imported first, untimed."""
    import matplotlib.figure  # noqa: F401
    import pandas  # noqa: F401
    import pyarrow.dataset  # noqa: F401

    from pipeline.catalog.report import write_run_report
    from pipeline.store.compaction import compact_finished, sweep

    c, night = Corpus(np.random.default_rng(a.seed), a.passages), n + a.round
    groups = night_tables(c, night, a.records_per_night, a.shard_size, a.seed)
    store = Store(root, root / "curriculum.duckdb")
    # the day's review submission, of the night before's records (landing folds it)
    yesterday = store.read_run_table(run_name(night - 1), "curriculum").slice(0, 100)
    review(root, list(zip(*yesterday.select(["record_id", "run_id"]).to_pydict().values(),
                          strict=True)), reject=False)  # fmt: skip
    t0 = time.perf_counter()
    write_night(store, c, night, a.records_per_night, a.shard_size, a.seed, groups)
    t1 = time.perf_counter()
    compact_finished(store)
    t2 = time.perf_counter()
    store.refresh_catalog(artifacts(root))
    sweep(store)
    t3 = time.perf_counter()
    write_run_report(store.catalog_path, store.run_dir(run_name(night)), run_name(night))
    t4 = time.perf_counter()
    return {"land: commit": t1 - t0, "land: compact": t2 - t1, "land: refresh": t3 - t2,
            "land: report": t4 - t3, "land: total": t4 - t0}  # fmt: skip


def land_rounds(
    sizes: list[int], roots: dict[int, Path], a: argparse.Namespace, first: int = 0, tag: str = ""
) -> dict:
    """--landings nights landed on each size's store from night N + `first` (a hard-linked
    scratch copy, so the store keeps its nights), a night of each size in turn, each in a
    fresh process: a machine whose speed drifts over minutes slows every size alike. Each row
    (`land<tag>: ...`) is the median over the landings, its peak the largest; row -> nights
    -> (s, MB)."""
    scratch = {n: roots[n].parent / f"{n}-land" for n in sizes}
    for n in sizes:
        linked_copy(roots[n], scratch[n])
    got: dict[str, dict[int, list[tuple[float, float]]]] = {}
    try:
        for r in range(first, first + a.landings):
            for n in sizes:
                one = spawn("land", scratch[n], n, a, max(a.skip_over * 2, 60), r)
                if "error" in one:
                    raise SystemExit(f"land at {n} nights: {one['error']}")
                for row, s in one["rows"].items():
                    row = row.replace("land", f"land{tag}", 1)
                    got.setdefault(row, {}).setdefault(n, []).append((s, one["peak_mb"]))
                total = one["rows"]["land: total"]
                print(f"  land{tag} at {n} nights, night {n + r}: {total:.2f} s "
                      f"{one['peak_mb']:.0f} MB", flush=True)  # fmt: skip
    finally:
        for n in sizes:
            shutil.rmtree(scratch[n], ignore_errors=True)
    return {row: {n: (float(np.median([s for s, _ in v])), max(mb for _, mb in v))
                  for n, v in by.items()} for row, by in got.items()}  # fmt: skip


def lexical() -> Any:
    from cli.common import config_or_fail

    return config_or_fail("configs/embedded.yaml", ["quality.embedding=false"])


def quality_prep(root: Path, n: int, a: argparse.Namespace) -> dict[str, float]:
    """On a scratch copy of the N-night store: both checks over the N nights (full), then
    night N landed as landing does it (commit, compaction, refresh, sweep; with --uncompacted
    commit and refresh), so that the next check has one new night."""
    from pipeline.quality.checks import decontaminate_catalog
    from pipeline.quality.cluster_check import cluster_catalog
    from pipeline.store.compaction import compact_finished, sweep

    store, cfg, t = Store(root, root / "curriculum.duckdb"), lexical(), time.perf_counter()
    cluster_catalog(cfg, store)
    decontaminate_catalog(cfg, store, [NQ])
    t1 = time.perf_counter()
    c = Corpus(np.random.default_rng(a.seed), a.passages)
    write_night(store, c, n, a.records_per_night, a.shard_size, a.seed)
    if not a.uncompacted:
        compact_finished(store)
    store.refresh_catalog(artifacts(root))
    if not a.uncompacted:
        sweep(store)
    return {"quality-prep: checks": t1 - t, "quality-prep: land": time.perf_counter() - t1}


def table_rows(root: Path, table: str, drop: str) -> list[tuple]:
    """Every row of a quality table's files but column `drop`, in one order."""
    files = [str(p) for p in sorted((root / "quality" / table).glob("*.parquet"))]
    sql = f"SELECT * EXCLUDE ({drop}) FROM read_parquet(?) ORDER BY ALL"
    return duckdb.sql(sql, params=[files]).fetchall() if files else []


def quality_verify(root: Path, scratch: Path) -> dict[str, float]:
    """The prepared copy's tables (history checked, then one night) against a full recheck of
    the same N+1 nights into `scratch`: raises on any difference but the timestamps."""
    from pipeline.quality.checks import decontaminate_catalog
    from pipeline.quality.cluster_check import cluster_catalog

    t, cfg, fresh = time.perf_counter(), lexical(), Store(scratch, root / "curriculum.duckdb")
    cluster_catalog(cfg, fresh)
    decontaminate_catalog(cfg, fresh, [NQ])
    drop = {"question_minhash": "checked_at", "question_duplicates": "computed_at",
            "benchmark_matches": "checked_at", "benchmark_checks": "checked_at"}  # fmt: skip
    for table, ts in drop.items():
        got, want = (table_rows(r, table, ts) for r in (root, scratch))
        if got != want:
            raise SystemExit(f"{table}: one night's check differs from a full recheck")
        print(f"{table}: {len(got)} rows, identical to a full recheck", file=sys.stderr)
    return {"quality-verify": time.perf_counter() - t}


def run_op(op: str, root: Path, n: int, a: argparse.Namespace) -> dict[str, float]:
    """Time one operation against the N-night store at `root`; seconds by row name."""
    from pipeline.catalog.audit import run_audit
    from pipeline.catalog.export import export_curriculum
    from pipeline.store.store import connect_readonly

    cat, one = root / "curriculum.duckdb", run_name(n - 1)  # the latest night of the history
    if op == "land":
        return op_land(root, n, a)
    scratch = Path(tempfile.mkdtemp(dir=root.parent))
    try:
        t = time.perf_counter()
        if op.startswith("funnel"):
            with connect_readonly(cat) as con:
                sql = "SELECT * FROM funnel" + (" WHERE run_id = ?" if op.endswith("run") else "")
                con.execute(sql, [one] if op.endswith("run") else []).fetchall()
        elif op.startswith("audit:"):
            _, name, scope = op.split(":")
            run_audit(cat, name, one if scope == "run" else None)
        elif op.startswith("export"):
            runs = [one] if op.endswith("run") else []
            export_curriculum(cat, scratch / "export", formats=["jsonl"], run_ids=runs)
        elif op in ("near-dup:full", "decontam:full"):
            from pipeline.quality.checks import decontaminate_catalog
            from pipeline.quality.cluster_check import cluster_catalog

            cfg, store = lexical(), Store(scratch, cat)  # the history's catalog, fresh tables
            t = time.perf_counter()
            if op == "near-dup:full":
                res = cluster_catalog(cfg, store)
            else:
                [res] = decontaminate_catalog(cfg, store, [NQ])
            assert res.full
            return {op: time.perf_counter() - t}
        elif op in ("near-dup", "decontam"):  # `root` is the prepared copy (quality-prep)
            from pipeline.quality.checks import decontaminate_catalog
            from pipeline.quality.cluster_check import cluster_catalog

            cfg, store = lexical(), Store(root, cat)
            t = time.perf_counter()
            if op == "near-dup":
                res = cluster_catalog(cfg, store)
            else:
                [res] = decontaminate_catalog(cfg, store, [NQ])
            took = time.perf_counter() - t
            assert not res.full, f"{op} rechecked everything: {getattr(res, 'reason', '')}"
            return {op: took}
        elif op == "quality-prep":
            return quality_prep(root, n, a)
        elif op == "quality-verify":
            return quality_verify(root, scratch)
        elif op == "open":
            con = connect_readonly(cat)
            opened = time.perf_counter() - t
            con.execute("SELECT count(*) FROM curriculum").fetchall()
            con.close()
            return {"open catalog": opened, "first query": time.perf_counter() - t - opened}
        else:
            raise SystemExit(f"unknown op {op}")
        return {op: time.perf_counter() - t}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def ops() -> list[str]:
    from pipeline.catalog.audit import AUDITS

    audits = [f"audit:{x}:{s}" for x in AUDITS for s in ("all", "run")]
    return ["land", "open", "funnel:all", "funnel:run", *audits, "export:run", "export:all",
            "near-dup", "decontam", "near-dup:full", "decontam:full"]  # fmt: skip


QUALITY_OPS = ("near-dup", "decontam")  # run on the copy quality-prep made


def spawn(
    op: str, root: Path, n: int, a: argparse.Namespace, limit: float, rnd: int = 0
) -> dict[str, Any]:
    """Run `op` in a fresh interpreter; its rows' seconds and its peak MB (or why not)."""
    cmd = [sys.executable, __file__, "--op", op, "--root", str(root), "--n", str(n)]
    cmd += ["--round", str(rnd)]
    cmd += ["--records-per-night", str(a.records_per_night), "--shard-size", str(a.shard_size)]
    cmd += ["--seed", str(a.seed), "--passages", str(a.passages)]
    cmd += ["--uncompacted"] if a.uncompacted else []
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=limit, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {limit:.0f} s"}
    if p.returncode != 0:
        return {"error": (p.stderr.strip().splitlines() or ["?"])[-1][:160]}
    return json.loads(p.stdout.strip().splitlines()[-1])


# ---- the table ----------------------------------------------------------------------------
def project(points: dict[int, float], n: int) -> float:
    """Linear in nights through the last two sizes (proportional from one)."""
    xs = sorted(points)
    if len(xs) == 1:
        return points[xs[0]] * n / xs[0]
    x0, x1 = xs[-2:]
    slope = (points[x1] - points[x0]) / (x1 - x0)
    return points[x1] + slope * (n - x1)


def fit(points: dict[int, float], m: int) -> float:
    """Least-squares t = a + b*nights, then records a night m/M times as many: a + b*N*m/M."""
    xs = np.array(sorted(points), dtype=float)
    ys = np.array([points[int(x)] for x in xs])
    b, a0 = np.polyfit(xs, ys, 1) if len(xs) > 1 else (ys[0] / xs[0], 0.0)
    return float(max(a0 + b * xs[-1] * m, ys[-1]))


def size_of(path: Path, skip: str = "") -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and skip not in p.parts)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nights", default="10,100,365")
    ap.add_argument("--records-per-night", type=int, default=2000)
    ap.add_argument("--shard-size", type=int, default=250)
    ap.add_argument("--passages", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=17)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="building")
    ap.add_argument("--skip-over", type=float, default=300, help="projected seconds")
    ap.add_argument("--only", default="", help="comma-separated operations (default all)")
    ap.add_argument("--landings", type=int, default=5, help="nights landed a size (median)")
    ap.add_argument(
        "--uncompacted",
        action="store_true",
        help="measure the stores as written, not compacted (the layout before compaction)",
    )
    ap.add_argument("--verify", action="store_true", help="one night's checks = a full recheck")
    ap.add_argument("--op", help=argparse.SUPPRESS)
    ap.add_argument("--root", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--n", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--round", type=int, default=0, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.op:  # a child: one operation, its seconds and peak on stdout's last line
        rows = run_op(a.op, a.root, a.n, a)
        print(json.dumps({"rows": rows, "peak_mb": vm_hwm_mb()}))
        return
    sizes = sorted(int(x) for x in a.nights.split(","))
    load0, t_all = os.getloadavg(), time.perf_counter()
    built = build(a, sizes)
    res: dict[str, dict[int, tuple[float, float]]] = {}  # row -> nights -> (s, MB)
    notes: dict[str, dict[int, str]] = {}
    chosen = [o for o in ops() if not a.only or o.split(":")[0] in a.only.split(",")]
    roots = {}
    for n in sizes:
        roots[n] = ROOT / f"data/out/bench/history-{a.records_per_night}-{a.seed}/{n}"
        if not a.uncompacted:  # what landing leaves: every run compacted
            roots[n], built[n]["compact_s"] = compacted(roots[n])
    # each size's history checked by both quality checks, then night N landed (untimed):
    # the store a night's checks start from, and that landing with the checks' tables
    prepared = {n: roots[n].parent / f"{n}-quality" for n in sizes}
    if "land" in chosen or any(op in QUALITY_OPS for op in chosen):
        for n in sizes:
            linked_copy(roots[n], prepared[n])
            got = spawn("quality-prep", prepared[n], n, a, 3600)
            if "error" in got:
                raise SystemExit(f"quality-prep: {got['error']}")
            print(f"  {n} nights, " + ", ".join(f"{row} {s:.2f} s" for row, s in
                  got["rows"].items()) + " (untimed prep)", flush=True)  # fmt: skip
    if "land" in chosen:
        print("\nlanding, a night of each size in turn:", flush=True)
        res.update(land_rounds(sizes, roots, a))
        print("\nlanding on the checked stores (the quality checks' tables kept):", flush=True)
        res.update(land_rounds(sizes, prepared, a, first=1, tag=", checked"))
    for n in sizes:
        root = roots[n]
        print(f"\n{n} nights:", flush=True)
        for op in (o for o in chosen if o != "land"):
            rows = [r for r in res if r == op or r.startswith(op.split(":")[0] + ": ")]
            past = {k: v[0] for r in rows[-1:] for k, v in res[r].items()}
            if op == "open":
                past = {k: sum(res[r][k][0] for r in ("open catalog", "first query") if k in
                        res.get(r, {})) for k in res.get("open catalog", {})}  # fmt: skip
            if past and (p := project(past, n)) > a.skip_over:
                notes.setdefault(op, {})[n] = f"skipped (>{a.skip_over:.0f} s: {p:.0f} s projected)"
                print(f"  {op:<24} {notes[op][n]}", flush=True)
                continue
            target = prepared[n] if op in QUALITY_OPS else root
            got = spawn(op, target, n, a, max(a.skip_over * 2, 60))
            if "error" in got:
                notes.setdefault(op, {})[n] = got["error"]
                print(f"  {op:<24} {got['error']}", flush=True)
                continue
            for row, s in got["rows"].items():
                res.setdefault(row, {})[n] = (s, got["peak_mb"])
                print(f"  {row:<24} {s:8.2f} s {got['peak_mb']:8.0f} MB", flush=True)
        if a.verify and prepared[n].exists():
            got = spawn("quality-verify", prepared[n], n, a, 3600)
            print(f"  quality-verify: {got.get('error') or 'identical to a full recheck'}")
        shutil.rmtree(prepared[n], ignore_errors=True)
    load1 = os.getloadavg()

    big, small = sizes[-1], sizes[0]
    head = "".join(f"{f'{n} s':>9}{f'{n} MB':>8}" for n in sizes)
    print(f"\n{'operation':<24}{head}{f'{big}/{small} s':>10}{'MB':>6}"
          f"{f'{SCALE // 1000}k/night s':>14}{'MB':>7}")  # fmt: skip
    for row in [*res, *(o for o in notes if o not in res)]:
        cells = ""
        for n in sizes:
            if n in res.get(row, {}):
                s, mb = res[row][n]
                cells += f"{s:9.2f}{mb:8.0f}"
            else:
                cells += (
                    f"{'skipped' if 'skipped' in notes.get(row, {}).get(n, '') else 'error':>17}"
                )
        have = res.get(row, {})
        ratio = (f"{have[big][0] / have[small][0]:10.1f}{have[big][1] / have[small][1]:6.1f}"
                 if big in have and small in have else f"{'-':>16}")  # fmt: skip
        m = SCALE / a.records_per_night
        ts, mbs = ({k: v[i] for k, v in have.items()} for i in (0, 1))
        ext = f"{fit(ts, m):14.0f}{fit(mbs, m):7.0f}" if len(have) > 1 else ""
        print(f"{row:<24}{cells}{ratio}{ext}")
    for op, why in notes.items():
        for n, w in why.items():
            print(f"  {op} at {n} nights: {w}")
    print(f"\n{'nights':>6}{'records':>10}{'build s':>9}{'refresh s':>10}{'store MB':>10}"
          f"{'B/record':>9}{'catalog MB':>11}{'files':>8}")  # fmt: skip
    for n in sizes:
        root = ROOT / f"data/out/bench/history-{a.records_per_night}-{a.seed}/{n}"
        root = root if a.uncompacted else root.with_name(f"{n}-compacted")
        cat = (root / "curriculum.duckdb").stat().st_size
        shards = size_of(root / "shards") + size_of(root / "runs") + size_of(root / "reviews")
        files = sum(1 for _ in (root / "shards").rglob("*.parquet"))
        recs = n * a.records_per_night
        b = built[n]
        note = f"  (compacting all {n} runs: {b['compact_s']:.0f} s)" if "compact_s" in b else ""
        print(f"{n:>6}{recs:>10,}{b['build_s']:>9.0f}{b['refresh_s']:>10.0f}{shards / 1e6:>10,.0f}"
              f"{shards / recs:>9,.0f}{cat / 1e6:>11,.0f}{files:>8,}{note}")  # fmt: skip
    print(
        f"\n{SCALE:,}/night: least-squares t = a + b*nights over the sizes, then a + b*{big}*"
        f"{SCALE / a.records_per_night:.0f} (the growing part scaled by the records a night; "
        "the fixed part a kept, so a floor for per-night work)"
    )
    loads = ["/".join(f"{x:.2f}" for x in load) for load in (load0, load1)]
    print(
        f"{time.perf_counter() - t_all:.0f} s in all; load average before {loads[0]}, after "
        f"{loads[1]}; {os.cpu_count()} cores"
    )


if __name__ == "__main__":
    main()
