#!/usr/bin/env python3
"""Generates verify-specs/optimizer/: AdamW (bias correction, decoupled weight decay with
a per-parameter decay mask, step counter) and SGD with momentum, on a flat parameter
buffer, under data parallelism with ZeRO-1, ZeRO-2 and ZeRO-3/FSDP. The buffer has 25
elements and dp = 2, so every shard is padded to 13 (the last rank's ends in padding),
and the seeded optimizer bugs.

The reference keeps its parameters and optimizer state as flat buffers (as ZeRO and FSDP
do) and unflattens them for the model: w [3, 5] (decayed), bias b [5] and norm-style
weight g [5] (not decayed).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import specgen  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "verify-specs", "optimizer")

B, D, F = 4, 3, 5              # batch, input width, output width
NW = D * F                      # decayed elements (the matrix), then bias and weight
N = NW + 2 * F                  # flat buffer: 25
DP = 2
L = (N + DP - 1) // DP          # 13: padded shard
PAD = L * DP - N                # 1
BETA1, BETA2, EPS, LR, WD, MOM = 0.9, 0.999, 1e-8, 0.01, 0.1, 0.9


def t(*shape):
    return "tensor<" + "x".join(str(s) for s in shape) + "xf32>" if shape else "tensor<f32>"


def model(lines, p, rows, x, tgt, loss):
    """Unflattens `p` and computes the mse loss of `rows` rows."""
    lines += [
        f"    %w_flat = ref.slice {p} offsets [0] sizes [{NW}] : {t(N)}",
        f"    %w = ref.reshape %w_flat : {t(NW)} -> {t(D, F)}",
        f"    %b = ref.slice {p} offsets [{NW}] sizes [{F}] : {t(N)}",
        f"    %g = ref.slice {p} offsets [{NW + F}] sizes [{F}] : {t(N)}",
        f"    %h = ref.matmul {x}, %w contract(1, 0) : {t(rows, D)}, {t(D, F)}",
        f"    %hb = ref.bias_add %h, %b : {t(rows, F)}, {t(F)}",
        f"    %gb = ref.broadcast %g dims [1] : {t(F)} -> {t(rows, F)}",
        f"    %y = ref.mul %hb, %gb : {t(rows, F)}",
        f"    {loss} = ref.mse_loss %y, {tgt} : {t(rows, F)}",
    ]


def adamw(lines, n, p, grad, m, v, tstep, mask, role, bug=None):
    """AdamW on `n` elements; returns the names of the new p, m, v."""
    r = f' {{ref.role = "optimizer"}}' if role else ""
    lines += [
        f"    %m_a = ref.scale {m} by {BETA1} : {t(n)}",
        f"    %g_a = ref.scale {grad} by {1 - BETA1!r} : {t(n)}",
        f"    %m_next = ref.add %m_a, %g_a{r} : {t(n)}",
        f"    %g2 = ref.mul {grad}, {grad} : {t(n)}",
        f"    %v_a = ref.scale {v} by {BETA2} : {t(n)}",
        f"    %g2_a = ref.scale %g2 by {1 - BETA2!r} : {t(n)}",
        f"    %v_next = ref.add %v_a, %g2_a{r} : {t(n)}",
        "    // Bias corrections 1 - beta^t for the step count t after this step.",
        f"    %pw1 = ref.power {tstep} base {BETA1}{r} : {t()}",
        f"    %pw2 = ref.power {tstep} base {BETA2}{r} : {t()}",
        f"    %one = ref.constant 1.0 : {t()}",
        f"    %bc1 = ref.sub %one, %pw1 : {t()}",
        f"    %bc2 = ref.sub %one, %pw2 : {t()}",
        f"    %bc1_b = ref.broadcast %bc1 dims [] : {t()} -> {t(n)}",
        f"    %bc2_b = ref.broadcast %bc2 dims [] : {t()} -> {t(n)}",
        f"    %m_hat = ref.div %m_next, %bc1_b : {t(n)}",
        f"    %v_hat = ref.div %v_next, %bc2_b : {t(n)}",
        f"    %v_root = ref.sqrt %v_hat : {t(n)}",
        f"    %eps = ref.constant {EPS:.1e} : {t(n)}",
        f"    %denom = ref.add %v_root, %eps : {t(n)}",
        f"    %upd = ref.div %m_hat, %denom : {t(n)}",
    ]
    if bug == "tail_not_updated":
        lines += [
            f"    // BUG: every rank updates only the first floor({N}/{DP}) = {N // DP} elements of its shard.",
            f"    %upd_ones = ref.constant 1.0 : {t(N // DP)}",
            f"    %upd_zero = ref.constant 0.0 : {t(L - N // DP)}",
            f"    %upd_keep = ref.concat %upd_ones, %upd_zero dim 0 : {t(N // DP)}, {t(L - N // DP)}",
            f"    %upd_used = ref.mul %upd, %upd_keep : {t(n)}",
        ]
        upd = "%upd_used"
    else:
        upd = "%upd"
    lines += [
        "    // Decoupled weight decay, only where the decay mask is 1.",
        f"    %decay = ref.mul {mask}, {p} : {t(n)}",
        f"    %decay_wd = ref.scale %decay by {WD} : {t(n)}",
        f"    %step = ref.add {upd}, %decay_wd : {t(n)}",
        f"    %step_lr = ref.scale %step by {LR} : {t(n)}",
        f"    %p_next = ref.sub {p}, %step_lr{r} : {t(n)}",
    ]
    return "%p_next", "%m_next", "%v_next"


def sgd_momentum(lines, n, p, grad, m, role):
    r = f' {{ref.role = "optimizer"}}' if role else ""
    lines += [
        f"    %m_a = ref.scale {m} by {MOM} : {t(n)}",
        f"    %m_next = ref.add %m_a, {grad}{r} : {t(n)}",
        f"    %step_lr = ref.scale %m_next by {LR} : {t(n)}",
        f"    %p_next = ref.sub {p}, %step_lr{r} : {t(n)}",
    ]
    return "%p_next", "%m_next", None


def mask_full(lines, name, n_total):
    """The decay mask: 1 on the matrix, 0 on bias and weight (and padding)."""
    lines += [
        f"    %{name}_on = ref.constant 1.0 : {t(NW)}",
        f"    %{name}_off = ref.constant 0.0 : {t(n_total - NW)}",
        f"    %{name} = ref.concat %{name}_on, %{name}_off dim 0 : {t(NW)}, {t(n_total - NW)}",
    ]


def reference(opt="adamw"):
    ins = [f'%p: {t(N)} {{ref.name = "p"}}', f'%m: {t(N)} {{ref.name = "m"}}']
    if opt == "adamw":
        ins.append(f'%v: {t(N)} {{ref.name = "v", ref.nonnegative}}')
    ins += ['%t: index {ref.name = "t"}', f'%x: {t(B, D)} {{ref.name = "x"}}',
            f'%tgt: {t(B, F)} {{ref.name = "tgt"}}']
    outs = [f'{t()} {{ref.name = "loss"}}', f'{t(N)} {{ref.name = "p_next", ref.updates = "p"}}',
            f'{t(N)} {{ref.name = "m_next", ref.updates = "m"}}']
    if opt == "adamw":
        outs.append(f'{t(N)} {{ref.name = "v_next", ref.updates = "v"}}')
    outs.append('index {ref.name = "t_next", ref.updates = "t"}')
    lines = ["  func.func @reference(" + (",\n                       ".join(ins)) + ")",
             "      -> (" + ",\n          ".join(outs) + ")",
             "      attributes {ref.reference} {"]
    model(lines, "%p", B, "%x", "%tgt", "%loss")
    lines += [f"    %dp = ref.grad %loss wrt %p : {t()}, {t(N)} -> {t(N)}",
              "    %c1 = arith.constant 1 : index",
              "    %t_next = arith.addi %t, %c1 : index"]
    if opt == "adamw":
        mask_full(lines, "mask", N)
        pn, mn, vn = adamw(lines, N, "%p", "%dp", "%m", "%v", "%t_next", "%mask", True)
        rets = ["%loss", pn, mn, vn, "%t_next"]
        types = [t(), t(N), t(N), t(N), "index"]
    else:
        pn, mn, _ = sgd_momentum(lines, N, "%p", "%dp", "%m", True)
        rets = ["%loss", pn, mn, "%t_next"]
        types = [t(), t(N), t(N), "index"]
    lines += [f"    return {', '.join(rets)} : {', '.join(types)}", "  }", "",
              f'  dist.mesh @mesh axes = ["dp"] shape = [{DP}]', ""]
    return "\n".join(lines) + "\n"


def plan(stage, opt="adamw", bug=None, dp=DP, resume=None, save=None):
    """A ZeRO plan on `dp` data ranks. With `resume` (a mesh name), the plan is the
    resuming function of a checkpoint spec: it loads p, m, v and t instead of taking
    them as arguments. With `save` (a function of the lines), the plan saves its state."""
    L = (N + dp - 1) // dp
    PAD = L * dp - N
    shard = '{dist.value = "%s", dist.layout = #dist.layout<[dp]>, dist.padded}'
    ins = []
    if not resume:
        if stage == 3:
            ins.append(f"%p: {t(L)} " + shard % "p")
        else:
            ins.append(f'%p: {t(N)} {{dist.value = "p", dist.layout = #dist.layout<[_]>}}')
        ins.append(f"%m: {t(L)} " + shard % "m")
        if opt == "adamw":
            ins.append(f"%v: {t(L)} " + shard % "v")
        ins.append('%t: index {dist.value = "t"}')
    rows = B // dp
    ins += [f'%x: {t(rows, D)} {{dist.value = "x", dist.layout = #dist.layout<[dp, _]>}}',
            f'%tgt: {t(rows, F)} {{dist.value = "tgt", dist.layout = #dist.layout<[dp, _]>}}']
    outs = [f'{t()} {{dist.value = "loss", dist.layout = #dist.layout<[]>}}']
    if stage == 3:
        outs.append(f"{t(L)} " + shard % "p_next")
    else:
        outs.append(f'{t(N)} {{dist.value = "p_next", dist.layout = #dist.layout<[_]>}}')
    outs.append(f"{t(L)} " + shard % "m_next")
    if opt == "adamw":
        outs.append(f"{t(L)} " + shard % "v_next")
    outs.append('index {dist.value = "t_next"}')
    name = "resume" if resume else "plan"
    attrs = f"dist.mesh = @{resume}, dist.resume" if resume else "dist.mesh = @mesh"
    lines = [f"  func.func @{name}(" + ",\n                  ".join(ins) + ")",
             "      -> (" + ",\n          ".join(outs) + ")",
             f"      attributes {{{attrs}}} {{"]
    if resume:
        lines += ["    // Resume: the state comes from the checkpoint, this rank's pieces.",
                  "    %zero_i = arith.constant 0 : index",
                  "    %rank_l = dist.axis_index \"dp\" : index",
                  f"    %piece = arith.constant {L if bug != 'load_wrong_offset' else L - 1} : index",
                  "    %off_l = arith.muli %rank_l, %piece : index",
                  f"    %p = dist.load \"p\" shape [{N}] at [%zero_i] : {t(N)}",
                  f"    %m = dist.load \"m\" shape [{N}] at [%off_l] : {t(L)}"]
        if opt == "adamw":
            lines.append(f"    %v = dist.load \"v\" shape [{N}] at [%off_l] : {t(L)}")
        lines.append("    %t = dist.load \"t\" shape [] at [] : index")
    lines.append(f"    %pad = ref.constant 0.0 : {t(PAD)}")
    if stage == 3:
        lines += ["    // ZeRO-3 / FSDP: gather the parameters before use, drop the padding.",
                  f"    %p_gathered = dist.all_gather %p over [\"dp\"] dim 0 : {t(L)} -> {t(L * dp)}",
                  f"    %p_full = ref.slice %p_gathered offsets [0] sizes [{N}] : {t(L * dp)}"]
        p_full = "%p_full"
    else:
        p_full = "%p"
    model(lines, p_full, rows, "%x", "%tgt", "%loss_local")
    if bug == "counter_per_microbatch":
        pass
    lines += [f"    %loss = dist.all_reduce %loss_local over [\"dp\"] \"avg\" : {t()} -> {t()}",
              f"    %grad = ref.grad %loss_local wrt {p_full} : {t()}, {t(N)} -> {t(N)}"]
    if bug == "wrong_offsets":
        lines += ["    // BUG: the padding is put in front, so every shard starts one element early.",
                  f"    %grad_pad = ref.concat %pad, %grad dim 0 : {t(PAD)}, {t(N)}"]
    else:
        lines.append(f"    %grad_pad = ref.concat %grad, %pad dim 0 : {t(N)}, {t(PAD)}")
    if stage == 1:
        lines += ["    // ZeRO-1: gradients all-reduced; each rank keeps its shard.",
                  f"    %grad_full = dist.all_reduce %grad_pad over [\"dp\"] \"avg\" : {t(L * dp)} -> {t(L * dp)}",
                  f"    %grad_sh = dist.shard_slice %grad_full over [\"dp\"] dim 0 : {t(L * dp)} -> {t(L)}"]
    else:
        lines += ["    // ZeRO-2/3: gradients reduce-scattered.",
                  f"    %grad_sh = dist.reduce_scatter %grad_pad over [\"dp\"] dim 0 \"avg\" : {t(L * dp)} -> {t(L)}"]
    if stage == 3:
        p_sh = "%p"
    else:
        lines += [f"    %p_pad = ref.concat %p, %pad dim 0 : {t(N)}, {t(PAD)}",
                  f"    %p_sh = dist.shard_slice %p_pad over [\"dp\"] dim 0 : {t(L * dp)} -> {t(L)}"]
        p_sh = "%p_sh"
    lines += ["    %c1 = arith.constant 1 : index"]
    if bug == "counter_per_microbatch":
        lines += ["    // BUG: the step counter is advanced once per microbatch (2 here).",
                  "    %t_mb0 = arith.addi %t, %c1 : index",
                  "    %t_next = arith.addi %t_mb0, %c1 : index"]
    else:
        lines.append("    %t_next = arith.addi %t, %c1 : index")
    if opt == "adamw":
        if bug == "decay_all":
            lines += ["    // BUG: weight decay on the whole flat shard, norm weight and bias included.",
                      f"    %mask_sh = ref.constant 1.0 : {t(L)}"]
        else:
            mask_full(lines, "mask_pad", L * dp)
            lines.append(f"    %mask_sh = dist.shard_slice %mask_pad over [\"dp\"] dim 0 : {t(L * dp)} -> {t(L)}")
        pn, mn, vn = adamw(lines, L, p_sh, "%grad_sh", "%m", "%v", "%t_next", "%mask_sh", False, bug)
    else:
        pn, mn, _ = sgd_momentum(lines, L, p_sh, "%grad_sh", "%m", False)
        vn = None
    if stage == 3:
        p_out = pn
    else:
        lines += [f"    %p_gathered = dist.all_gather {pn} over [\"dp\"] dim 0 : {t(L)} -> {t(L * dp)}",
                  f"    %p_out = ref.slice %p_gathered offsets [0] sizes [{N}] : {t(L * dp)}"]
        p_out = "%p_out"
    if save:
        save(lines, L, p_out, mn, vn)
    rets = ["%loss", p_out, mn] + ([vn] if vn else []) + ["%t_next"]
    types = [t(), t(L) if stage == 3 else t(N), t(L)] + ([t(L)] if vn else []) + ["index"]
    lines += [f"    return {', '.join(rets)} : {', '.join(types)}", "  }"]
    return "\n".join(lines) + "\n"


def write(name, comment, expect, body):
    specgen.write(OUT, "gen_optimizer_specs.py", name, comment, expect, body)


def main():
    specgen.reset(OUT)
    ok = {"verdict": "verified"}

    def bug(at):
        return {"verdict": "violated", "kind": "optimizer", "at": at}

    for stage, what in [(1, "optimizer state sharded over the data ranks; gradients all-reduced"),
                        (2, "plus gradients reduce-scattered"),
                        (3, "plus parameters sharded and all-gathered before use (FSDP)")]:
        write(f"zero{stage}_adamw_dp2.mlir", f"""
