"""Retention: `curriculum runs prune` removes old runs whole or down to their records,
changes nothing on a dry run, skips runs an export or the selector still refers to (saying
why), and a SIGKILL at any point of it leaves a readable store that a rerun finishes.

The store is a small synthetic history (benchmarks/synthetic_store.py through the real Store
API, as tests/test_compaction.py builds it): 4 nights of 60 records in 2 shard groups each,
every night compacted as landing does but bench-001 (a run landed before compaction), and a
few reviews."""

from __future__ import annotations

import datetime as dt
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import typer
from typer.testing import CliRunner

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from synthetic_store import Corpus, review, run_name, table, write_night  # noqa: E402

from cli.runs import _size, runs_app  # noqa: E402
from pipeline.catalog.export import export_curriculum  # noqa: E402
from pipeline.catalog.retention import (  # noqa: E402
    BULKY_COLUMNS,
    TRASH_DIR,
    apply_prune,
    plan_prune,
)
from pipeline.core.io import sha256_file, write_parquet_atomic  # noqa: E402
from pipeline.core.run_control import store_run_lock  # noqa: E402
from pipeline.store.compaction import compact_run, sweep  # noqa: E402
from pipeline.store.run_index import DUPLICATE_KEYS, EVIDENCE, INDEXES  # noqa: E402
from pipeline.store.run_results import PATH as RESULTS_PATH  # noqa: E402
from pipeline.store.store import (  # noqa: E402
    COMPACTED,
    SHARDED_TABLES,
    Store,
    connect_readonly,
    settle_catalog,
)
from schemas.tables import RUN_PLAN, schema_for  # noqa: E402

NIGHTS, RECORDS, SHARD = 4, 60, 30
OLD = [run_name(0), run_name(1)]  # dated before CUTOFF
KEPT = [run_name(2), run_name(3)]
CUTOFF = "2025-01-03"  # synthetic night r is dated 2025-01-01 + r days


def artifacts(root: Path) -> dict[str, list[Path]]:
    return {"passages": [root / "index/passages.parquet"]}


def build(root: Path) -> Store:
    c = Corpus(np.random.default_rng(7), 300)
    store = Store(root, root / "curriculum.duckdb")
    n = len(c.pids)
    write_parquet_atomic(root / "index/passages.parquet", table("passages", n, {
        "id": c.pids, "title": c.titles, "text": c.ptext, "char_len": [len(t) for t in c.ptext],
        "row": np.arange(n), "source_file": "corpus.jsonl", "source_line": np.arange(1, n + 1),
    }))  # fmt: skip
    for r in range(NIGHTS):
        write_night(store, c, r, RECORDS, SHARD, 5)
    for r in (0, 2, 3):  # bench-001 stays in its shard groups
        compact_run(store, run_name(r))
    store.refresh_catalog(artifacts(root))
    sweep(store)
    with duckdb.connect() as con:
        ids = con.execute(
            "SELECT record_id, run_id FROM read_parquet(?) ORDER BY md5(record_id) LIMIT 8",
            [str(root / "shards/curriculum/*/*/*.parquet")],
        ).fetchall()
    review(root, ids[:5], reject=False)
    review(root, ids[5:], reject=True)
    store.refresh_catalog(artifacts(root))
    return store


@pytest.fixture(scope="module")
def history(tmp_path_factory) -> Path:
    return build(tmp_path_factory.mktemp("history") / "out").root


def copy_of(history: Path, dest: Path) -> Store:
    shutil.copytree(history, dest)
    settle_catalog(dest / "curriculum.duckdb")  # a copy's catalog: rebuilt over its own files
    return Store(dest, dest / "curriculum.duckdb")


def snapshot(root: Path) -> dict[str, str]:
    """Every file under the store (lock files aside) and its checksum."""
    return {
        str(p.relative_to(root)): sha256_file(p)
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.name.endswith(".lock")
    }


def rounded(rows):
    return [
        [None if isinstance(v, float) and math.isnan(v) else
         round(v, 9) if isinstance(v, float) else v for v in r]
        for r in rows
    ]  # fmt: skip


