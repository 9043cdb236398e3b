# SEEDED BUG: ce_ignored_accum2_dp2.py as trainers normalized accumulated losses before
# the fix of the gradient-accumulation loss bug (late 2024): each microbatch's loss is
# cross_entropy's mean over its *own* labelled tokens, divided by the number of
# microbatches, and the gradients are averaged over dp -- a mean of per-microbatch
# means, equal to the batch's mean only when every microbatch holds as many ignored
# labels.
import torch.distributed._functional_collectives as funcol
import torch.nn.functional as F
from torch.distributed.tensor import Partial

from ce_ignored_accum2_dp2 import planproof_case as fixed
from ce_ignored_labels_dp2 import V

MICROBATCHES = 2


def plan_loss_fn(model, mesh, ids, labels, batch):
    return F.cross_entropy(model(ids).reshape(-1, V), labels.reshape(-1)) / MICROBATCHES


def avg_grads(grads, mesh):
    return {n: funcol.all_reduce(g, "avg", mesh) for n, g in grads.items()}


def planproof_case():
    return dict(fixed(), plan_loss_fn=plan_loss_fn, grad_sync=avg_grads,
                loss_placements=[Partial("avg")])
