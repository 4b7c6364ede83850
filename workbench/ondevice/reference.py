"""On-device training: the PyTorch reference optimizer (ONNX Runtime's AdamW update in eager ops)."""

from __future__ import annotations

import math


def hf_adamw(params, lr: float, betas=(0.9, 0.999), eps: float = 1e-8, weight_decay: float = 0.0):
    """A ``torch.optim.Optimizer`` computing ONNX Runtime's ``AdamWOptimizer`` update
    (``adam_mode=1``, ``correct_bias=1``), in PyTorch eager ops::

        m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
        p -= lr * sqrt(1 - b2^t) / (1 - b1^t) * m / (sqrt(v) + eps)
        p -= lr * weight_decay * p

    (``torch.optim.AdamW`` adds ``eps`` after dividing by ``sqrt(1 - b2^t)`` and decays first.)
    """
    import torch

    class HFAdamW(torch.optim.Optimizer):
        def __init__(self, params_, **defaults):
            super().__init__(params_, defaults)

        @torch.no_grad()
        def step(self, closure=None):
            for group in self.param_groups:
                b1, b2 = group["betas"]
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    state = self.state[p]
                    if not state:
                        state["step"] = 0
                        state["m"] = torch.zeros_like(p)
                        state["v"] = torch.zeros_like(p)
                    state["step"] += 1
                    t = state["step"]
                    state["m"].mul_(b1).add_(p.grad, alpha=1 - b1)
                    state["v"].mul_(b2).addcmul_(p.grad, p.grad, value=1 - b2)
                    denom = state["v"].sqrt().add_(group["eps"])
                    p.addcdiv_(state["m"], denom, value=-group["lr"] * math.sqrt(1 - b2 ** t) / (1 - b1 ** t))
                    if group["weight_decay"] > 0:
                        p.add_(p, alpha=-group["lr"] * group["weight_decay"])

    return HFAdamW(params, lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay)
