"""Token-id LM with a masked cross-entropy written as optax does
(softmax_cross_entropy_with_integer_labels: logsumexp(logits) - take_along_axis(logits,
labels)), padding tokens (label == PAD) masked out: mask = labels != PAD,
loss = sum(ce * mask) / max(sum(mask), 1). Embedding split over tp on the model dim, head
over tp on its input dim. dp x tp = 2 x 4.
CE=logsoftmax uses jax.nn.log_softmax + take_along_axis instead.
MASK=input takes the mask as an f32 input instead of computing it from the labels."""
import os

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P

B, S, D, V, PAD = 4, 4, 8, 8, 0
CE = os.environ.get("CE", "optax")
MASK = os.environ.get("MASK", "labels")


def ce(logits, labels):
    if CE == "optax":
        label_logits = jnp.take_along_axis(logits, labels[..., None], axis=-1)[..., 0]
        return jax.nn.logsumexp(logits, axis=-1) - label_logits
    logp = jax.nn.log_softmax(logits, axis=-1)
    return -jnp.take_along_axis(logp, labels[..., None], axis=-1)[..., 0]


def loss(p, ids, labels, m):
    h = jnp.take(p["emb"], ids, axis=0)
    h = jnp.tanh(h @ p["w"])
    logits = h @ p["out"]
    if MASK == "labels":
        m = (labels != PAD).astype(jnp.float32)
    per_tok = ce(logits, labels)
    return jnp.sum(per_tok * m) / jnp.maximum(jnp.sum(m), 1.0)


def step(p, ids, labels, m):
    return jax.value_and_grad(loss)(p, ids, labels, m)


def planproof_case():
    f32, i32 = jnp.float32, jnp.int32
    p = {"emb": jax.ShapeDtypeStruct((V, D), f32), "w": jax.ShapeDtypeStruct((D, D), f32),
         "out": jax.ShapeDtypeStruct((D, V), f32)}
    ps = {"emb": P(None, "tp"), "w": P(None, "tp"), "out": P("tp", None)}
    return dict(step=step, args=(p, jax.ShapeDtypeStruct((B, S), i32), jax.ShapeDtypeStruct((B, S), i32),
                                 jax.ShapeDtypeStruct((B, S), f32)),
                mesh_shape=(2, 4), mesh_axes=("dp", "tp"),
                in_shardings=(ps, P("dp", None), P("dp", None), P("dp", None)), out_shardings=(P(), ps))
