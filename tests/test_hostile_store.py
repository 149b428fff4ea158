"""Hostile input, round three: the store's own files are input. Each class on inputs the test
generates (Hypothesis) or a table of the probes that broke it, asserting what must hold: a
name read from a file never deletes, renames or reads outside the store; a copied store reads
and writes only itself; a bad review file is moved aside with one warning and every reader
carries on; an export never destroys what it did not make; every setting is bounded.

(The record browser's class: tests/test_hostile_browser.py.) The store is a small synthetic
history (benchmarks/synthetic_store.py through the real Store API, as tests/test_compaction.py
builds it): two compacted nights of 30 records, six reviews folded into a compacted file."""

from __future__ import annotations

import ast
import datetime as dt
import hashlib
import logging
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import duckdb
import numpy as np
import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from synthetic_store import Corpus, artifacts, review, write_artifacts, write_night  # noqa: E402

from cli.main import app  # noqa: E402
from pipeline.catalog.export import ExportError, export_curriculum  # noqa: E402
from pipeline.core.io import PathEscapeError, contained, remove_contained  # noqa: E402
from pipeline.store.compaction import compact_finished, sweep  # noqa: E402
from pipeline.store.reviews import (  # noqa: E402
    COVERS,
    REVIEWS_DIR,
    review_files,
    sweep_reviews,
)
from pipeline.store.store import ShardFile, Store, connect_readonly  # noqa: E402
from schemas.tables import REVIEW_REASONS, REVIEW_VERDICTS, schema_for  # noqa: E402

FAST = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
FAR = dt.datetime(2999, 1, 1, tzinfo=dt.UTC)
FUTURE = dt.timedelta(days=1)


def build(root: Path) -> Store:
    c = Corpus(np.random.default_rng(11), 200)
    store = Store(root, root / "curriculum.duckdb")
    write_artifacts(root, c)
    for r in range(2):
        write_night(store, c, r, 30, 15, 3)
    ids = duckdb.execute(
        "SELECT record_id, run_id FROM read_parquet(?) WHERE question IS NOT NULL "
        "ORDER BY md5(record_id) LIMIT 6",
        [str(root / "shards/curriculum/*/*/*.parquet")],
    ).fetchall()
    review(root, ids[:3], reject=False)
    review(root, ids[3:], reject=True)
    compact_finished(store)
    store.refresh_catalog(artifacts(root))
    sweep(store)
    return store


@pytest.fixture(scope="module")
def history(tmp_path_factory) -> Path:
    return build(tmp_path_factory.mktemp("history") / "out").root


def copy_of(history: Path, dest: Path) -> Store:
    """`cp -a`, as a backup or a colleague's copy is made."""
    subprocess.run(["cp", "-a", str(history), str(dest)], check=True)
    return Store(dest, dest / "curriculum.duckdb")


def invoke(*args: str):
    return CliRunner().invoke(app, list(args))


def sets(store: Store) -> list[str]:
    return ["--set", f"store.out_dir={store.root}", "--set", f"store.catalog={store.catalog_path}"]


def one_line_error(res, *names: str) -> str:
    errors = [ln for ln in res.output.splitlines() if ln.startswith("error:")]
    assert res.exit_code == 2, res.output[-2000:]
    assert len(errors) == 1, res.output[-2000:]
    assert all(n in errors[0] for n in names), errors[0]
    assert "Traceback" not in res.output
    return errors[0]


def snapshot(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.name.endswith(".lock")
    }


def review_count(store: Store) -> int:
    with connect_readonly(store.catalog_path) as con:
        return con.execute("SELECT count(*) FROM reviews").fetchone()[0]


def review_rows(n: int = 2, **over) -> pa.Table:
    """`n` review rows as write_reviews writes them, with `over` replacing columns."""
    now = dt.datetime(2026, 1, 2, tzinfo=dt.UTC)
    cols = {
        "review_id": [f"r{i}" for i in range(n)], "record_id": [f"rec{i}" for i in range(n)],
        "run_id": ["bench-000"] * n, "verdict": ["accept"] * n, "reason": [None] * n,
        "note": [None] * n, "reviewer": ["alice"] * n, "reviewed_at": [now] * n,
    } | over  # fmt: skip
    schema = pa.schema([f.with_nullable(True) for f in schema_for("reviews")])  # by hand
    return pa.table({f.name: pa.array(cols[f.name], f.type) for f in schema}, schema=schema)


