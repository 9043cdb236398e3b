# A data-parallel step whose loss is averaged over the *labelled* tokens only (a loss
# mask, as in Megatron's `loss_mask`): each rank sums its tokens' losses and divides by
# the number of labelled tokens of the whole batch (all-reduced), so the ranks' losses
# and gradients add up to the single-device ones; AdamW updates the parameters.
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
    tokens = funcol.all_reduce(mask.sum(), "sum", mesh)
    return token_losses(model, x, t, mask).sum() / tokens


def sum_grads(grads, mesh):
    return {n: funcol.all_reduce(g, "sum", mesh) for n, g in grads.items()}


def planproof_case():
    return dict(model_fn=MLP, loss_fn=loss_fn, plan_loss_fn=plan_loss_fn,
                inputs={"x": torch.randn(4, 4), "t": torch.randn(4, 4),
                        "mask": torch.tensor([1.0, 1.0, 0.0, 1.0])},
                input_placements={"x": [Shard(0)], "t": [Shard(0)], "mask": [Shard(0)]},
                mesh_shape=(2,), mesh_dim_names=("dp",), parallelize=lambda m, mesh: m,
                grad_sync=sum_grads, loss_placements=[Partial("sum")],
                optimizer=lambda ps: torch.optim.AdamW(ps, lr=0.01, weight_decay=0.1,
                                                       foreach=False))
