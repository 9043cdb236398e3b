#!/usr/bin/env python3
"""Generates the transformer specs in verify-specs/transformer/.

A Llama-style decoder layer (RMSNorm, rotary attention with optional grouped-query KV
heads and fused QKV, SwiGLU MLP, final norm, LM head, token-mean cross-entropy with an
ignore mask), its forward pass and loss, under Megatron tensor parallelism with
vocabulary-parallel cross-entropy, with and without sequence parallelism; plus the
norm-weight gradient under sequence parallelism and the loss normalization under data
parallelism. Every spec states the verdict it must get; the seeded bugs model how real
systems have broken.

Run from the repository root: python3 scripts/gen_transformer_specs.py
"""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from irbuilder import Func, module, plan_func, reference_func, ttype  # noqa: E402

OUT = os.path.join(os.path.dirname(__file__), "..", "verify-specs", "transformer")

# Tiny shapes: tokens, model width, heads, KV heads, head dim, FFN width, vocabulary.
BASE = dict(T=4, H=4, nh=2, nkv=2, d=2, F=4, V=4)


def lay(*dims, **partial):
    p = "".join(f", {k} = [{', '.join(v)}]" for k, v in partial.items())
    return f"#dist.layout<[{', '.join(dims)}]{p}>"


def ref_inputs(c, fused, fused_gate_up=False):
    T, H, nh, nkv, d, F, V = (c[k] for k in "T H nh nkv d F V".split())
    ins = [("x", [T, H]), ("w_norm1", [H])]
    ins += [("w_qkv", [H, 3 * nh * d])] if fused else [
        ("w_q", [H, nh * d]), ("w_k", [H, nkv * d]), ("w_v", [H, nkv * d])]
    ins += [("w_o", [nh * d, H]), ("w_norm2", [H])]
    ins += [("w_gate_up", [H, 2 * F])] if fused_gate_up else [("w_gate", [H, F]), ("w_up", [H, F])]
    ins += [("w_down", [F, H]), ("w_normf", [H]), ("w_lm", [H, V]), ("labels", [T, V]),
            ("mask", [T]), ("cos", [T, d]), ("sin", [T, d])]
    return ins


def heads(f, c, src, name, n_heads):
    """[T, n*d] -> [n, T, d]."""
    T, d = c["T"], c["d"]
    f.reshape(name + "3", src, [T, n_heads, d])
    return f.transpose(name + "h", name + "3", [1, 0, 2])


def expand_kv(f, c, src, name, n_kv, n_q):
    """Repeat each KV head for its group of query heads: [n_kv, T, d] -> [n_q, T, d]."""
    if n_kv == n_q:
        return src
    T, d, rep = c["T"], c["d"], n_q // n_kv
    f.broadcast(name + "b", src, [0, 2, 3], [n_kv, rep, T, d])
    return f.reshape(name + "f", name + "b", [n_q, T, d])


def attention_and_mlp(f, c, n_q, n_kv, fused, kv_select=None):
    """Everything from h1 (normed input, all tokens) to the partial attention output."""
    T, d = c["T"], c["d"]
    if fused:
        f.matmul("qkv", "h1", "w_qkv")
        f.slice("q", "qkv", [0, 0], [T, n_q * d])
        f.slice("k", "qkv", [0, n_q * d], [T, n_kv * d])
        f.slice("v", "qkv", [0, 2 * n_q * d], [T, n_kv * d])
    else:
        f.matmul("q", "h1", "w_q")
        f.matmul("k", "h1", "w_k")
        f.matmul("v", "h1", "w_v")
    heads(f, c, "q", "q", n_q)
    heads(f, c, "k", "k", n_kv)
    heads(f, c, "v", "v", n_kv)
    f.rotary("q_rot", "qh", "cos", "sin")
    f.rotary("k_rot", "kh", "cos", "sin")
    k_src, v_src, kv_n = "k_rot", "vh", n_kv
    if kv_select == "shard":
        f.comment("KV projection replicated: each rank keeps the KV head of its query group.")
        f.shard_slice("k_mine", "k_rot", ["tp"], 0)
        f.shard_slice("v_mine", "vh", ["tp"], 0)
        k_src, v_src, kv_n = "k_mine", "v_mine", f.shapes["k_mine"][0]
    elif kv_select == "first":
        f.comment("BUG: every rank attends with KV head 0 instead of its own group's head.")
        f.slice("k_mine", "k_rot", [0, 0, 0], [1, T, d])
        f.slice("v_mine", "vh", [0, 0, 0], [1, T, d])
        k_src, v_src, kv_n = "k_mine", "v_mine", 1
    kf = expand_kv(f, c, k_src, "k_", kv_n, n_q)
    vf = expand_kv(f, c, v_src, "v_", kv_n, n_q)
    f.batch_matmul("scores", "q_rot", kf, 2, 2)
    f.scale("scores_scaled", "scores", 0.5)
    f.unary("causal_softmax", "probs", "scores_scaled")
    f.batch_matmul("ctx", "probs", vf, 2, 1)
    f.transpose("ctx_t", "ctx", [1, 0, 2])
    f.reshape("ctx_flat", "ctx_t", [T, n_q * d])


