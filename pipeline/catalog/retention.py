"""Retention: prune the runs older than a cutoff, whole or down to their records.

`plan_prune` only looks: the finished runs dated before the cutoff, never the newest run, and
the runs still referenced (an export's manifest.json lists them, or the selector has not
learned from them yet), which are skipped unless forced. `apply_prune` acts on a plan:

- whole runs: each run's folder `runs/<id>/` is renamed into `<out>/.trash/runs/` (one atomic
  rename; from then on `Store.run_ids()` and every catalog refresh leave the run out), the
  catalog is rebuilt by the caller's `refresh` (the way landing does), and only then are the
  run's files deleted (every file its manifest names and everything under its
  `shards/*/run_date=*/run_id=<id>/` folders), the trash entry last. A rerun finishes a prune
  killed at any point: it picks up what is left in the trash.
- bulky only (`bulky_only`): the run keeps its records, verdicts and facts; its compacted files
  of the tables with bulky columns (`BULKY_COLUMNS`: prompts, raw outputs, transcripts) are
  rewritten with those columns emptied (NULL, or '' where the contract does not allow NULL),
  same schema, and one new `compacted` manifest line that covers the old one switches readers
  over, as a compaction does (pipeline/store/compaction.py); `sweep` deletes the old files
  after the refresh. A run that is not compacted yet is compacted first.

Readers that keep the previous catalog open while a prune runs may briefly see missing files:
between the rename and the refresh, the old catalog's `runs` and `run_plan` views name files
that moved to the trash, and after the refresh the deleted shard files are gone under a
connection opened on the old catalog. A connection opened after the refresh sees the new
catalog. The catalog never names a deleted shard file: nothing is deleted before the refresh.

The caller holds the store's run lock (`store_run_lock`), so no nightly writes meanwhile.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import shutil
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.core.identifiers import is_identifier
from pipeline.core.io import (
    PathEscapeError,
    contained,
    content_key,
    remove_contained,
    rename_durably,
    write_parquet_parts_atomic,
)
from pipeline.selector.run_plan import load_plan, selector_dirs
from pipeline.selector.state import saved_iterations
from pipeline.store.compaction import (
    ROW_GROUP_ROWS,
    compact_run,
    needs_compaction,
    superseded_files,
    sweep,
)
from pipeline.store.store import COMPACTED, ShardFile, Store, read_manifest
from schemas.tables import schema_for

log = logging.getLogger(__name__)

# The columns `--bulky-only` empties: what a record was made from (prompts, raw model outputs,
# think text, dialogue transcripts), not what it is (question, answer, evidence, scores,
# verdicts, predicted answers, searches). No view, audit or export reads them; the record
# browser shows them empty.
BULKY_COLUMNS: dict[str, tuple[str, ...]] = {
    "curriculum": ("prompt", "raw_proposer_output"),
    "proposer_rollouts": ("prompt", "raw_output", "think"),
    "solver_rollouts": ("prompt", "raw_output", "think", "verifier_output"),
    "verifier_samples": ("prompt", "raw_output"),
    "gate_rollouts": ("prompt", "raw_output"),
    "arr_turns": ("text",),
}

TRASH_DIR = ".trash/runs"  # under the store root: run folders whose files are being deleted


def bulky_fill() -> list[tuple[str, str, str]]:
    """(table, column, 'NULL' or "''") for every bulky column: '' where the contract does not
    allow NULL."""
    out = []
    for table, cols in BULKY_COLUMNS.items():
        schema = schema_for(table)
        for col in cols:
            out.append((table, col, "NULL" if schema.field(col).nullable else "''"))
    return out


@dataclass
class Candidate:
    """One run a prune would act on."""

    run_id: str
    run_date: dt.date
    records: int
    files: list[Path]  # whole: every file to delete; bulky: the live files to rewrite
    bytes: int  # whole: bytes on disk; bulky: the bulky columns' compressed bytes (estimate)
    compacted: bool = True
    references: list[str] = field(default_factory=list)  # why it is still referenced


@dataclass
class PrunePlan:
    cutoff: dt.date
    bulky_only: bool
    force: bool
    candidates: list[Candidate]  # old enough, finished, not the newest (referenced included)
    newest: str | None  # the newest run: never pruned
    unfinished: list[str]  # old enough but without a finish time: never pruned
    already_slim: list[str] = field(default_factory=list)  # bulky only: nothing left to empty
    leftover: list[str] = field(default_factory=list)  # trash entries of an unfinished prune
    unswept: list[str] = field(default_factory=list)  # runs with replaced files still on disk
    warnings: list[str] = field(default_factory=list)

    @property
    def selected(self) -> list[Candidate]:
        """What apply_prune acts on: the candidates, less the referenced ones unless forced."""
        return [c for c in self.candidates if self.force or not c.references]

    @property
    def skipped(self) -> list[Candidate]:
        return [] if self.force else [c for c in self.candidates if c.references]

    @property
    def pending(self) -> bool:
        """Anything for apply_prune to do."""
        return bool(self.selected or self.leftover or self.unswept)


@dataclass
class PruneResult:
    runs: list[str]  # removed (whole) or slimmed (bulky only)
    files: int  # files deleted
    bytes_freed: int
    finished: list[str] = field(default_factory=list)  # trash entries of an earlier prune
    refreshed: bool = False


# ---- what is there to prune ---------------------------------------------------------------


def plan_prune(
    store: Store,
    cutoff: dt.date,
    *,
    bulky_only: bool = False,
    force: bool = False,
    export_dirs: Iterable[Path] = (),
) -> PrunePlan:
    """The finished runs dated before `cutoff` (their run_date, else the day they started),
    except the newest run, with what each would free and why it is still referenced. Looks
    only: nothing on disk changes."""
    newest = store.latest_run_id()
    refs, warnings = references(store, export_dirs)
    plan = PrunePlan(cutoff, bulky_only, force, [], newest, [], warnings=warnings)
    for run_id in store.run_ids():
        run = store.read_run(run_id)
        day = _run_day(run)
        if run_id == newest or (day is not None and day >= cutoff):
            continue
        if run is None or day is None or not run.get("finished_at"):
            plan.unfinished.append(run_id)
            continue
        records = sum(
            f["rows"]
            for e in store.manifest(run_id).values()
            for f in e["files"]
            if f["table"] == "curriculum"
        )
        if bulky_only:
            files = [p for p, cols in _bulky_files(store, run_id) if not _is_slim(p, cols)]
            if not files and not needs_compaction(store, run_id):
                plan.already_slim.append(run_id)
                continue
            size = sum(_column_bytes(p, BULKY_COLUMNS[t]) for p, t in _tables_of(store, files))
        else:
            files = _run_files(store, run_id)
            size = sum(p.stat().st_size for p in files)
        compacted = not needs_compaction(store, run_id)
        plan.candidates.append(
            Candidate(run_id, day, records, files, size, compacted, refs.get(run_id, []))
        )
    plan.leftover = sorted(p.name for p in _trash(store).glob("*") if p.is_dir())
    far = dt.datetime.max.replace(tzinfo=dt.UTC)
    plan.unswept = [
        r for r in store.run_ids() if any(p.exists() for p in superseded_files(store, r, far))
    ]
    return plan


def _run_day(run: dict[str, Any] | None) -> dt.date | None:
    if run is None:
        return None
    if run.get("run_date"):
        return run["run_date"]
    return run["started_at"].date() if run.get("started_at") else None


def references(
    store: Store, export_dirs: Iterable[Path] = ()
) -> tuple[dict[str, list[str]], list[str]]:
    """Why each run is still referenced (run id -> reasons), and warnings about export
    manifests that could not be read.

    Exports: every manifest.json of an export (it has `export_version` and `runs`) under
    `<out>/exports/` and under each of `export_dirs` (an export folder, or a folder of them, at
    any depth); its `runs` list names the runs it took records from. The selector: its saved
    state keeps no run ids (it is versioned by iteration), and a run matters to it until the
    feedback step has fed the run's records back: a run whose plan's iteration has no saved
    selector state."""
    refs: dict[str, list[str]] = {}
    warnings: list[str] = []
    for path in export_manifests(store, export_dirs):
        try:
            manifest = orjson.loads(path.read_bytes())
            runs = manifest["runs"] if "export_version" in manifest else None
        except (OSError, orjson.JSONDecodeError, KeyError, TypeError) as exc:
            warnings.append(f"cannot read export manifest {path}: {exc}")
            continue
        if runs is None:
            continue  # a manifest.json of something else
        created = str(manifest.get("created_at") or "?")[:10]
        for r in runs:
            if isinstance(r, dict) and isinstance(r.get("run_id"), str):
                n = r.get("records_exported")
                took = f", {n} records exported" if isinstance(n, int) else ""
                refs.setdefault(r["run_id"], []).append(
                    f"export {path.parent} (created {created}{took}) lists it in manifest.json"
                )
    _, state_dir = selector_dirs(store.root)
    saved = set(saved_iterations(state_dir))
    for run_id in store.run_ids():
        try:
            plan = load_plan(store, run_id)
        except Exception as exc:  # an unreadable plan: say so, do not guess
            warnings.append(f"cannot read the plan of run {run_id}: {exc}")
            continue
        if plan is not None and plan.iteration not in saved:
            refs.setdefault(run_id, []).append(
                f"selector: its records were not fed back yet (plan iteration {plan.iteration} "
                f"has no saved selector state under {state_dir})"
            )
    return refs, warnings


def export_manifests(store: Store, export_dirs: Iterable[Path] = ()) -> list[Path]:
    """The manifest.json files under `<out>/exports/` and `export_dirs` (dot-named folders,
    exports being built, left out)."""
    found: dict[Path, None] = {}
    for root in (store.root / "exports", *map(Path, export_dirs)):
        if not root.is_dir():
            continue
        for path in sorted(root.rglob("manifest.json")):
            if not any(part.startswith(".") for part in path.relative_to(root).parts):
                found[path.resolve()] = None
    return list(found)


def _partition_dirs(store: Store, run_id: str) -> list[Path]:
    """The run's partition folders, each a real folder of the store (one that is a symbolic
    link out of it is refused by the io layer's containment, logged, and left out)."""
    out = []
    for p in sorted(store.root.glob(f"shards/*/run_date=*/run_id={run_id}")):
        try:
            contained(store.root, p.relative_to(store.root), verb="prune")
        except PathEscapeError:
            continue
        if p.is_dir():
            out.append(p)
    return out


