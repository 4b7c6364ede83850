"""On-device training: which parameters train (head, last N layers, all)."""

from __future__ import annotations

import re

from ..core.options import parse_choice
from .config import OnDeviceError, Trainable

_LAYER = re.compile(r"\.(?:layer|layers|blocks)\.(\d+)\.")


POSITION_EMBEDDINGS_NOTE = (
    "absolute position embeddings stay frozen with trainable='all': onnxruntime-training 1.19.2 writes the gradient of "
    "the Add that broadcasts them over the batch as an Identity (no ReduceSum over the batch axis), so their GatherGrad "
    "scatters only the first example's gradient (measured on the tiny model: 47x off PyTorch's at step 1, loss curves "
    "5.5e-4 apart after 20 steps, 27x the tolerance); OnDeviceConfig(train_position_embeddings=True) trains them anyway"
)


def is_position_embedding(name: str) -> bool:
    return "position_embeddings" in name


def trainable_names(model, trainable: Trainable | str, last_n_layers: int = 1,
                    train_position_embeddings: bool = False) -> list[str]:
    """Names of the parameters that train, in the model's order. ``last`` also trains what follows the layers
    (pooler, final norm); ``all`` leaves out the position embeddings (:data:`POSITION_EMBEDDINGS_NOTE`)."""
    trainable = parse_choice(Trainable, trainable, "trainable", OnDeviceError)
    names = [n for n, _ in model.named_parameters()]
    prefix = getattr(model, "base_model_prefix", "") or ""
    head = [n for n in names if not (prefix and n.startswith(prefix + "."))]
    if trainable is Trainable.ALL:
        return [n for n in names if train_position_embeddings or not is_position_embedding(n)]
    if not head:
        raise OnDeviceError(f"cannot tell the classifier head from the base model {prefix!r} in this model's parameters; "
                            "use trainable='all'")
    if trainable is Trainable.HEAD:
        return head
    numbered = {n: int(m.group(1)) for n in names if (m := _LAYER.search(n))}  # parameter -> its encoder layer
    layers = sorted(set(numbered.values()))
    if not layers:
        raise OnDeviceError("found no numbered encoder layers (.layer.<i>.) in this model; use trainable='head' or 'all'")
    if last_n_layers > len(layers):
        raise OnDeviceError(f"last_n_layers is {last_n_layers} but the model has {len(layers)} encoder layers; "
                            f"give 1 to {len(layers)}, or trainable='all'")
    first = layers[-last_n_layers]
    return [n for n in names if n in head or (numbered[n] >= first if n in numbered else "embeddings" not in n)]
