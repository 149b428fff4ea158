"""The numbers of one run's report, gathered from the catalog with SQL (read-only): funnel,
invalid reasons, V histogram, cluster / task / hop coverage, solver and WCR figures, rejects and
example records. The Markdown page and the plots are both drawn from this one snapshot."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import duckdb
import yaml

from pipeline.store.store import StoreError

if TYPE_CHECKING:
    from pipeline.core.config import PipelineConfig

FUNNEL_STAGES = (
    "generated",
    "posed",
    "valid",
    "verbatim",
    "above_v_threshold",
    "not_contaminated",
    "not_shortcut",
    "unique_answer",
    "connected",
    "needs_search",
    "accepted",
)
FUNNEL_LABELS = {
    "generated": "generated",
    "posed": "posed (answer and evidence found)",
    "valid": "valid",
    "verbatim": "valid + verbatim",
    "above_v_threshold": "V above the controls' threshold",
    # by the benchmarks `curriculum quality decontaminate` checked
    "not_contaminated": "not contaminated",
    "not_shortcut": "shortcut gate passed",  # gates.shortcut (h >= 2 only); not undetermined
    "unique_answer": "uniqueness gate passed",  # gates.uniqueness; not undetermined
    "connected": "every hop matters",  # gates.connected (h >= 2 only); not undetermined
    "needs_search": "one search is not enough",  # gates.one_search (h >= 2 only)
    "accepted": "accepted (no duplicate, within the single-hop cap)",
}
# The funnel view's counts beside its stages: what a gate could not decide, and what the
# search curriculum's gates and caps turned away or kept.
FUNNEL_COUNTS = (
    "shortcut_undetermined",
    "uniqueness_undetermined",
    "connected_undetermined",
    "duplicates",
    "template_questions",
    "single_hop_capped",
    "accepted_multi_hop",
    "accepted_obfuscated",
    "disconnected",
    "one_search_multi_hop",
    "bridge_leaks",
    "unstated_hop",
)
CONTROLS = ("real", "shuffled", "answer_only", "off_topic")
# Waypoint-coverage bins for the WCR plot: g = 0 on its own, then quarters; NULL = no KG path.
WCR_BINS = ("0", "(0, .25]", "(.25, .5]", "(.5, .75]", "(.75, 1]", "no KG path")
V_BINS = tuple(round(-1.0 + 0.2 * i, 1) for i in range(10))  # lower edges, as verifier_histogram


@dataclass
class RunData:
    run_id: str
    run: dict[str, Any] | None
    cfg: PipelineConfig | None  # parsed from the run's config_yaml
    models: dict[str, list[str]]
    index_fingerprints: list[str]
    funnel: dict[str, int]
    mean_v: float | None
    mean_reward: float | None
    scored_v: int
    invalid_reasons: list[tuple[str, int]]
    evidence_status: list[tuple[str, int]]
    v_hist: dict[float, int]
    iteration: int | None
    k: int | None
    by_cluster: list[tuple[int | None, int, int]]
    by_task: list[dict[str, Any]]
    by_hop: list[dict[str, Any]]
    solver: dict[str, Any]
    wcr_bins: list[tuple[str, int, int, float | None]]  # bin, rollouts, correct, acc
    rejects: list[tuple[str, str, int]]
    examples: list[dict[str, Any]] = field(default_factory=list)
    # Quality gates: the verifier_controls rows (one per method), V per control for
    # the plot ({method: {control: [V, ...]}}), shortcut_summary, and step_costs rows.
    controls: list[dict[str, Any]] = field(default_factory=list)
    control_values: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    gates: dict[str, Any] = field(default_factory=dict)
    step_costs: list[dict[str, Any]] = field(default_factory=list)
    # The run's generation cost in total and per accepted record (view run_costs).
    run_costs: dict[str, Any] = field(default_factory=dict)
    # Grounded curriculum: the run's verifier bar (verifier_thresholds row) and the funnel's
    # side counts (undetermined gates, duplicates, template questions).
    threshold: dict[str, Any] = field(default_factory=dict)
    funnel_extra: dict[str, int] = field(default_factory=dict)
    # Process signals of the solver protocols; empty dicts when the run has none.
    evalact: dict[str, Any] = field(default_factory=dict)
    arr: dict[str, Any] = field(default_factory=dict)


# ---- queries ----------------------------------------------------------------------------------
def _views(con: duckdb.DuckDBPyConnection) -> set[str]:
    rows = con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()
    return {r[0] for r in rows}


def _dicts(con: duckdb.DuckDBPyConnection, sql: str, params: Sequence[Any]) -> list[dict]:
    cur = con.execute(sql, list(params))
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, row, strict=True)) for row in cur.fetchall()]


def _parse_config(config_yaml: str | None) -> PipelineConfig | None:
    if not config_yaml:
        return None
    from pipeline.core.config import PipelineConfig

    try:
        return PipelineConfig.model_validate(yaml.safe_load(config_yaml))
    except Exception:  # an older run's config: the report uses the contract defaults instead
        return None


# Per-task / per-hop rows of the report: the catalog's summary views (schemas/views.sql).
_GROUP_SQL = """
SELECT {key} AS key, records AS generated, valid, verbatim, accepted, mean_v,
       mean_proposer_reward AS mean_reward, solver_accuracy
