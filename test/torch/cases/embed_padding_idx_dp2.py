# A DP=2 LM whose token embedding has padding_idx=0, as HuggingFace models declare it:
# the pad row is looked up like any other but gets no gradient. Mean cross-entropy,
# gradients averaged by hand, SGD. The captured batch holds the pad id (0), so the
# check against PyTorch sees the row zeroed. VALID plan.
import torch
import torch.distributed._functional_collectives as funcol
import torch.nn.functional as F
from torch import nn
from torch.distributed.tensor import Partial, Shard

V, D = 8, 4


class PadLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(V, D, padding_idx=0)
        self.up = nn.Linear(D, 8, bias=False)
        self.down = nn.Linear(8, D, bias=False)
        self.out = nn.Linear(D, V, bias=False)

    def forward(self, ids):
        h = self.tok(ids)
        return self.out(h + self.down(F.silu(self.up(h))))


def loss_fn(model, ids, labels):
    return F.cross_entropy(model(ids).reshape(-1, V), labels.reshape(-1))


def planproof_case():
    torch.manual_seed(0)
    return dict(model_fn=PadLM, loss_fn=loss_fn,
                inputs={"ids": torch.tensor([[1, 5, 0, 7], [3, 0, 6, 4]]),
                        "labels": torch.tensor([[5, 0, 7, 2], [2, 6, 4, 1]])},
                input_placements={"ids": [Shard(0)], "labels": [Shard(0)]},
                mesh_shape=(2,), mesh_dim_names=("dp",), parallelize=lambda m, mesh: m,
                grad_sync=lambda gs, mesh: {n: funcol.all_reduce(g, "avg", mesh) for n, g in gs.items()},
                loss_placements=[Partial("avg")],
                optimizer=lambda ps: torch.optim.SGD(ps, lr=0.1, foreach=False))
