"""ARR's rewards over one question's group of dialogues, as rows (§4.2, eqs. 5-9).

Per dialogue (solver_rollouts columns): the adversarial outcome rewards r^r, r^v (eq. 5), their
group-normalised advantages A^r, A^v (§4.2.1), the reasoner's think-entropy pattern (§3.2,
Figure 2) and the behaviour impact A_impact (eq. 8). Per action (arr_turns rows): role, action,
text, H_{a_t}, and for the verifier's critique actions A_clarity (eq. 7), A^v_proc (eq. 6) and
the token advantage Â^v (eq. 9). The math is `process_rewards`; this module only assembles it.
"""

from __future__ import annotations

from collections.abc import Sequence

from pipeline.agents.arr import Action, ArrSettings, Dialogue
from pipeline.agents.process_rewards import (
    adversarial_rewards,
    behavior_impact,
    entropy_pattern,
    outcome_advantages,
    process_advantage,
    verifier_clarity,
    verifier_token_advantage,
)
from pipeline.agents.rewards import contains, token_f1


def step_entropies(actions: Sequence[Action], role: str, name: str) -> list[float]:
    """[H_{a_1}, …, H_{a_n}]: per turn, the token-weighted mean entropy of one action (a turn
    with two <think> blocks is one step); turns without that action or its tokens are skipped."""
    by_turn: dict[int, tuple[float, int]] = {}
    for a in actions:
        if a.role != role or a.action != name or a.entropy is None or a.tokens == 0:
            continue
        s, n = by_turn.get(a.turn, (0.0, 0))
        by_turn[a.turn] = (s + a.entropy * a.tokens, n + a.tokens)
    return [s / n for _, (s, n) in sorted(by_turn.items())]


def score_dialogues(
    dialogues: Sequence[Dialogue], gold: str, s: ArrSettings
) -> tuple[list[dict], list[list[dict]]]:
    """(rollout columns per dialogue, arr_turns rows per dialogue, without ids)."""
    rewards = [
        adversarial_rewards(d.final, d.verifier_answer, gold, s.adversarial_lambda, s.f1_buckets)
        for d in dialogues
    ]
    adv_r = outcome_advantages([r for r, _ in rewards])
    adv_v = outcome_advantages([v for _, v in rewards])
    columns, turns = [], []
    for i, d in enumerate(dialogues):
        f1_r = token_f1(d.final, gold)
        pattern = entropy_pattern(step_entropies(d.actions, "reasoner", "think"), s.entropy_delta)
        monitored = {a: step_entropies(d.actions, "reasoner", a) for a in s.monitored_actions}
        impact = behavior_impact(monitored, s.entropy_delta)
        columns.append(
            {
                "verifier_answer": d.verifier_answer,
                "verifier_answer_f1": token_f1(d.verifier_answer, gold),
                "outcome_reward": rewards[i][0],
                "outcome_advantage": adv_r[i],
                "verifier_reward": rewards[i][1],
                "verifier_advantage": adv_v[i],
                "entropy_pattern": pattern,
                "behavior_impact": impact,
            }
        )
        turns.append([_turn_row(a, gold, f1_r, impact, adv_r[i], adv_v[i], s) for a in d.actions])
    return columns, turns


def _turn_row(
    a: Action,
    gold: str,
    f1_r: float,
    impact: float | None,
    adv_r: float,
    adv_v: float,
    s: ArrSettings,
) -> dict:
    """One action's row. Clarity needs the action's entropy; A^v_proc also needs A_impact
    (None when no monitored reasoner action has two steps): without it Â^v = A^v."""
    verifier = a.role == "verifier"
    critique = verifier and a.action in s.critique_actions
    in_docs = contains(a.documents or "", gold) if verifier else None
    in_action = contains(a.text, gold) if verifier else None
    clarity = proc = None
    if critique and a.entropy is not None:
        clarity = verifier_clarity(a.entropy, bool(in_docs), bool(in_action))
        if impact is not None:
            proc = process_advantage(f1_r, clarity, impact)
    outcome = adv_v if verifier else adv_r
    # Eq. 9: the reasoner's Â^r = A^r; the verifier's critique tokens add A^v_proc.
    token_adv = verifier_token_advantage(outcome, proc or 0.0, proc is not None)
    return {
        "turn": a.turn,
        "round": a.round,
        "role": a.role,
        "action": a.action,
        "text": a.text,
        "mean_entropy": a.entropy,
        "entropy_tokens": a.tokens,
        "entropy_exact": a.exact,
        "entropy_top_k": a.top_k,
        "violations": list(a.violations),
        "critique": critique,
        "gold_in_documents": in_docs,
        "gold_in_action": in_action,
        "clarity": clarity,
        "process_advantage": proc,
        "outcome_advantage": outcome,
        "advantage": token_adv if verifier else outcome,
    }
