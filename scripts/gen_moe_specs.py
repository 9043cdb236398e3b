#!/usr/bin/env python3
"""Generates verify-specs/moe/: a mixture-of-experts layer (router, top-k selection,
expert capacity, dispatch and combine, a shared expert, the Switch load-balancing
loss) under expert parallelism, with and without tensor parallelism inside the
experts, and the seeded bugs of docs/moe.md.

Reference: tokens x [T, H] in G groups (the data ranks' shares of the batch; the
capacity counts tokens per group, as GShard and Megatron do per rank). The router's
logits pick k experts per token (`ref.topk_mask`, symbolic: routing decisions are
functions of the logits, not one fixed assignment); gates are the softmax
probabilities renormalized over the chosen experts (Mixtral); `ref.capacity_dispatch`
assigns each chosen (token, expert) a slot or drops it; experts are a GeLU MLP each;
combining weights each slot's output with its token's gate. The loss is the mean
squared error of the output plus the load-balancing loss
alpha * E * sum_e f_e * P_e (f_e: the fraction of assignments to e, P_e: the mean
router probability of e), and the outputs are the loss and every weight's gradient.

Plans: tokens split over the data/expert ranks, experts split over `ep`. Each rank
routes its tokens, dispatches them to slots, sends every expert's slots to the rank
holding the expert (`dist.all_to_all`), runs its experts, sends the outputs back and
combines them. The load-balancing statistics are all-reduced before their product.
Each rank differentiates its share of the loss with ref.grad, which goes back through
the all_to_alls and all_reduces (the adjoint of the sum of the ranks' losses).
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import specgen  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "verify-specs", "moe")


def t(*shape):
    return "tensor<" + "".join(f"{s}x" for s in shape) + "f32>"


class Cfg:
    def __init__(self, ep=2, tp=1, T=8, H=2, E=4, k=2, F=2, C=2, Fs=2, shared=True, alpha=0.01):
        self.ep, self.tp, self.T, self.H, self.E, self.k, self.F = ep, tp, T, H, E, k, F
        self.C, self.Fs, self.shared, self.alpha = C, Fs, shared, alpha
        self.G = ep                       # token groups: one per data (= expert) rank
        self.Tl = T // ep                 # tokens per rank
        self.El = E // ep                 # experts per rank
        self.S = self.G * C               # slots per expert


def weights(c):
    w = [("w_router", (c.H, c.E)), ("w1", (c.E, c.H, c.F)), ("w2", (c.E, c.F, c.H))]
    if c.shared:
        w += [("ws1", (c.H, c.Fs)), ("ws2", (c.Fs, c.H))]
    return w


def moe_body(c, e, x, T, groups, C, tag=""):
    """The router, dispatch and gates of T tokens (shared by reference and plan)."""
    E, k, H = c.E, c.k, c.H
    S = groups * C
    role = ' {ref.role = "routing"}' if tag == "ref" else ""
    e(f"%logits = ref.matmul %{x}, %w_router contract(1, 0) : {t(T, H)}, {t(H, E)}")
    e(f"%probs = ref.softmax %logits{role} : {t(T, E)}")
    e(f"%chosen = ref.topk_mask %logits k {k}{role} : {t(T, E)}")
    e(f"%picked = ref.mul %probs, %chosen{role} : {t(T, E)}")
    e(f"%picked_sum = ref.reduce_sum %picked dims [1] : {t(T, E)}")
    e(f"%picked_sum_b = ref.broadcast %picked_sum dims [0] : {t(T)} -> {t(T, E)}")
    e(f"%gates = ref.div %picked, %picked_sum_b{role} : {t(T, E)}")
    e(f"%dispatch = ref.capacity_dispatch %chosen capacity {C} groups {groups}{role} : {t(T, E)}")
    e(f"%dispatch2 = ref.reshape %dispatch : {t(T, E, S)} -> {t(T, E * S)}")
    e(f"%slots2 = ref.matmul %dispatch2, %{x} contract(0, 0) : {t(T, E * S)}, {t(T, H)}")
    e(f"%slots = ref.reshape %slots2 : {t(E * S, H)} -> {t(E, S, H)}")


def reference(c):
    T, H, E, F, S, Fs = c.T, c.H, c.E, c.F, c.S, c.Fs
    L = []
    e = L.append
    moe_body(c, e, "x", T, c.G, c.C, "ref")
    e(f"%h1 = ref.batch_matmul %slots, %w1 contract(2, 1) : {t(E, S, H)}, {t(E, H, F)}")
    e(f"%a1 = ref.gelu %h1 : {t(E, S, F)}")
    e(f"%expert_out = ref.batch_matmul %a1, %w2 contract(2, 1) : {t(E, S, F)}, {t(E, F, H)}")
    e(f"%gates_b = ref.broadcast %gates dims [0, 1] : {t(T, E)} -> {t(T, E, S)}")
    e(f'%combine = ref.mul %dispatch, %gates_b {{ref.role = "routing"}} : {t(T, E, S)}')
    e(f"%combine2 = ref.reshape %combine : {t(T, E, S)} -> {t(T, E * S)}")
    e(f"%expert_out2 = ref.reshape %expert_out : {t(E, S, H)} -> {t(E * S, H)}")
    e(f"%y_moe = ref.matmul %combine2, %expert_out2 contract(1, 0) : {t(T, E * S)}, {t(E * S, H)}")
    if c.shared:
        e(f"%hs = ref.matmul %x, %ws1 contract(1, 0) : {t(T, H)}, {t(H, Fs)}")
        e(f"%as = ref.gelu %hs : {t(T, Fs)}")
        e(f"%ys = ref.matmul %as, %ws2 contract(1, 0) : {t(T, Fs)}, {t(Fs, H)}")
        e(f"%y = ref.add %y_moe, %ys : {t(T, H)}")
    else:
        e(f"%y = ref.scale %y_moe by 1.0 : {t(T, H)}")
    e(f"%main = ref.mse_loss %y, %target : {t(T, H)}")
    e("// Load balancing (Switch): f_e = share of assignments, P_e = mean probability.")
    e(f'%f_sum = ref.reduce_sum %chosen dims [0] {{ref.role = "routing"}} : {t(T, E)}')
    e(f'%f = ref.scale %f_sum by {1 / (T * c.k)} {{ref.role = "routing"}} : {t(E)}')
    e(f'%p_sum = ref.reduce_sum %probs dims [0] {{ref.role = "routing"}} : {t(T, E)}')
    e(f'%p_mean = ref.scale %p_sum by {1 / T} {{ref.role = "routing"}} : {t(E)}')
    e(f"%fp = ref.mul %f, %p_mean : {t(E)}")
    e(f"%fp_sum = ref.reduce_sum %fp dims [0] : {t(E)}")
    e(f'%aux = ref.scale %fp_sum by {c.alpha * E} {{ref.role = "loss-normalization"}} : {t()}')
    e(f"%loss = ref.add %main, %aux : {t()}")
    ws = weights(c)
    names = ", ".join(f"%d_{w}" for w, _ in ws)
    tys = ", ".join(t(*s) for _, s in ws)
    e(f"{names} = ref.grad %loss wrt {', '.join('%' + w for w, _ in ws)}")
    e(f"    : {t()}, {tys} -> {tys}")
    args = [f'%x: {t(T, H)} {{ref.name = "x"}}', f'%target: {t(T, H)} {{ref.name = "target"}}']
    args += [f'%{w}: {t(*s)} {{ref.name = "{w}"}}' for w, s in ws]
    outs = [f'{t()} {{ref.name = "loss"}}'] + [f'{t(*s)} {{ref.name = "d_{w}"}}' for w, s in ws]
    body = "\n".join("    " + x for x in L)
    return (f"  func.func @reference({(',' + chr(10) + '                       ').join(args)})\n"
            f"      -> ({', '.join(outs)})\n      attributes {{ref.reference}} {{\n{body}\n"
            f"    return %loss, {names} : {t()}, {tys}\n  }}\n\n")


def plan(c, bug=None):
    ep, tp, Tl, H, E, El, F, C, Fs = c.ep, c.tp, c.Tl, c.H, c.E, c.El, c.F, c.C, c.Fs
    Fl, Fsl = F // tp, Fs // tp
    Cp = C * ep if bug == "capacity_from_global_batch" else C
    S = ep * Cp
    axes = '["ep", "tp"]' if tp > 1 else '["ep"]'
    L = []
    e = L.append
    e("// Route this rank's tokens; slots of every expert, capacity counted per rank.")
    moe_body(c, e, "x", Tl, 1, Cp)
    a2a_axis = '["tp"]' if bug == "all_to_all_wrong_group" else '["ep"]'
    e("// Every expert's slots to the rank that holds the expert.")
    e(f"%to_experts = dist.all_to_all %slots over {a2a_axis} split_dim 0 concat_dim 1 : "
      f"{t(E, Cp, H)} -> {t(El, S, H)}")
    e(f"%h1 = ref.batch_matmul %to_experts, %w1 contract(2, 1) : {t(El, S, H)}, {t(El, H, Fl)}")
    e(f"%a1 = ref.gelu %h1 : {t(El, S, Fl)}")
    e(f"%out_p = ref.batch_matmul %a1, %w2 contract(2, 1) : {t(El, S, Fl)}, {t(El, Fl, H)}")
    if tp > 1 and bug != "tp_expert_output_not_reduced":
        e("// Tensor parallelism inside the experts: the down projection is partial over tp.")
        e(f'%out = dist.all_reduce %out_p over ["tp"] "sum" : {t(El, S, H)} -> {t(El, S, H)}')
    else:
        e(f"%out = ref.scale %out_p by 1.0 : {t(El, S, H)}")
    e("// The outputs back to the tokens' ranks, then weighted by each token's gates.")
    e(f"%from_experts = dist.all_to_all %out over {a2a_axis} split_dim 1 concat_dim 0 : "
      f"{t(El, S, H)} -> {t(E, Cp, H)}")
    gates = "%picked" if bug == "gates_not_renormalized" else "%gates"
    e(f"%gates_b = ref.broadcast {gates} dims [0, 1] : {t(Tl, E)} -> {t(Tl, E, Cp)}")
    e(f"%combine = ref.mul %dispatch, %gates_b : {t(Tl, E, Cp)}")
    e(f"%combine2 = ref.reshape %combine : {t(Tl, E, Cp)} -> {t(Tl, E * Cp)}")
    e(f"%out2 = ref.reshape %from_experts : {t(E, Cp, H)} -> {t(E * Cp, H)}")
    e(f"%y_moe = ref.matmul %combine2, %out2 contract(1, 0) : {t(Tl, E * Cp)}, {t(E * Cp, H)}")
    if c.shared:
        e(f"%hs = ref.matmul %x, %ws1 contract(1, 0) : {t(Tl, H)}, {t(H, Fsl)}")
        e(f"%as = ref.gelu %hs : {t(Tl, Fsl)}")
        e(f"%ys_p = ref.matmul %as, %ws2 contract(1, 0) : {t(Tl, Fsl)}, {t(Fsl, H)}")
        if tp > 1:
            e(f'%ys = dist.all_reduce %ys_p over ["tp"] "sum" : {t(Tl, H)} -> {t(Tl, H)}')
        else:
            e(f"%ys = ref.scale %ys_p by 1.0 : {t(Tl, H)}")
        e(f"%y = ref.add %y_moe, %ys : {t(Tl, H)}")
    else:
        e(f"%y = ref.scale %y_moe by 1.0 : {t(Tl, H)}")
    e("// This rank's share of the mean squared error.")
    e(f"%main_local = ref.mse_loss %y, %target : {t(Tl, H)}")
    e(f"%main = ref.scale %main_local by {1 / ep} : {t()}")
    e("// Load balancing from the statistics of every rank's tokens.")
    e(f"%f_local = ref.reduce_sum %chosen dims [0] : {t(Tl, E)}")
    e(f"%p_local = ref.reduce_sum %probs dims [0] : {t(Tl, E)}")
    if bug == "aux_from_local_statistics":
        e("// BUG: the statistics of this rank's tokens only; the products are averaged.")
        e(f"%f = ref.scale %f_local by {1 / (Tl * c.k)} : {t(E)}")
        e(f"%p_mean = ref.scale %p_local by {1 / Tl} : {t(E)}")
        aux_share = 1 / ep
    else:
        e(f'%f_sum = dist.all_reduce %f_local over ["ep"] "sum" : {t(E)} -> {t(E)}')
        e(f'%p_sum = dist.all_reduce %p_local over ["ep"] "sum" : {t(E)} -> {t(E)}')
        e(f"%f = ref.scale %f_sum by {1 / (c.T * c.k)} : {t(E)}")
        e(f"%p_mean = ref.scale %p_sum by {1 / c.T} : {t(E)}")
        aux_share = 1.0 if bug == "aux_counted_on_every_rank" else 1 / ep
    e(f"%fp = ref.mul %f, %p_mean : {t(E)}")
    e(f"%fp_sum = ref.reduce_sum %fp dims [0] : {t(E)}")
    e(f"%aux = ref.scale %fp_sum by {c.alpha * E} : {t()}")
    e("// Each rank's share of the aux loss (it is the same on every rank).")
    e(f"%aux_share = ref.scale %aux by {aux_share} : {t()}")
    e(f"%part_ep = ref.add %main, %aux_share : {t()}")
    if tp > 1:
        e("// The tp ranks of a group hold the same tokens: each counts 1/tp of their loss.")
        e(f"%part = ref.scale %part_ep by {1 / tp} : {t()}")
    else:
        e(f"%part = ref.scale %part_ep by 1.0 : {t()}")
    e(f'%loss = dist.all_reduce %part over {axes} "sum" : {t()} -> {t()}')
    ws = weights(c)
    local = {"w_router": (H, E), "w1": (El, H, Fl), "w2": (El, Fl, H), "ws1": (H, Fsl), "ws2": (Fsl, H)}
    names = ", ".join(f"%g_{w}" for w, _ in ws)
    tys = ", ".join(t(*local[w]) for w, _ in ws)
    e("// The gradient of the sum of every rank's loss share (through the collectives).")
    e(f"{names} = ref.grad %part wrt {', '.join('%' + w for w, _ in ws)}")
    e(f"    : {t()}, {tys} -> {tys}")
    reduce_over = {"w_router": axes, "ws1": '["ep"]', "ws2": '["ep"]', "w1": None, "w2": None}
    if tp > 1:
        reduce_over["ws1"] = '["ep"]'
        reduce_over["ws2"] = '["ep"]'
    if bug == "router_grad_not_reduced":
        reduce_over["w_router"] = None
    if bug == "expert_grad_reduced_over_ep":
        reduce_over["w1"] = '["ep"]'
        reduce_over["w2"] = '["ep"]'
    for w, _ in ws:
        ty = t(*local[w])
        if reduce_over[w]:
            e(f'%d_{w} = dist.all_reduce %g_{w} over {reduce_over[w]} "sum" : {ty} -> {ty}')
        else:
            e(f"%d_{w} = ref.scale %g_{w} by 1.0 : {ty}")
    lay = {"w_router": "[_, _]", "w1": "[ep, _, tp]" if tp > 1 else "[ep, _, _]",
           "w2": "[ep, tp, _]" if tp > 1 else "[ep, _, _]",
           "ws1": "[_, tp]" if tp > 1 else "[_, _]", "ws2": "[tp, _]" if tp > 1 else "[_, _]"}
    args = [f'%x: {t(Tl, H)} {{dist.value = "x", dist.layout = #dist.layout<[ep, _]>}}',
            f'%target: {t(Tl, H)} {{dist.value = "target", dist.layout = #dist.layout<[ep, _]>}}']
    args += [f'%{w}: {t(*local[w])} {{dist.value = "{w}", dist.layout = #dist.layout<{lay[w]}>}}'
             for w, _ in ws]
    outs = [f'{t()} {{dist.value = "loss", dist.layout = #dist.layout<[]>}}']
    outs += [f'{t(*local[w])} {{dist.value = "d_{w}", dist.layout = #dist.layout<{lay[w]}>}}'
             for w, _ in ws]
    body = "\n".join("    " + x for x in L)
    mesh_axes = '["ep", "tp"]' if tp > 1 else '["ep"]'
    mesh_shape = f"[{ep}, {tp}]" if tp > 1 else f"[{ep}]"
    rets = ", ".join(["%loss"] + [f"%d_{w}" for w, _ in ws])
    rtys = ", ".join([t()] + [t(*local[w]) for w, _ in ws])
    return (f"  dist.mesh @mesh axes = {mesh_axes} shape = {mesh_shape}\n\n"
            f"  func.func @plan({(',' + chr(10) + '                  ').join(args)})\n"
            f"      -> ({(',' + chr(10) + '          ').join(outs)})\n"
            f"      attributes {{dist.mesh = @mesh}} {{\n{body}\n    return {rets} : {rtys}\n  }}\n")


def write(name, comment, expect, body):
    specgen.write(OUT, "gen_moe_specs.py", name, comment, expect, body)


BUGS = {
    "gates_not_renormalized": ("""
