# torch.dot of a tensor-parallel weight vector and a sharded input (DTensor): aten.dot
# captured as ref.dot, each rank's dot a partial sum that DTensor all-reduces.
import torch
from torch import nn
from torch.distributed.tensor import Replicate, Shard, distribute_tensor


class Scorer(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(8))

    def forward(self, x):
        return torch.dot(self.w, x)


def loss_fn(model, x, t):
    return (model(x) - t) ** 2


def parallelize(model, mesh):
    model.w = nn.Parameter(distribute_tensor(model.w.detach(), mesh, [Shard(0)]))
    return model


def planproof_case():
    return dict(model_fn=Scorer, loss_fn=loss_fn, parallelize=parallelize,
                inputs={"x": torch.randn(8), "t": torch.randn(())},
                input_placements={"x": [Shard(0)], "t": [Replicate()]},
                dtensor_inputs=True, mesh_shape=(2,), mesh_dim_names=("tp",),
                optimizer=lambda ps: torch.optim.SGD(ps, lr=0.1, foreach=False))