# ---- 1. every path that comes from data is contained ------------------------------------------

hostile_names = st.one_of(
    st.text(max_size=30),
    st.lists(
        st.sampled_from(["..", ".", "a", "b", "", "out", "in", "\x00", "~", "/"]), max_size=6
    ).map("/".join),
    st.sampled_from(["../x", "/tmp/x", "a/../../x", "out/x", "out", "in/f", ".", "a/..", "//x"]),
)


def make_tree(tmp: Path) -> tuple[Path, Path]:
    """store/ with a folder a/, a file a/f, a link `out` to a folder outside it holding a
    file, a link `in` to a/; and that outside folder."""
    root, outside = tmp / "store", tmp / "outside"
    shutil.rmtree(tmp, ignore_errors=True)
    (root / "a").mkdir(parents=True)
    outside.mkdir()
    (root / "a" / "f").write_text("inside")
    (outside / "x").write_text("outside")
    (root / "out").symlink_to(outside)
    (root / "in").symlink_to(root / "a")
    return root, outside


@pytest.fixture
def tree(tmp_path) -> tuple[Path, Path]:
    return make_tree(tmp_path / "tree")


@given(hostile_names, st.booleans())
@example("../x", True)
@example("out/x", True)
@example("/tmp/x", False)
@FAST
def test_containment_names_something_inside_the_store_or_refuses(tree, name, follow):
    root, outside = tree
    try:
        path = contained(root, name, source="manifest.jsonl:3", follow=follow)
    except PathEscapeError as exc:
        msg = str(exc)
        assert msg.startswith("refusing to ") and "manifest.jsonl:3" in msg
        assert "\n" not in msg and msg.isascii()
        return
    real_root = Path(os.path.realpath(root))
    assert path != root and path.is_relative_to(root)  # lexically inside, never the root
    seen = Path(os.path.realpath(path if follow else path.parent))
    assert seen.is_relative_to(real_root)  # and no link on the way leads out
    assert not seen.is_relative_to(outside)


@given(hostile_names)
@example("../outside/x")
@example("out/x")
@FAST
def test_a_delete_of_a_name_from_data_never_touches_anything_outside(tmp_path, name):
    root, outside = make_tree(tmp_path / "tree")
    gone = remove_contained(root, name, source="held list")
    assert (outside / "x").read_text() == "outside" and outside.is_dir()
    if gone is not None:  # what it deleted: a file or link of the store itself
        assert gone.is_relative_to(root) and gone.parent.resolve().is_relative_to(root)


def compacted_review_naming(root: Path, held: list[str], stamp: str = "20000101T000000000000"):
    path = root / REVIEWS_DIR / f"compacted-{stamp}-abcdefabcdef.parquet"
    rows = review_rows()
    pq.write_table(rows.replace_schema_metadata({COVERS: orjson.dumps(held)}), path)
    return path


def test_a_review_file_naming_files_outside_the_store_deletes_nothing(history, tmp_path, caplog):
    """The fold's list of the files it holds is read from the file: the sweep (landing's,
    the quality commands', a prune's) deletes none of the names outside reviews/."""
    store = copy_of(history, tmp_path / "out")
    victims = [tmp_path / "victim.txt", store.root / "kept.txt", store.root / "runs" / "v.txt"]
    for v in victims:
        v.write_text("mine")
    held = ["../../victim.txt", str(tmp_path / "victim.txt"), "../kept.txt", "../runs/v.txt"]
    bad = compacted_review_naming(store.root, held)
    with caplog.at_level(logging.WARNING):
        sweep_reviews(store.root, FAR, dt.timedelta(0))  # as a landing's sweep, a day on
        compact_finished(store)
        store.refresh_catalog(artifacts(store.root))
        sweep(store)
    assert all(v.read_text() == "mine" for v in victims)
    assert not bad.exists() and (store.root / "reviews/.quarantine" / bad.name).exists()
    assert sum(bad.name in r.getMessage() for r in caplog.records) == 1  # one line names it
    assert review_count(store) == 6  # the other reviews are read


def append_line(store: Store, run_id: str, entry: dict) -> None:
    with (store.run_dir(run_id) / "manifest.jsonl").open("ab") as fh:
        fh.write(orjson.dumps(entry) + b"\n")