def _run_files(store: Store, run_id: str) -> list[Path]:
    """Every file of a run: what its manifest lines name (replaced groups not yet swept too;
    each line's files checked to be inside the store as it was read), whatever else lies in
    its shard folders (a killed write's leftovers), and runs/<id>/."""
    files = {store.root / f["path"] for e in store.manifest_lines(run_id) for f in e["files"]}
    for folder in [*_partition_dirs(store, run_id), store.run_dir(run_id)]:
        if not folder.is_symlink():
            files.update(folder.rglob("*"))
    return sorted(p for p in files if p.is_file() and not p.is_symlink())


def _bulky_files(store: Store, run_id: str) -> list[tuple[Path, tuple[str, ...]]]:
    return [
        (store.root / f["path"], BULKY_COLUMNS[f["table"]])
        for e in store.manifest(run_id).values()
        for f in e["files"]
        if f["table"] in BULKY_COLUMNS
    ]


def _tables_of(store: Store, files: list[Path]) -> list[tuple[Path, str]]:
    # shards/<table>/run_date=.../run_id=.../<file>
    return [(p, p.relative_to(store.root).parts[1]) for p in files]


def _column_bytes(path: Path, columns: tuple[str, ...]) -> int:
    """The compressed bytes of `columns` in a Parquet file (its metadata only)."""
    meta = pq.ParquetFile(path).metadata
    total = 0
    for i in range(meta.num_row_groups):
        rg = meta.row_group(i)
        for j in range(rg.num_columns):
            col = rg.column(j)
            if col.path_in_schema in columns:
                total += col.total_compressed_size
    return total


