#!/usr/bin/env python3
"""Generates verify-specs/cp/: causal attention under context parallelism (CP) with the
load-balanced ("zigzag") chunk order, combined with data parallelism, and the seeded
bugs of docs/context-parallelism.md.

Reference (per sequence b of B): one-hot tokens `ids [B, S, V]` and a 0/1 padding mask;
labels are the next token (`ids` shifted left by one along the sequence, the last
position ignored) -- shifted on the whole sequence. One causal attention block with a
residual, an LM head, the token-mean cross-entropy over all non-ignored positions of
the global batch, and the gradients of every weight.

Plan on dp x cp: data rank d holds sequence d; each context rank shifts the labels of the
whole sequence, then keeps its two chunks (p and 2*cp-1-p of 2*cp). K and V are
all-gathered in global order (`zigzag`), each local query chunk is masked causally from
its chunk's *global* start, the loss is divided by the token count all-reduced over
dp x cp, and the K/V gradients are reduce-scattered back to their chunks before the
weight gradients are all-reduced over dp x cp.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import specgen  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "verify-specs", "cp")


def t(*shape):
    return "tensor<" + "".join(f"{s}x" for s in shape) + "f32>"


class Cfg:
    def __init__(self, dp=2, cp=2, S=8, V=3, H=4, D=2):
        assert S % (2 * cp) == 0
        self.dp, self.cp, self.S, self.V, self.H, self.D = dp, cp, S, V, H, D
        self.B = dp                 # one sequence per data rank
        self.C = S // (2 * cp)      # chunk length
        self.L = S // cp            # tokens per rank (two chunks)


WEIGHTS = ["w_emb", "w_q", "w_k", "w_v", "w_o", "w_lm"]


def wshape(c, w):
    return {"w_emb": (c.V, c.H), "w_q": (c.H, c.D), "w_k": (c.H, c.D), "w_v": (c.H, c.D),
            "w_o": (c.D, c.H), "w_lm": (c.H, c.V)}[w]


def reference(c):
    B, S, V, H, D = c.B, c.S, c.V, c.H, c.D
    T = B * S
    args = [f'%ids: {t(B, S, V)} {{ref.name = "ids"}}',
            f'%mask: {t(B, S)} {{ref.name = "mask", ref.bound = 2 : i64}}']
    args += [f'%{w}: {t(*wshape(c, w))} {{ref.name = "{w}"}}' for w in WEIGHTS]
    outs = [f'{t()} {{ref.name = "loss"}}'] + [f'{t(*wshape(c, w))} {{ref.name = "d_{w}"}}'
                                                for w in WEIGHTS]
    b = f"""  func.func @reference({(',' + chr(10) + '                       ').join(args)})
      -> ({', '.join(outs)})
      attributes {{ref.reference}} {{
    // Next-token labels: the sequence shifted left by one; the last position has none.
    %next = ref.slice %ids offsets [0, 1, 0] sizes [{B}, {S - 1}, {V}] : {t(B, S, V)}
    %no_label = ref.constant 0.0 : {t(B, 1, V)}
    %labels = ref.concat %next, %no_label dim 1 : {t(B, S - 1, V)}, {t(B, 1, V)}
    %next_mask = ref.slice %mask offsets [0, 1] sizes [{B}, {S - 1}] : {t(B, S)}
    %no_mask = ref.constant 0.0 : {t(B, 1)}
    %lmask = ref.concat %next_mask, %no_mask dim 1 : {t(B, S - 1)}, {t(B, 1)}
    %ids2 = ref.reshape %ids : {t(B, S, V)} -> {t(T, V)}
    %h = ref.matmul %ids2, %w_emb contract(1, 0) : {t(T, V)}, {t(V, H)}
    %q2 = ref.matmul %h, %w_q contract(1, 0) : {t(T, H)}, {t(H, D)}
    %k2 = ref.matmul %h, %w_k contract(1, 0) : {t(T, H)}, {t(H, D)}
    %v2 = ref.matmul %h, %w_v contract(1, 0) : {t(T, H)}, {t(H, D)}
    %q = ref.reshape %q2 : {t(T, D)} -> {t(B, S, D)}
    %k = ref.reshape %k2 : {t(T, D)} -> {t(B, S, D)}
    %v = ref.reshape %v2 : {t(T, D)} -> {t(B, S, D)}
    %scores = ref.batch_matmul %q, %k contract(2, 2) : {t(B, S, D)}, {t(B, S, D)}
    %scaled = ref.scale %scores by 0.5 : {t(B, S, S)}
    %probs = ref.causal_softmax %scaled : {t(B, S, S)}
    %ctx = ref.batch_matmul %probs, %v contract(2, 1) : {t(B, S, S)}, {t(B, S, D)}
    %ctx2 = ref.reshape %ctx : {t(B, S, D)} -> {t(T, D)}
    %attn = ref.matmul %ctx2, %w_o contract(1, 0) : {t(T, D)}, {t(D, H)}
    %res = ref.add %h, %attn : {t(T, H)}
    %logits = ref.matmul %res, %w_lm contract(1, 0) : {t(T, H)}, {t(H, V)}
    %labels2 = ref.reshape %labels : {t(B, S, V)} -> {t(T, V)}
    %lmask2 = ref.reshape %lmask : {t(B, S)} -> {t(T)}
    %loss_sum = ref.cross_entropy_sum %logits, %labels2, %lmask2 : {t(T, V)}, {t(T)}
    %tokens = ref.reduce_sum %lmask2 dims [0] {{ref.role = "loss-normalization"}} : {t(T)}
    %loss = ref.div %loss_sum, %tokens {{ref.role = "loss-normalization"}} : {t()}
    {', '.join('%d_' + w for w in WEIGHTS)} = ref.grad %loss wrt {', '.join('%' + w for w in WEIGHTS)}
        : {t()}, {', '.join(t(*wshape(c, w)) for w in WEIGHTS)} -> {', '.join(t(*wshape(c, w)) for w in WEIGHTS)}
    return %loss, {', '.join('%d_' + w for w in WEIGHTS)} : {t()}, {', '.join(t(*wshape(c, w)) for w in WEIGHTS)}
  }}

