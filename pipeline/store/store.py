"""Parquet shard store with a per-run manifest and a DuckDB catalog over committed shards.

Crash safety: every file is written under a temporary name, fsynced and renamed; a shard group
(all tables written for one unit of work) becomes visible only when one manifest line naming all
its files is appended. Views list exactly the committed files, so a half-written shard is never
read and a rerun simply rewrites it under the same name.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import os
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import duckdb
import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.core.config import PipelineConfig
from pipeline.core.contracts import check_schema, conform, read_shard
from pipeline.core.errors import BadInputError, first_line
from pipeline.core.identifiers import check_identifier, is_identifier
from pipeline.core.io import (
    PathEscapeError,
    atomic_path,
    exclusive_lock,
    path_within,
    sha256_file,
    utcnow,
    write_parquet_atomic,
)
from pipeline.store.catalog_views import (
    BaseView,
    create_view,
    empty_table,
    start_catalog,
    views_sql,
)
from pipeline.store.manifest import (
    SHARDED_TABLES,
    ShardFile,
    live_groups,
    manifest_problem,
    read_manifest,
)
from pipeline.store.placement import moved_catalog, record_artifacts
from pipeline.store.reviews import attach_reviews, review_files
from pipeline.store.run_index import DUPLICATE_KEYS, EVIDENCE, file_identity, indexed
from pipeline.store.run_results import materialise_run_results
from pipeline.store.scoping import scope_to_runs
from schemas.tables import QUALITY_TABLES, SCHEMA_VERSION, schema_for

log = logging.getLogger(__name__)

# Tables a run's compaction derives (schemas/derived_tables.py), each from its sources: the
# catalog reads a derived table's files, and computes it live for the runs that have none.
DERIVED_FROM = {
    "record_facts": ("curriculum", "control_scores"),
    "control_facts": ("control_scores",),
}

# The runs a catalog holds (each run with a committed file or a run record), from the table
# of its files: `runs` and curriculum's run ids would read two files a night of the history.
# A catalog from before that table (or built by hand) is read the old way (`catalog_runs`).
CATALOG_RUNS = "SELECT DISTINCT run_id FROM catalog_files"
HAS_CATALOG_FILES = "SELECT count(*) = 1 FROM duckdb_tables() WHERE table_name = 'catalog_files'"


def catalog_runs(has_catalog_files: bool) -> str:
    """The SQL of the runs a catalog holds (see CATALOG_RUNS)."""
    old = "SELECT run_id FROM runs UNION SELECT DISTINCT run_id FROM curriculum"
    return CATALOG_RUNS if has_catalog_files else old


# The shard name of a run's compacted group: one manifest line naming one file per table (and
# the run's DERIVED_FROM tables), listing in `covers` every shard group it replaces.
COMPACTED = "compacted"


class StoreError(RuntimeError):
    hint: str | None = None


class CatalogFileError(StoreError, BadInputError):
    """store.catalog names something that is not a DuckDB catalog (a directory, a text
    file): bad input, one line and exit 2, and never overwritten by a refresh."""

    hint = "point store.catalog at the catalog a nightly run writes (data/out/curriculum.duckdb)"


# A DuckDB database file: 8 bytes of checksum, then this magic (format of DuckDB >= 0.9).
_DUCKDB_MAGIC = b"DUCK"


def check_catalog_file(path: Path, must_exist: bool = True) -> None:
    """Refuse a catalog path that is a directory, not a regular file, or a file without
    DuckDB's header; a missing one is a StoreError when `must_exist`."""
    if path.is_dir():
        raise CatalogFileError(f"store.catalog {path} is a directory, not a DuckDB catalog file")
    if not path.exists():
        if must_exist:
            raise StoreError(f"no catalog at {path}; run the nightly flow first")
        return
    if not path.is_file():
        raise CatalogFileError(f"store.catalog {path} is not a regular file")
    try:
        with path.open("rb") as fh:
            head = fh.read(12)
    except OSError as exc:
        raise CatalogFileError(f"store.catalog {path}: cannot be read ({exc.strerror})") from None
    if head[8:12] != _DUCKDB_MAGIC:
        raise CatalogFileError(f"store.catalog {path} is not a DuckDB catalog file")


