# torchtitan's Llama3 on 4 ranks (dp_shard=2 x tp=2, sequence parallelism) with gradient
# accumulation as torchtitan's train_step runs it: each rank's batch is two microbatches
# of token ids, one forward and backward each, every microbatch's summed loss divided by
# the valid tokens of all microbatches summed over the batch mesh (global_valid_tokens),
# the gradients accumulating in .grad; then FSDP's gradient reduction (modelled, as in
# torchtitan_llama3_dp2_tp4.py) and AdamW. The reference is the single-device step on
# the whole batch.
from torchtitan_llama3 import case, fsdp_grad_sync


def planproof_case():
    return case(dp=2, tp=2, heads=2, grad_sync=fsdp_grad_sync, microbatches=2)