BUG: the combine weights are the router's softmax probabilities of the chosen experts,
not renormalized over them (a top-k normalization flag that differs between the
reference model and the parallel implementation).""", "routing", "%gates_b"),
    "capacity_from_global_batch": ("""
BUG: the expert capacity is computed from the global batch, not from this rank's share:
every rank keeps ep times as many tokens per expert as the reference, so tokens the
reference drops are computed.""", "routing", "%dispatch"),
    "aux_from_local_statistics": ("""
BUG: the load-balancing loss uses this rank's routing statistics only (f_e and P_e are
not all-reduced before their product), and the ranks' losses are averaged.""",
                                  "routing", "%fp"),
    "aux_counted_on_every_rank": ("""
BUG: every rank adds the whole load-balancing loss to its share, so the summed loss
and the router's gradient count it ep times.""", "loss-normalization", "%part_ep"),
    "router_grad_not_reduced": ("""
BUG: the router's gradient is not all-reduced over the expert-parallel ranks, whose
tokens differ: each rank updates the router from its own tokens.""", "reduction", "%d_w_router"),
    "expert_grad_reduced_over_ep": ("""
BUG: the experts' gradients are all-reduced over the expert-parallel ranks as if the
experts were replicated: each rank's experts get the sum of different experts'
gradients.""", "reduction", "%d_w1"),
}

