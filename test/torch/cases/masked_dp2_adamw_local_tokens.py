# Seeded bug: each rank divides its loss by its own number of labelled tokens, and
# the gradients are averaged over the ranks: a mean of per-rank means, which is not
# the mean over the batch when the ranks hold different numbers of labelled tokens.
# (The fix: masked_dp2_adamw.py.)
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


def token_losses(model, x, t, mask):
    return ((model(x) - t) ** 2).sum(-1) * mask


def loss_fn(model, x, t, mask):
    return token_losses(model, x, t, mask).sum() / mask.sum()


def plan_loss_fn(model, mesh, x, t, mask):
    tokens = mask.sum()
    return token_losses(model, x, t, mask).sum() / tokens


def avg_grads(grads, mesh):
    return {n: funcol.all_reduce(g, "avg", mesh) for n, g in grads.items()}


def planproof_case():
    return dict(model_fn=MLP, loss_fn=loss_fn, plan_loss_fn=plan_loss_fn,
                inputs={"x": torch.randn(4, 4), "t": torch.randn(4, 4),
                        "mask": torch.tensor([1.0, 1.0, 0.0, 1.0])},
                input_placements={"x": [Shard(0)], "t": [Shard(0)], "mask": [Shard(0)]},
                mesh_shape=(2,), mesh_dim_names=("dp",), parallelize=lambda m, mesh: m,
                grad_sync=avg_grads, loss_placements=[Partial("avg")],
                optimizer=lambda ps: torch.optim.AdamW(ps, lr=0.01, weight_decay=0.1,
                                                       foreach=False))
