"""A language-model step whose vocabulary is split over tp by hand in shard_map, the way
Megatron writes it: each rank holds a block of the embedding's rows and of the output
head's columns; the lookup shifts the ids by the rank's first row, looks up the ids of
its block (the others at row 0) and zeroes the others before a psum over tp; the
cross-entropy takes the max by pmax, the sum of exponentials by psum, and the label's
logit from the rank that holds it (masked like the lookup, then psum). The batch is
split over dp and the loss averaged by pmean. The reference is the same step without
shard_map (jnp.take, log_softmax, take_along_axis).

BUG selects a seeded bug: "offset" (every rank shifts by the first block's row),
"localmax" (each rank's own max, not pmax: the ranks' exponentials summed on different
scales) or "nopick" (the label's logit not summed over tp). JAX's replication check is
off (check_vma=False), as in code that turns it off; it would reject the last at trace
time."""
import os

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P

BUG = os.environ.get("BUG", "")
B, S, D, V = 2, 4, 4, 8


def reference_loss(p, ids, labels):
    h = jnp.take(p["emb"], ids, axis=0)
    h = jax.nn.gelu(h @ p["w"], approximate=True)
    logp = jax.nn.log_softmax(h @ p["out"])
    return -jnp.mean(jnp.take_along_axis(logp, labels[..., None], axis=-1))


def reference_step(p, ids, labels):
    return jax.value_and_grad(reference_loss)(p, ids, labels)


def local_ids(ids, rows):
    start = 0 if BUG == "offset" else jax.lax.axis_index("tp") * rows
    shifted = ids - start
    outside = (shifted < 0) | (shifted >= rows)
    return jnp.where(outside, 0, shifted), outside


def local_loss(emb, w, out, ids, labels):
    safe, outside = local_ids(ids, emb.shape[0])
    h = jnp.take(emb, safe, axis=0)
    h = jnp.where(outside[..., None], 0.0, h)
    h = jax.lax.psum(h, "tp")
    h = jax.nn.gelu(h @ w, approximate=True)
    logits = h @ out
    m = jax.lax.stop_gradient(jnp.max(logits, axis=-1))
    if BUG != "localmax":
        m = jax.lax.pmax(m, "tp")
    z = logits - m[..., None]
    sumexp = jax.lax.psum(jnp.sum(jnp.exp(z), axis=-1), "tp")
    lsafe, lout = local_ids(labels, out.shape[1])
    picked = jnp.take_along_axis(z, lsafe[..., None], axis=-1)[..., 0]
    picked = jnp.where(lout, 0.0, picked)
    if BUG != "nopick":
        picked = jax.lax.psum(picked, "tp")
    return jax.lax.pmean(jnp.mean(jnp.log(sumexp) - picked), "dp")


def make_step(mesh):
    parallel = jax.shard_map(local_loss, mesh=mesh,
                             in_specs=(P("tp", None), P(), P(None, "tp"), P("dp", None), P("dp", None)),
                             out_specs=P(), check_vma=False)

    def loss(p, ids, labels):
        return parallel(p["emb"], p["w"], p["out"], ids, labels)

    def step(p, ids, labels):
        return jax.value_and_grad(loss)(p, ids, labels)

    return step


def planproof_case():
    f32, i32 = jnp.float32, jnp.int32
    p = {"emb": jax.ShapeDtypeStruct((V, D), f32), "w": jax.ShapeDtypeStruct((D, D), f32),
         "out": jax.ShapeDtypeStruct((D, V), f32)}
    ps = {"emb": P("tp", None), "w": P(), "out": P(None, "tp")}
    return dict(make_step=make_step, reference_step=reference_step,
                args=(p, jax.ShapeDtypeStruct((B, S), i32), jax.ShapeDtypeStruct((B, S), i32)),
                mesh_shape=(2, 4), mesh_axes=("dp", "tp"),
                in_shardings=(ps, P("dp", None), P("dp", None)), out_shardings=(P(), ps))
