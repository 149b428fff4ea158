"""The process signals an export carries per record: the EvalAct / ARR rollouts'
PCAR multipliers and ARR process advantages, read from the catalog beside the curriculum."""

from __future__ import annotations

from typing import Any

import duckdb
import pyarrow as pa

_PROCESS_SQL = """
WITH seg AS (
    SELECT rollout_id,
        list(pcar_multiplier ORDER BY segment) AS pcar_multipliers,
        list(calibrated_advantage ORDER BY segment) AS calibrated_advantages
    FROM evalact_segments GROUP BY rollout_id
), crit AS (
    SELECT rollout_id,
        list(turn ORDER BY action_index) AS critique_turns,
        list(process_advantage ORDER BY action_index) AS process_advantages,
        list(advantage ORDER BY action_index) AS critique_advantages
    FROM arr_turns WHERE critique GROUP BY rollout_id
)
SELECT s.record_id, s.sample, s.protocol, s.outcome_reward, s.outcome_advantage,
    seg.pcar_multipliers, seg.calibrated_advantages, s.verifier_advantage,
    crit.critique_turns, crit.process_advantages, crit.critique_advantages, s.entropy_pattern
FROM solver_rollouts s
JOIN _export_ids USING (record_id)
LEFT JOIN seg USING (rollout_id)
LEFT JOIN crit USING (rollout_id)
WHERE s.protocol IN ('evalact', 'arr')
ORDER BY s.record_id, s.sample
"""


def attach_solver_process(
    con: duckdb.DuckDBPyConnection, rows: list[dict[str, Any]], views: set[str]
) -> None:
    """Each row's `solver_process` (schemas/exports.SOLVER_PROCESS): its EvalAct / ARR
    rollouts' process signals, None for records solved under search_r1 — and for every record
    of a catalog landed before the arr_turns table (it has no such rollouts to carry)."""
    for r in rows:
        r["solver_process"] = None
    if not rows or not {"evalact_segments", "arr_turns"} <= views:
        return
    described = con.execute("SELECT column_name FROM (DESCRIBE solver_rollouts)").fetchall()
    cols = {c for (c,) in described}
    if "verifier_advantage" not in cols:
        return
    by_id = {r["record_id"]: r for r in rows}
    con.register("_export_ids", pa.table({"record_id": list(by_id)}))
    try:
        for rec in con.sql(_PROCESS_SQL).to_arrow_table().to_pylist():
            row = by_id[rec.pop("record_id")]
            row["solver_process"] = (row["solver_process"] or []) + [rec]
    finally:
        con.unregister("_export_ids")