@dataclass(frozen=True)
class Listed:
    run_id: str
    table: str
    path: Path
    checked: bool  # written by a compaction under this SCHEMA_VERSION: no need to read it
    rows: int  # as its manifest line says


class Store:
    """Output directory layout, shard commits, run records and the DuckDB catalog."""

    def __init__(
        self,
        root: str | Path,
        catalog: str | Path | None = None,
        compression: str = "zstd",
        compression_level: int = 3,
    ) -> None:
        self.root = Path(root).resolve()
        self.catalog_path = Path(catalog).resolve() if catalog else self.root / "curriculum.duckdb"
        self.compression = compression
        self.compression_level = compression_level
        self.root.mkdir(parents=True, exist_ok=True)
        # Landing reads every run's manifest three times (compaction, listing, sweep): each
        # is parsed again only when its file changed (inode, size or mtime).
        self._run_dirs: dict[str, Path] = {}
        self._manifests: dict[str, tuple[tuple[int, int, int], list[dict[str, Any]]]] = {}

    @classmethod
    def from_config(cls, cfg: PipelineConfig) -> Store:
        return cls(
            cfg.resolve_path(cfg.store.out_dir),
            cfg.resolve_path(cfg.store.catalog),
            cfg.store.compression,
            cfg.store.compression_level,
        )

    # ---- layout -------------------------------------------------------------------------
    def run_dir(self, run_id: str) -> Path:
        """runs/<run_id>: the run id must follow the identifier rule (it names a folder)."""
        if (path := self._run_dirs.get(run_id)) is None:
            path = path_within(self.root, "runs", check_identifier(run_id, "run id"))
            self._run_dirs[run_id] = path
        return path

    def quality_path(self, table: str, name: str) -> Path:
        """One file of a quality table: quality/<table>/<name>.parquet, replaced
        whole by the check that writes it and listed by every catalog refresh."""
        if table not in QUALITY_TABLES:
            raise StoreError(f"{table!r} is not a quality table ({', '.join(QUALITY_TABLES)})")
        return path_within(self.root, "quality", table, f"{check_identifier(name, 'name')}.parquet")

    def quality_files(self) -> dict[str, list[Path]]:
        return {t: sorted((self.root / "quality" / t).glob("*.parquet")) for t in QUALITY_TABLES}

    def shard_relpath(self, table: str, run_id: str, run_date: dt.date, shard: str) -> str:
        check_identifier(run_id, "run id")
        check_identifier(shard, "shard name")
        return (
            f"shards/{table}/run_date={run_date.isoformat()}/run_id={run_id}/part-{shard}.parquet"
        )

    # ---- shards ---------------------------------------------------------------------------
    def write_shard(
        self, table: str, run_id: str, run_date: dt.date, shard: str, data: pa.Table | list[dict]
    ) -> ShardFile:
        """Write one table's file of a shard group. Not visible until `commit` lists it."""
        if table not in SHARDED_TABLES:
            raise StoreError(f"{table!r} is not a sharded table ({', '.join(SHARDED_TABLES)})")
        tbl = conform(table, data)
        rel = self.shard_relpath(table, run_id, run_date, shard)
        digest, size = write_parquet_atomic(
            self.root / rel, tbl, self.compression, self.compression_level, within=self.root
        )
        return ShardFile(table, rel, tbl.num_rows, digest, size)

    def commit(
        self, run_id: str, shard: str, files: list[ShardFile], covers: list[str] | None = None
    ) -> None:
        """Append one manifest line for the shard group: the commit point. `covers` names the
        groups it replaces (a compaction's): from this line on they are read from its files.
        A line no reader would take (`manifest_problem`: a file outside the store, a name
        that is not one) is refused before anything is written."""
        entry: dict[str, Any] = {
            "run_id": run_id,
            "shard": shard,
            "schema_version": SCHEMA_VERSION,
            "committed_at": utcnow().isoformat(),
            "files": [asdict(f) for f in files],
        }
        if covers is not None:
            entry["covers"] = covers
        why = manifest_problem(entry, self.root)
        if why is not None:
            raise PathEscapeError(f"run {run_id} shard {shard!a}: not committed: {why}")
        line = orjson.dumps(entry)
        manifest = self.run_dir(run_id) / "manifest.jsonl"
        manifest.parent.mkdir(parents=True, exist_ok=True)
        with manifest.open("ab+") as fh:
            # A crash mid-append leaves a torn last line; start ours on a fresh line so it
            # is not glued to the torn one and lost with it.
            fh.seek(0, os.SEEK_END)
            if fh.tell() > 0:
                fh.seek(-1, os.SEEK_END)
                if fh.read(1) != b"\n":
                    fh.write(b"\n")
            fh.write(line + b"\n")
            fh.flush()
            os.fsync(fh.fileno())

    def manifest(self, run_id: str) -> dict[str, dict[str, Any]]:
        """The live shard groups of a run, by shard name (`live_groups`)."""
        return live_groups(self.manifest_lines(run_id))

    def manifest_lines(self, run_id: str) -> list[dict[str, Any]]:
        """Every committed line of a run's manifest, in commit order (torn lines skipped).
        The lines are shared with later calls: read them, never change them."""
        path = self.run_dir(run_id) / "manifest.jsonl"
        try:
            st = path.stat()
        except FileNotFoundError:
            return []
        key = (st.st_ino, st.st_size, st.st_mtime_ns)
        cached = self._manifests.get(run_id)
        if cached is None or cached[0] != key:
            cached = (key, read_manifest(path, self.root))
            self._manifests[run_id] = cached
        return list(cached[1])

    def commit_once(
        self, table: str, run_id: str, run_date: dt.date, shard: str, rows: list[dict]
    ) -> bool:
        """Write and commit a one-file shard group unless it is committed already (a rerun of
        the run lists it once); True when it was written now."""
        if shard in self.completed_shards(run_id, verify=False):
            return False
        self.commit(run_id, shard, [self.write_shard(table, run_id, run_date, shard, rows)])
        return True

    def completed_shards(self, run_id: str, verify: bool = True) -> set[str]:
        """Shard groups whose files all exist (and match their checksums when verify); the
        groups a compaction covers count as done while its files do."""
        done: set[str] = set()
        for shard, entry in self.manifest(run_id).items():
            ok = True
            for f in entry["files"]:
                p = self.root / f["path"]
                if not p.exists() or (verify and sha256_file(p) != f["sha256"]):
                    log.warning("run %s shard %s: %s missing or changed; redoing", run_id, shard, p)
                    ok = False
                    break
            if ok:
                done.add(shard)
                done.update(entry.get("covers", ()))
        return done

    def run_ids(self) -> list[str]:
        base = self.root / "runs"
        if not base.exists():
            return []
        # Only folders a run id can name (not a leftover temporary or a hand-made folder).
        return sorted(p.name for p in base.iterdir() if p.is_dir() and is_identifier(p.name))

    def committed_listing(self) -> list[Listed]:
        """Every live committed file of every run, with its run and whether its schema is
        known to be this code's contract: a compaction under this schema version wrote it."""
        out = []
        for run_id in self.run_ids():
            for shard, entry in self.manifest(run_id).items():
                checked = shard == COMPACTED and entry.get("schema_version") == SCHEMA_VERSION
                for f in entry["files"]:
                    out.append(Listed(run_id, f["table"], self.root / f["path"], checked,
                                      f["rows"]))  # fmt: skip
        return out

    def read_run_table(self, run_id: str, table: str) -> pa.Table:
        """All committed rows of one table for one run (contract-checked)."""
        paths = [
            self.root / f["path"]
            for entry in self.manifest(run_id).values()
            for f in entry["files"]
            if f["table"] == table
        ]
        parts = [read_shard(p, table) for p in sorted(paths)]
        return pa.concat_tables(parts) if parts else schema_for(table).empty_table()

    # ---- runs ---------------------------------------------------------------------------
    def write_run(self, record: dict[str, Any]) -> None:
        tbl = pa.Table.from_pylist([record], schema=schema_for("runs"))
        path = self.run_dir(record["run_id"]) / "run.parquet"
        write_parquet_atomic(path, tbl, within=self.root)

    def read_run(self, run_id: str) -> dict[str, Any] | None:
        path = self.run_dir(run_id) / "run.parquet"
        return read_shard(path, "runs").to_pylist()[0] if path.exists() else None

    def latest_run(self, config_hash: str | None = None) -> dict[str, Any] | None:
        """The run record started last (ties: the larger id), as the catalog's `runs` view
        orders; only among runs of `config_hash` when given."""
        runs = [
            r
            for r in map(self.read_run, self.run_ids())
            if r and config_hash in (None, r["config_hash"])
        ]
        return max(runs, key=lambda r: (r["started_at"], r["run_id"]), default=None)

    def latest_run_id(self) -> str | None:
        latest = self.latest_run()
        return latest["run_id"] if latest else None

    # ---- catalog --------------------------------------------------------------------------
    def _catalog_lock(self) -> contextlib.AbstractContextManager[None]:
        return exclusive_lock(self.catalog_path.with_suffix(".lock"))

    def refresh_catalog(self, artifacts: dict[str, list[Path]] | None = None) -> Path:
        """(Re)create the DuckDB views over exactly the committed shards, then views.sql.

        `artifacts` maps non-sharded tables (passages, entities, ...) to their current files.
        `kg_rejects` (the Wikidata ingest's reject parts) joins the runs' rejects in the
        `rejects` view. Every file's schema is checked against its contract first, but those a
        compaction wrote under this SCHEMA_VERSION (checked as they were written).
        """
        check_catalog_file(self.catalog_path, must_exist=False)  # never replace a user's file
        listing = self.committed_listing()
        for item in listing:
            if not item.checked:
                check_schema(item.table, pq.read_schema(item.path), where=str(item.path))
        runs = sorted((self.root / "runs").glob("*/run.parquet"))
        artifacts = {
            **self.quality_files(),
            "reviews": review_files(self.root),
            **(artifacts or {}),
        }
        for table, paths in artifacts.items():
            for p in paths:
                check_schema("rejects" if table == "kg_rejects" else table, pq.read_schema(p),
                             where=str(p))  # fmt: skip
        views, read = base_views(listing, runs, artifacts)
        # Built under a temporary name and renamed over the old catalog: auditors holding the
        # old file open keep reading it (DuckDB would refuse to open it for writing), and a
        # crash mid-refresh leaves the previous catalog intact. It starts as a copy of the
        # store's catalog with views.sql bound (catalog_views.py).
        with self._catalog_lock(), atomic_path(self.catalog_path) as tmp:
            try:
                sql = views_sql()
                start_catalog(tmp, views, sql, self.root / "cache")
                with duckdb.connect(str(tmp)) as con:
                    build_catalog(con, views, sql, listing, runs, read, index_root=self.root)
                    # Where the store and the catalog are (read-only connections list the
                    # store's reviews afresh, and tell a catalog copied or moved with its
                    # store: settle_catalog), and the artifacts it was given, named relative
                    # to the store, so that such a catalog is rebuilt over its own store.
                    con.execute(
                        "CREATE OR REPLACE TABLE catalog_info AS SELECT ?::VARCHAR AS "
                        "store_root, now() AS refreshed_at, ?::VARCHAR AS catalog_path",
                        [str(self.root), str(self.catalog_path)],
                    )
                    record_artifacts(con, self.root, artifacts, {"reviews", *QUALITY_TABLES})
                    con.execute("CHECKPOINT")
            finally:
                tmp.with_name(tmp.name + ".wal").unlink(missing_ok=True)
        return self.catalog_path


