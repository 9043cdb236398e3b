# Labels holding the ignored label (-100, cross_entropy's default `ignore_index`), with a
# data-parallel plan that takes each rank's mean over its own labelled tokens and averages
# the gradients: a mean of means, wrong whenever the ranks hold different numbers of
# ignored labels (3 and 2 here). The capture models the labels as a class or -100 on
# each token (a second input says which tokens are kept), so this is violated where a
# rank divides by its own count. The fix: ce_ignored_labels_dp2_global.py.
import torch
import torch.distributed._functional_collectives as funcol
import torch.nn.functional as F
from torch import nn
from torch.distributed.tensor import Partial, Shard

V, D = 8, 4


class LM(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(V, D)
        self.out = nn.Linear(D, V, bias=False)

    def forward(self, ids):
        return self.out(self.tok(ids))


def loss_fn(model, ids, labels):
    return F.cross_entropy(model(ids).reshape(-1, V), labels.reshape(-1))


def avg_grads(grads, mesh):
    return {n: funcol.all_reduce(g, "avg", mesh) for n, g in grads.items()}


def planproof_case():
    return dict(model_fn=LM, loss_fn=loss_fn,
                inputs={"ids": torch.tensor([[1, 5, 0, 7], [3, 2, 6, 4]]),
                        "labels": torch.tensor([[5, -100, 7, 2], [-100, -100, 4, 1]])},
                input_placements={"ids": [Shard(0)], "labels": [Shard(0)]},
                mesh_shape=(2,), mesh_dim_names=("dp",), parallelize=lambda m, mesh: m,
                grad_sync=avg_grads, loss_placements=[Partial("avg")])
