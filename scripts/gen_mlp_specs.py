#!/usr/bin/env python3
"""Generates the Megatron-style MLP specs in verify-specs/mlp/.

One reference (a 2-layer MLP training step: forward, MSE loss, backward, SGD) and plans
on a 1-D tensor-parallel mesh or a 2-D data x tensor mesh, plus seeded-bug variants, each
a small, realistic edit of a correct plan. Every file states the verdict it must get in
`planproof.expect`, and `planproof check-specs verify-specs` holds the verifier to it.

Run from the repository root: python3 scripts/gen_mlp_specs.py
"""
import os
import re

OUT = os.path.join(os.path.dirname(__file__), "..", "verify-specs", "mlp")


def t(*shape):
    return "tensor<" + "x".join(str(s) for s in shape) + ("x" if shape else "") + "f32>"


def layout(*dims, **partial):
    d = ", ".join(dims)
    p = "".join(f", {k} = [{', '.join(v)}]" for k, v in partial.items())
    return f"#dist.layout<[{d}]{p}>"


def reference(B, H, F, with_dx):
    outs = [("loss", t()), ("w1_next", t(H, F)), ("b1_next", t(F)), ("w2_next", t(F, H)),
            ("b2_next", t(H))]
    vals = ["%loss", "%w1n", "%b1n", "%w2n", "%b2n"]
    if with_dx:
        outs.insert(1, ("dx", t(B, H)))
        vals.insert(1, "%dx")
    res = ",\n          ".join(f'{ty} {{ref.name = "{n}"}}' for n, ty in outs)
    dx = f"    %dx = ref.matmul %dh, %w1 contract(1, 1) : {t(B, F)}, {t(H, F)}\n" if with_dx else ""
    return f"""  func.func @reference(%x: {t(B, H)} {{ref.name = "x"}},
                       %w1: {t(H, F)} {{ref.name = "w1"}},
                       %b1: {t(F)} {{ref.name = "b1"}},
                       %w2: {t(F, H)} {{ref.name = "w2"}},
                       %b2: {t(H)} {{ref.name = "b2"}},
                       %t: {t(B, H)} {{ref.name = "t"}})
      -> ({res})
      attributes {{ref.reference}} {{
    %h_pre = ref.matmul %x, %w1 contract(1, 0) : {t(B, H)}, {t(H, F)}
    %h_b = ref.bias_add %h_pre, %b1 : {t(B, F)}, {t(F)}
    %a = ref.gelu %h_b : {t(B, F)}
    %y_pre = ref.matmul %a, %w2 contract(1, 0) : {t(B, F)}, {t(F, H)}
    %y = ref.bias_add %y_pre, %b2 : {t(B, H)}, {t(H)}
    %loss = ref.mse_loss %y, %t : {t(B, H)}
    %dy = ref.mse_loss_grad %y, %t : {t(B, H)}
    %db2 = ref.reduce_sum %dy dims [0] : {t(B, H)}
    %dw2 = ref.matmul %a, %dy contract(0, 0) : {t(B, F)}, {t(B, H)}
    %da = ref.matmul %dy, %w2 contract(1, 1) : {t(B, H)}, {t(F, H)}
    %dh = ref.gelu_grad %h_b, %da : {t(B, F)}
    %db1 = ref.reduce_sum %dh dims [0] : {t(B, F)}
    %dw1 = ref.matmul %x, %dh contract(0, 0) : {t(B, H)}, {t(B, F)}
{dx}    %w1n = ref.sgd_update %w1, %dw1 lr 0.1 : {t(H, F)}
    %b1n = ref.sgd_update %b1, %db1 lr 0.1 : {t(F)}
    %w2n = ref.sgd_update %w2, %dw2 lr 0.1 : {t(F, H)}
    %b2n = ref.sgd_update %b2, %db2 lr 0.1 : {t(H)}
    return {", ".join(vals)}
        : {", ".join(ty for _, ty in outs)}
  }}
"""