def base_views(
    listing: list[Listed], runs: list[Path], artifacts: dict[str, list[Path]]
) -> tuple[list[BaseView], dict[str, list[Path]]]:
    """The catalog's base views over `listing` (sharded tables), `runs` and `artifacts` (a
    table with no files gets an empty view with the contract's columns), and the artifacts
    with every table the views read (none given: no file). A derived table (DERIVED_FROM) is
    read from the compactions' files where a run has one (`<table>_files`), and computed live
    from its sources for the other runs (`<source>_without_<table>`)."""
    artifacts = {t: [] for t in ("passages", *QUALITY_TABLES, "reviews")} | artifacts
    kg_rejects = artifacts.pop("kg_rejects", [])
    files: dict[str, list[Path]] = {t: [] for t in SHARDED_TABLES}
    for item in listing:
        files[item.table].append(item.path)
    views = [BaseView(t, t, files[t], True) for t in SHARDED_TABLES if t != "rejects"]
    views = [v for v in views if v.table not in DERIVED_FROM]
    for derived, sources in DERIVED_FROM.items():
        views.append(BaseView(derived, f"{derived}_files", files[derived], True))
        done = {item.run_id for item in listing if item.table == derived}
        for table in sources:
            paths = [i.path for i in listing if i.table == table and i.run_id not in done]
            views.append(BaseView(table, f"{table}_without_{derived}", paths, True))
    views += [
        BaseView("rejects", "_run_rejects", files["rejects"], True),
        BaseView("rejects", "_kg_rejects", kg_rejects, False),
        BaseView("runs", "runs", runs, False),
    ]
    views += [BaseView(table, table, paths, False) for table, paths in artifacts.items()]
    return views, artifacts