FROM {view} WHERE run_id = ? ORDER BY key
"""


def collect_run_data(con: duckdb.DuckDBPyConnection, run_id: str, n_examples: int) -> RunData:
    views = _views(con)
    p = [run_id]
    runs = _dicts(con, "SELECT * FROM runs WHERE run_id = ?", p)
    run = runs[0] if runs else None
    cfg = _parse_config(run["config_yaml"] if run else None)

    models = _models(con, p, cfg)
    fps = con.execute(
        "SELECT DISTINCT index_fingerprint FROM curriculum WHERE run_id = ? ORDER BY 1", p
    ).fetchall()

    f = _dicts(con, "SELECT * FROM funnel WHERE run_id = ?", p)
    stale = [s for s in FUNNEL_STAGES if f and s not in f[0]]
    if stale:
        raise StoreError(
            f"the catalog's views predate this release (its funnel has no {', '.join(stale)}); "
            "refresh the catalog by rerunning `curriculum nightly` for the run (it resumes and "
            "re-lands), then write the report"
        )
    funnel = {s: int(f[0][s]) if f else 0 for s in FUNNEL_STAGES}
    mean_v = f[0]["mean_v"] if f else None
    mean_reward = f[0]["mean_proposer_reward"] if f else None
    funnel_extra = {k: int(f[0][k]) if f else 0 for k in FUNNEL_COUNTS}
    thr = _dicts(con, "SELECT * FROM verifier_thresholds WHERE run_id = ?", p)
    scored_v = con.execute(
        "SELECT count(verifier_v) FROM curriculum WHERE run_id = ?", p
    ).fetchone()[0]

    invalid = con.execute(
        "SELECT reason, n FROM invalid_reasons WHERE run_id = ? AND reason <> 'valid' "
        "ORDER BY n DESC, reason",
        p,
    ).fetchall()
    evidence_status = con.execute(
        "SELECT evidence_status, count(*) FROM curriculum WHERE run_id = ? "
        "GROUP BY ALL ORDER BY 2 DESC, 1",
        p,
    ).fetchall()
    hist = dict.fromkeys(V_BINS, 0)
    for v_bin, n in con.execute(
        "SELECT v_bin, n FROM verifier_histogram WHERE run_id = ?", p
    ).fetchall():
        hist[round(float(v_bin), 1)] = int(n)

    iteration, k = _selector_iteration(con, views, p, cfg)
    by_cluster = con.execute(
        "SELECT cluster_id, records, valid FROM cluster_summary WHERE run_id = ? "
        "ORDER BY cluster_id NULLS LAST",
        p,
    ).fetchall()
    by_task = _dicts(con, _GROUP_SQL.format(key="task_type", view="task_summary"), p)
    by_hop = _dicts(con, _GROUP_SQL.format(key="hop_count", view="hop_summary"), p)

    solver, wcr_bins = _solver_figures(con, p)

    rejects = con.execute(
        "SELECT stage, reason, count(*) FROM rejects WHERE run_id = ? "
        "GROUP BY ALL ORDER BY 3 DESC, 1, 2",
        p,
    ).fetchall()
    examples = _dicts(
        con,
        """
        SELECT record_id, source_title, task_type, hop_count, question, answer, evidence,
               verifier_v, proposer_reward, difficulty
        FROM curriculum_valid WHERE run_id = ?
        ORDER BY verifier_v DESC NULLS LAST, proposer_reward DESC NULLS LAST, record_id
        LIMIT ?
        """,
        [run_id, n_examples],
    )
    controls, control_values, gates, costs = _gate_figures(con, views, p)
    run_costs = {}
    if "run_costs" in views:  # a catalog landed before the cost rows has no such view
        run_costs = (_dicts(con, "SELECT * FROM run_costs WHERE run_id = ?", p) or [{}])[0]
    evalact, arr = process_signals(con, run_id)
    return RunData(
        run_id=run_id,
        run=run,
        cfg=cfg,
        models=models,
        index_fingerprints=[r[0] for r in fps],
        funnel=funnel,
        funnel_extra=funnel_extra,
        threshold=thr[0] if thr else {},
        mean_v=mean_v,
        mean_reward=mean_reward,
        scored_v=int(scored_v),
        invalid_reasons=[(r, int(n)) for r, n in invalid],
        evidence_status=[(s, int(n)) for s, n in evidence_status],
        v_hist=hist,
        iteration=iteration,
        k=k,
        by_cluster=[(c, int(n), int(v)) for c, n, v in by_cluster],
        by_task=by_task,
        by_hop=by_hop,
        solver=solver,
        wcr_bins=wcr_bins,
        rejects=[(s, r, int(n)) for s, r, n in rejects],
        examples=examples,
        controls=controls,
        control_values=control_values,
        gates=gates,
        step_costs=costs,
        run_costs=run_costs,
        evalact=evalact,
        arr=arr,
    )


def _models(
    con: duckdb.DuckDBPyConnection, p: list[Any], cfg: PipelineConfig | None
) -> dict[str, list[str]]:
    """The models the run's records name; the configured ones when it has no records."""
    models: dict[str, list[str]] = {}
    for col in ("proposer_model", "solver_model", "embedder_model"):
        rows = con.execute(
            f"SELECT DISTINCT {col} FROM curriculum WHERE run_id = ? ORDER BY 1", p
        ).fetchall()
        models[col] = [r[0] for r in rows]
    if cfg is not None:  # no records: name the configured models instead
        models["proposer_model"] = models["proposer_model"] or [cfg.llm.model]
        models["solver_model"] = models["solver_model"] or [cfg.llm.model]
        models["embedder_model"] = models["embedder_model"] or [cfg.embedding.model]
    return models


