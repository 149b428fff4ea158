"""One way to read gz / bz2 / zst inputs that never mistakes a cut or corrupt file for a short one.

Python's gzip and bz2 raise EOFError on a truncated stream, python-zstandard's stream reader just
stops, and an external decompressor (lbzip2/pbzip2) only says so in its exit status. Every reader
of compressed input (corpus, Wikidata dump) goes through `open_checked`, so each of those cases
becomes one `CompressedInputError` naming the file, raised before the caller can mark its output
complete.
"""

from __future__ import annotations

import bz2
import gzip
import io
import shutil
import subprocess
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from pipeline.core.errors import BadInputError, first_line

_READ = 1 << 20


class CompressedInputError(BadInputError):
    """A compressed input that is truncated, corrupt or not in the format its name says."""


def compression_of(path: Path) -> str | None:
    """'gz', 'bz2', 'zst' or None, from the file name (what the user told us it is)."""
    name = path.name.lower()
    if name.endswith(".gz"):
        return "gz"
    if name.endswith(".bz2"):
        return "bz2"
    if name.endswith((".zst", ".zstd")):
        return "zst"
    return None


class _Checked(io.RawIOBase):
    """Raw stream over a decompressor that turns its failures into CompressedInputError."""

    def __init__(self, path: Path, kind: str, opener) -> None:
        self._path, self._kind = path, kind
        self._inner: IO[bytes] = opener(path, "rb")

    def readable(self) -> bool:
        return True

    def readinto(self, buf) -> int:  # type: ignore[override]
        try:
            data = self._inner.read(len(buf))
        except (EOFError, OSError, zlib.error, ValueError) as exc:
            raise bad_stream(self._path, self._kind, exc) from None
        buf[: len(data)] = data
        return len(data)

    def close(self) -> None:
        self._inner.close()
        super().close()


class _ZstdRaw(io.RawIOBase):
    """zstd frames decoded with a decompressobj, so the end of a frame is visible: a file that
    ends inside a frame is truncated (the stream reader would simply stop there)."""

    def __init__(self, path: Path) -> None:
        import zstandard

        self._zstd = zstandard
        self._path = path
        self._fh = path.open("rb")
        self._dobj = zstandard.ZstdDecompressor().decompressobj()
        self._in_frame = False  # bytes of an unfinished frame have been fed
        self._pending = b""

    def readable(self) -> bool:
        return True

    def _fill(self) -> bool:
        """Decode more output into _pending; False at a clean end of file."""
        while not self._pending:
            chunk = self._fh.read(_READ)
            if not chunk:
                if self._in_frame:
                    raise bad_stream(self._path, "zst", EOFError("ends inside a frame"))
                return False
            while chunk:
                try:
                    self._pending += self._dobj.decompress(chunk)
                except self._zstd.ZstdError as exc:
                    raise bad_stream(self._path, "zst", exc) from None
                self._in_frame = not self._dobj.eof
                chunk = self._dobj.unused_data if self._dobj.eof else b""
                if self._dobj.eof:  # next frame (pzstd and concatenated files have several)
                    self._dobj = self._zstd.ZstdDecompressor().decompressobj()
                    self._in_frame = bool(chunk)
        return True

    def readinto(self, buf) -> int:  # type: ignore[override]
        if not self._pending and not self._fill():
            return 0
        n = min(len(buf), len(self._pending))
        buf[:n] = self._pending[:n]
        self._pending = self._pending[n:]
        return n

    def close(self) -> None:
        self._fh.close()
        super().close()


def bad_stream(path: Path, kind: str, exc: BaseException) -> CompressedInputError:
    """The one-line error for a broken stream: file, format and what the decoder said."""
    return CompressedInputError(
        f"{path}: truncated or corrupt .{kind} file ({first_line(exc)}); nothing from it was kept"
    )


@contextmanager
def open_checked(path: str | Path, external_bz2: bool = True) -> Iterator[IO[bytes]]:
    """A buffered byte stream of `path`, decompressed by its extension, read sequentially.

    A truncated or corrupt stream raises CompressedInputError while reading, or on leaving the
    block when an external decompressor exits non-zero, so a caller that marks its output
    complete after the block never does so for a partial read. `external_bz2` uses lbzip2 or
    pbzip2 when installed (parallel; Python's bz2 is the bottleneck on a 100 GB dump).
    """
    path = Path(path)
    if path.is_dir():
        raise BadInputError(f"{path}: is a directory, expected a file")
    kind = compression_of(path)
    if (
        kind == "bz2"
        and external_bz2
        and (tool := shutil.which("lbzip2") or shutil.which("pbzip2"))
    ):
        with _external(path, tool) as fh:
            yield fh
        return
    if kind == "zst":
        raw: io.RawIOBase = _ZstdRaw(path)
    elif kind == "gz":
        raw = _Checked(path, kind, gzip.open)
    elif kind == "bz2":
        raw = _Checked(path, kind, bz2.open)
    else:
        with path.open("rb") as fh:
            yield fh
        return
    with io.BufferedReader(raw, buffer_size=_READ) as fh:
        yield fh


class _ToolRaw(io.RawIOBase):
    """The decompressor's stdout, whose end is checked: the end of the data waits for the tool
    and raises if it failed, so a cut stream's broken last line is never handed out."""

    def __init__(self, path: Path, tool: str, proc: subprocess.Popen) -> None:
        self._path, self._tool, self._proc = path, tool, proc

    def readable(self) -> bool:
        return True

    def readinto(self, buf) -> int:  # type: ignore[override]
        assert self._proc.stdout is not None
        n = self._proc.stdout.readinto(buf)
        if n == 0 and (code := self._proc.wait()) != 0:
            raise _tool_error(self._path, self._tool, self._proc, code)
        return n


@contextmanager
def _external(path: Path, tool: str) -> Iterator[IO[bytes]]:
    proc = subprocess.Popen(
        [tool, "-dc", str(path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert proc.stdout is not None and proc.stderr is not None
    try:
        yield io.BufferedReader(_ToolRaw(path, tool, proc), buffer_size=_READ)
    except CompressedInputError:
        _stop(proc)
        raise
    except BaseException as exc:
        # The caller failed or stopped early. If the decompressor had already failed, that is
        # the cause (a cut stream ends in a broken last line): report it instead.
        try:
            code = proc.wait(timeout=0.5)
        except subprocess.TimeoutExpired:
            code = None
        _stop(proc)
        if code and isinstance(exc, Exception):
            raise _tool_error(path, tool, proc, code) from exc
        raise
    _stop(proc, kill=False)
    if proc.returncode != 0:
        raise _tool_error(path, tool, proc, proc.returncode)


def _stop(proc: subprocess.Popen, kill: bool = True) -> None:
    if kill and proc.poll() is None:
        proc.kill()
    assert proc.stdout is not None
    proc.stdout.close()
    proc.wait()


def _tool_error(path: Path, tool: str, proc: subprocess.Popen, code: int) -> CompressedInputError:
    assert proc.stderr is not None
    err = proc.stderr.read().decode("utf-8", "replace").strip()
    proc.stderr.close()
    why = err.splitlines()[-1] if err else f"exit status {code}"
    return bad_stream(path, "bz2", RuntimeError(f"{Path(tool).name}: {why}"))


__all__ = ["CompressedInputError", "bad_stream", "compression_of", "open_checked"]