AdamW under ZeRO-{stage} (dp={DP}): {what}. The flat buffer of {N} elements is padded
to {L * DP}, so rank 1's shard of {L} ends in padding. Checked for every element of every
state: owned by exactly one rank, updated with the right gradient, bias correction and
decay mask, and the updated parameters reach every rank that uses them.""",
              ok, reference() + plan(stage))
    write("zero1_sgd_momentum_dp2.mlir", f"""
SGD with momentum (heavy ball, momentum {MOM}) under ZeRO-1 with the padded flat buffer.""",
          ok, reference("sgd") + plan(1, "sgd"))
    write("zero1_adamw_dp2_tail_not_updated.mlir", f"""
BUG: each rank updates only floor({N}/{DP}) = {N // DP} elements of its {L}-element shard:
rank 0's last element (a real parameter) is never updated.""",
          bug("%upd_used"), reference() + plan(1, bug="tail_not_updated"))
    write("zero1_adamw_dp2_decay_all.mlir", """
BUG: weight decay is applied to the whole flat shard, so the bias and the norm-style
weight are decayed too (the per-parameter decay mask is lost in the flat buffer).""",
          bug("%decay_wd"), reference() + plan(1, bug="decay_all"))
    write("zero2_adamw_dp2_wrong_offsets.mlir", """
BUG: the padding is placed before the gradient when the flat buffer is built, so the
reduce-scattered shards are one element off the optimizer state they update.""",
          bug("%grad_pad"), reference() + plan(2, bug="wrong_offsets"))
    write("zero1_adamw_dp2_counter_per_microbatch.mlir", """
BUG: Adam's step counter is advanced once per gradient-accumulation microbatch (twice
per step): the bias corrections and the saved step count are wrong.""",
          bug("%pw1"), reference() + plan(1, bug="counter_per_microbatch"))


if __name__ == "__main__":
    sys.exit(main())
