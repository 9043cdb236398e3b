# torchtitan's Qwen3 on dp_shard=2 x tp=2 (torchtitan_qwen3_dp2_tp2.py) with the end of
# the step exactly as torchtitan's trainer runs it: dist_utils.clip_grad_norm_ (max_norm
# 1.0, foreach=True, as trainer.py calls it) between the gradient reduction and the
# optimizer, then AdamW built as the trainer builds it (fused=True, the optimizer
# container's default implementation). DTensor's norm: each shard's norm
# (`_foreach_norm`), replicated ones over sqrt(|axis|), squared, summed over the mesh;
# the gradients scaled by `_foreach_mul_`; one `_fused_adamw_` updates everything.
from torchtitan.distributed import utils as dist_utils
from torchtitan_llama3 import trainer_adamw
from torchtitan_qwen3_dp2_tp2 import planproof_case as unclipped

MAX_NORM = 1.0


def clipped_adamw(params):
    """The trainer's order: clip (the gradients are set), then the step."""
    params = list(params)
    dist_utils.clip_grad_norm_(params, max_norm=MAX_NORM, foreach=True)
    return trainer_adamw(params)


def planproof_case():
    case = unclipped()
    return dict(case, optimizer=clipped_adamw,
                description=case["description"] + ", gradients clipped (max_norm 1.0, "
                            "foreach), fused AdamW: the trainer's calls")
