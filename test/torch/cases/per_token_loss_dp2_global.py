# The fix of per_token_loss_dp2.py, as Megatron's `calculate_per_token_loss` has it:
# each rank's masked sum over the mask's sum all-reduced over dp, the gradients summed.
import torch.distributed._functional_collectives as funcol
from torch.distributed.tensor import Partial

import per_token_loss_dp2 as bug
from per_token_loss_dp2 import loss_mask, masked_sum


def plan_loss_fn(model, mesh, ids, labels, mask):
    count = funcol.all_reduce(loss_mask(labels, mask).sum(), "sum", mesh)
    return masked_sum(model, ids, labels, mask) / count


def sum_grads(grads, mesh):
    return {n: funcol.all_reduce(g, "sum", mesh) for n, g in grads.items()}


def planproof_case():
    return dict(bug.planproof_case(), plan_loss_fn=plan_loss_fn, grad_sync=sum_grads,
                loss_placements=[Partial("sum")])
