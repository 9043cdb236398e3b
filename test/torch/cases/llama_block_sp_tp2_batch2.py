# llama_block_sp_tp2 with two sequences in the batch: every rank holds both batch rows
# of its heads, which SDPA's products merge with the heads into one batch dimension --
# each rank's (row, head) pairs are runs of the merged batch, not one block of it
# (docs/layout-engine.md, "Windows"). The layout engine proves it as it proves the
# one-row block.
import torch
from torch.distributed.tensor import Partial, Shard

from attention_tp2 import DIM, SEQ
from llama_block_sp_tp2 import Block, loss_fn, parallelize


def planproof_case():
    return dict(model_fn=Block, loss_fn=loss_fn,
                inputs={"x": torch.randn(2, SEQ, DIM), "t": torch.randn(2, SEQ, DIM)},
                input_placements={"x": [Shard(1)], "t": [Shard(1)]},
                loss_placements=[Partial("sum")],
                mesh_shape=(2,), mesh_dim_names=("tp",), parallelize=parallelize)
