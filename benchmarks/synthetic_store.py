"""A synthetic store of any size for bench_browse.py, written through the real Store API
(write_shard + commit, run records, review files) with the catalog artifacts the record
browser reads (passages, subgraphs). Per record: a curriculum row (question ~80 characters,
answer ~15, evidence ~150 sliced from its passage at its offsets, prompt and raw proposer
output ~1-2 kB, gate verdicts as the gates write them; 4% not posed, 6% invalid, 5% without
verbatim evidence, the rest judged by MC V against the run's controls and by the shortcut and
uniqueness gates), its proposer rollout, 4 solver rollouts once valid, and 10 verifier
samples, 2 gold-evidence gate rollouts and 4 control scores once its evidence is verbatim.
Every table goes through its contract (`conform`). Deterministic from the seed, bar the
reviews' ids and times. Run the benchmark as a script, so that this module is importable from
the benchmarks directory.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa

from pipeline.core.contracts import conform
from pipeline.core.io import write_parquet_atomic
from pipeline.store.reviews import Verdict, write_reviews
from pipeline.store.store import Store
from schemas.tables import SCHEMA_VERSION, schema_for

TASKS = ("factual", "comparison", "causal", "temporal", "aggregation")
NOT_POSED = ("no_supporting_passage", "no_answer_span", "many_valued_relation")
INVALID = ("answer_in_question", "not_a_question", "empty_answer")
VERDICTS = ("pass", "fail", "undetermined", "not_applicable")
HEAD = "You write one question whose answer is fixed before it. Rules: " * 10  # ~600 chars
T0 = dt.datetime(2025, 1, 1, 1, tzinfo=dt.UTC)
SUBGRAPHS = 20_000
MODEL = "Qwen/Qwen2.5-7B-Instruct"


class Corpus:
    """A Zipf-worded text (`cut` slices it: cheap strings of realistic lengths) and passages."""

    def __init__(self, rng: np.random.Generator, passages: int) -> None:
        syl = np.array(["ka", "lo", "mi", "ner", "tos", "va", "ri", "dun", "sel", "bor", "em"])
        vocab = ["".join(rng.choice(syl, rng.integers(1, 4))) for _ in range(20_000)]
        p = 1.0 / np.arange(1, len(vocab) + 1)
        self.s = " ".join(vocab[i] for i in rng.choice(len(vocab), 2_000_000, p=p / p.sum()))
        self.ptext = self.cut(rng, 500, 800, passages)
        self.pids = [f"p{i:07d}" for i in range(passages)]
        self.titles = [" ".join(t.split()[:2]).title() for t in self.cut(rng, 12, 20, passages)]

    def cut(self, rng: np.random.Generator, lo: int, hi: int, n: int) -> list[str]:
        lens, starts = rng.integers(lo, hi + 1, n), rng.integers(0, len(self.s) - hi, n)
        return [self.s[a : a + b] for a, b in zipped(starts.tolist(), lens.tolist())]


def table(name: str, n: int, cols: dict[str, Any]) -> pa.Table:
    """The contract's columns from `cols` (a sequence, or one value for every row); nullable
    ones not given are null. Conformed to the contract (pipeline.core.contracts.conform)."""
    arrays = []
    for fld in schema_for(name):
        v = cols.get(fld.name)
        if v is None:
            assert fld.nullable, f"{name}.{fld.name} is required"
            arrays.append(pa.nulls(n, fld.type))
        elif isinstance(v, list | np.ndarray):
            arrays.append(pa.array(v, type=fld.type))
        else:
            arrays.append(pa.repeat(pa.scalar(v, fld.type), n))
    return conform(name, pa.Table.from_arrays(arrays, schema=schema_for(name)))


def path_of(sg: int, hops: int) -> dict[str, Any]:
    nodes = [{"id": f"Q{sg * 8 + i}", "label": f"entity {sg}-{i}"} for i in range(hops + 1)]
    pids = [(sg + i) % 900 for i in range(hops)]
    return {"nodes": nodes, "relations": [{"id": f"P{x}", "label": f"relation {x}"} for x in pids]}


def zipped(*seqs: Any) -> zip:
    return zip(*seqs, strict=True)


def opt(values: list[Any], mask: np.ndarray) -> list[Any]:
    return [v if m else None for v, m in zipped(values, mask)]


def build(root: Path, a: argparse.Namespace) -> None:
    c = Corpus(np.random.default_rng(a.seed), a.passages)
    store = Store(root, root / "curriculum.duckdb")
    write_artifacts(root, c)
    per_run = -(-a.records // a.runs)
    for r in range(a.runs):
        write_night(store, c, r, min(per_run, a.records - r * per_run), a.shard_size, a.seed)
    picked = duckdb.execute(  # 2,000 reviews in 20 bulk submissions, a tenth of them rejections
        "SELECT record_id, run_id FROM read_parquet(?) USING SAMPLE 2000 ROWS (reservoir, 1)",
        [str(root / "shards/curriculum/*/*/*.parquet")],
    ).fetchall()
    for i in range(0, len(picked), 100):
        review(root, picked[i : i + 100], reject=i % 1000 == 0)


def artifacts(root: Path) -> dict[str, list[Path]]:
    """The files write_artifacts writes, as a catalog refresh takes them."""
    return {
        "passages": [root / "index/passages.parquet"],
        "subgraphs": [root / "kg/subgraphs.parquet"],
    }


def write_artifacts(root: Path, c: Corpus) -> None:
    """The non-sharded files every run refers to: the passage index and the KG subgraphs."""
    n = len(c.pids)
    write_parquet_atomic(root / "index/passages.parquet", table("passages", n, {
        "id": c.pids, "title": c.titles, "text": c.ptext, "char_len": [len(t) for t in c.ptext],
        "row": np.arange(n), "source_file": "corpus.jsonl", "source_line": np.arange(1, n + 1),
    }))  # fmt: skip
    ids = range(SUBGRAPHS)
    write_parquet_atomic(root / "kg/subgraphs.parquet", table("subgraphs", SUBGRAPHS, {
        "subgraph_id": [f"sg{i:06d}" for i in ids], "seed_qid": "Q1", "model": MODEL,
        "target_path": [path_of(i, 4) for i in ids], "hops": 4, "node_count": 5,
        "distractors": [[path_of(i + 1, 2)] for i in ids], "created_at": T0,
        "waypoints": [[f"entity {i}-{j}" for j in range(1, 4)] for i in ids],
    }))  # fmt: skip


def night_tables(
    c: Corpus, r: int, count: int, shard_size: int, seed: int
) -> list[list[tuple[str, pa.Table]]]:
    """Run r's shard groups (bench-NNN, day r after T0), drawn from its own seed [seed, r] so
    that any run can be generated alone: a history extends without rebuilding its past."""
    run_id, start, rr = run_name(r), T0 + dt.timedelta(days=r), np.random.default_rng([seed, r])
    return [
        shard(rr, c, run_id, s, np.arange(lo, min(lo + shard_size, count)), start)
        for s, lo in enumerate(range(0, count, shard_size))
    ]


def run_name(r: int) -> str:
    return f"bench-{r:03d}"


def write_night(
    store: Store, c: Corpus, r: int, count: int, shard_size: int, seed: int,
    groups: list[list[tuple[str, pa.Table]]] | None = None,
) -> None:  # fmt: skip
    """Commit run r's shard groups (drawn here unless given) and its completed run record."""
    run_id, start = run_name(r), T0 + dt.timedelta(days=r)
    groups = night_tables(c, r, count, shard_size, seed) if groups is None else groups
    for s, tables in enumerate(groups):
        name = f"{s:05d}"
        files = [store.write_shard(t, run_id, start.date(), name, tbl) for t, tbl in tables]
        store.commit(run_id, name, files)
    store.write_run({
        "run_id": run_id, "run_date": start.date(), "profile": "bench",
        "config_hash": f"cfg{r:05d}", "config_yaml": "profile: bench\n",
        "started_at": start, "finished_at": start + dt.timedelta(hours=6),
        "status": "completed", "shards_planned": len(groups), "shards_completed": len(groups),
        "schema_version": SCHEMA_VERSION,
    })  # fmt: skip