def _is_slim(path: Path, columns: tuple[str, ...]) -> bool:
    """Every value of `columns` is NULL or '' (by the row groups' statistics; the column is
    read where a row group has none)."""
    pf = pq.ParquetFile(path)
    meta = pf.metadata
    for i in range(meta.num_row_groups):
        rg = meta.row_group(i)
        for j in range(rg.num_columns):
            col = rg.column(j)
            if col.path_in_schema not in columns:
                continue
            st = col.statistics
            if st is None or not st.has_null_count:
                values = pf.read_row_group(i, columns=[col.path_in_schema]).column(0)
                if any(v not in (None, "") for v in values.to_pylist()):
                    return False
            elif st.null_count == rg.num_rows:
                continue
            elif not (st.has_min_max and st.min == "" and st.max == ""):
                return False
    return True


# ---- acting on a plan ---------------------------------------------------------------------


def apply_prune(store: Store, plan: PrunePlan, refresh: Callable[[], object]) -> PruneResult:
    """Prune what `plan` selected, then `refresh` the catalog (the caller's: landing's
    refresh), then delete what nothing names any more; finishes an earlier prune's leftovers.
    A kill at any point leaves a store whose catalog names no deleted file, and running the
    same prune again finishes it."""
    if plan.bulky_only:
        return _apply_bulky(store, plan, refresh)
    result = PruneResult([], 0, 0)
    trash = _trash(store)
    for cand in plan.selected:
        src = store.run_dir(cand.run_id)
        if not src.is_dir():
            continue
        trash.mkdir(parents=True, exist_ok=True)
        dst = trash / cand.run_id
        n = 1
        while dst.exists():  # an earlier prune of a run of the same id, not finished
            n += 1
            dst = trash / f"{cand.run_id}~{n}"
        # the switch: from here on no refresh lists the run
        rename_durably(src, dst, within=store.root)
        result.runs.append(cand.run_id)
    entries = sorted(p for p in trash.glob("*") if p.is_dir()) if trash.is_dir() else []
    if not entries and not plan.unswept:
        return result
    refresh()
    result.refreshed = True
    for entry in entries:
        files, size = _empty_trash(store, entry)
        result.files += files
        result.bytes_freed += size
        run_id = entry.name.split("~", 1)[0]
        if run_id not in result.runs:
            result.finished.append(run_id)
    _remove_empty(trash)
    _remove_empty(trash.parent)
    sweep(store)  # what compactions replaced, when a refresh was pending (landing's sweeps too)
    return result


