"""Compaction of finished runs: the same answers from fewer files, and a SIGKILL at
any point of it leaves every record readable exactly once and a rerun finishes it.

The store is a small synthetic history (benchmarks/synthetic_store.py: every sharded table,
real Store API, gate verdicts and controls as a run writes them) of a few nights in several
shard groups each, with reviews."""

from __future__ import annotations

import datetime as dt
import math
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import duckdb
import numpy as np
import pyarrow.parquet as pq
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from synthetic_store import (  # noqa: E402
    Corpus,
    artifacts,
    night_tables,
    review,
    run_name,
    write_artifacts,
    write_night,
)

from pipeline.catalog.audit import AUDITS  # noqa: E402
from pipeline.catalog.export import export_curriculum  # noqa: E402
from pipeline.store import reviews  # noqa: E402
from pipeline.store.compaction import (  # noqa: E402
    compact_finished,
    compact_run,
    needs_compaction,
    superseded_files,
    sweep,
)
from pipeline.store.reviews import (  # noqa: E402
    compact_reviews,
    holdings,
    review_files,
    sweep_reviews,
)
from pipeline.store.store import COMPACTED, ShardFile, Store, connect_readonly  # noqa: E402

NIGHTS, RECORDS, SHARD = 3, 120, 40


def build(root: Path) -> Store:
    c = Corpus(np.random.default_rng(5), 400)
    store = Store(root, root / "curriculum.duckdb")
    write_artifacts(root, c)
    for r in range(NIGHTS):
        write_night(store, c, r, RECORDS, SHARD, 5)
    with duckdb.connect() as con:
        ids = con.execute(
            "SELECT record_id, run_id FROM read_parquet(?) ORDER BY md5(record_id) LIMIT 12",
            [str(root / "shards/curriculum/*/*/*.parquet")],
        ).fetchall()
    review(root, ids[:8], reject=False)
    review(root, ids[8:], reject=True)
    store.refresh_catalog(artifacts(root))
    return store


@pytest.fixture(scope="module")
def history(tmp_path_factory) -> Path:
    return build(tmp_path_factory.mktemp("history") / "out").root


def copy_of(history: Path, dest: Path) -> Store:
    shutil.copytree(history, dest)
    return Store(dest, dest / "curriculum.duckdb")


def rounded(value):
    """Sums of floats differ in their last bits with the order rows are read in."""
    if isinstance(value, float):
        return None if math.isnan(value) else round(value, 9)
    if isinstance(value, list | tuple):
        return [rounded(v) for v in value]
    if isinstance(value, dict):
        return {k: rounded(v) for k, v in value.items()}
    return value


def keyed(rows) -> list:
    """Rows in an order that does not depend on their floats (see `same`)."""

    def key(value):
        if isinstance(value, float):
            return None
        if isinstance(value, list | tuple):
            return [key(v) for v in value]
        return value

    return sorted((rounded(list(r)) for r in rows), key=lambda r: repr(key(r)))


