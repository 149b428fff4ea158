"""The product's table: one proposer output with its evidence chain, every check and reward.

Gathered with the others in schemas/tables.py (`TABLES`).
"""

from __future__ import annotations

import pyarrow as pa

from schemas.fields import EVIDENCE_CHAIN, KG_PATH, TS, contract, f

CURRICULUM = contract(
    "curriculum",
    "One proposer output with every check and reward: the product.",
    [
        f("record_id", pa.string(), False, "stable hash of (run id, plan slot, source passage)"),
        f("run_id", pa.string(), False),
        f("shard", pa.int32(), False),
        f("slot", pa.int32(), False, "position in the run's sampling plan"),
        f("created_at", TS, False),
        f("source_passage_id", pa.string(), False),
        f("source_title", pa.string(), False),
        f("cluster_id", pa.int32()),
        f("task_type", pa.string(), False),
        f(
            "hop_count",
            pa.int8(),
            False,
            "the question's own hops: its evidence chain's length (a task not posed: its "
            "KG sub-path's relations, 1 for a passage)",
        ),
        f("planned_hops", pa.int8(), False, "the selector's draw for the slot"),
        f("subgraph_id", pa.string()),
        f("question", pa.string()),
        f("answer", pa.string(), doc="fixed before the question: as the evidence writes it"),
        f(
            "answer_aliases",
            pa.list_(pa.string()),
            doc="every accepted form of the answer (the answer first): the KG end entity's "
            "label, aliases and formatted values; EM against any of them is correct",
        ),
        f("evidence", pa.string(), doc="the final hop's sentence (evidence_chain holds all)"),
        f(
            "evidence_chain",
            EVIDENCE_CHAIN,
            doc="one verbatim sentence per hop, in hop order: the passage, its offsets, the "
            "hop's subject, the property it states and its object as written, and where it "
            "was found (article: the subject's own | source: the slot's passage | retrieved)",
        ),
        f(
            "evidence_mode",
            pa.string(),
            False,
            "how the answer was fixed: kg_path (the path's end entity) | passage_span (one "
            "sentence) | passage_bridge (a fact of an article the source links to) | "
            "passage_comparison (which of two entities' values is earlier or larger)",
        ),
        f(
            "question_style",
            pa.string(),
            doc="plain (the start entity named) | obfuscated (described by facts the graph "
            "makes unique: 'the physicist born in 1885')",
        ),
        f(
            "missing_hop",
            pa.int8(),
            doc="no_supporting_passage: the first hop (1-based) no passage states",
        ),
        f("answer_span_kind", pa.string(), doc="passage_span: date | number | name"),
        f(
            "question_source",
            pa.string(),
            doc="llm | template (built by rules after no LLM sample passed: the KG path's "
            "relation labels, or the evidence clause with the answer replaced) | null (not "
            "posed, or no rule-built question)",
        ),
        f("question_attempts", pa.int32(), False, "LLM questions read (0: not posed)"),
        f("evidence_source", pa.string(), doc="source | retrieved | none"),
        f("evidence_status", pa.string(), False, "verbatim | missing (not posed)"),
        f("evidence_passage_id", pa.string()),
        f("evidence_char_start", pa.int32(), doc="0-based offset into the passage text"),
        f("evidence_char_end", pa.int32(), doc="exclusive"),
        f("kg_path", KG_PATH, doc="the sub-path the question follows, ending at the answer"),
        f(
            "waypoints",
            pa.list_(pa.string()),
            doc="labels of the path nodes v0..v_{h-1} before the answer (WCR matches them)",
        ),
        f("is_valid", pa.bool_(), False),
        f("invalid_reason", pa.string(), doc="null when valid"),
        f("is_verbatim", pa.bool_(), False),
        f("format_score", pa.float64(), False, "F_fmt = 1/4 (1 + F_think + F_tool + F_ans)"),
        f("f_think", pa.float64(), False),
        f("f_tool", pa.float64(), False),
        f("f_answer", pa.float64(), False),
        f("proposer_turns", pa.int32(), False),
        f("proposer_searches", pa.int32(), False),
        f("solver_n", pa.int32()),
        f("solver_k", pa.int32()),
        f("solver_reward_mean", pa.float64(), doc="mean R_sol over the solver rollouts"),
        f("wcr_coverage_mean", pa.float64(), doc="mean waypoint coverage g of the rollouts"),
        f("difficulty", pa.float64(), doc="R_DZ = 1{0<k<n} (n-k)/(n-1)"),
        f("verifier_p_pos", pa.float64()),
        f("verifier_p_neg", pa.float64()),
        f("verifier_v", pa.float64(), doc="V = p+ - p-"),
        f("verifier_method", pa.string(), doc="mc | teacher_forced | teacher_forced_pmi"),
        f("verifier_m", pa.int32()),
        f("evidence_tokens", pa.int32()),
        f("brevity", pa.float64(), doc="B = max(0, 1 - |e|/L_max)"),
        f("proposer_reward", pa.float64(), doc="1/2 F_fmt + R_DZ + l_V V + l_B B"),
        f(
            "v_threshold_quantile",
            pa.float64(),
            False,
            "gates.v_quantile: accepted records beat this quantile of the run's shuffled and "
            "off-topic control V (view verifier_thresholds)",
        ),
        f(
            "single_hop_share",
            pa.float64(),
            False,
            "gates.single_hop_share: at most this share of the run's accepted records are "
            "one-hop questions (view record_verdicts rejects the rest as single_hop_cap)",
        ),
        f("gold_n", pa.int32(), doc="answers sampled with the gold evidence as context"),
        f(
            "gold_correct",
            pa.int32(),
            doc="of them correct (EM against any answer form)",
        ),
        f(
            "gold_decided_by",
            pa.string(),
            doc="what showed the record answerable with its chain: sampling (a gold answer was "
            "right) | teacher_forced (none was, but the chain raises log P(answer)) | null "
            "(neither: the shortcut, uniqueness and connected gates are undetermined)",
        ),
        f(
            "closed_book_accuracy",
            pa.float64(),
            doc="gates.shortcut: share of solver rollouts with search disabled that are correct "
            "(null: not checked, i.e. invalid, h < 2 or the gate off)",
        ),
        f("one_search_accuracy", pa.float64(), doc="the same with at most one search"),
        f(
            "shortcut",
            pa.bool_(),
            doc="h >= 2 and closed-book or one-search accuracy >= gates.shortcut_threshold",
        ),
        f(
            "shortcut_verdict",
            pa.string(),
            doc="pass | fail | undetermined (no gold-evidence answer was correct) | "
            "not_applicable (h < 2 or not solved) | off",
        ),
        f(
            "answer_candidates",
            pa.list_(pa.string()),
            doc="gates.uniqueness: distinct Norm(answers) of the solver rollouts, each given by "
            ">= gates.unique_min_support rollouts and found in their retrieved passages",
        ),
        f(
            "unique_answer",
            pa.bool_(),
            doc="fewer than two answer_candidates (null: not solved or the gate off)",
        ),
        f(
            "uniqueness_verdict",
            pa.string(),
            doc="pass | fail | undetermined (no gold-evidence answer was correct) | "
            "not_applicable (not solved) | off",
        ),
        f(
            "one_search_answerable",
            pa.bool_(),
            doc="gates.one_search: the run's retriever, given the question alone, returns a "
            "passage holding the answer (a comparison: both values) in its top one_search_k",
        ),
        f(
            "one_search_verdict",
            pa.string(),
            doc="pass | fail (multi-hop and one search answers it) | not_applicable | off",
        ),
        f(
            "hop_drop_logprobs",
            pa.list_(pa.float64()),
            doc="gates.connected: log P(answer | question, chain without hop j) for each hop j; "
            "the full chain's is the teacher-forced with-evidence score",
        ),
        f(
            "disconnected",
            pa.bool_(),
            doc="some hop's sentence can be dropped without lowering P(answer), and the other "
            "sentences state its link too",
        ),
        f(
            "connected_decided_by",
            pa.string(),
            doc="teacher_forced (the scores decided) | rules (a hop the scores ignore is the "
            "chain's only link: connected by the text)",
        ),
        f(
            "connected_verdict",
            pa.string(),
            doc="pass | fail (disconnected) | undetermined (not answerable with its chain) | "
            "not_applicable (one hop, or not verified) | off",
        ),
        f("v_shuffled", pa.float64(), doc="gates.controls: V with another record's evidence"),
        f("v_answer_only", pa.float64(), doc="V with the answer string alone as evidence"),
        f("v_off_topic", pa.float64(), doc="V with a passage of another cluster as evidence"),
        f(
            "gate_verdicts",
            pa.list_(
                pa.struct(
                    [
                        ("gate", pa.string()),
                        ("verdict", pa.string()),
                        ("rejected_by", pa.string()),
                        ("detail", pa.string()),
                    ]
                )
            ),
            doc="every generation gate's verdict in step order (pass | fail | undetermined | "
            "not_applicable | off) and, when it keeps the record out, the rejected_by reason; "
            "null on records written before gates were steps (their shortcut/uniqueness "
            "verdict columns stand for them)",
        ),
        f("proposer_model", pa.string(), False),
        f("solver_model", pa.string(), False),
        f("embedder_model", pa.string(), False),
        f("index_fingerprint", pa.string(), False),
        f("config_hash", pa.string(), False),
        f("prompt", pa.string(), False),
        f("raw_proposer_output", pa.string(), False),
        f("schema_version", pa.string(), False),
    ],
)
