"""What the LLM quality gates cost and show on one landed run.

Run a nightly with the gates on (the default) and both verifier methods, then read its catalog:

    .venv/bin/curriculum nightly --set store.out_dir=/tmp/gates \\
        --set store.catalog=/tmp/gates/c.duckdb --set generation.num_sources=48 \\
        --set verifier.method=both --run-id gates-48
    .venv/bin/python benchmarks/bench_gates.py --catalog /tmp/gates/c.duckdb --run-id gates-48

Prints (1) the wall time of each generation step from `shard_steps`, the gates' share of
generation and of the run's wall time (runs.started_at .. finished_at), and (2) per verifier
method the AUC of real vs shuffled evidence (and vs off-topic) with a bootstrap 95 % interval
over records, the mean V per control and the answer-only >= real share. Gates off for
comparison: the same command with `--set gates.shortcut=false --set gates.controls=false`.
`--pmi-from-teacher-forced` derives the teacher_forced_pmi estimator from teacher-forced rows
(the same log-probabilities) for a run landed before that estimator existed.
"""

from __future__ import annotations

import argparse
import random

import duckdb
import yaml

from pipeline.agents.rewards import verifier_pmi
from pipeline.generation.gate_stats import auc_real_vs_control, leakage_share

GATE_STEPS = ("shortcut", "controls")


def _bootstrap(real: dict[str, float], ctrl: dict[str, float], reps: int, seed: int):
    """95 % interval of the AUC, resampling records (a record's real and control V together)."""
    ids = sorted(set(real) & set(ctrl))
    if len(ids) < 2:
        return None
    rng, aucs = random.Random(seed), []
    for _ in range(reps):
        pick = [rng.choice(ids) for _ in ids]
        aucs.append(auc_real_vs_control([real[i] for i in pick], [ctrl[i] for i in pick]))
    aucs.sort()
    return aucs[int(0.025 * reps)], aucs[int(0.975 * reps) - 1]


def _pmi_rows(con, run_id: str) -> list[tuple]:
    """teacher_forced_pmi V from the teacher-forced rows: p_pos = P(a|q,e), p_neg = P(a|q),
    and the answer's token count under the run's model (its tokenizer, loaded alone)."""
    import math

    from transformers import AutoTokenizer

    from pipeline.core.config import PipelineConfig
    from pipeline.core.model_refs import resolve_llm

    cfg_yaml = con.execute("SELECT config_yaml FROM runs WHERE run_id = ?", [run_id]).fetchone()
    cfg = PipelineConfig.model_validate(yaml.safe_load(cfg_yaml[0]))
    tok = AutoTokenizer.from_pretrained(resolve_llm(cfg.llm.model, cfg.llm.cache_dir))
    answers = dict(
        con.execute(
            "SELECT record_id, answer FROM curriculum WHERE run_id = ?", [run_id]
        ).fetchall()
    )
    out = []
    for r, c, pp, pn in con.execute(
        "SELECT record_id, control, p_pos, p_neg FROM control_scores "
        "WHERE run_id = ? AND method = 'teacher_forced'",
        [run_id],
    ).fetchall():
        n = max(1, len(tok(" " + answers[r].strip(), add_special_tokens=False)["input_ids"]))
        lw, lo = (math.log(max(x, 1e-300)) for x in (pp, pn))
        out.append((r, "teacher_forced_pmi", c, verifier_pmi(lw, lo, n)[2]))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--catalog", required=True)
    ap.add_argument("--run-id", required=True)
    ap.add_argument("--bootstrap", type=int, default=2000)
    ap.add_argument("--pmi-from-teacher-forced", action="store_true")
    a = ap.parse_args()
    con = duckdb.connect(a.catalog, read_only=True)
    p = [a.run_id]
    steps = con.execute(
        "SELECT step, sum(seconds), sum(items) FROM shard_steps WHERE run_id = ? "
        "GROUP BY ALL ORDER BY 2 DESC",
        p,
    ).fetchall()
    total = sum(s for _, s, _ in steps)
    gates = sum(s for name, s, _ in steps if name in GATE_STEPS)
    started, finished = con.execute(
        "SELECT started_at, finished_at FROM runs WHERE run_id = ?", p
    ).fetchone()
    wall = (finished - started).total_seconds() if started and finished else None
    print(f"run {a.run_id}: generation steps (seconds, items)")
    for name, s, n in steps:
        print(f"  {name:9} {s:8.1f} s  {n:5d}  {s / total:6.1%} of generation")
    print(
        f"  gates (shortcut + controls): {gates:.1f} s = {gates / total:.1%} of generation", end=""
    )
    print(f", {gates / wall:.1%} of the run's wall time ({wall:.0f} s)" if wall else "")

    rows = con.execute(
        "SELECT record_id, method, control, v FROM control_scores WHERE run_id = ?", p
    ).fetchall()
    if a.pmi_from_teacher_forced and not any(m == "teacher_forced_pmi" for _, m, _, _ in rows):
        rows += _pmi_rows(con, a.run_id)
    for method in sorted({m for _, m, _, _ in rows}):
        by = {}
        for r, m, c, v in rows:
            if m == method:
                by.setdefault(c, {})[r] = v
        real = by.get("real", {})
        print(f"\n{method}: {len(real)} records with controls")
        for c in ("real", "shuffled", "answer_only", "off_topic"):
            vals = list(by.get(c, {}).values())
            mean = sum(vals) / len(vals) if vals else float("nan")
            print(
                f"  mean V {c:11} {mean:+.4f}  (n={len(vals)}, V > 0: {sum(v > 0 for v in vals)})"
            )
        for c in ("shuffled", "off_topic"):
            ctrl = by.get(c, {})
            auc = auc_real_vs_control(list(real.values()), list(ctrl.values()))
            ci = _bootstrap(real, ctrl, a.bootstrap, 0)
            ci_s = f" [95% CI {ci[0]:.3f}-{ci[1]:.3f}]" if ci else ""
            print(f"  AUC real vs {c:9} {auc if auc is None else round(auc, 3)}{ci_s}")
        ans = by.get("answer_only", {})
        ids = sorted(set(real) & set(ans))
        share = leakage_share([real[i] for i in ids], [ans[i] for i in ids])
        print(f"  answer-only V >= real V: {share if share is None else round(share, 3)}")


if __name__ == "__main__":
    main()