def verdicts(store: Store) -> dict:
    """What a reader asks of the catalog: funnels, per-record verdicts, rows per table/run."""
    with connect_readonly(store.catalog_path) as con:
        out = {
            v: rounded(con.execute(f"SELECT * FROM {v} ORDER BY ALL").fetchall())
            for v in ("funnel", "gate_funnel")
        }
        out["records"] = con.execute(
            "SELECT run_id, record_id, accepted, rejected_by, verifier_v "
            "FROM curriculum_verdicts ORDER BY ALL"
        ).fetchall()
        for t in SHARDED_TABLES:
            out[t] = con.execute(
                f"SELECT run_id, count(*) FROM {t} GROUP BY 1 ORDER BY 1"
            ).fetchall()
    return out


def for_runs(answers: dict, runs: list[str]) -> dict:
    return {k: [r for r in v if r[0] in runs] for k, v in answers.items()}


_app = typer.Typer()
_app.add_typer(runs_app, name="runs")


@_app.callback()
def _root() -> None:
    """Stand-in for the `curriculum` app."""


def prune(store: Store, *args: str):
    res = CliRunner().invoke(_app, [
        "runs", "prune", *args, "--set", f"store.out_dir={store.root}",
        "--set", f"store.catalog={store.catalog_path}",
    ])  # fmt: skip
    return res


@pytest.fixture
def landing_refresh(monkeypatch):
    """The CLI rebuilds the catalog as landing does; this store has no index or corpus to
    land from, so its refresh is the Store's over the same artifacts."""
    monkeypatch.setattr(
        "cli.runs._refresh", lambda cfg, store: store.refresh_catalog(artifacts(store.root))
    )


def test_dry_run_lists_the_old_finished_runs_and_changes_nothing(history, tmp_path):
    store = copy_of(history, tmp_path / "out")
    files, answers = snapshot(store.root), verdicts(store)

    res = prune(store, "--before", CUTOFF)
    assert res.exit_code == 0, res.output
    assert "dry run" in res.output and "would remove 2 run(s)" in res.output
    listed = [line.split()[0] for line in res.output.splitlines() if line.startswith("  bench")]
    assert listed == OLD
    plan = plan_prune(store, dt.date.fromisoformat(CUTOFF))
    assert f"{sum(len(c.files) for c in plan.selected)} file(s)" in res.output
    # every file of the old runs, and only theirs
    named = {str(p.relative_to(store.root)) for c in plan.selected for p in c.files}
    assert named == {f for f in files if any(r in f for r in OLD)}
    assert sum(c.records for c in plan.selected) == 2 * RECORDS

    # the newest run is never selected, whatever the cutoff; nor is a run without a finish
    res = prune(store, "--keep-days", "0")
    assert res.exit_code == 0 and "would remove 3 run(s)" in res.output, res.output
    res = prune(store, "--before", CUTOFF, "--bulky-only")
    assert res.exit_code == 0 and "would slim 2 run(s)" in res.output, res.output
    assert f"{run_name(1)}  2025-01-02  {RECORDS} records" in res.output
    assert "(compacted first)" in res.output
    assert snapshot(store.root) == files
    assert verdicts(store) == answers

    run = store.read_run(run_name(0))
    store.write_run({**run, "finished_at": None, "status": "running"})
    plan = plan_prune(store, dt.date(2030, 1, 1))
    assert [c.run_id for c in plan.selected] == [run_name(1), run_name(2)]
    assert plan.unfinished == [run_name(0)] and plan.newest == run_name(3)

    for bad in ([], ["--keep-days", "3", "--before", CUTOFF], ["--before", "yesterday"]):
        res = prune(store, *bad)
        assert res.exit_code == 2, (bad, res.output)


