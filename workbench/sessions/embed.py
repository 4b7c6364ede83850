"""The embedding quantization session: a sentence-transformers folder exported, fused, quantized
with INT8 presets and scored on retrieval (NDCG@10 with intervals against FP32) and agreement.

    s = EmbedSession(model="models/my-encoder", run_dir="runs/mine")
    run = s.quantize(EmbedAuditConfig(presets=("dynamic",), max_queries=4, max_docs=30))
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Optional

from ..embed.audit import EmbedAuditConfig, EmbedQuantRun, run_embed_quantization
from ..embed.folder import EmbedError, read_folder
from .base import InputError, Session

STEPS = ("export", "fusing", "encoding", "timing")


class EmbedSession(Session):
    """``result`` is the :class:`~workbench.embed.audit.EmbedQuantRun`. Inputs: ``model`` (a
    sentence-transformers folder, checked when set), ``run_dir`` (graphs go to ``<run_dir>/embed``;
    None: the library's own folder)."""

    INPUTS = ("model", "run_dir")
    LABEL = "embed"

    def __init__(self, *, model: Any = None, run_dir: Any = None, progress=None) -> None:
        super().__init__(run_dir=run_dir, progress=progress)
        self._model = None
        self.model = model

    @property
    def model(self) -> Any:
        return self._model

    @model.setter
    def model(self, value: Any) -> None:
        if value is not None:
            try:
                read_folder(value)
            except EmbedError as exc:
                raise InputError(str(exc)) from None
        self._model = value

    def quantize(self, cfg: EmbedAuditConfig) -> EmbedQuantRun:
        """Export, fuse, quantize and score (:func:`workbench.embed.audit.run_embed_quantization`)."""
        if self._model is None:
            raise InputError("no embedding model: pass model= a sentence-transformers folder")

        def log(line: str) -> None:
            done = next((i for i, s in enumerate(STEPS) if line.startswith(s) or s in line), None)
            if done is not None:
                self.report(done + 1, len(STEPS), None, line[:80])

        run_dir = self.run_dir() if callable(self.run_dir) else self.run_dir
        out: Optional[Path] = Path(run_dir) / "embed" if run_dir is not None else None
        if out is None:
            run = run_embed_quantization(os.fspath(self._model), cfg, None, log=log)
        else:
            with self.writing(Path(run_dir)):
                run = run_embed_quantization(os.fspath(self._model), cfg, out, log=log)
        self.report(len(STEPS), len(STEPS), None, "done")  # timing left out or skipped: the bar still ends full
        return self.keep(run)