"""
    return b


def plan(c, bug=None):
    dp, cp, S, V, H, D, C, L = c.dp, c.cp, c.S, c.V, c.H, c.D, c.C, c.L
    zz = "" if bug == "kv_gather_rank_order" else " zigzag"
    args = [f'%ids: {t(1, S, V)} {{dist.value = "ids", dist.layout = #dist.layout<[dp, _, _]>}}',
            f'%mask: {t(1, S)} {{dist.value = "mask", dist.layout = #dist.layout<[dp, _]>}}']
    args += [f'%{w}: {t(*wshape(c, w))} {{dist.value = "{w}", dist.layout = #dist.layout<[_, _]>}}'
             for w in WEIGHTS]
    outs = [f'{t()} {{dist.value = "loss", dist.layout = #dist.layout<[]>}}']
    outs += [f'{t(*wshape(c, w))} {{dist.value = "d_{w}", dist.layout = #dist.layout<[_, _]>}}'
             for w in WEIGHTS]
    L_ = []
    e = L_.append
    if bug == "labels_shifted_after_split":
        e("// Each rank keeps its two chunks of the sequence, then shifts its own tokens: the")
        e("// last position of every chunk takes the first token of the *next local* chunk.")
        e(f'%tok = dist.shard_slice %ids over ["cp"] dim 1 zigzag : {t(1, S, V)} -> {t(1, L, V)}')
        e(f'%mask_l = dist.shard_slice %mask over ["cp"] dim 1 zigzag : {t(1, S)} -> {t(1, L)}')
        e(f"%next = ref.slice %tok offsets [0, 1, 0] sizes [1, {L - 1}, {V}] : {t(1, L, V)}")
        e(f"%no_label = ref.constant 0.0 : {t(1, 1, V)}")
        e(f"%lab = ref.concat %next, %no_label dim 1 : {t(1, L - 1, V)}, {t(1, 1, V)}")
        e(f"%next_mask = ref.slice %mask_l offsets [0, 1] sizes [1, {L - 1}] : {t(1, L)}")
        e(f"%no_mask = ref.constant 0.0 : {t(1, 1)}")
        e(f"%lm = ref.concat %next_mask, %no_mask dim 1 : {t(1, L - 1)}, {t(1, 1)}")
    else:
        e("// Labels are shifted on the whole sequence, before the split.")
        e(f"%next = ref.slice %ids offsets [0, 1, 0] sizes [1, {S - 1}, {V}] : {t(1, S, V)}")
        e(f"%no_label = ref.constant 0.0 : {t(1, 1, V)}")
        e(f"%labels = ref.concat %next, %no_label dim 1 : {t(1, S - 1, V)}, {t(1, 1, V)}")
        e(f"%next_mask = ref.slice %mask offsets [0, 1] sizes [1, {S - 1}] : {t(1, S)}")
        e(f"%no_mask = ref.constant 0.0 : {t(1, 1)}")
        e(f"%lmask = ref.concat %next_mask, %no_mask dim 1 : {t(1, S - 1)}, {t(1, 1)}")
        e(f"// This rank's chunks p and {2 * cp - 1}-p of {2 * cp} (load-balanced causal work).")
        e(f'%tok = dist.shard_slice %ids over ["cp"] dim 1 zigzag : {t(1, S, V)} -> {t(1, L, V)}')
        e(f'%lab = dist.shard_slice %labels over ["cp"] dim 1 zigzag : {t(1, S, V)} -> {t(1, L, V)}')
        e(f'%lm = dist.shard_slice %lmask over ["cp"] dim 1 zigzag : {t(1, S)} -> {t(1, L)}')
    e(f"%lm2 = ref.reshape %lm : {t(1, L)} -> {t(L)}")
    e(f"%lab2 = ref.reshape %lab : {t(1, L, V)} -> {t(L, V)}")
    count_axes = '["dp"]' if bug == "loss_not_scaled_by_cp" else '["dp", "cp"]'
    e("// The global count of labelled tokens.")
    e(f"%tokens_local = ref.reduce_sum %lm2 dims [0] : {t(L)}")
    e(f'%tokens = dist.all_reduce %tokens_local over {count_axes} "sum" : {t()} -> {t()}')
    e(f"%tok2 = ref.reshape %tok : {t(1, L, V)} -> {t(L, V)}")
    e(f"%h = ref.matmul %tok2, %w_emb contract(1, 0) : {t(L, V)}, {t(V, H)}")
    for x in "qkv":
        e(f"%{x}2 = ref.matmul %h, %w_{x} contract(1, 0) : {t(L, H)}, {t(H, D)}")
        e(f"%{x} = ref.reshape %{x}2 : {t(L, D)} -> {t(1, L, D)}")
    e("// K and V of the whole sequence, in global order; detached: their gradients are")
    e("// reduce-scattered back to the ranks that computed them.")
    for x in "kv":
        e(f'%{x}_all = dist.all_gather %{x} over ["cp"] dim 1{zz} : {t(1, L, D)} -> {t(1, S, D)}')
        e(f"%{x}_full = ref.detach %{x}_all : {t(1, S, D)}")
    e('%p = dist.axis_index "cp" : index')
    e(f"%chunk = arith.constant {C} : index")
    e(f"%last = arith.constant {2 * cp - 1} : index")
    if bug == "causal_local_positions":
        e("// Causal offsets from local positions: where each chunk starts in the local block.")
        e("%start0 = arith.constant 0 : index")
        e(f"%start1 = arith.constant {C} : index")
    else:
        e("// Causal offsets: the global position of each chunk's first query.")
        e("%start0 = arith.muli %p, %chunk : index")
        e("%mirror = arith.subi %last, %p : index")
        e("%start1 = arith.muli %mirror, %chunk : index")
    for j in range(2):
        e(f"%q_c{j} = ref.slice %q offsets [0, {j * C}, 0] sizes [1, {C}, {D}] : {t(1, L, D)}")
        e(f"%s_c{j} = ref.batch_matmul %q_c{j}, %k_full contract(2, 2) : {t(1, C, D)}, {t(1, S, D)}")
        e(f"%ss_c{j} = ref.scale %s_c{j} by 0.5 : {t(1, C, S)}")
        e(f"%p_c{j} = ref.causal_softmax %ss_c{j} offset %start{j} : {t(1, C, S)}")
        e(f"%o_c{j} = ref.batch_matmul %p_c{j}, %v_full contract(2, 1) : {t(1, C, S)}, {t(1, S, D)}")
    e(f"%ctx = ref.concat %o_c0, %o_c1 dim 1 : {t(1, C, D)}, {t(1, C, D)}")
    e(f"%ctx2 = ref.reshape %ctx : {t(1, L, D)} -> {t(L, D)}")
    e(f"%attn = ref.matmul %ctx2, %w_o contract(1, 0) : {t(L, D)}, {t(D, H)}")
    e(f"%res = ref.add %h, %attn : {t(L, H)}")
    e(f"%logits = ref.matmul %res, %w_lm contract(1, 0) : {t(L, H)}, {t(H, V)}")
    e(f"%ce = ref.cross_entropy_sum %logits, %lab2, %lm2 : {t(L, V)}, {t(L)}")
    if bug == "loss_scaled_by_cp_twice":
        e("// Averaged over the context ranks, although the count already spans them.")
        e(f"%part_g = ref.div %ce, %tokens : {t()}")
        e(f"%part = ref.scale %part_g by {1 / cp} : {t()}")
    else:
        e(f"%part = ref.div %ce, %tokens : {t()}")
    e("// The reported loss: the summed losses over the global count (as Megatron reports it).")
    e(f'%ce_all = dist.all_reduce %ce over ["dp", "cp"] "sum" : {t()} -> {t()}')
    e(f"%loss = ref.div %ce_all, %tokens : {t()}")
    e("// Backward: this rank's queries' gradients, then K/V gradients back to their chunks.")
    ws = ["w_emb", "w_q", "w_o", "w_lm"]
    e(f"%g_emb, %g_q, %g_o, %g_lm, %g_k_all, %g_v_all = ref.grad %part wrt "
      f"%w_emb, %w_q, %w_o, %w_lm, %k_full, %v_full")
    e(f"    : {t()}, {t(V, H)}, {t(H, D)}, {t(D, H)}, {t(H, V)}, {t(1, S, D)}, {t(1, S, D)} -> "
      f"{t(V, H)}, {t(H, D)}, {t(D, H)}, {t(H, V)}, {t(1, S, D)}, {t(1, S, D)}")
    for x in "kv":
        if bug == "kv_grad_not_reduced":
            e(f"// Keeps its own chunks of the K/V gradient: the other ranks' queries' share is lost.")
            e(f'%g_{x}_mine = dist.shard_slice %g_{x}_all over ["cp"] dim 1 zigzag : {t(1, S, D)} -> {t(1, L, D)}')
        else:
            e(f'%g_{x}_mine = dist.reduce_scatter %g_{x}_all over ["cp"] dim 1{zz} "sum" : {t(1, S, D)} -> {t(1, L, D)}')
        e(f"%g_{x}_d = ref.detach %g_{x}_mine : {t(1, L, D)}")
        e(f"%{x}g = ref.mul %{x}, %g_{x}_d : {t(1, L, D)}")
        e(f"%{x}g_sum = ref.reduce_sum %{x}g dims [0, 1, 2] : {t(1, L, D)}")
    e(f"%kv_sum = ref.add %kg_sum, %vg_sum : {t()}")
    e(f"%g_emb2, %g_k, %g_v = ref.grad %kv_sum wrt %w_emb, %w_k, %w_v : {t()}, {t(V, H)}, "
      f"{t(H, D)}, {t(H, D)} -> {t(V, H)}, {t(H, D)}, {t(H, D)}")
    e(f"%g_emb_all = ref.add %g_emb, %g_emb2 : {t(V, H)}")
    grads = {"w_emb": "g_emb_all", "w_q": "g_q", "w_k": "g_k", "w_v": "g_v", "w_o": "g_o", "w_lm": "g_lm"}
    e("// Weight gradients: every token of the global batch contributes.")
    for w in WEIGHTS:
        e(f'%d_{w} = dist.all_reduce %{grads[w]} over ["dp", "cp"] "sum" : {t(*wshape(c, w))} -> {t(*wshape(c, w))}')
    body = "\n".join("    " + x for x in L_)
    rets = ", ".join(["%loss"] + [f"%d_{w}" for w in WEIGHTS])
    rtys = ", ".join([t()] + [t(*wshape(c, w)) for w in WEIGHTS])
    return (f'  dist.mesh @mesh axes = ["dp", "cp"] shape = [{dp}, {cp}]\n\n'
            f"  func.func @plan({(',' + chr(10) + '                  ').join(args)})\n"
            f"      -> ({(',' + chr(10) + '          ').join(outs)})\n"
            f"      attributes {{dist.mesh = @mesh}} {{\n{body}\n    return {rets} : {rtys}\n  }}\n")


def write(name, comment, expect, body):
    specgen.write(OUT, "gen_cp_specs.py", name, comment, expect, body)


BUGS = {
    "labels_shifted_after_split": ("""