def same(a, b) -> bool:
    """Equal, floats up to summation order: 1e-9, or one unit of the last decimal an audit
    rounds to (round(x, 3) of x.xxx5 falls either way)."""
    if isinstance(a, float) and isinstance(b, float):
        return abs(a - b) <= 1e-9 or (abs(a - b) <= 0.0010001 and round(a, 3) == a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return a == b


def audit_rows(con, run_id: str | None) -> dict:
    """Every audit's rows for `run_id` (None: the whole history), by audit, title, statement."""
    return {
        f"{audit.name}:{title}:{i}": keyed(con.execute(stmt, {"run_id": run_id}).fetchall())
        for audit in AUDITS.values()
        for title, sql in audit.queries
        for i, stmt in enumerate(s for s in sql.split(";") if s.strip())
    }


def answers(store: Store, out: Path) -> dict:
    """Every audit's SQL (whole history and one run), the views a reader starts from, and the
    default export of all runs and of one."""
    cat, one = store.catalog_path, run_name(1)
    got = {}
    with connect_readonly(cat) as con:
        for scope in (None, one):
            got |= {f"{k}:{scope}": v for k, v in audit_rows(con, scope).items()}
        for view in ("funnel", "gate_funnel", "record_index", "curriculum_verdicts", "run_costs"):
            rows = con.execute(f"SELECT * FROM {view} ORDER BY ALL").fetchall()
            got[view] = rounded([list(r) for r in rows])
    for label, runs in (("all", []), ("one", [one])):
        res = export_curriculum(cat, out / label, formats=["jsonl"], run_ids=runs)
        files = sorted(p for p in (out / label).rglob("*.jsonl"))
        got[f"export:{label}"] = {p.name: p.read_text() for p in files}
        got[f"export:{label}:counts"] = res.counts
    return got


def ask_again(store: Store, picked: str, params: list) -> list[dict]:
    """The last night asks the records `picked` (a SELECT of record ids) again, under new ids
    ("again0", ...) with V = 1, so that the earlier ones lose to them; the records picked."""
    from schemas.tables import schema_for

    last = run_name(NIGHTS - 1)
    with connect_readonly(store.catalog_path) as con:
        ((last_date,),) = con.execute(
            "SELECT run_date FROM runs WHERE run_id = ?", [last]
        ).fetchall()
        cols = ", ".join(f.name for f in schema_for("curriculum"))
        sql = f"SELECT {cols} FROM curriculum WHERE record_id IN ({picked})"
        rows = con.sql(sql, params=params).to_arrow_table().to_pylist()
    again = [r | {"record_id": f"again{i}", "run_id": last, "verifier_v": 1.0}
             for i, r in enumerate(rows)]  # fmt: skip
    store.commit(last, "again", [store.write_shard("curriculum", last, last_date, "again", again)])
    return rows


def test_compaction_keeps_every_audit_and_export_and_leaves_one_file_per_table(
    history, tmp_path, monkeypatch
):
    monkeypatch.setattr(reviews, "GRACE", dt.timedelta(0))  # the folded files go at once
    store = copy_of(history, tmp_path / "out")
    before = answers(store, tmp_path / "before")
    reviews_before = sorted(store.root.glob("reviews/*.parquet"))
    assert len(reviews_before) == 2
    files_before = sorted(store.root.rglob("shards/**/*.parquet")) + reviews_before
    # the catalog counts records from the manifests (the export's manifest does), live or
    # compacted: `rows` of catalog_files
    counted = (
        "SELECT (SELECT sum(rows) FROM catalog_files WHERE view = 'curriculum'), "
        "(SELECT count(*) FROM curriculum), (SELECT count(DISTINCT path) FROM catalog_files "
        "WHERE view = 'curriculum')"
    )
    with connect_readonly(store.catalog_path) as con:
        assert con.execute(counted).fetchall() == [(NIGHTS * RECORDS, NIGHTS * RECORDS, 9)]

    done = compact_finished(store)
    assert [c.run_id for c in done] == [run_name(r) for r in range(NIGHTS)]
    assert all(c.groups == RECORDS // SHARD for c in done)
    store.refresh_catalog(artifacts(store.root))
    gone = sweep(store)

    # every shard file replaced, and the reviews by one compacted file
    assert sorted(map(str, gone)) == sorted(map(str, files_before))
    assert [p.name[:10] for p in store.root.glob("reviews/*.parquet")] == ["compacted-"]
    for r in range(NIGHTS):
        run_id = run_name(r)
        assert set(store.manifest(run_id)) == {COMPACTED}
        # one file per table, plus the run's record facts; the groups still count as done
        tables = [f["table"] for f in store.manifest(run_id)[COMPACTED]["files"]]
        assert len(tables) == len(set(tables)) and "record_facts" in tables
        assert store.completed_shards(run_id) >= {f"{s:05d}" for s in range(RECORDS // SHARD)}
    with connect_readonly(store.catalog_path) as con:
        assert con.execute(counted).fetchall() == [(NIGHTS * RECORDS, NIGHTS * RECORDS, NIGHTS)]
    after = answers(store, tmp_path / "after")
    assert after.keys() == before.keys()
    for key in before:
        assert same(after[key], before[key]), key
    # the verdicts were not all alike: the comparison covers accepted and rejected records
    assert {r[0] for r in before["funnel"]} == {run_name(r) for r in range(NIGHTS)}
    assert 0 < before["export:all:counts"]["exported"] < NIGHTS * RECORDS
    # a second compaction has nothing to fold
    assert compact_run(store, run_name(0)) is None


def test_a_run_resumed_after_compaction_adds_groups_that_the_next_compaction_folds(
    history, tmp_path
):
    store = copy_of(history, tmp_path / "out")
    run_id = run_name(0)
    compact_run(store, run_id)
    rows = store.read_run_table(run_id, "curriculum")
    assert rows.num_rows == RECORDS
    # a resumed run writes a group the compacted one does not cover
    extra = rows.slice(0, 5).to_pylist()
    for i, r in enumerate(extra):
        r["record_id"] = f"late-{i}"
    day = store.read_run(run_id)["run_date"]
    store.commit(run_id, "00099", [store.write_shard("curriculum", run_id, day, "00099", extra)])
    assert set(store.manifest(run_id)) == {COMPACTED, "00099"}
    assert store.read_run_table(run_id, "curriculum").num_rows == RECORDS + 5

    again = compact_run(store, run_id)
    assert again is not None and again.groups == 2 and again.rows["curriculum"] == RECORDS + 5
    assert set(store.manifest(run_id)) == {COMPACTED}
    assert "00099" in store.manifest(run_id)[COMPACTED]["covers"]
    store.refresh_catalog(artifacts(store.root))
    with connect_readonly(store.catalog_path) as con:
        ((n, distinct, facts),) = con.execute(
            "SELECT count(*), count(DISTINCT record_id), "
            "(SELECT count(*) FROM record_facts WHERE run_id = ?) FROM curriculum WHERE run_id = ?",
            [run_id, run_id],
        ).fetchall()
    assert n == distinct == facts == RECORDS + 5


def test_a_run_without_control_scores_compacts_its_facts_as_the_catalog_computed_them(
    history, tmp_path
):
    """gates.controls off: the run writes no control_scores, its V bar is V > 0; compaction
    writes its record facts (no control facts) as the catalog computed them live."""
    store = copy_of(history, tmp_path / "out")
    run_id, c = run_name(NIGHTS), Corpus(np.random.default_rng(5), 400)
    groups = [[(t, tbl) for t, tbl in group if t != "control_scores"]
              for group in night_tables(c, NIGHTS, RECORDS, SHARD, 5)]  # fmt: skip
    write_night(store, c, NIGHTS, RECORDS, SHARD, 5, groups)
    sql = "SELECT * FROM record_facts WHERE run_id = ? ORDER BY record_id"
    store.refresh_catalog(artifacts(store.root))
    with connect_readonly(store.catalog_path) as con:
        live = con.execute(sql, [run_id]).fetchall()
        ((bar,),) = con.execute(
            "SELECT DISTINCT source FROM verifier_thresholds WHERE run_id = ?", [run_id]
        ).fetchall()
    assert len(live) == RECORDS and bar.startswith("none")

    done = compact_run(store, run_id)
    assert done is not None and "control_facts" not in done.rows
    assert done.rows["record_facts"] == RECORDS
    store.refresh_catalog(artifacts(store.root))
    with connect_readonly(store.catalog_path) as con:
        assert con.execute(
            "SELECT count(*) FROM record_facts_files WHERE run_id = ?", [run_id]
        ).fetchall() == [(RECORDS,)]
        assert same(rounded(con.execute(sql, [run_id]).fetchall()), rounded(live))


def test_a_run_compacted_before_a_derived_table_existed_gets_it_and_keeps_its_files(
    history, tmp_path
):
    store = copy_of(history, tmp_path / "out")
    run_id = run_name(1)
    compact_run(store, run_id)
    entry = store.manifest(run_id)[COMPACTED]
    # what a release before control_facts committed: the same group without it
    older = [ShardFile.from_entry(f) for f in entry["files"]]
    store.commit(
        run_id, COMPACTED, [f for f in older if f.table != "control_facts"], covers=entry["covers"]
    )
    store.refresh_catalog(artifacts(store.root))
    sql = "SELECT * FROM verifier_controls WHERE run_id = ? ORDER BY ALL"
    with connect_readonly(store.catalog_path) as con:
        live = con.execute(sql, [run_id]).fetchall()  # computed from the control scores
    assert live and needs_compaction(store, run_id)

    (added,) = [c for c in compact_finished(store) if c.run_id == run_id]
    assert added.rows == {"control_facts": len(live)}
    again = store.manifest(run_id)[COMPACTED]
    assert sorted(again["files"], key=str) == sorted(entry["files"], key=str)  # none rewritten
    assert not needs_compaction(store, run_id)
    store.refresh_catalog(artifacts(store.root))
    with connect_readonly(store.catalog_path) as con:
        assert same(rounded(con.execute(sql, [run_id]).fetchall()), rounded(live))
        assert con.execute(
            "SELECT count(*) FROM control_facts_files WHERE run_id = ?", [run_id]
        ).fetchall() == [(len(live),)]


def test_an_export_read_a_batch_of_runs_at_a_time_is_the_same_export(
    history, tmp_path, monkeypatch
):
    from pipeline.catalog import export_selection
    from pipeline.catalog.readonly_sql import connect_audit

    cat = history / "curriculum.duckdb"

    def exported(label: str) -> dict:
        res = export_curriculum(cat, tmp_path / label, formats=["jsonl"])
        files = sorted((tmp_path / label).rglob("*.jsonl"))
        return {"counts": res.counts, **{p.name: p.read_text() for p in files}}

    whole = exported("whole")
    monkeypatch.setattr(export_selection, "BATCH_RECORDS", RECORDS // 2)
    with connect_audit(cat) as con:
        assert export_selection.run_batches(con) == [[run_name(r)] for r in range(NIGHTS)]
    assert exported("batched") == whole
    assert whole["counts"]["exported"] > 0 and whole["counts"]["selected"] > 0
    assert whole["dropped.jsonl"].count("\n") > NIGHTS  # rejected records of every batch


def test_sweep_waits_for_a_catalog_that_no_longer_names_the_old_files(history, tmp_path):
    store = copy_of(history, tmp_path / "out")
    run_id = run_name(2)
    old = sorted(
        store.root / f["path"] for e in store.manifest(run_id).values() for f in e["files"]
    )
    compact_run(store, run_id)
    # the catalog was built before the compaction: it still names the replaced files
    assert sweep(store) == []
    with connect_readonly(store.catalog_path) as con:
        assert con.execute("SELECT count(*) FROM curriculum").fetchall() == [(NIGHTS * RECORDS,)]
    store.refresh_catalog(artifacts(store.root))
    assert superseded_files(store, run_id, None) == []  # no catalog time given: nothing
    assert sorted(sweep(store)) == old
    assert not any(p.exists() for p in old)


# The child compacts every run, refreshes and sweeps, like landing; before the k-th call of a
# durable step (fsync, rename, unlink) it kills itself with SIGKILL.
CHILD = textwrap.dedent(
    """
    import os, signal, sys
    from pathlib import Path
    sys.path.insert(0, sys.argv[3])
    from synthetic_store import artifacts
    import datetime as dt
    from pipeline.store import reviews
    from pipeline.store.compaction import compact_finished, sweep
    from pipeline.store.store import Store

    reviews.GRACE = dt.timedelta(0)  # the review files a fold held go at once
    kill_at, calls = int(sys.argv[2]), [0]
    def armed(fn):
        def call(*a, **kw):
            if calls[0] == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)
            calls[0] += 1
            return fn(*a, **kw)
        return call
    for name in ("fsync", "replace", "rename", "unlink"):
        setattr(os, name, armed(getattr(os, name)))
    root = Path(sys.argv[1])
    store = Store(root, root / "curriculum.duckdb")
    compact_finished(store)
    store.refresh_catalog(artifacts(root))
    sweep(store)
    print(calls[0])
    """
)


def child(root: Path, kill_at: int) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", CHILD, str(root), str(kill_at), str(ROOT / "benchmarks")],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
    )  # fmt: skip


def land_again(store: Store) -> None:
    """What the child does, unarmed, in this process: a rerun after a kill."""
    compact_finished(store)
    store.refresh_catalog(artifacts(store.root))
    sweep(store)


@pytest.mark.crash  # a tier of its own: not in make check (tests/conftest.py)
def test_sigkill_at_any_point_of_compaction_loses_and_doubles_nothing(
    history, tmp_path, monkeypatch
):
    monkeypatch.setattr(reviews, "GRACE", dt.timedelta(0))  # as the child: held files go at once
    # the durable steps of an uninterrupted landing, counted as the child counts them
    dry, calls = copy_of(history, tmp_path / "dry"), [0]
    with monkeypatch.context() as m:
        for name in ("fsync", "replace", "rename", "unlink"):
            fn = getattr(os, name)
            m.setattr(os, name, lambda *a, _fn=fn, **kw: calls.__setitem__(0, calls[0] + 1)
                      or _fn(*a, **kw))  # fmt: skip
        land_again(dry)
    total = calls[0]
    assert total > 20  # files written, renamed and synced, a manifest line, a catalog, deletes
    with connect_readonly(history / "curriculum.duckdb") as con:
        expected = sorted(con.execute("SELECT record_id FROM curriculum").fetchall())
        want_reviews = sorted(con.execute("SELECT review_id FROM reviews").fetchall())
    assert len(want_reviews) == 12
    # the first two calls fold the reviews (fsync, rename), the last ones sweep the reviews
    points = sorted({0, 1, total // 3, 2 * total // 3, total - 2, total - 1})
    for k in points:
        store = copy_of(history, tmp_path / f"kill-{k}")
        p = child(store.root, k)
        assert p.returncode == -signal.SIGKILL, (k, p.returncode, p.stderr[-500:])
        # readable as left: refresh over what the manifests name, every record once
        store.refresh_catalog(artifacts(store.root))
        with connect_readonly(store.catalog_path) as con:
            got = sorted(con.execute("SELECT record_id FROM curriculum").fetchall())
            facts = con.execute("SELECT count(*) FROM record_facts").fetchall()
            got_reviews = sorted(con.execute("SELECT review_id FROM reviews").fetchall())
        assert got == expected, k
        assert facts == [(len(expected),)], k
        assert got_reviews == want_reviews, k
        assert review_ids(store.root) == [r for (r,) in want_reviews], k
        # and a rerun finishes: every run compacted, nothing replaced left on disk
        land_again(store)
        for r in range(NIGHTS):
            assert set(store.manifest(run_name(r))) == {COMPACTED}, k
        listed = {str(store.root / f["path"]) for r in range(NIGHTS)
                  for e in store.manifest(run_name(r)).values() for f in e["files"]}  # fmt: skip
        on_disk = {str(p) for p in store.root.rglob("shards/**/*.parquet")}
        assert on_disk == listed, k
        left = [p.name[:10] for p in store.root.glob("reviews/*") if p.name != ".compaction.lock"]
        assert left == ["compacted-"], k  # no leftover of a killed write either
        with connect_readonly(store.catalog_path) as con:
            assert sorted(con.execute("SELECT record_id FROM curriculum").fetchall()) == expected
            assert sorted(con.execute("SELECT review_id FROM reviews").fetchall()) == want_reviews
        shutil.rmtree(store.root)


@pytest.mark.parametrize("compacted", [False, True])
def test_a_run_report_read_over_its_own_files_has_the_whole_catalogs_figures(
    history, tmp_path, compacted
):
    """The report and a one-run audit scope the per-run base views to the run's files
    (scope_to_runs): every figure the report collects and every audit's rows equal those read
    over every run's files, duplicates across runs and quality tables included."""
    import dataclasses

    from pipeline.catalog.report_data import collect_run_data
    from pipeline.store.store import scope_to_runs

    store = copy_of(history, tmp_path / "out")
    # the last night asks an accepted record of the first night again: that record loses
    [picked] = ask_again(
        store,
        "SELECT record_id FROM accepted WHERE run_id = ? ORDER BY record_id LIMIT 1",
        [run_name(0)],
    )
    rid = picked["record_id"]
    if compacted:
        compact_run(store, run_name(0))  # one run compacted, the others live: both kinds
    store.refresh_catalog(artifacts(store.root))
    with connect_readonly(store.catalog_path) as con:
        dup = con.execute("SELECT duplicate_of FROM record_duplicates WHERE record_id = ?", [rid])
        assert dup.fetchall() == [("again0",)]  # a duplicate across runs, to get right
        whole = {r: collect_run_data(con, run_name(r), 3) for r in range(NIGHTS)}
        audited = {r: audit_rows(con, run_name(r)) for r in range(NIGHTS)}
    reviewed = "SELECT run_id, count(*) FROM reviews GROUP BY ALL ORDER BY ALL"
    with connect_readonly(store.catalog_path) as con:
        every = con.execute(reviewed).fetchall()
    assert len(every) > 1  # reviews of several runs: a scope narrows them to its run's
    for r in range(NIGHTS):
        with connect_readonly(store.catalog_path) as con:
            scope_to_runs(con, [run_name(r)])
            assert con.execute("SELECT DISTINCT run_id FROM curriculum").fetchall() == [
                (run_name(r),)
            ]
            assert con.execute(reviewed).fetchall() == [x for x in every if x[0] == run_name(r)]
            scoped = collect_run_data(con, run_name(r), 3)
            # as the compaction test compares audits: a mean rounded to 3 places at x.xxx5
            # falls either way with the order rows are summed in
            assert same(audit_rows(con, run_name(r)), audited[r]), r
        a, b = dataclasses.asdict(scoped), dataclasses.asdict(whole[r])
        assert {k: repr(rounded(v)) for k, v in a.items()} == {
            k: repr(rounded(v)) for k, v in b.items()
        }, r
    # a scope narrows the reviews the connection listed when it opened, never lists them
    # again: a review written meanwhile changes no query on it (an export's batches, each on
    # a connection of its own, share its first one's listing: test_export_stream)
    with connect_readonly(store.catalog_path) as con:
        review(store.root, [(rid, run_name(0))], reject=True)
        scope_to_runs(con, [run_name(0)])
        assert con.execute(reviewed).fetchall() == [x for x in every if x[0] == run_name(0)]
        scope_to_runs(con, None)
        assert con.execute(reviewed).fetchall() == every


def test_the_duplicate_index_ranks_as_every_file_does_and_follows_the_store(history, tmp_path):
    """The refresh ranks duplicates from the store's index of the compacted runs' keys
    (pipeline/store/run_index.py): the same rows as the catalog's own duplicate_keys view
    over every record_facts file, with compacted and live runs, once a run is compacted, and
    after the index was corrupted; a hard-linked snapshot of the index is never changed."""
    import os

    from pipeline.core.io import sha256_file
    from pipeline.store.run_index import DUPLICATE_KEYS

    store = copy_of(history, tmp_path / "out")
    index, last = store.root / DUPLICATE_KEYS.path, run_name(NIGHTS - 1)
    rows = ask_again(  # two accepted records of each earlier night
        store,
        "SELECT record_id FROM accepted WHERE run_id <> ? QUALIFY row_number() OVER "
        "(PARTITION BY run_id ORDER BY record_id) <= 2",
        [last],
    )
    for r in range(NIGHTS - 1):
        compact_run(store, run_name(r))

    def ranked() -> list[tuple]:
        store.refresh_catalog(artifacts(store.root))
        with connect_readonly(store.catalog_path) as con:  # without the index: every file
            every_file = con.execute("SELECT * FROM record_duplicate_ranking").fetchall()
            got = con.execute("SELECT * FROM record_duplicates").fetchall()
        assert sorted(got) == sorted(every_file)
        return sorted(got)

    def indexed() -> tuple[set[str], int]:
        with duckdb.connect(str(index), read_only=True) as con:
            runs = {r for (r,) in con.execute("SELECT run_id FROM files").fetchall()}
            ((n,),) = con.execute("SELECT count(*) FROM keys").fetchall()
        return runs, n

    def own_passing(runs: set[str]) -> int:
        with connect_readonly(store.catalog_path) as con:
            return con.execute(
                "SELECT count(*) FROM record_facts WHERE list_contains(?, run_id) "
                "AND before_quality IS NULL AND gate_rejected_by IS NULL",
                [sorted(runs)],
            ).fetchall()[0][0]

    got = ranked()
    assert {(r["record_id"], f"again{i}") for i, r in enumerate(rows)} <= {
        (rid, of) for rid, _, of, _ in got
    }
    compacted = {run_name(r) for r in range(NIGHTS - 1)}
    assert indexed() == (compacted, own_passing(compacted))

    os.link(index, tmp_path / "snapshot.duckdb")  # a snapshot of the store by hard links
    snapshot = sha256_file(tmp_path / "snapshot.duckdb")
    compact_run(store, last)
    assert ranked() == got
    every = compacted | {last}
    assert indexed() == (every, own_passing(every))
    assert sha256_file(tmp_path / "snapshot.duckdb") == snapshot

    index.write_bytes(b"not a DuckDB file\n" * 1000)
    assert ranked() == got and indexed() == (every, own_passing(every))


def test_per_run_results_are_the_views_over_every_file_and_follow_the_store(
    history, tmp_path, caplog, monkeypatch
):
    """The audits' per-run tables (run_results.*, pipeline/store/run_results.py) hold the rows
    of their views over every file after each change of the store, and a refresh computes only
    the runs whose inputs changed: none when nothing did; an old run whose record a new night
    demotes (its files unchanged); a run a benchmark check flagged; a run whose near-duplicate
    rows changed, in number or only in content; none for the quality file
    of a run no longer in the catalog; a compacted run; all of them after the index was
    corrupted; and the views over every file where the index cannot be written. Two runs a
    batch, so a build takes two."""
    import datetime as dt
    import logging

    import pyarrow as pa

    from pipeline.core.io import write_parquet_atomic
    from pipeline.store import run_results
    from pipeline.store.run_results import PATH, VIEWS
    from schemas.tables import schema_for

    monkeypatch.setattr(run_results, "BATCH_RUNS", 2)
    store = copy_of(history, tmp_path / "out")
    first, last = run_name(0), run_name(NIGHTS - 1)
    every = {run_name(r) for r in range(NIGHTS)}

    def refreshed() -> tuple[set[str], dict]:
        """(runs computed by the refresh, each run's funnel row)."""
        caplog.clear()
        with caplog.at_level(logging.DEBUG, logger="pipeline.store.run_results"):
            store.refresh_catalog(artifacts(store.root))
        computed = {run for r in caplog.records for run in getattr(r, "computed", ())}
        with connect_readonly(store.catalog_path) as con:
            for view in VIEWS:
                kept = con.execute(f"SELECT * FROM run_results.{view}").fetchall()
                live = con.execute(f"SELECT * FROM {view}").fetchall()
                assert kept, view
                assert same(keyed(kept), keyed(live)), view
            funnel = con.execute("SELECT run_id, accepted FROM run_results.funnel").fetchall()
        return computed, dict(funnel)

    (store.root / PATH).unlink()
    computed, funnel = refreshed()
    assert computed == every
    assert refreshed() == (set(), funnel)  # nothing changed: nothing computed

    # the last night asks two of the first night's accepted questions again
    ask_again(
        store, "SELECT record_id FROM accepted WHERE run_id = ? ORDER BY record_id LIMIT 2", [first]
    )
    computed, demoted = refreshed()
    assert computed == {first, last}
    assert demoted[first] == funnel[first] - 2 and demoted[last] == funnel[last] + 2

    # a benchmark check flags one record of the second night
    second = run_name(1)
    with connect_readonly(store.catalog_path) as con:
        ((rid,),) = con.execute(
            "SELECT record_id FROM accepted WHERE run_id = ? AND record_id NOT IN "
            "(SELECT duplicate_of FROM record_duplicates) ORDER BY record_id LIMIT 1",
            [second],
        ).fetchall()
    match = {"record_id": rid, "run_id": second, "benchmark": "nq", "item_id": "1",
             "method": "exact", "score": 1.0, "benchmark_question": "q",
             "checked_at": dt.datetime(2025, 2, 1, tzinfo=dt.UTC)}  # fmt: skip
    matches = schema_for("benchmark_matches")
    write_parquet_atomic(
        store.quality_path("benchmark_matches", second), pa.Table.from_pylist([match], matches)
    )
    computed, flagged = refreshed()
    assert computed == {second} and flagged[second] == demoted[second] - 1
    # a near-duplicate check pairs two of the second night's records; a later check changes
    # only the pair's score: as many rows, other content (a digest of the rows, not a count)
    with connect_readonly(store.catalog_path) as con:
        a, b = (r for (r,) in con.execute(
            "SELECT record_id FROM curriculum WHERE run_id = ? ORDER BY record_id LIMIT 2",
            [second]).fetchall())  # fmt: skip
    pair = store.quality_path("question_duplicates", "catalog")
    for score in (0.9, 0.95):
        rows = [{"record_id": x, "run_id": second, "cluster_id": a, "cluster_size": 2,
                 "nearest_record_id": y, "method": "minhash", "score": score,
                 "computed_at": match["checked_at"]} for x, y in ((a, b), (b, a))]  # fmt: skip
        write_parquet_atomic(pair, pa.Table.from_pylist(rows, schema_for("question_duplicates")))
        computed, _ = refreshed()
        assert computed == {second}, score
    pair.unlink()
    assert refreshed() == ({second}, flagged)
    gone = match | {"record_id": "gone", "run_id": "pruned"}  # a prune leaves quality files
    write_parquet_atomic(
        store.quality_path("benchmark_matches", "pruned"), pa.Table.from_pylist([gone], matches)
    )
    assert refreshed() == (set(), flagged)

    compact_run(store, first)
    assert refreshed() == ({first}, flagged)
    (store.root / PATH).write_bytes(b"not a DuckDB file\n" * 1000)
    assert refreshed() == (every, flagged)
    (store.root / PATH).unlink()
    (store.root / PATH).mkdir()  # cannot be an index: every run from every file
    assert refreshed() == (set(), flagged)


def test_the_evidence_index_checks_as_every_file_does_and_follows_the_corpus(history, tmp_path):
    """The refresh keeps the evidence check's results from the store's index of the compacted
    runs (pipeline/store/run_index.py): the same rows as the macros over every file, with a
    bad span in a compacted and in a live run; after a passage of the corpus changed (the
    index is rebuilt: the changed passage's records now differ); once the last run is
    compacted; and after a compacted file was rewritten by hand."""
    import pyarrow.parquet as pq

    from pipeline.core.contracts import read_shard
    from pipeline.core.io import write_parquet_atomic
    from pipeline.store.run_index import EVIDENCE
    from schemas.tables import schema_for

    store = copy_of(history, tmp_path / "out")
    index, first, last = store.root / EVIDENCE.path, run_name(0), run_name(NIGHTS - 1)
    cols = ", ".join(f.name for f in schema_for("curriculum"))
    bad = {}
    for run in (first, last):  # a verbatim record again under a new id, its span changed
        with connect_readonly(store.catalog_path) as con:
            ((day,),) = con.execute("SELECT run_date FROM runs WHERE run_id = ?", [run]).fetchall()
            row = (
                con.sql(
                    f"SELECT {cols} FROM curriculum WHERE run_id = ? AND is_verbatim "
                    "ORDER BY record_id LIMIT 1",
                    params=[run],
                )
                .to_arrow_table()
                .to_pylist()[0]
            )
        bad[run] = row | {"record_id": f"bad-{run}", "evidence": row["evidence"] + " (sic)"}
        store.commit(run, "bad", [store.write_shard("curriculum", run, day, "bad", [bad[run]])])
    for r in range(NIGHTS - 1):
        compact_run(store, run_name(r))

    def checked() -> tuple[list[tuple], list[tuple]]:
        """The catalog's evidence tables, checked against the macros over every file."""
        store.refresh_catalog(artifacts(store.root))
        got = []
        with connect_readonly(store.catalog_path) as con:
            for table in ("evidence_counts", "evidence_mismatches"):
                every = con.execute(f"SELECT * FROM {table}_of('evidence_check')").fetchall()
                kept = con.execute(f"SELECT * FROM {table}").fetchall()
                assert sorted(kept) == sorted(every), table
                got.append(sorted(kept))
        return got[0], got[1]

    def indexed() -> tuple[set[str], set[str]]:
        with duckdb.connect(str(index), read_only=True) as con:
            files = {r for (r,) in con.execute("SELECT run_id FROM files").fetchall()}
            counted = {r for (r,) in con.execute("SELECT run_id FROM counts").fetchall()}
        return files, counted

    counts, mismatches = checked()
    assert {(r[0], r[5]) for r in mismatches} == {(f"bad-{run}", "span_differs") for run in bad}
    assert {r[0]: r[3] for r in counts} == {run_name(r): int(run_name(r) in bad)
                                            for r in range(NIGHTS)}  # fmt: skip
    compacted = {run_name(r) for r in range(NIGHTS - 1)}
    assert indexed() == (compacted, compacted)

    # the corpus changes: one passage's text, that a good record of the first run cites
    path = store.root / "index/passages.parquet"
    passages = read_shard(path, "passages").to_pylist()
    with connect_readonly(store.catalog_path) as con:
        ((pid, n),) = con.execute(
            "SELECT evidence_passage_id, count(*) FROM evidence_check WHERE run_id = ? "
            "AND evidence_matches GROUP BY ALL ORDER BY ALL LIMIT 1",
            [first],
        ).fetchall()
    for p in passages:
        if p["id"] == pid:
            p["text"] = p["text"].upper().swapcase()[::-1]
    write_parquet_atomic(path, pq.read_table(path).from_pylist(passages, pq.read_schema(path)))
    _, after = checked()
    changed = {r[0] for r in after if r[2] == pid and r[5] == "span_differs"}
    assert len(changed) >= n >= 1 and len(after) >= len(mismatches) + n

    compact_run(store, last)
    assert checked()[1] == after and indexed() == (compacted | {last},) * 2

    # a compacted file rewritten by hand (same name): read again, not trusted
    with connect_readonly(store.catalog_path) as con:
        [(shard,)] = con.execute(
            "SELECT path FROM catalog_files WHERE view = 'curriculum' AND run_id = ?", [first]
        ).fetchall()
    rows = [r for r in read_shard(shard, "curriculum").to_pylist()
            if r["record_id"] != f"bad-{first}"]  # fmt: skip
    write_parquet_atomic(Path(shard), pq.read_table(shard).from_pylist(rows, pq.read_schema(shard)))
    final = checked()[1]
    assert f"bad-{first}" not in {r[0] for r in final}

    # where the indexes cannot be written (here `cache` is a file), every file is read
    shutil.rmtree(store.root / "cache")
    (store.root / "cache").write_text("not a folder\n")
    assert checked()[1] == final


def test_views_sql_is_bound_once_per_store_and_reads_as_if_bound_in_place(
    history, tmp_path, caplog, monkeypatch
):
    """A refresh starts from the store's copy of views.sql bound over empty base views
    (cache/catalog_views-<key>.duckdb, pipeline/store/catalog_views.py): every view of its
    catalog reads what the catalog of a store whose cache cannot be written reads (views.sql
    bound in place, over the files), and a new views.sql replaces the store's copy."""
    import logging

    from pipeline.store import store as store_module

    templated = copy_of(history, tmp_path / "templated")
    in_place = copy_of(history, tmp_path / "in_place")
    shutil.rmtree(in_place.root / "cache")
    (in_place.root / "cache").write_text("not a folder\n")
    with caplog.at_level(logging.WARNING, logger="pipeline.store.catalog_views"):
        for store in (templated, in_place):
            store.refresh_catalog(artifacts(store.root))
    assert caplog.text.count("catalog template") == 1  # the store without a cache
    (template,) = (templated.root / "cache").glob("catalog_views-*.duckdb")
    views_of = "SELECT view_name FROM duckdb_views() WHERE NOT internal ORDER BY 1"
    with (
        connect_readonly(templated.catalog_path) as a,
        connect_readonly(in_place.catalog_path) as b,
    ):
        views = [v for (v,) in a.execute(views_of).fetchall()]
        assert views == [v for (v,) in b.execute(views_of).fetchall()] and len(views) > 40
        for view in views:  # the columns each binds to, and the rows it reads
            for query in (f"DESCRIBE {view}", f"SELECT count(*) FROM {view}"):
                assert a.execute(query).fetchall() == b.execute(query).fetchall(), query
        assert a.execute("SELECT count(*) FROM accepted").fetchone()[0] > 0

    sql = store_module.views_sql() + "\n-- a new version\n"
    monkeypatch.setattr(store_module, "views_sql", lambda: sql)
    templated.refresh_catalog(artifacts(templated.root))
    (replaced,) = (templated.root / "cache").glob("catalog_views-*.duckdb")
    assert replaced != template


def test_an_index_knows_a_file_by_one_name_however_the_refresh_names_it(tmp_path, monkeypatch):
    """The evidence index keys the corpus by file_identity: named relative to the working
    directory, absolute, or through a link to the store, a file is one identity (else a
    nightly given relative paths rechecks every run); a file outside the store keeps its
    absolute path, and a changed file is a new identity."""
    from pipeline.store.run_index import file_identity

    root = tmp_path / "store"
    (root / "index").mkdir(parents=True)
    corpus = root / "index/passages.parquet"
    corpus.write_bytes(b"passages\n")
    (tmp_path / "link").symlink_to(root)
    monkeypatch.chdir(tmp_path)
    names = [
        (corpus, root),
        (Path("store/index/passages.parquet"), root),
        (corpus, Path("store")),
        (Path("link/index/passages.parquet"), root),
        (corpus, tmp_path / "link"),
    ]
    ids = {file_identity(p, r) for p, r in names}
    assert len(ids) == 1 and next(iter(ids))[0] == "index/passages.parquet", ids
    outside = tmp_path / "corpus.parquet"
    outside.write_bytes(b"elsewhere\n")
    assert file_identity(Path("corpus.parquet"), root)[0] == outside.resolve().as_posix()
    corpus.write_bytes(b"passages, changed\n")
    assert file_identity(corpus, root) not in ids


def test_the_browser_lists_and_shows_a_record_whose_proposal_did_not_parse(history, tmp_path):
    """A record the proposer never posed has no question, answer or evidence: its run's
    records page and its own page still answer, saying so."""
    from fastapi.testclient import TestClient

    from pipeline.browse.app import create_browse_app

    store = copy_of(history, tmp_path / "out")
    with connect_readonly(store.catalog_path) as con:
        rid, why = con.execute(
            "SELECT record_id, rejected_by FROM record_index WHERE question IS NULL "
            "ORDER BY record_id LIMIT 1"
        ).fetchone()
    client = TestClient(create_browse_app(store.catalog_path), base_url="http://127.0.0.1")
    page = client.get("/records", params={"rejected_by": why, "sort": "time"})
    assert page.status_code == 200, page.text
    assert "the proposal did not parse" in page.text
    record = client.get(f"/records/{rid}")
    assert record.status_code == 200, record.text
    assert "the proposal did not parse" in record.text


def test_the_browser_follows_a_rebuilt_catalog_with_an_index_of_its_own(history, tmp_path):
    """DuckDB hands a second connect() to an open file its cached instance; the browser must
    still read the catalog a landing renamed into place, and index it once per refresh."""
    from pipeline.browse.catalog_reader import CatalogReader, index_path

    store = copy_of(history, tmp_path / "out")
    reader = CatalogReader(store.catalog_path)
    before = reader.cursor()
    assert before.execute("SELECT count(*) FROM record_index").fetchall() == [(NIGHTS * RECORDS,)]
    c = Corpus(np.random.default_rng(5), 400)
    write_night(store, c, NIGHTS, RECORDS, SHARD, 5)  # another night lands
    compact_finished(store)
    store.refresh_catalog(artifacts(store.root))
    after = reader.cursor()
    runs = "SELECT count(DISTINCT run_id) FROM record_index"
    assert after.execute(runs).fetchall() == [(NIGHTS + 1,)]
    assert before.execute(runs).fetchall() == [(NIGHTS,)]  # a request in flight reads on
    ((at,),) = after.execute("SELECT refreshed_at FROM catalog_info").fetchall()
    index = index_path(store.catalog_path, at)
    with duckdb.connect(str(index), read_only=True) as con:
        assert con.execute("SELECT refreshed_at FROM index_info").fetchall() == [(at,)]
    # one index file per refresh: the first refresh's is gone from the directory (a request
    # still reading it reads on), so a connection never attaches a path another has attached
    assert sorted(store.root.glob("curriculum.duckdb.browse.*")) == [index]
    # the index is the browser's view of the catalog's record_index, row for row
    with connect_readonly(store.catalog_path) as con:
        want = con.execute("SELECT * FROM record_index ORDER BY record_id").fetchall()
    assert after.execute("SELECT * FROM record_index ORDER BY record_id").fetchall() == want


def covered(path: Path) -> list[str]:
    """The names of the review files the compacted file `path` holds."""
    return holdings([path])[path]


def review_ids(root: Path) -> list[str]:
    """Every review row of the live review files, as every reader lists them."""
    files = [str(p) for p in review_files(root)]
    with duckdb.connect() as con:
        rows = con.execute("SELECT review_id FROM read_parquet(?)", [files]).fetchall()
    return sorted(r for (r,) in rows)


def test_reviews_fold_into_compacted_files_that_hold_each_review_once(tmp_path):
    """A file a submission: landing folds them, a sealed compacted file is not rewritten, a
    compaction that folds a compacted file holds what it held, and the held files go only
    once a refresh listed the compacted one."""
    root = tmp_path / "out"
    for i in range(3):  # submissions of 1, 2 and 3 reviews
        review(root, [(f"rec{i}-{j}", "night-0") for j in range(i + 1)], reject=False)
    written = review_ids(root)
    assert len(written) == 6
    (first,) = compact_reviews(root, sealed_rows=10)
    assert review_files(root) == [first] and review_ids(root) == written
    assert len(covered(first)) == 3
    for i in (3, 4):
        review(root, [(f"rec{i}-{j}", "night-1") for j in range(i + 1)], reject=True)
    written = review_ids(root)
    # at 6 rows the first is sealed: only the two new submissions are folded
    (second,) = compact_reviews(root, sealed_rows=6)
    assert review_files(root) == [first, second] and review_ids(root) == written
    assert compact_reviews(root, sealed_rows=6) == []  # nothing left to fold
    # unsealed, both fold into one that names every file either held
    refreshed = dt.datetime.now(dt.UTC)  # a catalog refresh between the second and the third
    (third,) = compact_reviews(root)
    assert review_files(root) == [third] and review_ids(root) == written
    on_disk = sorted(p.name for p in (root / "reviews").glob("*.parquet"))
    assert sorted(covered(third)) == sorted(set(on_disk) - {third.name})
    assert sweep_reviews(root, None) == []  # no refresh since: the catalog lists them
    now, zero = dt.datetime.now(dt.UTC), dt.timedelta(0)
    assert sweep_reviews(root, now) == []  # folded less than GRACE ago: earlier readers
    # that refresh listed the first two compacted files: what they hold goes, they stay
    swept = sweep_reviews(root, refreshed, zero)
    assert sorted(p.name for p in swept) == sorted(covered(first) + covered(second))
    assert review_ids(root) == written
    swept = sweep_reviews(root, dt.datetime.now(dt.UTC), zero)
    assert sorted(p.name for p in swept) == [first.name, second.name]
    assert sorted((root / "reviews").glob("*.parquet")) == [third]
    assert review_ids(root) == written
    # a reader that listed them before that sweep: what they held, the third holds
    assert holdings([first, second, third]) == {third: covered(third)}
    # many files fold into files of about sealed_rows each, never all at once
    for i in range(5):
        review(root, [(f"one{i}", "night-2")], reject=False)
    written = review_ids(root)
    folded = compact_reviews(root, sealed_rows=2)  # 2 + 2 rows, and one file left as it is
    assert [len(covered(p)) for p in folded] == [2, 2] and len(review_files(root)) == 4
    assert review_ids(root) == written
    # a fold names what its files hold only while it is on disk: the third's swept files not
    (last,) = compact_reviews(root)
    on_disk = {p.name for p in (root / "reviews").glob("*.parquet")}
    assert set(covered(last)) == on_disk - {last.name} and review_ids(root) == written
    # a compacted file that does not say what it holds is moved aside, named, and so is one
    # that is no Parquet file; the reviews read are the same
    live = review_files(root)
    bare = third.with_name("compacted-20260101T000000000000-y.parquet")
    pq.write_table(pq.read_table(third).replace_schema_metadata({}), bare)
    assert review_files(root) == live and not bare.exists()
    aside = root / "reviews" / ".quarantine"
    assert sorted(p.name for p in aside.iterdir()) == [bare.name]
    bare.write_bytes(b"PAR1")
    assert review_files(root) == live and len(list(aside.iterdir())) == 2


def test_a_reader_that_listed_the_review_files_before_a_landing_reads_them_after(history, tmp_path):
    """Landing folds the review files, and its sweep deletes what the fold held only a GRACE
    later: a connection that listed them before (an export's batches, a `curriculum sql`
    session, the SQL worker) reads the same reviews after the landing, a new one reads them
    from the fold. (The landing's sweep is called as another process would: this one's open
    connection keeps the old catalog file open, and DuckDB would hand it to the sweep.)"""
    store = copy_of(history, tmp_path / "out")
    store.refresh_catalog(artifacts(store.root))  # the copy's own reviews, not the history's
    files = sorted(p.name for p in (store.root / "reviews").glob("*.parquet"))
    sql = "SELECT review_id, verdict FROM reviews ORDER BY review_id"
    with connect_readonly(store.catalog_path) as earlier:
        want = earlier.execute(sql).fetchall()
        assert len(want) == 12 and len(files) == 2
        (folded,) = compact_reviews(store.root)
        store.refresh_catalog(artifacts(store.root))
        assert sweep_reviews(store.root, dt.datetime.now(dt.UTC)) == []
        assert earlier.execute(sql).fetchall() == want
        with connect_readonly(store.catalog_path) as later:
            assert later.execute(sql).fetchall() == want
        assert review_files(store.root) == [folded] and sorted(covered(folded)) == files
        # a GRACE later they go, and a reader listed before the fold could not read them
        swept = sweep_reviews(store.root, dt.datetime.now(dt.UTC), dt.timedelta(0))
        assert sorted(p.name for p in swept) == files
        with pytest.raises(duckdb.IOException):
            earlier.execute(sql).fetchall()
    with connect_readonly(store.catalog_path) as later:
        assert later.execute(sql).fetchall() == want
