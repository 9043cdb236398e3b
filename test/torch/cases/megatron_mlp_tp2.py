# Megatron-style tensor parallelism written as Megatron-core writes it: plain-tensor
# weight shards, autograd Functions around torch.distributed.all_reduce (in place, on
# the tensor-parallel group): `copy_to` is the identity forward and all-reduces the
# gradient backward, `reduce_from` all-reduces forward and passes the gradient through.
# A ColumnParallelLinear (weight rows split) then a RowParallelLinear (columns split).
import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.tensor import Shard

IN, HIDDEN = 4, 8


class CopyToParallelRegion(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return x

    @staticmethod
    def backward(ctx, grad):
        grad = grad.contiguous()
        dist.all_reduce(grad, group=ctx.group)
        return grad, None


class ReduceFromParallelRegion(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, group):
        x = x.contiguous()
        dist.all_reduce(x, group=group)
        return x

    @staticmethod
    def backward(ctx, grad):
        return grad, None


class ColumnParallelLinear(nn.Module):
    def __init__(self, n_in, n_out, group):
        super().__init__()
        self.group = group
        self.weight = nn.Parameter(torch.randn(n_out // dist.get_world_size(group), n_in))

    def forward(self, x):
        return CopyToParallelRegion.apply(x, self.group) @ self.weight.t()


class RowParallelLinear(nn.Module):
    def __init__(self, n_in, n_out, group):
        super().__init__()
        self.group = group
        self.weight = nn.Parameter(torch.randn(n_out, n_in // dist.get_world_size(group)))

    def forward(self, x):
        return ReduceFromParallelRegion.apply(x @ self.weight.t(), self.group)


class MLP(nn.Module):
    def __init__(self, group=None):
        super().__init__()
        if group is None:  # one device
            self.up = nn.Linear(IN, HIDDEN, bias=False)
            self.down = nn.Linear(HIDDEN, IN, bias=False)
        else:
            self.up = ColumnParallelLinear(IN, HIDDEN, group)
            self.down = RowParallelLinear(HIDDEN, IN, group)

    def forward(self, x):
        return self.down(nn.functional.gelu(self.up(x)))


def loss_fn(model, x, t):
    return nn.functional.mse_loss(model(x), t)


def planproof_case():
    return dict(model_fn=MLP, loss_fn=loss_fn,
                inputs={"x": torch.randn(2, IN), "t": torch.randn(2, IN)},
                mesh_shape=(2,), mesh_dim_names=("tp",),
                parallelize=lambda model, mesh: MLP(mesh.get_group("tp")),
                param_placements={"up.weight": [Shard(0)], "down.weight": [Shard(1)]})
