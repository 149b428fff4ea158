import datetime as dt

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.core.contracts import SchemaMismatchError, read_shard
from pipeline.store.store import Store
from schemas.tables import REJECTS, schema_for

DAY = dt.date(2026, 11, 21)


def reject_rows(run_id, n, reason="bad"):
    now = dt.datetime(2026, 11, 21, tzinfo=dt.UTC)
    return [
        {
            "run_id": run_id,
            "stage": "test",
            "source_file": "f",
            "source_line": i,
            "record_key": None,
            "reason": reason,
            "raw": None,
            "created_at": now,
        }
        for i in range(n)
    ]


def test_committed_shards_are_visible_and_uncommitted_are_not(tmp_path):
    store = Store(tmp_path / "out")
    f1 = store.write_shard("rejects", "r1", DAY, "00000", reject_rows("r1", 3))
    store.commit("r1", "00000", [f1])
    store.write_shard("rejects", "r1", DAY, "00001", reject_rows("r1", 5))  # crash before commit
    cat = store.refresh_catalog()
    con = duckdb.connect(str(cat), read_only=True)
    assert con.execute("SELECT count(*), min(run_date) FROM rejects").fetchone() == (3, DAY)
    assert con.execute("SELECT count(*) FROM curriculum").fetchone() == (0,)  # empty, typed
    assert store.completed_shards("r1") == {"00000"}
    entry = store.manifest("r1")["00000"]["files"][0]
    assert entry["rows"] == 3 and len(entry["sha256"]) == 64
    assert entry["path"].startswith("shards/rejects/run_date=2026-11-21/run_id=r1/")


def test_rewriting_a_shard_does_not_duplicate(tmp_path):
    store = Store(tmp_path / "out")
    for _ in range(2):  # the same shard committed twice (a resumed run redoing it)
        f = store.write_shard("rejects", "r1", DAY, "00000", reject_rows("r1", 4))
        store.commit("r1", "00000", [f])
    cat = store.refresh_catalog()
    assert duckdb.connect(str(cat)).execute("SELECT count(*) FROM rejects").fetchone() == (4,)


def test_a_store_reads_a_manifest_again_once_another_process_changed_it(tmp_path):
    """A Store parses a manifest once while it is unchanged; a commit by another writer (a
    resumed run, a compaction) is seen at the next read."""
    writer, reader = Store(tmp_path / "out"), Store(tmp_path / "out")
    writer.commit(
        "r1", "00000", [writer.write_shard("rejects", "r1", DAY, "00000", reject_rows("r1", 2))]
    )
    assert set(reader.manifest("r1")) == {"00000"}
    writer.commit(
        "r1", "00001", [writer.write_shard("rejects", "r1", DAY, "00001", reject_rows("r1", 1))]
    )
    assert set(reader.manifest("r1")) == {"00000", "00001"}
    (writer.run_dir("r1") / "manifest.jsonl").unlink()
    assert reader.manifest("r1") == {}


def test_torn_manifest_line_and_changed_file(tmp_path):
    store = Store(tmp_path / "out")
    f = store.write_shard("rejects", "r1", DAY, "00000", reject_rows("r1", 2))
    store.commit("r1", "00000", [f])
    with (store.run_dir("r1") / "manifest.jsonl").open("ab") as fh:
        fh.write(b'{"run_id": "r1", "shard": "000')  # crash mid-append
    assert set(store.manifest("r1")) == {"00000"}
    # the next commit after the torn line must still be readable
    f2 = store.write_shard("rejects", "r1", DAY, "00001", reject_rows("r1", 1))
    store.commit("r1", "00001", [f2])
    assert store.completed_shards("r1") == {"00000", "00001"}
    (tmp_path / "out" / f.path).write_bytes(b"corrupted")
    assert store.completed_shards("r1") == {"00001"}


def test_reader_rejects_schema_mismatch(tmp_path):
    bad = tmp_path / "bad.parquet"
    pq.write_table(pa.table({"run_id": ["r"], "stage": [1]}), bad)
    with pytest.raises(
        SchemaMismatchError,
        match=r"bad\.parquet.*'rejects'.*missing field 'reason'.*field 'stage' is int64",
    ):
        read_shard(bad, "rejects")
    good = tmp_path / "good.parquet"
    pq.write_table(pa.Table.from_pylist(reject_rows("r", 1), schema=REJECTS), good)
    assert read_shard(good, "rejects").num_rows == 1


def test_rows_missing_a_field_are_refused(tmp_path):
    store = Store(tmp_path / "out")
    rows = reject_rows("r1", 1)
    del rows[0]["reason"]
    with pytest.raises(SchemaMismatchError, match="reason"):
        store.write_shard("rejects", "r1", DAY, "00000", rows)


def test_artifact_under_key_value_directory_keeps_its_typed_columns(tmp_path):
    """Selector state lives under iteration=0001/; the catalog must not turn it into '0001'."""
    store = Store(tmp_path / "out")
    now = dt.datetime(2026, 11, 21, tzinfo=dt.UTC)
    paths = []
    for it in (1, 2):
        p = tmp_path / "state" / f"iteration={it:04d}" / "selector_state.parquet"
        p.parent.mkdir(parents=True)
        rows = [{"iteration": it, "bandit": "cluster", "arm": "0", "pulls": 1.0 + it,
                 "reward_sum": 0.0, "k": 10, "rng_state": None, "updated_at": now}]  # fmt: skip
        pq.write_table(pa.Table.from_pylist(rows, schema=schema_for("selector_state")), p)
        paths.append(p)
    cat = store.refresh_catalog({"selector_state": paths})
    con = duckdb.connect(str(cat), read_only=True)
    got = con.execute("SELECT iteration, pulls FROM selector_state ORDER BY 1").fetchall()
    assert got == [(1, 2.0), (2, 3.0)]
    assert con.execute("SELECT typeof(iteration) FROM selector_state LIMIT 1").fetchone() == (
        "INTEGER",
    )


def test_latest_run_is_the_one_started_last(tmp_path):
    store = Store(tmp_path / "out")
    assert store.latest_run_id() is None

    def run(run_id, hour):
        start = dt.datetime(2026, 11, 21, hour, tzinfo=dt.UTC)
        store.write_run(
            {"run_id": run_id, "run_date": DAY, "profile": "p", "config_hash": "h",
             "config_yaml": "", "started_at": start, "finished_at": None, "status": "running",
             "shards_planned": 1, "shards_completed": 0, "schema_version": "2.0.0"}
        )  # fmt: skip

    run("b-later", 5)
    run("a-earlier", 1)
    (store.root / "runs" / "no-record").mkdir()  # a run directory without run.parquet
    assert store.latest_run_id() == "b-later"  # by start time, not by name
    run("c-same-time", 5)
    assert store.latest_run_id() == "c-same-time"
