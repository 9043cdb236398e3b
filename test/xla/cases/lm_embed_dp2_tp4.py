"""A small language-model step with integer token ids and labels, at dp x tp = 2 x 4:
an embedding lookup (jnp.take) whose table is split over tp on the model dim, a tanh-GELU
layer, an output head, and the cross-entropy of integer labels (log_softmax and
take_along_axis), with gradients (the lookup's is a scatter-add by id). VOCAB_SHARDED=1
splits the table over tp by vocabulary rows instead: XLA then shifts each rank's ids by
its shard's first row, clamps, masks and all-reduces the lookup (more at the end)."""
import os

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P

B, S, D, V = 2, 4, 4, 8
def loss(p, ids, labels):
    h = jnp.take(p["emb"], ids, axis=0)
    h = jax.nn.gelu(h @ p["w"], approximate=True)
    logits = h @ p["out"]
    logp = jax.nn.log_softmax(logits)
    return -jnp.mean(jnp.take_along_axis(logp, labels[..., None], axis=-1))
def step(p, ids, labels):
    return jax.value_and_grad(loss)(p, ids, labels)
def planproof_case():
    f32 = jnp.float32
    p = {"emb": jax.ShapeDtypeStruct((V, D), f32), "w": jax.ShapeDtypeStruct((D, D), f32), "out": jax.ShapeDtypeStruct((D, V), f32)}
    ps = {"emb": P("tp", None) if os.environ.get("VOCAB_SHARDED") else P(None, "tp"),
          "w": P(None, "tp"), "out": P(None, "tp") if os.environ.get("HEAD_SHARDED") else P("tp", None)}
    i32 = jnp.int32
    return dict(step=step, args=(p, jax.ShapeDtypeStruct((B, S), i32), jax.ShapeDtypeStruct((B, S), i32)),
                mesh_shape=MESH, mesh_axes=("dp", "tp"),
                in_shardings=(ps, P("dp", None), P("dp", None)), out_shardings=(P(), ps))


# (At the end, to keep the lines of the checked-in dumps.) VOCAB_SHARDED=1 is
# lm_embed_vocab_dp2_tp4. HEAD_SHARDED=1 splits the output head by vocabulary columns
# too: the cross-entropy's label pick is then a vocabulary-parallel one
# (lm_vocab_dp2_tp4, with both). VOCAB_FULL=1 (with
# VOCAB_SHARDED=1 HEAD_SHARDED=1): Llama3-8B's hidden size 4096 and vocabulary 128256,
# 8 sequences of 2048 tokens, on dp x tp = 8 x 8 (`--devices 64`): lm_vocab_full_dp8_tp8.
MESH = (2, 4)
if os.environ.get("VOCAB_FULL"):
    MESH = (8, 8)
    B, S, D, V = 8, 2048, 4096, 128256
