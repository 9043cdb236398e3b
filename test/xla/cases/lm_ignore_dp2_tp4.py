"""Ignored labels (-100, as Hugging Face pads its labels): a token-id LM (a lookup, a
tanh layer, a head) whose cross-entropy skips the tokens labelled IGNORE and is divided
by the number of the others, counted over the whole batch (`jnp.sum(labels != IGNORE)`,
an integer sum XLA all-reduces over dp). dp x tp = 2 x 4.

ACCUM=1 accumulates gradients over K microbatches (jax.lax.scan), checked against the
single-device step on the whole batch (`reference_step`): each microbatch's sum over the
count of the whole batch. PER_MB=1 is the bug Hugging Face's trainers had until 2024:
each microbatch's loss divided by its own count, then by K -- the same value whenever
every microbatch holds as many kept tokens, which only ignored labels break.
LOOP_ONLY=1 divides by the batch's size instead, and has no separate reference: the
labels are compared with IGNORE only inside the loop, in both modules.
COUNT=int8 counts in 8 bits at a batch of 256 tokens (a count that can wrap around)."""
import os

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P

K, B, S, D, V, IGNORE = 2, 4, 4, 4, 8, -100
COUNT = getattr(jnp, os.environ.get("COUNT", "int32"))
if COUNT == jnp.int8:
    B, S = 8, 32


def token_nll(p, ids, labels):
    h = jnp.tanh(jnp.take(p["emb"], ids, axis=0) @ p["w"])
    logp = jax.nn.log_softmax(h @ p["out"])
    kept = kept_mask(labels)
    safe = jnp.where(kept, labels, 0)
    nll = -jnp.take_along_axis(logp, safe[..., None], axis=-1)[..., 0]
    return jnp.sum(nll * kept), jnp.sum(kept, dtype=COUNT)


def whole(p, ids, labels):
    s, n = token_nll(p, ids, labels)
    return s / jnp.maximum(n, 1)


def reference_step(p, ids, labels):
    return jax.value_and_grad(whole)(p, ids, labels)


def accumulated_step(p, ids, labels):
    def mb_loss(p, i, l):
        s, n = token_nll(p, i, l)
        if os.environ.get("PER_MB"):
            return s / jnp.maximum(n, 1) / K
        if os.environ.get("LOOP_ONLY"):
            return s / (B * S)
        return s / jnp.maximum(jnp.sum(kept_mask(labels)), 1)

    def body(acc, mb):
        l, g = jax.value_and_grad(mb_loss)(p, mb[0], mb[1])
        return jax.tree.map(jnp.add, acc, (l, g)), None
    zero = (jnp.zeros((), jnp.float32), jax.tree.map(jnp.zeros_like, p))
    mbs = (ids.reshape(K, B // K, S), labels.reshape(K, B // K, S))
    return jax.lax.scan(body, zero, mbs)[0]


def planproof_case():
    f32, i32 = jnp.float32, jnp.int32
    p = {"emb": jax.ShapeDtypeStruct((V, D), f32), "w": jax.ShapeDtypeStruct((D, D), f32),
         "out": jax.ShapeDtypeStruct((D, V), f32)}
    ps = {"emb": P(None, "tp"), "w": P(None, "tp"), "out": P("tp", None)}
    case = dict(step=reference_step,
                args=(p, jax.ShapeDtypeStruct((B, S), i32), jax.ShapeDtypeStruct((B, S), i32)),
                mesh_shape=(2, 4), mesh_axes=("dp", "tp"),
                in_shardings=(ps, P("dp", None), P("dp", None)), out_shardings=(P(), ps))
    if os.environ.get("ACCUM"):
        case.update(step=accumulated_step, reference_step=reference_step)
    if os.environ.get("LOOP_ONLY"):
        case.update(step=accumulated_step)
    return case


def kept_mask(labels):
    """The tokens the loss keeps: those not labelled IGNORE, or with MASK=ge those whose
    label is not negative (`labels >= 0`, the other way programs skip ignored labels),
    with MASK=gt100 those above IGNORE. (Defined last, so that the lines above keep the
    numbers that the checked-in captures' locations name.)"""
    mask = os.environ.get("MASK", "ne")
    if mask == "ge":
        return labels >= 0
    if mask == "gt100":
        return labels > IGNORE
    return labels != IGNORE
