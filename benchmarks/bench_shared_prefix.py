"""Verifier-style sampling (m answers per prompt) with and without shared-prefix prefill.

Shared: the few-shot block common to a batch's prompts is prefilled once per batch, each
prompt's own suffix once, and the m samples copy that cache. Expanded: every sample prefills
its whole prompt (share_prefix=False).

Same model, same prompts, same sampling parameters, measured side by side in one run:
    .venv/bin/python benchmarks/bench_shared_prefix.py [--prompts 12] [--m 5]
Prints answers/s for both modes and the speed-up ratio.
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pyarrow.parquet as pq

from pipeline.agents.evidence import sentences
from pipeline.agents.prompts import ANSWER_STOP, answer_prompt, load_few_shot
from pipeline.core.config import load_config
from pipeline.llm.base import SamplingParams
from pipeline.llm.transformers_backend import TransformersGenerator
from pipeline.retrieval.corpus import load_corpus


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--prompts", type=int, default=12)
    ap.add_argument("--m", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    cfg = load_config()
    shots = load_few_shot(cfg.resolve_path(cfg.generation.few_shot))
    tmp = cfg.resolve_path("data/out/bench/passages.parquet")
    load_corpus(cfg.resolve_path(cfg.corpus.path), tmp)
    t = pq.read_table(tmp).slice(0, args.prompts)
    prompts = [
        answer_prompt(f"What does this say about {title}?", shots, sentences(text)[0].text)
        for title, text in zip(t["title"].to_pylist(), t["text"].to_pylist(), strict=True)
    ]
    gen = TransformersGenerator.from_config(cfg.llm)
    params = SamplingParams(n=args.m, temperature=1.0, max_tokens=12, stop=ANSWER_STOP, seed=0)
    gen.generate(prompts[:2], params)  # warm-up
    timings = {}
    for mode in (False, True, False, True)[: 2 * args.repeats]:
        gen.share_prefix = mode
        start = time.perf_counter()
        gen.generate(prompts, params)
        timings.setdefault(mode, []).append(time.perf_counter() - start)
    answers = len(prompts) * args.m
    naive, shared = min(timings[False]), min(timings[True])
    print(f"prompts={len(prompts)} m={args.m} answers={answers} batch_size={gen.batch_size}")
    print(f"expanded prefill (n x prompt): {naive:7.2f} s  {answers / naive:6.2f} answers/s")
    print(f"shared prefill   (1 x prefix): {shared:7.2f} s  {answers / shared:6.2f} answers/s")
    print(f"speed-up: {naive / shared:.2f}x")


if __name__ == "__main__":
    main()
