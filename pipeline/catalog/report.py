"""The run report: one Markdown page plus PNG plots per landed run, from the catalog.

`write_run_report` reads the DuckDB catalog read-only, gathers one run's numbers with SQL
(funnel, invalid reasons, V histogram, cluster / task / hop coverage, solver and WCR figures,
rejects, example records) and writes `<out>/runs/<run_id>/report/`:

    report.md            the page; plots are linked by relative path
    funnel.png           generated -> valid -> valid + verbatim -> V > 0
    verifier_v.png       histogram of V = p+ - p- (0.2-wide bins, as the verifier_histogram view)
    clusters.png         records per selector cluster (all K clusters, zeros included)
    task_types.png       records per task type (all configured types, zeros included)
    hops.png             records per hop count (all configured hop counts, zeros included)
    wcr_vs_correct.png   solver accuracy by WCR waypoint-coverage bin

A run without records (or without valid ones) still gets every file; empty plots say "no data".
Every file is written to a temporary name and renamed. No Prefect here: flows/report.py
publishes the result as artifacts.
"""

from __future__ import annotations

import datetime as dt
import io
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import yaml

from pipeline.catalog.store import atomic_write_bytes, connect_readonly

REPORT_DIRNAME = "report"
MARKDOWN_NAME = "report.md"
PLOT_NAMES = {
    "funnel": "funnel.png",
    "verifier_v": "verifier_v.png",
    "clusters": "clusters.png",
    "task_types": "task_types.png",
    "hops": "hops.png",
    "wcr_vs_correct": "wcr_vs_correct.png",
}
FUNNEL_STAGES = ("generated", "valid", "verbatim", "v_positive")
FUNNEL_LABELS = {
    "generated": "generated",
    "valid": "valid",
    "verbatim": "valid + verbatim",
    "v_positive": "V > 0",
}
# Waypoint-coverage bins for the WCR plot: g = 0 on its own, then quarters; NULL = no KG path.
WCR_BINS = ("0", "(0, .25]", "(.25, .5]", "(.5, .75]", "(.75, 1]", "no KG path")
V_BINS = tuple(round(-1.0 + 0.2 * i, 1) for i in range(10))  # lower edges, as verifier_histogram


@dataclass(frozen=True)
class RunReport:
    """Where the report of one run was written, and its headline numbers."""

    run_id: str
    dir: Path
    markdown_path: Path
    plots: dict[str, Path]
    markdown: str
    status: str | None
    funnel: dict[str, int]
    mean_v: float | None
    mean_reward: float | None

    @property
    def paths(self) -> list[Path]:
        return [self.markdown_path, *self.plots.values()]

    def artifact_markdown(self) -> str:
        """The page for a UI that cannot see the report directory: image links become the
        plots' absolute paths."""

        def repl(m: re.Match[str]) -> str:
            return f"*{m.group(1)}*: `{self.dir / m.group(2)}`"

        return re.sub(r"!?\[([^\]]*)\]\(([^)\s/]+\.png)\)", repl, self.markdown)


@dataclass
class _Data:
    run_id: str
    run: dict[str, Any] | None
    cfg: Any  # PipelineConfig parsed from the run's config_yaml, or None
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


# ---- queries ----------------------------------------------------------------------------------
def _views(con: duckdb.DuckDBPyConnection) -> set[str]:
    rows = con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()
    return {r[0] for r in rows}


def _dicts(con: duckdb.DuckDBPyConnection, sql: str, params: Sequence[Any]) -> list[dict]:
    cur = con.execute(sql, list(params))
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, row, strict=True)) for row in cur.fetchall()]


def _parse_config(config_yaml: str | None):
    if not config_yaml:
        return None
    from pipeline.core.config import PipelineConfig

    try:
        return PipelineConfig.model_validate(yaml.safe_load(config_yaml))
    except Exception:  # an older run's config: the report uses the contract defaults instead
        return None


# Per-task / per-hop rows of the report: the catalog's summary views (schemas/views.sql).
_GROUP_SQL = """
SELECT {key} AS key, records AS generated, valid, verbatim, v_positive, mean_v,
       mean_proposer_reward AS mean_reward, solver_accuracy
FROM {view} WHERE run_id = ? ORDER BY key
"""


