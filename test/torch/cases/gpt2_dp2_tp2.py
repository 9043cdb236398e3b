# A GPT-2 training step on a dp x tp mesh, written as a user would (nanoGPT's shapes at
# width 64): token + learned position embeddings, one pre-LN block (LayerNorm, causal
# SDPA over 4 heads, tanh-GELU MLP, biases), final LayerNorm, LM head, mean
# cross-entropy, AdamW. TP via parallelize_module on mesh["tp"], data parallel by hand
# (local gradients averaged over "dp"); 2 sequences per dp rank. G2_DIM sets the width.
import os

import torch
import torch.distributed._functional_collectives as funcol
import torch.nn.functional as F
from torch import nn
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

DIM = int(os.environ.get("G2_DIM", "64"))
HEADS, SEQ, VOCAB, BATCH = 4, 8, 32, 4


class Attn(nn.Module):
    def __init__(self):
        super().__init__()
        self.q = nn.Linear(DIM, DIM)
        self.k = nn.Linear(DIM, DIM)
        self.v = nn.Linear(DIM, DIM)
        self.proj = nn.Linear(DIM, DIM)

    def forward(self, x):
        b, s, _ = x.shape
        q = self.q(x).view(b, s, -1, DIM // HEADS).transpose(1, 2)
        k = self.k(x).view(b, s, -1, DIM // HEADS).transpose(1, 2)
        v = self.v(x).view(b, s, -1, DIM // HEADS).transpose(1, 2)
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(o.transpose(1, 2).reshape(b, s, -1))


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(DIM, 4 * DIM)
        self.proj = nn.Linear(4 * DIM, DIM)

    def forward(self, x):
        return self.proj(F.gelu(self.fc(x), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(VOCAB, DIM)
        self.wpe = nn.Embedding(SEQ, DIM)
        self.ln_1 = nn.LayerNorm(DIM)
        self.attn = Attn()
        self.ln_2 = nn.LayerNorm(DIM)
        self.mlp = MLP()
        self.ln_f = nn.LayerNorm(DIM)
        self.lm_head = nn.Linear(DIM, VOCAB, bias=False)

    def forward(self, idx):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
        x = x + self.attn(self.ln_1(x))
        x = x + self.mlp(self.ln_2(x))
        return self.lm_head(self.ln_f(x))


def loss_fn(model, idx, targets):
    logits = model(idx)
    return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def parallelize(model, mesh):
    return parallelize_module(model, mesh["tp"], {
        "attn.q": ColwiseParallel(), "attn.k": ColwiseParallel(), "attn.v": ColwiseParallel(),
        "attn.proj": RowwiseParallel(),
        "mlp.fc": ColwiseParallel(), "mlp.proj": RowwiseParallel(),
    })


def grad_sync(grads, mesh, kept_local=()):
    out = {}
    for n, g in grads.items():
        if n in kept_local:  # (gpt2_dp2_tp2_wpe_grad_local's seeded bug)
            out[n] = g
        elif isinstance(g, DTensor):
            local = funcol.all_reduce(g.to_local(), "avg", (mesh, 0))
            out[n] = DTensor.from_local(local, g.device_mesh, g.placements, run_check=False,
                                        shape=g.shape, stride=g.stride())
        else:
            out[n] = funcol.all_reduce(g, "avg", (mesh, 0))
    return out


def planproof_case():
    torch.manual_seed(0)
    return dict(model_fn=GPT, loss_fn=loss_fn,
                inputs={"idx": torch.randint(0, VOCAB, (BATCH, SEQ)),
                        "targets": torch.randint(0, VOCAB, (BATCH, SEQ))},
                input_placements={"idx": [Shard(0), Replicate()],
                                  "targets": [Shard(0), Replicate()]},
                mesh_shape=(2, 2), mesh_dim_names=("dp", "tp"), parallelize=parallelize,
                grad_sync=grad_sync, loss_placements=[Partial("avg"), Replicate()],
                optimizer=lambda ps: torch.optim.AdamW(ps, lr=1e-3, weight_decay=0.1,
                                                       foreach=False))
