"""The output store under the stages: the directory layout, shard files and their per-run
manifests (the commit point), run records, and the DuckDB catalog of views over exactly the
committed files (`store.py`); which run a record belongs to and its lifecycle (`runs.py`).
The read side over that catalog (SQL, audits, report, export) is `pipeline/catalog/`."""