def _collect(con: duckdb.DuckDBPyConnection, run_id: str, n_examples: int) -> _Data:
    views = _views(con)
    p = [run_id]
    runs = _dicts(con, "SELECT * FROM runs WHERE run_id = ?", p)
    run = runs[0] if runs else None
    cfg = _parse_config(run["config_yaml"] if run else None)

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
    fps = con.execute(
        "SELECT DISTINCT index_fingerprint FROM curriculum WHERE run_id = ? ORDER BY 1", p
    ).fetchall()

    f = _dicts(con, "SELECT * FROM funnel WHERE run_id = ?", p)
    funnel = {s: int(f[0][s]) if f else 0 for s in FUNNEL_STAGES}
    mean_v = f[0]["mean_v"] if f else None
    mean_reward = f[0]["mean_proposer_reward"] if f else None
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
    by_cluster = con.execute(
        "SELECT cluster_id, records, valid FROM cluster_summary WHERE run_id = ? "
        "ORDER BY cluster_id NULLS LAST",
        p,
    ).fetchall()
    by_task = _dicts(con, _GROUP_SQL.format(key="task_type", view="task_summary"), p)
    by_hop = _dicts(con, _GROUP_SQL.format(key="hop_count", view="hop_summary"), p)

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
    return _Data(
        run_id=run_id,
        run=run,
        cfg=cfg,
        models=models,
        index_fingerprints=[r[0] for r in fps],
        funnel=funnel,
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
    )


# ---- plots ------------------------------------------------------------------------------------
def _figure(title: str, size: tuple[float, float] = (6.4, 3.6)):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=size, dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ax.set_title(title, fontsize=11)
    return fig, ax


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None})
    return buf.getvalue()


def _no_data(ax, what: str = "no data") -> None:
    ax.text(
        0.5, 0.5, what, ha="center", va="center", fontsize=14, color="0.4", transform=ax.transAxes
    )
    ax.set_xticks([])
    ax.set_yticks([])


def _label(ax, x: float, y: float, text: str) -> None:
    """A small label centred just above the bar top at (x, y)."""
    ax.annotate(
        text,
        (x, y),
        ha="center",
        va="bottom",
        fontsize=8,
        xytext=(0, 2),
        textcoords="offset points",
    )


def _bars(
    title: str,
    labels: Sequence[str],
    series: dict[str, Sequence[float]],
    ylabel: str,
    xlabel: str = "",
    empty: bool = False,
    annotate: Sequence[str] | None = None,
) -> bytes:
    """Grouped bar chart (one group per label, one bar per series) or a "no data" panel."""
    width = max(6.4, min(16.0, 0.45 * len(labels) * max(1, len(series)) + 2))
    fig, ax = _figure(title, (width, 3.6))
    if empty or not labels:
        _no_data(ax)
        return _png(fig)
    n = len(series)
    w = 0.8 / n
    xs = list(range(len(labels)))
    for i, (name, values) in enumerate(series.items()):
        offs = [x - 0.4 + w * (i + 0.5) for x in xs]
        ax.bar(offs, values, w, label=name)
    if annotate:
        tops = [max(vals[j] for vals in series.values()) for j in xs]
        for x, top, text in zip(xs, tops, annotate, strict=True):
            _label(ax, x, top, text)
    rotate = len(labels) > 8 and max(map(len, labels)) > 3
    ax.set_xticks(xs, labels, rotation=30 if rotate else 0, ha="right" if rotate else "center")
    ax.set_ylabel(ylabel)
    if xlabel:
        ax.set_xlabel(xlabel)
    ax.yaxis.get_major_locator().set_params(integer=True)
    ax.set_ylim(0, max(1.0, *(max(v) for v in series.values())) * 1.15)
    if n > 1:
        ax.legend(fontsize=8)
    return _png(fig)


def _plot_funnel(d: _Data) -> bytes:
    labels = [FUNNEL_LABELS[s] for s in FUNNEL_STAGES]
    counts = [d.funnel[s] for s in FUNNEL_STAGES]
    total = d.funnel["generated"]
    notes = [f"{c}" + (f" ({c / total:.0%})" if total else "") for c in counts]
    return _bars(
        f"Validity funnel — {d.run_id}",
        labels,
        {"records": counts},
        "records",
        empty=total == 0,
        annotate=notes,
    )