def _trash(store: Store) -> Path:
    return store.root / TRASH_DIR


def _empty_trash(store: Store, entry: Path) -> tuple[int, int]:
    """Delete a trashed run's files, then its trash entry; (files, bytes) deleted. Every name
    taken from its manifest, and every file found in its folders, is deleted through the io
    layer's containment: nothing outside the store is touched whatever the files say."""
    run_id = entry.name.split("~", 1)[0]
    if entry.is_symlink() or not is_identifier(run_id):  # not a folder a prune moved here
        log.warning("%s: not a pruned run's folder; leaving it", entry)
        return 0, 0
    manifest = entry / "manifest.jsonl"
    named = {f["path"] for line in read_manifest(manifest, store.root) for f in line["files"]}
    if store.run_dir(run_id).is_dir():
        # a new run took the id since: only the files the trashed run alone named
        named -= {f["path"] for e in store.manifest_lines(run_id) for f in e["files"]}
        folders: list[Path] = []
    else:
        folders = _partition_dirs(store, run_id)
        for folder in folders:
            named.update(str(p.relative_to(store.root)) for p in folder.rglob("*"))
    files, size = 0, 0
    for name in sorted(named):
        path = store.root / name
        if not path.is_file() or path.is_symlink():
            continue
        size_of = path.stat().st_size
        if remove_contained(store.root, name, source=manifest) is not None:
            size += size_of
            files += 1
    for folder in folders:
        _remove_empty(folder)
        _remove_empty(folder.parent)  # run_date=<d>, when no other run is left in it
    for path in entry.rglob("*"):
        if path.is_file():
            size += path.stat().st_size
            files += 1
    shutil.rmtree(entry)
    return files, size


def _remove_empty(folder: Path) -> None:
    with contextlib.suppress(OSError):  # not empty, or gone
        folder.rmdir()


