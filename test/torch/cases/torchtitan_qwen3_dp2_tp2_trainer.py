# torchtitan's Qwen3 on dp_shard=2 x tp=2 (torchtitan_qwen3_dp2_tp2.py) through the whole
# of torchtitan's train_step: gradient accumulation over two microbatches of token ids
# per rank (every microbatch's summed loss over the valid tokens of all of them, summed
# over the batch mesh), FSDP's gradient reduction (modelled), dist_utils.clip_grad_norm_
# as the trainer calls it (max_norm 1.0, foreach) and the fused AdamW of the trainer's
# optimizer container.
from torchtitan_llama3 import case, fsdp_grad_sync
from torchtitan_qwen3_dp2_tp2 import qwen3_fn
from torchtitan_qwen3_dp2_tp2_clip import clipped_adamw


def planproof_case():
    return case(dp=2, tp=2, heads=4, grad_sync=fsdp_grad_sync, build=qwen3_fn,
                optimizer=clipped_adamw, microbatches=2,
                model="Qwen3 (qk-norm, 4 query heads on 2 KV heads")
