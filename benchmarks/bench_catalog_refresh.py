"""The catalog refresh from the store's template (views.sql bound once, copied at each refresh)
against views.sql bound at each refresh, side by side in one run.

A refresh rebuilds the DuckDB catalog: the base views over the store's committed files, the
tables views.sql materialises, and views.sql's views and macros, each bound as it is created.
pipeline/store/catalog_views.py keeps views.sql bound over empty base views in a file under
<store>/cache/ and starts every refresh from a copy of it. The baseline binds views.sql in
the new catalog itself (`bind_views`), as every refresh did before the template; the run
indexes are used alike. Two copies of one synthetic store (benchmarks/synthetic_store.py,
--nights nights of --records records) are refreshed alternately, --repeat times each, in
this process; the first refresh of the template's store (which writes the template) is
timed apart.

    .venv/bin/python benchmarks/bench_catalog_refresh.py --nights 3 --records 120 --repeat 15
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from synthetic_store import Corpus, artifacts, write_artifacts, write_night  # noqa: E402

from pipeline.store import store as store_module  # noqa: E402
from pipeline.store.catalog_views import bind_views  # noqa: E402
from pipeline.store.store import Store  # noqa: E402


def store_of(root: Path, nights: int, records: int) -> Store:
    corpus = Corpus(np.random.default_rng(5), 400)
    store = Store(root, root / "curriculum.duckdb")
    write_artifacts(root, corpus)
    for night in range(nights):
        write_night(store, corpus, night, records, 40, 5)
    return store


@contextlib.contextmanager
def binding_in_place() -> Iterator[None]:
    """Refreshes that bind views.sql in the new catalog itself, as before the template."""
    original = store_module.start_catalog
    store_module.start_catalog = lambda dest, views, sql, cache: bind_views(dest, views, sql)
    try:
        yield
    finally:
        store_module.start_catalog = original


def timed(store: Store) -> float:
    t = time.perf_counter()
    store.refresh_catalog(artifacts(store.root))
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nights", type=int, default=3)
    ap.add_argument("--records", type=int, default=120)
    ap.add_argument("--repeat", type=int, default=15)
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="bench-refresh-"))
    try:
        template = store_of(base / "template", args.nights, args.records)
        shutil.copytree(template.root, base / "in_place")
        in_place = Store(base / "in_place", base / "in_place" / "curriculum.duckdb")
        first = timed(template)  # writes the template
        timed(in_place)  # both stores' run indexes filled
        times: dict[str, list[float]] = {"template": [], "in place": []}
        for _ in range(args.repeat):
            times["template"].append(timed(template))
            with binding_in_place():
                times["in place"].append(timed(in_place))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"store: {args.nights} nights of {args.records} records; {args.repeat} refreshes each")
    print(f"first refresh (writes the template): {first:.3f} s")
    for k, v in times.items():
        print(f"{k:>9}: median {med[k]:.3f} s  (min {min(v):.3f}, max {max(v):.3f})")
    print(f"views.sql bound in place / from the template: {med['in place'] / med['template']:.2f}x")


if __name__ == "__main__":
    main()
