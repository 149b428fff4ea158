"""pipeline/core/io.py, the one place files are replaced: a process killed (SIGKILL, no cleanup)
after writing the new content but before the rename leaves the previous artifact intact."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.core.io import (
    ArtifactDir,
    atomic_dir,
    atomic_path,
    atomic_write_bytes,
    content_key,
    write_parquet_atomic,
)

ROOT = Path(__file__).resolve().parent.parent

# The child writes the new version inside the atomic block, reports it, then waits to be killed:
# the rename after the block never happens.
CHILD = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    import pyarrow as pa
    from pipeline.core.io import ArtifactDir, atomic_dir, atomic_path, write_parquet_atomic

    kind, target = sys.argv[1], Path(sys.argv[2])

    def hang():
        print("written", flush=True)
        time.sleep(600)

    if kind == "file":
        with atomic_path(target) as tmp:
            tmp.write_bytes(b"version 2")
            hang()
    elif kind == "parquet":
        with atomic_path(target) as tmp:
            import pyarrow.parquet as pq
            pq.write_table(pa.table({"v": [2, 2, 2]}), tmp)
            hang()
    elif kind == "dir":
        with atomic_dir(target) as tmp:
            (tmp / "part-0").write_bytes(b"version 2")
            (tmp / "part-1").write_bytes(b"version 2")
            hang()
    elif kind == "artifact":
        art = ArtifactDir(target)
        art.path.mkdir(parents=True, exist_ok=True)
        write_parquet_atomic(art.path / "data.parquet", pa.table({"v": [1]}))
        hang()  # killed before mark_complete
    """
)


def kill_mid_write(kind: str, target: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, kind, str(target)],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "written"
        os.kill(proc.pid, signal.SIGKILL)
        assert proc.wait(timeout=30) == -signal.SIGKILL
    finally:
        proc.kill()


def leftovers(parent: Path) -> list[str]:
    return sorted(p.name for p in parent.iterdir() if p.name.startswith("."))


def test_sigkill_before_the_rename_keeps_the_previous_file(tmp_path):
    target = tmp_path / "artifact.bin"
    atomic_write_bytes(target, b"version 1")
    kill_mid_write("file", target)
    assert target.read_bytes() == b"version 1"
    # The killed writer's temporary file is dot-named beside it and never mistaken for it.
    assert [n for n in leftovers(tmp_path) if n.startswith(".artifact.bin.tmp-")]
    atomic_write_bytes(target, b"version 3")  # the next writer is not blocked by the leftover
    assert target.read_bytes() == b"version 3"


def test_sigkill_before_the_rename_keeps_the_previous_parquet(tmp_path):
    target = tmp_path / "shard.parquet"
    write_parquet_atomic(target, pa.table({"v": [1]}))
    kill_mid_write("parquet", target)
    assert pq.read_table(target).column("v").to_pylist() == [1]


def test_sigkill_before_the_swap_keeps_the_previous_directory(tmp_path):
    target = tmp_path / "export"
    with atomic_dir(target) as tmp:
        (tmp / "part-0").write_bytes(b"version 1")
    kill_mid_write("dir", target)
    assert sorted(p.name for p in target.iterdir()) == ["part-0"]
    assert (target / "part-0").read_bytes() == b"version 1"


def test_sigkill_before_the_marker_leaves_an_unfinished_artifact(tmp_path):
    art = ArtifactDir(tmp_path / "index" / content_key({"corpus": "abc"}))
    kill_mid_write("artifact", art.path)
    assert (art.path / "data.parquet").exists() and not art.complete
    art.mark_complete("done\n")
    assert art.complete and art.marker.read_text() == "done\n"


def test_an_error_inside_the_block_leaves_target_and_no_temporary(tmp_path):
    target = tmp_path / "a.json"
    atomic_write_bytes(target, b"old")
    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        tmp.write_bytes(b"half")
        raise RuntimeError("writer failed")
    assert target.read_bytes() == b"old" and leftovers(tmp_path) == []
    d = tmp_path / "d"
    with atomic_dir(d) as tmp:
        (tmp / "x").write_text("old")

    def refuse() -> None:
        raise FileExistsError("not ours")

    with pytest.raises(FileExistsError), atomic_dir(d, check=refuse) as tmp:
        (tmp / "x").write_text("new")
    assert (d / "x").read_text() == "old" and leftovers(tmp_path) == []


def test_temporary_names_keep_the_extension_numpy_appends_otherwise(tmp_path):
    import numpy as np

    target = tmp_path / "emb-00000.npy"
    with atomic_path(target) as tmp:
        assert tmp.suffix == ".npy" and tmp.name.startswith(".emb-00000.npy.tmp-")
        np.save(tmp, np.arange(3))
    assert np.load(target).tolist() == [0, 1, 2] and leftovers(tmp_path) == []


def test_content_key_is_the_artifact_naming_of_earlier_releases():
    # Index and KG folders already on disk are named this way; a change would rebuild them all.
    assert content_key({"b": 1, "a": "x"}) == "385820f0096fd558"
    assert content_key({"a": "x", "b": 1}) == content_key({"b": 1, "a": "x"})