def _plot_v(d: _Data) -> bytes:
    fig, ax = _figure(f"Verifier score V = p+ − p− ({d.scored_v} records)")
    if d.scored_v == 0:
        _no_data(ax, "no data (no record was scored)")
        return _png(fig)
    ax.bar(list(d.v_hist), list(d.v_hist.values()), width=0.2, align="edge", edgecolor="white")
    ax.axvline(0.0, color="0.3", lw=0.8, ls="--")
    if d.mean_v is not None:
        ax.axvline(d.mean_v, color="C3", lw=1.2, label=f"mean {d.mean_v:+.3f}")
        ax.legend(fontsize=8)
    ax.set_xlim(-1.0, 1.0)
    ax.set_xlabel("V (bin lower edge; V = 1 in the top bin)")
    ax.set_ylabel("records")
    ax.yaxis.get_major_locator().set_params(integer=True)
    return _png(fig)


def _plot_clusters(d: _Data) -> bytes:
    counts = {c: (n, v) for c, n, v in d.by_cluster}
    ids: list[Any] = list(range(d.k)) if d.k else []
    ids += sorted((c for c in counts if c is not None and c not in ids), key=int)
    if None in counts:
        ids.append(None)
    labels = ["none" if c is None else str(c) for c in ids]
    drawn = sum(1 for c in ids if c is not None and c in counts)
    k = f"{d.k}" if d.k else "?"
    return _bars(
        f"Cluster coverage: {drawn} of {k} clusters drawn",
        labels,
        {
            "generated": [counts.get(c, (0, 0))[0] for c in ids],
            "valid": [counts.get(c, (0, 0))[1] for c in ids],
        },
        "records",
        xlabel="cluster id",
        empty=not counts,
    )


def _coverage_rows(rows: list[dict], keys: Sequence[Any]) -> list[dict]:
    """One row per configured key (zeros for those never drawn), then any unexpected keys."""
    by = {r["key"]: r for r in rows}
    zero = {
        "generated": 0,
        "valid": 0,
        "verbatim": 0,
        "v_positive": 0,
        "mean_v": None,
        "mean_reward": None,
        "solver_accuracy": None,
    }
    out = [by.get(k, {"key": k, **zero}) for k in keys]
    out += [r for r in rows if r["key"] not in set(keys)]
    return out


def _task_keys(d: _Data) -> list[str]:
    from pipeline.core.config import SelectorConfig

    return list((d.cfg.selector if d.cfg else SelectorConfig()).task_types)


def _hop_keys(d: _Data) -> list[int]:
    from pipeline.core.config import SelectorConfig

    return sorted(int(h) for h in (d.cfg.selector if d.cfg else SelectorConfig()).hop_weights)


def _plot_groups(d: _Data, rows: list[dict], title: str, xlabel: str) -> bytes:
    total = sum(r["generated"] for r in rows)
    return _bars(
        title,
        [str(r["key"]) for r in rows],
        {
            "generated": [r["generated"] for r in rows],
            "valid": [r["valid"] for r in rows],
            "valid + verbatim": [r["verbatim"] for r in rows],
        },
        "records",
        xlabel=xlabel,
        empty=total == 0,
    )


def _plot_wcr(d: _Data) -> bytes:
    """Rollouts per waypoint-coverage bin, stacked correct / incorrect, accuracy on top."""
    total = sum(n for _, n, _, _ in d.wcr_bins)
    fig, ax = _figure(f"WCR waypoint coverage vs. solver correctness ({total} rollouts)")
    if total == 0:
        _no_data(ax, "no data (no solver rollouts)")
        return _png(fig)
    bins = [b for b in d.wcr_bins if b[1] > 0 or b[0] != WCR_BINS[-1]]
    xs = list(range(len(bins)))
    correct = [ok for _, _, ok, _ in bins]
    wrong = [n - ok for _, n, ok, _ in bins]
    ax.bar(xs, correct, 0.6, label="correct (EM)", color="C0")
    ax.bar(xs, wrong, 0.6, bottom=correct, label="incorrect", color="C7")
    for x, (_, n, _, acc) in zip(xs, bins, strict=True):
        if n:
            _label(ax, x, n, f"{acc:.0%} of {n}")
    ax.set_xticks(xs, [b for b, _, _, _ in bins])
    ax.set_xlabel("waypoint coverage g of the rollout's <think> text")
    ax.set_ylabel("solver rollouts")
    ax.set_ylim(0, max(n for _, n, _, _ in bins) * 1.18)
    ax.yaxis.get_major_locator().set_params(integer=True)
    ax.legend(fontsize=8)
    return _png(fig)


