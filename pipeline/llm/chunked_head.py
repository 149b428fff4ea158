"""Log-probabilities of chosen tokens without a vocabulary-sized logit row for every position.

A causal LM's head turns each hidden state into one logit per vocabulary entry (262,144 for
Gemma 3): for all positions of a 1,500-token text that is 1.5 GB of float32, and log-softmax
needs as much again. Scoring only needs the log-prob of each target token (and maybe the top k),
so the model body runs once to hidden states and the head runs over a few positions at a time.
"""

from __future__ import annotations

import torch

from pipeline.llm.cancel import checkpoint

# Bytes of float32 logits materialised at once (one chunk of positions x the vocabulary).
CHUNK_BYTES = 32 * 2**20


def hidden_states(model, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """The body's last hidden states [batch, positions, hidden] (what the LM head reads)."""
    out = model.base_model(input_ids=input_ids, attention_mask=attention_mask)
    return out.last_hidden_state


def target_logprobs(
    model, hidden: torch.Tensor, targets: torch.Tensor, top_k: int = 0, log_softmax: bool = False
) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
    """log P(targets[i] | hidden[i]) for rows of `hidden` [n, h], head applied chunk by chunk.

    Returns (log-probs [n], top-k log-probs [n, k] or None, top-k token ids [n, k] or None),
    float32 on the model's device. The work may be cancelled between chunks.
    `log_softmax=True` normalises with torch.log_softmax instead of `logits - logsumexp`:
    score() always did, and on CPU float32 it reads ~1e-5 higher per token than float64
    (logsumexp is within 1e-7), so each caller keeps the normalisation it had.
    """
    head = model.get_output_embeddings()
    cap = getattr(model.config, "final_logit_softcapping", None)
    rows = max(1, CHUNK_BYTES // (4 * head.weight.shape[0]))
    picked, top_vals, top_idx = [], [], []
    for s in range(0, hidden.shape[0], rows):
        checkpoint()
        logits = head(hidden[s : s + rows]).float()
        if cap is not None:  # as the model's own forward does (Gemma 2)
            logits = torch.tanh(logits / cap) * cap
        t = targets[s : s + rows, None].to(logits.device)
        if log_softmax:
            picked.append(torch.log_softmax(logits, dim=-1).gather(-1, t).squeeze(-1))
            continue
        lse = torch.logsumexp(logits, dim=-1)
        picked.append(logits.gather(-1, t).squeeze(-1) - lse)
        if top_k:
            vals, idx = logits.topk(top_k, dim=-1)
            top_vals.append(vals - lse[:, None])
            top_idx.append(idx)
        del logits
    if not picked:
        empty = hidden.new_zeros(0, dtype=torch.float32)
        return empty, None, None
    lp = torch.cat(picked)
    if not top_k:
        return lp, None, None
    return lp, torch.cat(top_vals), torch.cat(top_idx)
