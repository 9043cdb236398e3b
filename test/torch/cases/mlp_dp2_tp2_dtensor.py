# Data and tensor parallelism in DTensor alone, on a 2 x 2 mesh: the batch is split over
# dp (the inputs are DTensors), the weights over tp (column- then row-parallel) and
# replicated over dp. Each gradient comes out of backward partial over dp, and SGD's
# update on the replicated weight makes DTensor all-reduce it.
import torch
from torch import nn
from torch.distributed.tensor import Replicate, Shard, distribute_tensor


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.Linear(4, 8, bias=False)
        self.down = nn.Linear(8, 4, bias=False)

    def forward(self, x):
        return self.down(nn.functional.silu(self.up(x)))


def loss_fn(model, x, t):
    return ((model(x) - t) ** 2).mean()


def parallelize(model, mesh):
    for linear, dim in ((model.up, 0), (model.down, 1)):
        linear.weight = nn.Parameter(distribute_tensor(linear.weight.detach(), mesh,
                                                       [Replicate(), Shard(dim)]))
    return model


def planproof_case():
    return dict(model_fn=MLP, loss_fn=loss_fn, parallelize=parallelize,
                inputs={"x": torch.randn(4, 4), "t": torch.randn(4, 4)},
                input_placements={"x": [Shard(0), Replicate()], "t": [Shard(0), Replicate()]},
                dtensor_inputs=True, mesh_shape=(2, 2), mesh_dim_names=("dp", "tp"),
                optimizer=lambda ps: torch.optim.SGD(ps, lr=0.1, foreach=False))
