# Seeded bug: two Megatron MLPs in a row (megatron_mlp_tp2.py), with the column-parallel
# layer's input gradient never all-reduced (`copy_to` without its backward all-reduce):
# the first MLP's weights get the gradient of only this rank's part of the hidden units.
import torch
from torch import nn
from torch.distributed.tensor import Shard

import megatron_mlp_tp2 as m


class CopyWithoutReduce(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, group):
        return x

    @staticmethod
    def backward(ctx, grad):
        return grad, None


class BuggyColumn(m.ColumnParallelLinear):
    def forward(self, x):
        return CopyWithoutReduce.apply(x, self.group) @ self.weight.t()


class TwoMLPs(nn.Module):
    def __init__(self, group=None):
        super().__init__()
        self.first = m.MLP(group)
        self.second = m.MLP(group)
        if group is not None:
            self.second.up.__class__ = BuggyColumn

    def forward(self, x):
        return self.second(self.first(x))


def planproof_case():
    case = m.planproof_case()
    case.update(model_fn=TwoMLPs, parallelize=lambda model, mesh: TwoMLPs(mesh.get_group("tp")),
                param_placements={f"{b}.{layer}.weight": [Shard(d)]
                                  for b in ("first", "second")
                                  for layer, d in (("up", 0), ("down", 1))})
    return case
