"""Log-probabilities of chosen tokens without a vocabulary-sized logit row for every position.

A causal LM's head turns each hidden state into one logit per vocabulary entry (262,144 for
Gemma 3): for all positions of a 1,500-token text that is 1.5 GB of float32, and logsumexp
needs as much again. Scoring only needs the log-prob of each target token (and maybe the top
k), so the model body runs once to hidden states and the head runs over at most CHUNK_BYTES of
logits at a time:

- `target_logprobs` (every position of a text, the server's echo + logprobs) slices the
  vocabulary: each slice of the head's weight is read once for all positions and the
  normaliser accumulates slice by slice (logaddexp), so it costs what the one big product did.
- `target_log_softmax` (the continuation positions score() needs) takes a few positions at a
  time through the model's own head and torch.log_softmax, exactly what score() computed.
"""

from __future__ import annotations

import torch
from torch.nn import functional as F

from pipeline.llm.cancel import checkpoint

# Bytes of float32 logits materialised at once.
CHUNK_BYTES = 32 * 2**20
# Vocabulary slices are at least this wide (the positions are blocked to fit).
_MIN_SLICE = 2048


def hidden_states(model, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """The body's last hidden states [batch, positions, hidden] (what the LM head reads)."""
    out = model.base_model(input_ids=input_ids, attention_mask=attention_mask)
    return out.last_hidden_state


def _softcap(model, logits: torch.Tensor) -> torch.Tensor:
    cap = getattr(model.config, "final_logit_softcapping", None)
    return logits if cap is None else torch.tanh(logits / cap) * cap  # as forward() does


def target_logprobs(
    model, hidden: torch.Tensor, targets: torch.Tensor, top_k: int = 0
) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
    """log P(targets[i] | hidden[i]) for the rows of `hidden` [n, h] (logits - logsumexp).

    Returns (log-probs [n], top-k log-probs [n, k] or None, top-k token ids [n, k] or None),
    float32 on the model's device. The work may be cancelled between slices.
    """
    head = model.get_output_embeddings()
    vocab = head.weight.shape[0]
    block = max(1, CHUNK_BYTES // (4 * _MIN_SLICE))
    lps, tvs, tis = [], [], []
    for r in range(0, hidden.shape[0], block):
        h, t = hidden[r : r + block], targets[r : r + block].to(hidden.device)
        width = max(_MIN_SLICE, CHUNK_BYTES // (4 * h.shape[0]))
        lse = picked = vals = idx = None
        for c in range(0, vocab, width):
            checkpoint()
            bias = head.bias[c : c + width] if head.bias is not None else None
            logits = _softcap(model, F.linear(h, head.weight[c : c + width], bias).float())
            part = torch.logsumexp(logits, dim=-1)
            lse = part if lse is None else torch.logaddexp(lse, part)
            local = (t - c).clamp(0, logits.shape[1] - 1)
            here = logits.gather(1, local[:, None]).squeeze(1)
            hit = (t >= c) & (t < c + logits.shape[1])
            picked = torch.where(hit, here, picked if picked is not None else here)
            if top_k:
                v, i = logits.topk(min(top_k, logits.shape[1]), dim=-1)
                if vals is not None:  # keep the k best over the slices so far
                    v, pos = torch.cat([vals, v], 1).topk(top_k, dim=-1)
                    i = torch.cat([idx, i + c], 1).gather(1, pos)
                else:
                    i = i + c
                vals, idx = v, i
            del logits
        lps.append(picked - lse)
        if top_k:
            tvs.append(vals - lse[:, None])
            tis.append(idx)
    if not lps:
        return hidden.new_zeros(0, dtype=torch.float32), None, None
    if not top_k:
        return torch.cat(lps), None, None
    return torch.cat(lps), torch.cat(tvs), torch.cat(tis)


def target_log_softmax(model, hidden: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """log_softmax(head(hidden[i]))[targets[i]], a few positions at a time.

    This is score()'s own computation (the model's head module, then torch.log_softmax), kept
    so that scores stay what they were; on CPU float32 log_softmax reads ~1e-5 per token
    higher than float64, where target_logprobs' logsumexp stays within 1e-7.
    """
    head = model.get_output_embeddings()
    rows = max(1, CHUNK_BYTES // (4 * head.weight.shape[0]))
    out = []
    for s in range(0, hidden.shape[0], rows):
        checkpoint()
        logits = _softcap(model, head(hidden[s : s + rows]).float())
        t = targets[s : s + rows, None].to(logits.device)
        out.append(torch.log_softmax(logits, dim=-1).gather(-1, t).squeeze(-1))
    return torch.cat(out) if out else hidden.new_zeros(0, dtype=torch.float32)
