"""Training core: one loop, three backends, no silent fallback, runs saved and loaded back."""

from __future__ import annotations

from workbench.models import load_model
from workbench.train import load_train_run


def test_tiny_checkpoint_loads_back(tiny_checkpoint, tiny_train_run):
    loaded = load_model(str(tiny_checkpoint))
    assert loaded.model.config.num_labels == 2
    assert (tiny_checkpoint / "model.safetensors").is_file()
    again = load_train_run(tiny_checkpoint.parent)
    assert again == tiny_train_run
