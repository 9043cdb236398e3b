# SEEDED BUG (classic): attention with a FUSED qkv projection nn.Linear(D, 3D) made
# ColwiseParallel as is, then the local output chunked into q, k, v: each rank's shard
# holds rows [0, 3D/2) / [3D/2, 3D) of the fused weight, so its local chunk(3) is NOT
# (q_heads, k_heads, v_heads) of its heads (rank 0 gets q-head0, q-head1 as "k", k-head0 as
# "v"). Output proj RowwiseParallel. Expected: violated.
import torch
import torch.nn.functional as F
from torch import nn
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

DIM, HEADS, SEQ = 8, 2, 4


class Attn(nn.Module):
    def __init__(self):
        super().__init__()
        self.hd = DIM // HEADS
        self.qkv = nn.Linear(DIM, 3 * DIM, bias=False)
        self.proj = nn.Linear(DIM, DIM, bias=False)

    def forward(self, x):
        b, s, _ = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q, k, v = (t.reshape(b, s, -1, self.hd).transpose(1, 2) for t in (q, k, v))
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(o.transpose(1, 2).reshape(b, s, -1))


def loss_fn(model, x, t):
    return ((model(x) - t) ** 2).sum()


def parallelize(model, mesh):
    return parallelize_module(model, mesh, {"qkv": ColwiseParallel(), "proj": RowwiseParallel()})


def planproof_case():
    torch.manual_seed(0)
    return dict(model_fn=Attn, loss_fn=loss_fn,
                inputs={"x": torch.randn(1, SEQ, DIM), "t": torch.randn(1, SEQ, DIM)},
                mesh_shape=(2,), mesh_dim_names=("tp",), parallelize=parallelize)
