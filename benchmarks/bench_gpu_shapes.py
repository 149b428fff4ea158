"""GPU throughput of the production models' shapes, for the Ray scaling projection.

No hub access is needed: both models are built from their published configurations with
random weights, which cost exactly the FLOPs and memory traffic of the real ones:
- E5-base-v2 (BERT-base: 12 layers, 768 hidden, 12 heads), encoding passages of 128 and 256
  tokens in fp16: passages per second per GPU -> hours for the 21M-passage embedding pass.
- Qwen2.5-3B-Instruct (36 layers, 2048 hidden, 16 query / 2 KV heads, 11008 MLP, 151936
  vocabulary) in bf16 with transformers' own batched `generate` (static KV cache): prefill
  tokens/s and decode tokens/s at several batch sizes. vLLM's paged attention and continuous
  batching run faster than this, so the figures are a measured lower bound per GPU.

    python benchmarks/bench_gpu_shapes.py [--quick]      (on a CUDA machine)
"""

from __future__ import annotations

import argparse
import time

import torch


def timed(fn, repeat: int = 3) -> float:
    fn()  # warm-up (kernels, allocator)
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        best = min(best, time.perf_counter() - t)
    return best


def e5_base(quick: bool) -> None:
    from transformers import BertConfig, BertModel

    cfg = BertConfig(
        hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
        intermediate_size=3072, vocab_size=30522, max_position_embeddings=512,
    )  # fmt: skip
    model = BertModel(cfg).to("cuda", torch.float16).eval()
    for length in (128, 256):
        batch = 256 if quick else 512
        ids = torch.randint(1000, 30000, (batch, length), device="cuda")
        mask = torch.ones_like(ids)

        @torch.inference_mode()
        def run(ids=ids, mask=mask):
            out = model(input_ids=ids, attention_mask=mask).last_hidden_state
            torch.nn.functional.normalize(out.mean(1), dim=-1)  # mean pooling + L2, as E5

        s = timed(run)
        rate = batch / s
        print(f"E5-base shape, {length} tokens, batch {batch}: {rate:,.0f} passages/s "
              f"-> 21,015,324 passages in {21_015_324 / rate / 3600:.2f} GPU-hours")  # fmt: skip


def qwen_3b(quick: bool) -> None:
    from transformers import Qwen2Config, Qwen2ForCausalLM

    cfg = Qwen2Config(hidden_size=2048, num_hidden_layers=36, num_attention_heads=16,
                      num_key_value_heads=2, intermediate_size=11008, vocab_size=151936,
                      max_position_embeddings=32768, tie_word_embeddings=True)  # fmt: skip
    model = Qwen2ForCausalLM(cfg).to("cuda", torch.bfloat16).eval()
    prompt, new = 1024, 64
    for batch in (8, 32) if quick else (8, 32, 128):
        ids = torch.randint(1000, 150000, (batch, prompt), device="cuda")

        @torch.inference_mode()
        def prefill(ids=ids):
            model(input_ids=ids, use_cache=False, logits_to_keep=1)

        @torch.inference_mode()
        def generate(ids=ids):
            model.generate(ids, max_new_tokens=new, min_new_tokens=new, do_sample=False,
                           pad_token_id=0, cache_implementation="static")  # fmt: skip

        p = timed(prefill, 2)
        g = timed(generate, 1 if batch >= 128 else 2)
        decode = max(g - p, 1e-9)
        print(f"Qwen2.5-3B shape, batch {batch}, prompt {prompt}: prefill "
              f"{batch * prompt / p:,.0f} tok/s, decode {batch * new / decode:,.0f} tok/s "
              f"(generate {g:.2f} s)")  # fmt: skip
    print(f"GPU: {torch.cuda.get_device_name()}, peak memory "
          f"{torch.cuda.max_memory_allocated() / 2**30:.1f} GiB")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("needs a CUDA GPU")
    e5_base(args.quick)
    qwen_3b(args.quick)


if __name__ == "__main__":
    main()
