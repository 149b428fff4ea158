"""ARR's reasoner–verifier dialogues (arr-reasoner-verifier.txt §4.1) in batched rounds.

A round is one reasoner turn, then (when the reasoner searched or answered) one verifier turn.
Every reasoner turn of a round is **one** generate call over all live dialogues, its searches
one retrieval batch, and every verifier turn of the round one more generate call — the same
batching as the Search-R1 engine (`rollout.run_rollouts`). Both roles are the same model
under their role prompts (appendix A.3).

- Reasoner turn: `<verify>` (after feedback), `<think>`, then `<search>` or `<answer>`.
- Verifier critique (after a search): `<verify>` (the engine opens it), `<selected_doc>`
  (optional), `<response>`; the reasoner receives `<feedback>` = the selected document's text
  + the response, not all retrieved documents (the paper's point: traceable evidence without
  overload).
- Verifier answer check (after the reasoner's answer): `<verify>`, `<final_answer>`; the
  dialogue then ends with the reasoner's answer (the paper's optional final predictor, which
  re-answers from the whole trace, is not run).

Every generated action keeps the mean token entropy of its own tokens (ARR §3.2's H_{a_t}),
from `generate_with_entropy`. A turn that breaks the protocol is recorded with its reason
(`role:reason`), never raised.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from pipeline.agents.prompts import ARR_REASONER_TURN, ARR_VERIFIER_TURN, SOLVER_STOP
from pipeline.agents.rollout import INFO_OPEN, SEARCH_CLOSE, SEARCH_OPEN
from pipeline.llm import usage
from pipeline.llm.base import Completion, Generator, SamplingParams
from pipeline.retrieval.base import RetrieverBackend
from pipeline.retrieval.faiss_index import Hit, format_docs

if TYPE_CHECKING:
    from pipeline.core.config import PipelineConfig

REASONER_ACTIONS = ("think", "search", "verify", "answer")
VERIFIER_ACTIONS = ("verify", "selected_doc", "response", "final_answer")
FEEDBACK_OPEN = "<feedback>"
VERIFY_OPEN = "<verify>"  # the engine opens every verifier turn (as EvalAct's <evaluate>)
ANSWER_OPEN, ANSWER_CLOSE = "<answer>", "</answer>"
REASONER_STOP = (SEARCH_CLOSE, ANSWER_CLOSE, FEEDBACK_OPEN, INFO_OPEN, *SOLVER_STOP)
VERIFIER_STOP = ("</response>", "</final_answer>", ARR_REASONER_TURN, *SOLVER_STOP)
_DOC_REF = re.compile(r"doc(?:ument)?\s*(\d+)", re.I)


@dataclass(frozen=True)
class ArrSettings:
    max_rounds: int = 4
    topk: int = 3
    max_doc_tokens: int = 512
    force_final: bool = True  # open <answer> for the reasoner on the last round
    entropy_top_k: int = 5  # log-probs per token asked of top-k backends (vLLM, HTTP)
    # Rewards (§4.2): eq. 5's λ and bucket count n, §3.2's trend threshold δ (none of the
    # three is given in the paper), the monitored reasoner actions A^r_sub (eq. 8) and the
    # verifier's critique actions A^v_sub (eqs. 7, 9).
    adversarial_lambda: float = 0.5
    f1_buckets: int = 5
    entropy_delta: float = 0.05
    monitored_actions: tuple[str, ...] = ("think", "verify")
    critique_actions: tuple[str, ...] = ("verify", "response")

    @classmethod
    def from_config(cls, cfg: PipelineConfig) -> ArrSettings:
        a, r = cfg.arr, cfg.retrieval
        return cls(
            max_rounds=a.max_rounds,
            topk=r.topk,
            max_doc_tokens=r.max_tokens_per_response,
            force_final=cfg.generation.force_final,
            entropy_top_k=a.entropy_top_k,
            adversarial_lambda=a.adversarial_lambda,
            f1_buckets=a.f1_buckets,
            entropy_delta=a.entropy_delta,
            monitored_actions=tuple(a.monitored_actions),
            critique_actions=tuple(a.critique_actions),
        )


@dataclass
class Action:
    """One action of one turn: its text and the entropy of the tokens that generated it."""

    role: str  # reasoner | verifier
    action: str  # think | search | verify | answer | selected_doc | response | final_answer
    text: str
    turn: int  # 0-based generate turn within the dialogue (reasoner and verifier alternate)
    round: int  # 0-based reasoner–verifier round
    entropy: float | None  # mean token entropy H_{a_t} (nats); None without tokens
    tokens: int  # generated tokens attributed to the action
    violations: tuple[str, ...] = ()  # the turn's protocol violations
    documents: str | None = None  # verifier actions: d_t, the documents the step judged
    exact: bool | None = None  # full-vocabulary entropy (True) or top-k (False); None: no tokens
    top_k: int | None = None


@dataclass
class Dialogue:
    """One reasoner–verifier dialogue; exposes what the solver rows read from a Rollout."""

    prompt: str  # the reasoner's prompt
    verifier_prompt: str
    sample: int
    transcript: str = ""  # the reasoner's view: its turns and the <feedback> it received
    verifier_log: str = ""  # the verifier's view, after its prompt
    actions: list[Action] = field(default_factory=list)
    searches: list[str] = field(default_factory=list)
    hits: list[list[Hit]] = field(default_factory=list)
    query_vectors: list[list[float]] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    final: str | None = None  # the reasoner's answer
    verifier_answer: str | None = None  # the verifier's <final_answer>
    stop_reason: str = "running"  # final | no_action | max_rounds
    phase: str = "reasoner"  # reasoner | critique | answer_check | done
    pending: str = ""  # opener the engine wrote for the reasoner
    forced_final: bool = False
    invalid_tool_calls: int = 0
    turns: int = 0  # generate turns, both roles
    planning_turns: int = 0  # reasoner turns with a <think>
    round: int = 0
    docs: str = ""  # the current step's formatted documents
    feedback_pending: bool = False  # the reasoner's next turn must open by verifying feedback

    @property
    def live(self) -> bool:
        return self.phase != "done"

    @property
    def retrieved_ids(self) -> list[list[str]]:
        return [[h.id for h in step] for step in self.hits]

    @property
    def think(self) -> str:
        own = (a for a in self.actions if a.role == "reasoner" and a.action == "think")
        return "\n".join(a.text for a in own)


def action_spans(text: str, names: Sequence[str]) -> list[tuple[str, str, int, int]]:
    """(name, body, start, end) of every `<name>…</name>` in `text`, in order; an unclosed
    last tag runs to the end (a stop string cut its close)."""
    alt = "|".join(re.escape(n) for n in names)
    pat = re.compile(rf"<({alt})>(.*?)(?:</\1>|$)", re.S)
    return [(m.group(1), m.group(2).strip(), m.start(), m.end()) for m in pat.finditer(text)]


def span_entropies(
    entropies: Sequence[float], count: Callable[[str], int], text: str, start: int, end: int
) -> list[float]:
    """The entropies of the tokens generating text[start:end]: token positions are the token
    counts of the text before each end (a prefix's tokens can differ from the completion's
    by one at a boundary: an approximation of the split, never of the values)."""
    a = count(text[:start]) if start > 0 else 0
    b = count(text[:end])
    return list(entropies[min(a, len(entropies)) : min(b, len(entropies))])


def _mean(xs: Sequence[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def _record(
    d: Dialogue,
    role: str,
    c: Completion,
    names: Sequence[str],
    count: Callable[[str], int],
    violations: list[str],
    documents: str | None = None,
    opener: str = "",
) -> None:
    """One turn's actions (or, when it has none, its raw text as action 'none'). `opener`:
    the tag the engine wrote before the turn, which generated no tokens."""
    full = opener + c.text
    off = len(opener)
    tagged = [f"{role}:{v}" for v in violations]
    d.violations += tagged
    spans = action_spans(full, names) or [("none", full.strip(), 0, len(full))]
    for name, body, s, e in spans:
        hs = span_entropies(c.token_entropies, count, c.text, max(0, s - off), max(0, e - off))
        d.actions.append(
            Action(
                role, name, body, d.turns, d.round, _mean(hs), len(hs), tuple(tagged), documents,
                c.exact if hs else None, None if c.exact or not hs else c.top_k,
            )
        )  # fmt: skip
    d.turns += 1


def _reasoner_turn(
    d: Dialogue, c: Completion, s: ArrSettings, count: Callable[[str], int]
) -> str | None:
    """Record a reasoner turn; returns its search query when it asks for one."""
    opener, d.pending = d.pending, ""
    full = opener + c.text
    violations = []
    if d.feedback_pending and VERIFY_OPEN not in full:
        violations.append("missing_verify")  # a step after feedback verifies it first
    d.feedback_pending = False
    if "<think>" in full:
        d.planning_turns += 1
    last_round = d.round + 1 >= s.max_rounds
    query = None
    if ANSWER_OPEN in full:
        d.final = full[full.rfind(ANSWER_OPEN) + len(ANSWER_OPEN) :].strip() or None
        if d.final is None:
            violations.append("empty_answer")
        d.transcript += c.text + ANSWER_CLOSE
        d.verifier_log += (
            f"{ARR_REASONER_TURN} {full.strip()}{ANSWER_CLOSE}{ARR_VERIFIER_TURN} {VERIFY_OPEN}"
        )
        d.phase = "answer_check"
    elif SEARCH_OPEN in full:
        query = full[full.rfind(SEARCH_OPEN) + len(SEARCH_OPEN) :].strip()
        d.transcript += c.text + SEARCH_CLOSE
        if not query:
            violations.append("empty_search")
            d.invalid_tool_calls += 1
            d.transcript += f"\n\n{FEEDBACK_OPEN}Empty search query.</feedback>\n\n"
            query = None
            d.phase = "done" if last_round else "reasoner"
        elif last_round:
            violations.append("search_on_last_round")  # nobody is left to answer it
            d.phase = "done"
            query = None
        else:
            d.phase = "critique"
            d.verifier_log += f"{ARR_REASONER_TURN} {full.strip()}{SEARCH_CLOSE}\n"
    else:
        violations.append("no_action")
        d.transcript += c.text
        d.phase = "done"
        if s.force_final and not d.forced_final and not last_round:
            d.phase = "reasoner"  # open <answer> for it next round
            d.transcript += ANSWER_OPEN
            d.pending, d.forced_final = ANSWER_OPEN, True
    _record(d, "reasoner", c, REASONER_ACTIONS, count, violations, opener=opener)
    if d.phase == "done":
        d.stop_reason = "no_action" if d.final is None else "final"
    return query


def _critique_turn(
    d: Dialogue, c: Completion, hits: list[Hit], count: Callable, max_doc_tokens: int
) -> None:
    """Record a verifier critique and hand its feedback to the reasoner."""
    spans = {n: b for n, b, _, _ in action_spans(VERIFY_OPEN + c.text, VERIFIER_ACTIONS)}
    violations = []
    if not spans.get("verify") or "</verify>" not in c.text:
        violations.append("missing_verify")  # the engine opened it: empty or never closed
    response = spans.get("response")
    if not response:
        violations.append("missing_response")
    doc_text = None
    if "selected_doc" in spans:
        m = _DOC_REF.search(spans["selected_doc"])
        k = int(m.group(1)) if m else 0
        if 1 <= k <= len(hits):  # the selected passage, under the tool-response budget
            doc_text = f"Doc {k}" + format_docs([hits[k - 1]], count, max_doc_tokens)[5:]
        else:
            violations.append("bad_selected_doc")
    parts = [p for p in (doc_text, response) if p]
    body = "\n".join(parts) if parts else "The verifier gave no usable feedback."
    d.transcript += f"\n\n{FEEDBACK_OPEN}{body}</feedback>\n\n"
    d.feedback_pending = True
    cut = "<response>" in c.text and "</response>" not in c.text  # the stop string
    d.verifier_log += c.text + ("</response>" if cut else "")
    _record(d, "verifier", c, VERIFIER_ACTIONS, count, violations, d.docs, VERIFY_OPEN)
    d.phase = "reasoner"


def _answer_check_turn(d: Dialogue, c: Completion, count: Callable) -> None:
    """Record the verifier's check of the reasoner's answer; the dialogue ends."""
    spans = {n: b for n, b, _, _ in action_spans(VERIFY_OPEN + c.text, VERIFIER_ACTIONS)}
    violations = []
    if not spans.get("verify") or "</verify>" not in c.text:
        violations.append("missing_verify")
    d.verifier_answer = spans.get("final_answer") or None
    if d.verifier_answer is None:
        violations.append("missing_final_answer")
    d.verifier_log += c.text
    all_docs = "\n".join(f"(Title: {h.title}) {h.text}" for step in d.hits for h in step)
    _record(d, "verifier", c, VERIFIER_ACTIONS, count, violations, all_docs, VERIFY_OPEN)
    d.phase, d.stop_reason = "done", "final"


def _generate(
    gen: Generator, prompts: list[str], params: SamplingParams, top_k: int, roots: list[str]
) -> list[list[Completion]]:
    """Completions with token entropies; a backend without them gives empty entropies.
    `roots[i]` is the dialogue prompt `prompts[i]` continues (its record's, for the meter)."""
    if not prompts:
        return []
    with_entropy = getattr(gen, "generate_with_entropy", None)
    with usage.continued(roots, prompts):
        if with_entropy is not None:
            return with_entropy(prompts, params, top_k=top_k)
        outs = gen.generate(prompts, params)
    return [[Completion(t, (), exact=False) for t in o] for o in outs]


def run_dialogues(
    gen: Generator,
    retriever: RetrieverBackend,
    reasoner_prompts: Sequence[str],
    verifier_prompts: Sequence[str],
    params: SamplingParams,
    s: ArrSettings,
) -> list[list[Dialogue]]:
    """`params.n` dialogues per question; per round one reasoner generate call, one search
    batch and one verifier generate call over every live dialogue. Call k uses seed
    `params.seed + k`, so a rerun with the same seed reproduces the dialogues."""
    count = gen.count_tokens
    r_params = replace(params, stop=REASONER_STOP)
    outs = _generate(gen, list(reasoner_prompts), r_params, s.entropy_top_k, list(reasoner_prompts))
    groups = [
        [Dialogue(p, v, i) for i in range(len(o))]
        for p, v, o in zip(reasoner_prompts, verifier_prompts, outs, strict=True)
    ]
    todo = [(d, c) for g, o in zip(groups, outs, strict=True) for d, c in zip(g, o, strict=True)]
    call = 0
    for rnd in range(s.max_rounds):
        queries = [(d, q) for d, c in todo if (q := _reasoner_turn(d, c, s, count)) is not None]
        step_hits: dict[int, list[Hit]] = {}
        if queries:
            # One batch per round: every live dialogue's query in one encode + FAISS search.
            hits, vecs = retriever.search_with_vectors([q for _, q in queries], s.topk)
            for (d, q), h, vec in zip(queries, hits, vecs, strict=True):
                d.searches.append(q)
                d.hits.append(list(h))
                d.query_vectors.append([float(x) for x in vec])
                d.docs = format_docs(h, count, s.max_doc_tokens)
                d.verifier_log += (
                    f"{INFO_OPEN}{d.docs}</information>{ARR_VERIFIER_TURN} {VERIFY_OPEN}"
                )
                step_hits[id(d)] = list(h)
        checking = [d for g in groups for d in g if d.phase in ("critique", "answer_check")]
        call += 1
        v_params = replace(params, n=1, stop=VERIFIER_STOP, seed=_seed(params, call))
        v_outs = _generate(
            gen, [d.verifier_prompt + d.verifier_log for d in checking], v_params, s.entropy_top_k,
            [d.verifier_prompt for d in checking],
        )  # fmt: skip
        for d, o in zip(checking, v_outs, strict=True):
            if d.phase == "critique":
                _critique_turn(d, o[0], step_hits[id(d)], count, s.max_doc_tokens)
            else:
                _answer_check_turn(d, o[0], count)
        live = [d for g in groups for d in g if d.phase == "reasoner"]
        if not live or rnd + 1 >= s.max_rounds:
            for d in live:
                d.phase, d.stop_reason = "done", "max_rounds"
            break
        for d in live:
            d.round = rnd + 1
            if s.force_final and rnd + 2 >= s.max_rounds and not d.pending:
                d.transcript += ANSWER_OPEN  # the last round: the reasoner must answer
                d.pending, d.forced_final = ANSWER_OPEN, True
        call += 1
        r_next = replace(r_params, n=1, seed=_seed(params, call))
        outs = _generate(
            gen, [d.prompt + d.transcript for d in live], r_next, s.entropy_top_k,
            [d.prompt for d in live],
        )  # fmt: skip
        todo = [(d, o[0]) for d, o in zip(live, outs, strict=True)]
    return groups


def _seed(params: SamplingParams, call: int) -> int | None:
    return None if params.seed is None else params.seed + call
