"""A TorchScript export of an encoder (the classifier's and the embedding model's) shows the user no
warning that says nothing about their graph: on transformers 5 the mask builder's tracer warning and the
mask indexing's negative-index warning, on torch 2.9 and later the exporter's deprecation. Any other
warning still shows; the graph is validated against PyTorch after each export either way."""

from __future__ import annotations

import warnings

import pytest

from tests.helpers.embed_fixtures import make_tiny_st_folder
from workbench.embed.export import run_embed_export
from workbench.graph import ExportConfig, run_export
from workbench.graph.trace import torchscript_export_warnings

TEXTS = ["a short one", "a somewhat longer review of a film that goes on for a while", "!"]


def _shown(fn) -> list[str]:
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        fn()
    # Python shows a DeprecationWarning only when __main__ triggers it: torch's exporter calling its own
    # deprecated helpers reaches no user, so those are not counted
    return [f"{w.category.__name__} ({w.filename}:{w.lineno}): {str(w.message)[:160]}" for w in seen
            if not issubclass(w.category, (DeprecationWarning, PendingDeprecationWarning))]


@pytest.mark.slow
def test_the_classifier_export_shows_no_warning(tmp_path, quick_data):
    shown = _shown(lambda: run_export("tiny", ExportConfig.quick(), tmp_path / "export", data=quick_data))
    assert shown == []


@pytest.mark.slow
def test_the_embedding_export_shows_no_warning(tmp_path):
    folder = make_tiny_st_folder(tmp_path, "mean", True, 0)
    shown = _shown(lambda: run_embed_export(folder, tmp_path / "export", texts=TEXTS))
    assert shown == []


def test_only_the_named_warnings_are_left_out():
    import torch

    def raise_them():
        with torchscript_export_warnings():
            warnings.warn_explicit("Converting a tensor to a Python boolean might cause the trace to be incorrect.",
                                   torch.jit.TracerWarning, "masking_utils.py", 229, module="transformers.masking_utils")
            warnings.warn_explicit("Converting a tensor to a Python boolean might cause the trace to be incorrect.",
                                   torch.jit.TracerWarning, "modeling_mine.py", 7, module="mine.modeling_mine")
            warnings.warn("Exporting aten::index operator of advanced indexing in opset 17 ... negative values", UserWarning)
            warnings.warn("something else entirely", UserWarning)

    shown = _shown(raise_them)
    assert len(shown) == 2 and "mine.modeling_mine" not in shown[0] and "modeling_mine.py" in shown[0], shown
    assert "something else entirely" in shown[1]
