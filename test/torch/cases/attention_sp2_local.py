# Seeded bug: the attention of attention_tp2.py run on sequence shards as if they were
# whole sequences (a forgotten all-gather before attention, or a context-parallel step
# without its ring): each rank attends within its own part of the sequence, with the
# rotary positions of the first part, and nobody reduces the weights' gradients.
import torch
from torch.distributed.tensor import Partial, Shard

from attention_tp2 import DIM, SEQ, Attention, loss_fn


def planproof_case():
    return dict(model_fn=Attention, loss_fn=loss_fn,
                inputs={"x": torch.randn(1, SEQ, DIM), "t": torch.randn(1, SEQ, DIM)},
                input_placements={"x": [Shard(1)], "t": [Shard(1)]},
                loss_placements=[Partial("sum")],
                mesh_shape=(2,), mesh_dim_names=("sp",), parallelize=lambda m, mesh: m)