def test_whole_run_prune_removes_exactly_the_old_runs(history, tmp_path, landing_refresh):
    store = copy_of(history, tmp_path / "out")
    files, answers = snapshot(store.root), verdicts(store)
    plan = plan_prune(store, dt.date.fromisoformat(CUTOFF))
    n_files, n_bytes = sum(len(c.files) for c in plan.selected), sum(c.bytes for c in plan.selected)

    with store_run_lock(store.root, "night-5"):  # a nightly writing the store: refused
        res = prune(store, "--before", CUTOFF, "--apply")
    assert res.exit_code == 2 and "'night-5'" in res.output, res.output
    assert snapshot(store.root) == files

    res = prune(store, "--before", CUTOFF, "--apply")
    assert res.exit_code == 0, res.output
    assert f"removed 2 run(s): {', '.join(OLD)}; {n_files} file(s) deleted" in res.output
    assert f"{_size(n_bytes)} freed" in res.output
    assert "catalog refreshed" in res.output

    after = verdicts(store)
    assert after == for_runs(answers, KEPT)  # the kept runs answer exactly as before
    assert {r[0] for r in after["records"]} == set(KEPT)
    left = snapshot(store.root)
    gone = {f for f in files if any(r in f for r in OLD)}
    assert not any(r in f for f in left for r in OLD)
    # every other file untouched, but the catalog and the run indexes (the refresh's)
    rebuilt = {"curriculum.duckdb", RESULTS_PATH, *(index.path for index in INDEXES)}
    assert {k: v for k, v in left.items() if k not in rebuilt} == {
        k: v for k, v in files.items() if k not in gone and k not in rebuilt
    }

    def indexed_runs(path: str, table: str) -> list[set[str]]:
        """The runs an index's `files` and `table` hold."""
        with duckdb.connect(str(store.root / path), read_only=True) as con:
            return [{r for (r,) in con.execute(f"SELECT DISTINCT run_id FROM {t}").fetchall()}
                    for t in ("files", table)]  # fmt: skip

    files_of, keys = indexed_runs(DUPLICATE_KEYS.path, "keys")
    assert files_of == set(KEPT) and keys <= set(KEPT), (files_of, keys)
    files_of, counts = indexed_runs(EVIDENCE.path, "counts")
    assert files_of == set(KEPT) == counts, (files_of, counts)
    files_of, funnel = indexed_runs(RESULTS_PATH, "funnel")
    assert files_of == set(KEPT) == funnel, (files_of, funnel)
    assert store.run_ids() == KEPT and not (store.root / TRASH_DIR).exists()
    assert not list(store.root.glob("shards/*/run_date=2025-01-0[12]"))

    res = prune(store, "--before", CUTOFF, "--apply")
    assert res.exit_code == 0 and "nothing to prune" in res.output, res.output


def write_plan(store: Store, run_id: str, iteration: int) -> None:
    rows = [{"run_id": run_id, "iteration": iteration, "slot": 0, "passage_row": 0,
             "passage_id": "p0000000", "cluster_id": 0, "task_type": "factual", "hop_count": 1,
             "subgraph_id": None}]  # fmt: skip
    write_parquet_atomic(
        store.run_dir(run_id) / "plan.parquet", pa.Table.from_pylist(rows, schema=RUN_PLAN)
    )


def test_runs_an_export_or_the_selector_refers_to_are_skipped_unless_forced(
    history, tmp_path, landing_refresh
):
    store = copy_of(history, tmp_path / "out")
    # bench-000: planned by the selector, its feedback never applied (no saved iteration 1)
    write_plan(store, run_name(0), 1)
    # bench-001: exported under <out>/exports/; bench-002: exported elsewhere (--exports)
    export_curriculum(store.catalog_path, store.root / "exports/jan", formats=["jsonl"],
                      run_ids=[run_name(1)], where="")  # fmt: skip
    elsewhere = tmp_path / "trainer/datasets/feb"
    export_curriculum(store.catalog_path, elsewhere, formats=["jsonl"], run_ids=[run_name(2)],
                      where="")  # fmt: skip
    files = snapshot(store.root)

    res = prune(store, "--before", "2025-01-04")
    assert res.exit_code == 0, res.output
    out = res.output
    assert f"skipped, still referenced (--force to prune it anyway): {run_name(0)}" in out
    assert "selector: its records were not fed back yet (plan iteration 1" in out
    assert f"skipped, still referenced (--force to prune it anyway): {run_name(1)}" in out
    assert f"export {store.root / 'exports/jan'} (created " in out
    assert re.search(r"\(created [-\d]{10}, \d+ records exported\) lists it in manifest.json", out)
    assert "would remove 1 run(s)" in out and f"  {run_name(2)}  2025-01-03" in out

    res = prune(store, "--before", "2025-01-04", "--exports", str(tmp_path / "trainer"), "--apply")
    assert res.exit_code == 0, res.output
    assert f"{run_name(2)}" in res.output and f"export {elsewhere} (created" in res.output
    assert "removing 0 run(s)" in res.output and "nothing to prune" in res.output
    assert snapshot(store.root) == files

    res = prune(store, "--before", "2025-01-04", "--exports", str(tmp_path / "trainer"),
                "--apply", "--force")  # fmt: skip
    assert res.exit_code == 0, res.output
    assert res.output.count("referenced, pruned by --force") == 3
    assert "removed 3 run(s)" in res.output
    assert store.run_ids() == [run_name(3)]
    assert (store.root / "exports/jan/manifest.json").exists()  # exports are never touched


