# A text classifier written from scratch: mean-pooled token embeddings, a LayerNorm'd
# SiLU MLP, label-smoothed cross-entropy; data parallel over 2 ranks with 2 microbatches
# each, gradients averaged by hand, SGD with Nesterov momentum.
import torch
import torch.distributed._functional_collectives as funcol
import torch.nn.functional as F
from torch import nn
from torch.distributed.tensor import Partial, Shard

V, S, D, C, B = 20, 5, 12, 4, 8


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(V, D)
        self.norm = nn.LayerNorm(D)
        self.fc1 = nn.Linear(D, 2 * D)
        self.fc2 = nn.Linear(2 * D, C)

    def forward(self, ids):
        h = self.emb(ids).mean(dim=1)
        return self.fc2(F.silu(self.fc1(self.norm(h))))


def loss_fn(model, ids, labels):
    return F.cross_entropy(model(ids), labels, label_smoothing=0.1)


def plan_loss_fn(model, mesh, ids, labels, batch):
    return loss_fn(model, ids, labels) / 2


def average(grads, mesh):
    return {n: funcol.all_reduce(g, "avg", mesh) for n, g in grads.items()}


def planproof_case():
    g = torch.Generator().manual_seed(3)
    return dict(model_fn=Classifier, loss_fn=loss_fn, plan_loss_fn=plan_loss_fn, microbatches=2,
                inputs={"ids": torch.randint(0, V, (B, S), generator=g),
                        "labels": torch.randint(0, C, (B,), generator=g)},
                input_placements={"ids": [Shard(0)], "labels": [Shard(0)]},
                mesh_shape=(2,), mesh_dim_names=("dp",), parallelize=lambda m, mesh: m,
                grad_sync=average, loss_placements=[Partial("avg")],
                optimizer=lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True,
                                                     foreach=False))
