# SEEDED BUG, found in a stand-in for FSDP: torchtitan's Qwen3 with its token embedding
# tied to the lm_head (tied_case) on dp_shard=2 x tp=2, the gradients synchronized by
# fsdp_grad_sync (each rank's local gradient summed over dp_shard, as FSDP2 reduces
# them) -- correct for every untied torchtitan case. With the tie it is not: the
# lookup takes the weight's local shard (to_local, no grad_placements), so DTensor
# labels that use's gradient Replicate over dp_shard although each rank holds its own
# batch shard's part; the lm_head's gradient is (rightly) Partial over dp_shard; adding
# the two, DTensor turns the "replicated" one into a partial value by dividing it by 2
# (dp_shard's size), and the sum over dp_shard then counts the embedding's gradient
# half. A run of this step on 4 CPU processes (gloo) gives the same halved gradient;
# torchtitan's own FSDP2 (apply_fsdp_to_decoder) gives the reference's.
from torchtitan_llama3 import fsdp_grad_sync
from torchtitan_qwen3_dp2_tp2 import tied_case


def planproof_case():
    return tied_case(dp=2, grad_sync=fsdp_grad_sync)
