"""The on-device training session: ONNX Runtime's training artifacts trained with
``onnxruntime.training.api`` beside PyTorch eager, and the run's web page served on 127.0.0.1."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from ..ondevice import OnDeviceConfig, OnDeviceResult, run_ondevice
from .base import DataInput, Session, model_folder


class OnDeviceSession(DataInput, Session):
    """``result`` is the :class:`~workbench.ondevice.OnDeviceResult`; ``page_server`` the run's web page server on
    127.0.0.1 once :meth:`serve_page` ran. Inputs: ``data``, ``run_dir``."""

    INPUTS = ("data", "run_dir")
    LABEL = "ondevice"

    def __init__(self, *, data: Any = None, run_dir: Any = None, progress=None) -> None:
        super().__init__(run_dir=run_dir, progress=progress)
        self.data = data
        self.page_server = None

    def train(self, model: str, cfg: OnDeviceConfig) -> OnDeviceResult:
        """Train ``model`` on the device and in PyTorch eager, and export and validate the inference graph."""
        model = model_folder(model)
        data = self.dataset()
        self.start()
        with self.writing() as run_dir:
            result = run_ondevice(model, cfg, run_dir, data=data,
                                  progress=lambda i, n, what: self.report(i, n, None, what), stop=self.stop_event)
        return self.keep(result)

    def page_dir(self) -> Optional[Path]:
        page = getattr(self.result, "web_page", None)
        return Path(page).parents[1] if page is not None else None

    def serve_page(self) -> str:
        """Serve the latest run's web page on 127.0.0.1 (replacing a page served before); its URL."""
        from ..ondevice.web import PageServer

        folder = self.page_dir()
        if folder is None:
            raise FileNotFoundError("no web page to serve: train on the device first"
                                    + (f" ({self.result.web_note})" if self.result is not None else ""))
        self.stop_page()
        self.page_server = PageServer(folder).start()
        return self.page_server.url

    def stop_page(self) -> None:
        if self.page_server is not None:
            self.page_server.stop()
            self.page_server = None

    def close(self) -> None:
        self.stop_page()
