"""Contracts of the artifacts the stages build beside the run shards: the index's passages and
embedding shards, the knowledge graph (entities, edges, subgraphs), the selector's clusters,
state and usage, and each run's plan. Gathered with the others in schemas/tables.py."""

from __future__ import annotations

import pyarrow as pa

from schemas.fields import KG_PATH, TS, contract, f

PASSAGES = contract(
    "passages",
    "One retrieval unit of the corpus (a ~100-word Wikipedia passage).",
    [
        f("id", pa.string(), False, "passage id as given by the corpus file"),
        f("title", pa.string(), False, "article title (quoted first line in FlashRAG format)"),
        f("text", pa.string(), False, "passage body without the title line"),
        f("char_len", pa.int32(), False, "length of text in characters"),
        f("row", pa.int64(), False, "0-based position in the corpus = FAISS vector id"),
        f("source_file", pa.string(), False),
        f("source_line", pa.int64(), False, "1-based line number in source_file"),
    ],
)

EMBEDDINGS_MANIFEST = contract(
    "embeddings_manifest",
    "One fixed-size shard of passage embeddings (memory-mapped .npy).",
    [
        f("shard", pa.int32(), False),
        f("path", pa.string(), False),
        f("row_start", pa.int64(), False),
        f("row_end", pa.int64(), False, "exclusive"),
        f("dim", pa.int32(), False),
        f("model", pa.string(), False),
        f("passage_prompt", pa.string(), False),
        f("normalized", pa.bool_(), False),
        f("sha256", pa.string(), False),
        f("corpus_fingerprint", pa.string(), False),
        f("created_at", TS, False),
    ],
)

ENTITIES = contract(
    "entities",
    "Wikidata items and properties kept from the dump.",
    [
        f("qid", pa.string(), False, "Q or P id"),
        f("kind", pa.string(), False, "item | property"),
        f("label", pa.string()),
        f("description", pa.string()),
        f("aliases", pa.list_(pa.string())),
        f("enwiki_title", pa.string()),
        f("sitelink_count", pa.int32()),
        f("datatype", pa.string(), doc="properties only"),
        f("passage_ids", pa.list_(pa.string()), doc="corpus passages whose title = enwiki_title"),
    ],
)

EDGES = contract(
    "edges",
    "Truthy statements: subject -pid-> entity or typed literal.",
    [
        f("subject", pa.string(), False),
        f("pid", pa.string(), False),
        f("object_qid", pa.string(), doc="set when the value is an item"),
        f(
            "value_type",
            pa.string(),
            False,
            "wikibase-item|wikibase-property|time|quantity|string|monolingualtext|globecoordinate",
        ),
        f("value", pa.string(), doc="literal rendered as text"),
        f("time_precision", pa.int8()),
        f("time_calendar", pa.string(), doc="calendar model item of a time (Q1985727 Gregorian)"),
        f("quantity_unit", pa.string()),
        f("language", pa.string()),
        f("rank", pa.string(), False),
    ],
)

SUBGRAPHS = contract(
    "subgraphs",
    "LLM-guided target path with distractor branches (KG-paths paper, Algorithm 1).",
    [
        f("subgraph_id", pa.string(), False),
        f("seed_qid", pa.string(), False),
        f("target_path", KG_PATH, False),
        f("distractors", pa.list_(KG_PATH)),
        f("answer_qid", pa.string()),
        f("answer_label", pa.string()),
        f("answer_type", pa.string(), doc="Person|Location|Organization|Date|Number|Other"),
        f("waypoints", pa.list_(pa.string())),
        f("passage_ids", pa.list_(pa.list_(pa.string())), doc="linked passages per path node"),
        f("hops", pa.int8(), False),
        f("node_count", pa.int32(), False),
        f("stop_reason", pa.string(), doc="llm_stop|max_hops|no_candidates|unparseable|literal"),
        f("llm_outputs", pa.list_(pa.string()), doc="raw selector completions, one per call"),
        f("model", pa.string()),
        f("created_at", TS, False),
    ],
)

CLUSTERS = contract(
    "clusters",
    "Passage-to-cluster assignment for one clustering iteration.",
    [
        f("iteration", pa.int32(), False),
        f("k", pa.int32(), False),
        f("passage_row", pa.int64(), False),
        f("passage_id", pa.string(), False),
        f("cluster_id", pa.int32(), False),
        f("distance", pa.float32(), False, "distance of the passage embedding to its centroid"),
    ],
)

SELECTOR_STATE = contract(
    "selector_state",
    "Bandit arm statistics per self-evolution iteration.",
    [
        f("iteration", pa.int32(), False),
        f("bandit", pa.string(), False, "cluster | task_type"),
        f("arm", pa.string(), False),
        f("pulls", pa.float64(), False),
        f("reward_sum", pa.float64(), False),
        f("k", pa.int32()),
        f("rng_state", pa.string()),
        f("updated_at", TS, False),
    ],
)
SELECTOR_USAGE = contract(
    "selector_usage",
    "Cumulative times the selector drew each passage (rows with zero uses are omitted).",
    [
        f("iteration", pa.int32(), False),
        f("passage_row", pa.int64(), False),
        f("passage_id", pa.string(), False),
        f("uses", pa.int64(), False, "draws of this passage up to and including the iteration"),
    ],
)

RUN_PLAN = contract(
    "run_plan",
    "What a run generates, fixed when the run starts so a resumed run redoes exactly the same.",
    [
        f("run_id", pa.string(), False),
        f("iteration", pa.int32(), False, "self-evolution iteration of the selector"),
        f("slot", pa.int32(), False),
        f("passage_row", pa.int64(), False),
        f("passage_id", pa.string(), False),
        f("cluster_id", pa.int32(), False),
        f("task_type", pa.string(), False),
        f("hop_count", pa.int8(), False),
        f(
            "subgraph_id",
            pa.string(),
            doc="KG subgraph linked to the passage, offered to the proposer",
        ),
    ],
)
