"""Capture of PyTorch training steps as planproof specs (docs/torch.md).

    from planproof.torch import capture
    spec = capture(model_fn, loss_fn, inputs, mesh_shape=(2,), mesh_dim_names=("tp",),
                   parallelize=my_parallelize)

`python -m planproof.torch CASE.py --verify` does the same from the command line.
"""
from .aten import RULES, Unsupported
from .capture import capture, layout_of

__all__ = ["capture", "layout_of", "Unsupported", "RULES"]
