"""Batched multi-turn rollouts with the search tool (the Search-R1 tag protocol).

An assistant turn is one completion that ends at `</search>` (a tool call), at the agent's final
closing tag (`</answer>` for the solver, `</evidence>` for the proposer) or anywhere else (no
action: the rollout ends). Every turn advances **all** live rollouts with one `generate` call and
sends all their search queries to the retriever as one batch, so a GPU backend sees a full batch
and the FAISS index one matrix of queries per turn. The tool response is the top-k passages as
`Doc i(Title: ...) text`, cut to a token budget, inside `<information>...</information>`.

A rollout's whole text (prompt + transcript) is the next turn's prompt, so prefix caching in
vLLM (or our response cache) re-uses the shared part.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from pipeline.llm import usage
from pipeline.llm.base import Generator, SamplingParams, generate_with_guides
from pipeline.retrieval.base import RetrieverBackend
from pipeline.retrieval.faiss_index import Hit, format_docs

SEARCH_OPEN, SEARCH_CLOSE, INFO_OPEN = "<search>", "</search>", "<information>"
EVAL_OPEN, EVAL_CLOSE = "<evaluate>", "</evaluate>"
_THINK = re.compile(r"<think>(.*?)(?:</think>|$)", re.S)

# EvalAct's Evaluate(c, z) in the paper's JSON form (appendix B/C): {"evaluation": c, "score": z}.
EVAL_REGEX = r'\{"evaluation": "[^"<\\]+", "score": (10|[0-9])\}'
# Φ(z)'s cue texts (appendix B, eq. 11), returned to the agent after each Evaluate.
FEEDBACK = {
    "low": "Low Quality): The previous Search results are largely irrelevant or unhelpful for "
    "answering the question. Do not rely on them. Reformulate the query (e.g., alternative "
    "keywords or a different angle) and issue a new Search.",
    "mid": "Medium Quality): The previous Search results contain partially useful evidence but "
    "may be incomplete or noisy. Use only clearly relevant excerpts. Consider an additional, "
    "more targeted Search to fill missing details, resolve remaining subproblems, or verify "
    "uncertain information.",
    "high": "High Quality): The previous Search results are highly relevant and constitute "
    "substantive progress toward answering the question (e.g., providing key facts or "
    "resolving an important subtask). Use them as primary evidence to construct the answer. "
    "Perform another Search only if a specific critical detail is still missing.",
}


@dataclass(frozen=True)
class Evaluation:
    """One Evaluate action after one answered search; `violation` says why z is missing."""

    assessment: str | None
    z: float | None
    violation: str | None


def parse_evaluation(body: str) -> Evaluation:
    """Evaluate's body → (assessment, z) or the protocol violation that prevents reading it.

    Violations: empty_evaluation, malformed_json, missing_assessment, missing_score,
    score_out_of_range. Never raises: a weak model's output is data, not an error.
    """
    text = body.strip()
    if text.endswith(EVAL_CLOSE):
        text = text[: -len(EVAL_CLOSE)].strip()
    if not text:
        return Evaluation(None, None, "empty_evaluation")
    try:
        obj = json.loads(text)
    except ValueError:
        return Evaluation(None, None, "malformed_json")
    if not isinstance(obj, dict):
        return Evaluation(None, None, "malformed_json")
    c = obj.get("evaluation")
    assessment = c.strip() if isinstance(c, str) and c.strip() else None
    z = obj.get("score")
    if isinstance(z, bool) or not isinstance(z, int | float):
        return Evaluation(assessment, None, "missing_score")
    if not 0 <= z <= 10:
        return Evaluation(assessment, None, "score_out_of_range")
    if assessment is None:
        return Evaluation(None, float(z), "missing_assessment")
    return Evaluation(assessment, float(z), None)


def feedback(ev: Evaluation) -> str:
    """The environment's reply to an Evaluate: Φ(z)'s cue, or the violation it could not read."""
    if ev.z is None:
        return f"<feedback>Evaluate not understood ({ev.violation}).</feedback>"
    z = ev.z
    tier = "low" if z <= 3 else "mid" if z <= 7 else "high"
    return f"<feedback>Score {z:g}/10 ({FEEDBACK[tier]}</feedback>"


@dataclass
class Rollout:
    """One agent trajectory: everything it generated and every tool response it received."""

    prompt: str
    sample: int
    transcript: str = ""  # assistant segments with <information> blocks, after the prompt
    segments: list[str] = field(default_factory=list)  # raw assistant turns
    searches: list[str] = field(default_factory=list)  # valid (non-empty) queries, in order
    hits: list[list[Hit]] = field(default_factory=list)  # top-k passages per answered search
    query_vectors: list[list[float]] = field(default_factory=list)  # per answered search
    invalid_tool_calls: int = 0
    refused_searches: int = 0  # searches beyond the rollout's budget, not executed
    forced_final: bool = False  # the engine opened the final tag for the model
    pending: str = ""  # forced opener already in the transcript, not yet in a segment
    planning_turns: int = 0  # assistant turns that open with <think>
    final: str | None = None  # text inside the final tag, when the agent reached it
    stop_reason: str = "running"  # final | no_action | max_turns | unanswered_search
    evaluations: list[Evaluation] = field(default_factory=list)  # EvalAct: one per answered search
    awaiting_eval: bool = False  # EvalAct: the engine opened <evaluate>; this turn must fill it

    @property
    def turns(self) -> int:
        return len(self.segments)

    @property
    def retrieved_ids(self) -> list[list[str]]:
        return [[h.id for h in step] for step in self.hits]

    @property
    def retrieved_rows(self) -> list[list[int]]:
        """Passage-table rows of the hits, per answered search."""
        return [[h.row for h in step] for step in self.hits]

    def retrieved_passages(self) -> list[tuple[str, str]]:
        """(id, full text) of every passage a search returned, first occurrence first."""
        return list({h.id: h.text for step in self.hits for h in step}.items())

    @property
    def tool_responses(self) -> int:
        return len(self.hits)

    @property
    def valid_tool_calls(self) -> int:
        """Non-empty <search> emissions, including one the turn budget left unanswered."""
        return (
            len(self.searches) + (self.stop_reason == "unanswered_search") + self.refused_searches
        )

    @property
    def think(self) -> str:
        return "\n".join(m.strip() for s in self.segments for m in _THINK.findall(s))

    @property
    def live(self) -> bool:
        return self.stop_reason in ("running", "searching")


@dataclass(frozen=True)
class TurnGuide:
    """Guided decoding of an agent's turns: the regex each turn of one rollout must match.

    A turn is an optional `<think>` block, then a search or the agent's final block
    (`final_open` + `final_body`, e.g. "<question>" + "...</question>\n<answer>..."). A
    rollout whose final tag the engine opened continues with `final_body` only; one that may
    not search any more (budget, last turn) is offered no search.
    """

    final_open: str
    final_body: str

    def regex(self, forced: bool, can_search: bool) -> str:
        """Thinking and queries are unbounded here: max_tokens bounds a turn."""
        if forced:
            return self.final_body
        search = r"<search>[^<]+</search>|" if can_search else ""
        return rf"(<think>[^<]+</think>\n)?({search}{re.escape(self.final_open)}{self.final_body})"


@dataclass(frozen=True)
class RolloutConfig:
    final_open: str  # "<answer>" or "<evidence>"
    final_close: str
    max_turns: int = 5
    topk: int = 3
    max_doc_tokens: int = 512
    search: bool = True
    extra_stop: tuple[str, ...] = ()  # where a base model would start the next example
    # Opener written for the model when it must finish: on its last allowed turn, or when it
    # asks for a search beyond its budget ("<question>" for the proposer, "<answer>" for the
    # solver). None: no forcing, as in plain Search-R1.
    force_final: str | None = None
    # EvalAct (§2.2): after each answered search the engine opens <evaluate> and the next turn
    # must be exactly one Evaluate; `guided_evaluate` constrains that turn to EVAL_REGEX.
    evaluate: bool = False
    guided_evaluate: bool = True


def _last_search(segment: str) -> str | None:
    i = segment.rfind(SEARCH_OPEN)
    return None if i == -1 else segment[i + len(SEARCH_OPEN) :].strip()


def _force(r: Rollout, opener: str) -> None:
    r.transcript += opener
    r.pending = opener
    r.forced_final = True


def _running_or_out_of_turns(turn: int, cfg: RolloutConfig) -> str:
    return "running" if turn + 1 < cfg.max_turns else "max_turns"


def advance(
    r: Rollout, segment: str, cfg: RolloutConfig, turn: int, budget: int | None = None
) -> str | None:
    """Record one assistant turn; returns the search query the rollout asks for, if any."""
    if r.awaiting_eval:
        return _record_evaluation(r, segment, cfg, turn)
    text, r.pending = r.pending + segment, ""
    r.segments.append(text)
    if text.lstrip().startswith("<think>"):
        r.planning_turns += 1
    if cfg.final_open in text:
        r.final = text[text.rfind(cfg.final_open) + len(cfg.final_open) :].strip()
        r.transcript += segment + cfg.final_close
        r.stop_reason = "final"
        return None
    query = _last_search(text) if cfg.search else None
    if query is None:
        r.transcript += segment
        if cfg.force_final and not r.forced_final and turn + 1 < cfg.max_turns:
            _force(r, cfg.force_final)  # neither a search nor the final: ask for the final
            r.stop_reason = "running"
        else:
            r.stop_reason = "no_action"
        return None
    if budget is not None and len(r.searches) >= budget and cfg.force_final:
        # Over budget: drop the search and open the final tag instead (next turn finishes).
        r.refused_searches += 1
        r.transcript += segment[: segment.rfind(SEARCH_OPEN)]
        _force(r, cfg.force_final)
        r.stop_reason = _running_or_out_of_turns(turn, cfg)
        return None
    r.transcript += segment + SEARCH_CLOSE
    if not query:
        r.invalid_tool_calls += 1
        r.transcript += "\n\n<information>Empty search query.</information>\n\n"
        r.stop_reason = _running_or_out_of_turns(turn, cfg)
        return None
    if turn + 1 >= cfg.max_turns:
        r.stop_reason = "unanswered_search"  # the turn budget ends before the response
        return None
    r.stop_reason = "searching"
    return query


def _record_evaluation(r: Rollout, segment: str, cfg: RolloutConfig, turn: int) -> None:
    """The Evaluate turn: parse it, record it (or its violation), answer with Φ(z)'s cue."""
    body = segment.split(EVAL_CLOSE)[0]
    r.segments.append(r.pending + segment)
    r.pending, r.awaiting_eval = "", False
    ev = parse_evaluation(body)
    r.evaluations.append(ev)
    r.transcript += f"{body}{EVAL_CLOSE}\n\n{feedback(ev)}\n\n"
    r.stop_reason = _running_or_out_of_turns(turn, cfg)
    return None