TP_BUGS = {
    "tp_expert_output_not_reduced": ("""
BUG (TP inside experts): the experts' down projection is partial over tp and is sent
back to the tokens without its all_reduce.""", "reduction", "%y"),
    "all_to_all_wrong_group": ("""
BUG (TP inside experts): the dispatch and combine all_to_alls run over the tp group
instead of the ep group: slots go to ranks that do not hold their experts.""",
                               "sharding", "%to_experts"),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--one", nargs=3, metavar=("OUT", "EP", "TP"),
                    help="write one correct configuration to OUT")
    a = ap.parse_args()
    if a.one:
        c = Cfg(ep=int(a.one[1]), tp=int(a.one[2]))
        with open(a.one[0], "w") as fh:
            fh.write('module attributes {planproof.expect = {verdict = "verified"}} {\n' +
                     reference(c) + plan(c) + "}\n")
        return 0
    specgen.reset(OUT)
    c = Cfg()
    write("ep2_top2_capacity.mlir", f"""
A top-{c.k} mixture of {c.E} experts with a shared expert under expert parallelism (ep={c.ep}):
{c.T} tokens, {c.Tl} per rank, capacity {c.C} per expert and rank; dispatch and combine through
all_to_all, the load-balancing loss from all-reduced statistics, and every gradient.""",
          {"verdict": "verified"}, reference(c) + plan(c))
    for bug, (comment, kind, at) in BUGS.items():
        write(f"ep2_{bug}.mlir", comment, {"verdict": "violated", "kind": kind, "at": at},
              reference(c) + plan(c, bug))
    ct = Cfg(tp=2)
    write("ep2_tp2_top2_capacity.mlir", """
The same layer with tensor parallelism inside the experts and the shared expert
(ep=2 x tp=2): expert weights split over ep and, within each expert, over tp.""",
          {"verdict": "verified"}, reference(ct) + plan(ct))
    for bug, (comment, kind, at) in TP_BUGS.items():
        write(f"ep2_tp2_{bug}.mlir", comment, {"verdict": "violated", "kind": kind, "at": at},
              reference(ct) + plan(ct, bug))
    c1 = Cfg(k=1, C=1, shared=False)
    write("ep2_top1_switch.mlir", f"""
A Switch-style top-1 layer without a shared expert (ep=2, capacity 1 per expert and
rank: most tokens are dropped, and the dropped ones contribute nothing).""",
          {"verdict": "verified"}, reference(c1) + plan(c1))


if __name__ == "__main__":
    sys.exit(main())