def outside_line(run_id: str, shard: str, paths: list[str], **extra) -> dict:
    files = [{"table": "curriculum", "path": p, "rows": 1, "sha256": "0" * 64, "bytes": 4}
             for p in paths]  # fmt: skip
    return {"run_id": run_id, "shard": shard, "schema_version": "1", "committed_at":
            "2000-01-01T00:00:00+00:00", "files": files, **extra}  # fmt: skip


@pytest.fixture
def landing_refresh(monkeypatch):
    """The CLI rebuilds the catalog as landing does; this store has no index or corpus to
    land from, so its refresh is the Store's over the same artifacts."""
    monkeypatch.setattr(
        "cli.runs._refresh", lambda cfg, store: store.refresh_catalog(artifacts(store.root))
    )


def test_a_manifest_naming_files_outside_the_store_makes_no_prune_or_sweep_delete_them(
    history, tmp_path, landing_refresh
):
    store = copy_of(history, tmp_path / "out")
    victims = [tmp_path / "victim.txt", tmp_path / "abs.txt"]
    for v in victims:
        v.write_text("mine")
    run_id = store.run_ids()[0]
    names = ["../victim.txt", str(tmp_path / "abs.txt"), "./../victim.txt", "shards/../../abs.txt"]
    # a group naming them, then a compaction line replacing it: the sweep's deletes
    append_line(store, run_id, outside_line(run_id, "00009", names))
    append_line(store, run_id, outside_line(run_id, "compacted", [], covers=["00009"]))
    sweep(store)
    assert all(v.read_text() == "mine" for v in victims)
    # a whole-run prune deletes every file its manifest names
    res = invoke("runs", "prune", "--before", "2999-01-01", "--apply", "--force", *sets(store))
    assert res.exit_code == 0, res.output
    assert run_id in res.output and run_id not in store.run_ids()
    assert all(v.read_text() == "mine" for v in victims)


def test_store_commit_refuses_names_outside_the_store(history, tmp_path):
    store = copy_of(history, tmp_path / "out")
    run_id = store.run_ids()[0]
    manifest = store.run_dir(run_id) / "manifest.jsonl"
    before = manifest.read_bytes()
    for path, covers in (("../../x.parquet", None), ("/tmp/x.parquet", None),
                         ("shards/../../x", None), ("shards/x.parquet", ["../x"])):  # fmt: skip
        with pytest.raises(PathEscapeError):
            store.commit(run_id, "00009", [ShardFile("curriculum", path, 1, "0" * 64, 4)], covers)
    assert manifest.read_bytes() == before


# ---- 2. a copied store is its own -------------------------------------------------------------


def test_a_copy_of_a_store_reads_and_writes_only_itself(history, tmp_path):
    from fastapi.testclient import TestClient

    from pipeline.browse.app import create_browse_app

    original = copy_of(history, tmp_path / "original")
    with connect_readonly(original.catalog_path) as con:
        a, b, c = con.execute(
            "SELECT record_id, run_id FROM curriculum_verdicts WHERE is_valid AND "
            "review_verdict IS NULL ORDER BY record_id LIMIT 3"
        ).fetchall()
    copy = copy_of(original.root, tmp_path / "copy")
    # from now on the original has a rejection the copy has not, and the copy an acceptance
    review(original.root, [a], reject=True)
    review(copy.root, [b], reject=False)
    before = snapshot(original.root)
    res = invoke("sql", "SELECT count(*) AS n FROM reviews", "--format", "csv", *sets(copy))
    assert res.exit_code == 0 and res.stdout.splitlines()[1:] == ["7"], res.output
    with connect_readonly(copy.catalog_path) as con:
        paths = [p for (p,) in con.execute("SELECT path FROM catalog_files").fetchall()]
        root = con.execute("SELECT store_root FROM catalog_info").fetchone()[0]
        verdicts = dict(con.execute("SELECT record_id, verdict FROM review_latest").fetchall())
    assert paths and all(Path(p).is_relative_to(copy.root) for p in paths)
    assert Path(root) == copy.root and verdicts[b[0]] == "accept" and a[0] not in verdicts
    out = export_curriculum(copy.catalog_path, tmp_path / "exp", where="is_valid")
    overall = out.manifest["reviews"]["overall"]
    assert (overall["accept"], overall["reject"]) == (4, 3)
    # the browser serves the copy, and writes a review into it
    client = TestClient(create_browse_app(copy.catalog_path), base_url="http://127.0.0.1")
    page = client.get(f"/records/{c[0]}")
    assert page.status_code == 200
    csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', page.text)[1]
    posted = client.post("/reviews", data={"csrf": csrf, "verdict": "accept", "record_id": c[0],
                         "reviewer": "bob"}, headers={"origin": "http://127.0.0.1"},
                         follow_redirects=False)  # fmt: skip
    assert posted.status_code == 303, posted.text
    with connect_readonly(copy.catalog_path) as con:
        assert con.execute("SELECT count(*) FROM reviews").fetchone()[0] == 8
    assert snapshot(original.root) == before  # nothing of the original changed, none written


