"""Token-id LM whose loss takes the labels' one-hot as jax.nn.one_hot writes it
(`labels[..., None] == iota`): loss = -mean(sum(one_hot(labels, V) * log_softmax(logits))).
The output projection is split over tp along the vocabulary, so the partitioned program
compares each rank's labels with its own slice of the classes (an iota plus the shard's
first class). dp x tp = 2 x 4.
AXIS=0 puts the classes first (jax.nn.one_hot(..., axis=0)) and contracts them there."""
import os

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P

B, S, D, V = 4, 4, 8, 16
AXIS = os.environ.get("AXIS", "-1")


def loss(p, ids, labels):
    h = jnp.tanh(jnp.take(p["emb"], ids, axis=0) @ p["w"])
    logp = jax.nn.log_softmax(h @ p["out"], axis=-1)
    if AXIS == "0":
        oh = jax.nn.one_hot(labels, V, axis=0)  # [V, B, S]
        return -jnp.mean(jnp.einsum("vbs,bsv->bs", oh, logp))
    return -jnp.mean(jnp.sum(jax.nn.one_hot(labels, V) * logp, axis=-1))


def step(p, ids, labels):
    return jax.value_and_grad(loss)(p, ids, labels)


def planproof_case():
    f32, i32 = jnp.float32, jnp.int32
    p = {"emb": jax.ShapeDtypeStruct((V, D), f32), "w": jax.ShapeDtypeStruct((D, D), f32),
         "out": jax.ShapeDtypeStruct((D, V), f32)}
    ps = {"emb": P(), "w": P(None, "tp"), "out": P(None, "tp")}
    return dict(step=step, args=(p, jax.ShapeDtypeStruct((B, S), i32), jax.ShapeDtypeStruct((B, S), i32)),
                mesh_shape=(2, 4), mesh_axes=("dp", "tp"),
                in_shardings=(ps, P("dp", None), P("dp", None)), out_shardings=(P(), ps))
