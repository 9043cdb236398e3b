# SEEDED BUG: mlp_dp2_sgd_clip.py, but the plan clips each rank's gradients by their
# own norm before averaging them over dp (clipping called before the data-parallel
# reduction): the clip coefficient is the rank's, not the global norm's.
import torch
import torch.distributed._functional_collectives as funcol
from mlp_dp2_sgd import planproof_case as unclipped
from mlp_dp2_sgd_clip import MAX_NORM, clipped_sgd

PLAN = {}


def clip_then_reduce(grads, mesh):
    PLAN["clipped"] = True
    norm = torch.nn.utils.get_total_norm(list(grads.values()), foreach=False)
    coef = torch.clamp(MAX_NORM / (norm + 1e-6), max=1.0)
    return {n: funcol.all_reduce(g * coef, "avg", mesh) for n, g in grads.items()}


def optimizer(params):
    if PLAN.get("clipped"):  # the plan's step: clipped already, by the rank's norm
        return torch.optim.SGD(params, lr=0.1, momentum=0.9, foreach=False)
    return clipped_sgd(params)


def planproof_case():
    return dict(unclipped(), optimizer=optimizer, grad_sync=clip_then_reduce)
