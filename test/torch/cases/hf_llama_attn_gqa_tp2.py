# HuggingFace-style Llama attention: rotate_half RoPE with cos/sin buffers (cat/slice/neg),
# GQA by repeat_kv (expand + reshape, 4 query heads on 2 KV heads), causal SDPA, q/k/v
# ColwiseParallel, o_proj RowwiseParallel at TP=2, batch 1. VALID plan.
import torch
import torch.nn.functional as F
from torch import nn
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

DIM, HEADS, KV_HEADS, SEQ = 8, 4, 2, 4
HD = DIM // HEADS
BATCH = 1


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def repeat_kv(h, n_rep):
    b, kvh, s, hd = h.shape
    if n_rep == 1:
        return h
    h = h[:, :, None, :, :].expand(b, kvh, n_rep, s, hd)
    return h.reshape(b, kvh * n_rep, s, hd)


class Attn(nn.Module):
    def __init__(self):
        super().__init__()
        self.q_proj = nn.Linear(DIM, HEADS * HD, bias=False)
        self.k_proj = nn.Linear(DIM, KV_HEADS * HD, bias=False)
        self.v_proj = nn.Linear(DIM, KV_HEADS * HD, bias=False)
        self.o_proj = nn.Linear(HEADS * HD, DIM, bias=False)
        inv = 1.0 / (10000 ** (torch.arange(0, HD, 2).float() / HD))
        freqs = torch.outer(torch.arange(SEQ).float(), inv)
        emb = torch.cat((freqs, freqs), dim=-1)
        self.register_buffer("cos", emb.cos(), persistent=False)
        self.register_buffer("sin", emb.sin(), persistent=False)

    def tables(self, s):
        """The rotary cos and sin tables for `s` positions, [1, 1, s, HD]."""
        return self.cos[None, None, :s], self.sin[None, None, :s]

    def forward(self, x):
        b, s, _ = x.shape
        q = self.q_proj(x).view(b, s, -1, HD).transpose(1, 2)
        k = self.k_proj(x).view(b, s, -1, HD).transpose(1, 2)
        v = self.v_proj(x).view(b, s, -1, HD).transpose(1, 2)
        cos, sin = self.tables(s)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        n_rep = q.shape[1] // k.shape[1]
        k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o_proj(o.transpose(1, 2).reshape(b, s, -1))


def loss_fn(model, x, t):
    return ((model(x) - t) ** 2).sum()


def parallelize(model, mesh):
    return parallelize_module(model, mesh, {"q_proj": ColwiseParallel(), "k_proj": ColwiseParallel(),
                                            "v_proj": ColwiseParallel(), "o_proj": RowwiseParallel()})


def planproof_case():
    torch.manual_seed(0)
    return dict(model_fn=Attn, loss_fn=loss_fn,
                inputs={"x": torch.randn(BATCH, SEQ, DIM), "t": torch.randn(BATCH, SEQ, DIM)},
                mesh_shape=(2,), mesh_dim_names=("tp",), parallelize=parallelize)
