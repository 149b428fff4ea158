"""The one way this project puts files on disk, so a crash at any instant leaves either the
previous artifact or the new one, never half of either.

- `atomic_path` / `atomic_dir`: write under a temporary name beside the target, fsync, rename
  over the target, fsync the parent directory. Every file or directory an artifact consists of
  is written through them (Parquet, .npy, FAISS, DuckDB catalog, JSON, exports, model copies).
- `ArtifactDir`: a content-addressed folder (named by `content_key` of what determines its
  content) that counts as finished only once its completion marker exists; the marker is
  written last, atomically, so a reader never takes a half-built folder for a finished one.
- `sha256_file`: the checksum recorded in manifests and verified before reuse.

Temporary names start with "." and carry the pid and a random suffix, so two processes never
share one, and they keep the target's extension (numpy and DuckDB append or expect theirs).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import hashlib
import json
import logging
import os
import shutil
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.core.errors import BadInputError

COMPLETE_MARKER = ".complete"

log = logging.getLogger(__name__)


class PathEscapeError(BadInputError):
    """A path built from a name (a run id, a table, a shard, a name read from a file) that
    would land outside the folder it belongs to: refused before anything is written, read,
    renamed or deleted."""


def _lexical(path: Path) -> Path:
    return Path(os.path.normpath(Path(path).expanduser().absolute()))


def path_within(root: Path, *parts: str | Path) -> Path:
    """`root / parts...`, checked to stay inside `root` once `..` and absolute parts are
    resolved (lexically: a store may itself live behind a symlink). Every path the store
    writes is built or checked here."""
    base = _lexical(root)
    target = _lexical(base.joinpath(*parts))
    if target != base and not target.is_relative_to(base):
        shown = ascii(str(Path(*parts)) if parts else "")[:120]
        raise PathEscapeError(f"refusing to write {shown}: it resolves outside {base}")
    return target


def contained(
    root: Path, name: object, *, source: object = None, follow: bool = True, verb: str = "use",
    quiet: bool = False, links: bool = True,
) -> Path:  # fmt: skip
    """`root / name` for a name read from data (a manifest's file, a review file's list of
    the files it holds, a trash entry), refused unless it is a relative path that names
    something strictly inside `root`: not absolute, not climbing out with `..`, no NUL, not
    `root` itself, and (with `links`) not reaching out through a symbolic link: the folders
    on the way, and with `follow` the name itself (a read follows the last link, an unlink or
    a rename acts on the link). The one gate every delete, rename and read of such a name
    passes; a refusal is logged (naming `source`, the file the name came from) and raised as
    PathEscapeError, before anything is touched (`quiet`: the caller logs it). Without
    `links` it is string work only (a year of manifests is 30,000 names)."""
    why = _escape(root, name, follow, links)
    if why is None:
        return _lexical(_lexical(root) / os.path.normpath(str(name)))
    where = f" (named by {source})" if source is not None else ""
    shown = ascii(str(name) if isinstance(name, str | Path) else repr(name))[:160]
    msg = f"refusing to {verb} {shown}{where}: {why} ({_lexical(root)})"
    if not quiet:
        log.warning("%s", msg)
    raise PathEscapeError(msg)


def name_escapes(name: object) -> str | None:
    """Why `name` is not a relative path strictly inside the folder it is read against, by
    its text alone (None: it is one): not a path, empty, a NUL, absolute, or climbing out."""
    if not isinstance(name, str | Path):
        return "it is not a path"
    text = str(name)
    if not text or "\0" in text:
        return "it is empty or holds a NUL"
    if text[0] == "/":
        return "it is an absolute path"
    if ".." not in text:  # the common case, a plain relative path: string work only
        return None if text.strip("/.") else "it names the folder itself"
    depth = 0
    for part in text.split("/"):
        if part == "..":
            depth -= 1
            if depth < 0:
                return "it resolves outside it"
        elif part not in ("", "."):
            depth += 1
    return None if depth > 0 else "it names the folder itself"


def _escape(root: Path, name: object, follow: bool, links: bool) -> str | None:
    """Why `name` does not name something inside `root` (None: it does)."""
    if (why := name_escapes(name)) is not None or not links:
        return why
    norm = os.path.normpath(str(name))
    base = _lexical(root)
    target = base / norm
    real = Path(os.path.realpath(base))
    seen = Path(os.path.realpath(target if follow else target.parent))
    if seen != real and not seen.is_relative_to(real):
        return "a symbolic link on the way leads outside it"
    if follow and seen == real:
        return "a symbolic link on the way leads to the folder itself"
    return None


def remove_contained(root: Path, name: object, *, source: object = None) -> Path | None:
    """Delete the file `name` (read from data) under `root`, through `contained`: the path
    deleted, or None when it was not there or was refused (logged; nothing deleted). A
    folder is not a file: left alone."""
    try:
        path = contained(root, name, source=source, follow=False, verb="delete")
    except PathEscapeError:
        return None
    if path.is_symlink() or path.is_file():
        path.unlink(missing_ok=True)
        return path
    return None


def _check_within(target: Path, within: Path | None) -> None:
    if within is not None:
        path_within(within, target)


def utcnow() -> dt.datetime:
    """Timestamps written into artifacts: timezone-aware UTC."""
    return dt.datetime.now(dt.UTC)


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with Path(path).open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def content_key(ident: Mapping[str, Any]) -> str:
    """The name of an artifact folder: 16 hex digits of sha256 over the canonical JSON of
    everything that determines its content (same inputs, same folder; any change, a new one)."""
    return hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:16]


def fsync_path(path: Path) -> None:
    """fsync a file or a directory (a directory's entries: renames in it become durable)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_tree(root: Path) -> None:
    """fsync every file and directory under root, children before parents."""
    for dirpath, _, names in os.walk(root, topdown=False):
        for name in names:
            fsync_path(Path(dirpath) / name)
        fsync_path(Path(dirpath))


def _temp_name(target: Path, kind: str = "tmp", suffix: str = "") -> Path:
    return target.with_name(f".{target.name}.{kind}-{os.getpid()}-{uuid.uuid4().hex[:8]}{suffix}")


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


@contextlib.contextmanager
def exclusive_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive flock on `path` (created with its folder) for the block: one writer
    at a time, released by the kernel if the holder dies."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def rename_durably(src: Path, dst: Path, within: Path | None = None) -> None:
    """Rename `src` to `dst` (one atomic step on one filesystem) and fsync both folders, so the
    move survives a crash: the switch a multi-step removal starts with. With `within` (the
    store's root), both must be inside it (`contained`, the links themselves)."""
    if within is not None:
        for path in (src, dst):
            rel = os.path.relpath(_lexical(path), _lexical(within))
            contained(within, rel, follow=False, verb="rename")
    os.rename(src, dst)
    fsync_path(Path(src).parent)
    fsync_path(Path(dst).parent)


@contextlib.contextmanager
def atomic_path(target: Path, within: Path | None = None) -> Iterator[Path]:
    """Yield a temporary file path beside `target`; when the block ends without an error the
    file is fsynced and renamed over `target`. On an error (or a kill) `target` is untouched
    and the temporary file is removed (a kill leaves only a dot-named leftover). With
    `within` (the store's root), a target outside it is refused before anything is made."""
    target = Path(target)
    _check_within(target, within)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = _temp_name(target, suffix=target.suffix)
    try:
        yield tmp
        fsync_path(tmp)
        os.replace(tmp, target)
        fsync_path(target.parent)
    finally:
        _remove(tmp)


@contextlib.contextmanager
def atomic_dir(
    target: Path, check: Callable[[], None] | None = None, within: Path | None = None
) -> Iterator[Path]:
    """Yield an empty temporary directory beside `target`; when the block ends without an error
    its tree is fsynced and it takes `target`'s place (an existing `target` is moved aside,
    then removed; put back if the rename fails). `check` runs right before the swap, so a
    caller can refuse to replace what appeared meanwhile. `within`: as for atomic_path."""
    target = Path(target)
    _check_within(target, within)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = _temp_name(target)
    tmp.mkdir()
    old: Path | None = None
    try:
        yield tmp
        fsync_tree(tmp)
        if check is not None:
            check()
        if target.exists():
            old = _temp_name(target, "old")
            os.replace(target, old)
        try:
            os.replace(tmp, target)
        except OSError:
            if old is not None:
                os.replace(old, target)
                old = None
            raise
        fsync_path(target.parent)
    finally:
        _remove(tmp)
        if old is not None:
            _remove(old)


def atomic_write_bytes(path: Path, data: bytes, within: Path | None = None) -> None:
    with atomic_path(path, within) as tmp:
        tmp.write_bytes(data)


def atomic_write_text(path: Path, text: str, within: Path | None = None) -> None:
    atomic_write_bytes(path, text.encode("utf-8"), within)


def write_parquet_atomic(
    path: Path,
    data: pa.Table,
    compression: str = "zstd",
    level: int | None = 3,
    within: Path | None = None,
) -> tuple[str, int]:
    """Write a Parquet file atomically; return (sha256, bytes) for the manifest."""
    digest, size, _ = write_parquet_parts_atomic(path, data.schema, [data], compression, level,
                                                 within)  # fmt: skip
    return digest, size


def write_parquet_parts_atomic(
    path: Path,
    schema: pa.Schema,
    parts: Iterable[pa.Table],
    compression: str = "zstd",
    level: int | None = 3,
    within: Path | None = None,
    row_group_size: int | None = None,
) -> tuple[str, int, int]:
    """Write `parts` (read lazily: one in memory at a time) as one Parquet file atomically;
    return (sha256, bytes, rows) for the manifest."""
    kwargs: dict[str, Any] = {"compression": None if compression == "none" else compression}
    if compression == "zstd" and level is not None:
        kwargs["compression_level"] = level
    rows = 0
    with atomic_path(path, within) as tmp:
        with pq.ParquetWriter(tmp, schema, **kwargs) as writer:
            for part in parts:
                writer.write_table(part, row_group_size)
                rows += part.num_rows
        digest = sha256_file(tmp)
        size = tmp.stat().st_size
    return digest, size, rows


@dataclass(frozen=True)
class ArtifactDir:
    """A content-addressed artifact folder: finished once its completion marker exists."""

    path: Path

    @property
    def key(self) -> str:
        return self.path.name

    @property
    def marker(self) -> Path:
        return self.path / COMPLETE_MARKER

    @property
    def complete(self) -> bool:
        return self.marker.exists()

    def mark_complete(self, note: str = "") -> None:
        """Written last: everything the folder holds must already be durable."""
        atomic_write_text(self.marker, note)


__all__ = [
    "COMPLETE_MARKER",
    "ArtifactDir",
    "PathEscapeError",
    "atomic_dir",
    "atomic_path",
    "atomic_write_bytes",
    "atomic_write_text",
    "contained",
    "content_key",
    "exclusive_lock",
    "fsync_path",
    "fsync_tree",
    "name_escapes",
    "path_within",
    "remove_contained",
    "rename_durably",
    "sha256_file",
    "utcnow",
    "write_parquet_atomic",
    "write_parquet_parts_atomic",
]