# Root writes into a folder whatever its mode: for root the copy is a read-only bind mount
# of itself, in a mount namespace of the command's own.
READ_ONLY_MOUNT = 'mount --bind "$0" "$0" && mount -o remount,ro,bind "$0" && exec "$@"'


def test_a_read_only_copy_is_refused_rather_than_read_from_the_original(history, tmp_path):
    copy = copy_of(history, tmp_path / "copy")
    args = ["sql", "SELECT count(*) FROM reviews", *sets(copy)]
    os.chmod(copy.root, 0o555)
    try:
        if not os.access(copy.root, os.W_OK):
            res = invoke(*args)
        else:
            cmd = ["unshare", "-m", "sh", "-c", READ_ONLY_MOUNT, str(copy.root)]
            cmd += [sys.executable, "-m", "cli", *args]
            done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
            res = SimpleNamespace(exit_code=done.returncode, output=done.stdout + done.stderr)
        one_line_error(res, "was built for the store at", str(copy.root))
    finally:
        os.chmod(copy.root, 0o755)


# ---- 3. review files are validated input ------------------------------------------------------


def _write(rows: pa.Table):
    return lambda p: pq.write_table(rows, p)


TS_TYPE = pa.timestamp("us", tz="UTC")


def _null_times(p: Path) -> None:
    field = pa.field("reviewed_at", TS_TYPE)  # nullable, as a hand-made file may say
    pq.write_table(review_rows().set_column(7, field, pa.array([None, None], TS_TYPE)), p)


def _extra_column(p: Path) -> None:
    pq.write_table(review_rows().append_column("x", pa.array([1, 2])), p)