# ---- markdown ---------------------------------------------------------------------------------
def _cell(value: Any, limit: int = 0) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.3f}"
    text = " ".join(str(value).split())
    if limit and len(text) > limit:
        text = text[: limit - 1] + "…"
    return text.replace("|", "\\|")


def _signed(value: float | None) -> str:
    return "n/a" if value is None else f"{value:+.3f}"


def _num(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def _ts(value: dt.datetime | None) -> str:
    if value is None:
        return "–"
    if value.tzinfo is not None:
        value = value.astimezone(dt.UTC)
    return value.strftime("%Y-%m-%d %H:%M:%S UTC")


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    if not rows:
        return ["_none_", ""]
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(_cell(v, 80) for v in row) + " |" for row in rows]
    return [*out, ""]


def _group_table(rows: list[dict], key: str) -> list[str]:
    return _table(
        [
            key,
            "generated",
            "valid",
            "valid + verbatim",
            "V > 0",
            "mean V",
            "mean R_pro",
            "solver accuracy",
        ],
        [
            (
                r["key"],
                r["generated"],
                r["valid"],
                r["verbatim"],
                r["v_positive"],
                r["mean_v"],
                r["mean_reward"],
                r["solver_accuracy"],
            )
            for r in rows
        ],
    )


def _render(d: _Data, tasks: list[dict], hops: list[dict]) -> str:
    run = d.run or {}
    img = PLOT_NAMES
    started, finished = run.get("started_at"), run.get("finished_at")
    duration = ""
    if started and finished:
        duration = f" ({(finished - started).total_seconds() / 60:.1f} min)"
    shards = (
        f"{run['shards_completed']}/{run['shards_planned']}" if run else "–"
    )  # generation shards
    clusters = "–"
    if d.iteration is not None:
        clusters = f"{d.iteration} (K = {d.k if d.k else '?'} clusters)"

    def models(col: str) -> str:
        return ", ".join(f"`{m}`" for m in d.models.get(col, [])) or "–"

    lines = [f"# Run report: {d.run_id}", ""]
    if d.run is None:
        lines += [f"> Run `{d.run_id}` is not in the catalog's `runs` view.", ""]
    lines += _table(
        ["field", "value"],
        [
            ("run id", f"`{d.run_id}`"),
            ("status", run.get("status", "unknown")),
            ("profile", run.get("profile")),
            ("config hash", f"`{run['config_hash']}`" if run else None),
            ("started", _ts(started)),
            ("finished", _ts(finished) + duration),
            ("generation shards", shards),
            ("selector iteration", clusters),
            ("proposer model", models("proposer_model")),
            ("solver model", models("solver_model")),
            ("embedder", models("embedder_model")),
            ("index fingerprint", ", ".join(f"`{x}`" for x in d.index_fingerprints) or "–"),
            ("schema version", run.get("schema_version")),
        ],
    )
    gen = d.funnel["generated"]
    lines += ["## Validity funnel", ""]
    lines += _table(
        ["stage", "records", "share of generated"],
        [
            (FUNNEL_LABELS[s], d.funnel[s], f"{d.funnel[s] / gen:.0%}" if gen else "–")
            for s in FUNNEL_STAGES
        ],
    )
    lines += [
        f"Mean V: {_signed(d.mean_v)} over {d.scored_v} scored records; "
        f"mean proposer reward R_pro: {_num(d.mean_reward)}; "
        f"mean difficulty R_DZ: {_num(d.solver['difficulty'])}.",
        "",
        f"![Validity funnel]({img['funnel']})",
        "",
        "### Invalid reasons",
        "",
        *_table(["reason", "records"], d.invalid_reasons),
        "### Evidence status",
        "",
        *_table(["evidence status", "records"], d.evidence_status),
        "## Verifier score V",
        "",
        "V = p₊ − p₋ per scored record, in 0.2-wide bins (the `verifier_histogram` view).",
        "",
        f"![Verifier score V]({img['verifier_v']})",
        "",
        "## Coverage",
        "",
    ]
    drawn = sum(1 for c, _, _ in d.by_cluster if c is not None)
    lines += [
        f"### Clusters: {drawn} of {d.k if d.k else '?'} drawn",
        "",
        f"![Cluster coverage]({img['clusters']})",
        "",
        "### Task types",
        "",
        *_group_table(tasks, "task type"),
        f"![Task-type coverage]({img['task_types']})",
        "",
        "### Hop counts",
        "",
        *_group_table(hops, "hops"),
        f"![Hop-count distribution]({img['hops']})",
        "",
    ]
    s = d.solver
    lines += [
        "## Solver rollouts and WCR",
        "",
        f"{s['rollouts']} rollouts over {s['records']} records; accuracy (EM) "
        f"{_num(s['accuracy'])}, mean R_sol {_num(s['solver_reward'])}, mean waypoint coverage g "
        f"{_num(s['wcr_coverage'])} (correct rollouts {_num(s['wcr_coverage_correct'])}, "
        f"incorrect {_num(s['wcr_coverage_incorrect'])}), mean WCR reward "
        f"{_num(s['wcr_reward'])}, evidence-passage hit rate {_num(s['evidence_hit_rate'])}.",
        "",
        *_table(["coverage g", "rollouts", "correct", "accuracy"], d.wcr_bins),
        f"![WCR coverage vs. correctness]({img['wcr_vs_correct']})",
        "",
        f"## Rejects: {sum(n for _, _, n in d.rejects)}",
        "",
        *_table(["stage", "reason", "rows"], d.rejects),
        f"## Example valid records (top {len(d.examples)} by V)",
        "",
    ]
    if not d.examples:
        lines += ["_none: no valid record with verbatim evidence in this run_", ""]
    for i, ex in enumerate(d.examples, 1):
        lines += [
            f"### {i}. V {_signed(ex['verifier_v'])}, R_pro {_num(ex['proposer_reward'])} — "
            f"{ex['hop_count']}-hop {_cell(ex['task_type'])}, source “{_cell(ex['source_title'])}”",
            "",
            f"- **Question:** {_cell(ex['question'], 500)}",
            f"- **Answer:** {_cell(ex['answer'], 200)}",
            f"- **Evidence:** {_cell(ex['evidence'], 800)}",
            f"- record `{ex['record_id']}`",
            "",
        ]
    lines += ["## Files", ""]
    lines += [f"- [{name}]({name})" for name in PLOT_NAMES.values()]
    return "\n".join(lines) + "\n"


