"""The stage flows an operator runs alone (land, export), as real Prefect flow runs."""

import json
import os
import shutil
import subprocess
import sys

import pyarrow.parquet as pq
import pytest

from tests.conftest import LANDED_SETTINGS, ROOT

pytestmark = pytest.mark.slow

SCRIPT = """
import json, sys
from flows.export import export
from flows.land import land
overrides = json.loads(sys.argv[1])
summary = land(overrides=overrides)
out = export(out=sys.argv[2], overrides=overrides, formats=["verl", "jsonl"],
             where="is_valid AND is_verbatim", include_shortcuts=True, include_ambiguous=True,
             include_undetermined=True)  # the run's valid records: the 6 may have none accepted
print("RESULT " + json.dumps({"run_id": summary.run_id, "records": summary.records,
                              "catalog": str(summary.catalog), "export": out}))
"""


def test_land_and_export_flows_on_a_copied_store(landed_run, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(landed_run.out, out, ignore=shutil.ignore_patterns("catalog.duckdb", "report"))
    overrides = [f"store.out_dir={out}", f"store.catalog={out / 'catalog.duckdb'}"]
    overrides += LANDED_SETTINGS  # same config: the index is found under the copied store
    env = {**os.environ, "PREFECT_HOME": str(tmp_path / "prefect"), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, json.dumps(overrides), str(tmp_path / "export")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    res = json.loads(done.stdout.split("RESULT ", 1)[1])
    assert res["run_id"] == landed_run.run_id and res["records"] > 0
    # The catalog was rebuilt inside the copy, over the copy's shards only.
    import duckdb

    with duckdb.connect(res["catalog"], read_only=True) as con:
        (view_sql,) = con.execute(
            "SELECT sql FROM duckdb_views() WHERE view_name = 'curriculum'"
        ).fetchone()
        n = con.execute("SELECT count(*) FROM curriculum").fetchone()[0]
    assert str(out) in view_sql and str(landed_run.out) + "/" not in view_sql
    assert n == res["records"]
    assert (out / "runs" / landed_run.run_id / "report" / "report.md").exists()
    train = pq.read_table(tmp_path / "export" / "verl" / "train.parquet")
    manifest = json.loads((tmp_path / "export" / "manifest.json").read_text())
    assert train.num_rows == manifest["counts"]["train"] > 0
    assert (tmp_path / "export" / "jsonl" / "validation.jsonl").exists()


def test_prefect_yaml_registers_the_scheduled_nightly_deployment(tmp_path, prefect_api):
    """`make deploy` against a real Prefect server (the session's): the schedule, parameters
    and pool land."""
    env = {**os.environ, "PREFECT_HOME": str(tmp_path / "prefect"), "PREFECT_API_URL": prefect_api}
    prefect = str(ROOT / ".venv" / "bin" / "prefect")
    if not os.path.exists(prefect):
        prefect = shutil.which("prefect") or pytest.fail("prefect CLI not installed")

    def run(*args):
        res = subprocess.run(
            [prefect, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
        )
        assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
        return res.stdout

    run("work-pool", "create", "curriculum", "--type", "process", "--overwrite")
    run("--no-prompt", "deploy", "--all")
    nightly = json.loads(run("deployment", "inspect", "nightly/nightly", "-o", "json"))
    export = json.loads(run("deployment", "inspect", "export/export", "-o", "json"))
    on_ray = json.loads(run("deployment", "inspect", "nightly/nightly-ray", "-o", "json"))
    assert nightly["entrypoint"] == "flows/nightly.py:nightly"
    assert nightly["work_pool_name"] == "curriculum"
    assert nightly["parameters"] == {"profile": "configs/embedded.yaml", "overrides": []}
    [schedule] = nightly["schedules"]
    assert schedule["schedule"]["cron"] == "0 2 * * *" and schedule["active"]
    assert nightly["global_concurrency_limit"]["limit"] == 1
    assert export["entrypoint"] == "flows/export.py:export" and not export["schedules"]
    # The cluster variant: same flow, the executor and shared retriever as overrides that
    # make a valid configuration; its schedule starts paused (one nightly per store).
    from pipeline.core.config import load_config

    params = on_ray["parameters"]
    assert on_ray["entrypoint"] == "flows/nightly.py:nightly"
    cfg = load_config(ROOT / params["profile"], params["overrides"])
    assert (cfg.executor.kind, cfg.executor.num_gpus, cfg.retrieval.backend) == ("ray", 1, "http")
    [schedule] = on_ray["schedules"]
    assert not schedule["active"]
