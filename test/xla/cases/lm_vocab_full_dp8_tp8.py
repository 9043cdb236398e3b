"""The language-model step of lm_embed_dp2_tp4 at a real model's sizes: Llama3-8B's
hidden size 4096 and vocabulary 128256, 8 sequences of 2048 tokens, on dp x tp = 8 x 8
(64 devices). The embedding table and the output head are split by vocabulary rows over
tp: XLA's masked lookup and vocabulary-parallel cross-entropy, on 16,384 tokens. No
integer value is written out element by element: the ids stay symbolic, decided
predicates and constants are one value per partition."""
import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P

B, S, D, V = 8, 2048, 4096, 128256
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
    p = {"emb": jax.ShapeDtypeStruct((V, D), f32), "w": jax.ShapeDtypeStruct((D, D), f32),
         "out": jax.ShapeDtypeStruct((D, V), f32)}
    ps = {"emb": P("tp", None), "w": P(None, "tp"), "out": P(None, "tp")}
    i32 = jnp.int32
    return dict(step=step, args=(p, jax.ShapeDtypeStruct((B, S), i32), jax.ShapeDtypeStruct((B, S), i32)),
                mesh_shape=(8, 8), mesh_axes=("dp", "tp"),
                in_shardings=(ps, P("dp", None), P("dp", None)), out_shardings=(P(), ps))
