"""How vLLM's CPU engine shares the machine: OpenMP threads that spin at a barrier against
threads that sleep there (`OMP_WAIT_POLICY=PASSIVE`), alone and beside a busy neighbour.

vLLM's CPU worker binds one OpenMP thread to each core it is given (every usable core: see
`pipeline/llm/cpu_cores.py`). When another process needs one of those cores, as the other
pytest worker of `make test` does, one engine thread waits for its core while the others wait
for it at each barrier, spinning by default. Each child process starts the engine of the
embedded profile and runs one fixed workload (`--rounds` of 24 prompts x 2 sampled
completions of 48 tokens, then 6 greedy completions of 96); beside it, if asked, a
one-thread busy loop counts its iterations. Children alternate (default, passive, ...; one
engine at a time). Printed: each child's seconds and the loop's share of a core (its rate
against its rate alone), then the ratios passive / default for the engine, alone and beside
the loop, and for the loop.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/bench_omp_wait.py [--rounds 3] [--repeat 1]

The machine's load average (`/proc/loadavg`) is printed with each child.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

ROOT = Path(__file__).resolve().parent.parent
POLICIES = ("default", "passive")
# The count is replaced whole (os.replace), so a reader never sees a half-written number.
LOOP = """
import os, sys
n, path = 0, sys.argv[1]
while True:
    n += 1
    if n % 2_000_000 == 0:
        open(path + ".tmp", "w").write(str(n))
        os.replace(path + ".tmp", path)
"""


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def count(path: Path) -> int:
    try:
        return int(path.read_text())
    except FileNotFoundError:
        return 0


def busy_loop(path: Path) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", LOOP, str(path)])
    time.sleep(1.0)
    return proc


def child(rounds: int, neighbour: bool) -> dict:
    """One engine, the workload timed, the loop's iterations over the same seconds."""
    from pipeline.core.config import load_config
    from pipeline.llm import make_backend
    from pipeline.llm.base import SamplingParams
    from pipeline.llm.vllm_backend import shutdown_engines

    cfg = load_config(None, ["llm.backend=vllm", "llm.kv_cache_gib=0.5"])
    gen = make_backend(cfg.llm, seed=1)
    prompts = [f"Question {i}: where was the composer number {i} born? Answer:" for i in range(24)]
    gen.generate(prompts[:2], SamplingParams(max_tokens=4))  # warm
    counter = Path(tempfile.mkdtemp()) / "count"
    loop = busy_loop(counter) if neighbour else None
    before, t = count(counter), time.perf_counter()
    for r in range(rounds):
        gen.generate(prompts, SamplingParams(n=2, temperature=1.0, max_tokens=48, seed=r))
        gen.generate(prompts[:6], SamplingParams(max_tokens=96))
    seconds = time.perf_counter() - t
    iterations = count(counter) - before
    if loop is not None:
        loop.kill()
    shutdown_engines()
    return {"seconds": seconds, "loop_rate": iterations / seconds}


def loop_alone(seconds: float = 10.0) -> float:
    """The busy loop's iterations per second with the machine otherwise idle."""
    counter = Path(tempfile.mkdtemp()) / "count"
    loop = busy_loop(counter)
    before, t = count(counter), time.perf_counter()
    time.sleep(seconds)
    rate = (count(counter) - before) / (time.perf_counter() - t)
    loop.kill()
    return rate


def run_child(policy: str, rounds: int, neighbour: bool) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    if policy == "passive":
        env["OMP_WAIT_POLICY"] = "PASSIVE"
    cmd = [sys.executable, __file__, "--child", "--rounds", str(rounds)]
    if neighbour:
        cmd.append("--neighbour")
    out = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--neighbour", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.rounds, args.neighbour)))
        return

    alone_rate = loop_alone()
    print(f"busy loop alone: {alone_rate / 1e6:.1f} M iterations/s (load {load()})")
    got: dict[tuple[str, bool], list[dict]] = {}
    for _ in range(args.repeat):
        for neighbour in (False, True):
            for policy in POLICIES:
                res = run_child(policy, args.rounds, neighbour)
                got.setdefault((policy, neighbour), []).append(res)
                share = f", loop {res['loop_rate'] / alone_rate:.0%} of a core" if neighbour else ""
                where = "beside the loop" if neighbour else "alone"
                print(f"{policy:8s} {where:16s} {res['seconds']:6.1f} s{share} (load {load()})")

    def mean(policy: str, neighbour: bool, key: str) -> float:
        rows = got[(policy, neighbour)]
        return sum(r[key] for r in rows) / len(rows)

    for neighbour, where in ((False, "alone"), (True, "beside the loop")):
        ratio = mean("passive", neighbour, "seconds") / mean("default", neighbour, "seconds")
        print(f"engine seconds, passive / default, {where}: {ratio:.3f}")
    loop = mean("passive", True, "loop_rate") / mean("default", True, "loop_rate")
    print(f"busy loop's progress beside the engine, passive / default: {loop:.3f}")


if __name__ == "__main__":
    main()
