# A Llama3 transformer block as torchtitan writes it (RMSNorm, attention with rotary
# embeddings in complex numbers and causal SDPA, a SwiGLU feed-forward, residuals),
# parallelized with torchtitan's tensor- and sequence-parallel plan for a block at TP=2:
# the norms on this rank's part of the sequence, the attention and feed-forward
# inputs gathered (PrepareModuleInput), q/k/v and w1/w3 column-parallel, wo and w2
# row-parallel scattering back to sequence shards.
import torch
import torch.nn.functional as F
from torch import nn
from torch.distributed.tensor import Partial, Replicate, Shard
from torch.distributed.tensor.parallel import (ColwiseParallel, PrepareModuleInput,
                                               RowwiseParallel, SequenceParallel,
                                               parallelize_module)

from attention_tp2 import DIM, SEQ, Attention


class FeedForward(nn.Module):
    def __init__(self, hidden=8):
        super().__init__()
        self.w1 = nn.Linear(DIM, hidden, bias=False)
        self.w2 = nn.Linear(hidden, DIM, bias=False)
        self.w3 = nn.Linear(DIM, hidden, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.attention = Attention()
        self.feed_forward = FeedForward()
        self.attention_norm = nn.RMSNorm(DIM, eps=1e-5)
        self.ffn_norm = nn.RMSNorm(DIM, eps=1e-5)

    def forward(self, x):
        h = x + self.attention(self.attention_norm(x))
        return h + self.feed_forward(self.ffn_norm(h))


def loss_fn(model, x, t):
    return ((model(x) - t) ** 2).sum()


def parallelize(model, mesh):
    return parallelize_module(model, mesh, {
        "attention_norm": SequenceParallel(),
        "attention": PrepareModuleInput(input_layouts=(Shard(1),),
                                        desired_input_layouts=(Replicate(),)),
        "attention.wq": ColwiseParallel(),
        "attention.wk": ColwiseParallel(),
        "attention.wv": ColwiseParallel(),
        "attention.wo": RowwiseParallel(output_layouts=Shard(1)),
        "ffn_norm": SequenceParallel(),
        "feed_forward": PrepareModuleInput(input_layouts=(Shard(1),),
                                           desired_input_layouts=(Replicate(),)),
        "feed_forward.w1": ColwiseParallel(),
        "feed_forward.w2": RowwiseParallel(output_layouts=Shard(1)),
        "feed_forward.w3": ColwiseParallel(),
    })


def planproof_case():
    return dict(model_fn=Block, loss_fn=loss_fn,
                inputs={"x": torch.randn(1, SEQ, DIM), "t": torch.randn(1, SEQ, DIM)},
                input_placements={"x": [Shard(1)], "t": [Shard(1)]},
                loss_placements=[Partial("sum")],
                mesh_shape=(2,), mesh_dim_names=("tp",), parallelize=parallelize)
