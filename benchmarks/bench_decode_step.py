"""One decode step of the CPU model at several batch sizes: `x @ Wᵀ` vs `(W @ xᵀ)ᵀ`.

Same model, same cache contents, same inputs; the two orientations alternate per batch size in
one run. Prints ms per step, generated tokens/s and the speed-up of the transposed (skinny)
orientation, plus the largest logit difference between them (rounding only):
    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/bench_decode_step.py [--context 600]
Then an end-to-end check: the same sampled generate() call (prompts x n samples) timed with
the skinny path off and on.
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch

from pipeline.agents.prompts import ANSWER_STOP, answer_prompt, load_few_shot
from pipeline.core.config import load_config
from pipeline.llm.base import SamplingParams
from pipeline.llm.cpu_linear import use_skinny_linear
from pipeline.llm.kv_cache import KVCache
from pipeline.llm.transformers_backend import TransformersGenerator

QUESTIONS = [
    "Who wrote the novel War and Peace?",
    "What is the capital of Australia?",
    "Which element has the atomic number 8?",
    "In what year did the Berlin Wall fall?",
    "Who painted The Starry Night?",
    "What is the longest river in Africa?",
    "Which planet is known as the Red Planet?",
    "Who composed the Four Seasons?",
]


def step_ms(gen: TransformersGenerator, batch: int, context: int, steps: int):
    """Mean ms of `steps` decode steps after `context` cached tokens, and the last logits."""
    torch.manual_seed(0)
    cache = KVCache(gen.model.config, context + steps + 2, gen.model.dtype, gen.device)
    cache.reserve(batch)
    cache.length = context
    for d in (cache.keys, cache.values):
        for t in d.values():
            t[:, :, :context].normal_()
    kv_pos = torch.arange(context)[None].repeat(batch, 1)
    nxt = torch.full((batch,), context)
    tokens = torch.randint(100, 5000, (steps + 1, batch, 1))
    with torch.inference_mode():
        for s in range(steps + 1):
            if s == 1:  # the first step warms up allocations
                t0 = time.perf_counter()
            kv_pos = torch.cat([kv_pos, nxt[:, None]], 1)
            logits = gen._forward(cache, tokens[s], nxt[:, None], kv_pos, logits=True)
            nxt = nxt + 1
    return (time.perf_counter() - t0) / steps * 1000, logits


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--context", type=int, default=600, help="cached tokens per row")
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--batches", default="1,2,4,8,16,32")
    ap.add_argument("--m", type=int, default=4, help="samples per prompt in the generate check")
    args = ap.parse_args()
    cfg = load_config()
    gen = TransformersGenerator.from_config(cfg.llm)
    print(f"model={cfg.llm.model} torch_threads={torch.get_num_threads()} context={args.context}")
    head = ("rows", "x@Wt ms", "(W@xt)t ms", "tok/s", "tok/s", "speed-up")
    print(" ".join(f"{h:>{w}}" for h, w in zip(head, (5, 9, 11, 8, 8, 9), strict=True)))
    for b in (int(x) for x in args.batches.split(",")):
        use_skinny_linear(gen.model, 0)
        usual, ref = step_ms(gen, b, args.context, args.steps)
        use_skinny_linear(gen.model, b)
        skinny, out = step_ms(gen, b, args.context, args.steps)
        diff = float((out - ref).abs().max())
        print(
            f"{b:>5} {usual:9.1f} {skinny:11.1f} {b / usual * 1000:8.1f} "
            f"{b / skinny * 1000:8.1f} {usual / skinny:8.2f}x   max |dlogit| {diff:.1e}"
        )

    shots = load_few_shot(cfg.resolve_path(cfg.generation.few_shot))
    prompts = [answer_prompt(q, shots, context=None) for q in QUESTIONS]
    params = SamplingParams(
        n=args.m, temperature=1.0, top_p=0.95, max_tokens=12, stop=ANSWER_STOP, seed=7
    )
    timed = {}
    for label, rows in (("usual", 0), ("skinny", 32), ("usual", 0), ("skinny", 32)):
        use_skinny_linear(gen.model, rows)
        t0 = time.perf_counter()
        gen.generate(prompts, params)
        timed.setdefault(label, []).append(time.perf_counter() - t0)
    best = {k: min(v) for k, v in timed.items()}
    print(
        f"generate({len(prompts)} prompts x n={args.m}, batch {gen.batch_size}): usual "
        f"{best['usual']:.1f} s, skinny {best['skinny']:.1f} s, speed-up "
        f"{best['usual'] / best['skinny']:.2f}x (best of 2 each, alternating)"
    )


if __name__ == "__main__":
    main()
