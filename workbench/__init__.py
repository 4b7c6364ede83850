"""ORT Workbench: train, export, fuse and quantize Hugging Face transformers with ONNX Runtime,
and prove what each optimization did.

The library never imports ipywidgets, IPython or traitlets; the panels in ``widgets/`` are views
over the functions here, and ``workbench.cli`` is a thin command-line front over the same ones.
"""

__version__ = "0.1.0"

# torch prints "No CUDA runtime is found, using CUDA_HOME=..." when the training wheel's
# `import onnxruntime` imports torch.utils.cpp_extension on a machine without a GPU: see quiet.py.
from .core import quiet as _quiet  # noqa: E402

_quiet.install()
