"""A token LM step in the idioms JAX code uses, dp x tp = 2 x 4, to check the import's
coverage of them: ids kept in range by jnp.clip (maximum and minimum on token ids), a
LayerNorm through jnp.var (its `n - ddof > 0` guard: constants folded and compared, a NaN
never selected; the integer ddof converted to float), rotary embeddings by rotate_half on
cos/sin tables passed in (static slices: `pad` in the backward), an MLP under
jax.checkpoint with the dots_saveable policy (`reduce-precision` to f32, the identity),
and the masked cross-entropy as optax writes it (jax.nn.logsumexp: `is-finite` and `abs`)."""
import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P

B, S, D, H, V = 2, 4, 8, 4, 8
HD = D // H


def layer_norm(x, g, b):
    mu = jnp.mean(x, -1, keepdims=True)
    return (x - mu) / jnp.sqrt(jnp.var(x, -1, keepdims=True) + 1e-5) * g + b


def rotate(x, cos, sin):  # x: [B, S, H, HD]; rotate_half by static slices
    x1, x2 = x[..., :HD // 2], x[..., HD // 2:]
    return x * cos[None, :, None, :] + jnp.concatenate([-x2, x1], -1) * sin[None, :, None, :]


@jax.checkpoint
def mlp(h, w1, w2):
    return jax.nn.gelu(h @ w1) @ w2


mlp = jax.checkpoint(mlp.__wrapped__, policy=jax.checkpoint_policies.dots_saveable)


def loss(p, ids, labels, mask, cos, sin):
    h = p["emb"][jnp.clip(ids, 0, V - 1)]
    x = layer_norm(h, p["g"], p["b"])
    q = rotate((x @ p["wq"]).reshape(B, S, H, HD), cos, sin)
    k = rotate((x @ p["wk"]).reshape(B, S, H, HD), cos, sin)
    v = (x @ p["wv"]).reshape(B, S, H, HD)
    s = jnp.einsum("bqhd,bkhd->bhqk", q, k) / jnp.sqrt(HD)
    o = jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(s), v).reshape(B, S, D)
    h = h + o @ p["wo"]
    h = h + mlp(h, p["w1"], p["w2"])
    logits = h @ p["out"]
    picked = jnp.take_along_axis(logits, labels[..., None], axis=-1)[..., 0]
    per_token = jax.nn.logsumexp(logits, axis=-1) - picked
    return jnp.sum(per_token * mask) / jnp.maximum(jnp.sum(mask), 1.0)


def step(p, ids, labels, mask, cos, sin):
    return jax.value_and_grad(loss)(p, ids, labels, mask, cos, sin)


def planproof_case():
    f32, i32 = jnp.float32, jnp.int32
    shapes = {"emb": (V, D), "g": (D,), "b": (D,), "wq": (D, D), "wk": (D, D), "wv": (D, D),
              "wo": (D, D), "w1": (D, 2 * D), "w2": (2 * D, D), "out": (D, V)}
    specs = {"emb": P(), "g": P(), "b": P(), "wq": P(None, "tp"), "wk": P(None, "tp"),
             "wv": P(None, "tp"), "wo": P("tp", None), "w1": P(None, "tp"),
             "w2": P("tp", None), "out": P()}
    p = {k: jax.ShapeDtypeStruct(s, f32) for k, s in shapes.items()}
    tok = jax.ShapeDtypeStruct((B, S), i32)
    table = jax.ShapeDtypeStruct((S, HD), f32)
    args = (p, tok, tok, jax.ShapeDtypeStruct((B, S), f32), table, table)
    ins = (specs, P("dp", None), P("dp", None), P("dp", None), P(), P())
    return dict(step=step, args=args, mesh_shape=(2, 4), mesh_axes=("dp", "tp"),
                in_shardings=ins, out_shardings=(P(), specs))