def build_catalog(
    con: duckdb.DuckDBPyConnection, views: list[BaseView], sql: str, listing: list[Listed],
    runs: list[Path], artifacts: dict[str, list[Path]], index_root: Path | None = None,
) -> None:  # fmt: skip
    """On a catalog with views.sql (`sql`) bound (start_catalog): each base view over its
    files, then the tables views.sql materialises, computed over them (the duplicate ranking,
    the evidence check, the audits' per-run results) from the store's run indexes under
    `index_root` (a store's root) where one is given."""
    for v in views:
        create_view(con, v.name, v.paths, v.hive)
    _materialise(con, listing, artifacts["passages"], sql, index_root)
    # Each run's files of the per-run base views, for a reader of some runs (scope_to_runs),
    # with their rows as the manifests say (a run record is one row).
    run_of = {i.path: (i.run_id, i.rows) for i in listing} | {p: (p.parent.name, 1) for p in runs}
    files_of = [{"view": name, "run_id": run_of[p][0], "path": str(p), "hive": hive,
                 "rows": run_of[p][1]}
                for _, name, paths, hive in views for p in paths if p in run_of]  # fmt: skip
    schema = pa.schema([("view", pa.string()), ("run_id", pa.string()), ("path", pa.string()),
                        ("hive", pa.bool_()), ("rows", pa.int64())])  # fmt: skip
    con.register("_files_arrow", pa.Table.from_pylist(files_of, schema=schema))
    con.execute("CREATE OR REPLACE TABLE catalog_files AS SELECT * FROM _files_arrow")
    con.unregister("_files_arrow")
    own: dict[str, list[Path]] = {}  # each run's own files: its per-run results' inputs
    for path, (run_id, _) in run_of.items():
        own.setdefault(run_id, []).append(path)
    materialise_run_results(con, index_root, own, artifacts, {"views": sql})


