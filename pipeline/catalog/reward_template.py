"""Reward of an evidence-curriculum export, for verl and TRL (standard library only).

Load it by path; nothing else needs installing:

- verl: reward.custom_reward_function.path=<export>/reward.py
        reward.custom_reward_function.name=compute_score
  `compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs)` scores one
  response and returns a dict: `score` (the reward) and its parts (acc, valid, coverage, wcr,
  f_fmt), which verl logs. reward.custom_reward_function.reward_kwargs may override `alpha`
  and `format_weight`.
- TRL:  GRPOTrainer(reward_funcs=[reward.curriculum_reward], ...)
  `curriculum_reward(prompts, completions, **columns) -> list[float]` scores a batch; the
  responses to one prompt form one WCR group (the paper's g̃ = g / max g over the group).

The reward (SETTINGS below records the values this export was made with):
  c      = 1 if the text in the last <answer>...</answer> equals the target or one of its
           aliases after normalisation (lowercase, no punctuation or articles), else 0;
  valid  = the response has a non-empty <answer>;
  g      = share of the question's KG waypoints named in the <think> text (0 without a KG path);
  R      = c + alpha * (1 - c) * valid * g~ + format_weight * F_fmt,
           g~ = g / max g over the responses scored together (one response: g~ = 1 if g > 0);
  F_fmt  = (1 + F_think + F_tool(h) + F_ans) / 4, EVE-Agent's format reward of the transcript.
A correct answer gets exactly 1 (plus the format term); only incorrect but valid answers earn
waypoint credit. The functions between the markers below are copied verbatim from the
pipeline's pipeline/agents/rewards.py when the export is written.

No `from __future__ import annotations` here: verl loads this file without registering it in
sys.modules, and dataclasses cannot resolve string annotations of such a module.
"""

# <pipeline-functions>
from pipeline.agents.rewards import trainer_rewards

# </pipeline-functions>

# <settings>
SETTINGS = {
    "alpha": 0.3,
    "format_weight": 0.0,
}
# </settings>


def _as_list(value) -> list:
    """A list from a list, a tuple, a NumPy array (pandas/verl), a single string or None."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if hasattr(value, "tolist"):
        value = value.tolist()
    return [_as_list(v) if not isinstance(v, str) and v is not None else v for v in value]


def _answers(truth: dict) -> list[str]:
    """The target(s) and every alias (`aliases`, or `answer_aliases`) of a ground truth."""
    forms = []
    for key in ("target", "answer", "aliases", "answer_aliases"):
        forms += [f for f in _as_list(truth.get(key)) if isinstance(f, str)]
    return forms


def _setting(kwargs: dict, name: str) -> float:
    return float(kwargs[name]) if kwargs.get(name) is not None else float(SETTINGS[name])


def _score(responses, truth, info, kwargs) -> list:
    truth = truth if isinstance(truth, dict) else {"target": truth}
    info = info if isinstance(info, dict) else {}
    hops = info.get("hop_count") or truth.get("hop_count") or 1
    chain = [
        h if isinstance(h, str) else h.get("text") or "" for h in truth.get("evidence_chain") or []
    ]
    return trainer_rewards(
        responses,
        _answers(truth),
        _as_list(truth.get("waypoints")),
        info.get("question") or truth.get("question"),
        " ".join(chain) if chain else truth.get("evidence"),
        int(hops),
        _setting(kwargs, "alpha"),
        _setting(kwargs, "format_weight"),
    )


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs) -> dict:
    """verl's reward function: one response, scored as a WCR group of one."""
    s = _score([solution_str or ""], ground_truth, extra_info, kwargs)[0]
    return {
        "score": s.score,
        "acc": float(s.correct),
        "valid": float(s.valid),
        "coverage": s.coverage,
        "wcr": s.wcr,
        "f_fmt": s.format,
    }


def _text(completion) -> str:
    """A TRL completion: a string, or chat messages whose contents are joined."""
    if isinstance(completion, str):
        return completion
    return "".join(m.get("content") or "" for m in completion if isinstance(m, dict))


def _row(columns: dict, i: int) -> tuple[dict, dict]:
    """(ground truth, extra info) of row i from the dataset columns TRL passes: the verl
    parquet's reward_model / extra_info, or the hf / jsonl export's flat columns."""
    col = {k: v[i] for k, v in columns.items() if isinstance(v, list | tuple) and len(v) > i}
    rm = col.get("reward_model")
    truth = dict(rm.get("ground_truth") or {}) if isinstance(rm, dict) else {}
    if not truth:
        truth = {
            "target": col.get("golden_answers") or col.get("answer"),
            "aliases": col.get("aliases") or col.get("answer_aliases"),
            "waypoints": col.get("waypoints"),
            "evidence": col.get("evidence"),
            "evidence_chain": col.get("evidence_chain"),
        }
    info = col.get("extra_info") if isinstance(col.get("extra_info"), dict) else {}
    flat = {k: col.get(k) for k in ("question", "hop_count", "record_id")}
    return truth, {**flat, **info}


def curriculum_reward(prompts, completions, **columns) -> list[float]:
    """TRL's reward function: the completions to one prompt (same record id, else the same
    prompt) form one WCR group, as the solver's n rollouts of a question do."""
    kwargs = {k: columns.pop(k) for k in ("alpha", "format_weight") if k in columns}
    groups: dict[str, list[int]] = {}
    for i, prompt in enumerate(prompts):
        key = _row(columns, i)[1].get("record_id") or repr(prompt)
        groups.setdefault(str(key), []).append(i)
    out = [0.0] * len(prompts)
    for idx in groups.values():
        truth, info = _row(columns, idx[0])
        scores = _score([_text(completions[i]) for i in idx], truth, info, kwargs)
        for i, s in zip(idx, scores, strict=True):
            out[i] = s.score
    return out
