"""The run report's PNG plots (matplotlib's object API, no global pyplot state)."""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

from pipeline.catalog.report_data import (
    CONTROLS,
    FUNNEL_LABELS,
    FUNNEL_STAGES,
    WCR_BINS,
    RunData,
)

PLOT_NAMES = {
    "funnel": "funnel.png",
    "verifier_v": "verifier_v.png",
    "clusters": "clusters.png",
    "task_types": "task_types.png",
    "hops": "hops.png",
    "wcr_vs_correct": "wcr_vs_correct.png",
    "verifier_controls": "verifier_controls.png",
}


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


def _plot_funnel(d: RunData) -> bytes:
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


def _plot_v(d: RunData) -> bytes:
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


def _plot_clusters(d: RunData) -> bytes:
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


def _plot_groups(d: RunData, rows: list[dict], title: str, xlabel: str) -> bytes:
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


def _plot_wcr(d: RunData) -> bytes:
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


def _plot_controls(d: RunData) -> bytes:
    """Mean V with the real evidence and with each control, per verifier method; the points
    are the records (jittered), so a degenerate verifier (all V = 0) is visible at a glance."""
    fig, ax = _figure(f"Verifier controls — {d.run_id}")
    if not d.control_values:
        _no_data(ax, "no verifier controls (gates.controls off or no verified record)")
        return _png(fig)
    methods = sorted(d.control_values)
    width = 0.8 / len(methods)
    for k, method in enumerate(methods):
        vals = d.control_values[method]
        xs = [i + (k - (len(methods) - 1) / 2) * width for i in range(len(CONTROLS))]
        means = [sum(vals[c]) / len(vals[c]) if vals.get(c) else 0.0 for c in CONTROLS]
        ax.bar(xs, means, width * 0.9, label=f"{method}: mean V", alpha=0.6)
        for x, c in zip(xs, CONTROLS, strict=True):
            pts = vals.get(c, [])
            jitter = [x + width * 0.3 * ((j * 7919) % 11 / 10 - 0.5) for j in range(len(pts))]
            ax.scatter(jitter, pts, s=6, color="0.2", zorder=3)
    ax.set_xticks(range(len(CONTROLS)), [c.replace("_", " ") for c in CONTROLS])
    ax.axhline(0, color="0.5", linewidth=0.8)
    ax.set_ylabel("V = p+ - p-")
    ax.legend(fontsize=8)
    return _png(fig)


def render_plots(d: RunData, tasks: list[dict], hops: list[dict]) -> dict[str, bytes]:
    """Every plot of the report as PNG bytes, keyed as PLOT_NAMES."""
    return {
        "funnel": _plot_funnel(d),
        "verifier_v": _plot_v(d),
        "clusters": _plot_clusters(d),
        "task_types": _plot_groups(d, tasks, "Task-type coverage", "task type"),
        "hops": _plot_groups(d, hops, "Hop-count distribution", "hop count h"),
        "wcr_vs_correct": _plot_wcr(d),
        "verifier_controls": _plot_controls(d),
    }
