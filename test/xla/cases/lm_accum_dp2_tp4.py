"""Gradient accumulation over microbatches of integer token ids at dp x tp = 2 x 4: the
token-embedding LM of lm_embed_dp2_tp4 (a lookup, a tanh-GELU layer, a head, the
cross-entropy of integer labels), its batch cut into K microbatches and scanned
(jax.lax.scan), the losses and gradients summed, the loss over all B x S tokens.

XLA's partitioner shards the microbatch axis over dp, so each rank gathers every
microbatch's ids (an all-gather of integer ids) and runs all of them. With MB_SPLIT=1
the microbatches are constrained to split their rows over dp instead
(with_sharding_constraint): XLA re-lays the ids out by an all-to-all, and each rank runs
its rows of every microbatch (the case lm_accum_split_dp2_tp4)."""
import os

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P

K, B, S, D, V = 2, 4, 4, 4, 8
def loss(p, ids, labels):
    h = jnp.take(p["emb"], ids, axis=0)
    h = jax.nn.gelu(h @ p["w"], approximate=True)
    logits = h @ p["out"]
    logp = jax.nn.log_softmax(logits)
    return -jnp.sum(jnp.take_along_axis(logp, labels[..., None], axis=-1)) / (B * S)
def step(p, ids, labels):
    mids = ids.reshape(K, B // K, S)
    mlab = labels.reshape(K, B // K, S)
    if os.environ.get("MB_SPLIT"):
        mids = jax.lax.with_sharding_constraint(mids, P(None, "dp", None))
        mlab = jax.lax.with_sharding_constraint(mlab, P(None, "dp", None))
    def body(acc, mb):
        l, g = jax.value_and_grad(loss)(p, mb[0], mb[1])
        return jax.tree.map(jnp.add, acc, (l, g)), None
    zero = (jnp.zeros((), jnp.float32), jax.tree.map(jnp.zeros_like, p))
    (l, g), _ = jax.lax.scan(body, zero, (mids, mlab))
    return l, g
def planproof_case():
    f32 = jnp.float32
    p = {"emb": jax.ShapeDtypeStruct((V, D), f32), "w": jax.ShapeDtypeStruct((D, D), f32), "out": jax.ShapeDtypeStruct((D, V), f32)}
    ps = {"emb": P(None, "tp"), "w": P(None, "tp"), "out": P("tp", None)}
    i32 = jnp.int32
    return dict(step=step, args=(p, jax.ShapeDtypeStruct((B, S), i32), jax.ShapeDtypeStruct((B, S), i32)),
                mesh_shape=(2, 4), mesh_axes=("dp", "tp"),
                in_shardings=(ps, P("dp", None), P("dp", None)), out_shardings=(P(), ps))


# (At the end, to keep the lines of the checked-in dumps.) ACCUM_FULL=1: 4 microbatches
# of 4 sequences of 2048 tokens, vocabulary 128256 and hidden 4096 (bench/bench_xla.py
# --full).
if os.environ.get("ACCUM_FULL"):
    K, B, S, D, V = 4, 16, 2048, 4096, 128256
# MB4=1: 4 microbatches of 2 sequences (lm_accum_split4_dp2_tp4, with MB_SPLIT=1: XLA
# exchanges the ids of two microbatches at a time and transposes the runs back).
if os.environ.get("MB4"):
    K, B = 4, 8
