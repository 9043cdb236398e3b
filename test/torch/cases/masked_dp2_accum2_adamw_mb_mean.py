# SEEDED BUG: masked_dp2_accum2_adamw.py as trainers normalized accumulated losses
# before the fix of the gradient-accumulation loss bug (late 2024): each microbatch's
# loss is the mean over its *own* labelled tokens, divided by the number of
# microbatches, and the gradients are averaged over dp -- a mean of per-microbatch
# means, which is not the mean over the batch when microbatches hold different numbers
# of labelled tokens.
import torch
import torch.distributed._functional_collectives as funcol
from masked_dp2_accum2_adamw import planproof_case as fixed
from masked_dp2_adamw import token_losses
from torch.distributed.tensor import Partial

MICROBATCHES = 2


def plan_loss_fn(model, mesh, x, t, mask, batch):
    return token_losses(model, x, t, mask).sum() / mask.sum() / MICROBATCHES


def avg_grads(grads, mesh):
    return {n: funcol.all_reduce(g, "avg", mesh) for n, g in grads.items()}


def planproof_case():
    return dict(fixed(), plan_loss_fn=plan_loss_fn, microbatches=MICROBATCHES,
                grad_sync=avg_grads, loss_placements=[Partial("avg")])
