"""The reward that ships with an export: `reward.py` (verl's `compute_score`, TRL's reward
function); the dataset card (`export_card.py`) says how to train with it.

One source of truth: reward.py is `reward_template.py` (the trainer glue) with its marked import
of `pipeline.agents.rewards` replaced by the source of the imported functions and of everything
they call there, copied verbatim; the settings block carries the exported runs' `rewards.wcr_alpha`.
A function of rewards.py that needed anything outside the standard library would make the
export fail here rather than in a trainer's worker.
"""

from __future__ import annotations

import ast
import pprint
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from pipeline.agents import rewards
from pipeline.catalog.readonly_sql import connect_audit

REWARD_FILE = "reward.py"
VERL_FUNCTION = "compute_score"
TRL_FUNCTION = "curriculum_reward"
TEMPLATE = Path(__file__).with_name("reward_template.py")
_FUNCTIONS = ("# <pipeline-functions>\n", "# </pipeline-functions>\n")
_SETTINGS = ("# <settings>\n", "# </settings>\n")

# The Search-R1 tags the exported prompt asks for and the reward reads (tests hold the prompt
# and the reward to them).
TAGS = {
    "think": ["<think>", "</think>"],
    "search": ["<search>", "</search>"],
    "information": ["<information>", "</information>"],
    "answer": ["<answer>", "</answer>"],
}


class RewardConfigError(ValueError):
    """The exported runs do not agree on the reward's settings."""

    hint = "export those runs separately (--run-id)"


class RewardSettingError(RewardConfigError):
    """A run's stored reward setting is not one reward.py can carry (not a number, nan, out
    of range)."""

    hint = "leave that run out (--run-id the others)"


@dataclass(frozen=True)
class RewardSettings:
    alpha: float
    alpha_from: str  # which runs' config said so, or "default"
    format_weight: float = 0.0

    def module_settings(self) -> dict[str, float]:
        return {"alpha": self.alpha, "format_weight": self.format_weight}


def reward_settings(catalog: str | Path, run_ids: Sequence[str]) -> RewardSettings:
    """WCR's α from the exported runs' resolved configs (`rewards.wcr_alpha`); the config's
    default for runs whose config the catalog lacks. Runs that disagree are refused."""
    from pipeline.core.config import RewardConfig

    default = RewardConfig().wcr_alpha
    found: dict[float, list[str]] = {}
    if run_ids:
        with connect_audit(catalog) as con:
            rows = con.execute(
                "SELECT run_id, config_yaml FROM runs WHERE list_contains(?, run_id) "
                "ORDER BY run_id",
                [sorted(set(run_ids))],
            ).fetchall()
        for run_id, text in rows:
            found.setdefault(_alpha_of(run_id, text, default), []).append(run_id)
    if len(found) > 1:
        said = "; ".join(f"{a} ({', '.join(r)})" for a, r in sorted(found.items()))
        raise RewardConfigError(f"the exported runs disagree on rewards.wcr_alpha: {said}")
    if not found:
        return RewardSettings(default, "default (no run config in the catalog)")
    ((alpha, runs),) = found.items()
    return RewardSettings(alpha, f"rewards.wcr_alpha of run(s) {', '.join(runs)}")


def _alpha_of(run_id: str, text: str | None, default: float) -> float:
    """`rewards.wcr_alpha` of a run's stored config: a number in [0, 1] (RewardConfig's
    range), else RewardConfigError, so reward.py never carries nan (it would not import) or
    a reward outside [0, 1]."""
    try:
        doc = yaml.safe_load(text or "") or {}
        section = (doc.get("rewards") if isinstance(doc, dict) else None) or {}
        raw = section.get("wcr_alpha", default) if isinstance(section, dict) else None
        alpha = float(raw) if not isinstance(raw, bool) else None
    except (yaml.YAMLError, TypeError, ValueError):
        alpha = None
    if alpha is None or not 0.0 <= alpha <= 1.0:  # also refuses nan and inf
        raise RewardSettingError(
            f"run {run_id}: its stored config's rewards.wcr_alpha is not a number in [0, 1]"
        )
    return alpha


# ---- reward.py ---------------------------------------------------------------------------


def _span(lines: list[str], node: ast.stmt) -> str:
    first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
    return "".join(lines[first - 1 : node.end_lineno])


def _defined(node: ast.stmt) -> list[str]:
    if isinstance(node, ast.FunctionDef | ast.ClassDef):
        return [node.name]
    if isinstance(node, ast.Assign):
        return [t.id for t in node.targets if isinstance(t, ast.Name)]
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return [node.target.id]
    return []