def _selector_iteration(
    con: duckdb.DuckDBPyConnection, views: set[str], p: list[Any], cfg: PipelineConfig | None
) -> tuple[int | None, int | None]:
    """The selector iteration that planned the run and its cluster count K (None: unknown)."""
    iteration = k = None
    if "run_plan" in views:
        iteration = con.execute(
            "SELECT max(iteration) FROM run_plan WHERE run_id = ?", p
        ).fetchone()[0]
    if iteration is not None and "clusters" in views:
        ks = con.execute(
            "SELECT DISTINCT k FROM clusters WHERE iteration = ? ORDER BY k", [iteration]
        ).fetchall()
        if cfg is not None:
            from pipeline.selector.ucb import cluster_count

            k = cluster_count(cfg.selector.k0, cfg.selector.alpha, iteration - 1)
        elif len(ks) == 1:
            k = int(ks[0][0])
    return iteration, k


def _solver_figures(
    con: duckdb.DuckDBPyConnection, p: list[Any]
) -> tuple[dict[str, Any], list[tuple[str, int, int, float | None]]]:
    """The solver rollouts' means, and per waypoint-coverage bin: rollouts, correct, accuracy."""
    solver = _dicts(
        con,
        """
        SELECT count(*) AS rollouts,
               count(DISTINCT record_id) AS records,
               avg(correct::DOUBLE) AS accuracy,
               avg(solver_reward) AS solver_reward,
               avg(wcr_coverage) AS wcr_coverage,
               avg(wcr_coverage) FILTER (WHERE correct) AS wcr_coverage_correct,
               avg(wcr_coverage) FILTER (WHERE NOT correct) AS wcr_coverage_incorrect,
               avg(wcr_reward) AS wcr_reward,
               avg((evidence_hit_step IS NOT NULL)::DOUBLE) AS evidence_hit_rate
        FROM solver_rollouts WHERE run_id = ?
        """,
        p,
    )[0]
    solver["difficulty"] = con.execute(
        "SELECT avg(difficulty) FROM curriculum WHERE run_id = ?", p
    ).fetchone()[0]
    wcr = {
        label: (int(n), int(ok), acc)
        for label, n, ok, acc in con.execute(
            """
            SELECT CASE WHEN wcr_coverage IS NULL THEN 'no KG path'
                        WHEN wcr_coverage <= 0 THEN '0'
                        WHEN wcr_coverage <= 0.25 THEN '(0, .25]'
                        WHEN wcr_coverage <= 0.5 THEN '(.25, .5]'
                        WHEN wcr_coverage <= 0.75 THEN '(.5, .75]'
                        ELSE '(.75, 1]' END AS bin,
                   count(*), count(*) FILTER (WHERE correct), avg(correct::DOUBLE)
            FROM solver_rollouts WHERE run_id = ? GROUP BY ALL
            """,
            p,
        ).fetchall()
    }
    wcr_bins = [(b, *wcr.get(b, (0, 0, None))) for b in WCR_BINS]
    return solver, wcr_bins