def reference_autodiff(B, H, F, with_dx):
    """The same step with the backward pass derived by planproof (ref.grad)."""
    text = reference(B, H, F, with_dx)
    start = text.index("    %dy = ref.mse_loss_grad")
    end = text.index("    %w1n = ref.sgd_update")
    wrt = ["x", "w1", "b1", "w2", "b2"] if with_dx else ["w1", "b1", "w2", "b2"]
    types = {"x": t(B, H), "w1": t(H, F), "b1": t(F), "w2": t(F, H), "b2": t(H)}
    grads = ", ".join("%d" + w for w in wrt)
    derived = (f"    // The backward pass is derived: planproof differentiates the loss.\n"
               f"    {grads} = ref.grad %loss wrt {', '.join('%' + w for w in wrt)}\n"
               f"        : {t()}, {', '.join(types[w] for w in wrt)}\n"
               f"        -> {', '.join(types[w] for w in wrt)}\n")
    return text[:start] + derived + text[end:]


def clipping(grads, plan_sharded=None, axes=("tp",), bug=None):
    """Global-norm gradient clipping lines. grads: [(grad value, type, dims)] in order.
    plan_sharded: for a plan, the grads whose squares are partial sums over `axes`
    (shards of a split parameter); the others are complete on every rank and are
    counted once, after the all_reduce. Returns (lines, {grad: clipped grad})."""
    L, out = [], {}
    for g, ty, dims in grads:
        L += [f"%sq_{g} = ref.mul %{g}, %{g} : {ty}",
              f"%ss_{g} = ref.reduce_sum %sq_{g} dims [{dims}] : {ty}"]
    scalar = t()

    role_attr = ' {ref.role = "grad-norm"}'

    def chain(names, result, role=True):
        acc = f"%ss_{names[0]}"
        for i, n in enumerate(names[1:]):
            dst = result if i == len(names) - 2 else f"%{result[1:]}_{i}"
            attr = role_attr if role and plan_sharded is None else ""
            L.append(f"{dst} = ref.add {acc}, %ss_{n}{attr} : {scalar}")
            acc = dst
        return acc
    if plan_sharded is None:
        total = chain([g for g, _, _ in grads], "%total")
    else:
        shard = [g for g, _, _ in grads if g in plan_sharded]
        rep = [g for g, _, _ in grads if g not in plan_sharded]
        if bug == "replicated_counted_tp_times":
            L.append("// BUG: replicated parameters are summed before the all_reduce (counted tp times).")
            local = chain(shard + rep, "%ss_local")
            L.append(f'%total = dist.all_reduce {local} over ["tp"] "sum" : {scalar} -> {scalar}')
        else:
            local = chain(shard, "%ss_local") if len(shard) > 1 else f"%ss_{shard[0]}"
            if bug == "rank_local_norm":
                L.append("// BUG: the norm is taken from this rank's shards only.")
                reduced = local
            else:
                ax = ", ".join(f'"{a}"' for a in (("dp",) + tuple(axes) if bug == "reduced_over_dp_too" else axes))
                if bug == "reduced_over_dp_too":
                    L.append("// BUG: the sum of squares is all-reduced over the data axis as well.")
                if bug == "sum_of_local_norms":
                    L += ["// BUG: each rank takes the norm of its shards and the norms are summed",
                          "// (the norm of the partial gradients is not the sum of their norms).",
                          f"%norm_local = ref.sqrt {local} : {scalar}",
                          f"%norm_sum = dist.all_reduce %norm_local over [{ax}] \"sum\" : {scalar} -> {scalar}",
                          f"%ss_shards = ref.mul %norm_sum, %norm_sum : {scalar}"]
                else:
                    if bug == "eps_per_rank":
                        L += ["// BUG: every rank adds epsilon to its partial sum of squares, so the",
                              "// reduced sum carries it once per rank.",
                              f"%eps_local = ref.constant 1.0e-6 : {scalar}",
                              f"%ss_local_eps = ref.add {local}, %eps_local : {scalar}"]
                        local = "%ss_local_eps"
                    L.append(f"%ss_shards = dist.all_reduce {local} over [{ax}] \"sum\" : {scalar} -> {scalar}")
                reduced = "%ss_shards"
            acc = reduced
            for i, n in enumerate(rep):
                dst = "%total" if i == len(rep) - 1 else f"%total_{i}"
                L.append(f"{dst} = ref.add {acc}, %ss_{n} : {scalar}")
                acc = dst
    L += [f'%norm = ref.sqrt %total {{ref.role = "grad-norm"}} : {scalar}',
          f"%eps = ref.constant 1.0e-6 : {scalar}",
          f"%norm_eps = ref.add %norm, %eps : {scalar}",
          f"%max_norm = ref.constant 1.0 : {scalar}",
          f"%ratio = ref.div %max_norm, %norm_eps : {scalar}",
          f"%one = ref.constant 1.0 : {scalar}",
          f'%coef = ref.minimum %one, %ratio {{ref.role = "grad-norm"}} : {scalar}']
    for g, ty, dims in grads:
        L += [f"%coef_{g} = ref.broadcast %coef dims [] : {scalar} -> {ty}",
              f"%c{g} = ref.mul %{g}, %coef_{g} : {ty}"]
        out[g] = f"c{g}"
    return L, out