def mlp(f, fused_gate_up=False):
    if fused_gate_up:
        # One matmul against [gate | up]; the halves are sliced apart.
        f.matmul("gate_up", "h2", "w_gate_up")
        T, F2 = f.shapes["gate_up"]
        f.slice("gate", "gate_up", [0, 0], [T, F2 // 2])
        f.slice("up", "gate_up", [0, F2 // 2], [T, F2 // 2])
    else:
        f.matmul("gate", "h2", "w_gate")
        f.matmul("up", "h2", "w_up")
    f.unary("silu", "gate_act", "gate")
    f.binary("mul", "act", "gate_act", "up")


WEIGHTS = ["w_norm1", "w_q", "w_k", "w_v", "w_o", "w_norm2", "w_gate", "w_up", "w_down",
           "w_normf", "w_lm"]


def grad(f, results, loss, wrt):
    """%results... = ref.grad %loss wrt %wrt..."""
    f.lines.append(f"%{', %'.join(results)} = ref.grad %{loss} wrt %{', %'.join(wrt)}")
    f.lines.append("    : " + ", ".join([f.t(loss)] + [f.t(w) for w in wrt]) + " -> " +
                   ", ".join(f.t(w) for w in wrt))
    for r, w in zip(results, wrt):
        f.shapes[r] = f.shapes[w]


def reference(c, fused=False, fused_gate_up=False, backward=False):
    T, H, nh, nkv, V = c["T"], c["H"], c["nh"], c["nkv"], c["V"]
    f = Func()
    ins = ref_inputs(c, fused, fused_gate_up)
    for n, s in ins:
        f.arg(n, s)
    f.rms_norm("h1", "x", "w_norm1")
    attention_and_mlp(f, c, nh, nkv, fused)
    f.matmul("attn", "ctx_flat", "w_o")
    f.binary("add", "x2", "x", "attn")
    f.rms_norm("h2", "x2", "w_norm2")
    mlp(f, fused_gate_up)
    f.matmul("mlp_out", "act", "w_down")
    f.binary("add", "x3", "x2", "mlp_out")
    f.rms_norm("hf", "x3", "w_normf")
    f.matmul("logits", "hf", "w_lm")
    if not backward:
        cross_entropy(f, T, V, "logits", "labels", "mask")
        return reference_func(f, ins, [("loss", "loss")])
    # The composite op has a derivative rule (max, used by the primitive form, has none).
    f.emit("loss", f"ref.cross_entropy %logits, %labels, %mask : {f.t('logits')}, {f.t('mask')}", [])
    wrt = ["x"] + WEIGHTS
    grad(f, ["d_" + w for w in wrt], "loss", wrt)
    return reference_func(f, ins, [("loss", "loss")] + [("d_" + w, "d_" + w) for w in wrt])


def cross_entropy(f, T, V, logits, labels, mask, tp_axes=(), dp_axes=(), bug=None):
    """Token-mean cross-entropy written in primitives, as training code computes it.
    With tp_axes the vocabulary is split (Megatron's vocab-parallel cross-entropy: a max
    all-reduce, then sum all-reduces); with dp_axes the tokens are split, and the loss
    is the global sum over global token count."""
    Vl = f.shapes[logits][1]
    Tl = f.shapes[logits][0]
    f.reduce("reduce_max", "row_max_local" if tp_axes else "row_max", logits, [1])
    row_max = "row_max"
    if tp_axes:
        if bug == "no_max_allreduce":
            f.comment("BUG: the local maximum is used; the max all_reduce is missing.")
            row_max = "row_max_local"
        else:
            f.all_reduce("row_max", "row_max_local", tp_axes, "max")
    f.broadcast("row_max_b", row_max, [0], [Tl, Vl])
    f.binary("sub", "shifted", logits, "row_max_b")
    f.unary("exp", "exps", "shifted")
    f.reduce("reduce_sum", "sum_exp_local" if tp_axes else "sum_exp", "exps", [1])
    if tp_axes:
        f.all_reduce("sum_exp", "sum_exp_local", tp_axes, "sum")
    f.unary("log", "log_sum", "sum_exp")
    f.binary("add", "lse", row_max, "log_sum")
    f.binary("mul", "label_logits", labels, logits)
    f.reduce("reduce_sum", "picked_local" if tp_axes else "picked", "label_logits", [1])
    if tp_axes:
        f.all_reduce("picked", "picked_local", tp_axes, "sum")
    f.binary("sub", "token_loss", "lse", "picked")
    f.binary("mul", "masked_loss", mask, "token_loss")
    if dp_axes and bug == "mean_of_means":
        f.reduce("reduce_sum", "loss_sum", "masked_loss", [0])
        f.reduce("reduce_sum", "tokens", mask, [0])
        f.comment("BUG: each rank divides by its own token count, then ranks are averaged.")
        f.binary("div", "local_mean", "loss_sum", "tokens")
        return f.all_reduce("loss", "local_mean", dp_axes, "avg")
    f.reduce("reduce_sum", "loss_sum_local" if dp_axes else "loss_sum", "masked_loss", [0])
    f.reduce("reduce_sum", "tokens_local" if dp_axes else "tokens", mask, [0])
    if dp_axes:
        f.all_reduce("loss_sum", "loss_sum_local", dp_axes, "sum")
        f.all_reduce("tokens", "tokens_local", dp_axes, "sum")
    return f.binary("div", "loss", "loss_sum", "tokens")


def tp_backward(f, c, tp, sp=False, bug=None):
    """Megatron's backward for the TP layer, segment by segment: each local segment's
    gradients come from ref.grad of sum(segment output * detached upstream gradient),
    and the column-parallel input gradients are all-reduced between segments. With
    sequence parallelism the transposes of the forward collectives appear instead:
    all_gather of a reduce_scatter's gradient, reduce_scatter of an all_gather's, and the
    norm weights' gradients (from local tokens) are all-reduced."""
    T, V = c["T"], c["V"]
    Vl = V // tp

    def segment(tag, out, upstream, wrt):
        f.unary("detach", f"g_{tag}", upstream)
        f.binary("mul", f"s_{tag}", out, f"g_{tag}")
        f.reduce("reduce_sum", f"L_{tag}", f"s_{tag}", list(range(len(f.shapes[out]))))
        names = [f"d_{w}_{tag}" if w in ("x", "x2", "x3", "h1", "h2", "h1_local", "h2_local",
                                         "hf_local") else f"d_{w}" for w in wrt]
        grad(f, names, f"L_{tag}", wrt)
        return names

    def column_input_grad(name, partial):
        # The gradient of a column-parallel layer's (gathered) input is a partial sum.
        if sp:
            f.reduce_scatter(name, partial, ["tp"], 0, "sum")
        else:
            f.all_reduce(name, partial, ["tp"], "sum")

    def norm_weight(name):
        # Under SP a norm weight's gradient sums over local tokens only.
        if sp and not (bug == "sp_norm_grad_not_reduced" and name == "d_w_norm2"):
            f.lines[-2:] = [l.replace(f"%{name},", f"%{name}_local,").replace(f"%{name} =", f"%{name}_local =")
                            .replace(f", %{name} ", f", %{name}_local ") for l in f.lines[-2:]]
            f.shapes[name + "_local"] = f.shapes[name]
            f.all_reduce(name, name + "_local", ["tp"], "sum")
        elif sp:
            f.comment("BUG: the norm weight gradient under SP is not all-reduced over tp.")

    f.comment("Backward: vocabulary-parallel cross-entropy.")
    f.broadcast("sum_exp_b", "sum_exp", [0], [T, Vl])
    f.binary("div", "probs_v", "exps", "sum_exp_b")
    f.binary("sub", "p_minus_y", "probs_v", "labels")
    f.broadcast("tokens_b", "tokens", [], [T])
    f.binary("div", "tok_w", "mask", "tokens_b")
    f.broadcast("tok_w_b", "tok_w", [0], [T, Vl])
    f.binary("mul", "d_logits", "tok_w_b", "p_minus_y")
    f.matmul("d_w_lm", "hf", "d_logits", 0, 0)
    f.matmul("d_hf_p", "d_logits", "w_lm", 1, 1)
    column_input_grad("d_hf", "d_hf_p")
    f.comment("Final norm.")
    segment("fn", "hf_local" if sp else "hf", "d_hf", ["x3", "w_normf"])
    norm_weight("d_w_normf")
    f.comment("MLP: row-parallel down, column-parallel gate/up; the input gradient is partial.")
    up = "d_x3_fn"
    if sp:
        f.all_gather("d_x3_full", "d_x3_fn", ["tp"], 0)
        up = "d_x3_full"
    segment("mlp", "mlp_out_p", up, ["h2", "w_gate", "w_up", "w_down"])
    if bug == "mlp_input_grad_not_reduced":
        f.comment("BUG: the MLP input gradient is not all-reduced before the norm backward.")
        d_h2 = "d_h2_mlp"
    else:
        column_input_grad("d_h2", "d_h2_mlp")
        d_h2 = "d_h2"
    segment("n2", "h2_local" if sp else "h2", d_h2, ["x2", "w_norm2"])
    norm_weight("d_w_norm2")
    f.binary("add", "d_x2", "d_x3_fn", "d_x2_n2")
    f.comment("Attention: heads split; the QKV input gradient is partial.")
    up = "d_x2"
    if sp:
        f.all_gather("d_x2_full", "d_x2", ["tp"], 0)
        up = "d_x2_full"
    segment("att", "attn_p", up, ["h1", "w_q", "w_k", "w_v", "w_o"])
    column_input_grad("d_h1", "d_h1_att")
    segment("n1", "h1_local" if sp else "h1", "d_h1", ["x", "w_norm1"])
    norm_weight("d_w_norm1")
    f.binary("add", "d_x", "d_x2", "d_x_n1")


def tp_plan(c, tp=2, sp=False, fused=False, bug=None, replicate_kv=False, fused_gate_up=False,
            backward=False):
    T, H, nh, nkv, d, F, V = (c[k] for k in "T H nh nkv d F V".split())
    mesh = {"tp": tp}
    f = Func(mesh)
    nq_l = nh // tp
    kv_split = nkv >= tp and not replicate_kv
    nkv_l = nkv // tp if kv_split else nkv
    col, row, rep1, rep2 = lay("_", "tp"), lay("tp", "_"), lay("_"), lay("_", "_")
    tok = lay("tp", "_") if sp else rep2
    ins = [("x", "x", tok, [T // tp if sp else T, H]), ("w_norm1", "w_norm1", rep1, [H])]
    if fused:
        qkv_layout = col if bug == "fused_qkv_even_split" else lay("_", "tp in 3")
        ins += [("w_qkv", "w_qkv", qkv_layout, [H, 3 * nh * d // tp])]
    else:
        kv_lay, kv_w = (col, nkv_l * d) if kv_split else (rep2, nkv * d)
        ins += [("w_q", "w_q", col, [H, nq_l * d]), ("w_k", "w_k", kv_lay, [H, kv_w]),
                ("w_v", "w_v", kv_lay, [H, kv_w])]
    ins += [("w_o", "w_o", row, [nq_l * d, H]), ("w_norm2", "w_norm2", rep1, [H])]
    if fused_gate_up:
        gu_layout = col if bug == "fused_gate_up_even_split" else lay("_", "tp in 2")
        ins += [("w_gate_up", "w_gate_up", gu_layout, [H, 2 * F // tp])]
    else:
        ins += [("w_gate", "w_gate", col, [H, F // tp]), ("w_up", "w_up", col, [H, F // tp])]
    ins += [("w_down", "w_down", row, [F // tp, H]), ("w_normf", "w_normf", rep1, [H]),
            ("w_lm", "w_lm", col, [H, V // tp]), ("labels", "labels", col, [T, V // tp]),
            ("mask", "mask", rep1, [T]), ("cos", "cos", rep2, [T, d]),
            ("sin", "sin", rep2, [T, d])]
    for n, _, _, s in ins:
        f.arg(n, s)

    def norm_then_gather(out, src, w):
        if sp:
            f.rms_norm(out + "_local", src, w)
            f.all_gather(out, out + "_local", ["tp"], 0)
        else:
            f.rms_norm(out, src, w)

    def reduce_then_residual(out, partial, residual):
        if sp:
            f.reduce_scatter(partial[:-2], partial, ["tp"], 0, "sum")
        elif bug == "residual_in_tp_region" and out == "x2":
            f.comment("BUG: the residual is added inside the tensor-parallel region, on every rank.")
            f.binary("add", "x2_partial", partial, residual)
            f.all_reduce(out, "x2_partial", ["tp"], "sum")
            return
        else:
            f.all_reduce(partial[:-2], partial, ["tp"], "sum")
        f.binary("add", out, residual, partial[:-2])

    f.comment("Attention: heads split over tp (column-parallel QKV, row-parallel output).")
    norm_then_gather("h1", "x", "w_norm1")
    kv_select = None
    if replicate_kv:
        kv_select = "first" if bug == "gqa_wrong_kv_head" else "shard"
    attention_and_mlp(f, c, nq_l, nkv_l, fused, kv_select)
    f.matmul("attn_p", "ctx_flat", "w_o")
    reduce_then_residual("x2", "attn_p", "x")
    f.comment("SwiGLU MLP: column-parallel gate/up, row-parallel down.")
    norm_then_gather("h2", "x2", "w_norm2")
    mlp(f, fused_gate_up)
    f.matmul("mlp_out_p", "act", "w_down")
    reduce_then_residual("x3", "mlp_out_p", "x2")
    f.comment("Final norm, vocabulary-parallel LM head and cross-entropy.")
    norm_then_gather("hf", "x3", "w_normf")
    f.matmul("logits", "hf", "w_lm")
    cross_entropy(f, T, V // tp, "logits", "labels", "mask", tp_axes=["tp"], bug=bug)
    outs = [("loss", "loss", lay())]
    if backward:
        tp_backward(f, c, tp, sp, bug)
        layouts = dict((n, l) for n, _, l, _ in ins)
        outs += [("d_x", "d_x", lay("tp", "_") if sp else lay("_", "_"))] + \
            [("d_" + w, "d_" + w, layouts[w]) for w in WEIGHTS]
    return plan_func(f, mesh, ins, outs)


def comment(text):
    return "// GENERATED by scripts/gen_transformer_specs.py -- edit the generator.\n" + \
        "".join("// " + line + "\n" for line in text.strip().splitlines())


def write(name, text, expect, ref, plan):
    with open(os.path.join(OUT, name), "w") as fh:
        fh.write(module(comment(text), expect, ref, plan))


def norm_grad_specs():
    """The RMSNorm weight gradient under sequence parallelism: each rank holds some
    tokens, so its local weight gradient is a partial sum over tp."""
    T, H = 4, 4
    ins = [("x", [T, H]), ("dy", [T, H]), ("w", [H])]
    r = Func()
    for n, s in ins:
        r.arg(n, s)
    r.constant("ones", "1.0", [H])
    r.rms_norm("x_hat", "x", "ones")
    r.binary("mul", "contrib", "dy", "x_hat")
    r.reduce("reduce_sum", "dw", "contrib", [0])
    r.emit("w_next", f"ref.sgd_update %w, %dw lr 0.1 : {r.t('w')}", [H])
    ref = reference_func(r, ins, [("dw", "dw"), ("w_next", "w_next")])

    def plan(bug=None):
        f = Func({"tp": 2})
        pins = [("x", "x", lay("tp", "_"), [T // 2, H]), ("dy", "dy", lay("tp", "_"), [T // 2, H]),
                ("w", "w", lay("_"), [H])]
        for n, _, _, s in pins:
            f.arg(n, s)
        f.constant("ones", "1.0", [H])
        f.rms_norm("x_hat", "x", "ones")
        f.binary("mul", "contrib", "dy", "x_hat")
        f.comment("Local tokens only: a partial sum over tp.")
        f.reduce("reduce_sum", "dw_local", "contrib", [0])
        dw = "dw"
        if bug == "missing":
            f.comment("BUG: the all_reduce over tp is missing.")
            dw = "dw_local"
        else:
            f.all_reduce("dw", "dw_local", ["tp"], "avg" if bug == "avg" else "sum")
        f.emit("w_next", f"ref.sgd_update %w, %{dw} lr 0.1 : {f.t('w')}", [H])
        return plan_func(f, {"tp": 2}, pins, [("dw", dw, lay("_")), ("w_next", "w_next", lay("_"))])

    write("sp2_norm_weight_grad.mlir", """
RMSNorm weight gradient under Megatron sequence parallelism (tp=2): tokens are split,
the norm weight is replicated, so each rank's weight gradient is a partial sum over tp
that must be all-reduced (sum) before the update.""", {"verdict": "verified"}, ref, plan())
    write("sp2_norm_weight_grad_not_reduced.mlir", """
BUG: under sequence parallelism the norm-weight gradient is not all-reduced: each rank
updates its replica with the gradient of its own tokens only (replicas diverge).""",
          {"verdict": "violated", "kind": "reduction", "at": "%dw_local"}, ref, plan("missing"))
    write("sp2_norm_weight_grad_avg.mlir", """
BUG: under sequence parallelism the norm-weight gradient is all-reduced by mean instead
of sum: the gradient is 1/tp of what it should be.""",
          {"verdict": "violated", "kind": "reduction", "at": "%dw"}, ref, plan("avg"))


def dp_loss_specs():
    """Token-mean cross-entropy with tokens split over dp: the loss is the global sum
    over the global count of non-ignored tokens."""
    T, V = 4, 3
    ins = [("logits", [T, V]), ("labels", [T, V]), ("mask", [T])]
    r = Func()
    for n, s in ins:
        r.arg(n, s)
    cross_entropy(r, T, V, "logits", "labels", "mask")
    ref = reference_func(r, ins, [("loss", "loss")])

    def plan(bug=None):
        f = Func({"dp": 2})
        pins = [("logits", "logits", lay("dp", "_"), [T // 2, V]),
                ("labels", "labels", lay("dp", "_"), [T // 2, V]), ("mask", "mask", lay("dp"), [T // 2])]
        for n, _, _, s in pins:
            f.arg(n, s)
        cross_entropy(f, T // 2, V, "logits", "labels", "mask", dp_axes=["dp"], bug=bug)
        return plan_func(f, {"dp": 2}, pins, [("loss", "loss", lay())])

    write("dp2_token_mean_loss.mlir", """
Token-mean cross-entropy with an ignore mask under data parallelism (dp=2): the loss
sum and the token count are each all-reduced, then divided.""", {"verdict": "verified"}, ref, plan())
    write("dp2_token_mean_loss_mean_of_means.mlir", """
BUG: each data-parallel rank divides by its own count of non-ignored tokens and the
ranks' means are averaged: wrong whenever the ranks hold different numbers of ignored
tokens (padding).""", {"verdict": "violated", "kind": "reduction", "at": "%local_mean"}, ref,
          plan("mean_of_means"))


def sp_reduce_scatter_specs():
    """Megatron SP on sequence-first activations [S, B, H]: the row-parallel output is
    reduce-scattered along the sequence dimension (0). With S == B, scattering along the
    batch dimension instead type-checks and is wrong."""
    S, Bt, H, F = 2, 2, 4, 4
    ins = [("x", [S, Bt, H]), ("w1", [H, F]), ("w2", [F, H])]
    r = Func()
    for n, s_ in ins:
        r.arg(n, s_)
    r.reshape("x2d", "x", [S * Bt, H])
    r.matmul("h", "x2d", "w1")
    r.unary("gelu", "a", "h")
    r.matmul("y2d", "a", "w2")
    r.reshape("y", "y2d", [S, Bt, H])
    r.binary("add", "out", "x", "y")
    ref = reference_func(r, ins, [("out", "out")])

    def plan(dim):
        f = Func({"tp": 2})
        pins = [("x", "x", lay("tp", "_", "_"), [S // 2, Bt, H]),
                ("w1", "w1", lay("_", "tp"), [H, F // 2]), ("w2", "w2", lay("tp", "_"), [F // 2, H])]
        for n, _, _, s_ in pins:
            f.arg(n, s_)
        f.all_gather("x_full", "x", ["tp"], 0)
        f.reshape("x2d", "x_full", [S * Bt, H])
        f.matmul("h", "x2d", "w1")
        f.unary("gelu", "a", "h")
        f.matmul("y2d_p", "a", "w2")
        f.reshape("y_p", "y2d_p", [S, Bt, H])
        if dim == 0:
            f.reduce_scatter("y", "y_p", ["tp"], 0, "sum")
        else:
            f.comment("BUG: the buffer is flattened batch-first before the reduce_scatter, so")
            f.comment("ranks receive halves of the batch, not of the sequence.")
            f.transpose("y_bsh", "y_p", [1, 0, 2])
            f.reshape("y_flat", "y_bsh", [S * Bt, H])
            f.reduce_scatter("y_rs", "y_flat", ["tp"], 0, "sum")
            f.reshape("y", "y_rs", [S // 2, Bt, H])
        f.binary("add", "out", "x", "y")
        return plan_func(f, {"tp": 2}, pins, [("out", "out", lay("tp", "_", "_"))])

    write("sp2_sbh_reduce_scatter.mlir", """
Megatron sequence parallelism on sequence-first activations [S, B, H] (tp=2): all_gather
along the sequence before the tensor-parallel MLP, reduce_scatter along the sequence
after it.""", {"verdict": "verified"}, ref, plan(0))
    write("sp2_sbh_reduce_scatter_wrong_dim.mlir", """
BUG: the reduce_scatter after the row-parallel linear scatters along the batch
dimension instead of the sequence dimension: the buffer is flattened batch-first, and
the reshape afterwards hides the mistake from the type system.""",
          {"verdict": "violated", "kind": "sharding", "at": "%y_bsh"}, ref, plan(1))


def linear_sgd_reference(R, C, Bt):
    """dW = x^T dy for a linear layer, then an SGD step: the step ZeRO plans shard."""
    ins = [("x", [Bt, R]), ("dy", [Bt, C]), ("w", [R, C])]
    r = Func()
    for n, s_ in ins:
        r.arg(n, s_)
    r.matmul("dw", "x", "dy", 0, 0)
    r.emit("w_next", f"ref.sgd_update %w, %dw lr 0.1 : {r.t('w')}", [R, C])
    return reference_func(r, ins, [("w_next", "w_next")])


def zero2_specs():
    """ZeRO-2-style flat gradient buffers under data parallelism: the gradient is
    flattened in the parameter's logical row-major order, reduce-scattered, and each rank
    updates its contiguous shard of the flat parameter."""
    R, C, Bt = 4, 4, 4
    ref = linear_sgd_reference(R, C, Bt)

    def plan(bug=None):
        f = Func({"dp": 2})
        pins = [("x", "x", lay("dp", "_"), [Bt // 2, R]), ("dy", "dy", lay("dp", "_"), [Bt // 2, C]),
                ("w", "w", lay("dp", "_"), [R // 2, C])]
        for n, _, _, s_ in pins:
            f.arg(n, s_)
        f.comment("Local batch: a partial sum over dp.")
        f.matmul("dw_local", "x", "dy", 0, 0)
        src = "dw_local"
        if bug == "transposed":
            f.comment("BUG: the gradient arrives transposed (a non-contiguous view) and is")
            f.comment("flattened in memory order, so the flat shards hold the wrong elements.")
            f.transpose("dw_t", "dw_local", [1, 0])
            src = "dw_t"
        f.reshape("dw_flat", src, [R * C])
        f.reduce_scatter("dw_shard", "dw_flat", ["dp"], 0, "sum")
        f.reshape("dw_rows", "dw_shard", [R // 2, C])
        f.emit("w_next", f"ref.sgd_update %w, %dw_rows lr 0.1 : {f.t('w')}", [R // 2, C])
        return plan_func(f, {"dp": 2}, pins, [("w_next", "w_next", lay("dp", "_"))])

    write("zero2_flat_grad.mlir", """
ZeRO-2-style gradient reduction (dp=2): the weight gradient is flattened, reduce-
scattered over dp, and each rank updates its contiguous rows of the parameter.""",
          {"verdict": "verified"}, ref, plan())
    write("zero2_flat_grad_transposed.mlir", """
BUG: the gradient is a transposed (non-contiguous) view when it is flattened for the
reduce-scatter, so the reduction runs in the wrong element order and each rank's shard
holds elements of other rows.""", {"verdict": "violated", "kind": "sharding", "at": "%dw_t"},
          ref, plan("transposed"))


def vocab_embedding_specs():
    """Megatron's vocabulary-parallel embedding: the table's rows split over tp; each rank
    looks up the tokens in its row range (others give zeros) and an all_reduce(sum)
    completes the lookup; the table gradient is the scatter-add of the output gradient
    into each rank's own rows."""
    V, H, T = 8, 4, 4
    r = Func()
    r.arg("table", [V, H])
    r.arg("dx", [T, H])
    r.lines.append(f"%x = ref.embedding %table, %ids : {ttype([V, H])}, tensor<{T}xi64>")
    r.shapes["x"] = [T, H]
    r.lines.append(f"%dtable = ref.embedding_grad %dx, %ids : {ttype([T, H])}, tensor<{T}xi64> -> {ttype([V, H])}")
    r.shapes["dtable"] = [V, H]
    r.emit("table_next", f"ref.sgd_update %table, %dtable lr 0.1 : {ttype([V, H])}", [V, H])
    ref = reference_func(r, [("table", [V, H]), ("dx", [T, H])], [("x", "x"), ("table_next", "table_next")])
    ref = ref.replace('%dx: tensor<4x4xf32> {ref.name = "dx"})',
                      f'%dx: tensor<4x4xf32> {{ref.name = "dx"}},\n                       '
                      f'%ids: tensor<{T}xi64> {{ref.name = "ids", ref.bound = {V} : i64}})')

    def plan(bug=None):
        f = Func({"tp": 2})
        pins = [("table", "table", lay("tp", "_"), [V // 2, H]), ("dx", "dx", lay("_", "_"), [T, H])]
        for n, _, _, s_ in pins:
            f.arg(n, s_)
        f.lines.append('%rank = dist.axis_index "tp" : index')
        f.lines.append(f"%rows = arith.constant {V // 2} : index")
        if bug == "offset_from_rank":
            f.comment("BUG: the shard's first row is taken to be the rank itself, not rank * rows.")
            f.lines.append("%first = arith.addi %rank, %rows : index")
            f.lines[-1] = "%first = arith.muli %rank, %one : index"
            f.lines.insert(-1, "%one = arith.constant 1 : index")
        else:
            f.lines.append("%first = arith.muli %rank, %rows : index")
        f.comment("Tokens outside this rank's rows look up zeros: a partial sum over tp.")
        f.lines.append(f"%x_part = ref.embedding %table, %ids offset %first : {ttype([V // 2, H])}, tensor<{T}xi64>")
        f.shapes["x_part"] = [T, H]
        if bug == "missing_allreduce":
            f.comment("BUG: the all_reduce that completes the lookup is missing.")
            x = "x_part"
        else:
            f.all_reduce("x", "x_part", ["tp"], "sum")
            x = "x"
        grad_offset = "" if bug == "grad_offset_zero" else " offset %first"
        if bug == "grad_offset_zero":
            f.comment("BUG: the table gradient ignores the shard's row offset.")
        f.lines.append(f"%dtable = ref.embedding_grad %dx, %ids{grad_offset} : {ttype([T, H])}, "
                       f"tensor<{T}xi64> -> {ttype([V // 2, H])}")
        f.shapes["dtable"] = [V // 2, H]
        f.emit("table_next", f"ref.sgd_update %table, %dtable lr 0.1 : {ttype([V // 2, H])}", [V // 2, H])
        text = plan_func(f, {"tp": 2}, pins, [("x", x, lay("_", "_")),
                                               ("table_next", "table_next", lay("tp", "_"))])
        return text.replace('%dx: tensor<4x4xf32> {dist.value = "dx", dist.layout = #dist.layout<[_, _]>})',
                            '%dx: tensor<4x4xf32> {dist.value = "dx", dist.layout = #dist.layout<[_, _]>},\n'
                            f'                  %ids: tensor<{T}xi64> {{dist.value = "ids", dist.layout = #dist.layout<[_]>}})')

    write("vocab_embedding_tp2.mlir", """
Megatron vocabulary-parallel embedding (tp=2), forward and table gradient: the rows are
split; each rank looks up only the tokens in its row range (computed from its tp
coordinate), an all_reduce(sum) completes the lookup, and each rank scatter-adds the
output gradient into its own rows. Token ids are symbolic: the proof covers every id
sequence.""", {"verdict": "verified"}, ref, plan())
    write("vocab_embedding_tp2_missing_allreduce.mlir", """
BUG: the all_reduce after the vocabulary-parallel lookup is missing: each rank returns
the rows of its own shard only (zeros for the other tokens).""",
          {"verdict": "violated", "kind": "reduction", "at": "%x_part"}, ref, plan("missing_allreduce"))
    write("vocab_embedding_tp2_wrong_offset.mlir", """
BUG: the shard's first row is computed as the rank instead of rank * rows, so rank 1
looks up (and masks) the wrong token range.""",
          {"verdict": "violated", "kind": "sharding", "at": "%x_part"}, ref, plan("offset_from_rank"))
    write("vocab_embedding_tp2_grad_offset_zero.mlir", """
BUG: the table gradient of the vocabulary-parallel embedding ignores the shard's row
offset, so rank 1 accumulates the gradients of rank 0's rows into its own.""",
          {"verdict": "violated", "kind": "sharding", "at": "%dtable"}, ref, plan("grad_offset_zero"))


def gpt_mlp_specs():
    """A GPT-style pre-LayerNorm MLP sub-block, forward and backward: the reference gives
    the forward pass and the loss and derives its gradients (ref.grad); the TP=2 plan
    writes Megatron's backward by hand, including the LayerNorm backward on the
    all-reduced input gradient of the column-parallel layer."""
    T, H, F = 2, 4, 4
    ins = [("x", [T, H]), ("ln_w", [H]), ("ln_b", [H]), ("w1", [H, F]), ("b1", [F]),
           ("w2", [F, H]), ("b2", [H]), ("t", [T, H])]
    r = Func()
    for n, s_ in ins:
        r.arg(n, s_)

    def ln(f, out, x):
        return f.emit(out, f"ref.layer_norm %{x}, %ln_w, %ln_b eps 1.0e-5 : {f.t(x)}, {f.t('ln_w')}, {f.t('ln_b')}",
                      f.shapes[x])

    def forward(f, f_local):
        ln(f, "h", "x")
        f.matmul("a1", "h", "w1")
        f.emit("a1b", f"ref.bias_add %a1, %b1 : {f.t('a1')}, {f.t('b1')}", f.shapes["a1"])
        f.unary("gelu", "g", "a1b")
        f.matmul("o_p" if f_local else "o", "g", "w2")
        if f_local:
            f.all_reduce("o", "o_p", ["tp"], "sum")
        f.emit("ob", f"ref.bias_add %o, %b2 : {f.t('o')}, {f.t('b2')}", f.shapes["o"])
        f.binary("add", "y", "x", "ob")
        return f.emit("loss", f"ref.mse_loss %y, %t : {f.t('y')}", [])
    forward(r, False)
    wrt = ["x", "ln_w", "ln_b", "w1", "b1", "w2", "b2"]
    r.lines.append(f"%{', %'.join('d' + w for w in wrt)} = ref.grad %loss wrt %{', %'.join(wrt)}")
    r.lines.append("    : " + ", ".join([r.t("loss")] + [r.t(w) for w in wrt]) + " -> " +
                   ", ".join(r.t(w) for w in wrt))
    for w in wrt:
        r.shapes["d" + w] = r.shapes[w]
    outs = [("loss", "loss")] + [("d" + w, "d" + w) for w in wrt]
    ref = reference_func(r, ins, outs)

    def plan(bug=None):
        f = Func({"tp": 2})
        col, row, rep1, rep2 = lay("_", "tp"), lay("tp", "_"), lay("_"), lay("_", "_")
        pins = [("x", "x", rep2, [T, H]), ("ln_w", "ln_w", rep1, [H]), ("ln_b", "ln_b", rep1, [H]),
                ("w1", "w1", col, [H, F // 2]), ("b1", "b1", lay("tp"), [F // 2]),
                ("w2", "w2", row, [F // 2, H]), ("b2", "b2", rep1, [H]), ("t", "t", rep2, [T, H])]
        for n, _, _, s_ in pins:
            f.arg(n, s_)
        forward(f, True)
        f.comment("Backward, by hand.")
        f.emit("dy", f"ref.mse_loss_grad %y, %t : {f.t('y')}", [T, H])
        f.reduce("reduce_sum", "db2_local", "dy", [0])
        if bug == "bias_grad_allreduce":
            f.comment("BUG: the replicated bias gradient is all-reduced over tp as well.")
            f.all_reduce("db2", "db2_local", ["tp"], "sum")
        else:
            f.lines.append(f"%db2 = ref.scale %db2_local by 1.0 : {f.t('db2_local')}")
            f.shapes["db2"] = f.shapes["db2_local"]
        f.matmul("dw2", "g", "dy", 0, 0)
        f.matmul("dg", "dy", "w2", 1, 1)
        f.emit("da1", f"ref.gelu_grad %a1b, %dg : {f.t('dg')}", f.shapes["dg"])
        f.reduce("reduce_sum", "db1", "da1", [0])
        f.matmul("dw1", "h", "da1", 0, 0)
        f.matmul("dh_p", "da1", "w1", 1, 1)
        if bug == "ln_grad_not_reduced":
            f.comment("BUG: the LayerNorm backward runs on the partial input gradient.")
            dh = "dh_p"
        else:
            f.all_reduce("dh", "dh_p", ["tp"], "sum")
            dh = "dh"
        f.comment("LayerNorm backward (replicated).")
        f.constant("ones", "1.0", [H])
        f.constant("zeros", "0.0", [H])
        f.emit("xhat", f"ref.layer_norm %x, %ones, %zeros eps 1.0e-5 : {f.t('x')}, {f.t('ones')}, {f.t('zeros')}", [T, H])
        f.binary("mul", "dh_xhat", dh, "xhat")
        f.reduce("reduce_sum", "dln_w", "dh_xhat", [0])
        f.reduce("reduce_sum", "dln_b", dh, [0])
        f.reduce("reduce_mean", "mu", "x", [1])
        f.broadcast("mub", "mu", [0], [T, H])
        f.binary("sub", "xc", "x", "mub")
        f.binary("mul", "xc2", "xc", "xc")
        f.reduce("reduce_mean", "var", "xc2", [1])
        f.constant("eps", "1.0e-5", [T])
        f.binary("add", "ve", "var", "eps")
        f.unary("rsqrt", "rstd", "ve")
        f.broadcast("wb", "ln_w", [1], [T, H])
        f.binary("mul", "gw", dh, "wb")
        f.reduce("reduce_sum", "sgw", "gw", [1])
        f.broadcast("sgwb", "sgw", [0], [T, H])
        f.scale("mgw", "sgwb", 1.0 / H)
        f.binary("mul", "gwx", "gw", "xhat")
        f.reduce("reduce_sum", "sgwx", "gwx", [1])
        f.broadcast("sgwxb", "sgwx", [0], [T, H])
        f.scale("mgwx", "sgwxb", 1.0 / H)
        f.binary("sub", "t1", "gw", "mgw")
        f.binary("mul", "t2", "xhat", "mgwx")
        f.binary("sub", "t3", "t1", "t2")
        f.broadcast("rb", "rstd", [0], [T, H])
        f.binary("mul", "dx_ln", "rb", "t3")
        f.binary("add", "dx", "dy", "dx_ln")
        pouts = [("loss", "loss", lay()), ("dx", "dx", rep2), ("dln_w", "dln_w", rep1),
                 ("dln_b", "dln_b", rep1), ("dw1", "dw1", col), ("db1", "db1", lay("tp")),
                 ("dw2", "dw2", row), ("db2", "db2", rep1)]
        return plan_func(f, {"tp": 2}, pins, pouts)

    write("gpt_mlp_tp2_backward.mlir", """
A GPT-style pre-LayerNorm MLP sub-block (LayerNorm, GeLU MLP with biases, residual),
forward and backward under Megatron TP (tp=2). The reference derives its gradients
(ref.grad); the plan writes the backward by hand: the column-parallel layer's input
gradient is all-reduced before the (replicated) LayerNorm backward.""",
          {"verdict": "verified"}, ref, plan())
    write("gpt_mlp_tp2_ln_grad_not_reduced.mlir", """
BUG: the LayerNorm backward consumes the column-parallel layer's input gradient before
its all_reduce, so the LayerNorm parameter gradients and the input gradient are partial
sums used as complete values.""", {"verdict": "violated", "kind": "reduction", "at": "%dln_w"},
          ref, plan("ln_grad_not_reduced"))
    write("gpt_mlp_tp2_bias_grad_allreduce.mlir", """
BUG: the gradient of the replicated output bias is all-reduced over tp although every
rank already holds the complete value, so it is tp times too large.""",
          {"verdict": "violated", "kind": "reduction", "at": "%db2"}, ref, plan("bias_grad_allreduce"))


def zero2_gather_specs():
    """ZeRO-2 on a dp x tp mesh: the gradient is reduce-scattered over dp, each rank
    updates its shard of the (tp-replicated) parameter, and the updated shards are
    all-gathered over dp so every rank holds the whole parameter again."""
    R, C, Bt = 4, 4, 4
    ref = linear_sgd_reference(R, C, Bt)

    def plan(bug=None):
        mesh = {"dp": 2, "tp": 2}
        f = Func(mesh)
        pins = [("x", "x", lay("dp", "_"), [Bt // 2, R]), ("dy", "dy", lay("dp", "_"), [Bt // 2, C]),
                ("w", "w", lay("_", "_"), [R, C])]
        for n, _, _, s_ in pins:
            f.arg(n, s_)
        f.matmul("dw_local", "x", "dy", 0, 0)
        f.reduce_scatter("dw_shard", "dw_local", ["dp"], 0, "sum")
        f.shard_slice("w_shard", "w", ["dp"], 0)
        f.emit("w_shard_next", f"ref.sgd_update %w_shard, %dw_shard lr 0.1 : {f.t('w_shard')}", [R // 2, C])
        group = "tp" if bug == "wrong_group" else "dp"
        if bug:
            f.comment("BUG: the updated shards are all-gathered over the tensor-parallel group.")
        f.all_gather("w_next", "w_shard_next", [group], 0)
        return plan_func(f, mesh, pins, [("w_next", "w_next", lay("_", "_"))])

    write("zero2_dp2_tp2_gather.mlir", """
ZeRO-2 on a dp x tp mesh: gradients reduce-scattered over dp, each rank updates its
shard of the parameter (replicated over tp), and the shards are all-gathered over dp.""",
          {"verdict": "verified"}, ref, plan())
    write("zero2_dp2_tp2_gather_wrong_group.mlir", """
BUG: the updated parameter shards are all-gathered over the tensor-parallel group instead
of the data-parallel one, so ranks assemble the parameter from the wrong shards.""",
          {"verdict": "violated", "kind": "sharding", "at": "%w_next"}, ref, plan("wrong_group"))


def main():
    os.makedirs(OUT, exist_ok=True)
    zero2_gather_specs()
    gpt_mlp_specs()
    vocab_embedding_specs()
    sp_reduce_scatter_specs()
    zero2_specs()
    c = dict(BASE)
    ref = reference(c)
    ok = {"verdict": "verified"}
    write("llama_tp2.mlir", """
A Llama-style decoder layer's forward pass and loss, Megatron tensor parallel (tp=2):
attention heads split (column-parallel QKV, row-parallel output projection), SwiGLU MLP
split, vocabulary-parallel LM head and cross-entropy (max and sum all-reduces).""",
          ok, ref, tp_plan(c))
    write("llama_sp2.mlir", """
The Llama-style layer with Megatron sequence parallelism (tp=2): tokens split outside
the tensor-parallel regions, all_gather before them, reduce_scatter after them.""",
          ok, ref, tp_plan(c, sp=True))
    gqa = dict(BASE, nh=4, nkv=1)
    write("llama_tp2_gqa.mlir", """
Grouped-query attention under tensor parallelism with fewer KV heads than ranks
(4 query heads, 1 KV head, tp=2): the KV projection is replicated and every rank
repeats the KV head for its query heads.""", ok, reference(gqa), tp_plan(gqa))
    gqa2 = dict(BASE, nh=4, nkv=2)
    write("llama_tp2_gqa_kv_split.mlir", """
Grouped-query attention with as many KV heads as ranks (4 query heads, 2 KV heads,
tp=2): KV heads split with their query groups.""", ok, reference(gqa2), tp_plan(gqa2))
    write("llama_tp2_fused_qkv.mlir", """
Fused QKV projection under tensor parallelism: the fused weight [Q | K | V] is split
with an interleaved layout (each rank holds its heads of Q, of K and of V).""",
          ok, reference(c, fused=True), tp_plan(c, fused=True))
    write("llama_tp2_fused_qkv_even_split.mlir", """
BUG: the fused QKV weight is split evenly into contiguous column blocks instead of
per Q/K/V segment, so rank 0 holds all of Q and rank 1 all of K, and each rank slices
what it believes are its Q, K and V heads out of the wrong columns.""",
          {"verdict": "violated", "kind": "sharding", "at": "%q"}, reference(c, fused=True),
          tp_plan(c, fused=True, bug="fused_qkv_even_split"))
    write("llama_tp2_backward.mlir", """
The Llama-style layer's forward AND backward pass under Megatron TP (tp=2). The reference
gives the forward pass and the loss and derives every gradient (ref.grad). The plan
writes Megatron's backward segment by segment: vocabulary-parallel cross-entropy
backward by hand; each local segment (final norm, MLP, norm, attention with its heads,
norm) differentiated on its rank with the upstream gradient detached; and the
column-parallel input gradients all-reduced in between.""", ok, reference(c, backward=True),
          tp_plan(c, backward=True))
    write("llama_tp2_backward_mlp_input_grad_not_reduced.mlir", """
BUG (backward): the MLP's input gradient, a partial sum over tp after the column-
parallel gate/up projections, reaches the RMSNorm backward without its all_reduce.""",
          {"verdict": "violated", "kind": "reduction", "at": "%d_x2"}, reference(c, backward=True),
          tp_plan(c, backward=True, bug="mlp_input_grad_not_reduced"))
    write("llama_sp2_backward.mlir", """
The Llama-style layer's forward and backward pass under Megatron sequence parallelism
(tp=2): the backward uses the transposes of the forward collectives (all_gather of the
gradient of a reduce_scatter, reduce_scatter of the gradient of an all_gather), and the
norm weights' gradients, computed from each rank's tokens, are all-reduced.""",
          ok, reference(c, backward=True), tp_plan(c, sp=True, backward=True))
    write("llama_sp2_backward_norm_grad_not_reduced.mlir", """
BUG (backward, sequence parallelism): the gradient of the second RMSNorm's weight is
computed from each rank's own tokens and never all-reduced over tp.""",
          {"verdict": "violated", "kind": "reduction", "at": "%d_w_norm2"}, reference(c, backward=True),
          tp_plan(c, sp=True, backward=True, bug="sp_norm_grad_not_reduced"))
    write("llama_tp2_fused_gate_up.mlir", """
Fused gate/up projection of the SwiGLU MLP under tensor parallelism: the fused weight
[gate | up] is split with an interleaved layout, so each rank holds its columns of both
halves and slices them apart locally.""", ok, reference(c, fused_gate_up=True),
          tp_plan(c, fused_gate_up=True))
    write("llama_tp2_fused_gate_up_even_split.mlir", """
BUG: the fused gate/up weight is split into contiguous column blocks: rank 0 holds the
whole gate projection and rank 1 the whole up projection, so each rank's local "gate"
and "up" slices pair the wrong columns.""",
          {"verdict": "violated", "kind": "sharding", "at": "%gate"}, reference(c, fused_gate_up=True),
          tp_plan(c, fused_gate_up=True, bug="fused_gate_up_even_split"))
    write("llama_tp2_vocab_ce_no_max_allreduce.mlir", """
BUG: vocabulary-parallel cross-entropy without the max all-reduce: each rank shifts its
logits by its own maximum, so the summed exponentials mix different shifts.""",
          {"verdict": "violated", "kind": "reduction", "at": "%row_max_b"}, ref,
          tp_plan(c, bug="no_max_allreduce"))
    write("llama_tp2_residual_in_tp_region.mlir", """
BUG: the residual is added to the row-parallel output before the all_reduce, so the
reduced activation contains the residual tp times.""",
          {"verdict": "violated", "kind": "reduction", "at": "%x2_partial"}, ref,
          tp_plan(c, bug="residual_in_tp_region"))
    write("llama_tp2_gqa_kv_replicated.mlir", """
Grouped-query attention (4 query heads, 2 KV heads, tp=2) with the KV projection
replicated: each rank keeps the KV head of its query group with dist.shard_slice.""",
          ok, reference(gqa2), tp_plan(gqa2, replicate_kv=True))
    write("llama_tp2_gqa_wrong_kv_head.mlir", """
BUG (grouped-query attention, 4 query heads, 2 KV heads, KV replicated): every rank
attends with KV head 0 instead of the head of its own query group.""",
          {"verdict": "violated", "kind": "sharding", "at": "%k_mine"}, reference(gqa2),
          tp_plan(gqa2, bug="gqa_wrong_kv_head", replicate_kv=True))
    norm_grad_specs()
    dp_loss_specs()


if __name__ == "__main__":
    main()