def bulky_values(store: Store, runs: list[str]) -> dict[str, int]:
    """Per table.column: the rows of `runs` whose value is neither NULL nor ''."""
    got = {}
    with connect_readonly(store.catalog_path) as con:
        for t, cols in BULKY_COLUMNS.items():
            for c in cols:
                ((n,),) = con.execute(
                    f"SELECT count(*) FILTER (WHERE {c} IS NOT NULL AND {c}::VARCHAR <> '') "
                    f"FROM {t} WHERE list_contains(?, run_id)",
                    [runs],
                ).fetchall()
                got[f"{t}.{c}"] = n
    return got


def disk_bytes(store: Store, runs: list[str]) -> int:
    return sum(
        p.stat().st_size
        for r in runs
        for p in store.root.glob(f"shards/*/run_date=*/run_id={r}/*")
        if p.is_file()
    )


def export_of(store: Store, out: Path) -> dict[str, str]:
    """The default export of the old runs, file by file (the manifest aside: it has times)."""
    export_curriculum(store.catalog_path, out, formats=["jsonl"], run_ids=OLD)
    return {str(p.relative_to(out)): p.read_text() for p in sorted(out.rglob("*.jsonl"))}


def test_bulky_only_keeps_records_and_verdicts_and_empties_the_bulky_columns(
    history, tmp_path, landing_refresh
):
    store = copy_of(history, tmp_path / "out")
    answers, size = verdicts(store), disk_bytes(store, OLD)
    filled = {k for k, v in bulky_values(store, OLD).items() if v}
    tables = ("curriculum", "proposer_rollouts", "solver_rollouts", "verifier_samples")
    assert filled >= {f"{t}.{c}" for t in (*tables, "gate_rollouts") for c in BULKY_COLUMNS[t][:2]}
    kept_values = bulky_values(store, KEPT)
    kept_files = {k: v for k, v in snapshot(store.root).items() if any(r in k for r in KEPT)}
    schemas = {f["table"]: pq.read_schema(store.root / f["path"])
               for f in store.manifest(run_name(0))[COMPACTED]["files"]}  # fmt: skip

    exported = export_of(store, tmp_path / "before")
    assert sum(text.count("\n") for text in exported.values()) > 10

    res = prune(store, "--before", CUTOFF, "--bulky-only", "--apply")
    assert res.exit_code == 0, res.output
    assert f"slimmed 2 run(s): {', '.join(OLD)}" in res.output
    assert "curriculum.prompt -> ''" in res.output and "solver_rollouts.think -> NULL" in res.output

    assert verdicts(store) == answers  # every record, verdict and row count as before
    assert export_of(store, tmp_path / "after") == exported
    emptied = bulky_values(store, OLD)
    assert set(emptied.values()) == {0}, emptied
    assert bulky_values(store, KEPT) == kept_values
    with connect_readonly(store.catalog_path) as con:  # NULL where allowed, '' where not
        assert con.execute(
            "SELECT DISTINCT prompt, raw_proposer_output FROM curriculum WHERE run_id = ?",
            [run_name(0)],
        ).fetchall() == [("", "")]
        assert con.execute(
            "SELECT count(*) FROM solver_rollouts WHERE run_id = ? AND think IS NOT NULL",
            [run_name(1)],
        ).fetchall() == [(0,)]
    assert disk_bytes(store, OLD) < 0.5 * size
    assert f"{_size(size - disk_bytes(store, OLD))} freed" in res.output
    for run_id in OLD:  # one compacted group, same contract
        assert set(store.manifest(run_id)) == {COMPACTED}
        for f in store.manifest(run_id)[COMPACTED]["files"]:
            assert pq.read_schema(store.root / f["path"]).equals(schemas[f["table"]]), f
            assert schemas[f["table"]].equals(schema_for(f["table"]), check_metadata=False)
    # nothing of the other runs changed, and nothing replaced is left on disk
    assert {
        k: v for k, v in snapshot(store.root).items() if any(r in k for r in KEPT)
    } == kept_files
    listed = {str(store.root / f["path"]) for r in store.run_ids()
              for e in store.manifest(r).values() for f in e["files"]}  # fmt: skip
    assert {str(p) for p in store.root.rglob("shards/**/*.parquet")} == listed

    res = prune(store, "--before", CUTOFF, "--bulky-only")
    assert f"kept, already slim: {run_name(0)}" in res.output
    assert "would slim 0 run(s)" in res.output


