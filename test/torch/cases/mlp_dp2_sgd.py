# Data parallelism written by hand, as DDP does it: each rank runs the step on its half
# of the batch, the gradients are averaged over the data-parallel ranks, and SGD
# updates the (replicated) parameters. The logged loss is the ranks' mean.
import torch
import torch.distributed._functional_collectives as funcol
from torch import nn
from torch.distributed.tensor import Partial, Shard


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.Linear(4, 8, bias=False)
        self.down = nn.Linear(8, 4, bias=False)

    def forward(self, x):
        return self.down(nn.functional.silu(self.up(x)))


def loss_fn(model, x, t):
    return nn.functional.mse_loss(model(x), t)


def all_reduce_grads(grads, mesh):
    return {n: funcol.all_reduce(g, "avg", mesh) for n, g in grads.items()}


def planproof_case():
    return dict(model_fn=MLP, loss_fn=loss_fn,
                inputs={"x": torch.randn(4, 4), "t": torch.randn(4, 4)},
                input_placements={"x": [Shard(0)], "t": [Shard(0)]},
                mesh_shape=(2,), mesh_dim_names=("dp",), parallelize=lambda m, mesh: m,
                grad_sync=all_reduce_grads, loss_placements=[Partial("avg")],
                optimizer=lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, foreach=False))
