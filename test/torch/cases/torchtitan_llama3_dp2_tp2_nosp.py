# torchtitan's Llama3 on 4 ranks: dp_shard=2 x tp=2 *without* sequence parallelism
# (set_llama3_sharding_config(enable_sp=False)), forward, backward and an AdamW step;
# FSDP's gradient reduction as torchtitan_llama3.fsdp_grad_sync models it. Without
# sequence parallelism DTensor moves the tensor-parallel split between the batch split
# over dp_shard and the feature dimensions through dimension 0: chunks stacked along
# each rank's batch block before a reduce_scatter, gathers along dimension 0 put side
# by side along the features (docs/layout-engine.md, "Stacked pieces").
from torchtitan_llama3 import case, fsdp_grad_sync


def planproof_case():
    return case(dp=2, tp=2, heads=2, grad_sync=fsdp_grad_sync, sp=False)
