"""views.sql bound once per store: the DuckDB file every catalog refresh starts from.

Creating views.sql's views and macros binds each of them, and that was half of a refresh
(0.35 s of 0.67 s on a three-night test store). What they bind to depends only on views.sql,
the contracts and the names of the base views, not on the store's files: so a refresh
copies a catalog file holding them bound over empty base views, kept under
`<store>/cache/` and named by a key of those inputs, then points each base view at its
files. DuckDB binds a view again at each query, over what its base views read then; the
refresh checked every file against its contract first, so the columns match those bound.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import NamedTuple

import duckdb
import pyarrow as pa

from pipeline.core.io import atomic_path, content_key
from pipeline.store.scoping import view_select
from schemas.tables import SCHEMA_VERSION, schema_for

log = logging.getLogger(__name__)


class BaseView(NamedTuple):
    """A view over a table's files: the contract it follows, its name, its files (none: the
    contract's columns, empty) and whether they lie in hive partitions."""

    table: str
    name: str
    paths: list[Path]
    hive: bool


def views_sql() -> str:
    return resources.files("schemas").joinpath("views.sql").read_text(encoding="utf-8")


def empty_table(con: duckdb.DuckDBPyConnection, table: str, name: str) -> None:
    """`_empty_<name>`: the contract's columns, empty. Unioned by name with the files, so
    shards written before a column existed read it as NULL and dependent views stay valid."""
    con.register("_empty_arrow", pa.Table.from_pylist([], schema=schema_for(table)))
    con.execute(f"CREATE OR REPLACE TABLE _empty_{name} AS SELECT * FROM _empty_arrow")
    con.unregister("_empty_arrow")


def create_view(
    con: duckdb.DuckDBPyConnection, name: str, paths: Sequence[Path], hive: bool
) -> None:
    con.execute(f"CREATE OR REPLACE VIEW {name} AS {view_select(name, paths, hive)}")


def template_key(views: Sequence[BaseView], sql: str) -> str:
    """What the bound views depend on: views.sql, each base view's name, contract and
    partitioning, the contracts' columns, and the DuckDB that wrote the file."""
    return content_key({
        "views.sql": sql,
        "duckdb": duckdb.__version__,
        "schema_version": SCHEMA_VERSION,
        "base": [(v.table, v.name, v.hive, str(schema_for(v.table))) for v in views],
    })  # fmt: skip


def bind_views(path: Path, views: Sequence[BaseView], sql: str) -> None:
    """A catalog file of empty base views with views.sql created over them."""
    with duckdb.connect(str(path)) as con:
        for v in views:
            empty_table(con, v.table, v.name)
            create_view(con, v.name, [], v.hive)
        # `rejects` = the runs' reject shards + the KG ingest's rejects (stage 'kg', no
        # run_date), so one view answers "what input did the pipeline refuse".
        con.execute(
            "CREATE OR REPLACE VIEW rejects AS SELECT * FROM _run_rejects "
            "UNION ALL BY NAME SELECT * FROM _kg_rejects"
        )
        con.execute(sql)
        con.execute("CHECKPOINT")
    path.with_name(path.name + ".wal").unlink(missing_ok=True)


def start_catalog(dest: Path, views: Sequence[BaseView], sql: str, cache: Path) -> None:
    """Write at `dest` the catalog file with views.sql bound over empty `views`: a copy of the
    store's template for these inputs, made first if the store has none (it replaces the
    templates of other inputs, views.sql's earlier versions). Where the cache cannot be
    written, views.sql is bound in `dest` itself."""
    template = cache / f"catalog_views-{template_key(views, sql)}.duckdb"
    if not template.is_file():
        try:
            with atomic_path(template) as tmp:
                bind_views(tmp, views, sql)
        except (OSError, duckdb.IOException) as exc:
            log.warning("catalog template %s not used (%s): binding views.sql", template, exc)
            bind_views(dest, views, sql)
            return
        for old in cache.glob("catalog_views-*.duckdb"):
            if old != template:
                old.unlink(missing_ok=True)
    shutil.copyfile(template, dest)
