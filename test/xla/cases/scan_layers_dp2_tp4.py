"""Layers stacked and run by jax.lax.scan (as Flax's nn.scan and MaxText do): each
layer a residual tanh MLP with its weights split over tp (Megatron), the batch over dp,
gradients through the scan. XLA keeps the loops (while, with dynamic-slice and
dynamic-update-slice by the loop counter); the import unrolls them."""
import jax, jax.numpy as jnp
from jax.sharding import PartitionSpec as P
L, B, D, F = 2, 4, 4, 8
def layer(h, w):
    w1, w2 = w
    return h + jnp.tanh(h @ w1) @ w2, None
def loss(ws, x):
    h, _ = jax.lax.scan(layer, x, ws)
    return jnp.mean(h * h)
def step(ws, x):
    return jax.value_and_grad(loss)(ws, x)
def planproof_case():
    f32 = jnp.float32
    ws = (jax.ShapeDtypeStruct((L, D, F), f32), jax.ShapeDtypeStruct((L, F, D), f32))
    sp = (P(None, None, "tp"), P(None, "tp", None))
    return dict(step=step, args=(ws, jax.ShapeDtypeStruct((B, D), f32)), mesh_shape=(2, 4), mesh_axes=("dp", "tp"),
                in_shardings=(sp, P("dp", None)), out_shardings=(P(), sp))


# (At the end, to keep the lines of the checked-in dumps.) SCAN_FULL=1: 32 layers of
# Llama3-8B's hidden and FFN sizes (4096, 14336) on 64 rows -- the scan unrolled at a
# real depth and width (bench/bench_xla.py --full).
import os  # noqa: E402
if os.environ.get("SCAN_FULL"):
    L, B, D, F = 32, 64, 4096, 14336