def _gate_figures(
    con: duckdb.DuckDBPyConnection, views: set[str], p: list[Any]
) -> tuple[
    list[dict[str, Any]], dict[str, dict[str, list[float]]], dict[str, Any], list[dict[str, Any]]
]:
    """The verifier controls (rows, V per control), the shortcut summary and the step costs;
    empty in a catalog landed before the gates' views."""
    controls: list[dict[str, Any]] = []
    control_values: dict[str, dict[str, list[float]]] = {}
    gates: dict[str, Any] = {}
    costs: list[dict[str, Any]] = []
    if "verifier_controls" in views:
        controls = _dicts(
            con, "SELECT * FROM verifier_controls WHERE run_id = ? ORDER BY method", p
        )
        for method, control, v in con.execute(
            "SELECT method, control, v FROM control_scores WHERE run_id = ? "
            "ORDER BY method, control, record_id",
            p,
        ).fetchall():
            control_values.setdefault(method, {}).setdefault(control, []).append(float(v))
        gates = (_dicts(con, "SELECT * FROM shortcut_summary WHERE run_id = ?", p) or [{}])[0]
        costs = _dicts(
            con, "SELECT * FROM step_costs WHERE run_id = ? ORDER BY seconds DESC", p
        )  # fmt: skip
    return controls, control_values, gates, costs


def process_signals(
    con: duckdb.DuckDBPyConnection, run_id: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """EvalAct's z calibration and ARR's entropy patterns vs correctness, each only when the
    run has such rollouts (and the catalog has the views: one landed before them has not)."""
    views, p = _views(con), [run_id]
    evalact: dict[str, Any] = {}
    if {"evalact_calibration", "evalact_violations"} <= views:
        rows = _dicts(con, "SELECT * FROM evalact_calibration WHERE run_id = ?", p)
        if rows:
            evalact = rows[0]
            evalact["violation_reasons"] = con.execute(
                "SELECT reason, n FROM evalact_violations WHERE run_id = ? ORDER BY n DESC, reason",
                p,
            ).fetchall()
    arr: dict[str, Any] = {}
    if {"arr_calibration", "arr_entropy_patterns", "arr_violations"} <= views:
        rows = _dicts(con, "SELECT * FROM arr_calibration WHERE run_id = ?", p)
        if rows:
            arr = rows[0]
            arr["patterns"] = _dicts(
                con,
                "SELECT entropy_pattern, dialogues, share, accuracy, mean_f1 "
                "FROM arr_entropy_patterns WHERE run_id = ? "
                "ORDER BY array_position(['D', 'ID', 'F', 'DI', 'I'], entropy_pattern) "
                "NULLS LAST",
                p,
            )
            arr["violation_reasons"] = con.execute(
                "SELECT role, reason, n FROM arr_violations WHERE run_id = ? "
                "ORDER BY n DESC, role, reason",
                p,
            ).fetchall()
    return evalact, arr


def coverage_rows(rows: list[dict], keys: Sequence[Any]) -> list[dict]:
    """One row per configured key (zeros for those never drawn), then any unexpected keys."""
    by = {r["key"]: r for r in rows}
    zero = {
        "generated": 0,
        "valid": 0,
        "verbatim": 0,
        "accepted": 0,
        "mean_v": None,
        "mean_reward": None,
        "solver_accuracy": None,
    }
    out = [by.get(k, {"key": k, **zero}) for k in keys]
    out += [r for r in rows if r["key"] not in set(keys)]
    return out


def task_keys(d: RunData) -> list[str]:
    from pipeline.core.config import SelectorConfig

    return list((d.cfg.selector if d.cfg else SelectorConfig()).task_types)


def hop_keys(d: RunData) -> list[int]:
    from pipeline.core.config import SelectorConfig

    return sorted(int(h) for h in (d.cfg.selector if d.cfg else SelectorConfig()).hop_weights)