def copied_source(roots: Sequence[str], module=rewards) -> str:
    """In file order and verbatim, the top-level definitions `roots` need (transitively) and
    the module's imports they use. Refuses such an import outside the standard library."""
    text = Path(module.__file__).read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    tree = ast.parse(text)
    defs = {name: node for node in tree.body for name in _defined(node)}
    missing = sorted(set(roots) - set(defs))
    if missing:
        raise RewardConfigError(f"{module.__name__} defines no {', '.join(missing)}")
    need, todo = set(), list(roots)
    while todo:
        name = todo.pop()
        if name in need:
            continue
        need.add(name)
        todo += [n.id for n in ast.walk(defs[name]) if isinstance(n, ast.Name) and n.id in defs]
    used = {n.id for name in need for n in ast.walk(defs[name]) if isinstance(n, ast.Name)}
    imports = []
    for node in tree.body:
        if not isinstance(node, ast.Import | ast.ImportFrom):
            continue
        bound = {(a.asname or a.name).split(".")[0] for a in node.names}
        if (isinstance(node, ast.ImportFrom) and node.module == "__future__") or not bound & used:
            continue  # reward.py has no __future__ import (see the template); unused: left out
        mods = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module]
        outside = [m for m in mods if (m or "").split(".")[0] not in sys.stdlib_module_names]
        if outside:
            raise RewardConfigError(
                f"{module.__name__} imports {', '.join(outside)} for the reward: reward.py "
                "must stay standard-library only"
            )
        imports.append(_span(lines, node))
    body = [_span(lines, n) for n in tree.body if set(_defined(n)) & need]
    return "".join(imports) + "\n\n" + "\n\n".join(body)


def _block(text: str, markers: tuple[str, str]) -> tuple[int, int]:
    start, end = text.index(markers[0]), text.index(markers[1])
    return start + len(markers[0]), end


def reward_module_source(settings: RewardSettings) -> str:
    """reward.py: the template with the pipeline's functions and this export's settings in."""
    text = TEMPLATE.read_text(encoding="utf-8")
    a, b = _block(text, _FUNCTIONS)
    (imp,) = [n for n in ast.parse(text[a:b]).body if isinstance(n, ast.ImportFrom)]
    header = f"# copied from pipeline/agents/rewards.py: {', '.join(x.name for x in imp.names)}\n"
    text = text[:a] + header + copied_source([x.name for x in imp.names]) + "\n" + text[b:]
    a, b = _block(text, _SETTINGS)
    values = pprint.pformat(settings.module_settings(), sort_dicts=True)
    return text[:a] + f"SETTINGS = {values}\n" + text[b:]


def reward_manifest(settings: RewardSettings) -> dict[str, Any]:
    """The manifest's `reward` section: what reward.py computes and with which settings."""
    return {
        "module": REWARD_FILE,
        "source": "pipeline/agents/rewards.py: trainer_rewards and what it calls, copied",
        "verl": {
            "reward.custom_reward_function.path": REWARD_FILE,
            "reward.custom_reward_function.name": VERL_FUNCTION,
            "group": "one response (g~ = 1 when g > 0)",
        },
        "trl": {"reward_funcs": TRL_FUNCTION, "group": "the completions of one record"},
        "components": {
            "correct": "c = EM(normalize) of the last <answer> vs ground_truth target or aliases",
            "wcr": "alpha * (1 - c) * valid * g~; g = waypoints named in <think> / waypoints",
            "format": "format_weight * F_fmt = (1 + F_think + F_tool(h) + F_ans) / 4",
        },
        "score": "c + alpha * (1 - c) * valid * g~ + format_weight * F_fmt",
        "alpha": settings.alpha,
        "alpha_from": settings.alpha_from,
        "format_weight": settings.format_weight,
        "valid": "a non-empty <answer>",
        "waypoint_match": (
            "Norm(form) on word boundaries in Norm(think text), or with punctuation read as a "
            "space; a waypoint is a label or a list of forms; <think> spans only"
        ),
        "answer_aliases": "ground_truth.aliases (or answer_aliases), when present",
        "tags": TAGS,
    }


def write_reward_file(tmp: Path, settings: RewardSettings) -> Path:
    """reward.py into the export being built at `tmp`."""
    path = tmp / REWARD_FILE
    path.write_text(reward_module_source(settings), encoding="utf-8")
    return path
