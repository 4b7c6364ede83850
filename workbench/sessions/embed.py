"""The embedding quantization session: a sentence-transformers folder's INT8 presets scored on retrieval (NDCG@10
against FP32) and agreement, and the search for the fastest preset within an NDCG@10 budget."""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path
from typing import Any, Optional

from ..embed.audit import BUILTIN, EmbedAuditConfig, EmbedQuantRun, run_embed_quantization
from ..embed.folder import EmbedError, read_folder
from ..quant import SearchResult
from .base import InputError, Session, model_folder

STEPS = ("export", "fusing", "encoding", "timing")
SEARCH_STEP = re.compile(r"search (\d+)/(\d+): (.*)")


class EmbedSession(Session):
    """``model``: a sentence-transformers folder, checked when set; graphs go to ``<run_dir>/embed``."""

    INPUTS = ("model", "run_dir")
    LABEL = "embed"

    def __init__(self, *, model: Any = None, run_dir: Any = None, progress=None) -> None:
        super().__init__(run_dir=run_dir, progress=progress)
        self._model = None
        self.model = model
        self.search_result: Optional[SearchResult] = None

    @property
    def model(self) -> Any:
        return self._model

    @model.setter
    def model(self, value: Any) -> None:
        if value is not None:
            if isinstance(value, (str, os.PathLike)):
                folder = model_folder(value)  # a Hugging Face Hub id: its folder in the local cache
                value = value if folder == os.fspath(value) else folder
            try:
                read_folder(value)
            except EmbedError as exc:
                raise InputError(str(exc)) from None
        self._model = value

    def keep_search(self, search: SearchResult) -> SearchResult:
        self.search_result = search
        return search

    def quantize(self, cfg: EmbedAuditConfig) -> EmbedQuantRun:
        """Export, fuse, quantize and score (:func:`workbench.embed.audit.run_embed_quantization`)."""
        return self.keep(self._run(cfg, len(STEPS)))

    def search(self, cfg: EmbedAuditConfig, *, max_excluded: Optional[int] = None) -> SearchResult:
        """The audit's search (``workbench audit --search``): keeps the quantization it runs on as ``result``."""
        self._folder()
        if not cfg.presets:
            raise InputError("search presets is empty: select at least one preset to search over (ctrl/cmd-click for several)")
        if cfg.data != BUILTIN and cfg.queries is None:
            raise InputError(f"the search holds each preset to an NDCG@10 budget, and data {cfg.data!r} has no queries: "
                             "give queries= a pairs file, or data='builtin'")
        try:
            cfg = dataclasses.replace(cfg, search=True, max_excluded=cfg.max_excluded if max_excluded is None else max_excluded)
        except EmbedError as exc:
            raise InputError(str(exc)) from None
        run = self.keep(self._run(cfg, len(STEPS) + 1))
        if run.search is None:
            raise InputError(f"nothing searched: {run.export.validation.text()}; the exported graph must match "
                             "SentenceTransformer.encode before it is quantized")
        return self.keep_search(run.search)

    def _folder(self) -> str:
        if self._model is None:
            raise InputError("no embedding model: pass model= a sentence-transformers folder")
        return os.fspath(self._model)

    def _run(self, cfg: EmbedAuditConfig, total: int) -> EmbedQuantRun:
        folder = self._folder()

        def log(line: str) -> None:
            found = SEARCH_STEP.match(line)
            if found:
                done, n = int(found[1]), int(found[2])
                self.report(len(STEPS) + done, len(STEPS) + n, None, f"search {done}/{n}: {found[3]}"[:80])
                return
            done = next((i for i, s in enumerate(STEPS) if line.startswith(s) or s in line), None)
            if done is not None:
                self.report(done + 1, total, None, line[:80])

        def rows(p) -> None:  # while a graph encodes: its rows, rows per second and (on Ray) actors, at the encoding step
            self.report(STEPS.index("encoding") + 1, total, p.eta_s, p.text())

        run_dir = self.run_dir() if callable(self.run_dir) else self.run_dir
        if run_dir is None:
            run = run_embed_quantization(folder, cfg, None, log=log, progress=rows)
        else:
            with self.writing(Path(run_dir)):
                run = run_embed_quantization(folder, cfg, Path(run_dir) / "embed", log=log, progress=rows)
        self.report(total, total, None, "done")  # timing left out or skipped: the bar still ends full
        return run