def review(root: Path, records: list[tuple[str, str]], reject: bool) -> None:
    """One bulk review submission (accept, or reject as answer_not_in_evidence)."""
    v = Verdict(*(("reject", "bench", "answer_not_in_evidence") if reject else ("accept", "bench")))
    write_reviews(root, v, records)


def shard(
    rng: np.random.Generator, c: Corpus, run_id: str, s: int, slots: np.ndarray, start: dt.datetime
) -> list[tuple[str, pa.Table]]:
    """One shard group's tables (every record's columns drawn at once with numpy)."""
    n = len(slots)
    rids = [hashlib.blake2b(f"{run_id}:{k}".encode(), digest_size=8).hexdigest() for k in slots]
    state = rng.choice(4, n, p=[0.04, 0.06, 0.05, 0.85])  # not posed, invalid, !verbatim, ok
    hop = rng.choice([1, 2, 3, 4], n, p=[0.4, 0.3, 0.2, 0.1])
    pi, sgi = rng.integers(0, len(c.ptext), n), rng.integers(0, SUBGRAPHS, n)
    es = rng.integers(0, 300, n)
    created = [start + dt.timedelta(seconds=1.7 * k) for k in slots.tolist()]
    q = [x.capitalize() + "?" for x in c.cut(rng, 70, 90, n)]
    ev = [c.ptext[p][e : e + 150] for p, e in zipped(pi, es)]
    ans = [" ".join(e.split()[2:4])[:20] or "x" for e in ev]
    k, kp, kn = rng.binomial(4, 0.5, n), rng.binomial(5, 0.7, n), rng.binomial(5, 0.3, n)
    posed, verified, ok, kg = state >= 1, state >= 2, state == 3, hop >= 2
    vv = np.where(ok, kp / 5 - kn / 5, np.nan)
    sc = np.where(hop < 2, 3, rng.choice(3, n, p=[0.78, 0.12, 0.10]))  # shortcut gate
    un = rng.choice(3, n, p=[0.85, 0.09, 0.06])  # uniqueness gate
    scv = [VERDICTS[x] if o else "not_applicable" for x, o in zipped(sc, ok)]
    unv = [VERDICTS[x] if o else "not_applicable" for x, o in zipped(un, ok)]
    rej_s = {"fail": "shortcut", "undetermined": "shortcut_undetermined"}
    rej_u = {"fail": "ambiguous", "undetermined": "uniqueness_undetermined"}
    gv = [
        [{"gate": "shortcut", "verdict": x, "rejected_by": rej_s.get(x), "detail": None},
         {"gate": "uniqueness", "verdict": y, "rejected_by": rej_u.get(y), "detail": None}]
        for x, y in zipped(scv, unv)
    ]  # fmt: skip
    tt = [TASKS[i] for i in rng.integers(0, len(TASKS), n)]
    why = [None if x >= 2 else (NOT_POSED, INVALID)[x][i % 3] for i, x in enumerate(state)]
    prompt = [HEAD + c.ptext[p] + f"\nTask: {t}, {h} hops." for p, t, h in zipped(pi, tt, hop)]
    think = c.cut(rng, 800, 1600, n)
    raw = [f"<think>{t}</think>\n<question>{x}</question>" for t, x in zipped(think, q)]
    diff = np.where((k > 0) & (k < 4), (4 - k) / 3, 0.0)
    cur = {
        "record_id": rids, "run_id": run_id, "shard": s, "slot": slots, "created_at": created,
        "source_passage_id": [c.pids[i] for i in pi], "source_title": [c.titles[i] for i in pi],
        "cluster_id": pi % 64, "task_type": tt, "hop_count": hop, "planned_hops": hop,
        "subgraph_id": opt([f"sg{i:06d}" for i in sgi], kg),
        "question": opt(q, posed), "answer": opt(ans, posed),
        "answer_aliases": opt([[x] for x in ans], posed), "evidence": opt(ev, posed),
        "evidence_mode": ["kg_path" if x else "passage_span" for x in kg],
        "question_source": opt(["llm"] * n, posed), "question_attempts": posed.astype(int),
        "evidence_source": ["source" if p else "none" for p in posed],
        "evidence_status": ["verbatim" if p else "missing" for p in posed],
        "evidence_passage_id": opt([c.pids[i] for i in pi], posed),
        "evidence_char_start": opt(es.tolist(), posed),
        "evidence_char_end": opt([e + len(x) for e, x in zipped(es, ev)], posed),
        "kg_path": opt([path_of(i, h) for i, h in zipped(sgi, hop)], kg),
        "waypoints": opt([[f"entity {i}-{x}" for x in range(1, h)] for i, h in zipped(sgi, hop)],
                         kg),
        "is_valid": verified, "invalid_reason": why, "is_verbatim": ok,
        "format_score": 1.0, "f_think": 1.0, "f_tool": 1.0, "f_answer": 1.0,
        "proposer_turns": 2, "proposer_searches": hop - 1,
        "solver_n": opt([4] * n, verified), "solver_k": opt(k.tolist(), verified),
        "difficulty": opt(diff.tolist(), verified),
        "verifier_p_pos": opt((kp / 5).tolist(), ok), "verifier_p_neg": opt((kn / 5).tolist(), ok),
        "verifier_v": opt(vv.tolist(), ok), "verifier_method": opt(["mc"] * n, ok),
        "verifier_m": opt([5] * n, ok), "v_threshold_quantile": 0.8, "single_hop_share": 1.0,
        "shortcut_verdict": scv, "uniqueness_verdict": unv, "gate_verdicts": gv,
        "proposer_model": MODEL, "solver_model": MODEL, "embedder_model": "intfloat/e5-base-v2",
        "index_fingerprint": "f" * 16, "config_hash": f"cfg{int(run_id.split('-')[-1]):05d}",
        "schema_version": SCHEMA_VERSION, "prompt": prompt, "raw_proposer_output": raw,
    }  # fmt: skip
    out = [("curriculum", table("curriculum", n, cur))]

    def child(name: str, r: np.ndarray, cols: dict[str, Any]) -> None:
        rows = {"record_id": [rids[i] for i in r], "created_at": [created[i] for i in r]}
        out.append((name, table(name, len(r), {**cols, **rows, "run_id": run_id})))

    child("proposer_rollouts", np.arange(n), {
        "prompt": prompt, "raw_output": raw, "turns": 2, "planning_turns": 1, "tool_calls": hop - 1,
        "tool_responses": hop - 1, "stop_reason": "final", "refused_searches": 0,
        "forced_final": False, "temperature": 1.0,
    })  # fmt: skip
    r = np.repeat(np.flatnonzero(verified), 4)  # 4 solver rollouts per verified record
    j = np.tile(np.arange(4), len(r) // 4)
    hit = j < k[r]
    child("solver_rollouts", r, {
        "rollout_id": [f"{rids[i]}:{x}" for i, x in zipped(r, j)], "sample": j,
        "prompt": [HEAD[:400] + q[i] for i in r],
        "raw_output": c.cut(rng, 800, 1800, len(r)), "think": c.cut(rng, 100, 300, len(r)),
        "predicted_answer": [ans[i] if h else "other" for i, h in zipped(r, hit)],
        "searches": [[q[i][:40]] for i in r], "retrieved_ids": [[[c.pids[pi[i]]]] for i in r],
        "turns": 2, "planning_turns": 1, "invalid_tool_calls": 0, "stop_reason": "final",
        "forced_final": False, "correct": hit, "answer_f1": hit * 1.0, "evidence_f1": 0.5,
        "solver_reward": hit * 1.0, "wcr_reward": 0.5, "protocol": "search_r1",
    })  # fmt: skip
    oi = np.flatnonzero(ok)  # verifier: 5 samples with and 5 without the evidence
    r, j = np.repeat(oi, 10), np.tile(np.arange(5), 2 * len(oi))
    w = np.tile(np.repeat([1, 0], 5), len(oi))
    hit = np.where(w == 1, j < kp[r], j < kn[r])
    child("verifier_samples", r, {
        "sample_id": [f"{rids[i]}:v{x}{y}" for i, x, y in zipped(r, w, j)],
        "sample": j, "method": "mc",
        "condition": ["with_evidence" if x else "without_evidence" for x in w],
        "prompt": [HEAD[:150] + (ev[i] if x else "") + q[i] for i, x in zipped(r, w)],
        "raw_output": (said := [ans[i] if h else "no" for i, h in zipped(r, hit)]),
        "predicted_answer": said, "correct": hit,
    })  # fmt: skip
    r, j = np.repeat(oi, 2), np.tile(np.arange(2), len(oi))  # gate: answers with the evidence
    child("gate_rollouts", r, {
        "rollout_id": [f"{rids[i]}:gold_evidence:{x}" for i, x in zipped(r, j)],
        "check": "gold_evidence", "sample": j, "prompt": [HEAD[:150] + ev[i] + q[i] for i in r],
        "raw_output": [ans[i] for i in r], "predicted_answer": [ans[i] for i in r], "turns": 1,
        "searches": [[]] * len(r), "retrieved_ids": [[]] * len(r),
        "stop_reason": "final", "forced_final": False, "correct": True,
    })  # fmt: skip
    r, x = np.repeat(oi, 4), np.tile(np.arange(4), len(oi))
    v = np.where(x == 0, vv[r], (rng.binomial(5, 0.35, len(r)) - rng.binomial(5, 0.3, len(r))) / 5)
    child("control_scores", r, {
        "method": "mc", "control": [("real", "shuffled", "answer_only", "off_topic")[y] for y in x],
        "evidence": [ev[i] if y == 0 else ans[i] if y == 2 else ev[i - 1] for i, y in zipped(r, x)],
        "p_pos": np.clip(v, 0, 1), "p_neg": np.clip(v, 0, 1) - v, "v": v, "m": 5,
    })  # fmt: skip
    return out
