# The fix of hf_shift_labels_dp2.py, as Hugging Face's trainer passes
# `num_items_in_batch`: each rank's sum over the kept labels of the whole batch (their
# count all-reduced over dp), the gradients summed.
import torch.distributed._functional_collectives as funcol
from torch.distributed.tensor import Partial

import hf_shift_labels_dp2 as bug
from hf_shift_labels_dp2 import count, shifted_nll


def plan_loss_fn(model, mesh, ids, labels):
    return shifted_nll(model(ids), labels) / funcol.all_reduce(count(labels), "sum", mesh)


def sum_grads(grads, mesh):
    return {n: funcol.all_reduce(g, "sum", mesh) for n, g in grads.items()}


def planproof_case():
    return dict(bug.planproof_case(), plan_loss_fn=plan_loss_fn, grad_sync=sum_grads,
                loss_placements=[Partial("sum")])
