"""The record browser at a million records, against its latency targets.

Proves that the real server (`python -m cli browse`, a subprocess on 127.0.0.1) over a catalog
built by the real `Store.refresh_catalog` answers the records page's first and filtered pages
in p95 <= 300 ms and a record page in <= 200 ms, with a peak RSS <= 1 GB, on a synthetic
store (synthetic_store.py) of N records (default 1M) over --runs runs in shards of
--shard-size (production's 512): each record a curriculum row of realistic text lengths
(accepted, or rejected for each reason the verdicts give) with its proposer rollout, 4 solver
rollouts once valid, and 10 MC verifier samples, 2 gate rollouts and 4 control scores once
its evidence is verbatim;
100k passages, 20k KG subgraphs, 2,000 reviews in 20 files. Built once, deterministic from
--seed, cached under data/out/bench/browse-<N>-<seed>/; the catalog is refreshed each run
(timed) unless --no-refresh. Times p50/p95/max of --requests requests of each page (httpx;
pages 2, 3, ... by each page's next link; record pages of random records; full-text searches
for the longest word of a random record's question, and for 3 of its words, which few other
records hold, so the whole index is scanned) and reads the server's peak RSS (VmHWM, with any
children), each against its target.

    .venv/bin/python benchmarks/bench_browse.py [--records 1000000] [--seed 17] [--requests 30]
"""

from __future__ import annotations

import argparse
import html
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import duckdb  # noqa: E402
import httpx  # noqa: E402
import numpy as np  # noqa: E402
from synthetic_store import TASKS, build  # noqa: E402

from pipeline.store.compaction import compact_finished, sweep  # noqa: E402
from pipeline.store.store import Store  # noqa: E402

TARGETS_MS = {"first page": 300, "filtered": 300, "q= word": 300, "q= phrase": 300}
TARGETS_MS |= {"next page": 300, "record page": 200}


