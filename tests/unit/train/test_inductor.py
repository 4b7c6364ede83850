"""Inductor's gradient of an embedding lookup is checked against eager's before a compiled run, and
repaired where torch's Inductor gets it wrong (torch 2.6 stored a repeated token's gradient instead of
adding it)."""

from __future__ import annotations

from workbench.train.inductor import EmbeddingGradCheck, _gradient_error, check_embedding_gradient


def test_after_the_check_inductor_computes_the_embedding_gradient_eager_does():
    check = check_embedding_gradient()
    assert check.right or check.repaired, check.note
    assert _gradient_error() == 0.0, "compiled and eager gradients of repeated rows differ beyond float32 rounding"
    assert check_embedding_gradient() is check  # once per process
    assert (check.note == "") is check.right


def test_what_the_verdict_says_of_each_outcome():
    assert EmbeddingGradCheck(right=True, repaired=False, first_error=0.0, torch_version="2.13.0").note == ""
    repaired = EmbeddingGradCheck(right=False, repaired=True, first_error=0.49, torch_version="2.6.0").note
    assert repaired.startswith("Inductor in torch 2.6.0 computed an embedding table's gradient wrongly")
    assert "off by 49% of the largest" in repaired and "left to PyTorch's own kernel, checked to agree with eager" in repaired
    broken = EmbeddingGradCheck(right=False, repaired=False, first_error=0.49, torch_version="2.6.0").note
    assert broken.endswith("this run's losses are not eager's")


def test_the_check_sees_a_gradient_that_drops_repeated_rows(monkeypatch):
    """The check itself can fail: a compiled function that keeps one position per repeated row is caught."""
    import torch

    real_compile = torch.compile

    def dropping(fn, **kw):
        def run(w, t):
            out = fn(w, t)
            return out + 0.5 * (w[1] * w[1].detach()).sum()  # a gradient eager does not have on row 1 ([CLS])
        return real_compile(run, **kw)

    monkeypatch.setattr(torch, "compile", dropping)
    assert _gradient_error() > 1e-3
