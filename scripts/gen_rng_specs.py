#!/usr/bin/env python3
"""Generates verify-specs/rng/: dropout under SP, TP and microbatched DP, in the two RNG
checking modes (exact and independent), with seeded random-stream bugs.

Every spec's reference draws its masks from an explicit key (`seed`) and counter
(`offset`), and returns the counter advanced past its draws (`ref.updates`), the way
counter-based generators (Philox) are used on GPUs.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import specgen  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "verify-specs", "rng")


def write(name, comment, expect, body):
    specgen.write(OUT, "gen_rng_specs.py", name, comment, expect, body)


# ---------------------------------------------------------------------------------------
# SP: the sequence (rows) split over tp; one dropout on the sharded activation.
SP_REF = """  func.func @reference(%x: tensor<4x8xf32> {ref.name = "x"},
                       %seed: index {ref.name = "seed"},
                       %offset: index {ref.name = "offset"})
      -> (tensor<4x8xf32> {ref.name = "y"},
          index {ref.name = "offset_next", ref.updates = "offset"})
      attributes {ref.reference} {
    %m = ref.dropout_mask %seed, %offset p 0.1 : tensor<4x8xf32>
    %y = ref.mul %x, %m : tensor<4x8xf32>
    %n = arith.constant 32 : index
    %offset_next = arith.addi %offset, %n : index
    return %y, %offset_next : tensor<4x8xf32>, index
  }

  dist.mesh @mesh axes = ["tp"] shape = [2]

