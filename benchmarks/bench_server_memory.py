"""LLM server peak memory above idle while echo-scoring one long prompt: whole vs chunked logits.

Starts `curriculum llm serve`'s app (pipeline.llm.openai_server) twice on 127.0.0.1 with the
embedded model, each in its own process, and sends each the same request, what the HTTP
backend's score() sends: `echo=true, max_tokens=0, logprobs=1` for a ~1,500-token prompt
built from the sample corpus.

- old: one vocabulary-sized logit row for every position at once (chunked_head.CHUNK_BYTES
  set above the whole text's logits: one block, one slice), as `model(...).logits` over all
  positions would hold them (1,500 x 262,144 float32 = 1.5 GB), then logsumexp over them.
- new: the code as it is (the LM head over CHUNK_BYTES of logits at a time).

Idle = the server's RSS after a short warm-up request; peak = its VmHWM during the request,
after resetting it through /proc/PID/clear_refs (Linux). Also prints each request's time and
the largest difference between the two ways' token log-probs.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/bench_server_memory.py [--tokens 1500]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import httpx  # noqa: E402


def serve(way: str, port: int) -> None:
    """Child: the OpenAI-compatible server, scoring the old or the new way."""
    import uvicorn

    from pipeline.core.config import load_config
    from pipeline.llm import chunked_head, make_backend
    from pipeline.llm.openai_server import create_completions_app

    if way == "old":
        chunked_head.CHUNK_BYTES = 2**62  # every position's logits in one block, as before
    cfg = load_config(None, ["llm.backend=transformers"])  # our scoring, not vLLM's
    app = create_completions_app(make_backend(cfg.llm), cfg.llm.model, cfg.llm.serve)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


def _kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/{pid}/status")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _prompt(base: str, tokens: int) -> str:
    """Sample-corpus passages joined until the server counts `tokens` tokens, cut to that."""
    lines = (ROOT / "data" / "sample" / "corpus.jsonl").read_text(encoding="utf-8").splitlines()
    text = ""
    for line in lines:
        row = json.loads(line)
        text += (row.get("contents") or f"{row.get('title')}\n{row.get('text')}") + "\n\n"
        if len(text) > tokens * 6:
            break
    lo, hi = 0, len(text)
    while lo < hi:  # the longest prefix with at most `tokens` tokens
        mid = (lo + hi + 1) // 2
        body = {"prompt": text[:mid], "add_special_tokens": False}
        if httpx.post(f"{base}/tokenize", json=body, timeout=60).json()["count"] <= tokens:
            lo = mid
        else:
            hi = mid - 1
    return text[:lo]


def measure(way: str, tokens: int, prompt: str | None) -> dict:
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    cmd = [sys.executable, __file__, "--serve", way, "--port", str(port)]
    proc = subprocess.Popen(cmd, cwd=ROOT)
    try:
        deadline = time.time() + 300
        while True:
            try:
                if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if proc.poll() is not None or time.time() > deadline:
                raise RuntimeError(f"the {way} server did not start")
            time.sleep(0.5)
        prompt = prompt or _prompt(base, tokens)
        body = {"prompt": prompt, "echo": True, "max_tokens": 0, "logprobs": 1}
        warm = {**body, "prompt": prompt[:200]}
        httpx.post(f"{base}/v1/completions", json=warm, timeout=600).raise_for_status()
        time.sleep(1)
        idle = _kb(proc.pid, "VmRSS")
        Path(f"/proc/{proc.pid}/clear_refs").write_text("5")  # VmHWM := current RSS
        t = time.perf_counter()
        res = httpx.post(f"{base}/v1/completions", json=body, timeout=600)
        seconds = time.perf_counter() - t
        res.raise_for_status()
        peak = _kb(proc.pid, "VmHWM")
        lp = res.json()["choices"][0]["logprobs"]
        return {
            "way": way,
            "prompt": prompt,
            "prompt_tokens": res.json()["usage"]["prompt_tokens"],
            "idle_mb": idle / 1024,
            "peak_mb": peak / 1024,
            "above_idle_mb": (peak - idle) / 1024,
            "seconds": seconds,
            "token_logprobs": lp["token_logprobs"],
        }
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=1500, help="prompt length in tokens")
    ap.add_argument("--serve", choices=["old", "new"], help=argparse.SUPPRESS)
    ap.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve:
        serve(args.serve, args.port)
        return
    new = measure("new", args.tokens, None)
    old = measure("old", args.tokens, new["prompt"])
    print(f"echo + logprobs scoring of a {new['prompt_tokens']}-token prompt (llm serve, embedded)")
    print(f"{'way':<5} {'idle MB':>9} {'peak MB':>9} {'above idle MB':>14} {'seconds':>8}")
    for r in (old, new):
        print(
            f"{r['way']:<5} {r['idle_mb']:>9.0f} {r['peak_mb']:>9.0f} "
            f"{r['above_idle_mb']:>14.0f} {r['seconds']:>8.1f}"
        )
    diff = max(
        abs(a - b)
        for a, b in zip(old["token_logprobs"], new["token_logprobs"], strict=True)
        if a is not None
    )
    print(f"largest |old - new| token log-prob: {diff:.2e}")


if __name__ == "__main__":
    main()