def _open_evaluation(r: Rollout) -> None:
    r.transcript += EVAL_OPEN
    r.pending = EVAL_OPEN
    r.awaiting_eval = True


def _turn_regex(
    guide: TurnGuide | None, cfg: RolloutConfig, turn: int, r: Rollout, budget: int | None
) -> str | None:
    """The regex of rollout r's turn `turn`: search only while its budget and turns allow."""
    if r.awaiting_eval:
        return EVAL_REGEX if cfg.guided_evaluate else None
    if guide is None:
        return None
    searches_left = budget is None or len(r.searches) < budget
    can_search = cfg.search and turn + 1 < cfg.max_turns and searches_left
    return guide.regex(bool(r.pending), can_search)


def _if_guided(regexes: list[str | None]) -> list[str | None] | None:
    return regexes if any(x is not None for x in regexes) else None


def run_rollouts(
    gen: Generator,
    retriever: RetrieverBackend | None,
    prompts: Sequence[str],
    params: SamplingParams,
    cfg: RolloutConfig,
    search_budgets: Sequence[int | None] | None = None,
    guides: Sequence[TurnGuide | None] | None = None,
) -> list[list[Rollout]]:
    """`params.n` rollouts per prompt; one generate call and one search batch per turn.

    The first turn samples n continuations of each prompt together (shared prefix); later turns
    continue each rollout with one sample. Turn t uses seed `params.seed + t`, so a rerun with
    the same seed (and the response cache) reproduces every rollout. `search_budgets` caps
    the searches per prompt (None: only the turn limit); with `cfg.force_final` a rollout over
    its budget, or on its last turn, gets the final tag opened for it. `guides` (per prompt)
    turn on guided decoding: every turn of that prompt's rollouts matches its TurnGuide.
    """
    budgets = list(search_budgets) if search_budgets is not None else [None] * len(prompts)
    guide_list = list(guides) if guides is not None else [None] * len(prompts)
    # A model must not write tool responses itself: stop where it would start one.
    stop = (SEARCH_CLOSE, cfg.final_close, INFO_OPEN, *cfg.extra_stop)
    if cfg.evaluate:
        stop = (*stop, EVAL_CLOSE)
    first = replace(params, stop=stop)
    # Turn 1 of every rollout of a prompt is alike (no searches yet, nothing forced).
    regexes = _if_guided(
        [
            _turn_regex(g, cfg, 0, Rollout(p, 0), b)
            for p, g, b in zip(prompts, guide_list, budgets, strict=True)
        ]
    )
    outs = generate_with_guides(gen, list(prompts), first, regexes) if prompts else []
    groups = [[Rollout(p, s) for s in range(len(o))] for p, o in zip(prompts, outs, strict=True)]
    pending = [
        (r, o, b)
        for g, os_, b in zip(groups, outs, budgets, strict=True)
        for r, o in zip(g, os_, strict=True)
    ]
    budget_of = {id(r): b for r, _, b in pending}
    guide_of = {id(r): gd for g, gd in zip(groups, guide_list, strict=True) for r in g}
    for turn in range(cfg.max_turns):
        queries: list[tuple[Rollout, str]] = []
        for r, seg, b in pending:
            q = advance(r, seg, cfg, turn, b)
            if q is not None:
                queries.append((r, q))
        if queries:
            if retriever is None:
                raise ValueError("a rollout asked to search but no retriever was given")
            # One batch per turn: every live rollout's query in one encode + FAISS search.
            hits, vecs = retriever.search_with_vectors([q for _, q in queries], cfg.topk)
            for (r, q), h, vec in zip(queries, hits, vecs, strict=True):
                docs = format_docs(h, gen.count_tokens, cfg.max_doc_tokens)
                r.searches.append(q)
                r.hits.append(list(h))
                r.query_vectors.append([float(x) for x in vec])
                r.transcript += f"\n\n<information>{docs}</information>\n\n"
                r.stop_reason = "running"
                if cfg.evaluate:
                    _open_evaluation(r)  # exactly one Evaluate before the next action
        live = [r for g in groups for r in g if r.live]
        if not live or turn + 1 >= cfg.max_turns:
            for r in live:
                r.stop_reason = "max_turns"
                if r.awaiting_eval:  # the turn budget ended before its Evaluate
                    r.awaiting_eval = False
                    r.evaluations.append(Evaluation(None, None, "missing_evaluation"))
            break
        if cfg.force_final and turn + 2 == cfg.max_turns:
            for r in live:  # the next turn is the last one: it must finish
                if not r.pending and not r.awaiting_eval:
                    _force(r, cfg.force_final)
        nxt = replace(
            params, n=1, stop=stop, seed=None if params.seed is None else params.seed + turn + 1
        )
        regexes = _if_guided(
            [_turn_regex(guide_of[id(r)], cfg, turn + 1, r, budget_of[id(r)]) for r in live]
        )
        texts = [r.prompt + r.transcript for r in live]
        with usage.continued([r.prompt for r in live], texts):
            outs = generate_with_guides(gen, texts, nxt, regexes)
        pending = [(r, o[0], budget_of[id(r)]) for r, o in zip(live, outs, strict=True)]
    return groups