# The child prunes like the CLI (plan, then apply with the Store's refresh); before the k-th
# call of a durable step (fsync, rename, unlink) it kills itself with SIGKILL.
CHILD = textwrap.dedent(
    """
    import datetime as dt, os, signal, sys
    from pathlib import Path
    from pipeline.catalog.retention import apply_prune, plan_prune
    from pipeline.store.store import Store

    kill_at, calls = int(sys.argv[2]), [0]
    def armed(fn):
        def call(*a, **kw):
            if calls[0] == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)
            calls[0] += 1
            return fn(*a, **kw)
        return call
    for name in ("fsync", "replace", "rename", "unlink", "rmdir"):
        setattr(os, name, armed(getattr(os, name)))
    root = Path(sys.argv[1])
    store = Store(root, root / "curriculum.duckdb")
    plan = plan_prune(store, dt.date.fromisoformat(sys.argv[3]), bulky_only=sys.argv[4] == "1")
    apply_prune(store, plan, lambda: store.refresh_catalog({"passages": [
        root / "index/passages.parquet"]}))
    print(calls[0])
    """
)


def child(root: Path, kill_at: int, bulky: bool) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", CHILD, str(root), str(kill_at), CUTOFF, str(int(bulky))],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
    )  # fmt: skip


# Where the kill points fall, as shares of the durable steps of the whole prune (measured in
# the test): whole runs: between the two renames, inside the catalog refresh, while deleting
# the second run's files; bulky only: between the first run's new files and its manifest
# line, around the second run's compaction line, while sweeping the replaced files.
KILL_AT = {False: (0.06, 0.14, 0.66), True: (0.2, 0.5, 0.8)}


@pytest.mark.crash  # a tier of its own: not in make check (tests/conftest.py)
@pytest.mark.parametrize("bulky", [False, True], ids=["whole", "bulky"])
def test_sigkill_at_any_point_of_a_prune_leaves_a_readable_store_and_a_rerun_finishes(
    history, tmp_path, bulky, monkeypatch
):
    before = verdicts(Store(history, history / "curriculum.duckdb"))
    counts = dict(before["curriculum"])
    # the durable steps of an uninterrupted prune, counted as the child counts them
    dry, calls = copy_of(history, tmp_path / "dry"), [0]
    plan = plan_prune(dry, dt.date.fromisoformat(CUTOFF), bulky_only=bulky)
    with monkeypatch.context() as m:
        for name in ("fsync", "replace", "rename", "unlink", "rmdir"):
            fn = getattr(os, name)
            m.setattr(os, name, lambda *a, _fn=fn, **kw: calls.__setitem__(0, calls[0] + 1)
                      or _fn(*a, **kw))  # fmt: skip
        apply_prune(dry, plan, lambda: dry.refresh_catalog(artifacts(dry.root)))
    total = calls[0]
    assert total > 40
    final = verdicts(dry)
    for k in (int(share * total) for share in KILL_AT[bulky]):
        store = copy_of(history, tmp_path / f"kill-{k}")
        p = child(store.root, k, bulky)
        assert p.returncode == -signal.SIGKILL, (k, p.returncode, p.stderr[-500:])
        # the catalog as left names no deleted file
        with connect_readonly(store.catalog_path) as con:
            for t in SHARDED_TABLES:
                con.execute(f"SELECT count(*) FROM {t}").fetchall()
        # and every run its manifests list is whole: all its records, or gone with its folder
        left = {r: store.read_run_table(r, "curriculum").num_rows for r in store.run_ids()}
        assert set(left.items()) <= set(counts.items()) and set(KEPT) <= set(left), k
        if bulky:
            assert left == counts, k
        # and the same prune again finishes it
        plan = plan_prune(store, dt.date.fromisoformat(CUTOFF), bulky_only=bulky)
        apply_prune(store, plan, lambda s=store: s.refresh_catalog(artifacts(s.root)))
        assert verdicts(store) == final, k
        listed = {str(store.root / f["path"]) for r in store.run_ids()
                  for e in store.manifest(r).values() for f in e["files"]}  # fmt: skip
        assert {str(p) for p in store.root.rglob("shards/**/*.parquet")} == listed, k
        assert not (store.root / TRASH_DIR).exists() or not any(
            (store.root / TRASH_DIR).iterdir()
        ), k
        if bulky:
            assert set(bulky_values(store, OLD).values()) == {0}, k
        else:
            assert store.run_ids() == KEPT, k
        shutil.rmtree(store.root)
