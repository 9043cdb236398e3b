# Grouped-query attention as torchtitan writes it: 4 query heads share 2 key/value heads
# (`repeat_kv`: expand, then reshape), rotary embeddings in complex numbers, causal SDPA;
# at TP=2 each rank holds 2 query heads and their 1 key/value head.
import torch
import torch.nn.functional as F
from torch import nn
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

from attention_tp2 import apply_rotary_emb, precompute_freqs_cis

DIM, HEADS, KV_HEADS, SEQ = 8, 4, 2, 4


def repeat_kv(x, n_rep):
    bs, slen, n_kv_heads, head_dim = x.shape
    if n_rep == 1:
        return x
    return (x[:, :, :, None, :].expand(bs, slen, n_kv_heads, n_rep, head_dim)
            .reshape(bs, slen, n_kv_heads * n_rep, head_dim))


class GQAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.head_dim = DIM // HEADS
        self.n_rep = HEADS // KV_HEADS
        self.wq = nn.Linear(DIM, HEADS * self.head_dim, bias=False)
        self.wk = nn.Linear(DIM, KV_HEADS * self.head_dim, bias=False)
        self.wv = nn.Linear(DIM, KV_HEADS * self.head_dim, bias=False)
        self.wo = nn.Linear(HEADS * self.head_dim, DIM, bias=False)
        self.register_buffer("freqs_cis", precompute_freqs_cis(self.head_dim, SEQ),
                             persistent=False)

    def heads(self, x):
        """Queries, keys and values per head ([B, S, heads, D]), queries and keys rotated."""
        bs, seqlen, _ = x.shape
        xq = self.wq(x).view(bs, seqlen, -1, self.head_dim)
        xk = self.wk(x).view(bs, seqlen, -1, self.head_dim)
        xv = self.wv(x).view(bs, seqlen, -1, self.head_dim)
        xq, xk = apply_rotary_emb(xq, xk, self.freqs_cis[:seqlen])
        return xq, xk, xv

    def forward(self, x):
        bs, seqlen, _ = x.shape
        xq, xk, xv = self.heads(x)
        keys, values = repeat_kv(xk, self.n_rep), repeat_kv(xv, self.n_rep)
        xq, keys, values = (t.transpose(1, 2) for t in (xq, keys, values))
        out = F.scaled_dot_product_attention(xq, keys, values, is_causal=True)
        return self.wo(out.transpose(1, 2).contiguous().view(bs, seqlen, -1))


def loss_fn(model, x, t):
    return ((model(x) - t) ** 2).sum()


def parallelize(model, mesh):
    return parallelize_module(model, mesh, {"wq": ColwiseParallel(), "wk": ColwiseParallel(),
                                            "wv": ColwiseParallel(), "wo": RowwiseParallel()})


def planproof_case():
    return dict(model_fn=GQAttention, loss_fn=loss_fn,
                inputs={"x": torch.randn(1, SEQ, DIM), "t": torch.randn(1, SEQ, DIM)},
                mesh_shape=(2,), mesh_dim_names=("tp",), parallelize=parallelize)
