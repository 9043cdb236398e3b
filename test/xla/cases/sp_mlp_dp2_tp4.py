"""Megatron sequence parallelism as a JAX user writes it: activations sharded over the
sequence on tp (with_sharding_constraint) around an RMSNorm, a SwiGLU-style MLP whose
weights are split over tp, the residual and a loss, with gradients, at dp x tp = 2 x 4.
XLA gathers the sequence before the MLP and reduce-scatters after it; its replica groups
use the mesh syntax with device_ids."""
import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P

B, S, D, F = 2, 8, 4, 8


def rmsnorm(x, w):
    return x * jax.lax.rsqrt(jnp.mean(x * x, -1, keepdims=True) + 1e-5) * w


def loss(p, x):
    h = jax.lax.with_sharding_constraint(rmsnorm(x, p["n"]), P("dp", "tp", None))
    y = jax.nn.silu(h @ p["w1"]) @ p["w2"]
    y = jax.lax.with_sharding_constraint(y, P("dp", "tp", None))
    return jnp.mean((x + y) ** 2)


def step(p, x):
    return jax.value_and_grad(loss)(p, x)


def planproof_case():
    f32 = jnp.float32
    params = {"n": jax.ShapeDtypeStruct((D,), f32), "w1": jax.ShapeDtypeStruct((D, F), f32),
              "w2": jax.ShapeDtypeStruct((F, D), f32)}
    specs = {"n": P(), "w1": P(None, "tp"), "w2": P("tp", None)}
    return dict(step=step, args=(params, jax.ShapeDtypeStruct((B, S, D), f32)),
                mesh_shape=(2, 4), mesh_axes=("dp", "tp"),
                in_shardings=(specs, P("dp", "tp", None)), out_shardings=(P(), specs))