BUG: labels shifted after the split. Each rank shifts its own tokens, so the last
position of every chunk is paired with the first token of the next *local* chunk (or
none), not with the next token of the sequence.""", "sharding", "%next"),
    "causal_local_positions": ("""
BUG: the causal mask is computed from local positions: each query chunk is masked as if
it started at its offset in the rank's block, not at its position in the sequence.""",
                               "masking", "%p_c0"),
    "kv_gather_rank_order": ("""
BUG: K and V are all-gathered in rank order, not in the zigzag order they are split in,
so the keys are permuted against the causal mask's global positions.""", "sharding", "%k_all"),
    "loss_not_scaled_by_cp": ("""
BUG: the token count is all-reduced over the data axis only: every context rank divides
its loss by its data-parallel slice's count, so the loss is not normalized over CP.""",
                              "loss-normalization", "%loss"),
    "loss_scaled_by_cp_twice": ("""
BUG: each rank's loss is averaged over the context ranks (divided by cp) although the
token count it is divided by already spans them: the loss gradients are 1/cp too small.""",
                                "loss-normalization", "%part"),
    "kv_grad_not_reduced": ("""
BUG: each rank keeps its own chunks of the K/V gradients instead of reduce-scattering
them: the contributions of the later chunks' queries on other ranks are lost.""",
                            "reduction", "%g_k_mine"),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--one", nargs=4, metavar=("OUT", "DP", "CP", "S"),
                    help="write one correct configuration to OUT")
    a = ap.parse_args()
    if a.one:
        c = Cfg(dp=int(a.one[1]), cp=int(a.one[2]), S=int(a.one[3]))
        with open(a.one[0], "w") as fh:
            fh.write('module attributes {planproof.expect = {verdict = "verified"}} {\n' +
                     reference(c) + plan(c) + "}\n")
        return 0
    specgen.reset(OUT)
    c = Cfg()
    write("dp2_cp2_zigzag_attention.mlir", f"""
Causal attention with an LM head and token-mean cross-entropy under DP{c.dp} x CP{c.cp}, the
sequence of {c.S} tokens in {2 * c.cp} chunks, zigzag order (rank p holds chunks p and
{2 * c.cp - 1}-p). Labels shifted before the split, K/V all-gathered in global order, causal
offsets from global positions, loss over the global token count, K/V gradients
reduce-scattered, weight gradients all-reduced over dp x cp.""", {"verdict": "verified"},
          reference(c) + plan(c))
    for bug, (comment, kind, at) in BUGS.items():
        write(f"dp2_cp2_{bug}.mlir", comment, {"verdict": "violated", "kind": kind, "at": at},
              reference(c) + plan(c, bug))
    c4 = Cfg(dp=1, cp=4, S=16)
    write("cp4_zigzag_attention.mlir", f"""
The same block under CP4 alone: a sequence of {c4.S} tokens in {2 * c4.cp} chunks of {c4.C}.""",
          {"verdict": "verified"}, reference(c4) + plan(c4))


if __name__ == "__main__":
    sys.exit(main())
