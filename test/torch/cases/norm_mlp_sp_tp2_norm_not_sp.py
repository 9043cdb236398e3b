# Seeded bug: the norm is left out of the plan (no SequenceParallel): its weight is a
# plain tensor, and its gradient, from this rank's part of the sequence only, is never
# reduced over tp.
# RMSNorm under sequence parallelism before a tensor-parallel MLP, at TP=2 (Megatron
# SP: the norm runs on this rank's part of the sequence; the MLP all-gathers it and
# reduce-scatters its output back).
import torch
from torch import nn
from torch.distributed.tensor import DTensor, Partial, Shard
from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel,
                                               SequenceParallel, parallelize_module)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.RMSNorm(4, eps=1e-6)
        self.up = nn.Linear(4, 8, bias=False)
        self.down = nn.Linear(8, 4, bias=False)

    def forward(self, x):
        return x + self.down(nn.functional.silu(self.up(self.norm(x))))


def loss_fn(model, x, t):
    loss = ((model(x) - t) ** 2).sum()
    w = model.up.weight
    if isinstance(w, DTensor):
        # The parallel step: each rank summed the loss of its part of the sequence.
        loss = DTensor.from_local(loss, w.device_mesh, [Partial()])
    return loss


def parallelize(model, mesh):
    return parallelize_module(model, mesh, {

        "up": ColwiseParallel(input_layouts=Shard(1)),
        "down": RowwiseParallel(output_layouts=Shard(1)),
    })


def planproof_case():
    return dict(model_fn=Block, loss_fn=loss_fn,
                inputs={"x": torch.randn(2, 4, 4), "t": torch.randn(2, 4, 4)},
                input_placements={"x": [Shard(1)], "t": [Shard(1)]},
                mesh_shape=(2,), mesh_dim_names=("tp",), parallelize=parallelize)
