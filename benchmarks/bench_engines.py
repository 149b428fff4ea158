"""Which engine for the embedded profile: the transformers backend vs vLLM (CPU build).

The identical rollout workload of bench_generation.py (the same plan items, seeds and
settings; one batched `process_shard`), run once per engine in its own subprocess so that
start-up time and peak memory are each engine's alone. Printed side by side in one run:
start-up (backend constructed and ready), records/min, prompt tokens computed and generated
tokens per second of generation wall time, the share of prompt tokens served from a prefix
cache (the transformers backend shares the batch's common prefix; vLLM's automatic prefix
caching also re-uses earlier turns of a rollout across calls), and peak RSS of the engine's
whole process tree (vLLM's engine core is a spawned process). Response caching is off.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/bench_engines.py [--n 16] [--solver-n 3] [--m 4]

The two engines sample with different random streams and different float kernels, so their
records are not identical; the work per record (turns, rollouts, verifier samples) is the same.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "data" / "out" / "bench" / "engines"
ENGINES = ("transformers", "vllm")


# Runs: (label, engine, extra environment). The vLLM backend binds its CPU worker's OpenMP
# threads to every usable core (pipeline/llm/cpu_cores.py); the second vLLM run keeps vLLM's
# own binding, all cores but one (one compute core on a 2-core machine).
RUNS = (
    ("transformers", "transformers", {}),
    ("vllm", "vllm", {}),
    ("vllm auto-bind", "vllm", {"VLLM_CPU_OMP_THREADS_BIND": "auto"}),
)


def child(engine: str, args: argparse.Namespace) -> dict:
    """Run the workload on one engine in this process; return its figures."""
    from generation_setup import load_engine, plan_items

    from pipeline.core.config import load_config
    from pipeline.generation.shards import process_shard

    cfg = load_config(
        None,
        [
            f"store.out_dir={OUT}",
            f"llm.backend={engine}",
            f"rewards.n_solver={args.solver_n}",
            f"verifier.m={args.m}",
            f"llm.batch_size={args.batch_size}",
            "llm.cache=false",
        ],
    )
    t0 = time.perf_counter()
    eng = load_engine(cfg)
    startup = time.perf_counter() - t0
    gen = getattr(eng.generator, "inner", eng.generator)
    ctx = eng.context(cfg)
    items = plan_items(eng.retriever, args.n)
    before = dict(gen.stats)
    t0, c0 = time.perf_counter(), time.process_time()
    recs = process_shard(ctx, 0, items).curriculum
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    st = {k: gen.stats[k] - before[k] for k in gen.stats}
    if engine == "vllm":
        computed = st["prompt_tokens"] - st["cached_prompt_tokens"]
    else:
        computed = st["prefill_tokens"]
    return {
        "engine": engine,
        "startup_s": startup,
        "wall_s": wall,
        "driver_cpu_s": cpu,
        "records": len(recs),
        "valid": sum(r["is_valid"] for r in recs),
        "solver_rollouts": sum(r["solver_n"] or 0 for r in recs),
        "prompt_tokens": st["prompt_tokens"],
        "computed_prompt_tokens": computed,
        "generated_tokens": st["generated_tokens"],
        "prefill_s": st.get("prefill_s"),
        "decode_s": st.get("decode_s"),
    }


def tree_rss(pid: int) -> int:
    import psutil

    try:
        p = psutil.Process(pid)
        procs = [p, *p.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0
    total = 0
    for q in procs:
        with contextlib.suppress(psutil.NoSuchProcess):
            total += q.memory_info().rss
    return total


def run_one(engine: str, argv: list[str], env: dict[str, str]) -> dict:
    """The child on one engine, its process tree's RSS sampled every 0.2 s."""
    cmd = [sys.executable, __file__, "--child", engine, *argv]
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, text=True, cwd=ROOT, env={**os.environ, **env}
    )
    peak = [0]

    def watch() -> None:
        while proc.poll() is None:
            peak[0] = max(peak[0], tree_rss(proc.pid))
            time.sleep(0.2)

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    out, _ = proc.communicate()
    t.join()
    if proc.returncode != 0:
        raise SystemExit(f"{engine} run failed with exit code {proc.returncode}")
    res = json.loads(out.strip().splitlines()[-1])
    res["peak_rss_gib"] = peak[0] / 2**30
    return res


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=16, help="records")
    ap.add_argument("--solver-n", type=int, default=3)
    ap.add_argument("--m", type=int, default=4)
    ap.add_argument("--batch-size", type=int, default=32, help="llm.batch_size")
    ap.add_argument("--child", choices=ENGINES, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        sys.path.insert(0, str(Path(__file__).parent))
        print(json.dumps(child(args.child, args)))
        return
    argv = ["--n", str(args.n), "--solver-n", str(args.solver_n), "--m", str(args.m)]
    argv += ["--batch-size", str(args.batch_size)]
    res = {label: run_one(engine, argv, env) for label, engine, env in RUNS}
    labels = [label for label, _, _ in RUNS]
    print(
        f"records={args.n} solver_n={args.solver_n} m={args.m} batch_size={args.batch_size} "
        f"cores={len(os.sched_getaffinity(0))}"
    )
    rows = [
        ("start-up (s)", "startup_s", "{:.1f}"),
        ("generation wall (s)", "wall_s", "{:.1f}"),
        ("records/min", None, "{:.2f}"),
        ("valid records", "valid", "{}"),
        ("solver rollouts", "solver_rollouts", "{}"),
        ("prompt tokens", "prompt_tokens", "{:.0f}"),
        ("  computed (not cached)", "computed_prompt_tokens", "{:.0f}"),
        ("  served from cache", None, "{:.0%}"),
        ("prompt tok/s computed", None, "{:.0f}"),
        ("generated tokens", "generated_tokens", "{:.0f}"),
        ("generated tok/s", None, "{:.1f}"),
        ("peak RSS, process tree (GiB)", "peak_rss_gib", "{:.2f}"),
    ]
    derived = {
        "records/min": lambda r: 60 * r["records"] / r["wall_s"],
        "  served from cache": lambda r: 1 - r["computed_prompt_tokens"] / r["prompt_tokens"],
        "prompt tok/s computed": lambda r: r["computed_prompt_tokens"] / r["wall_s"],
        "generated tok/s": lambda r: r["generated_tokens"] / r["wall_s"],
    }
    head = "".join(f"{e:>16}" for e in labels)
    print(f"{'':<30}{head}   ratios to transformers")
    for label, key, fmt in rows:
        vals = [derived[label](res[e]) if key is None else res[e][key] for e in labels]
        ratios = " ".join(f"{v / vals[0]:.2f}x" if vals[0] else "-" for v in vals[1:])
        print(f"{label:<30}" + "".join(f"{fmt.format(v):>16}" for v in vals) + f"   {ratios}")
    t = res["transformers"]
    print(
        f"transformers breakdown: prefill {t['prefill_s']:.1f} s, decode {t['decode_s']:.1f} s "
        f"(vLLM overlaps prefill and decode in one scheduler; no split is reported)"
    )


if __name__ == "__main__":
    main()
