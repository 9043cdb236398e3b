"""A tensor-parallel MLP written by hand with shard_map (the way JAX users write
Megatron): each rank multiplies by its column block of w1 and row block of w2, and a psum
over tp adds the partial outputs. The loss and both gradients come out of jax.grad
through the shard_map. The reference is the same step without shard_map.

BUG selects a seeded bug (planproof's tests run each): "pmean" (pmean where psum
belongs), "nopsum" (the psum left out) or "outspec" (the shard_map's out_specs claim a
batch-sharded result is replicated). JAX's replication check is off (check_vma=False),
as in code that turns it off; it would reject the last two at trace time."""
import os

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P

BUG = os.environ.get("BUG", "")
B, D, F = 4, 4, 8


def mlp(w1, w2, x):
    return jnp.tanh(x @ w1) @ w2


def reference_loss(w1, w2, x):
    y = mlp(w1, w2, x)
    return jnp.mean(y * y)


def reference_step(w1, w2, x):
    return jax.value_and_grad(reference_loss, argnums=(0, 1))(w1, w2, x)


def make_step(mesh):
    def local(w1, w2, x):
        y = mlp(w1, w2, x)
        if BUG == "pmean":
            return jax.lax.pmean(y, "tp")
        if BUG == "nopsum":
            return y
        return jax.lax.psum(y, "tp")

    out_spec = P(None, None) if BUG == "outspec" else P("dp", None)
    parallel_mlp = jax.shard_map(local, mesh=mesh,
                                 in_specs=(P(None, "tp"), P("tp", None), P("dp", None)),
                                 out_specs=out_spec, check_vma=False)

    def loss(w1, w2, x):
        y = parallel_mlp(w1, w2, x)
        return jnp.mean(y * y)

    def step(w1, w2, x):
        return jax.value_and_grad(loss, argnums=(0, 1))(w1, w2, x)

    return step


def planproof_case():
    f32 = jnp.float32
    return dict(
        make_step=make_step, reference_step=reference_step,
        args=(jax.ShapeDtypeStruct((D, F), f32), jax.ShapeDtypeStruct((F, D), f32),
              jax.ShapeDtypeStruct((B, D), f32)),
        mesh_shape=(2, 4), mesh_axes=("dp", "tp"),
        in_shardings=(P(None, "tp"), P("tp", None), P("dp", None)),
        out_shardings=(P(), (P(None, "tp"), P("tp", None))),
    )
