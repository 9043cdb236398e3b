"""A Llama-style block as a JAX user writes it -- RMSNorm, causal multi-head attention,
a SwiGLU MLP, an output head with cross-entropy, gradients and an AdamW update --
sharded over dp x tp = 2 x 4: the batch over dp; attention heads and the MLP's hidden
units over tp (Megatron); every weight's other dimension over dp as well (FSDP-style
parameter sharding: XLA gathers weights and reduce-scatters gradients)."""
import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P

B, S, D, H, F, V = 2, 4, 4, 4, 8, 8
HD = D // H


def rmsnorm(x, w):
    return x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-5) * w


def attention(x, wq, wk, wv, wo):
    q = (x @ wq).reshape(B, S, H, HD)
    k = (x @ wk).reshape(B, S, H, HD)
    v = (x @ wv).reshape(B, S, H, HD)
    s = jnp.einsum("bqhd,bkhd->bhqk", q, k) / jnp.sqrt(HD).astype(jnp.float32)
    causal = jnp.tril(jnp.ones((S, S), dtype=bool))
    s = jnp.where(causal, s, -1e9)
    p = jax.nn.softmax(s, axis=-1)
    o = jnp.einsum("bhqk,bkhd->bqhd", p, v).reshape(B, S, D)
    return o @ wo


def mlp(x, w1, w2, w3):
    return (jax.nn.silu(x @ w1) * (x @ w3)) @ w2


def loss(params, x, onehot):
    h = x + attention(rmsnorm(x, params["n1"]), params["wq"], params["wk"], params["wv"],
                      params["wo"])
    h = h + mlp(rmsnorm(h, params["n2"]), params["w1"], params["w2"], params["w3"])
    logits = rmsnorm(h, params["nf"]) @ params["wout"]
    logp = jax.nn.log_softmax(logits, axis=-1)
    return -jnp.sum(onehot * logp) / (B * S)


def adamw(p, g, m, v, lr=1e-3, b1=0.9, b2=0.95, eps=1e-8, wd=0.1):
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    update = (m / (1 - b1)) / (jnp.sqrt(v / (1 - b2)) + eps)
    return p - lr * (update + wd * p), m, v


def step(params, m, v, x, onehot):
    l, g = jax.value_and_grad(loss)(params, x, onehot)
    out = jax.tree.map(adamw, params, g, m, v)
    new_p = jax.tree.map(lambda t: t[0], out, is_leaf=lambda t: isinstance(t, tuple))
    new_m = jax.tree.map(lambda t: t[1], out, is_leaf=lambda t: isinstance(t, tuple))
    new_v = jax.tree.map(lambda t: t[2], out, is_leaf=lambda t: isinstance(t, tuple))
    return l, new_p, new_m, new_v


SHAPES = {"n1": (D,), "wq": (D, D), "wk": (D, D), "wv": (D, D), "wo": (D, D),
          "n2": (D,), "w1": (D, F), "w2": (F, D), "w3": (D, F), "nf": (D,), "wout": (D, V)}
# Column-parallel weights split their output dim over tp, row-parallel ones their input
# dim; the other dim of every matrix is split over dp (parameters sharded over dp too).
SPECS = {"n1": P(), "wq": P("dp", "tp"), "wk": P("dp", "tp"), "wv": P("dp", "tp"),
         "wo": P("tp", "dp"), "n2": P(), "w1": P("dp", "tp"), "w2": P("tp", "dp"),
         "w3": P("dp", "tp"), "nf": P(), "wout": P("dp", None)}


def planproof_case():
    f32 = jnp.float32
    params = {k: jax.ShapeDtypeStruct(s, f32) for k, s in SHAPES.items()}
    data = P("dp", "tp" if os.environ.get("LLAMA_SP") else None, None)
    return dict(
        step=step,
        args=(params, params, params, jax.ShapeDtypeStruct((B, S, D), f32),
              jax.ShapeDtypeStruct((B, S, V), f32)),
        mesh_shape=MESH, mesh_axes=("dp", "tp"),
        in_shardings=(SPECS, SPECS, SPECS, data, data),
        out_shardings=(P(), SPECS, SPECS, SPECS),
    )


# (At the end, to keep the lines of the checked-in dumps.) LLAMA_FULL=DPxTP takes
# Llama3-8B's sizes instead -- hidden 4096, 32 heads, FFN 14336, vocabulary 128256,
# sequences of 2048, DP of them -- on a dp x tp mesh: llama_block_full_dp8_tp8 is
# LLAMA_FULL=8x8 on 64 devices (`--devices 64`). LLAMA_SP=1 splits the batch's
# sequence over tp as well (each rank's causal mask starts at its chunk's position).
import os  # noqa: E402

MESH = (2, 4)
if os.environ.get("LLAMA_FULL"):
    MESH = tuple(int(k) for k in os.environ["LLAMA_FULL"].split("x"))
    B, S, D, H, F, V = MESH[0], 2048, 4096, 32, 14336, 128256
    HD = D // H
    SHAPES = {"n1": (D,), "wq": (D, D), "wk": (D, D), "wv": (D, D), "wo": (D, D),
              "n2": (D,), "w1": (D, F), "w2": (F, D), "w3": (D, F), "nf": (D,), "wout": (D, V)}
# LLAMA_KV=N: grouped-query attention, N key/value heads each shared by H / N query
# heads (Llama3-8B: 8 for its 32), repeated as JAX users write it (`jnp.repeat`);
# llama_block_full_gqa_dp8_tp8 is LLAMA_FULL=8x8 LLAMA_KV=8. GQA_TILE=1 is the classic
# bug: `jnp.tile`, which pairs query head h with key/value head h mod N, not h // (H / N).
KV = int(os.environ.get("LLAMA_KV", "0")) or H
if KV != H:
    def grouped(t):
        if os.environ.get("GQA_TILE"):
            return jnp.tile(t, (1, 1, H // KV, 1))
        return jnp.repeat(t, H // KV, axis=2)

    def attention(x, wq, wk, wv, wo):
        q = (x @ wq).reshape(B, S, H, HD)
        k = grouped((x @ wk).reshape(B, S, KV, HD))
        v = grouped((x @ wv).reshape(B, S, KV, HD))
        s = jnp.einsum("bqhd,bkhd->bhqk", q, k) / jnp.sqrt(HD).astype(jnp.float32)
        s = jnp.where(jnp.tril(jnp.ones((S, S), dtype=bool)), s, -1e9)
        o = jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(s, axis=-1), v).reshape(B, S, D)
        return o @ wo

    SHAPES["wk"] = SHAPES["wv"] = (D, KV * HD)
