-- Derived DuckDB views over the base views (curriculum, verifier_samples, solver_rollouts,
-- rejects, runs, passages) that the store creates from the committed shards.
-- Executed on every catalog refresh; every statement must be idempotent.

-- Records an auditor usually wants: valid, verbatim evidence, with its verifier score.
CREATE OR REPLACE VIEW curriculum_valid AS
SELECT * FROM curriculum WHERE is_valid AND is_verbatim;

-- Validity funnel per run: generated -> valid -> verbatim -> V > 0.
CREATE OR REPLACE VIEW funnel AS
SELECT
    run_id,
    count(*) AS generated,
    count(*) FILTER (WHERE is_valid) AS valid,
    count(*) FILTER (WHERE is_valid AND is_verbatim) AS verbatim,
    count(*) FILTER (WHERE is_valid AND is_verbatim AND verifier_v > 0) AS v_positive,
    avg(verifier_v) AS mean_v,
    avg(proposer_reward) AS mean_proposer_reward
FROM curriculum
GROUP BY run_id;

-- Why records were filtered, per run.
CREATE OR REPLACE VIEW invalid_reasons AS
SELECT run_id, coalesce(invalid_reason, 'valid') AS reason, count(*) AS n
FROM curriculum
GROUP BY ALL;

-- Evidence re-check: the span must equal the recorded slice of its recorded source passage.
CREATE OR REPLACE VIEW evidence_check AS
SELECT
    c.record_id,
    c.run_id,
    c.evidence_passage_id,
    c.evidence_char_start,
    c.evidence_char_end,
    c.evidence,
    p.id IS NOT NULL AS passage_found,
    substr(p.text, c.evidence_char_start + 1, c.evidence_char_end - c.evidence_char_start)
        AS recorded_slice,
    coalesce(
        substr(p.text, c.evidence_char_start + 1, c.evidence_char_end - c.evidence_char_start)
            = c.evidence,
        false
    ) AS evidence_matches
FROM curriculum c
LEFT JOIN passages p ON p.id = c.evidence_passage_id
WHERE c.is_verbatim;

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
-- Matches pipeline.rewards.hop_grouped_advantages.
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