BAD_REVIEW_FILES = {
    "truncated": lambda p: p.write_bytes(_valid_bytes()[: len(_valid_bytes()) // 2]),
    "empty": lambda p: p.write_bytes(b""),
    "random bytes": lambda p: p.write_bytes(os.urandom(2048)),
    "a folder": lambda p: p.mkdir(),
    "another table": lambda p: pq.write_table(pa.table({"x": [1, 2]}), p),
    "an extra column": _extra_column,
    "verdict maybe": _write(review_rows(verdict=["maybe", "accept"])),
    "NULL time": _null_times,
    "from the future": _write(review_rows(reviewed_at=[FAR, FAR])),
    "a reject without a reason": _write(review_rows(verdict=["reject", "reject"])),
    "a link out of the store": lambda p: p.symlink_to(_outside_review()),
}


def _valid_bytes() -> bytes:
    import io

    buf = io.BytesIO()
    pq.write_table(review_rows(), buf)
    return buf.getvalue()


def _outside_review() -> Path:
    import tempfile

    path = Path(tempfile.mkdtemp(prefix="outside-")) / "r.parquet"
    pq.write_table(review_rows(), path)
    return path


@pytest.mark.parametrize("kind", list(BAD_REVIEW_FILES))
def test_a_bad_review_file_is_moved_aside_with_one_warning_naming_it(tmp_path, kind, caplog):
    root = tmp_path / "out"
    (root / REVIEWS_DIR).mkdir(parents=True)
    good = root / REVIEWS_DIR / "20260101T000000000000-aaaaaaaaaaaa.parquet"
    pq.write_table(review_rows(), good)
    bad = root / REVIEWS_DIR / "000-bad.parquet"
    BAD_REVIEW_FILES[kind](bad)
    with caplog.at_level(logging.WARNING):
        assert review_files(root) == [good]
        assert review_files(root) == [good]  # moved aside once: the next reader lists it not
    lines = [r.getMessage() for r in caplog.records if "000-bad.parquet" in r.getMessage()]
    assert len(lines) == 1 and "moved aside" in lines[0] and "\n" not in lines[0], lines
    aside = root / REVIEWS_DIR / ".quarantine" / bad.name
    assert (aside.exists() or aside.is_symlink()) and not (bad.exists() or bad.is_symlink())


def plant(root: Path) -> list[Path]:
    """Every kind of bad review file, named to sort first (`curriculum sql "SELECT 1"` failed
    on one)."""
    paths = []
    for i, make in enumerate(BAD_REVIEW_FILES.values()):
        path = root / REVIEWS_DIR / f"000-bad-{i:02d}.parquet"
        if not (path.exists() or path.is_symlink()):
            make(path)
        paths.append(path)
    return paths


def test_bad_review_files_leave_sql_exports_landing_and_the_browser_working(history, tmp_path):
    from fastapi.testclient import TestClient

    from pipeline.browse.app import create_browse_app

    store = copy_of(history, tmp_path / "out")
    review_count(store)
    bad = plant(store.root)
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "cli",
            "sql",
            "SELECT 1 AS one; SELECT count(*) AS n FROM reviews",
            "--format",
            "csv",
            *sets(store),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines()[-1] == "6", res.stdout
    for p in bad:  # one warning line each, naming it
        lines = [ln for ln in res.stderr.splitlines() if p.name in ln]
        assert len(lines) == 1 and "moved aside" in lines[0], (p.name, res.stderr[-2000:])
    assert not any(p.exists() or p.is_symlink() for p in bad)
    aside = store.root / REVIEWS_DIR / ".quarantine"
    assert len(list(aside.iterdir())) == len(bad)
    plant(store.root)
    exp = export_curriculum(store.catalog_path, tmp_path / "exp", where="is_valid")
    assert exp.manifest["reviews"]["overall"]["reject"] == 3
    plant(store.root)
    compact_finished(store)  # landing
    store.refresh_catalog(artifacts(store.root))
    sweep(store)
    assert review_count(store) == 6
    plant(store.root)
    client = TestClient(create_browse_app(store.catalog_path), base_url="http://127.0.0.1")
    assert client.get("/records", params={"review": "reject"}).status_code == 200
    assert not any(p.exists() or p.is_symlink() for p in bad)
    assert len(list(aside.iterdir())) == 4 * len(bad)


def test_review_files_removed_by_hand_after_a_refresh_are_tolerated(history, tmp_path):
    from fastapi.testclient import TestClient

    from pipeline.browse.app import create_browse_app

    store = copy_of(history, tmp_path / "out")
    review_count(store)
    for p in (store.root / REVIEWS_DIR).glob("*.parquet"):
        p.unlink()
    assert review_count(store) == 0
    client = TestClient(create_browse_app(store.catalog_path), base_url="http://127.0.0.1")
    assert client.get("/records").status_code == 200


texts = st.one_of(st.none(), st.text(max_size=30), st.sampled_from([*REVIEW_VERDICTS,
                                                                    *REVIEW_REASONS]))  # fmt: skip
times = st.one_of(
    st.none(),
    st.datetimes(dt.datetime(1970, 1, 1), dt.datetime(2200, 1, 1), timezones=st.just(dt.UTC)),
)


def oracle_valid(rows: list[dict]) -> bool:
    """What a review written by `Verdict` looks like, row by row."""
    now = dt.datetime.now(dt.UTC)
    for r in rows:  # (reviewed_at within a day of now: clocks disagree)
        if any(r[k] is None for k in ("review_id", "record_id", "run_id", "verdict",
                                     "reviewer", "reviewed_at")):  # fmt: skip
            return False
        if r["verdict"] not in REVIEW_VERDICTS:
            return False
        if (r["verdict"] == "reject") != (r["reason"] in REVIEW_REASONS):
            return False
        if r["verdict"] == "accept" and r["reason"] is not None:
            return False
        if not dt.datetime(2000, 1, 1, tzinfo=dt.UTC) <= r["reviewed_at"] <= now + FUTURE:
            return False
        if len(r["note"] or "") > 2000 or len(r["reviewer"]) > 100:
            return False
    return True


@given(
    st.lists(st.fixed_dictionaries({"verdict": texts, "reason": texts, "reviewer": texts,
                                    "note": texts, "reviewed_at": times}), min_size=1, max_size=4),
    st.one_of(st.none(), st.binary(max_size=300)),
)  # fmt: skip
@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_the_review_file_reader_lists_exactly_the_valid_files_and_never_raises(
    tmp_path_factory, rows, raw
):
    root = tmp_path_factory.mktemp("reviews")
    (root / REVIEWS_DIR).mkdir()
    good = root / REVIEWS_DIR / "20260101T000000000000-aaaaaaaaaaaa.parquet"
    pq.write_table(review_rows(), good)
    path = root / REVIEWS_DIR / "20250101T000000000000-bbbbbbbbbbbb.parquet"
    n = len(rows)
    full = [{"review_id": f"r{i}", "record_id": f"x{i}", "run_id": "bench-000", **r}
            for i, r in enumerate(rows)]  # fmt: skip
    if raw is None:
        cols = {k: [r[k] for r in full] for k in full[0]}
        pq.write_table(review_rows(n, **cols), path)
    else:
        path.write_bytes(raw)
    listed = review_files(root)
    valid = raw is None and oracle_valid(full)
    assert listed == ([path, good] if valid else [good])
    assert path.exists() == valid
    assert (root / REVIEWS_DIR / ".quarantine" / path.name).exists() == (not valid)


# ---- 5. exports never destroy what they did not make ------------------------------------------


@pytest.fixture(scope="module")
def exported(history, tmp_path_factory):
    store = copy_of(history, tmp_path_factory.mktemp("exp") / "out")
    out = store.root.parent / "export"
    export_curriculum(store.catalog_path, out, where="is_valid")
    return store, out


def test_overwrite_replaces_only_an_export_of_ours_holding_nothing_else(exported, tmp_path):
    store, first = exported
    out = tmp_path / "exp"
    shutil.copytree(first, out)
    (out / "my-notes.txt").write_text("mine")
    with pytest.raises(ExportError, match=r"holds files the export did not write: my-notes\.txt"):
        export_curriculum(store.catalog_path, out, where="is_valid", overwrite=True)
    assert (out / "my-notes.txt").read_text() == "mine"
    (out / "my-notes.txt").unlink()
    export_curriculum(store.catalog_path, out, where="is_valid", overwrite=True)  # ours: replaced
    other = tmp_path / "other"
    other.mkdir()
    (other / "manifest.json").write_text('{"files": []}')
    (other / "data.csv").write_text("mine")
    with pytest.raises(ExportError, match="not a curriculum export"):
        export_curriculum(store.catalog_path, other, where="is_valid", overwrite=True)
    assert (other / "data.csv").read_text() == "mine"


def test_an_export_inside_the_store_is_refused_but_under_its_exports_folder(exported):
    store, _ = exported
    before = snapshot(store.root)
    for inside in ("reviews/x", ".trash/runs/x", "runs/x", "shards", ".", "", "exports"):
        with pytest.raises(ExportError, match=r"inside the store|holds the store"):
            export_curriculum(store.catalog_path, store.root / inside, where="is_valid")
    assert snapshot(store.root) == before
    ok = store.root / "exports" / "ok"
    res = export_curriculum(store.catalog_path, ok, where="is_valid", overwrite=True)
    assert res.counts["exported"] > 0


def test_the_card_quotes_paths_for_the_shell_and_renders_record_text_as_text(exported, tmp_path):
    from pipeline.catalog.export_card import dataset_card

    store, _ = exported
    out = tmp_path / "exp dir;touch $(pwned)'q"
    res = export_curriculum(store.catalog_path, out, where="is_valid", formats=["verl", "hf"])
    card = (out / "README.md").read_text()
    bash = card.split("```bash\n", 1)[1].split("```", 1)[0]
    words = shlex.split(bash.replace("\\\n", " "))
    # The commands run from the export folder and name its files relatively: the folder's
    # hostile name reaches neither the shell nor the Python block.
    assert "data.train_files=verl/train.parquet" in words
    assert "reward.custom_reward_function.path=reward.py" in words
    python = card.split("```python\n", 1)[1].split("```", 1)[0]
    tree = ast.parse(python)
    strings = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)}
    assert "reward.py" in strings and "hf" in strings
    assert "pwned" not in card and str(tmp_path) not in card
    m = res.manifest
    m["runs"][0]["profile"] = "<img src=x onerror=alert(1)>|<script>x</script>"
    m["warnings"].append("run <b>bold</b> & <a href='javascript:alert(1)'>x</a>")
    card = dataset_card(m)
    assert "<img" not in card and "<script" not in card and "<b>" not in card
    assert "<a href" not in card and "&lt;img src=x onerror=alert(1)&gt;\\|" in card


