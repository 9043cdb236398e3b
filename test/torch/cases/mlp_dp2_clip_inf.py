# mlp_dp2_sgd.py clipping by the infinity norm (the largest |gradient|) with the
# foreach kernels: `_foreach_norm` of order inf per gradient, the largest of those, the
# gradients scaled by min(1, max_norm / (norm + 1e-6)); after the gradients are averaged
# over dp.
import math

import torch
from mlp_dp2_sgd import planproof_case as plain


def clipped_sgd(params):
    params = list(params)
    torch.nn.utils.clip_grad_norm_(params, max_norm=0.05, norm_type=math.inf, foreach=True)
    return torch.optim.SGD(params, lr=0.1, foreach=False)


def planproof_case():
    return dict(plain(), optimizer=clipped_sgd)
