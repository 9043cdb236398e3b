# torchtitan_qwen3_dp2_tp2_clip.py clipping by the infinity norm (norm_type=inf, a
# setting of torchtitan's clip_grad_norm_): DTensor takes each shard's largest |g|
# (each rank's maximum of its block), stacks them with the replicated gradients', takes
# |.| and the largest of the stack, and all-reduces it with max over the mesh.
import math

from torchtitan.distributed import utils as dist_utils
from torchtitan_llama3 import trainer_adamw
from torchtitan_qwen3_dp2_tp2 import planproof_case as unclipped

MAX_NORM = 1.0


def clipped_adamw(params):
    params = list(params)
    dist_utils.clip_grad_norm_(params, max_norm=MAX_NORM, norm_type=math.inf, foreach=True)
    return trainer_adamw(params)


def planproof_case():
    case = unclipped()
    return dict(case, optimizer=clipped_adamw,
                description=case["description"] + ", gradients clipped by their infinity "
                            "norm (max_norm 1.0, foreach), fused AdamW")
