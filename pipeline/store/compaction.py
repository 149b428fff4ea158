"""Compaction of a finished run: its shard groups become one file per table and
partition, plus the tables derived from the run alone (its record_facts and control_facts), so
a year of nights is read from a few files a night and its verdicts from facts settled once.

Crash safety follows the store's one rule, a file is visible only once a manifest line names
it. The compacted files are written atomically under names derived from their sources (a
resumed compaction rewrites the same names), then one manifest line (shard `compacted`,
`covers` = every group it replaces) switches readers over. The replaced files are deleted only
by `sweep`, and only once the catalog was rebuilt after that line, so the catalog never names
a deleted file. A SIGKILL anywhere leaves either the old groups or the compacted one live,
never both, and running the compaction again finishes it.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from pipeline.core.contracts import conform, read_shard
from pipeline.core.io import content_key, remove_contained, write_parquet_parts_atomic
from pipeline.store.reviews import compact_reviews, sweep_reviews
from pipeline.store.store import (
    COMPACTED,
    DERIVED_FROM,
    Listed,
    ShardFile,
    Store,
    live_groups,
    macro_catalog,
)
from schemas.tables import schema_for

log = logging.getLogger(__name__)

# The rows of a compacted file per Parquet row group: large enough for min/max statistics to
# prune by V or record id, small enough to write a run's table with bounded memory.
ROW_GROUP_ROWS = 65_536


@dataclass
class Compacted:
    run_id: str
    groups: int  # shard groups it replaced (a previous compaction counts as one)
    files_in: int
    files_out: int
    rows: dict[str, int] = field(default_factory=dict)  # by table


def needs_compaction(store: Store, run_id: str) -> bool:
    live = store.manifest(run_id)
    return bool(set(live) - {COMPACTED}) or bool(_missing_derived(live.get(COMPACTED)))


def _missing_derived(entry: dict[str, Any] | None) -> list[str]:
    """The DERIVED_FROM tables a compacted group lacks though it holds their first source (a
    release before them compacted it)."""
    tables = {f["table"] for f in (entry or {}).get("files", ())}
    return [t for t, sources in DERIVED_FROM.items() if sources[0] in tables and t not in tables]


def compact_finished(store: Store) -> list[Compacted]:
    """Compact every completed run that has groups to fold (after the first, tonight's run;
    the manifests are read first, the run records only of runs with something to fold); the
    caller refreshes the catalog and then sweeps. A stopped or failed run is left as it is for
    its resume (were it resumed after compaction anyway, its new groups would follow the
    compacted one and the next compaction would fold them in). The review files are folded
    too (compact_reviews), which sweep deletes in the same way."""
    compact_reviews(store.root)
    done = []
    for run_id in store.run_ids():
        if not needs_compaction(store, run_id):
            continue
        if (store.read_run(run_id) or {}).get("status") != "completed":
            continue
        if result := compact_run(store, run_id):
            log.info(
                "compacted run %s: %d groups, %d files -> %d",
                run_id, result.groups, result.files_in, result.files_out,
            )  # fmt: skip
            done.append(result)
    return done


def compact_run(store: Store, run_id: str) -> Compacted | None:
    """Fold the run's live shard groups into its compacted group, or add the derived tables
    a compacted run lacks (None: nothing to do)."""
    live = store.manifest(run_id)
    if not set(live) - {COMPACTED}:
        return _add_derived(store, run_id, live.get(COMPACTED))
    covers = sorted(
        {name for name in live if name != COMPACTED}
        | set(live.get(COMPACTED, {}).get("covers", ()))
    )
    # Sources per (table, partition folder), in group order: the earlier compacted file
    # first, then the groups by name (numbered shards in number order).
    order = sorted(live, key=lambda n: (n != COMPACTED, not n.isdigit(), n.zfill(12)))
    sources: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for name in order:
        for f in live[name]["files"]:
            if f["table"] not in DERIVED_FROM:  # derived again below
                sources.setdefault((f["table"], str(Path(f["path"]).parent)), []).append(f)
    written = [_fold(store, table, folder, files) for (table, folder), files in sources.items()]
    written += _derived(store, run_id, written)
    store.commit(run_id, COMPACTED, written, covers=covers)
    rows: dict[str, int] = {}
    for w in written:
        rows[w.table] = rows.get(w.table, 0) + w.rows
    files_in = sum(len(v) for v in sources.values())
    return Compacted(run_id, len(live), files_in, len(written), rows)


def _add_derived(store: Store, run_id: str, entry: dict[str, Any] | None) -> Compacted | None:
    """The compacted group again, its files kept, with the derived tables it lacks: one
    manifest line, like any compaction (None: it lacks none)."""
    missing = _missing_derived(entry)
    if entry is None or not missing:
        return None
    kept = [ShardFile.from_entry(f) for f in entry["files"]]
    added = _derived(store, run_id, kept, missing)
    store.commit(run_id, COMPACTED, kept + added, covers=list(entry.get("covers", ())))
    return Compacted(run_id, 1, len(kept), len(kept) + len(added), {w.table: w.rows for w in added})


def _fold(store: Store, table: str, folder: str, files: list[dict[str, Any]]) -> ShardFile:
    """One file of `files` (each contract-checked as it is read), written atomically; its name
    is a hash of its sources, so a rerun after a crash writes the same file again."""
    rel = f"{folder}/{COMPACTED}-{content_key({'files': [f['sha256'] for f in files]})}.parquet"

    def parts() -> Iterator[pa.Table]:  # the shards, gathered into row groups
        pending: list[pa.Table] = []
        for f in files:
            pending.append(conform(table, read_shard(store.root / f["path"], table)))
            if sum(p.num_rows for p in pending) >= ROW_GROUP_ROWS:
                yield pa.concat_tables(pending)
                pending = []
        if pending:
            yield pa.concat_tables(pending)

    digest, size, rows = write_parquet_parts_atomic(
        store.root / rel, schema_for(table), parts(), store.compression,
        store.compression_level, store.root, ROW_GROUP_ROWS,
    )  # fmt: skip
    return ShardFile(table, rel, rows, digest, size)


# The SQL each derived table is computed by over the run's own files (views.sql's macros), in
# the order its file is written (V first: a browser's page reads the first row groups).
DERIVED_SQL = {
    "record_facts": "SELECT * FROM record_facts_of('curriculum', 'control_scores') "
    "ORDER BY verifier_v DESC NULLS LAST, record_id",
    "control_facts": "SELECT * FROM verifier_controls_of('control_scores') ORDER BY method",
}
# The views.sql macros that SQL calls, with those they call (macro_catalog creates these alone).
DERIVED_MACROS = ("norm_articles", "norm", "verifier_thresholds_of", "record_facts_of",
                  "verifier_controls_of")  # fmt: skip


def _derived(
    store: Store, run_id: str, folded: list[ShardFile], tables: list[str] | None = None
) -> list[ShardFile]:
    """The run's DERIVED_FROM tables (or those of `tables`), by the catalog's own SQL over the
    run's compacted files only, in memory; one whose first source the run lacks is not
    written."""
    listing = [Listed(run_id, f.table, store.root / f.path, True, f.rows) for f in folded]
    out = []
    with duckdb.connect() as con:
        sources = sorted({t for sources in DERIVED_FROM.values() for t in sources})
        macro_catalog(con, listing, sources, DERIVED_MACROS)
        for table, sources in DERIVED_FROM.items():
            if tables is not None and table not in tables:
                continue
            source = next((f for f in folded if f.table == sources[0]), None)
            if source is None:
                continue
            tbl = con.sql(DERIVED_SQL[table]).to_arrow_table()
            # DuckDB names UTC Etc/UTC: the same instants, cast to the contract's type
            schema = schema_for(table)
            tbl = tbl.select(schema.names).cast(schema)
            folder = Path(source.path).parent.as_posix()
            folder = folder.replace(f"/{sources[0]}/", f"/{table}/", 1)
            rel = f"{folder}/{COMPACTED}-{content_key({'files': [source.sha256]})}.parquet"
            digest, size, rows = write_parquet_parts_atomic(
                store.root / rel, schema, [tbl], store.compression, store.compression_level,
                store.root, ROW_GROUP_ROWS,
            )  # fmt: skip
            out.append(ShardFile(table, rel, rows, digest, size))
    return out


def superseded_files(store: Store, run_id: str, before: dt.datetime | None) -> list[Path]:
    """Files named by a run's manifest that no live group lists, of groups replaced by a
    compaction committed before `before` (None: none yet)."""
    return sorted(store.root / p for rel in _replaced(store, run_id, before) for p in rel)


def _replaced(store: Store, run_id: str, before: dt.datetime | None) -> list[list[str]]:
    """Per compaction line committed before `before`, the files it replaced that no earlier
    line did and no live group lists, sorted (disjoint lists of paths under the root)."""
    if before is None:
        return []
    lines = store.manifest_lines(run_id)
    live = {f["path"] for e in live_groups(lines).values() for f in e["files"]}
    seen: set[str] = set(live)
    out = []
    for i, entry in enumerate(lines):
        if entry["shard"] != COMPACTED:
            continue
        if dt.datetime.fromisoformat(entry["committed_at"]) >= before:
            continue
        names = set(entry.get("covers", ())) | {COMPACTED}
        paths = {f["path"] for e in lines[:i] if e["shard"] in names for f in e["files"]}
        out.append(sorted(paths - seen))
        seen |= paths
    return out


def catalog_refreshed_at(store: Store) -> dt.datetime | None:
    """When the catalog was last rebuilt (None: no catalog, or one from before catalog_info)."""
    if not store.catalog_path.exists():
        return None
    try:
        with duckdb.connect(str(store.catalog_path), read_only=True) as con:
            ((at,),) = con.execute("SELECT refreshed_at FROM catalog_info").fetchall()
    except (duckdb.Error, ValueError):
        return None
    return at if at.tzinfo else at.replace(tzinfo=dt.UTC)


def sweep(store: Store) -> list[Path]:
    """Delete the files compactions replaced (runs', and reviews' a day later: see
    reviews.sweep_reviews), once the catalog no longer names them (it was rebuilt after the
    compaction's line), and with them the dot-named leftovers a killed write left in those
    runs' folders (no writer works in a finished run's folders); the deleted paths. Every
    run is looked at: a compaction killed before its sweep is finished later. A
    compaction's files go in reverse order, its first last: while that one exists, some are
    left, and once it is gone the compaction was swept (a year of nights costs one stat a
    compaction, not one per replaced file)."""
    before = catalog_refreshed_at(store)
    gone = []
    for run_id in store.run_ids():
        manifest = store.run_dir(run_id) / "manifest.jsonl"
        for rel in _replaced(store, run_id, before):
            # every name comes from a manifest line: each passes the io layer's containment
            if not rel or not (store.root / rel[0]).exists():
                continue
            for name in reversed(rel):
                if (path := remove_contained(store.root, name, source=manifest)) is not None:
                    gone.append(path)
            for folder in {Path(name).parent for name in rel}:
                for leftover in (store.root / folder).glob(".*.tmp-*"):
                    remove_contained(store.root, leftover.relative_to(store.root))
    return gone + sweep_reviews(store.root, before)


__all__ = [
    "ROW_GROUP_ROWS",
    "Compacted",
    "catalog_refreshed_at",
    "compact_finished",
    "compact_run",
    "needs_compaction",
    "superseded_files",
    "sweep",
]