def _apply_bulky(store: Store, plan: PrunePlan, refresh: Callable[[], object]) -> PruneResult:
    result = PruneResult([], 0, 0)
    # the runs' files before, against after: what the sweep (landing's or ours) deleted
    watched = {c.run_id for c in plan.selected} | set(plan.unswept)
    before = {p: n for r in watched for p, n in _disk_files(store, r).items()}
    for cand in plan.selected:
        if needs_compaction(store, cand.run_id):
            compact_run(store, cand.run_id)
        slim_run(store, cand.run_id)
        result.runs.append(cand.run_id)
    leftover = bool(_trash(store).is_dir() and any(_trash(store).iterdir()))
    if not (result.runs or plan.unswept or leftover):
        return result
    refresh()
    result.refreshed = True
    if leftover:
        for entry in sorted(p for p in _trash(store).glob("*") if p.is_dir()):
            files, size = _empty_trash(store, entry)
            result.files += files
            result.bytes_freed += size
            result.finished.append(entry.name.split("~", 1)[0])
        _remove_empty(_trash(store))
        _remove_empty(_trash(store).parent)
    sweep(store)
    after = {p: n for r in watched for p, n in _disk_files(store, r).items()}
    result.files += len(before.keys() - after.keys())
    result.bytes_freed += max(0, sum(before.values()) - sum(after.values()))
    return result


def _disk_files(store: Store, run_id: str) -> dict[Path, int]:
    """The files in a run's shard folders, with their sizes."""
    return {
        p: p.stat().st_size
        for folder in _partition_dirs(store, run_id)
        for p in folder.rglob("*")
        if p.is_file()
    }


def slim_run(store: Store, run_id: str) -> bool:
    """Empty the bulky columns of a compacted run: its files that hold any are rewritten, and
    one `compacted` line covering the old one is committed (the old files stay until `sweep`).
    False when there was nothing to empty."""
    live = store.manifest(run_id)
    if set(live) != {COMPACTED}:
        raise ValueError(f"run {run_id} is not compacted (compact_run first)")
    entry = live[COMPACTED]
    files, changed = [], False
    for f in entry["files"]:
        cols = BULKY_COLUMNS.get(f["table"], ())
        if cols and not _is_slim(store.root / f["path"], cols):
            files.append(_slim_file(store, f, cols))
            changed = True
        else:
            files.append(ShardFile.from_entry(f))
    if changed:
        store.commit(run_id, COMPACTED, files, covers=list(entry.get("covers", ())))
    return changed


def _slim_file(store: Store, f: dict[str, Any], columns: tuple[str, ...]) -> ShardFile:
    """`f` with `columns` emptied, written atomically beside it under a name derived from its
    checksum (a rerun after a kill writes the same file)."""
    src = store.root / f["path"]
    folder = Path(f["path"]).parent.as_posix()
    key = content_key({"slim": f["sha256"], "columns": list(columns)})
    rel = f"{folder}/{COMPACTED}-{key}.parquet"
    pf = pq.ParquetFile(src)
    schema = pf.schema_arrow

    def parts() -> Iterator[pa.Table]:  # row group by row group, the columns emptied
        for i in range(pf.num_row_groups):
            part = pf.read_row_group(i)
            for col in columns:
                idx = schema.get_field_index(col)
                fld = schema.field(idx)
                n = part.num_rows
                empty = (
                    pa.nulls(n, fld.type) if fld.nullable else pa.repeat(pa.scalar("", fld.type), n)
                )
                part = part.set_column(idx, fld, empty)
            yield part

    digest, size, rows = write_parquet_parts_atomic(
        store.root / rel, schema, parts(), store.compression, store.compression_level,
        store.root, ROW_GROUP_ROWS,
    )  # fmt: skip
    return ShardFile(f["table"], rel, rows, digest, size)


__all__ = [
    "BULKY_COLUMNS",
    "TRASH_DIR",
    "Candidate",
    "PrunePlan",
    "PruneResult",
    "apply_prune",
    "bulky_fill",
    "export_manifests",
    "plan_prune",
    "references",
    "slim_run",
]