"""

SP_PLAN = """  func.func @plan(%x: tensor<2x8xf32> {dist.value = "x", dist.layout = #dist.layout<[tp, _]>},
                  %seed: index {dist.value = "seed"},
                  %offset: index {dist.value = "offset"})
      -> (tensor<2x8xf32> {dist.value = "y", dist.layout = #dist.layout<[tp, _]>},
          index {dist.value = "offset_next"})
      attributes {dist.mesh = @mesh@MODE@} {
    %rank = dist.axis_index "tp" : index
    %block = arith.constant 16 : index
    %skip = arith.muli %rank, %block : index
@COUNTER@
    %m = ref.dropout_mask @KEY@, %ctr p 0.1@DRAWS@ : tensor<2x8xf32>
    %y = ref.mul %x, %m : tensor<2x8xf32>
    %n = arith.constant 32 : index
    %offset_next = arith.addi %offset, %n : index
    return %y, %offset_next : tensor<2x8xf32>, index
  }
"""

SP_COUNTER_GLOBAL = "    %ctr = arith.addi %offset, %skip : index"


def sp(mode, key="%seed", counter=SP_COUNTER_GLOBAL, draws=True):
    text = SP_PLAN.replace("@MODE@", ', dist.rng = "independent"' if mode == "independent" else "")
    text = text.replace("@KEY@", key).replace("@COUNTER@", counter)
    d = ' {dist.draws = "m", dist.layout = #dist.layout<[tp, _]>}' if draws and mode == "independent" else ""
    return SP_REF + text.replace("@DRAWS@", d)


# ---------------------------------------------------------------------------------------
# TP (Megatron-style MLP): a dropout inside the tensor-parallel region (on the column-
# sharded activation) and one after the row-parallel all_reduce (on the replicated
# output). Independent mode, as Megatron's model-parallel RNG tracker gives: the TP
# region draws from a per-rank key, the replicated region from the shared default key.
TP_REF = """  func.func @reference(%x: tensor<4x4xf32> {ref.name = "x"},
                       %w1: tensor<4x8xf32> {ref.name = "w1"},
                       %w2: tensor<8x4xf32> {ref.name = "w2"},
                       %seed: index {ref.name = "seed"},
                       %offset: index {ref.name = "offset"})
      -> (tensor<4x4xf32> {ref.name = "out"},
          index {ref.name = "offset_next", ref.updates = "offset"})
      attributes {ref.reference} {
    %h = ref.matmul %x, %w1 contract(1, 0) : tensor<4x4xf32>, tensor<4x8xf32>
    %a = ref.gelu %h : tensor<4x8xf32>
    %m1 = ref.dropout_mask %seed, %offset p 0.1 : tensor<4x8xf32>
    %ad = ref.mul %a, %m1 : tensor<4x8xf32>
    %y = ref.matmul %ad, %w2 contract(1, 0) : tensor<4x8xf32>, tensor<8x4xf32>
    %c32 = arith.constant 32 : index
    %offset2 = arith.addi %offset, %c32 : index
    %m2 = ref.dropout_mask %seed, %offset2 p 0.1 : tensor<4x4xf32>
    %out = ref.mul %y, %m2 : tensor<4x4xf32>
    %c48 = arith.constant 48 : index
    %offset_next = arith.addi %offset, %c48 : index
    return %out, %offset_next : tensor<4x4xf32>, index
  }

  dist.mesh @mesh axes = ["tp"] shape = [2]

"""

TP_PLAN = """  func.func @plan(%x: tensor<4x4xf32> {dist.value = "x", dist.layout = #dist.layout<[_, _]>},
                  %w1: tensor<4x4xf32> {dist.value = "w1", dist.layout = #dist.layout<[_, tp]>},
                  %w2: tensor<4x4xf32> {dist.value = "w2", dist.layout = #dist.layout<[tp, _]>},
                  %seed: index {dist.value = "seed"},
                  %offset: index {dist.value = "offset"})
      -> (tensor<4x4xf32> {dist.value = "out", dist.layout = #dist.layout<[_, _]>},
          index {dist.value = "offset_next"})
      attributes {dist.mesh = @mesh, dist.rng = "independent"} {
    %rank = dist.axis_index "tp" : index
    %h = ref.matmul %x, %w1 contract(1, 0) : tensor<4x4xf32>, tensor<4x4xf32>
    %a = ref.gelu %h : tensor<4x4xf32>
    // The model-parallel stream: seed + 2718 + tp rank (Megatron's tracker).
    %fork = arith.constant 2718 : index
    %mp_base = arith.addi %seed, %fork : index
@KEY1@
@CTR1@
    %m1 = ref.dropout_mask %key1, %ctr1 p 0.1 {dist.draws = "m1", dist.layout = #dist.layout<[_, tp]>} : tensor<4x4xf32>
    %ad = ref.mul %a, %m1 : tensor<4x4xf32>
    %y_part = ref.matmul %ad, %w2 contract(1, 0) : tensor<4x4xf32>, tensor<4x4xf32>
    %y = dist.all_reduce %y_part over ["tp"] "sum" : tensor<4x4xf32> -> tensor<4x4xf32>
    // The replicated region: the default stream, the same on every tp rank.
    %c32 = arith.constant 32 : index
    %ctr2 = arith.addi %offset, %c32 : index
@KEY2@
    %m2 = ref.dropout_mask %key2, %ctr2 p 0.1 {dist.draws = "m2", dist.layout = #dist.layout<[_, _]>} : tensor<4x4xf32>
    %out = ref.mul %y, %m2 : tensor<4x4xf32>
    %c48 = arith.constant 48 : index
    %offset_next = arith.addi %offset, %c48 : index
    return %out, %offset_next : tensor<4x4xf32>, index
  }
"""

TP_KEY1 = "    %key1 = arith.addi %mp_base, %rank : index"
TP_CTR1 = "    %zero = arith.constant 0 : index\n    %ctr1 = arith.addi %offset, %zero : index"
TP_KEY2 = "    %zero2 = arith.constant 0 : index\n    %key2 = arith.addi %seed, %zero2 : index"


def tp(key1=TP_KEY1, ctr1=TP_CTR1, key2=TP_KEY2):
    return TP_REF + TP_PLAN.replace("@KEY1@", key1).replace("@CTR1@", ctr1).replace("@KEY2@", key2)


# ---------------------------------------------------------------------------------------
# DP with gradient-accumulation microbatches: each data rank runs its 4 tokens as two
# microbatches of 2, drawing each microbatch's mask from its own counter range.
MB_REF = """  func.func @reference(%x: tensor<8x4xf32> {ref.name = "x"},
                       %seed: index {ref.name = "seed"},
                       %offset: index {ref.name = "offset"})
      -> (tensor<8x4xf32> {ref.name = "y"},
          index {ref.name = "offset_next", ref.updates = "offset"})
      attributes {ref.reference} {
    %m = ref.dropout_mask %seed, %offset p 0.1 : tensor<8x4xf32>
    %y = ref.mul %x, %m : tensor<8x4xf32>
    %n = arith.constant 32 : index
    %offset_next = arith.addi %offset, %n : index
    return %y, %offset_next : tensor<8x4xf32>, index
  }

  dist.mesh @mesh axes = ["dp"] shape = [2]

"""

MB_PLAN = """  func.func @plan(%x: tensor<4x4xf32> {dist.value = "x", dist.layout = #dist.layout<[dp, _]>},
                  %seed: index {dist.value = "seed"},
                  %offset: index {dist.value = "offset"})
      -> (tensor<4x4xf32> {dist.value = "y", dist.layout = #dist.layout<[dp, _]>},
          index {dist.value = "offset_next"})
      attributes {dist.mesh = @mesh, dist.rng = "independent"} {
    %rank = dist.axis_index "dp" : index
    %per_rank = arith.constant 16 : index
    %rank_base = arith.muli %rank, %per_rank : index
    %base = arith.addi %offset, %rank_base : index
    // Microbatch k draws from base + k * stride.
    %stride = arith.constant @STRIDE@ : index
    %x_0 = ref.slice %x offsets [0, 0] sizes [2, 4] : tensor<4x4xf32>
    %m_0 = ref.dropout_mask %seed, %base p 0.1 {dist.draws = "m", dist.layout = #dist.layout<[dp, _]>, dist.block_offset = array<i64: 0, 0>} : tensor<2x4xf32>
    %y_0 = ref.mul %x_0, %m_0 : tensor<2x4xf32>
    %ctr_1 = arith.addi %base, %stride : index
    %x_1 = ref.slice %x offsets [2, 0] sizes [2, 4] : tensor<4x4xf32>
    %m_1 = ref.dropout_mask %seed, %ctr_1 p 0.1 {dist.draws = "m", dist.layout = #dist.layout<[dp, _]>, dist.block_offset = array<i64: 2, 0>} : tensor<2x4xf32>
    %y_1 = ref.mul %x_1, %m_1 : tensor<2x4xf32>
    %y = ref.concat %y_0, %y_1 dim 0 : tensor<2x4xf32>, tensor<2x4xf32>
    %n = arith.constant 32 : index
    %offset_next = arith.addi %offset, %n : index
    return %y, %offset_next : tensor<4x4xf32>, index
  }
"""


def main():
    specgen.reset(OUT)
    ok = {"verdict": "verified"}

    def bug(at):
        return {"verdict": "violated", "kind": "rng", "at": at}

    write("sp2_dropout_exact.mlir", """
Dropout on a sequence-sharded activation (SP over tp=2), RNG mode exact: rank t holds
rows [2t, 2t+2), so it draws from counter offset + 16 t and every element draws the
same (key, counter) pair as in the single-device step: the masks are the reference's.""",
          ok, sp("exact"))
    write("sp2_dropout_exact_same_stream.mlir", """
BUG: every tp rank draws from counter `offset` (the rank's counter skip is missing), so
the two sequence shards get identical masks, and rank 1's are not the reference's.
Exact mode flags the mask op.""", bug("%m"), sp("exact", counter="    %zero = arith.constant 0 : index\n    %ctr = arith.addi %offset, %zero : index"))
    write("sp2_dropout_exact_counter_restart.mlir", """
BUG: the counter restarts at zero every step (the plan ignores the `offset` input), so
every step draws the same masks.""", bug("%m"),
          sp("exact", counter="    %zero = arith.constant 0 : index\n    %ctr = arith.addi %zero, %skip : index"))
    write("sp2_dropout_independent_same_seed.mlir", """
BUG (independent mode): the same seed and counter on every tp rank for a sequence-
sharded dropout: different tokens on the two ranks get identical masks. Z3 finds two
ranks drawing one (key, counter) pair for different mask elements.""", bug("%m"),
          sp("independent", counter="    %zero = arith.constant 0 : index\n    %ctr = arith.addi %offset, %zero : index"))
    write("sp2_dropout_independent.mlir", """
The SP dropout in RNG mode independent, with a per-rank key (seed + tp rank) and a
shared counter: no two elements share a pair, so the masks are independent.""", ok,
          sp("independent", key="%key", counter="    %key = arith.addi %seed, %rank : index\n    %zero = arith.constant 0 : index\n    %ctr = arith.addi %offset, %zero : index"))

    write("tp2_dropout_independent.mlir", """
A Megatron-style TP=2 MLP with a dropout inside the tensor-parallel region and one on
the replicated output, RNG mode independent: the TP-region mask draws from the model-
parallel stream (key seed + 2718 + tp rank), the replicated one from the default stream
(key seed) on every rank; the counter advances by 48 per step. Z3 proves for all ranks:
distinct elements draw distinct pairs, replicas the same pair, and the next step draws
none of this step's pairs.""", ok, tp())
    write("tp2_dropout_independent_same_seed.mlir", """
BUG: the tensor-parallel region draws with the same key on every tp rank (the rank is
not folded into the model-parallel seed): the two column shards get identical masks.""",
          bug("%m1"), tp(key1="    %key1 = arith.addi %mp_base, %fork : index"))
    write("tp2_dropout_independent_replica_seed.mlir", """
BUG: the replicated region after the all_reduce draws from a per-rank key (seed + tp
rank): the replicas of the output get different masks and diverge.""",
          bug("%m2"), tp(key2="    %key2 = arith.addi %seed, %rank : index"))
    write("tp2_dropout_independent_counter_restart.mlir", """
BUG: the model-parallel stream's counter restarts at zero every step (it ignores the
`offset` input), so the next step redraws this step's masks in the TP region.""",
          bug("%m1"), tp(ctr1="    %zero = arith.constant 0 : index\n    %ctr1 = arith.addi %zero, %zero : index"))

    write("dp2_microbatch_dropout.mlir", """
Data parallel (dp=2) with two gradient-accumulation microbatches per rank, RNG mode
independent: rank d draws from offset + 16 d, microbatch k from there + 8 k (a stride of
one microbatch's 8 elements). Each draw says which rows of the reference mask it stands
for (dist.block_offset).""", ok, MB_REF + MB_PLAN.replace("@STRIDE@", "8"))
    write("dp2_microbatch_dropout_overlap.mlir", """
BUG: the microbatch counter stride is 4 but a microbatch draws 8 elements: the second
microbatch's first half redraws the first microbatch's second half.""", bug("%m_1"),
          MB_REF + MB_PLAN.replace("@STRIDE@", "4"))


if __name__ == "__main__":
    sys.exit(main())
