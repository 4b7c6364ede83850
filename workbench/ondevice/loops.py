"""On-device training: the two training loops (onnxruntime.training.api, PyTorch eager)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

from ..runtime.ortinfer import torch_threads
from .artifacts import quiet_onnxruntime, session_options, training_api
from .config import OnDeviceConfig, OnDeviceError
from .data import make_batches, load_ondevice_model
from .reference import hf_adamw
from .trainable import trainable_names


class OrtTrainer:
    """``CheckpointState`` + ``Module`` + ``Optimizer`` over an artifacts folder."""

    def __init__(self, folder: Path, lr: float, input_names: Sequence[str], threads: int):
        _, _, CheckpointState, Module, Optimizer = training_api()
        with quiet_onnxruntime():
            self.state = CheckpointState.load_checkpoint(str(folder / "checkpoint"))
            self.module = Module(str(folder / "training_model.onnx"), self.state, str(folder / "eval_model.onnx"),
                                 session_options=session_options(threads))
            self.optimizer = Optimizer(str(folder / "optimizer_model.onnx"), self.module)
        self.optimizer.set_learning_rate(lr)
        self.module.train()
        wanted = list(input_names) + ["labels"]
        got = list(self.module.input_names())
        if got != wanted:
            raise OnDeviceError(f"the training graph takes inputs {got}, but the batches hold {wanted}; rebuild the artifacts")
        self.input_names = got

    def step(self, batch: dict[str, np.ndarray]) -> float:
        loss, _logits = self.module(*[batch[k] for k in self.input_names])  # the graphs output loss and logits
        self.optimizer.step()
        self.module.lazy_reset_grad()
        return float(loss)


class TorchTrainer:
    def __init__(self, loaded, names: Sequence[str], cfg: OnDeviceConfig):
        import torch

        self.model = loaded.model
        self.model.eval()  # dropout is 0 in the config; eval mode keeps any other dropout off too
        chosen = set(names)
        for n, p in self.model.named_parameters():
            p.requires_grad_(n in chosen)
        self.params = [p for n, p in self.model.named_parameters() if n in chosen]
        self.optimizer = hf_adamw(self.params, cfg.lr, cfg.betas, cfg.eps, cfg.weight_decay)
        self.torch = torch

    def step(self, batch: dict[str, np.ndarray]) -> float:
        torch = self.torch
        inputs = {k: torch.from_numpy(v) for k, v in batch.items() if k != "labels"}
        logits = self.model(**inputs).logits
        loss = torch.nn.functional.cross_entropy(logits, torch.from_numpy(batch["labels"]))
        loss.backward()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return float(loss.detach())


def pytorch_curve(model: str, cfg: OnDeviceConfig, data, lr: Optional[float] = None, torch_adamw: bool = False) -> list[float]:
    """PyTorch eager's losses on the stage's batches alone, e.g. at another learning rate or with
    ``torch.optim.AdamW``: the defects the tolerance is measured against."""
    import torch

    from ..graph import data_classes

    lr = cfg.lr if lr is None else lr
    loaded = load_ondevice_model(model, cfg, data_classes(data))
    names = trainable_names(loaded.model, cfg.trainable, cfg.last_n_layers, cfg.train_position_embeddings)
    trainer = TorchTrainer(loaded, names, dataclasses.replace(cfg, lr=lr))
    if torch_adamw:
        trainer.optimizer = torch.optim.AdamW(trainer.params, lr=lr, betas=cfg.betas, eps=cfg.eps, weight_decay=cfg.weight_decay)
    with torch_threads(cfg.threads):
        return [trainer.step(b) for b in make_batches(loaded, data["train"], cfg)]
