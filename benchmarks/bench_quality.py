"""Cost and recall of the catalog's quality checks on synthetic questions.

A. Decontamination: R synthetic records (default 100k) against B benchmark questions (50k).
   1 % of the records are planted copies of benchmark questions: half re-punctuated / re-cased
   (the exact method's case), half embedded in a longer question (the n-gram method's). Time
   and peak RSS per method, recall of the planted copies, records flagged that were not
   planted (the synthetic questions share template words, which is what stock phrases do to
   short n-grams), and the same for n = 3, 5, 8, 13 and containment 0.5 / 0.8 (why
   quality.ngram_n is 5 and quality.ngram_threshold 0.8). The embedding
   method encodes both sides with the embedded embedder (all-MiniLM-L6-v2) and searches with
   FAISS on the first --embed records and --embed / 2 benchmark questions (0 skips it).
B. Near-duplicates: MinHash LSH (datasketch, as `curriculum quality near-duplicates` runs it)
   vs exhaustive pairwise Jaccard (vectorised, blockwise) on N records (default 20k), with
   planted word-order / punctuation / one-word variants: time of each, the ratio, and LSH's
   recall of the pairs brute force finds.

Each part runs in its own child process, whose peak RSS (ru_maxrss) is read before and after
the work. Prints side-by-side tables:
    .venv/bin/python benchmarks/bench_quality.py [--records 100000] [--bench 50000]
        [--pairs 20000] [--sweep 5000] [--embed 100000]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import random
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SEED = 17
TEMPLATES = (
    "who {v} the {a} {n} of {p}",
    "when did {p} {v} the {n}",
    "what is the {a} {n} in {p} called",
    "which {n} did {p} {v} in {y}",
    "how many {n} does the {a} {p} have",
    "where was the {n} of {p} {v}",
    "who was the first {n} to {v} {p}",
    "in which year did the {a} {n} {v} {p}",
    "what {n} is {p} known for",
    "why did {p} {v} the {a} {n} in {y}",
)
VERBS = ("build", "found", "win", "discover", "write", "sing", "lead", "name", "paint", "rule")


def _vocab(rng: random.Random, k: int) -> list[str]:
    syll = ["ka", "lo", "mi", "ner", "tos", "va", "ri", "dun", "sel", "bor", "qui", "em"]
    return ["".join(rng.choice(syll) for _ in range(rng.randint(2, 4))) for _ in range(k)]


def make_questions(n: int, seed: int) -> list[str]:
    """Short template questions (7-11 words) over invented names: mostly distinct."""
    rng = random.Random(seed)
    nouns, adjs, places = _vocab(rng, 3000), _vocab(rng, 500), _vocab(rng, 5000)
    out = []
    for _ in range(n):
        t = rng.choice(TEMPLATES)
        q = t.format(
            v=rng.choice(VERBS),
            a=rng.choice(adjs),
            n=rng.choice(nouns),
            p=rng.choice(places),
            y=rng.randint(1800, 2020),
        )
        out.append(q[0].upper() + q[1:] + "?")
    return out


def repunctuate(q: str) -> str:
    return q.upper().rstrip("?") + " ?!"


def embed_longer(q: str, rng: random.Random) -> str:
    return q.rstrip("?") + rng.choice((" and why", " according to historians", " in the end")) + "?"


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def part_a(n_records: int, n_bench: int, n_sweep: int, n_embed: int, queue) -> None:
    from pipeline.quality.benchmarks import Benchmark, BenchmarkItem
    from pipeline.quality.decontamination import LexicalIndex, decontaminate

    rng = random.Random(SEED)
    bench_q = make_questions(n_bench, SEED + 1)
    records = [
        {"record_id": f"r{i}", "run_id": "bench", "question": q, "answer": "x"}
        for i, q in enumerate(make_questions(n_records, SEED + 2))
    ]
    planted: dict[str, str] = {}
    planted_src: dict[str, int] = {}
    for k, i in enumerate(rng.sample(range(n_records), n_records // 100)):
        src = rng.randrange(n_bench)
        kind = "exact" if k % 2 == 0 else "ngram"
        q = bench_q[src]
        records[i]["question"] = repunctuate(q) if kind == "exact" else embed_longer(q, rng)
        planted[records[i]["record_id"]] = kind
        planted_src[records[i]["record_id"]] = src
    bench = Benchmark(
        "synthetic",
        Path("synthetic"),
        "-",
        [BenchmarkItem(f"b{i}", q, ("x",)) for i, q in enumerate(bench_q)],
    )
    rows = []
    base = _rss_mb()
    t0 = time.perf_counter()
    matches = decontaminate(records, bench, 5, 0.8)
    t_lex = time.perf_counter() - t0
    peak_lex = _rss_mb()
    flagged = {m.record_id for m in matches}
    rows.append(
        {
            "what": "exact + 5-gram (containment >= 0.8) + answer/evidence",
            "seconds": t_lex,
            "peak_rss_mb": peak_lex,
            "growth_mb": peak_lex - base,
            "recall": len(flagged & set(planted)) / len(planted),
            "unplanted_flagged": len(flagged - set(planted)),
        }
    )
    ngram_rows = []
    # The sweep scores every candidate of every record; at n = 3 a stock phrase ("who was
    # first") has thousands of postings, so it runs on a sample of records.
    sample = records[:n_sweep]
    longer = {r["record_id"] for r in sample if planted.get(r["record_id"]) == "ngram"}
    unplanted_pool = {r["record_id"] for r in sample} - set(planted)
    for n in (3, 5, 8, 13):
        t0 = time.perf_counter()
        index = LexicalIndex(bench, n)
        scores = {}
        for r in sample:
            m = index.ngram_match(r, 1e-9)
            scores[r["record_id"]] = m.score if m else 0.0
        row: dict = {"n": n, "seconds": time.perf_counter() - t0}
        for t in (0.5, 0.8):
            hit = {rid for rid, s in scores.items() if s >= t}
            row[str(t)] = (len(hit & longer) / max(len(longer), 1), len(hit & unplanted_pool))
        ngram_rows.append(row)
    if n_embed:
        from pipeline.core.config import load_config
        from pipeline.quality.checks import embedder_encode
        from pipeline.quality.decontamination import nearest

        encode, model = embedder_encode(load_config(None, []))
        before = _rss_mb()
        # The first n_embed records and n_embed / 2 benchmark questions (full size: 100k/50k).
        emb_records, emb_bench = records[:n_embed], bench_q[: max(n_embed // 2, 1)]
        t0 = time.perf_counter()
        vr = encode([r["question"] for r in emb_records])
        vb = encode(emb_bench)
        t_enc = time.perf_counter() - t0
        t0 = time.perf_counter()
        _, scores = nearest(vr, vb)
        t_search = time.perf_counter() - t0
        hit = {emb_records[i]["record_id"] for i in range(len(emb_records)) if scores[i] >= 0.88}
        # planted copies whose source question is among the embedded benchmark questions
        src_in = {rid for rid, i in planted_src.items() if i < len(emb_bench)}
        pool = {r["record_id"] for r in emb_records}
        peak = _rss_mb()
        rows.append(
            {
                "what": f"embedding: encode {len(emb_records)} + {len(emb_bench)} questions",
                "seconds": t_enc,
                "peak_rss_mb": peak,
                "growth_mb": peak - before,
                "recall": None,
                "unplanted_flagged": None,
            }
        )
        rows.append(
            {
                "what": "embedding: exact nearest neighbour (FAISS flat IP), cos >= 0.88",
                "seconds": t_search,
                "peak_rss_mb": peak,
                "growth_mb": None,
                "recall": len(hit & src_in & pool) / max(len(src_in & pool), 1),
                "unplanted_flagged": len(hit & (pool - set(planted))),
            }
        )
    queue.put(
        {
            "rows": rows,
            "ngram": ngram_rows,
            "planted": len(planted),
            "baseline": base,
            "model": model if n_embed else None,
        }
    )


def part_b(n: int, queue) -> None:
    from pipeline.quality.near_duplicates import brute_force_edges, minhash_edges

    rng = random.Random(SEED + 3)
    qs = make_questions(n, SEED + 4)
    planted = set()
    for i in rng.sample(range(n), n // 20):
        j = rng.randrange(n)
        if i == j:
            continue
        words = qs[j].rstrip("?").split()
        kind = rng.randrange(3)
        if kind == 0:
            rng.shuffle(words)
            v = " ".join(words) + "?"
        elif kind == 1:
            v = ", ".join(words).upper() + "!"
        else:
            v = " ".join([*words, rng.choice(("today", "exactly", "really"))]) + "?"
        qs[i] = v
        planted.add((min(i, j), max(i, j)))
    base = _rss_mb()
    t0 = time.perf_counter()
    lsh = {(e.i, e.j) for e in minhash_edges(qs, 0.8, 128)}
    t_lsh = time.perf_counter() - t0
    rss_lsh = _rss_mb()
    t0 = time.perf_counter()
    brute = {(e.i, e.j) for e in brute_force_edges(qs, 0.8)}
    t_bf = time.perf_counter() - t0
    rss_bf = _rss_mb()
    queue.put(
        {
            "n": n,
            "lsh_s": t_lsh,
            "brute_s": t_bf,
            "lsh_pairs": len(lsh),
            "brute_pairs": len(brute),
            "recall_vs_brute": len(lsh & brute) / len(brute) if brute else 1.0,
            "lsh_false_pairs": len(lsh - brute),
            "planted": len(planted),
            "planted_found_lsh": len(planted & lsh) / len(planted),
            "planted_found_brute": len(planted & brute) / len(planted),
            "rss_base": base,
            "rss_after_lsh": rss_lsh,
            "rss_after_brute": rss_bf,
        }
    )


def _child(target, *args):
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=target, args=(*args, q))
    p.start()
    out = q.get()
    p.join()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--bench", type=int, default=50_000)
    ap.add_argument("--pairs", type=int, default=20_000)
    ap.add_argument("--sweep", type=int, default=5_000, help="records in the n-gram sweep")
    ap.add_argument(
        "--embed", type=int, default=100_000, help="records embedded (and half as many "
        "benchmark questions); 0 skips the embedding method"
    )  # fmt: skip
    ap.add_argument("--skip-a", action="store_true")
    ap.add_argument("--skip-b", action="store_true")
    args = ap.parse_args()
    if not args.skip_a:
        a = _child(part_a, args.records, args.bench, args.sweep, args.embed)
        print(f"\nA. decontamination: {args.records} records vs {args.bench} benchmark questions,")
        print(f"   {a['planted']} planted copies; process baseline {a['baseline']:.0f} MB RSS")
        print(f"{'method':<66} {'s':>8} {'peak MB':>8} {'+MB':>7} {'recall':>7} {'unplanted':>9}")
        for r in a["rows"]:
            rec = "" if r["recall"] is None else f"{r['recall']:.3f}"
            fp = "" if r["unplanted_flagged"] is None else str(r["unplanted_flagged"])
            growth = "" if r["growth_mb"] is None else f"{r['growth_mb']:.0f}"
            print(
                f"{r['what']:<66} {r['seconds']:>8.1f} {r['peak_rss_mb']:>8.0f} "
                f"{growth:>7} {rec:>7} {fp:>9}"
            )
        if a["model"]:
            print(f"   embedder: {a['model']}")
        print(f"\n   word n-gram size and containment threshold, first {args.sweep} records:")
        print("   recall of the copies inside longer questions / records flagged not planted")
        print(f"{'n':>4} {'s':>7} {'recall@0.5':>11} {'unplanted@0.5':>14} {'recall@0.8':>11} "
              f"{'unplanted@0.8':>14}")  # fmt: skip
        for r in a["ngram"]:
            (r5, u5), (r8, u8) = r["0.5"], r["0.8"]
            print(f"{r['n']:>4} {r['seconds']:>7.1f} {r5:>11.3f} {u5:>14} {r8:>11.3f} {u8:>14}")
    if not args.skip_b:
        b = _child(part_b, args.pairs)
        print(f"\nB. near-duplicates on {b['n']} questions ({b['planted']} planted variants),")
        print("   Jaccard of word sets >= 0.8")
        print(f"{'':<34} {'MinHash LSH':>12} {'brute force':>12} {'ratio':>8}")
        print(
            f"{'seconds':<34} {b['lsh_s']:>12.2f} {b['brute_s']:>12.2f} "
            f"{b['brute_s'] / b['lsh_s']:>7.2f}x"
        )
        print(f"{'pairs found':<34} {b['lsh_pairs']:>12} {b['brute_pairs']:>12}")
        print(f"{'recall of brute-force pairs':<34} {b['recall_vs_brute']:>12.3f} {1:>12.3f}")
        print(
            f"{'recall of planted variants':<34} {b['planted_found_lsh']:>12.3f} "
            f"{b['planted_found_brute']:>12.3f}"
        )
        print(
            f"{'peak RSS after (MB)':<34} {b['rss_after_lsh']:>12.0f} "
            f"{b['rss_after_brute']:>12.0f}   (baseline {b['rss_base']:.0f})"
        )
    print(json.dumps({"args": vars(args)}))


if __name__ == "__main__":
    main()
