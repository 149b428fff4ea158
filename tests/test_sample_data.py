"""The embedded sample data states its graph hop by hop, as Wikipedia would: of every path the
demo's KG stage could walk from its seeds (two to four hops through relations a question can
chain through), most have a verbatim sentence for each hop in the sample corpus, found the
way a run finds them. Computed from the data, with the real index and no LLM."""

from pathlib import Path

from pipeline.agents.chains import kg_targets
from pipeline.core.config import load_config
from pipeline.kg.extract import KGInputs, choose_seeds, ingest, ingest_dir
from pipeline.kg.graph import KnowledgeGraph
from pipeline.kg.valency import MANY_VALUED
from pipeline.retrieval.faiss_index import Retriever

COVERAGE = 0.6  # the share of the demo's 2-4-hop paths that must be stated hop by hop


def _paths(graph: KnowledgeGraph, seeds: list[str], longest: int) -> list[list[tuple]]:
    """Every path of 2..`longest` hops from the seeds through single-valued relations, without
    revisiting a node: [(node id, label), (pid, relation), (node id, label), ...]."""
    out: list[list[tuple]] = []
    labels = graph.nodes(seeds)

    def walk(path: list[tuple]) -> None:
        hops = (len(path) - 1) // 2
        if hops >= 2:
            out.append(path)
        last = path[-1][0]
        if hops == longest or last.startswith(("time:", "quantity:")):
            return
        seen = {path[k][0] for k in range(0, len(path), 2)}
        for c in graph.candidates([last])[last]:
            if c.pid not in MANY_VALUED and c.target_id not in seen:
                walk([*path, (c.pid, c.relation), (c.target_id, c.target_label)])

    for s in seeds:
        walk([(s, labels[s]["label"])])
    return out


def test_most_of_the_demos_paths_are_stated_hop_by_hop(sample_index, embedder, tmp_path):
    cfg = load_config(None, [f"store.out_dir={tmp_path}"])
    inputs = KGInputs.from_config(cfg)
    ingest(cfg, inputs.dump, Path(tmp_path))
    ing, _ = ingest_dir(cfg, inputs.dump, Path(tmp_path))
    retriever = Retriever(sample_index.dir, embedder)
    with KnowledgeGraph(ing, sample_index.table, inputs.relation_filter()) as graph:
        seeds = choose_seeds(graph, cfg.kg.num_seeds, cfg.seed)
        paths = _paths(graph, seeds, 4)
        linked = graph.nodes({p[k][0] for p in paths for k in range(0, len(p), 2)})
    assert len(seeds) == cfg.kg.num_seeds and len(paths) > 100
    items = []
    for p in paths:
        nodes, rels = p[0::2], p[1::2]
        ids = [(linked.get(n) or {}).get("passage_ids") or [] for n, _ in nodes]
        sg = {
            "target_path": {
                "nodes": [{"id": n, "label": lbl} for n, lbl in nodes],
                "relations": [{"id": r, "label": lbl} for r, lbl in rels],
            },
            "passage_ids": ids,
        }
        src = next(i for group in ids for i in group)  # a seed always has its own article
        items.append((sg, len(rels), retriever.passages.by_ids([src])[src]))
    targets = kg_targets(retriever, items, {}, cfg.generation.evidence_topk)
    stated = [t for t in targets if t.posed]
    assert len(stated) / len(targets) >= COVERAGE, (
        f"{len(stated)} of {len(targets)} paths stated hop by hop"
    )
    for t, (_, h, _) in zip(targets, items, strict=True):
        if t.posed:  # a stated path has a sentence per hop, each naming what it states
            assert t.hops == h and len(t.chain) == h
        else:
            assert t.missing_hop is not None and 1 <= t.missing_hop <= h
