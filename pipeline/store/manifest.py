"""A run's manifest (`runs/<id>/manifest.jsonl`): one JSON line per committed shard group,
the store's commit point, naming the group's files relative to the store root. Its lines are
input like any file: a line that is not one `Store.commit` writes, or that names a file
outside the store, is left out with a warning, so no reader, sweep or prune acts on it."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from pipeline.core.identifiers import is_identifier
from pipeline.core.io import name_escapes

log = logging.getLogger(__name__)

# Tables that live as per-run shards under shards/<table>/run_date=/run_id=/.
SHARDED_TABLES = (
    "curriculum",
    "proposer_rollouts",
    "solver_rollouts",
    "verifier_samples",
    "evalact_segments",
    "gate_rollouts",
    "control_scores",
    "shard_steps",
    "record_costs",
    "arr_turns",
    "rejects",
    "record_facts",
    "control_facts",
)


@dataclass(frozen=True)
class ShardFile:
    table: str
    path: str  # relative to the store root
    rows: int
    sha256: str
    bytes: int

    @classmethod
    def from_entry(cls, f: dict[str, Any]) -> ShardFile:
        """One file of a manifest line, as commit wrote it."""
        return cls(f["table"], f["path"], f["rows"], f["sha256"], f["bytes"])


def read_manifest(path: Path, root: Path | None = None) -> list[dict[str, Any]]:
    """The committed lines of a manifest file, in commit order (none when it is missing).
    With `root` (the store's), a line is input like any other: one that is not what
    `Store.commit` writes, or that names a file outside the store, is left out with a
    warning naming the manifest and line (`manifest_problem`), so no reader, sweep or prune
    acts on it."""
    out: list[dict[str, Any]] = []
    if not path.exists():
        return out
    with path.open("rb") as fh:
        for lineno, raw in enumerate(fh, 1):
            if not raw.strip():
                continue
            try:
                entry = orjson.loads(raw)
            except orjson.JSONDecodeError:
                # Only a crash during the final append can leave a torn line.
                log.warning("%s:%d: ignoring torn manifest line", path, lineno)
                continue
            why = manifest_problem(entry, root) if root is not None else None
            if why is not None:
                log.warning("%s:%d: ignoring the manifest line: %s", path, lineno, why)
                continue
            out.append(entry)
    return out


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def manifest_problem(entry: object, root: Path) -> str | None:
    """Why a manifest line is not one `Store.commit` writes for the store at `root` (None:
    it is): a run id, a shard name and its covers that are names, and files each with a
    table, counts, a checksum and a path inside the store (`contained`)."""
    if not isinstance(entry, dict):
        return "not a JSON object"
    if not isinstance(entry.get("run_id"), str) or not is_identifier(entry.get("shard")):
        return "its run_id or shard is not a name"
    covers = entry.get("covers", [])
    if not isinstance(covers, list) or not all(is_identifier(c) for c in covers):
        return "its covers are not a list of shard names"
    files = entry.get("files")
    if not isinstance(files, list):
        return "its files are not a list"
    for f in files:
        if not isinstance(f, dict) or f.get("table") not in SHARDED_TABLES:
            return "a file of it is not one of a sharded table"
        if not (_count(f.get("rows")) and _count(f.get("bytes"))
                and isinstance(f.get("sha256"), str)):  # fmt: skip
            return f"file {ascii(f.get('path'))[:120]} has no rows, bytes or sha256"
        # by its text (a year of manifests is 30,000 names); every delete and rename of it
        # goes through the io layer's `contained`, which checks the links on the way too
        if (why := name_escapes(f.get("path"))) is not None:
            return f"refusing to read {ascii(str(f.get('path')))[:160]}: {why} ({root})"
    return None


def live_groups(lines: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The live shard groups of manifest `lines`, by shard name: a later line wins, and a
    compacted group replaces the groups it covers."""
    out: dict[str, dict[str, Any]] = {}
    for entry in lines:
        for name in entry.get("covers", ()):
            out.pop(name, None)
        out[entry["shard"]] = entry
    return out


__all__ = [
    "SHARDED_TABLES",
    "ShardFile",
    "live_groups",
    "manifest_problem",
    "read_manifest",
]
