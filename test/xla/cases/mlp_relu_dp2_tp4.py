"""A two-layer ReLU MLP, its gradients and an SGD update, sharded over dp x tp = 2 x 4:
the batch over dp, the first weight's columns and the second's rows over tp (Megatron)."""
import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P


def loss(w1, w2, x):
    h = jax.nn.relu(x @ w1)
    y = h @ w2
    return jnp.mean(y * y)


def step(w1, w2, x):
    l, (g1, g2) = jax.value_and_grad(loss, argnums=(0, 1))(w1, w2, x)
    return l, w1 - 0.1 * g1, w2 - 0.1 * g2


def planproof_case():
    f32 = jnp.float32
    return dict(
        step=step,
        args=(jax.ShapeDtypeStruct((8, 16), f32), jax.ShapeDtypeStruct((16, 8), f32),
              jax.ShapeDtypeStruct((4, 8), f32)),
        mesh_shape=(2, 4), mesh_axes=("dp", "tp"),
        in_shardings=(P(None, "tp"), P("tp", None), P("dp", None)),
        out_shardings=(P(), P(None, "tp"), P("tp", None)),
    )
