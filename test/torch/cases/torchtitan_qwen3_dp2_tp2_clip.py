# torchtitan's Qwen3 on dp_shard=2 x tp=2 (torchtitan_qwen3_dp2_tp2.py) with the
# gradient clipping torchtitan's trainer applies between the gradient reduction and
# the optimizer step (dist_utils.clip_grad_norm_, max_norm 1.0; per tensor, where the
# trainer passes foreach=True, whose _foreach ops are not translated): DTensor's norm,
# each shard's norm, replicated ones over sqrt(|axis|), squared, summed over the mesh.
from torchtitan.distributed import utils as dist_utils
from torchtitan_llama3 import adamw
from torchtitan_qwen3_dp2_tp2 import planproof_case as unclipped

MAX_NORM = 1.0


def clipped_adamw(params):
    """The trainer's order: clip (the gradients are set), then the step."""
    params = list(params)
    dist_utils.clip_grad_norm_(params, max_norm=MAX_NORM, foreach=False)
    return adamw(params)


def planproof_case():
    case = unclipped()
    return dict(case, optimizer=clipped_adamw,
                description=case["description"] + ", gradients clipped (max_norm 1.0)")
