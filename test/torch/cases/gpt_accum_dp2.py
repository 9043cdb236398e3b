# A small GPT-style LM written as a user would, trained with data parallelism and
# gradient accumulation: each of the 2 data-parallel ranks gets 4 of the 8 sequences and
# runs them as 2 microbatches of 2; each microbatch's mean loss is divided by the number
# of microbatches, gradients accumulate, then get averaged over the ranks; AdamW steps.
import torch
import torch.distributed._functional_collectives as funcol
import torch.nn.functional as F
from torch import nn
from torch.distributed.tensor import Partial, Shard

D, V, S, B = 16, 24, 6, 8  # (the MLP's width 3 x 16 is the batch's 8 x 6 tokens)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(D)
        self.up = nn.Linear(D, 3 * D)
        self.down = nn.Linear(3 * D, D)

    def forward(self, h):
        return h + self.down(F.gelu(self.up(self.norm(h))))


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(V, D)
        self.pos = nn.Embedding(S, D)
        self.block = Block()
        self.out_norm = nn.LayerNorm(D)
        self.head = nn.Linear(D, V)

    def forward(self, ids):
        h = self.tok(ids) + self.pos(torch.arange(ids.shape[1]))
        return self.head(self.out_norm(self.block(h)))


def loss_fn(model, ids, labels):
    logits = model(ids)
    return F.cross_entropy(logits.reshape(-1, V), labels.reshape(-1))


def plan_loss_fn(model, mesh, ids, labels, batch):
    return loss_fn(model, ids, labels) / 2  # two microbatches


def average(grads, mesh):
    return {n: funcol.all_reduce(g, "avg", mesh) for n, g in grads.items()}


def planproof_case():
    g = torch.Generator().manual_seed(7)
    return dict(model_fn=TinyLM, loss_fn=loss_fn, plan_loss_fn=plan_loss_fn, microbatches=2,
                inputs={"ids": torch.randint(0, V, (B, S), generator=g),
                        "labels": torch.randint(0, V, (B, S), generator=g)},
                input_placements={"ids": [Shard(0)], "labels": [Shard(0)]},
                mesh_shape=(2,), mesh_dim_names=("dp",), parallelize=lambda m, mesh: m,
                grad_sync=average, loss_placements=[Partial("avg")],
                optimizer=lambda ps: torch.optim.AdamW(ps, lr=1e-3, weight_decay=0.01,
                                                       foreach=False))
