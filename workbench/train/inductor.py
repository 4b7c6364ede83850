"""A check, once per process, that Inductor computes the gradient of an embedding lookup as PyTorch does,
and a repair where it does not.

An embedding table's gradient adds up every position that looked up the same row. Inductor in torch 2.6
generates vectorized CPU code that *stores* each position's gradient instead of adding it when the row
index is the same for every lane: a repeated token keeps only the last position's gradient. The token-type
table's row 0 got a zero gradient and [CLS]'s row half of eager's in the tiny model's first step; with AdamW
the third step's loss already differed by 3.8e-4. Inductor's scalar code, and torch 2.13, add as eager does.

:func:`check_embedding_gradient` compiles a lookup with repeated rows (two tables, 32 wide, so every x86
vector width takes the vectorized path) and compares with eager. Where they disagree it leaves
``aten.embedding_dense_backward`` to PyTorch's kernel (out of Inductor's decomposition tables) and checks
again: the repair is kept only if it makes the gradient right. The result is cached for the process.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass


@dataclass(frozen=True)
class EmbeddingGradCheck:
    """What the check found; ``first_error``: the first check's largest difference, a share of the largest eager gradient."""

    right: bool
    repaired: bool
    first_error: float
    torch_version: str

    @property
    def note(self) -> str:
        """One sentence for the training verdict, or "" when Inductor's gradient was right as it came."""
        if self.right:
            return ""
        if self.repaired:
            return (f"Inductor in torch {self.torch_version} computed an embedding table's gradient wrongly (a token "
                    f"repeated in a batch kept one position's gradient, off by {self.first_error:.0%} of the largest), "
                    "so the embedding gradients were left to PyTorch's own kernel, checked to agree with eager")
        return (f"Inductor in torch {self.torch_version} computes an embedding table's gradient wrongly (off by "
                f"{self.first_error:.0%} of the largest) and leaving it to PyTorch's kernel did not repair it: this "
                "run's losses are not eager's")


def _gradient_error() -> float:
    """Largest Inductor-vs-eager gradient difference, a share of the largest eager gradient (0.0: agree)."""
    import torch

    gen = torch.Generator().manual_seed(0)
    words = torch.randn(50, 32, generator=gen, requires_grad=True)
    types = torch.randn(2, 32, generator=gen, requires_grad=True)
    ids = torch.randint(0, 50, (4, 16), generator=gen)
    ids[:, 0] = 1  # a [CLS] in every row: a row of the table read 4 times, others read again at random
    type_ids = torch.zeros(4, 16, dtype=torch.long)  # one row read 64 times
    weight = torch.randn(4, 16, 32, generator=gen)

    def loss(w, t):
        return ((torch.nn.functional.embedding(ids, w) + torch.nn.functional.embedding(type_ids, t)) * weight).sum()

    def grads(fn):
        words.grad = types.grad = None
        fn(words, types).backward()
        return torch.cat([words.grad.flatten(), types.grad.flatten()])

    eager = grads(loss)
    torch._dynamo.reset()
    try:
        compiled = grads(torch.compile(loss, backend="inductor", fullgraph=True))
    finally:
        torch._dynamo.reset()
    scale = float(eager.abs().max())
    err = float((compiled - eager).abs().max()) / scale
    return 0.0 if err <= 1e-5 else err  # float32 rounding of sums of 64 terms is ~1e-6 of the largest


def _leave_embedding_gradient_to_pytorch() -> None:
    import torch
    from torch._inductor import decomposition

    op = torch.ops.aten.embedding_dense_backward.default
    decomposition.decompositions.pop(op, None)
    decomposition.fast_random_decomps().pop(op, None)  # the table select_decomp_table() gives (a cached copy)


@functools.cache
def check_embedding_gradient() -> EmbeddingGradCheck:
    import torch

    first = _gradient_error()
    repaired = False
    if first:
        _leave_embedding_gradient_to_pytorch()
        repaired = _gradient_error() == 0.0
    return EmbeddingGradCheck(right=not first, repaired=repaired, first_error=first, torch_version=torch.__version__.split("+")[0])
