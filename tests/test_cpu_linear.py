"""Decode-shaped products computed as (W @ xᵀ)ᵀ: same values as nn.Linear, routed per model."""

import torch
from torch.nn import functional as F

from pipeline.llm.cpu_linear import skinny_linear, use_skinny_linear


def test_skinny_linear_matches_linear_with_and_without_bias():
    torch.manual_seed(0)
    w, b = torch.randn(300, 64), torch.randn(300)
    for shape in ((1, 64), (3, 1, 64), (2, 5, 64)):
        x = torch.randn(*shape)
        for bias in (None, b):
            got = skinny_linear(x, w, bias, max_rows=32)
            assert got.shape == (*shape[:-1], 300)
            assert torch.allclose(got, F.linear(x, w, bias), atol=1e-5, rtol=1e-5)


def test_more_rows_than_the_limit_take_the_usual_path_exactly():
    torch.manual_seed(1)
    w, x = torch.randn(128, 32), torch.randn(40, 32)
    assert torch.equal(skinny_linear(x, w, None, max_rows=32), F.linear(x, w))


def test_use_skinny_linear_routes_only_this_models_linears(monkeypatch):
    torch.manual_seed(2)
    model = torch.nn.Sequential(torch.nn.Linear(16, 8), torch.nn.ReLU(), torch.nn.Linear(8, 4))
    other = torch.nn.Linear(16, 8)
    x = torch.randn(3, 16)
    before = model(x[:1])
    assert use_skinny_linear(model, max_rows=2) == 2
    assert torch.allclose(model(x[:1]), before, atol=1e-6)

    calls = []
    real = F.linear
    monkeypatch.setattr(F, "linear", lambda *a, **k: calls.append(1) or real(*a, **k))
    model(x[:1])  # 1 row: both layers transposed, F.linear not called
    assert calls == []
    model(x)  # 3 rows > 2: both layers take the usual path
    assert len(calls) == 2
    other(x[:1])  # a module of another model is untouched
    assert len(calls) == 3
