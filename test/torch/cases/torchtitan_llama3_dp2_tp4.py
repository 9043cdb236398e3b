# torchtitan's Llama3 on 8 ranks: dp_shard=2 x tp=4 with sequence parallelism, forward,
# backward and an AdamW step; FSDP's gradient reduction (which does not trace) as
# torchtitan_llama3.fsdp_grad_sync models it.
from torchtitan_llama3 import case, fsdp_grad_sync


def planproof_case():
    return case(dp=2, tp=4, heads=4, grad_sync=fsdp_grad_sync)
