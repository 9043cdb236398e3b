# SEEDED BUG: torchtitan_qwen3_dp2_tp2_clip.py, but the gradients are clipped before
# they are reduced over dp_shard (clipping moved above the data-parallel reduction):
# each rank's norm is its own batch shard's, and so is its clip coefficient.
import torch
from torchtitan_llama3 import fsdp_grad_sync, trainer_adamw
from torchtitan_qwen3_dp2_tp2_clip import MAX_NORM, clipped_adamw
from torchtitan_qwen3_dp2_tp2_clip import planproof_case as clipped

PLAN = {}


def clip_then_sync(grads, mesh):
    PLAN["clipped"] = True
    norm = torch.nn.utils.get_total_norm(list(grads.values()), foreach=True).full_tensor()
    coef = torch.clamp(MAX_NORM / (norm + 1e-6), max=1.0)
    return fsdp_grad_sync({n: g * coef for n, g in grads.items()}, mesh)


def optimizer(params):
    if PLAN.get("clipped"):  # the plan's step: clipped already, before the reduction
        return trainer_adamw(params)
    return clipped_adamw(params)


def planproof_case():
    return dict(clipped(), optimizer=optimizer, grad_sync=clip_then_sync)
