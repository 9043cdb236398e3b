# mlp_dp2_sgd.py with the multi-tensor ("foreach") kernels PyTorch picks by default on
# GPUs: clip_grad_norm_(foreach=True) -- `_foreach_norm` of the gradients, the scale
# `_foreach_mul_` -- then AdamW(foreach=True) with amsgrad, whose update is a chain of
# in-place foreach ops (`_foreach_lerp_`, `_foreach_addcmul_`, `_foreach_maximum_`,
# `_foreach_sqrt`, `_foreach_div_`, `_foreach_addcdiv_`, ...). In the plan, after the
# gradients are averaged over dp.
import torch
from mlp_dp2_sgd import planproof_case as plain

MAX_NORM = 0.05


def clipped_adamw(params):
    params = list(params)
    torch.nn.utils.clip_grad_norm_(params, max_norm=MAX_NORM, foreach=True)
    return torch.optim.AdamW(params, lr=0.1, weight_decay=0.1, amsgrad=True, foreach=True)


def planproof_case():
    return dict(plain(), optimizer=clipped_adamw)
