"""Decode-shaped matrix products on CPU: few rows times a large weight.

A decode step multiplies a handful of rows (one per live sequence) by every weight matrix.
For such shapes MKL's `x @ Wᵀ` (what `nn.Linear` calls) splits the work over the rows, so with
2..16 rows most threads idle and a step costs twice a one-row step; Gemma's 262k x 640 output
head alone took 120 ms for 2..16 rows against 48 ms for one. The same product written as
`(W @ xᵀ)ᵀ` is split over the weight's rows and streams the weight once across all threads
(30 ms for 2 rows). `benchmarks/bench_decode_step.py` measures both orientations side by side.
"""

from __future__ import annotations

import types

import torch
from torch.nn import functional as F

# Above this many rows the usual orientation was as fast or faster (measured on 2 cores, AVX2:
# a 64-row decode step took 537 ms as usual and 760 ms transposed).
SKINNY_MAX_ROWS = 32


def skinny_linear(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, max_rows: int
) -> torch.Tensor:
    """`F.linear`, computed as `(W @ xᵀ)ᵀ` when x has at most `max_rows` rows."""
    rows = x.reshape(-1, x.shape[-1])
    if rows.shape[0] > max_rows:
        return F.linear(x, weight, bias)
    out = (weight @ rows.t()).t()
    if bias is not None:
        out = out + bias
    return out.reshape(*x.shape[:-1], weight.shape[0])


def use_skinny_linear(model: torch.nn.Module, max_rows: int = SKINNY_MAX_ROWS) -> int:
    """Route every `nn.Linear` of `model` through `skinny_linear`; returns how many.

    Only this model instance changes (its modules get their own `forward`), and inputs with
    more rows than `max_rows` (prefill, scoring) take the usual path unchanged.
    """

    def forward(self: torch.nn.Linear, x: torch.Tensor) -> torch.Tensor:
        return skinny_linear(x, self.weight, self.bias, max_rows)

    count = 0
    for module in model.modules():
        if isinstance(module, torch.nn.Linear):
            module.forward = types.MethodType(forward, module)
            count += 1
    return count
