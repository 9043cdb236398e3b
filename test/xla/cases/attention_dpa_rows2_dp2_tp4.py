"""attention_dpa_dp2_tp4 with two sequences and two heads on every rank (dp x tp =
2 x 4, batch 4, 8 heads): each rank merges its sequences and heads into the batch of its
products, which are runs of the reference's merged batch (docs/layout-engine.md,
"reshape")."""
import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P

B, S, D, H, V = 4, 4, 16, 8, 8
HD = D // H


def loss(p, x, onehot):
    q = (x @ p["wq"]).reshape(B, S, H, HD)
    k = (x @ p["wk"]).reshape(B, S, H, HD)
    v = (x @ p["wv"]).reshape(B, S, H, HD)
    o = jax.nn.dot_product_attention(q, k, v, is_causal=True).reshape(B, S, D)
    logits = (x + o @ p["wo"]) @ p["wout"]
    return -jnp.sum(onehot * jax.nn.log_softmax(logits, -1)) / (B * S)


def step(p, x, onehot):
    l, g = jax.value_and_grad(loss)(p, x, onehot)
    return l, jax.tree.map(lambda w, d: w - 1e-2 * d, p, g)


def planproof_case():
    f32 = jnp.float32
    shapes = {"wq": (D, D), "wk": (D, D), "wv": (D, D), "wo": (D, D), "wout": (D, V)}
    specs = {"wq": P(None, "tp"), "wk": P(None, "tp"), "wv": P(None, "tp"), "wo": P("tp", None),
             "wout": P()}
    params = {n: jax.ShapeDtypeStruct(s, f32) for n, s in shapes.items()}
    return dict(step=step, args=(params, jax.ShapeDtypeStruct((B, S, D), f32),
                                 jax.ShapeDtypeStruct((B, S, V), f32)),
                mesh_shape=(2, 4), mesh_axes=("dp", "tp"),
                in_shardings=(specs, P("dp"), P("dp")), out_shardings=(P(), specs))
