"""optax-style AdamW written in jnp inside the jitted step, with gradient clipping by
global norm (optax.clip_by_global_norm: jnp.where(norm < max, g, g * max / norm)) and
bias correction from an int32 step count carried in the optimizer state (as optax's
ScaleByAdamState.count). GELU MLP with biases, dp x tp = 2 x 4 Megatron sharding."""
import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P

B, D, F = 4, 8, 16


def loss(p, x, y):
    h = jax.nn.gelu(x @ p["w1"] + p["b1"])
    out = h @ p["w2"] + p["b2"]
    return jnp.mean((out - y) ** 2)


def global_norm(tree):
    return jnp.sqrt(sum(jnp.sum(jnp.square(t)) for t in jax.tree.leaves(tree)))


def clip(g, max_norm=1.0):
    n = global_norm(g)
    trigger = jnp.squeeze(n < max_norm)
    return jax.tree.map(lambda t: jnp.where(trigger, t, (t / n.astype(t.dtype)) * max_norm), g)


def step(p, mu, nu, count, x, y, lr=1e-3, b1=0.9, b2=0.999, eps=1e-8, wd=0.01):
    l, g = jax.value_and_grad(loss)(p, x, y)
    g = clip(g)
    mu = jax.tree.map(lambda m, t: b1 * m + (1 - b1) * t, mu, g)
    nu = jax.tree.map(lambda v, t: b2 * v + (1 - b2) * t * t, nu, g)
    new_count = count + 1
    c1 = 1 - b1 ** new_count.astype(jnp.float32)
    c2 = 1 - b2 ** new_count.astype(jnp.float32)
    upd = jax.tree.map(lambda m, v, w: (m / c1) / (jnp.sqrt(v / c2) + eps) + wd * w, mu, nu, p)
    p = jax.tree.map(lambda w, u: w - lr * u, p, upd)
    return l, p, mu, nu, new_count


SHAPES = {"w1": (D, F), "b1": (F,), "w2": (F, D), "b2": (D,)}
SPECS = {"w1": P(None, "tp"), "b1": P("tp"), "w2": P("tp", None), "b2": P()}


def planproof_case():
    f32 = jnp.float32
    params = {k: jax.ShapeDtypeStruct(s, f32) for k, s in SHAPES.items()}
    return dict(step=step,
                args=(params, params, params, jax.ShapeDtypeStruct((), jnp.int32),
                      jax.ShapeDtypeStruct((B, D), f32), jax.ShapeDtypeStruct((B, D), f32)),
                mesh_shape=(2, 4), mesh_axes=("dp", "tp"),
                in_shardings=(SPECS, SPECS, SPECS, P(), P("dp", None), P("dp", None)),
                out_shardings=(P(), SPECS, SPECS, SPECS, P()))