def macro_catalog(
    con: duckdb.DuckDBPyConnection, listing: list[Listed], tables: Sequence[str],
    macros: Sequence[str],
) -> None:  # fmt: skip
    """A run's compaction's catalog: base views of `tables` over `listing`, as the catalog's
    (empty where the run has no file), and views.sql's `macros` alone (not the views)."""
    for table in tables:
        empty_table(con, table, table)
        create_view(con, table, [i.path for i in listing if i.table == table], True)
    queries = [x.query for x in duckdb.extract_statements(views_sql())]
    heads = (re.match(r"CREATE\s+OR\s+REPLACE\s+MACRO\s+(\w+)\s*\(", q) for q in queries)
    found = {m[1]: m.string for m in heads if m}
    for name in macros:  # in the order given: a macro after those it calls
        if name not in found:
            raise StoreError(f"views.sql defines no macro {name}")
        con.execute(found[name])


def _materialise(
    con: duckdb.DuckDBPyConnection,
    listing: list[Listed],
    passages: list[Path],
    sql: str,
    index_root: Path | None,
) -> None:
    """The tables views.sql materialises, over every file: the duplicate ranking's losers
    and the evidence check's results, each from the store's run index of the compacted runs
    (pipeline/store/run_index.py) where a store root is given."""
    compacted = {item.run_id for item in listing if item.table == DUPLICATE_KEYS.source}
    facts = [(i.run_id, i.path) for i in listing if i.table == DUPLICATE_KEYS.source]
    with indexed(con, index_root, DUPLICATE_KEYS, facts, {"views": sql}) as rel:
        con.execute(f"CREATE OR REPLACE TEMP VIEW duplicate_keys AS {rel['keys']}")
        try:
            con.execute(
                "CREATE OR REPLACE TABLE record_duplicates AS "
                "SELECT * FROM record_duplicate_ranking"
            )
        finally:
            con.execute("DROP VIEW temp.duplicate_keys")
    checked = [(i.run_id, i.path) for i in listing
               if i.table == EVIDENCE.source and i.run_id in compacted]  # fmt: skip
    corpus = [file_identity(p, index_root) for p in passages] if index_root else []
    with indexed(con, index_root, EVIDENCE, checked, {"views": sql, "passages": corpus}) as rel:
        for table in ("counts", "mismatches"):
            con.execute(f"CREATE OR REPLACE TABLE evidence_{table} AS {rel[table]}")


