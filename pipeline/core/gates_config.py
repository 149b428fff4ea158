"""The `gates:` section of the config: quality gates that run in generation, per shard.

Part of `PipelineConfig` (pipeline/core/config.py), and of its hash: a gate changes what a
shard holds.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class GatesConfig(BaseModel):
    """Quality gates that need the LLM, run in generation per shard right
    after the verifier, batched like it. Unlike `quality:` (catalog-only checks, unhashed) they
    change what a shard contains, so this section is part of the config hash: a resumed run
    never mixes shards with and without them, and switching one off starts a new run."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)  # as every section
    # Shortcut check on valid multi-hop records (h >= 2): `shortcut_n` solver rollouts with the
    # search tool disabled (closed book) and `shortcut_n` restricted to one search; a record is
    # a shortcut when either accuracy (EM, as the solver scores) reaches `shortcut_threshold`.
    shortcut: bool = True
    shortcut_n: int = Field(4, ge=1)
    # 0.5: a majority of samples, so one lucky sample of a weak solver does not drop a record.
    shortcut_threshold: float = Field(0.5, gt=0.0, le=1.0)
    # Uniqueness: a record is ambiguous when its solver rollouts converge on two or more
    # distinct normalised answers, each given by >= `unique_min_support` rollouts and found in
    # the passages those rollouts retrieved (answers no retrieval supports are just errors).
    uniqueness: bool = True
    unique_min_support: int = Field(2, ge=1)
    # Verifier controls: on this share of each run's valid verbatim records (chosen by record
    # id, so independent of sharding), V again with another record's evidence (a derangement
    # within the shard), the answer string alone, and a passage of another cluster.
    controls: bool = True
    controls_share: float = Field(1.0, ge=0.0, le=1.0)
    # Connected reasoning (MuSiQue): the answer scored with the chain minus each hop in turn
    # (teacher-forced); a multi-hop record whose answer is as likely without some hop's
    # sentence is `disconnected`.
    connected: bool = True
    # Search necessity (InfoSeek): the run's retriever, given the question alone; a multi-hop
    # record whose answer is in the top `one_search_k` passages is `one_search`.
    one_search: bool = True
    one_search_k: int = Field(3, ge=1)
    # At most this share of a run's accepted records may be single-sentence (one hop) questions;
    # the rest are rejected as `single_hop_cap` (view record_verdicts), lowest V first.
    single_hop_share: float = Field(0.2, ge=0.0, le=1.0)
    # `gold_n` answers with the gold evidence (greedy for 1); none correct: gates undetermined.
    gold_n: int = Field(1, ge=1)
    # A record is accepted when its V exceeds this quantile of the V its run's shuffled and
    # off-topic controls get (view verifier_thresholds); without controls the bar is V > 0.
    # 0.8: of ~30 control scores a night, 0.9 is set by the three highest (a shuffled passage
    # that happens to mention the answer), 0.8 still clears four in five.
    v_quantile: float = Field(0.8, ge=0.0, le=1.0)
    # Gates of your own (a pipeline.generation.steps.Gate registered under the name), run after
    # `uniqueness` in this order: name -> the settings its from_config reads.
    custom: dict[str, dict[str, Any]] = {}