def with_clipping(text, grads, plan_sharded=None, bug=None):
    """Inserts clipping before the SGD updates of a generated reference or plan, and
    makes the updates use the clipped gradients."""
    marker = "%w1n = ref.sgd_update"
    lines = text.split("\n")
    at = next(i for i, l in enumerate(lines) if marker in l)
    indent = lines[at][: len(lines[at]) - len(lines[at].lstrip())]
    body, out = clipping(grads, plan_sharded, bug=bug)
    lines[at:at] = [indent + l for l in body]
    text = "\n".join(lines)
    for g in out:
        text = re.sub(rf"(ref\.sgd_update %\w+, )%{g}( lr)", rf"\1%{out[g]}\2", text)
    return text


def tp_plan(B, H, F, tp, bug=None):
    """Megatron TP on mesh [tp]: column-parallel w1/b1, row-parallel w2."""
    f = F // tp
    w1_layout, w1_local = layout("_", "tp"), (H, f)
    h_pre = f"%h_pre = ref.matmul %x, %w1 contract(1, 0) : {t(B, H)}, {t(H, f)}"
    dw1 = f"%dw1 = ref.matmul %x, %dh contract(0, 0) : {t(B, H)}, {t(B, f)}"
    dx_part = f"%dx_part = ref.matmul %dh, %w1 contract(1, 1) : {t(B, f)}, {t(H, f)}"
    if bug == "col_weight_wrong_dim":
        # The column-parallel weight is split along its input dimension (rows), and the
        # plan, reading the [out, in] convention, contracts against the wrong side.
        w1_layout, w1_local = layout("tp", "_"), (H // tp, F)
        h_pre = f"%h_pre = ref.matmul %x, %w1 contract(1, 1) : {t(B, H)}, {t(H // tp, F)}"
        dw1 = f"%dw1 = ref.matmul %dh, %x contract(0, 0) : {t(B, f)}, {t(B, H)}"
        dx_part = f"%dx_part = ref.matmul %dh, %w1 contract(1, 0) : {t(B, f)}, {t(H // tp, F)}"
    y = [f"%y_part = ref.matmul %a, %w2 contract(1, 0) : {t(B, f)}, {t(f, H)}"]
    if bug == "missing_row_allreduce":
        y += [f"%y = ref.bias_add %y_part, %b2 : {t(B, H)}, {t(H)}"]
    elif bug == "bias_before_allreduce":
        y += [f"%y_b = ref.bias_add %y_part, %b2 : {t(B, H)}, {t(H)}",
              f'%y = dist.all_reduce %y_b over ["tp"] "sum" : {t(B, H)} -> {t(B, H)}']
    else:
        kind = "avg" if bug == "row_allreduce_avg" else "sum"
        y += [f'%y_pre = dist.all_reduce %y_part over ["tp"] "{kind}" : {t(B, H)} -> {t(B, H)}',
              f"%y = ref.bias_add %y_pre, %b2 : {t(B, H)}, {t(H)}"]
    if bug == "missing_dx_allreduce":
        dx = [dx_part]
        dx_val = "%dx_part"
    else:
        dx = [dx_part, f'%dx = dist.all_reduce %dx_part over ["tp"] "sum" : {t(B, H)} -> {t(B, H)}']
        dx_val = "%dx"
    w1n_ty = t(*w1_local)
    body = [
        "// Column-parallel linear: each rank computes its slice of the hidden features.",
        h_pre,
        f"%h_b = ref.bias_add %h_pre, %b1 : {t(B, f)}, {t(f)}",
        f"%a = ref.gelu %h_b : {t(B, f)}",
        "// Row-parallel linear: partial sums over tp, completed before the bias.",
        *y,
        f"%loss = ref.mse_loss %y, %t : {t(B, H)}",
        "// Backward.",
        f"%dy = ref.mse_loss_grad %y, %t : {t(B, H)}",
        f"%db2 = ref.reduce_sum %dy dims [0] : {t(B, H)}",
        f"%dw2 = ref.matmul %a, %dy contract(0, 0) : {t(B, f)}, {t(B, H)}",
        f"%da = ref.matmul %dy, %w2 contract(1, 1) : {t(B, H)}, {t(f, H)}",
        f"%dh = ref.gelu_grad %h_b, %da : {t(B, f)}",
        f"%db1 = ref.reduce_sum %dh dims [0] : {t(B, f)}",
        dw1,
        "// The input gradient of the column-parallel layer is a partial sum over tp.",
        *dx,
        "// SGD on the local shards.",
        f"%w1n = ref.sgd_update %w1, %dw1 lr 0.1 : {w1n_ty}",
        f"%b1n = ref.sgd_update %b1, %db1 lr 0.1 : {t(f)}",
        f"%w2n = ref.sgd_update %w2, %dw2 lr 0.1 : {t(f, H)}",
        f"%b2n = ref.sgd_update %b2, %db2 lr 0.1 : {t(H)}",
    ]
    outs = [("loss", t(), layout()), ("dx", t(B, H), layout("_", "_")),
            ("w1_next", w1n_ty, w1_layout), ("b1_next", t(f), layout("tp")),
            ("w2_next", t(f, H), layout("tp", "_")), ("b2_next", t(H), layout("_"))]
    vals = ["%loss", dx_val, "%w1n", "%b1n", "%w2n", "%b2n"]
    args = [("x", t(B, H), layout("_", "_")), ("w1", w1n_ty, w1_layout),
            ("b1", t(f), layout("tp")), ("w2", t(f, H), layout("tp", "_")),
            ("b2", t(H), layout("_")), ("t", t(B, H), layout("_", "_"))]
    return plan_func("[\"tp\"]", f"[{tp}]", args, body, outs, vals)


def dp_tp_plan(B, H, F, dp, tp, bug=None):
    """DP x TP on mesh [dp, tp]: the batch split over dp, Megatron TP inside, gradients
    averaged over dp (the loss is a mean over the global batch)."""
    b, f = B // dp, F // tp
    grad_kind = "sum" if bug == "dp_grad_sum" else "avg"
    body = [
        "// Forward on the local batch, as in the TP plan.",
        f"%h_pre = ref.matmul %x, %w1 contract(1, 0) : {t(b, H)}, {t(H, f)}",
        f"%h_b = ref.bias_add %h_pre, %b1 : {t(b, f)}, {t(f)}",
        f"%a = ref.gelu %h_b : {t(b, f)}",
        f"%y_part = ref.matmul %a, %w2 contract(1, 0) : {t(b, f)}, {t(f, H)}",
        *(["// BUG: the row-parallel all_reduce runs over the data-parallel group."]
          if bug == "wrong_group" else []),
        f'%y_pre = dist.all_reduce %y_part over ["{"dp" if bug == "wrong_group" else "tp"}"] "sum" : {t(b, H)} -> {t(b, H)}',
        f"%y = ref.bias_add %y_pre, %b2 : {t(b, H)}, {t(H)}",
        "// A mean over the local batch: the global mean is the average over dp.",
        f"%loss_local = ref.mse_loss %y, %t : {t(b, H)}",
        f'%loss = dist.all_reduce %loss_local over ["dp"] "avg" : {t()} -> {t()}',
        f"%dy = ref.mse_loss_grad %y, %t : {t(b, H)}",
        f"%db2_local = ref.reduce_sum %dy dims [0] : {t(b, H)}",
        f"%dw2_local = ref.matmul %a, %dy contract(0, 0) : {t(b, f)}, {t(b, H)}",
        f"%da = ref.matmul %dy, %w2 contract(1, 1) : {t(b, H)}, {t(f, H)}",
        f"%dh = ref.gelu_grad %h_b, %da : {t(b, f)}",
        f"%db1_local = ref.reduce_sum %dh dims [0] : {t(b, f)}",
        f"%dw1_local = ref.matmul %x, %dh contract(0, 0) : {t(b, H)}, {t(b, f)}",
        *([f"// BUG: the local gradient is divided by dp before an averaging all_reduce.",
           f"%dw2_scaled = ref.scale %dw2_local by {1 / dp} : {t(f, H)}"] if bug == "dp_avg_twice" else []),
        "// Data-parallel gradient reduction.",
        f'%dw1 = dist.all_reduce %dw1_local over ["dp"] "avg" : {t(H, f)} -> {t(H, f)}',
        f'%db1 = dist.all_reduce %db1_local over ["dp"] "avg" : {t(f)} -> {t(f)}',
        f'%dw2 = dist.all_reduce {"%dw2_scaled" if bug == "dp_avg_twice" else "%dw2_local"} over ["dp"] "{grad_kind}" : {t(f, H)} -> {t(f, H)}',
        f'%db2 = dist.all_reduce %db2_local over ["dp"] "avg" : {t(H)} -> {t(H)}',
        f"%w1n = ref.sgd_update %w1, %dw1 lr 0.1 : {t(H, f)}",
        f"%b1n = ref.sgd_update %b1, %db1 lr 0.1 : {t(f)}",
        f"%w2n = ref.sgd_update %w2, %dw2 lr 0.1 : {t(f, H)}",
        f"%b2n = ref.sgd_update %b2, %db2 lr 0.1 : {t(H)}",
    ]
    outs = [("loss", t(), layout()), ("w1_next", t(H, f), layout("_", "tp")),
            ("b1_next", t(f), layout("tp")), ("w2_next", t(f, H), layout("tp", "_")),
            ("b2_next", t(H), layout("_"))]
    vals = ["%loss", "%w1n", "%b1n", "%w2n", "%b2n"]
    args = [("x", t(b, H), layout("dp", "_")), ("w1", t(H, f), layout("_", "tp")),
            ("b1", t(f), layout("tp")), ("w2", t(f, H), layout("tp", "_")),
            ("b2", t(H), layout("_")), ("t", t(b, H), layout("dp", "_"))]
    return plan_func('["dp", "tp"]', f"[{dp}, {tp}]", args, body, outs, vals)


def plan_func(axes, shape, args, body, outs, vals):
    a = ",\n                  ".join(
        f'%{n}: {ty} {{dist.value = "{n}", dist.layout = {lay}}}' for n, ty, lay in args)
    o = ",\n          ".join(
        f'{ty} {{dist.value = "{n}", dist.layout = {lay}}}' for n, ty, lay in outs)
    b = "\n".join("    " + line for line in body)
    return f"""  dist.mesh @mesh axes = {axes} shape = {shape}

  func.func @plan({a})
      -> ({o})
      attributes {{dist.mesh = @mesh}} {{
{b}
    return {", ".join(vals)}
        : {", ".join(ty for _, ty, _ in outs)}
  }}
"""


def write(name, header, expect, ref, plan):
    exp = ", ".join(f'{k} = "{v}"' for k, v in expect.items())
    text = (f"// GENERATED by scripts/gen_mlp_specs.py -- edit the generator, not this file.\n"
            f"//\n{header}"
            f"module attributes {{planproof.expect = {{{exp}}}}} {{\n{ref}\n{plan}}}\n")
    with open(os.path.join(OUT, name), "w") as fh:
        fh.write(text)


def comment(text):
    return "".join("// " + line + "\n" for line in text.strip().splitlines())


def main():
    os.makedirs(OUT, exist_ok=True)
    ref_tp = reference(2, 4, 4, True)
    ref_tp4 = reference(2, 4, 8, True)
    ref_dp = reference(4, 4, 4, False)
    ok = {"verdict": "verified"}
    write("mlp_tp2.mlir", comment("""
Megatron-style tensor-parallel MLP training step, TP=2 on a 1-D mesh.
Reference: y = gelu(x @ w1 + b1) @ w2 + b2, loss = mse(y, t), backward, SGD.
Plan: w1/b1 column-parallel (split on the hidden features), w2 row-parallel (split on
its input features): the second matmul yields partial sums completed by one
all_reduce(sum); in the backward pass the input gradient of the column-parallel layer
is a partial sum too and needs its own all_reduce."""), ok, ref_tp, tp_plan(2, 4, 4, 2))
    write("mlp_tp4.mlir", comment("The TP MLP on a 1-D mesh of 4 ranks (hidden 8: 2 features per shard)."),
          ok, ref_tp4, tp_plan(2, 4, 8, 4))
    write("mlp_dp2_tp2.mlir", comment("""
The MLP on a 2-D mesh: data parallel (dp=2, batch split) x tensor parallel (tp=2).
The loss is a mean over the global batch, so each rank's local-mean gradients are
averaged over dp; the loss itself is averaged over dp."""), ok, ref_dp, dp_tp_plan(4, 4, 4, 2, 2))
    bugs = [
        ("mlp_tp2_missing_row_allreduce.mlir", "missing_row_allreduce", "reduction", "%y", """
BUG: the all_reduce after the row-parallel matmul is missing, so each rank adds the
bias to its partial sum and uses that as the output."""),
        ("mlp_tp2_row_allreduce_avg.mlir", "row_allreduce_avg", "reduction", "%y_pre", """
BUG: the row-parallel all_reduce averages instead of summing the partial products."""),
        ("mlp_tp2_col_weight_wrong_dim.mlir", "col_weight_wrong_dim", "sharding", "%h_pre", """
BUG: the column-parallel weight is split along the wrong dimension (its rows, the
contraction dimension) and contracted as if it were stored transposed."""),
        ("mlp_tp2_missing_dx_allreduce.mlir", "missing_dx_allreduce", "reduction", "%dx_part", """
BUG: the backward all_reduce of the input gradient of the column-parallel layer is
missing; each rank returns its partial sum as the full gradient."""),
        ("mlp_tp2_bias_before_allreduce.mlir", "bias_before_allreduce", "reduction", "%y_b", """
BUG: the row-parallel bias is added on every rank before the all_reduce, so the
reduced output contains the bias tp times."""),
    ]
    for name, bug, kind, at, text in bugs:
        write(name, comment(text), {"verdict": "violated", "kind": kind, "at": at}, ref_tp,
              tp_plan(2, 4, 4, 2, bug))
    write("mlp_tp4_row_allreduce_avg.mlir", comment("""
BUG (TP=4): the row-parallel all_reduce averages instead of summing."""),
          {"verdict": "violated", "kind": "reduction", "at": "%y_pre"}, ref_tp4,
          tp_plan(2, 4, 8, 4, "row_allreduce_avg"))
    write("mlp_tp2_autodiff.mlir", comment("""
The TP=2 MLP plan checked against a reference that gives only the forward pass and
the loss: planproof derives the reference gradients (ref.grad) and proves the plan's
hand-written parallel backward pass equal to them."""), ok, reference_autodiff(2, 4, 4, True),
          tp_plan(2, 4, 4, 2))
    write("mlp_dp2_tp2_autodiff_grad_sum.mlir", comment("""
BUG (against a derived reference backward pass): the data-parallel gradient of w2 is
reduced by sum where the loss is a mean over the global batch."""),
          {"verdict": "violated", "kind": "reduction", "at": "%dw2"}, reference_autodiff(4, 4, 4, False),
          dp_tp_plan(4, 4, 4, 2, 2, "dp_grad_sum"))
    # Global-norm gradient clipping.
    ref_grads = [("dw1", t(4, 4), "0, 1"), ("db1", t(4), "0"), ("dw2", t(4, 4), "0, 1"),
                 ("db2", t(4), "0")]
    plan_grads = [("dw1", t(4, 2), "0, 1"), ("db1", t(2), "0"), ("dw2", t(2, 4), "0, 1"),
                  ("db2", t(4), "0")]
    ref_clip = with_clipping(reference_autodiff(2, 4, 4, True), ref_grads)
    sharded = {"dw1", "db1", "dw2"}
    write("mlp_tp2_grad_clip.mlir", comment("""
Global-norm gradient clipping under TP=2 against a derived reference: the squares of
the sharded gradients are summed locally and all-reduced over tp; the replicated bias
gradient is counted once, after the all_reduce; every rank applies the same clip
coefficient min(1, max_norm / (norm + eps))."""), ok, ref_clip,
          with_clipping(tp_plan(2, 4, 4, 2), plan_grads, sharded))
    write("mlp_tp2_grad_clip_replicated_counted_twice.mlir", comment("""
BUG: the replicated bias gradient's squares are added before the all_reduce over tp,
so the replicated parameter counts tp times in the gradient norm."""),
          {"verdict": "violated", "kind": "grad-norm", "at": "%ss_local"}, ref_clip,
          with_clipping(tp_plan(2, 4, 4, 2), plan_grads, sharded, "replicated_counted_tp_times"))
    write("mlp_tp2_grad_clip_rank_local_norm.mlir", comment("""
BUG: clipping with a rank-local norm: the squares of the sharded gradients are not
all-reduced, so each rank clips with a different coefficient."""),
          {"verdict": "violated", "kind": "grad-norm", "at": "%total"}, ref_clip,
          with_clipping(tp_plan(2, 4, 4, 2), plan_grads, sharded, "rank_local_norm"))
    write("mlp_tp2_grad_clip_sum_of_local_norms.mlir", comment("""
BUG: the norm of the sharded gradients is taken as the sum of the ranks' local norms
(sqrt of each rank's sum of squares, summed over tp) instead of the square root of the
summed squares."""),
          {"verdict": "violated", "kind": "grad-norm", "at": "%norm_local"}, ref_clip,
          with_clipping(tp_plan(2, 4, 4, 2), plan_grads, sharded, "sum_of_local_norms"))
    write("mlp_tp2_grad_clip_eps_per_rank.mlir", comment("""
BUG: every rank adds epsilon to its partial sum of squares before the all_reduce, so the
global sum carries epsilon tp times.
REPLAY: invisible to numerics: the extra epsilon (1e-6 against a sum of squares of
order 1) changes the clipped gradients by about 1e-7 relative, inside fp32 rounding;
only the proof sees it."""),
          {"verdict": "violated", "kind": "grad-norm", "at": "%ss_local_eps"}, ref_clip,
          with_clipping(tp_plan(2, 4, 4, 2), plan_grads, sharded, "eps_per_rank"))
    ref_clip_dp = with_clipping(reference_autodiff(4, 4, 4, False), ref_grads)
    write("mlp_dp2_tp2_grad_clip.mlir", comment("""
Global-norm gradient clipping on a dp x tp mesh: after the data-parallel reduction the
gradients are replicated over dp, so the squares of the tp shards are all-reduced over
tp only."""), ok, ref_clip_dp, with_clipping(dp_tp_plan(4, 4, 4, 2, 2), plan_grads, sharded))
    write("mlp_dp2_tp2_grad_clip_reduced_over_dp.mlir", comment("""
BUG: the sum of squares is all-reduced over the data axis as well as the tensor axis,
although the gradients are already replicated over dp: the norm is inflated by dp."""),
          {"verdict": "violated", "kind": "grad-norm", "at": "%ss_shards"}, ref_clip_dp,
          with_clipping(dp_tp_plan(4, 4, 4, 2, 2), plan_grads, sharded, "reduced_over_dp_too"))
    write("mlp_dp2_tp2_allreduce_wrong_group.mlir", comment("""
BUG: the row-parallel all_reduce is issued on the data-parallel process group instead
of the tensor-parallel one (a wrong communicator), summing activations of different
samples."""), {"verdict": "violated", "kind": "reduction", "at": "%y_pre"}, ref_dp,
          dp_tp_plan(4, 4, 4, 2, 2, "wrong_group"))
    write("mlp_dp2_tp2_avg_twice.mlir", comment("""
BUG: the data-parallel gradient of w2 is averaged twice: divided by dp locally, then
all-reduced with "avg" (the loss is already a mean over the global batch). Divided by
dp, the local gradients are partial sums, so the report asks for "sum" at the
all_reduce -- or, equally, for dropping the division."""),
          {"verdict": "violated", "kind": "reduction", "at": "%dw2"}, ref_dp,
          dp_tp_plan(4, 4, 4, 2, 2, "dp_avg_twice"))
    write("mlp_dp2_tp2_grad_sum.mlir", comment("""
BUG: the data-parallel gradient of w2 is reduced by sum, but the loss is a mean over
the global batch, so each rank's local-mean gradient must be averaged: w2 moves dp
times too far."""), {"verdict": "violated", "kind": "reduction", "at": "%dw2"}, ref_dp,
          dp_tp_plan(4, 4, 4, 2, 2, "dp_grad_sum"))


if __name__ == "__main__":
    main()
