-- Derived DuckDB views over the base views (curriculum, verifier_samples, solver_rollouts,
-- rejects, runs, passages) that the store creates from the committed shards.
-- Executed on every catalog refresh; every statement must be idempotent.

-- Norm of pipeline.agents.rewards.normalize, in SQL: lowercase, strip punctuation (ASCII plus curly
-- quotes and dashes), drop the articles a / an / the as whole words, collapse whitespace.
-- Python specifics mirrored: 'İ' lowercases to 'i' + combining dot, a word-final capital sigma
-- to 'ς'; a word character is a letter, digit or '_' (Python's \w, not RE2's ASCII \b); the
-- article pass runs twice because a match consumes the separator the next article needs;
-- whitespace is everything str.split() splits on (RE2's \s lacks e.g. NBSP and U+3000).
-- Not mirrored: case-ignorable characters between a letter and a final sigma ("Α'Σ").
CREATE OR REPLACE MACRO norm_articles(s) AS
    regexp_replace(s, '(^|[^\pL\pN_])(a|an|the)([^\pL\pN_]|$)', '\1 \3', 'g');

CREATE OR REPLACE MACRO norm(s) AS trim(regexp_replace(
    norm_articles(norm_articles(regexp_replace(
        lower(replace(
            if(contains(coalesce(s, ''), 'Σ'), regexp_replace(
                s, '([\p{Lu}\p{Ll}\p{Lt}])Σ([^\p{Lu}\p{Ll}\p{Lt}]|$)', '\1ς\2', 'g'
            ), coalesce(s, '')),
            'İ', 'i̇'
        )),
        '[!"#$%&''()*+,\-./:;<=>?@\[\\\]^_`{|}~‘’“”–—]',
        '',
        'g'
    ))),
    -- runs of two or more, or one that is not a plain space (rewriting every single space
    -- took half the time of the whole norm)
    '[\t\n\x{0b}\x{0c}\r\x{1c}-\x{1f} \x{85}\x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}]{2,}'
    || '|[\t\n\x{0b}\x{0c}\r\x{1c}-\x{1f}\x{85}\x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}]',
    ' ',
    'g'
));

-- Records an auditor usually wants: valid, verbatim evidence, with its verifier score.
CREATE OR REPLACE VIEW curriculum_valid AS
SELECT * FROM curriculum WHERE is_valid AND is_verbatim;

-- Quality gates, over the tables `curriculum quality ...` commits (empty until then).
-- Contaminated records: one row each, with every benchmark and method that matched it.
CREATE OR REPLACE VIEW contamination AS
SELECT
    m.record_id,
    any_value(c.run_id) AS run_id,
    any_value(c.question) AS question,
    any_value(c.answer) AS answer,
    list(DISTINCT m.benchmark ORDER BY m.benchmark) AS benchmarks,
    list(DISTINCT m.method ORDER BY m.method) AS methods,
    max(m.score) AS max_score,
    arg_max(m.benchmark || ':' || m.item_id, m.score) AS best_item,
    arg_max(m.benchmark_question, m.score) AS benchmark_question
FROM benchmark_matches m
JOIN curriculum c ON c.record_id = m.record_id
GROUP BY m.record_id;

-- Every checked question's near-duplicate cluster (`curriculum quality near-duplicates`): the
-- records question_minhash lists (clustered: they have a question), with their
-- question_duplicates row when their cluster has two or more; any other is its own cluster.
CREATE OR REPLACE VIEW question_clusters AS
SELECT
    m.record_id,
    m.run_id,
    coalesce(d.cluster_id, m.record_id) AS cluster_id,
    coalesce(d.cluster_size, 1)::INTEGER AS cluster_size,
    d.nearest_record_id,
    d.method,
    d.score,
    coalesce(d.computed_at, m.checked_at) AS computed_at
FROM question_minhash m
LEFT JOIN question_duplicates d ON d.record_id = m.record_id
WHERE m.clustered;

-- Near-duplicate clusters of two or more questions; `best_in_cluster` is the record an export
-- of the whole catalog keeps (highest V, then smallest record_id).
CREATE OR REPLACE VIEW near_duplicates AS
SELECT
    q.cluster_id,
    q.cluster_size,
    q.record_id,
    c.run_id,
    c.question,
    c.verifier_v,
    q.nearest_record_id,
    q.method,
    q.score,
    row_number() OVER (
        PARTITION BY q.cluster_id ORDER BY c.verifier_v DESC NULLS LAST, q.record_id
    ) = 1 AS best_in_cluster
FROM question_clusters q
JOIN curriculum c ON c.record_id = q.record_id
WHERE q.cluster_size > 1;

-- The curriculum with its quality columns: what exports select from. `duplicate_cluster_id`
-- is NULL for a record not yet clustered (landed after the last `quality near-duplicates`).
CREATE OR REPLACE VIEW curriculum_quality AS
SELECT
    c.*,
    k.record_id IS NOT NULL AS contaminated,
    k.benchmarks AS contamination_benchmarks,
    k.methods AS contamination_methods,
    q.cluster_id AS duplicate_cluster_id,
    q.cluster_size AS duplicate_cluster_size
FROM curriculum c
LEFT JOIN contamination k ON k.record_id = c.record_id
-- run_id too (a record has one): a filter on the run then reaches every scan
LEFT JOIN question_clusters q ON q.run_id = c.run_id AND q.record_id = c.record_id;

-- What each benchmark check covered, against what the catalog holds now: records landed after
-- a check (runs_unchecked) have not been compared with that benchmark yet.
CREATE OR REPLACE VIEW benchmark_coverage AS
SELECT
    b.benchmark,
    b.path,
    b.items,
    b.checked_at,
    b.records_checked,
    b.records_flagged,
    (SELECT count(*) FROM curriculum) AS records_now,
    list_filter(
        (SELECT coalesce(list(DISTINCT run_id ORDER BY run_id), []) FROM curriculum),
        lambda r: NOT list_contains(b.run_ids, r)
    ) AS runs_unchecked
FROM benchmark_checks b;

-- The quality gates per run: records, contaminated ones, those in near-duplicate clusters of
-- two or more, and those no near-duplicate check has seen yet. Each side is counted apart (no
-- per-record join). The `quality` audit adds the benchmark checks that covered each run.
CREATE OR REPLACE VIEW run_quality AS
WITH c AS (SELECT run_id, count(*) AS records FROM curriculum GROUP BY run_id),
k AS (SELECT run_id, count(*) AS contaminated FROM contamination GROUP BY run_id),
q AS (
    SELECT run_id, count(*) AS clustered,
           count(*) FILTER (WHERE cluster_size > 1) AS in_duplicate_clusters
    FROM question_clusters GROUP BY run_id
)
SELECT
    c.run_id,
    c.records,
    coalesce(k.contaminated, 0) AS contaminated,
    coalesce(q.in_duplicate_clusters, 0) AS in_duplicate_clusters,
    c.records - coalesce(q.clustered, 0) AS not_clustered
FROM c LEFT JOIN k USING (run_id) LEFT JOIN q USING (run_id);

-- The verifier bar of each run (gates.v_quantile): the nearest-rank quantile of the V that
-- the run's own shuffled and off-topic controls get under the run's verifier method. A record
-- is accepted only when its V exceeds it: V > 0 admits what the controls show is noise. A run
-- without control scores (gates.controls off) falls back to V > 0 and says so in `source`.
-- A macro over named curriculum and control-score tables: the catalog's view reads them all,
-- a run's compaction only that run's (record_facts_of).
CREATE OR REPLACE MACRO verifier_thresholds_of(cur, ctl) AS TABLE
WITH runs_q AS (
    SELECT
        run_id,
        any_value(v_threshold_quantile) AS quantile,
        any_value(verifier_method) FILTER (WHERE verifier_method IS NOT NULL) AS method
    FROM query_table(cur)
    GROUP BY run_id
),
ctl AS (
    SELECT
        c.run_id, c.v, q.quantile,
        row_number() OVER (PARTITION BY c.run_id ORDER BY c.v) AS rn,
        count(*) OVER (PARTITION BY c.run_id) AS n
    FROM query_table(ctl) c
    JOIN runs_q q ON q.run_id = c.run_id AND c.method = q.method
    WHERE c.control IN ('shuffled', 'off_topic')
),
thr AS (
    SELECT
        run_id,
        any_value(n) AS controls,
        min(v) FILTER (WHERE rn >= greatest(1, ceil(quantile * n))) AS v_threshold,
        avg(v) AS mean_control_v
    FROM ctl
    GROUP BY run_id
)
SELECT
    q.run_id,
    q.method,
    q.quantile,
    coalesce(t.controls, 0) AS control_scores,
    t.mean_control_v,
    coalesce(t.v_threshold, 0.0) AS v_threshold,
    CASE WHEN t.v_threshold IS NULL THEN 'none: no control scores, V > 0'
         ELSE 'controls: shuffled + off_topic' END AS source
FROM runs_q q
LEFT JOIN thr t ON t.run_id = q.run_id;

CREATE OR REPLACE VIEW verifier_thresholds AS
SELECT * FROM verifier_thresholds_of('curriculum', 'control_scores');

-- What a record's verdict needs that depends on its run alone (contract record_facts): the
-- generation gates' verdicts in step order (records written before gates were steps have
-- their two gates' verdict columns instead), the first stage before the quality gates that
-- keeps it out (invalid, no verbatim evidence, V not above the run's control bar), the first
-- gate that does, and the question's duplicate key. A run's compaction writes its rows once
-- (Store.compact_run); `record_facts` reads those files and computes the rest live.
CREATE OR REPLACE MACRO record_facts_of(cur, ctl) AS TABLE
WITH c AS (
    SELECT
        * REPLACE (if(len(gate_verdicts) > 0, gate_verdicts, [
            {'gate': 'shortcut', 'verdict': shortcut_verdict,
             'rejected_by': CASE shortcut_verdict WHEN 'fail' THEN 'shortcut'
                                WHEN 'undetermined' THEN 'shortcut_undetermined' END,
             'detail': NULL::VARCHAR},
            {'gate': 'uniqueness', 'verdict': uniqueness_verdict,
             'rejected_by': CASE uniqueness_verdict WHEN 'fail' THEN 'ambiguous'
                                WHEN 'undetermined' THEN 'uniqueness_undetermined' END,
             'detail': NULL::VARCHAR}
        ]) AS gate_verdicts)
    FROM query_table(cur)
)
SELECT
    c.record_id, c.run_id, c.created_at, c.cluster_id, c.task_type, c.hop_count,
    c.question_source, c.question, c.answer, c.is_valid, c.invalid_reason, c.is_verbatim,
    c.solver_n, c.solver_k, c.wcr_coverage_mean, c.difficulty, c.verifier_v,
    c.proposer_reward, c.gate_verdicts, c.single_hop_share,
    t.v_threshold,
    CASE
        WHEN NOT c.is_valid THEN coalesce(c.invalid_reason, 'invalid')
        WHEN NOT c.is_verbatim THEN 'no_verbatim_evidence'
        WHEN c.verifier_v IS NULL OR c.verifier_v <= t.v_threshold THEN 'below_v_threshold'
    END AS before_quality,
    list_filter(c.gate_verdicts, lambda g: g.rejected_by IS NOT NULL)[1].rejected_by
        AS gate_rejected_by,
    norm(c.question) AS question_key,
    lower(concat_ws(' ', c.question, c.answer, c.evidence)) AS search_text
FROM c
LEFT JOIN verifier_thresholds_of(cur, ctl) t ON t.run_id = c.run_id;

-- Every record's facts: the compacted runs' files, and the rest computed from their shards
-- (the store lists each side's files: record_facts_files, curriculum_without_record_facts and
-- control_scores_without_record_facts).
CREATE OR REPLACE VIEW record_facts_computed AS
SELECT * FROM record_facts_of('curriculum_without_record_facts',
                              'control_scores_without_record_facts');

CREATE OR REPLACE VIEW record_facts AS
SELECT * EXCLUDE (run_date) FROM record_facts_files
UNION ALL BY NAME
SELECT * FROM record_facts_computed;

-- The latest review of each record: reviews are append-only (a file per submission under
-- <out>/reviews/), and a later verdict replaces an earlier one.
CREATE OR REPLACE VIEW review_latest AS
SELECT * FROM reviews
QUALIFY row_number() OVER (PARTITION BY record_id ORDER BY reviewed_at DESC, review_id DESC) = 1;

-- Every record's verdict: the first stage it fails (`rejected_by`, NULL when accepted) and
-- the record it duplicates. One definition of "accepted", read by the funnel, the run's
-- summary line, the report and the export's default selection: valid, verbatim evidence, V
-- above the run's control threshold, not contaminated, every generation gate passed
-- (gate_verdicts in step order: shortcut, uniqueness and any custom gate; `undetermined` does
-- not pass, `off` and `not_applicable` do), and the best record of its exact and
-- near-duplicate question group among the records that pass everything else.
-- The facts carry what depends on a record's own run; the quality tables and the duplicate
-- ranking (which spans runs: a new night can demote an old record) are joined here. Only the
-- ranking's losers are materialised at each refresh (record_duplicates: ranking a year of
-- nights' passing records by their short keys, never their prompts and outputs); reviews are
-- joined live in curriculum_verdicts.
CREATE OR REPLACE VIEW record_gated AS
SELECT
    f.* EXCLUDE (question, answer, search_text),
    k.record_id IS NOT NULL AS contaminated,
    -- a record in no cluster of two or more ranks alone, as a singleton cluster does
    q.cluster_id AS duplicate_cluster_id,
    coalesce(
        f.before_quality,
        CASE WHEN k.record_id IS NOT NULL THEN 'contaminated' END,
        f.gate_rejected_by
    ) AS gate_rejection
FROM record_facts f
LEFT JOIN (SELECT DISTINCT record_id FROM benchmark_matches) k ON k.record_id = f.record_id
LEFT JOIN question_duplicates q ON q.record_id = f.record_id;

-- What the duplicate groups rank of a record_facts relation: the records that pass the gates
-- of their own run, with a hash of their question's key (an integer to group a year of nights
-- by; the groups themselves are the keys). Contamination, a check across runs, is the
-- ranking's to join.
CREATE OR REPLACE MACRO duplicate_keys_of(facts) AS TABLE
SELECT record_id, run_id, question_key, hash(question_key) AS question_hash, verifier_v
FROM query_table(facts)
WHERE before_quality IS NULL AND gate_rejected_by IS NULL;

-- The catalog's refresh stands a temporary view in for this one: the same rows, the compacted
-- runs' from the store's index of them (pipeline/store/run_index.py), kept night by
-- night, so a year of nights is not re-read to rank one more.
CREATE OR REPLACE VIEW duplicate_keys AS SELECT * FROM duplicate_keys_of('record_facts');

-- Only groups of two or more can have a loser: the window ranks those alone (a year of
-- nights passes about 260k records, a few hundred of which share a question).
CREATE OR REPLACE VIEW record_duplicate_ranking AS
WITH passing AS MATERIALIZED (
    -- the records that pass everything else (record_gated's gate_rejection is null) and
    -- could lose: another's question has the same hash, or a cluster of two or more
    SELECT k.record_id, k.run_id, k.question_key, q.cluster_id AS duplicate_cluster_id,
           k.verifier_v
    FROM duplicate_keys k
    LEFT JOIN question_duplicates q ON q.record_id = k.record_id
    WHERE (
        k.question_hash IN (
            SELECT question_hash FROM duplicate_keys GROUP BY question_hash HAVING count(*) > 1
        )
        OR q.record_id IS NOT NULL
    )
    AND NOT EXISTS (SELECT 1 FROM benchmark_matches b WHERE b.record_id = k.record_id)
),
question_ranked AS (
    SELECT
        record_id,
        run_id,
        row_number() OVER question_group AS question_rank,
        first_value(record_id) OVER question_group AS question_best
    FROM passing
    WHERE question_key IN (
        SELECT question_key FROM passing GROUP BY question_key HAVING count(*) > 1
    )
    WINDOW question_group AS (
        PARTITION BY question_key ORDER BY verifier_v DESC NULLS LAST, record_id
    )
),
cluster_ranked AS (
    -- a record in no cluster of two or more ranks alone, as a singleton cluster does
    SELECT
        record_id,
        run_id,
        row_number() OVER cluster_group AS cluster_rank,
        first_value(record_id) OVER cluster_group AS cluster_best
    FROM passing
    WHERE duplicate_cluster_id IS NOT NULL
    WINDOW cluster_group AS (
        PARTITION BY duplicate_cluster_id ORDER BY verifier_v DESC NULLS LAST, record_id
    )
)
SELECT
    record_id,
    CASE WHEN q.question_rank > 1 THEN 'duplicate_question' ELSE 'near_duplicate' END
        AS rejected_by,
    CASE WHEN q.question_rank > 1 THEN q.question_best ELSE c.cluster_best END AS duplicate_of,
    -- the loser's run: its run's per-run results depend on it (run_results)
    coalesce(q.run_id, c.run_id) AS run_id
FROM question_ranked q
FULL JOIN cluster_ranked c USING (record_id)
WHERE q.question_rank > 1 OR c.cluster_rank > 1;

CREATE OR REPLACE TABLE record_duplicates AS SELECT * FROM record_duplicate_ranking;

-- The last stage: at most `single_hop_share` of a run's accepted records may be one-hop
-- (single-sentence) questions; past that share of what passes everything else, the one-hop
-- records with the lowest V are rejected as `single_hop_cap` (a share of 1 caps nothing).
CREATE OR REPLACE VIEW record_verdicts AS
WITH v AS (
    SELECT
        f.* EXCLUDE (before_quality, gate_rejected_by, question_key, gate_rejection,
                     duplicate_cluster_id),
        f.before_quality IS NULL AND NOT f.contaminated AS reached_gates,
        coalesce(f.gate_rejection, d.rejected_by) AS passed_by,
        d.duplicate_of
    FROM record_gated f
    LEFT JOIN record_duplicates d ON d.record_id = f.record_id
),
runs_cap AS (
    SELECT run_id, any_value(single_hop_share) AS share,
           count(*) FILTER (WHERE hop_count >= 2) AS multi
    FROM v WHERE passed_by IS NULL GROUP BY run_id
),
singles AS (
    SELECT record_id,
           row_number() OVER (PARTITION BY run_id ORDER BY verifier_v DESC, record_id) AS rank
    FROM v WHERE passed_by IS NULL AND hop_count < 2
)
SELECT
    v.* EXCLUDE (passed_by),
    coalesce(
        v.passed_by,
        CASE WHEN s.rank > floor(c.share * c.multi / (1 - c.share) + 1e-9)
             THEN 'single_hop_cap' END
    ) AS rejected_by,
    coalesce(
        v.passed_by,
        CASE WHEN s.rank > floor(c.share * c.multi / (1 - c.share) + 1e-9)
             THEN 'single_hop_cap' END
    ) IS NULL AS accepted
FROM v
LEFT JOIN runs_cap c ON c.run_id = v.run_id AND c.share < 1
LEFT JOIN singles s ON s.record_id = v.record_id;

-- Every record with its quality columns and verdict, and a reviewer's latest verdict.
CREATE OR REPLACE VIEW curriculum_verdicts AS
SELECT
    q.* REPLACE (v.gate_verdicts AS gate_verdicts),
    v.v_threshold,
    v.reached_gates,
    v.rejected_by,
    v.duplicate_of,
    v.accepted,
    -- A reviewer's latest verdict (null: not reviewed); `accepted` stays the pipeline's own.
    rv.verdict AS review_verdict,
    rv.reason AS review_reason,
    rv.reviewer AS reviewer,
    rv.reviewed_at AS reviewed_at
FROM curriculum_quality q
JOIN record_verdicts v ON v.run_id = q.run_id AND v.record_id = q.record_id
LEFT JOIN review_latest rv ON rv.record_id = q.record_id;

-- What the export ships by default (`curriculum export` without --where).
CREATE OR REPLACE VIEW accepted AS
SELECT * FROM curriculum_verdicts WHERE accepted;

-- Funnel per run: each stage counts the records that pass it and every stage before it, in
-- the order of `curriculum_verdicts.rejected_by`; `*_undetermined` count the records a gate
-- could not judge (no gold-evidence answer was correct), which are not accepted.
CREATE OR REPLACE VIEW funnel AS
WITH r AS (
    SELECT
        v.run_id, v.rejected_by, v.accepted, v.verifier_v, v.proposer_reward, v.v_threshold,
        v.invalid_reason, v.question_source, v.hop_count,
        c.question_style, c.one_search_answerable, c.disconnected, c.missing_hop,
        CASE
            WHEN rejected_by IS NULL THEN 99
            WHEN rejected_by IN ('no_supporting_passage', 'no_answer_span',
                                 'many_valued_relation', 'duplicate_target') THEN 0
            WHEN NOT v.is_valid THEN 1
            WHEN rejected_by = 'no_verbatim_evidence' THEN 2
            WHEN rejected_by = 'below_v_threshold' THEN 3
            WHEN rejected_by = 'contaminated' THEN 4
            WHEN rejected_by IN ('shortcut', 'shortcut_undetermined') THEN 5
            WHEN rejected_by IN ('ambiguous', 'uniqueness_undetermined') THEN 6
            WHEN rejected_by IN ('disconnected', 'connected_undetermined') THEN 7
            WHEN rejected_by = 'one_search' THEN 8
            ELSE 9
        END AS reached
    FROM record_verdicts v
    JOIN curriculum c ON c.run_id = v.run_id AND c.record_id = v.record_id
)
SELECT
    run_id,
    count(*) AS generated,
    count(*) FILTER (WHERE reached >= 1) AS posed,
    count(*) FILTER (WHERE reached >= 2) AS valid,
    count(*) FILTER (WHERE reached >= 3) AS verbatim,
    count(*) FILTER (WHERE reached >= 4) AS above_v_threshold,
    count(*) FILTER (WHERE reached >= 5) AS not_contaminated,
    count(*) FILTER (WHERE reached >= 6) AS not_shortcut,
    count(*) FILTER (WHERE reached >= 7) AS unique_answer,
    count(*) FILTER (WHERE reached >= 8) AS connected,
    count(*) FILTER (WHERE reached >= 9) AS needs_search,
    count(*) FILTER (WHERE accepted) AS accepted,
    count(*) FILTER (WHERE accepted AND hop_count >= 2) AS accepted_multi_hop,
    count(*) FILTER (WHERE accepted AND question_style = 'obfuscated') AS accepted_obfuscated,
    count(*) FILTER (WHERE rejected_by = 'shortcut_undetermined') AS shortcut_undetermined,
    count(*) FILTER (WHERE rejected_by = 'uniqueness_undetermined') AS uniqueness_undetermined,
    count(*) FILTER (WHERE rejected_by = 'connected_undetermined') AS connected_undetermined,
    count(*) FILTER (WHERE disconnected) AS disconnected,
    count(*) FILTER (WHERE one_search_answerable AND hop_count >= 2) AS one_search_multi_hop,
    count(*) FILTER (WHERE invalid_reason = 'bridge_leak') AS bridge_leaks,
    count(*) FILTER (WHERE missing_hop IS NOT NULL) AS unstated_hop,
    count(*) FILTER (WHERE rejected_by IN ('duplicate_question', 'near_duplicate'))
        AS duplicates,
    count(*) FILTER (WHERE rejected_by = 'single_hop_cap') AS single_hop_capped,
    count(*) FILTER (WHERE question_source = 'template' AND reached >= 2) AS template_questions,
    any_value(v_threshold) AS v_threshold,
    avg(verifier_v) AS mean_v,
    avg(verifier_v) FILTER (WHERE accepted) AS mean_v_accepted,
    avg(proposer_reward) AS mean_proposer_reward
FROM r
GROUP BY run_id;

-- A run's records by their question's hops and style: what a trainer selecting on hop_count
-- gets, how many each stage kept, and where a hop went unstated (missing_hop).
CREATE OR REPLACE VIEW hop_funnel AS
SELECT
    v.run_id,
    v.hop_count,
    c.evidence_mode,
    c.question_style,
    count(*) AS records,
    count(*) FILTER (WHERE v.is_valid) AS valid,
    count(*) FILTER (WHERE v.accepted) AS accepted,
    count(*) FILTER (WHERE c.one_search_answerable) AS one_search_answerable,
    count(*) FILTER (WHERE c.disconnected) AS disconnected,
    count(*) FILTER (WHERE c.invalid_reason = 'bridge_leak') AS bridge_leaks
FROM record_verdicts v
JOIN curriculum c ON c.run_id = v.run_id AND c.record_id = v.record_id
GROUP BY ALL
ORDER BY ALL;

-- Tasks not posed because no passage states one of their hops, by the hop's position.
CREATE OR REPLACE VIEW unstated_hops AS
SELECT run_id, planned_hops, missing_hop, count(*) AS tasks
FROM curriculum
WHERE missing_hop IS NOT NULL
GROUP BY ALL
ORDER BY ALL;

-- Every generation gate per run, in step order: the records it judged and what it said, and
-- `rejected`, the records it is the first stage to keep out (rejected_by is its reason). Only
-- records that reached the gates (valid, verbatim, above the V bar, not contaminated) count.
CREATE OR REPLACE VIEW gate_funnel AS
WITH v AS (
    SELECT
        run_id, rejected_by,
        unnest(gate_verdicts) AS g,
        unnest(range(1, len(gate_verdicts) + 1)) AS position
    FROM record_verdicts
    WHERE reached_gates
)
SELECT
    run_id,
    g.gate AS gate,
    min(position) AS position,
    count(*) FILTER (WHERE g.verdict NOT IN ('not_applicable', 'off')) AS judged,
    count(*) FILTER (WHERE g.verdict = 'pass') AS passed,
    count(*) FILTER (WHERE g.verdict = 'fail') AS failed,
    count(*) FILTER (WHERE g.verdict = 'undetermined') AS undetermined,
    count(*) FILTER (WHERE g.verdict = 'not_applicable') AS not_applicable,
    count(*) FILTER (WHERE g.verdict = 'off') AS off,
    count(*) FILTER (WHERE rejected_by = g.rejected_by) AS rejected
FROM v
GROUP BY run_id, g.gate
ORDER BY run_id, position;

-- Verifier controls (gates.controls) per run and verifier method: mean V with the real
-- evidence and with each substitute, the ROC AUC of real vs shuffled (and vs off-topic, and
-- for multi-hop records vs the chain minus one hop, gates.connected) V —
-- Mann-Whitney over average ranks, ties counted half, so a verifier with V = 0 everywhere
-- scores exactly 0.5 — and the share of records whose answer-only V is >= their real V (the
-- verifier rewarding the answer string rather than evidence).
CREATE OR REPLACE MACRO verifier_controls_of(ctl) AS TABLE
WITH ranked AS (
    SELECT
        run_id, method, control, v,
        rank() OVER (PARTITION BY run_id, method, pair ORDER BY v)
            + (count(*) OVER (PARTITION BY run_id, method, pair, v) - 1) / 2.0 AS avg_rank,
        pair
    FROM (
        SELECT run_id, method, control, v, 'shuffled' AS pair FROM query_table(ctl)
        WHERE control IN ('real', 'shuffled')
        UNION ALL
        SELECT run_id, method, control, v, 'off_topic' AS pair FROM query_table(ctl)
        WHERE control IN ('real', 'off_topic')
        UNION ALL
        -- the chain minus one hop: real scores of the multi-hop records only
        SELECT run_id, method, control, v, 'minus_hop' AS pair FROM query_table(ctl) m
        WHERE control = 'minus_hop' OR (control = 'real' AND EXISTS (
            SELECT 1 FROM query_table(ctl) x
            WHERE x.run_id = m.run_id AND x.record_id = m.record_id AND x.method = m.method
              AND x.control = 'minus_hop'))
    )
),
auc AS (
    SELECT
        run_id, method, pair,
        count(*) FILTER (WHERE control = 'real') AS n1,
        count(*) FILTER (WHERE control <> 'real') AS n0,
        sum(avg_rank) FILTER (WHERE control = 'real') AS r1
    FROM ranked GROUP BY ALL
),
paired AS (
    SELECT
        r.run_id, r.method, r.v AS v_real, a.v AS v_answer_only
    FROM query_table(ctl) r
    -- run_id too (a record has one): a filter on the run then reaches both scans
    JOIN query_table(ctl) a
      ON a.run_id = r.run_id AND a.record_id = r.record_id AND a.method = r.method
     AND a.control = 'answer_only'
    WHERE r.control = 'real'
)
SELECT
    c.run_id,
    c.method,
    count(DISTINCT c.record_id) AS records,
    avg(c.v) FILTER (WHERE c.control = 'real') AS mean_v_real,
    avg(c.v) FILTER (WHERE c.control = 'shuffled') AS mean_v_shuffled,
    avg(c.v) FILTER (WHERE c.control = 'answer_only') AS mean_v_answer_only,
    avg(c.v) FILTER (WHERE c.control = 'off_topic') AS mean_v_off_topic,
    any_value(s.auc) AS auc_real_vs_shuffled,
    any_value(o.auc) AS auc_real_vs_off_topic,
    any_value(l.share) AS answer_only_ge_real_share,
    avg(c.v) FILTER (WHERE c.control = 'minus_hop') AS mean_v_minus_hop,
    any_value(h.auc) AS auc_real_vs_minus_hop
FROM query_table(ctl) c
LEFT JOIN (
    SELECT run_id, method, (r1 - n1 * (n1 + 1) / 2.0) / (n1 * n0) AS auc
    FROM auc WHERE pair = 'shuffled' AND n1 > 0 AND n0 > 0
) s ON s.run_id = c.run_id AND s.method = c.method
LEFT JOIN (
    SELECT run_id, method, (r1 - n1 * (n1 + 1) / 2.0) / (n1 * n0) AS auc
    FROM auc WHERE pair = 'off_topic' AND n1 > 0 AND n0 > 0
) o ON o.run_id = c.run_id AND o.method = c.method
LEFT JOIN (
    SELECT run_id, method, avg(CASE WHEN v_answer_only >= v_real THEN 1.0 ELSE 0.0 END) AS share
    FROM paired GROUP BY ALL
) l ON l.run_id = c.run_id AND l.method = c.method
LEFT JOIN (
    SELECT run_id, method, (r1 - n1 * (n1 + 1) / 2.0) / (n1 * n0) AS auc
    FROM auc WHERE pair = 'minus_hop' AND n1 > 0 AND n0 > 0
) h ON h.run_id = c.run_id AND h.method = c.method
GROUP BY c.run_id, c.method;

-- Every run's: the compactions' files (contract control_facts, written once per run), and the
-- rest computed from their control scores (the store lists each side's files).
CREATE OR REPLACE VIEW control_facts AS
SELECT * EXCLUDE (run_date) FROM control_facts_files
UNION ALL BY NAME
SELECT * FROM verifier_controls_of('control_scores_without_control_facts');

CREATE OR REPLACE VIEW verifier_controls AS SELECT * FROM control_facts;

-- Shortcut and uniqueness gates per run (gates.shortcut / gates.uniqueness): how many records
-- each checked and flagged, and the solvers' mean accuracies on the checked multi-hop records.
CREATE OR REPLACE VIEW shortcut_summary AS
SELECT
    run_id,
    count(shortcut) AS shortcut_checked,
    count(*) FILTER (WHERE shortcut) AS shortcuts,
    avg(closed_book_accuracy) AS mean_closed_book_accuracy,
    avg(one_search_accuracy) AS mean_one_search_accuracy,
    count(unique_answer) AS uniqueness_checked,
    count(*) FILTER (WHERE NOT unique_answer) AS ambiguous
FROM curriculum
GROUP BY run_id;

-- What each step of generation cost per run (shard_steps, the runner's account of every
-- committed shard: a shard redone after a crash replaces its rows, so it counts once). Tokens
-- are the engine's own counts; null where the backend does not report them.
CREATE OR REPLACE VIEW step_costs AS
SELECT
    run_id,
    step,
    sum(seconds) AS seconds,
    sum(items) AS items,
    sum(seconds) / sum(sum(seconds)) OVER (PARTITION BY run_id) AS share,
    sum(records_out) AS records_out,
    sum(cpu_seconds) AS cpu_seconds,
    sum(llm_calls) AS llm_calls,
    sum(prompt_tokens_computed) AS prompt_tokens_computed,
    sum(prompt_tokens_cached) AS prompt_tokens_cached,
    sum(generated_tokens) AS generated_tokens,
    count(DISTINCT shard) AS shards
FROM shard_steps
GROUP BY run_id, step;

-- A run's generation cost in total and per accepted record.
CREATE OR REPLACE VIEW run_costs AS
WITH s AS (
    SELECT
        run_id,
        count(DISTINCT shard) AS shards,
        sum(seconds) AS seconds,
        sum(cpu_seconds) AS cpu_seconds,
        sum(llm_calls) AS llm_calls,
        sum(prompt_tokens_computed) AS prompt_tokens_computed,
        sum(prompt_tokens_cached) AS prompt_tokens_cached,
        sum(generated_tokens) AS generated_tokens
    FROM shard_steps
    GROUP BY run_id
),
a AS (
    SELECT run_id, count(*) AS records, count(*) FILTER (WHERE accepted) AS accepted
    FROM record_verdicts
    GROUP BY run_id
)
SELECT
    s.*,
    a.records,
    a.accepted,
    s.seconds / nullif(a.accepted, 0) AS seconds_per_accepted,
    s.generated_tokens / nullif(a.accepted, 0) AS generated_tokens_per_accepted,
    (s.prompt_tokens_computed + coalesce(s.prompt_tokens_cached, 0)) / nullif(a.accepted, 0)
        AS prompt_tokens_per_accepted
FROM s
JOIN a USING (run_id);

-- Why records were filtered, per run.
CREATE OR REPLACE VIEW invalid_reasons AS
SELECT run_id, coalesce(invalid_reason, 'valid') AS reason, count(*) AS n
FROM curriculum
GROUP BY ALL;

-- The characters [start, end) of a passage text, with Python's 0-based exclusive offsets.
CREATE OR REPLACE MACRO evidence_slice(text, char_start, char_end) AS
    substr(text, char_start + 1, char_end - char_start);

-- Evidence re-check of a curriculum relation (a macro over its name, as record_facts_of): the
-- span must equal the recorded slice of its recorded source passage. `passage_chars` says
-- whether the offsets fit the passage (evidence_mismatches_of).
CREATE OR REPLACE MACRO evidence_check_of(cur) AS TABLE
SELECT
    c.record_id,
    c.run_id,
    c.evidence_passage_id,
    c.evidence_char_start,
    c.evidence_char_end,
    c.evidence,
    p.id IS NOT NULL AS passage_found,
    evidence_slice(p.text, c.evidence_char_start, c.evidence_char_end) AS recorded_slice,
    coalesce(
        evidence_slice(p.text, c.evidence_char_start, c.evidence_char_end) = c.evidence, false
    ) AS evidence_matches,
    length(p.text) AS passage_chars
FROM query_table(cur) c
LEFT JOIN passages p ON p.id = c.evidence_passage_id
WHERE c.is_verbatim;

-- Every verbatim record re-checked against the corpus now (the `evidence` audit reads the
-- results the catalog's refresh kept: evidence_counts and evidence_mismatches below).
CREATE OR REPLACE VIEW evidence_check AS SELECT * FROM evidence_check_of('curriculum');

-- Every hop of every verbatim record's evidence chain re-checked against the corpus now: the
-- hop's sentence must be the recorded slice of its recorded passage (the `chain` audit).
CREATE OR REPLACE VIEW chain_check AS
SELECT
    c.record_id,
    c.run_id,
    c.h.hop AS hop,
    c.h.passage_id AS passage_id,
    c.h.char_start AS char_start,
    c.h.char_end AS char_end,
    c.h.text AS span,
    p.id IS NOT NULL AS passage_found,
    evidence_slice(p.text, c.h.char_start, c.h.char_end) AS recorded_slice,
    coalesce(evidence_slice(p.text, c.h.char_start, c.h.char_end) = c.h.text, false)
        AS span_matches
FROM (
    SELECT record_id, run_id, unnest(evidence_chain) AS h FROM curriculum
    WHERE is_verbatim AND evidence_chain IS NOT NULL
) c
LEFT JOIN passages p ON p.id = c.h.passage_id;

-- What the store's evidence index computes a night's results from (once, then its counts
-- and its mismatches): every row's verdict, the texts of the failing rows only.
CREATE OR REPLACE MACRO evidence_results_of(cur) AS TABLE
SELECT * REPLACE (
    if(evidence_matches, NULL, evidence) AS evidence,
    if(evidence_matches, NULL, recorded_slice) AS recorded_slice
)
FROM evidence_check_of(cur);

-- The same for the runs not compacted, which the refresh checks anew each time (the
-- compacted runs' results come from the store's evidence index).
CREATE OR REPLACE VIEW evidence_check_live AS
SELECT * FROM evidence_check_of('curriculum_without_record_facts');

-- Histogram of the verifier score in 0.2-wide bins over [-1, 1] (bin = lower edge; V = 1
-- falls in the top bin). Rounding first keeps exact MC values such as 0.6 - 0.4 in their bin.
CREATE OR REPLACE VIEW verifier_histogram AS
SELECT
    run_id,
    least(floor(round(verifier_v * 5, 9)), 4) / 5 AS v_bin,
    count(*) AS n
FROM curriculum
WHERE verifier_v IS NOT NULL
GROUP BY ALL
ORDER BY run_id, v_bin;

-- Monte-Carlo verifier samples aggregated back to p+ / p- per record (cross-check of V).
CREATE OR REPLACE VIEW verifier_recomputed AS
SELECT
    record_id,
    avg(CASE WHEN condition = 'with_evidence' THEN correct::INT END) AS p_pos,
    avg(CASE WHEN condition = 'without_evidence' THEN correct::INT END) AS p_neg
FROM verifier_samples
WHERE method = 'mc'
GROUP BY record_id;

-- Hop-grouped advantages (EVE-Agent eq. 5) for trainers: each record's proposer reward
-- normalised within the records of its run with the same hop count,
-- A = (R - mean_h R) / (std_h R + 1e-6) with the population std; a group of one gets 0.
-- Matches pipeline.agents.rewards.hop_grouped_advantages.
CREATE OR REPLACE VIEW proposer_advantages AS
SELECT
    record_id,
    run_id,
    hop_count,
    proposer_reward,
    CASE
        WHEN count(*) OVER w < 2 OR max(proposer_reward) OVER w = min(proposer_reward) OVER w
            THEN 0.0
        ELSE (proposer_reward - avg(proposer_reward) OVER w)
            / (coalesce(stddev_pop(proposer_reward) OVER w, 0.0) + 1e-6)
    END AS advantage
FROM curriculum
WINDOW w AS (PARTITION BY run_id, hop_count);

-- Solver rollouts per record: accuracy, R_sol, WCR coverage/reward and how often the search
-- tool found the evidence's source passage (EVO-RAG retrieval hit).
CREATE OR REPLACE VIEW solver_summary AS
SELECT
    record_id,
    run_id,
    count(*) AS rollouts,
    avg(correct::DOUBLE) AS accuracy,
    avg(solver_reward) AS solver_reward,
    avg(wcr_coverage) AS wcr_coverage,
    avg(wcr_reward) AS wcr_reward,
    avg((evidence_hit_step IS NOT NULL)::DOUBLE) AS evidence_hit_rate,
    avg(turns) AS turns,
    avg(len(searches)) AS searches
FROM solver_rollouts
GROUP BY record_id, run_id;

-- ---- audit macros and views --------------------------------------------------------------
-- Everything below must also bind on an empty catalog (contract-typed empty base views), so it
-- only reads the base views the store always creates: curriculum, solver_rollouts,
-- verifier_samples, evalact_segments, arr_turns, proposer_rollouts, rejects, runs, passages.

-- Norm(answer) is a non-empty word sequence inside Norm(question) (pipeline.agents.rewards.contains).
CREATE OR REPLACE MACRO answer_leaks(question, answer) AS
    norm(answer) <> '' AND contains(' ' || norm(question) || ' ', ' ' || norm(answer) || ' ');

-- Everything recorded about one record: SELECT * FROM record('<record_id>').
CREATE OR REPLACE MACRO record(id) AS TABLE
SELECT * FROM curriculum WHERE record_id = id;

-- The solver rollouts and verifier samples behind one record.
CREATE OR REPLACE MACRO record_rollouts(id) AS TABLE
SELECT * FROM solver_rollouts WHERE record_id = id ORDER BY sample;

CREATE OR REPLACE MACRO record_verifier(id) AS TABLE
SELECT * FROM verifier_samples WHERE record_id = id ORDER BY condition, sample;

-- The resolved configuration a run used: SELECT config_yaml FROM run_config('<run_id>').
CREATE OR REPLACE MACRO run_config(id) AS TABLE
SELECT run_id, config_hash, config_yaml FROM runs WHERE run_id = id;

-- The verbatim records of an evidence check (a relation's name, e.g. evidence_check) whose
-- span is not the recorded slice of its recorded source passage, with what went wrong first: the passage is unknown, the offsets are missing or outside the
-- passage, or the slice differs from the span.
CREATE OR REPLACE MACRO evidence_mismatches_of(chk) AS TABLE
SELECT
    record_id,
    run_id,
    evidence_passage_id,
    evidence_char_start,
    evidence_char_end,
    CASE
        WHEN NOT passage_found THEN 'passage_not_found'
        WHEN evidence_char_start IS NULL OR evidence_char_end IS NULL THEN 'no_offsets'
        WHEN evidence_char_start < 0 OR evidence_char_end < evidence_char_start
            OR evidence_char_end > passage_chars THEN 'offsets_out_of_range'
        WHEN evidence IS NULL THEN 'no_span'
        ELSE 'span_differs'
    END AS problem,
    evidence AS span,
    recorded_slice
FROM query_table(chk)
WHERE NOT evidence_matches;

-- Each run's verbatim records by whether their span is their passage's recorded slice.
CREATE OR REPLACE MACRO evidence_counts_of(chk) AS TABLE
SELECT
    run_id,
    count(*) AS verbatim,
    count(*) FILTER (WHERE evidence_matches) AS matching,
    count(*) FILTER (WHERE NOT evidence_matches) AS mismatches
FROM query_table(chk)
GROUP BY run_id;

-- The evidence check's results as of the catalog's refresh, which keeps the compacted runs'
-- in the store's evidence index (pipeline/store/run_index.py) against the passages files it
-- was given, and checks the other runs' anew: a whole-history audit reads a row a run and
-- the mismatches, never a year of verbatim records joined with the corpus. A check against
-- the passages as they are now: the evidence_check view.
CREATE OR REPLACE TABLE evidence_counts AS SELECT * FROM evidence_counts_of('evidence_check');
CREATE OR REPLACE TABLE evidence_mismatches AS
SELECT * FROM evidence_mismatches_of('evidence_check');

-- Records whose normalised answer occurs in their normalised question. The generator marks
-- these invalid (answer_in_question); a valid one here leaked past the validity check.
CREATE OR REPLACE VIEW answer_leakage AS
SELECT
    record_id,
    run_id,
    is_valid,
    invalid_reason,
    question,
    answer,
    norm(question) AS norm_question,
    norm(answer) AS norm_answer
FROM curriculum
WHERE answer_leaks(question, answer);

-- One row per (dimension, run, value) for the dimensions cluster_id, task_type and hop_count:
-- counts, rates over generated records, mean V / R_pro / R_DZ and the solver accuracy
-- sum(k) / sum(n) over the solver rollouts. The *_summary views below are typed slices.
CREATE OR REPLACE VIEW curriculum_breakdown AS
SELECT
    CASE
        WHEN grouping(cluster_id) = 0 THEN 'cluster_id'
        WHEN grouping(task_type) = 0 THEN 'task_type'
        ELSE 'hop_count'
    END AS dimension,
    run_id,
    CASE
        WHEN grouping(cluster_id) = 0 THEN cluster_id::VARCHAR
        WHEN grouping(task_type) = 0 THEN task_type
        ELSE hop_count::VARCHAR
    END AS value,
    count(*) AS records,
    count(*) FILTER (WHERE is_valid) AS valid,
    count(*) FILTER (WHERE is_valid AND is_verbatim) AS verbatim,
    count(*) FILTER (WHERE accepted) AS accepted,
    avg(is_valid::DOUBLE) AS valid_rate,
    avg((is_valid AND is_verbatim)::DOUBLE) AS verbatim_rate,
    avg(verifier_v) AS mean_v,
    avg(proposer_reward) AS mean_proposer_reward,
    avg(difficulty) AS mean_difficulty,
    sum(solver_k)::DOUBLE / nullif(sum(solver_n), 0) AS solver_accuracy,
    avg(wcr_coverage_mean) AS mean_wcr_coverage
FROM record_verdicts
GROUP BY GROUPING SETS ((run_id, cluster_id), (run_id, task_type), (run_id, hop_count));

CREATE OR REPLACE VIEW cluster_summary AS
SELECT run_id, value::INTEGER AS cluster_id, * EXCLUDE (dimension, run_id, value)
FROM curriculum_breakdown WHERE dimension = 'cluster_id';

CREATE OR REPLACE VIEW task_summary AS
SELECT run_id, value AS task_type, * EXCLUDE (dimension, run_id, value)
FROM curriculum_breakdown WHERE dimension = 'task_type';

CREATE OR REPLACE VIEW hop_summary AS
SELECT run_id, value::TINYINT AS hop_count, * EXCLUDE (dimension, run_id, value)
FROM curriculum_breakdown WHERE dimension = 'hop_count';

-- Waypoint coverage g against solver correctness, per run, in 0.25-wide bins of g (bin =
-- lower edge, g = 1 in the top bin; NULL = the record had no KG waypoints).
CREATE OR REPLACE VIEW wcr_by_coverage AS
SELECT
    run_id,
    CASE WHEN wcr_coverage IS NOT NULL THEN least(floor(round(wcr_coverage * 4, 9)), 3) / 4 END
        AS coverage_bin,
    count(*) AS rollouts,
    count(*) FILTER (WHERE correct) AS correct,
    avg(correct::DOUBLE) AS accuracy,
    avg(wcr_coverage) AS mean_coverage,
    avg(wcr_reward) AS mean_wcr_reward,
    avg(solver_reward) AS mean_solver_reward
FROM solver_rollouts
GROUP BY ALL;

-- EvalAct calibration per run: is the agent's self-reported z higher for searches
-- that retrieved the evidence passage than for those that missed it?
CREATE OR REPLACE VIEW evalact_calibration AS
SELECT
    run_id,
    count(*) AS segments,
    count(z) AS scored_segments,
    count(*) FILTER (WHERE violation IS NOT NULL) AS violations,
    avg(z) FILTER (WHERE evidence_hit) AS mean_z_hit,
    avg(z) FILTER (WHERE NOT evidence_hit) AS mean_z_miss,
    count(z) FILTER (WHERE evidence_hit) AS scored_hits,
    count(z) FILTER (WHERE NOT evidence_hit) AS scored_misses,
    avg(pcar_multiplier) AS mean_pcar_multiplier
FROM evalact_segments
GROUP BY run_id;

-- EvalAct protocol violations per run and reason (malformed or missing Evaluate actions).
CREATE OR REPLACE VIEW evalact_violations AS
SELECT run_id, reason, count(*) AS n
FROM (
    SELECT run_id, unnest(protocol_violations) AS reason
    FROM solver_rollouts WHERE protocol = 'evalact'
)
GROUP BY ALL;

-- ARR: protocol violations per run, role and reason ('role:reason', e.g.
-- 'verifier:missing_response'), counted once per broken turn.
CREATE OR REPLACE VIEW arr_violations AS
SELECT run_id, split_part(v, ':', 1) AS role, split_part(v, ':', 2) AS reason, count(*) AS n
FROM (
    SELECT run_id, unnest(protocol_violations) AS v
    FROM solver_rollouts WHERE protocol = 'arr'
)
GROUP BY ALL;

-- ARR §3.2 / Figure 2: each dialogue's entropy pattern (the reasoner's last three think
-- entropies) with its share of the run's dialogues and the accuracy of the dialogues in it.
-- NULL pattern: fewer than two think steps (no trend).
CREATE OR REPLACE VIEW arr_entropy_patterns AS
SELECT
    run_id,
    entropy_pattern,
    count(*) AS dialogues,
    count(*) / sum(count(*)) OVER (PARTITION BY run_id) AS share,
    avg(correct::DOUBLE) AS accuracy,
    avg(answer_f1) AS mean_f1,
    avg(behavior_impact) AS mean_behavior_impact
FROM solver_rollouts
WHERE protocol = 'arr'
GROUP BY run_id, entropy_pattern;

-- ARR per run: the two agents' outcome rewards (eq. 5), how often they agree, and the
-- verifier's critique entropy and process advantage (eqs. 6-7) when the reasoner was right
-- vs wrong (the paper's §5.4 observation: verifier entropy separates the two).
CREATE OR REPLACE VIEW arr_calibration AS
WITH d AS (
    SELECT run_id, rollout_id, correct, outcome_reward, verifier_reward, answer_f1,
        verifier_answer_f1, predicted_answer, verifier_answer
    FROM solver_rollouts WHERE protocol = 'arr'
), crit AS (
    SELECT rollout_id, avg(mean_entropy) AS critique_entropy,
        avg(process_advantage) AS process_advantage
    FROM arr_turns WHERE critique
    GROUP BY rollout_id
)
SELECT
    d.run_id,
    count(*) AS dialogues,
    avg(d.correct::DOUBLE) AS reasoner_accuracy,
    avg(d.answer_f1) AS reasoner_f1,
    avg(d.verifier_answer_f1) AS verifier_f1,
    avg(d.outcome_reward) AS mean_reasoner_reward,
    avg(d.verifier_reward) AS mean_verifier_reward,
    avg((norm(d.predicted_answer) = norm(d.verifier_answer))::DOUBLE) AS answers_agree,
    avg(c.critique_entropy) FILTER (WHERE d.correct) AS critique_entropy_if_correct,
    avg(c.critique_entropy) FILTER (WHERE NOT d.correct) AS critique_entropy_if_wrong,
    avg(c.process_advantage) AS mean_process_advantage
FROM d LEFT JOIN crit c USING (rollout_id)
GROUP BY d.run_id;

-- Per run: how coverage differs between correct and wrong rollouts, and their correlation.
CREATE OR REPLACE VIEW wcr_correctness AS
SELECT
    run_id,
    count(*) AS rollouts,
    count(wcr_coverage) AS with_waypoints,
    avg(wcr_coverage) FILTER (WHERE correct) AS coverage_if_correct,
    avg(wcr_coverage) FILTER (WHERE NOT correct) AS coverage_if_wrong,
    corr(wcr_coverage, correct::DOUBLE) AS coverage_correct_corr
FROM solver_rollouts
GROUP BY run_id;

-- Runs with their configuration fingerprint and what they landed. foreign_config_records
-- counts records whose config hash is not their run's (never expected: a resumed run must
-- keep its configuration). The YAML itself: SELECT * FROM run_config('<run_id>').
CREATE OR REPLACE VIEW run_overview AS
WITH recs AS (
    SELECT c.run_id, count(*) AS records,
        count(*) FILTER (WHERE c.config_hash IS DISTINCT FROM r.config_hash)
            AS foreign_config_records
    FROM curriculum c LEFT JOIN runs r USING (run_id)
    GROUP BY c.run_id
)
SELECT
    coalesce(r.run_id, recs.run_id) AS run_id,
    r.run_date,
    r.profile,
    r.status,
    r.started_at,
    r.finished_at,
    r.finished_at - r.started_at AS duration,
    r.shards_planned,
    r.shards_completed,
    r.config_hash,
    r.schema_version,
    coalesce(recs.records, 0) AS records,
    coalesce(recs.foreign_config_records, 0) AS foreign_config_records,
    r.run_id IS NOT NULL AS has_run_record
FROM runs r FULL OUTER JOIN recs ON recs.run_id = r.run_id;

-- What the record browser (`curriculum browse`) reads, for pages that must answer in
-- milliseconds at a million records: reviews are not in them (joined live from
-- review_latest).
--
-- record_index: one row per record with what the records page filters, sorts and searches
-- on; sort keys are never null (V and difficulty -1 when missing) so a page can start after
-- the last row shown (keyset paging). A view: the text comes from each run's record_facts
-- file, the verdict from the materialised record_verdicts, so a refresh copies neither.
CREATE OR REPLACE VIEW record_index AS
SELECT
    f.record_id, f.run_id, f.created_at, f.task_type, f.hop_count, f.question_source,
    f.question, f.answer, f.verifier_v, f.difficulty, v.accepted, v.rejected_by,
    v.duplicate_of, f.gate_verdicts,
    coalesce(f.verifier_v, -1.0) AS v_key,
    coalesce(f.difficulty, -1.0) AS difficulty_key,
    f.search_text
FROM record_facts f
JOIN record_verdicts v ON v.run_id = f.run_id AND v.record_id = f.record_id;

-- record_facets: the values each filter of the records page offers, in the order it offers
-- them (one row of lists). The record browser stores it in its own index once per refresh
-- (pipeline/browse/catalog_reader.py): unnesting every record's gate verdicts on each page
-- view cost more than the page itself, and landing does not pay for what only a browser reads.
CREATE OR REPLACE VIEW record_facets AS
WITH v AS MATERIALIZED (
    SELECT DISTINCT run_id, gate_rejection, task_type, hop_count, gate_verdicts
    FROM record_gated
),
g AS (SELECT unnest(gate_verdicts) AS g FROM (SELECT DISTINCT gate_verdicts FROM v))
SELECT
    (SELECT list(x ORDER BY x DESC) FROM (SELECT DISTINCT run_id AS x FROM v)) AS run_id,
    (SELECT list(x ORDER BY x) FROM (
        SELECT gate_rejection AS x FROM v WHERE gate_rejection IS NOT NULL
        UNION SELECT rejected_by FROM record_duplicates)) AS rejected_by,
    (SELECT list(x ORDER BY x) FROM (SELECT DISTINCT task_type AS x FROM v)) AS task_type,
    (SELECT list(x ORDER BY x) FROM (SELECT DISTINCT hop_count AS x FROM v
        WHERE hop_count IS NOT NULL)) AS hop_count,
    (SELECT list(x ORDER BY x) FROM (SELECT DISTINCT g.gate AS x FROM g)) AS gate,
    (SELECT list(x ORDER BY x) FROM (SELECT DISTINCT g.verdict AS x FROM g)) AS gate_verdict;
