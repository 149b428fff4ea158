"""Evidence chains for KG tasks: one verbatim sentence per hop of the question's sub-path.

A question of h hops ("In which country is the place of death of Niels Bohr?") is only as
good as the evidence a searcher can find for each hop: Bohr died in Copenhagen (his article),
Copenhagen is in Denmark (Copenhagen's). `kg_targets` finds a sentence stating every hop -- in
the hop subject's own article first (as Wikipedia states it), then the slot's source passage,
then the passages earlier hops were read in, then what one search for the hop retrieves --
with one batched search for every hop of a shard. A hop that no passage states leaves the
task unposed, and says which hop.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pipeline.agents.prompts import render_path
from pipeline.agents.targets import (
    Hop,
    Target,
    answer_forms,
    answer_kind,
    entity_forms,
    hop_evidence,
    sub_path_span,
    support_in,
)

Passage = tuple[str, str, str]  # (id, title, text)


def _label(node: dict) -> str:
    return node.get("label") or node["id"]


def hop_query(subject: dict, relation: dict, obj: dict) -> str:
    """What one search for a hop asks: '<subject> <relation> <object>'."""
    return " ".join(_label(x) for x in (subject, relation, obj))


def state_hop(
    candidates: Sequence[tuple[Passage, str]],
    subject: dict,
    relation: dict,
    obj: dict,
    aliases: Mapping[str, Sequence[str]],
    used: set[tuple[str, int]],
) -> Hop | None:
    """The first candidate sentence stating the hop (`support_in`), preferring one no earlier
    hop of the chain uses: two hops read from one sentence teach one lookup."""
    forms = answer_forms(obj, aliases.get(obj["id"], ()))
    subject_forms = entity_forms(_label(subject), aliases.get(subject["id"], ()))
    reused = None
    for passage, where in candidates:
        sup = support_in(passage, forms, subject_forms, relation["id"])
        if sup is None:
            continue
        sent, a0, a1 = sup
        hop = Hop(
            passage[0],
            sent.start,
            sent.end,
            sent.text,
            _label(subject),
            relation.get("label") or relation["id"],
            passage[2][a0:a1],
            where,
        )
        if (passage[0], sent.start) not in used:
            return hop
        reused = reused or hop
    return reused


def kg_targets(
    retriever,
    items: Sequence[tuple[dict, int, Passage]],
    aliases: Mapping[str, Sequence[str]],
    k: int,
) -> list[Target]:
    """One Target per (subgraph, hop count, source passage): the question's sub-path
    (`sub_path_span`) with a stated hop for each of its relations, the final one holding the
    answer. `aliases`: node id -> other names of that node (any node of any path)."""
    spans = [sub_path_span(sg["target_path"], h) for sg, h, _ in items]
    queries: list[str] = []
    article_ids: set[str] = set()
    for (sg, _, _), span in zip(items, spans, strict=True):
        if span is None:
            continue
        nodes, rels = sg["target_path"]["nodes"], sg["target_path"]["relations"]
        node_passages = sg.get("passage_ids") or []
        for j in range(*span):
            queries.append(hop_query(nodes[j], rels[j], nodes[j + 1]))
            article_ids.update(node_passages[j] or [] if j < len(node_passages) else [])
    results = iter(retriever.search(queries, k) if queries else [])
    articles = retriever.passages.by_ids(sorted(article_ids))
    out = []
    for (sg, _, source), span in zip(items, spans, strict=True):
        path = sg["target_path"]
        if span is None:
            out.append(Target(kind="kg", path=path, reason="many_valued_relation"))
            continue
        a, b = span
        sp = {"nodes": path["nodes"][a : b + 1], "relations": path["relations"][a:b]}
        hits = [next(results) for _ in range(a, b)]  # this task's searches, in order
        node_passages = sg.get("passage_ids") or [[] for _ in path["nodes"]]
        chain: list[Hop] = []
        used: set[tuple[str, int]] = set()
        missing = None
        read: list[tuple[Passage, str]] = []  # the passages earlier hops were found in
        for j, retrieved in zip(range(a, b), hits, strict=True):
            own = [(articles[p], "article") for p in node_passages[j] or [] if p in articles]
            searched = [((h.id, h.title, h.text), "retrieved") for h in retrieved]
            cands = [*own, (source, "source"), *read, *searched]
            hop = state_hop(
                cands, path["nodes"][j], path["relations"][j], path["nodes"][j + 1], aliases, used
            )
            if hop is None:
                missing = j - a + 1
                break
            used.add((hop.passage_id, hop.start))
            chain.append(hop)
            read += [c for c in cands if c[0][0] == hop.passage_id][:1]
        out.append(_kg_target(sg, sp, chain, missing, aliases))
    return out


def _kg_target(
    sg: dict, sp: dict, chain: list[Hop], missing: int | None, aliases: Mapping[str, Sequence[str]]
) -> Target:
    nodes = sp["nodes"]
    end = nodes[-1]
    forms = answer_forms(end, aliases.get(end["id"], ()))
    base = {
        "kind": "kg",
        "answer_kind": answer_kind(end, sg.get("answer_type")),
        "subject": _label(nodes[0]),
        "facts": render_path(sp),
        "path": sp,
        "waypoints": [_label(n) for n in nodes[:-1]],
    }
    if missing is not None:
        return Target(
            **base, aliases=tuple(forms), reason="no_supporting_passage", missing_hop=missing
        )
    final = chain[-1]
    # the bridge entities: every name of an intermediate node, and how its span writes it
    hidden = []
    for node, hop in zip(nodes[1:-1], chain[:-1], strict=True):
        hidden += [*entity_forms(_label(node), aliases.get(node["id"], ())), hop.object]
    return Target(
        **base,
        answer=final.object,
        aliases=tuple(dict.fromkeys([final.object, *forms])),
        **hop_evidence(final),
        answer_at=final.text.index(final.object) if final.object in final.text else None,
        source=final.source,
        chain=tuple(chain),
        hidden=tuple(dict.fromkeys(hidden)),
    )