BAD_ALPHAS = (".nan", ".inf", "-.inf", "2.5", "-1", "'x'", "[1]", "{a: 1}", "true")


def test_a_reward_setting_that_reward_py_cannot_carry_is_refused(history, tmp_path):
    from pipeline.catalog.export_reward import RewardSettingError, reward_settings

    cat = tmp_path / "runs.duckdb"
    with duckdb.connect(str(cat)) as con:
        con.execute("CREATE TABLE runs (run_id VARCHAR, config_yaml VARCHAR)")
        rows = [(f"r{i}", f"rewards:\n  wcr_alpha: {v}\n") for i, v in enumerate(BAD_ALPHAS)]
        con.executemany("INSERT INTO runs VALUES (?, ?)", [*rows, ("ok", "rewards: {}\n")])
    for i in range(len(BAD_ALPHAS)):
        with pytest.raises(RewardSettingError, match=rf"run r{i}: .*wcr_alpha is not a number"):
            reward_settings(cat, [f"r{i}"])
    assert reward_settings(cat, ["ok"]).alpha == 0.3
    # and the export refuses it before writing anything
    store = copy_of(history, tmp_path / "out")
    run_id = store.run_ids()[0]
    store.write_run({**store.read_run(run_id), "config_yaml": "rewards:\n  wcr_alpha: .nan\n"})
    store.refresh_catalog(artifacts(store.root))
    with pytest.raises(ExportError, match=rf"run {run_id}: .*wcr_alpha is not a number"):
        export_curriculum(store.catalog_path, tmp_path / "exp", where="is_valid")
    assert not (tmp_path / "exp").exists()


