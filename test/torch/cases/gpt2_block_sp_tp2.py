# GPT-2 style block: LayerNorm with bias, causal SDPA, tanh-GELU MLP with biases,
# TP colwise/rowwise with biases, sequence parallel norms (torchtitan style): nn.LayerNorm
# (aten.native_layer_norm and its backward) and the tanh GELU, written out in planproof ops.
import torch
import torch.nn.functional as F
from torch import nn
from torch.distributed.tensor import Partial, Replicate, Shard
from torch.distributed.tensor.parallel import (ColwiseParallel, PrepareModuleInput,
                                               RowwiseParallel, SequenceParallel,
                                               parallelize_module)

DIM, HEADS, SEQ = 8, 2, 4


class Attn(nn.Module):
    def __init__(self):
        super().__init__()
        self.hd = DIM // HEADS
        self.q = nn.Linear(DIM, DIM)
        self.k = nn.Linear(DIM, DIM)
        self.v = nn.Linear(DIM, DIM)
        self.proj = nn.Linear(DIM, DIM)

    def forward(self, x):
        b, s, _ = x.shape
        q = self.q(x).view(b, s, -1, self.hd).transpose(1, 2)
        k = self.k(x).view(b, s, -1, self.hd).transpose(1, 2)
        v = self.v(x).view(b, s, -1, self.hd).transpose(1, 2)
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(o.transpose(1, 2).contiguous().view(b, s, -1))


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(DIM, 2 * DIM)
        self.proj = nn.Linear(2 * DIM, DIM)

    def forward(self, x):
        return self.proj(F.gelu(self.fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1 = nn.LayerNorm(DIM)
        self.attn = Attn()
        self.ln_2 = nn.LayerNorm(DIM)
        self.mlp = MLP()

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


def loss_fn(model, x, t):
    return ((model(x) - t) ** 2).sum()


def parallelize(model, mesh):
    return parallelize_module(model, mesh, {
        "ln_1": SequenceParallel(),
        "attn": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),
        "attn.q": ColwiseParallel(), "attn.k": ColwiseParallel(), "attn.v": ColwiseParallel(),
        "attn.proj": RowwiseParallel(output_layouts=Shard(1)),
        "ln_2": SequenceParallel(),
        "mlp": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),
        "mlp.fc": ColwiseParallel(),
        "mlp.proj": RowwiseParallel(output_layouts=Shard(1)),
    })


def planproof_case():
    torch.manual_seed(0)
    return dict(model_fn=Block, loss_fn=loss_fn,
                inputs={"x": torch.randn(2, SEQ, DIM), "t": torch.randn(2, SEQ, DIM)},
                input_placements={"x": [Shard(1)], "t": [Shard(1)]},
                loss_placements=[Partial("sum")],
                mesh_shape=(2,), mesh_dim_names=("tp",), parallelize=parallelize)