def peak_rss_mb(pid: int) -> float:
    """VmHWM of the server and every descendant (summed: an upper bound of the tree's peak)."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        total += int(re.search(r"VmHWM:\s+(\d+)", Path(f"/proc/{p}/status").read_text())[1])
        for t in Path(f"/proc/{p}/task").iterdir():
            todo += [int(x) for x in (t / "children").read_text().split()]
    return total / 1024


def get(client: httpx.Client, url: str) -> tuple[float, str]:
    t = time.perf_counter()
    resp = client.get(url)
    ms = (time.perf_counter() - t) * 1000
    if resp.status_code != 200:
        raise RuntimeError(f"GET {url}: {resp.status_code} {resp.text[:200]}")
    return ms, resp.text


def store_of(a: argparse.Namespace) -> Store:
    """The cached store for these arguments, built first when missing or built otherwise."""
    root = ROOT / f"data/out/bench/browse-{a.records}-{a.seed}"
    marker, params = root / "built.json", [a.runs, a.shard_size, a.passages]
    built = json.loads(marker.read_text()) if marker.exists() else {}
    if built.get("params") == params:
        print(f"reusing {root} (built in {built['seconds']:.0f} s)")
    else:
        shutil.rmtree(root, ignore_errors=True)
        t = time.perf_counter()
        build(root, a)
        built = {"params": params, "seconds": time.perf_counter() - t}
        marker.write_text(json.dumps(built))
        print(f"built {root} in {built['seconds']:.0f} s")
    store = Store(root, root / "curriculum.duckdb")
    t = time.perf_counter()
    todo = compact_finished(store)  # as landing leaves a store (once: cached)
    if todo:
        print(f"compacted {len(todo)} runs in {time.perf_counter() - t:.0f} s")
    if todo or not (a.no_refresh and store.catalog_path.exists()):
        t = time.perf_counter()
        store.refresh_catalog({"passages": [root / "index/passages.parquet"],
                               "subgraphs": [root / "kg/subgraphs.parquet"]})  # fmt: skip
        print(f"refreshed the catalog in {time.perf_counter() - t:.0f} s")
        sweep(store)
    cat = store.catalog_path.stat().st_size
    files = sum(p.stat().st_size for p in root.rglob("*") if p.is_file()) - cat
    print(f"catalog {cat / 1e6:,.0f} MB; store (shards, runs, artifacts) {files / 1e6:,.0f} MB")
    return store


def serve(
    store: Store, searches: dict[str, list[str]], records: list[str], n: int
) -> tuple[dict[str, list[float]], float]:
    """Start the real server, time each page `n` times (after one cold request), and read its
    peak RSS; the milliseconds by page and the RSS in MB."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    cmd = [sys.executable, "-m", "cli", "browse", "--port", str(port)]
    cmd += ["--set", f"store.out_dir={store.root}", "--set", f"store.catalog={store.catalog_path}"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    log = (store.root / "server.log").open("w")
    server = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as client:
            for _ in range(600):
                try:
                    client.get("/health")
                    break
                except httpx.TransportError:
                    time.sleep(0.1)
            ms, page = get(client, "/records")
            times = {"cold first page": [ms], "runs page": [get(client, "/")[0] for _ in range(n)]}
            times["first page"] = [get(client, "/records")[0] for _ in range(n)]
            flt = "/records?status=rejected&task_type={}&v_min=0.3"
            times["filtered"] = [get(client, flt.format(TASKS[i % 5]))[0] for i in range(n)]
            for name, terms in searches.items():
                times[name] = [get(client, "/records?" + urlencode({"q": t}))[0] for t in terms]
            times["next page"] = []
            for _ in range(n):  # pages 2, 3, ... of the default sort, by each page's own link
                url = html.unescape(re.search(r'href="([^"]+)" id="next"', page)[1])
                ms, page = get(client, url)
                times["next page"].append(ms)
            times["record page"] = [get(client, f"/records/{rid}")[0] for rid in records]
        return times, peak_rss_mb(server.pid)
    finally:
        server.terminate()
        server.wait(10)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--seed", type=int, default=17)
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--shard-size", type=int, default=512)
    ap.add_argument("--passages", type=int, default=100_000)
    ap.add_argument("--requests", type=int, default=30, help="of each page")
    ap.add_argument("--no-refresh", action="store_true", help="reuse the cached catalog")
    a = ap.parse_args()
    load0 = os.getloadavg()
    store = store_of(a)
    with duckdb.connect(str(store.catalog_path), read_only=True) as con:
        sample = con.execute(
            "SELECT record_id, question FROM record_index WHERE question IS NOT NULL "
            "ORDER BY md5(record_id) LIMIT ?",  # the same records however the index is stored
            [a.requests],
        ).fetchall()
        words = [max(q.rstrip("?").split(), key=len).lower() for _, q in sample]
        phrases = [" ".join(q.lower().split()[-4:-1]) for _, q in sample]  # whole words
        count = "SELECT count(*) FROM record_index WHERE "
        hits = {
            kind: np.median([con.execute(count + "contains(search_text, ?)", [w]).fetchone()[0]
                             for w in terms])
            for kind, terms in (("word", words), ("phrase", phrases))
        }  # fmt: skip
        flt = "NOT accepted AND task_type = ? AND verifier_v >= 0.3"
        matched = con.execute(count + flt, [TASKS[0]]).fetchone()[0]
        all_ = "SELECT count(*), count(*) FILTER (accepted) FROM record_index"
        total, acc = con.execute(all_).fetchone()
    print(f"{total:,} records ({acc:,} accepted); status=rejected&task_type={TASKS[0]}&v_min=0.3 "
          f"matches {matched:,}, a q= word {hits['word']:,.0f} (median), a 3-word phrase "
          f"{hits['phrase']:,.0f}")  # fmt: skip
    searches = {"q= word": words, "q= phrase": phrases}
    times, peak = serve(store, searches, [r for r, _ in sample], a.requests)
    load1 = os.getloadavg()
    print(f"\n{'page':<16}{'n':>3}{'p50 ms':>8}{'p95 ms':>8}{'max ms':>8}{'target':>8}  p95/target")
    for name, ms in times.items():
        p50, p95 = np.percentile(ms, [50, 95])
        tgt = TARGETS_MS.get(name)
        ratio = f"{p95 / tgt:.2f}" if tgt else "-"
        row = f"{p50:>8.0f}{p95:>8.0f}{max(ms):>8.0f}{tgt or '-':>8}  {ratio}"
        print(f"{name:<16}{len(ms):>3}{row}")
    print(f"server peak RSS {peak:,.0f} MB, target 1,024 MB: {peak / 1024:.2f}")
    loads = ["/".join(f"{x:.2f}" for x in load) for load in (load0, load1)]
    print(f"load average (1/5/15 min) before {loads[0]}, after {loads[1]}; {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
