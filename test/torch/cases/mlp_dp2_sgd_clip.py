# mlp_dp2_sgd.py with gradient clipping, as torch.nn.utils.clip_grad_norm_ does it (the
# 2-norm of each gradient, stacked, the norm of those, the gradients scaled by
# min(1, max_norm / (norm + 1e-6))) before SGD: in the plan, after the gradients are
# averaged over dp, so every rank clips by the global norm.
import torch
from mlp_dp2_sgd import planproof_case as unclipped

MAX_NORM = 0.05


def clipped_sgd(params):
    params = list(params)
    torch.nn.utils.clip_grad_norm_(params, max_norm=MAX_NORM, foreach=False)
    return torch.optim.SGD(params, lr=0.1, momentum=0.9, foreach=False)


def planproof_case():
    return dict(unclipped(), optimizer=clipped_sgd)
