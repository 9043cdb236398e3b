# torchtitan's Llama3 on 8 ranks: dp_shard=4 x tp=2 with sequence parallelism, forward,
# backward and an AdamW step; FSDP's gradient reduction (which does not trace) as
# torchtitan_llama3.fsdp_grad_sync models it. The other factorization of 8 ranks than
# torchtitan_llama3_dp2_tp4: each rank's sequence shard holds two positions.
from torchtitan_llama3 import case, fsdp_grad_sync


def planproof_case():
    return case(dp=4, tp=2, heads=2, grad_sync=fsdp_grad_sync)
