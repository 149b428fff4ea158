"""Contracts of the quality checks over the catalog, written by `curriculum quality
...` (and the nightly with quality.nightly) under <out>/quality/<table>/: one file per run
(benchmark_matches, question_minhash), per benchmark (benchmark_checks) or for the catalog
(question_duplicates), laid out so that a night writes its own files and rewrites only small
ones; question_clusters is a view over two of them. What decontamination
remembers between passes (decontamination_runs) is under <out>/quality/state/, not in the
catalog. Gathered with the others in schemas/tables.py."""

from __future__ import annotations

import pyarrow as pa

from schemas.fields import TS, contract, f

BENCHMARK_MATCHES = contract(
    "benchmark_matches",
    "A curriculum record that matches a benchmark item: the best item per record, benchmark "
    "and method.",
    [
        f("record_id", pa.string(), False),
        f("run_id", pa.string(), False),
        f("benchmark", pa.string(), False, "name of the benchmark file (its stem)"),
        f("item_id", pa.string(), False, "the benchmark item's id (or its 1-based line)"),
        f(
            "method",
            pa.string(),
            False,
            "exact (Norm(question) equal) | ngram (word n-gram containment) | embedding "
            "(cosine) | answer_evidence (answer and evidence passage both match)",
        ),
        f("score", pa.float64(), False, "1 for exact / answer_evidence; containment; cosine"),
        f("benchmark_question", pa.string(), False),
        f("checked_at", TS, False),
    ],
)

BENCHMARK_CHECKS = contract(
    "benchmark_checks",
    "One decontamination pass of one benchmark file over the catalog, and its settings.",
    [
        f("benchmark", pa.string(), False),
        f("path", pa.string(), False),
        f("sha256", pa.string(), False),
        f("items", pa.int64(), False, "benchmark items with a question"),
        f("records_checked", pa.int64(), False),
        f("run_ids", pa.list_(pa.string()), False, "runs whose records were checked"),
        f("methods", pa.list_(pa.string()), False),
        f("ngram_n", pa.int32(), False),
        f("ngram_threshold", pa.float64(), False),
        f("embedding_threshold", pa.float64(), doc="null when the embedding method was off"),
        f("embedder_model", pa.string()),
        f("records_flagged", pa.int64(), False),
        f("checked_at", TS, False),
    ],
)

_CLUSTER_FIELDS = [
    f("record_id", pa.string(), False),
    f("run_id", pa.string(), False),
    f("cluster_id", pa.string(), False, "the smallest record_id of the cluster"),
    f("cluster_size", pa.int32(), False),
    f("nearest_record_id", pa.string(), doc="its most similar cluster member"),
    f("method", pa.string(), doc="minhash | embedding: how it joined nearest_record_id"),
    f("score", pa.float64(), doc="Jaccard of the word sets, or cosine"),
    f("computed_at", TS, False),
]

QUESTION_CLUSTERS = contract(
    "question_clusters",
    "Near-duplicate clusters of the catalog's questions (MinHash LSH + embedding); every "
    "checked record has a row, a singleton is its own cluster. A view (schemas/views.sql): "
    "the checked records of question_minhash, with their question_duplicates row if any.",
    _CLUSTER_FIELDS,
)

QUESTION_DUPLICATES = contract(
    "question_duplicates",
    "The question_clusters rows of clusters of two or more, one file for the catalog: what "
    "a night rewrites when its questions join or merge clusters (the singletons, most "
    "records, are never rewritten).",
    _CLUSTER_FIELDS,
)

QUESTION_MINHASH = contract(
    "question_minhash",
    "Every record of a run as the near-duplicate check saw it, one file per run written when "
    "the run is first clustered: Norm(question) and its MinHash LSH band keys, which a later "
    "night's questions are looked up against (the file's `settings` metadata, JSON, holds the "
    "threshold, permutations, bands and seed the keys were made with).",
    [
        f("record_id", pa.string(), False),
        f("run_id", pa.string(), False),
        f("clustered", pa.bool_(), False, "it has a question: a row in question_clusters"),
        f("question_norm", pa.string(), doc="Norm(question); its words are the Jaccard set"),
        f(
            "band_keys",
            pa.list_(pa.int64()),
            doc="one 64-bit key per LSH band (the band's MinHash values hashed); two records "
            "are candidates when a band's keys are equal; null: no question words",
        ),
        f("checked_at", TS, False),
    ],
)
# The tables the checks commit, each a folder of files the catalog refresh lists (the view
# question_clusters is built on the last two).
QUALITY_TABLES = (
    "benchmark_matches",
    "benchmark_checks",
    "question_minhash",
    "question_duplicates",
)

# ---- state of the checks (not catalog tables) ---------------------------------------------
DECONTAMINATION_RUNS = contract(
    "decontamination_runs",
    "The runs one benchmark file was checked against, one file per benchmark: a later pass "
    "with the same file (sha256) and settings (the file's `settings` metadata, JSON) checks "
    "only runs missing here or whose record count changed; other settings recheck every run.",
    [
        f("benchmark", pa.string(), False),
        f("run_id", pa.string(), False),
        f("records", pa.int64(), False, "the run's records when it was checked"),
        f("records_flagged", pa.int64(), False, "of them, records with at least one match"),
        f("checked_at", TS, False),
    ],
)