@pytest.mark.parametrize("where", ["42", "'yes'", "verifier_v", "1, 2"])
def test_export_where_must_be_a_boolean_expression(exported, tmp_path, where):
    store, _ = exported
    with pytest.raises(ExportError, match=r"not a boolean expression|filter"):
        export_curriculum(store.catalog_path, tmp_path / "exp", where=where)
    assert not (tmp_path / "exp").exists()


def test_export_seed_is_bounded(exported, tmp_path):
    store, _ = exported
    for seed in (2**70, -1, 2**63):
        res = invoke("export", str(tmp_path / "e"), "--where", "is_valid", "--seed", str(seed),
                     *sets(store))  # fmt: skip
        one_line_error(res, "--seed")
    assert not (tmp_path / "e").exists()


@pytest.mark.parametrize(
    "tag",
    [
        "<answer>",
        "</answer>",
        "<think>",
        "</think>",
        "<search>",
        "</search>",
        "<information>",
        "</information>",
        "</ANSWER >",
    ],
)
def test_an_answer_holding_the_rewards_own_tags_is_invalid_at_generation(tag):  # fmt: skip
    from pipeline.agents.question_checks import question_reason

    assert question_reason("Who wrote the letter to Bob?", f"Alice {tag}") is not None
    assert question_reason("Who wrote the letter to Bob?", "Alice") is None


# ---- 6. every setting bounded by what the machine has -----------------------------------------


@pytest.mark.parametrize(
    "override",
    ["sql.memory_limit=1000TB", "sql.memory_limit=150%", "seed=1180591620717411303424",
     "seed=-1", "rewards.wcr_alpha=2", "rewards.lambda_v=1e300", "llm.request_timeout_s=1e300",
     "executor.setup_timeout_s=1e300"],
)  # fmt: skip
def test_settings_past_what_the_machine_has_are_refused(override):
    res = invoke("sql", "SELECT 1", "--set", override, "--set", "store.catalog=/nonexistent")
    one_line_error(res, override.split("=")[0], "invalid configuration")


def test_prune_keep_days_is_bounded(tmp_path):
    res = invoke("runs", "prune", "--keep-days", "800000", "--set", f"store.out_dir={tmp_path}")
    assert res.exit_code == 2 and "--keep-days" in res.output and "Traceback" not in res.output
    assert "36600" in res.output