class StoreMovedError(StoreError, BadInputError):
    """A catalog that lies in another store than the one it was built from (copied or moved
    with it) and cannot be rebuilt where it is: reading it would read the other store."""


def settle_catalog(catalog: str | Path) -> bool:
    """A catalog copied or moved with its store (`cp -a out backup/`) still names the files of
    the store it was built from: its views, its reviews, where the browser writes a review.
    Before it is read, such a catalog is rebuilt over the files of the store it lies in
    (placement.moved_catalog), so a copy never reads or writes the original. True when it
    was rebuilt; StoreMovedError when it cannot be (a read-only copy)."""
    path = Path(catalog)
    if (moved := moved_catalog(path)) is None:
        return False
    root, here, files = moved
    log.warning(
        "%s was built for the store at %s and lies in %s (a copy or a move): rebuilding it "
        "over the files of %s", path, root, here, here,
    )  # fmt: skip
    try:
        Store(here, path).refresh_catalog(files)
    except (OSError, duckdb.Error) as exc:
        raise StoreMovedError(
            f"{path} was built for the store at {root} but lies in {here}, and cannot be "
            f"rebuilt there ({first_line(exc)}); reading it would read the other store",
            f"make the copy writable, or land it again: `curriculum nightly --run-id <a "
            f"finished run> --set store.out_dir={here}` redoes no work and rebuilds it",
        ) from None
    return True


def _open_readonly(path: Path) -> duckdb.DuckDBPyConnection:
    try:
        return duckdb.connect(str(path), read_only=True)
    except duckdb.IOException as exc:
        if "not a valid DuckDB database" in str(exc):
            raise CatalogFileError(f"store.catalog {path} is not a DuckDB catalog file") from None
        raise


def connect_readonly(
    catalog: str | Path, reviews: Sequence[Path] | None = None
) -> duckdb.DuckDBPyConnection:
    """A read-only catalog connection whose `reviews` are the review files on disk now, or
    `reviews` (attach_reviews); a catalog that lies in another store than it was built for
    is rebuilt over its own store first (settle_catalog)."""
    path = Path(catalog)
    check_catalog_file(path)
    con = _open_readonly(path)
    if moved_catalog(path, con) is not None:  # rebuilt over its own store, then opened again
        con.close()
        settle_catalog(path)
        con = _open_readonly(path)
    root = store_root(con)
    if root is not None:  # the reviews written since the last refresh
        attach_reviews(con, root, reviews)
    return con


def store_root(con: duckdb.DuckDBPyConnection) -> Path | None:
    """The store a catalog was built from (None: a catalog from before says not)."""
    try:  # fetchall: a result left half-read would refuse the caller's next query on `con`
        ((root,),) = con.execute("SELECT store_root FROM catalog_info").fetchall()
    except duckdb.CatalogException:
        return None
    return Path(root)


__all__ = [
    "CATALOG_RUNS",
    "COMPACTED",
    "DERIVED_FROM",
    "HAS_CATALOG_FILES",
    "SHARDED_TABLES",
    "CatalogFileError",
    "Listed",
    "ShardFile",
    "Store",
    "StoreError",
    "StoreMovedError",
    "build_catalog",
    "catalog_runs",
    "check_catalog_file",
    "connect_readonly",
    "live_groups",
    "macro_catalog",
    "read_manifest",
    "scope_to_runs",
    "settle_catalog",
    "store_root",
    "views_sql",
]
