# Tiny GPT: token embedding + learned positional embedding (nn.Embedding of torch.arange:
# the table's first S rows),
# one pre-norm block (RMSNorm, TP SwiGLU MLP, colwise/rowwise), final norm and an lm_head
# TIED to the token embedding (replicated). 2x2 mesh: TP on mesh["tp"], data parallel by
# hand (local gradients averaged over "dp"). Mean CE. AdamW. VALID plan.
import torch
import torch.nn.functional as F
import torch.distributed._functional_collectives as funcol
from torch import nn
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

V, D, S = 8, 4, 4
POS_ARANGE = True


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(V, D)
        if POS_ARANGE:
            self.pos = nn.Embedding(S, D)
        else:
            self.pos = nn.Parameter(torch.randn(1, S, D) * 0.1)
        self.norm1 = nn.RMSNorm(D)
        self.w1 = nn.Linear(D, 8, bias=False)
        self.w3 = nn.Linear(D, 8, bias=False)
        self.w2 = nn.Linear(8, D, bias=False)
        self.norm_f = nn.RMSNorm(D)
        self.head = nn.Linear(D, V, bias=False)
        self.head.weight = self.tok.weight

    def forward(self, ids):
        if POS_ARANGE:
            h = self.tok(ids) + self.pos(torch.arange(ids.shape[1]))
        else:
            h = self.tok(ids) + self.pos
        x = self.norm1(h)
        h = h + self.w2(F.silu(self.w1(x)) * self.w3(x))
        return self.head(self.norm_f(h))


def loss_fn(model, ids, labels):
    return F.cross_entropy(model(ids).flatten(0, 1), labels.flatten(0, 1))


def parallelize(model, mesh):
    return parallelize_module(model, mesh["tp"], {"w1": ColwiseParallel(), "w3": ColwiseParallel(),
                                                  "w2": RowwiseParallel()})


def grad_sync(grads, mesh):
    out = {}
    for n, g in grads.items():
        if isinstance(g, DTensor):
            local = funcol.all_reduce(g.to_local(), "avg", (mesh, 0))
            out[n] = DTensor.from_local(local, g.device_mesh, g.placements, run_check=False,
                                        shape=g.shape, stride=g.stride())
        else:
            out[n] = funcol.all_reduce(g, "avg", (mesh, 0))
    return out


def planproof_case():
    torch.manual_seed(0)
    return dict(model_fn=GPT, loss_fn=loss_fn,
                inputs={"ids": torch.tensor([[1, 5, 0, 7], [3, 2, 6, 4]]),
                        "labels": torch.tensor([[5, 0, 7, 2], [2, 6, 4, 1]])},
                input_placements={"ids": [Shard(0), Replicate()], "labels": [Shard(0), Replicate()]},
                mesh_shape=(2, 2), mesh_dim_names=("dp", "tp"), parallelize=parallelize,
                grad_sync=grad_sync, loss_placements=[Partial("avg"), Replicate()],
                optimizer=lambda ps: torch.optim.AdamW(ps, lr=0.01, weight_decay=0.1, foreach=False))
