"""Corpus selector (EVE-Agent §3.3, appendix F): clusters, two UCB1 bandits, document draws.

paths, ids, fp = index_inputs(index_dir)
k = cluster_count(cfg.selector.k0, cfg.selector.alpha, t)
clusters = cluster_embeddings(paths, ids, k, seed, out / "selector" / "clusters",
                          iteration=t, fingerprint=fp)
sel = Selector.load_or_init(out / "selector" / "state", t, clusters, cfg.selector, seed)
draws = sel.draw(n)
sel.update([Feedback(...), ...], run_score(proposer_mean, solver_mean))
sel.save(out / "selector" / "state")
"""

from pipeline.selector.bandit import UCB1Bandit
from pipeline.selector.clustering import (
    ClusterResult,
    cluster_embeddings,
    cluster_index,
    index_inputs,
)
from pipeline.selector.feedback import (
    proposer_reward_range,
    quality,
    run_score,
    sample_rewards,
    selector_rewards,
    solver_reward_range,
)
from pipeline.selector.selector import Draw, Feedback, FeedbackResult, Selector
from pipeline.selector.state import iteration_dir, latest_iteration, saved_iterations
from pipeline.selector.ucb import (
    batch_probabilities,
    cluster_count,
    inherit_split,
    nearest_parents,
    ucb_scores,
)

__all__ = [
    "ClusterResult",
    "Draw",
    "Feedback",
    "FeedbackResult",
    "Selector",
    "UCB1Bandit",
    "batch_probabilities",
    "cluster_count",
    "cluster_embeddings",
    "cluster_index",
    "index_inputs",
    "inherit_split",
    "iteration_dir",
    "latest_iteration",
    "nearest_parents",
    "proposer_reward_range",
    "quality",
    "run_score",
    "sample_rewards",
    "saved_iterations",
    "selector_rewards",
    "solver_reward_range",
    "ucb_scores",
]
