# torchtitan's Llama3 on dp_shard=2 x tp=4 *without* FSDP, which torchtitan always wraps
# around a dp_shard > 1 model: the gradients are then what DTensor says they are. The
# vocabulary-parallel embedding runs in a local_map without in_grad_placements, so its
# weight's gradient is labelled Replicate over dp_shard while each rank holds only its
# batch shard's part -- planproof reports the missing reduction at the lookup.
from torchtitan_llama3 import case


def planproof_case():
    return case(dp=2, tp=4, heads=4, optimizer=None)