# ---- entry point ------------------------------------------------------------------------------
def write_run_report(
    catalog_path: str | Path, run_dir: str | Path, run_id: str, examples: int = 3
) -> RunReport:
    """Query the catalog (read-only) for one run and write its report under run_dir/report/."""
    with connect_readonly(catalog_path) as con:
        d = _collect(con, run_id, examples)
    tasks = _coverage_rows(d.by_task, _task_keys(d))
    hops = _coverage_rows(d.by_hop, _hop_keys(d))
    out = Path(run_dir) / REPORT_DIRNAME
    pngs = {
        "funnel": _plot_funnel(d),
        "verifier_v": _plot_v(d),
        "clusters": _plot_clusters(d),
        "task_types": _plot_groups(d, tasks, "Task-type coverage", "task type"),
        "hops": _plot_groups(d, hops, "Hop-count distribution", "hop count h"),
        "wcr_vs_correct": _plot_wcr(d),
    }
    plots: dict[str, Path] = {}
    for key, data in pngs.items():
        plots[key] = out / PLOT_NAMES[key]
        atomic_write_bytes(plots[key], data)
    markdown = _render(d, tasks, hops)
    md_path = out / MARKDOWN_NAME
    atomic_write_bytes(md_path, markdown.encode("utf-8"))  # last: the page appears complete
    return RunReport(
        run_id=run_id,
        dir=out,
        markdown_path=md_path,
        plots=plots,
        markdown=markdown,
        status=d.run["status"] if d.run else None,
        funnel=dict(d.funnel),
        mean_v=d.mean_v,
        mean_reward=d.mean_reward,
    )


def known_run_ids(catalog_path: str | Path) -> list[str]:
    """Runs in the catalog's `runs` view, oldest first (start time, then id)."""
    with connect_readonly(catalog_path) as con:
        rows = con.execute("SELECT run_id FROM runs ORDER BY started_at, run_id").fetchall()
    return [r[0] for r in rows]


__all__ = ["RunReport", "known_run_ids", "write_run_report"]
