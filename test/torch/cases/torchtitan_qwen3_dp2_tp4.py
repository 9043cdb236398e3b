# torchtitan's Qwen3 (torchtitan_qwen3_dp2_tp2.py's model) with 8 query heads on 4 KV
# heads on dp_shard=2 x tp=4: one KV head per tp rank, so the fused QKV gradient
# concatenates per rank two query heads' rows and one key's and one value's, whose
# [1, S, 1, 1, D] blocks a reshape left a choice of global shape (docs/layout-engine.md,
# "placedAs").
from torchtitan_llama3 import case, fsdp_grad_sync
from torchtitan_qwen3_dp2_tp2 import qwen3_fn


def planproof_case():
    return case(dp=2, tp=4, heads=8, grad_sync=fsdp_grad_sync, build=qwen3_fn,
                model="Qwen3 (qk-norm, 8 query heads on 4 KV heads")
