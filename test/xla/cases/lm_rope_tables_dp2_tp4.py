"""Token LM as many JAX/Flax users write it: embedding lookup (table[ids]), rotary
embeddings whose tables the step computes (inverse frequencies 10000 ** (-2i/d) by
`power`, positions by a float iota, `cos` and `sin`; rotate_half by static slices),
causal attention, and the loss via jax.nn.one_hot(labels, V) * log_softmax.
dp x tp = 2 x 4: heads over tp, batch over dp."""
import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P

B, S, D, H, V = 2, 4, 16, 4, 8
HD = D // H


def rope(x):  # x: [B, S, H, HD]
    half = HD // 2
    inv = 1.0 / (10000 ** (jnp.arange(half, dtype=jnp.float32) / half))
    ang = jnp.arange(S, dtype=jnp.float32)[:, None] * inv[None, :]
    cos = jnp.concatenate([jnp.cos(ang), jnp.cos(ang)], -1)[None, :, None, :]
    sin = jnp.concatenate([jnp.sin(ang), jnp.sin(ang)], -1)[None, :, None, :]
    x1, x2 = x[..., :half], x[..., half:]
    return x * cos + jnp.concatenate([-x2, x1], axis=-1) * sin


def loss(p, ids, labels):
    h = p["emb"][ids]
    q = rope((h @ p["wq"]).reshape(B, S, H, HD))
    k = rope((h @ p["wk"]).reshape(B, S, H, HD))
    v = (h @ p["wv"]).reshape(B, S, H, HD)
    s = jnp.einsum("bqhd,bkhd->bhqk", q, k)
    s = jnp.where(jnp.tril(jnp.ones((S, S), bool)), s, -1e9)
    o = jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(s), v).reshape(B, S, D)
    logits = (h + o @ p["wo"]) @ p["out"]
    return -jnp.mean(jnp.sum(jax.nn.one_hot(labels, V) * jax.nn.log_softmax(logits), -1))


def step(p, ids, labels):
    return jax.value_and_grad(loss)(p, ids, labels)


def planproof_case():
    f32, i32 = jnp.float32, jnp.int32
    shapes = {"emb": (V, D), "wq": (D, D), "wk": (D, D), "wv": (D, D), "wo": (D, D), "out": (D, V)}
    specs = {"emb": P(), "wq": P(None, "tp"), "wk": P(None, "tp"), "wv": P(None, "tp"),
             "wo": P("tp", None), "out": P()}
    p = {k: jax.ShapeDtypeStruct(s, f32) for k, s in shapes.items()}
    return dict(step=step, args=(p, jax.ShapeDtypeStruct((B, S), i32), jax.ShapeDtypeStruct((B, S), i32)),
                mesh_shape=(2, 4), mesh_axes=("dp", "tp"),
                in_shardings=(specs, P("dp", None), P("dp", None)), out_shardings=(P(), specs))
