"""Statistics of a set of extracted subgraphs, as in the KG-paths paper's Figure 5: path
lengths, answer types, relation types and distinct relations per subgraph."""

from __future__ import annotations

import math
from typing import Any

import duckdb
import pyarrow as pa


def subgraph_stats(table: pa.Table, top: int = 15) -> dict[str, Any]:
    """Path-length distribution, answer types, relation types and distinct relations per
    subgraph (target path and distractor edges together, as in the paper's Figure 5)."""
    con = duckdb.connect()
    con.register("sg", table)
    n = con.execute("SELECT count(*) FROM sg").fetchall()[0][0]
    stats: dict[str, Any] = {"subgraphs": int(n)}
    if not n:
        return stats
    hops = dict(con.execute("SELECT hops, count(*) FROM sg GROUP BY 1 ORDER BY 1").fetchall())
    mean = sum(h * c for h, c in hops.items()) / n
    var = sum(c * (h - mean) ** 2 for h, c in hops.items()) / n
    stats["hops"] = {int(h): int(c) for h, c in hops.items()}
    stats["hops_mean"] = round(mean, 3)
    stats["hops_std"] = round(math.sqrt(var), 3)
    stats["answer_types"] = {
        t: int(c)
        for t, c in con.execute(
            "SELECT answer_type, count(*) FROM sg GROUP BY 1 ORDER BY 2 DESC, 1"
        ).fetchall()
    }
    con.execute(
        """
        CREATE TEMP VIEW rels AS
        SELECT subgraph_id, r.id AS pid, r.label AS label
        FROM (SELECT subgraph_id, unnest(target_path.relations) AS r FROM sg)
        UNION ALL
        SELECT subgraph_id, r.id, r.label
        FROM (SELECT subgraph_id, unnest(d.relations) AS r
              FROM (SELECT subgraph_id, unnest(distractors) AS d FROM sg))
        """
    )
    total = con.execute("SELECT count(*) FROM rels").fetchall()[0][0]
    stats["edges"] = int(total)
    stats["relation_types"] = int(
        con.execute("SELECT count(DISTINCT pid) FROM rels").fetchall()[0][0]
    )
    stats["top_relations"] = [
        {"pid": pid, "label": label, "count": int(c), "share": round(c / total, 4)}
        for pid, label, c in con.execute(
            f"SELECT pid, any_value(label), count(*) c FROM rels GROUP BY pid "
            f"ORDER BY c DESC, pid LIMIT {int(top)}"
        ).fetchall()
    ]
    per = con.execute(
        "SELECT d, count(*) FROM (SELECT subgraph_id, count(DISTINCT pid) d FROM rels "
        "GROUP BY 1) GROUP BY 1 ORDER BY 1"
    ).fetchall()
    stats["distinct_relations_per_subgraph"] = {int(d): int(c) for d, c in per}
    stats["distinct_relations_mean"] = round(sum(d * c for d, c in per) / n, 3)
    stats["distractors"] = {
        int(d): int(c)
        for d, c in con.execute(
            "SELECT len(distractors), count(*) FROM sg GROUP BY 1 ORDER BY 1"
        ).fetchall()
    }
    stats["node_count_mean"] = round(
        float(con.execute("SELECT avg(node_count) FROM sg").fetchall()[0][0]), 3
    )
    stats["stop_reasons"] = dict(
        con.execute("SELECT stop_reason, count(*) FROM sg GROUP BY 1 ORDER BY 2 DESC").fetchall()
    )
    con.close()
    return stats


def format_stats(stats: dict[str, Any], width: int = 30) -> str:
    """A plain-text rendering of the four panels of the paper's Figure 5."""
    n = stats.get("subgraphs", 0)
    if not n:
        return "no subgraphs"

    def bars(title: str, items: list[tuple[str, int]], total: int) -> list[str]:
        out = [title]
        peak = max((c for _, c in items), default=1) or 1
        for name, c in items:
            bar = "#" * max(1, round(width * c / peak))
            out.append(f"  {name:<34} {c:>6} {c / total:6.1%} {bar}")
        return out

    lines = [f"{n} subgraphs, {stats['edges']} edges, {stats['relation_types']} relation types"]
    lines += bars(
        f"(a) path length (mean {stats['hops_mean']}, std {stats['hops_std']})",
        [(f"{h} hops", c) for h, c in sorted(stats["hops"].items())],
        n,
    )
    lines += bars("(b) answer type", list(stats["answer_types"].items()), n)
    lines += bars(
        f"(c) top {len(stats['top_relations'])} relations (share of all edges)",
        [(f"{r['label']} ({r['pid']})", r["count"]) for r in stats["top_relations"]],
        stats["edges"],
    )
    lines += bars(
        f"(d) distinct relations per subgraph (mean {stats['distinct_relations_mean']})",
        [(str(d), c) for d, c in sorted(stats["distinct_relations_per_subgraph"].items())],
        n,
    )
    return "\n".join(lines)
