#!/usr/bin/env python3
"""Generates verify-specs/fullstep/: the whole training step of the Megatron-style MLP
on a dp x tp mesh -- forward, derived backward, data-parallel gradient reduction,
global-norm gradient clipping and AdamW (bias correction, decoupled weight decay on the
matrices only, a step counter) with optimizer state sharded like the parameters -- and
seeded bugs in its optimizer.

It rewrites the SGD updates of gen_mlp_specs.py's clipped MLP into AdamW, adding the
optimizer state (m, v per parameter, the step count) to both functions' arguments and
results.
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import specgen  # noqa: E402
import gen_mlp_specs as mlp  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "verify-specs", "fullstep")
BETA1, BETA2, EPS, LR, WD = 0.9, 0.999, 1e-8, 0.01, 0.1
DECAYED = {"w1", "w2"}  # matrices decay; biases do not (a per-parameter decay mask)

SGD = re.compile(r"^(\s*)%(\w+) = ref\.sgd_update %(\w+), %(\w+) lr [0-9.e-]+ : (tensor<[^>]*>)$")


def adamw_lines(ind, out, p, g, ty, role, bug):
    r = ' {ref.role = "optimizer"}' if role else ""
    q = f"%{p}_"
    L = [f"{q}ma = ref.scale %m_{p} by {BETA1} : {ty}",
         f"{q}ga = ref.scale %{g} by {1 - BETA1!r} : {ty}",
         f"%m_{p}_next = ref.add {q}ma, {q}ga{r} : {ty}",
         f"{q}g2 = ref.mul %{g}, %{g} : {ty}",
         f"{q}va = ref.scale %v_{p} by {BETA2} : {ty}",
         f"{q}g2a = ref.scale {q}g2 by {1 - BETA2!r} : {ty}",
         f"%v_{p}_next = ref.add {q}va, {q}g2a{r} : {ty}",
         f"{q}bc1 = ref.broadcast %bc1 dims [] : tensor<f32> -> {ty}",
         f"{q}bc2 = ref.broadcast %bc2 dims [] : tensor<f32> -> {ty}",
         f"{q}mhat = ref.div %m_{p}_next, {q}bc1 : {ty}",
         f"{q}vhat = ref.div %v_{p}_next, {q}bc2 : {ty}",
         f"{q}root = ref.sqrt {q}vhat : {ty}",
         f"{q}eps = ref.constant {EPS:.1e} : {ty}",
         f"{q}den = ref.add {q}root, {q}eps : {ty}",
         f"{q}upd = ref.div {q}mhat, {q}den : {ty}"]
    step = f"{q}upd"
    decay = p in DECAYED or (bug == "decay_bias" and p.startswith("b"))
    if decay:
        L += [f"{q}decay = ref.scale %{p} by {WD} : {ty}",
              f"{q}step = ref.add {q}upd, {q}decay : {ty}"]
        step = f"{q}step"
    L += [f"{q}lr = ref.scale {step} by {LR} : {ty}",
          f"%{out} = ref.sub %{p}, {q}lr{r} : {ty}"]
    return [ind + l for l in L]


def to_adamw(text, is_plan, bug=None):
    lines = text.split("\n")
    params = []
    out = []
    for line in lines:
        m = SGD.match(line)
        if not m:
            out.append(line)
            continue
        ind, res, p, g, ty = m.groups()
        if not params:
            c1 = "%c1 = arith.constant 1 : index"
            if bug == "step_per_microbatch" and is_plan:
                out += [ind + c1, ind + "%step_mb = arith.addi %step, %c1 : index",
                        ind + "%step_next = arith.addi %step_mb, %c1 : index"]
            else:
                out += [ind + c1, ind + "%step_next = arith.addi %step, %c1 : index"]
            r = ' {ref.role = "optimizer"}' if not is_plan else ""
            out += [ind + f"%pw1 = ref.power %step_next base {BETA1}{r} : tensor<f32>",
                    ind + f"%pw2 = ref.power %step_next base {BETA2}{r} : tensor<f32>",
                    ind + "%one_f = ref.constant 1.0 : tensor<f32>",
                    ind + "%bc1 = ref.sub %one_f, %pw1 : tensor<f32>",
                    ind + "%bc2 = ref.sub %one_f, %pw2 : tensor<f32>"]
        params.append((p, res, ty))
        out += adamw_lines(ind, res, p, g, ty, not is_plan, bug if is_plan else None)
    text = "\n".join(out)
    # Arguments: the state of every parameter (laid out like the parameter), the step.
    args = []
    for p, res, ty in params:
        am = re.search(rf"%{p}: ({re.escape(ty)}) \{{([^}}]*)\}}", text)
        attrs = am.group(2)
        for s in ("m", "v"):
            a = re.sub(r'(ref\.name|dist\.value) = "\w+"', rf'\1 = "{s}_{p}"', attrs)
            if s == "v" and not is_plan:
                a += ", ref.nonnegative"  # a second moment: the replay draws it >= 0
            args.append(f"%{s}_{p}: {ty} {{{a}}}")
    args.append('%step: index {dist.value = "step"}' if is_plan else '%step: index {ref.name = "step"}')
    head_end = text.index(")\n      -> (")
    text = text[:head_end] + ",\n" + ",\n".join("                       " + a for a in args) + text[head_end:]
    # Results and return values.
    res_end = text.index(")\n      attributes")
    outs = []
    for p, res, ty in params:
        am = re.search(rf"%{p}: ({re.escape(ty)}) \{{([^}}]*)\}}", text)
        attrs = am.group(2)
        for s in ("m", "v"):
            a = re.sub(r'(ref\.name|dist\.value) = "\w+"', rf'\1 = "{s}_{p}_next"', attrs)
            if not is_plan:
                a += f', ref.updates = "{s}_{p}"'
            outs.append(f"{ty} {{{a}}}")
    outs.append('index {dist.value = "step_next"}' if is_plan
                else 'index {ref.name = "step_next", ref.updates = "step"}')
    text = text[:res_end] + ",\n" + ",\n".join("          " + o for o in outs) + text[res_end:]
    rm = re.search(r"return ([^\n]*)\n(\s*): ([^\n]*)", text)
    vals = rm.group(1) + "".join(f", %{s}_{p}_next" for p, _, _ in params for s in ("m", "v")) + ", %step_next"
    types = rm.group(3) + "".join(f", {ty}" for _, _, ty in params for _ in ("m", "v")) + ", index"
    text = text[:rm.start()] + f"return {vals}\n{rm.group(2)}: {types}" + text[rm.end():]
    return text


def write(name, comment, expect, ref, plan):
    specgen.write(OUT, "gen_full_step_specs.py", name, comment, expect, f"{ref}\n{plan}")


def main():
    specgen.reset(OUT)
    grads = [("dw1", mlp.t(4, 4), "0, 1"), ("db1", mlp.t(4), "0"), ("dw2", mlp.t(4, 4), "0, 1"),
             ("db2", mlp.t(4), "0")]
    plan_grads = [("dw1", mlp.t(4, 2), "0, 1"), ("db1", mlp.t(2), "0"), ("dw2", mlp.t(2, 4), "0, 1"),
                  ("db2", mlp.t(4), "0")]
    sharded = {"dw1", "db1", "dw2"}
    ref = to_adamw(mlp.with_clipping(mlp.reference_autodiff(4, 4, 4, False), grads), False)

    def plan(bug=None):
        return to_adamw(mlp.with_clipping(mlp.dp_tp_plan(4, 4, 4, 2, 2), plan_grads, sharded), True, bug)

    write("mlp_dp2_tp2_clip_adamw.mlir", """
The whole step of a Megatron-style MLP on dp=2 x tp=2: forward, derived backward,
data-parallel gradient all-reduce, global-norm clipping over the tp shards (replicated
biases counted once), and AdamW with bias correction, weight decay on the matrices only
and a step counter, its state sharded like the parameters. Every parameter, every
moment and the step count must equal the single-device step's.""",
          {"verdict": "verified"}, ref, plan())
    write("mlp_dp2_tp2_clip_adamw_decay_bias.mlir", """
BUG: weight decay is applied to the biases as well (the decay mask of the parameter
groups is lost).""", {"verdict": "violated", "kind": "optimizer", "at": "%b1_decay"}, ref,
          plan("decay_bias"))
    write("mlp_dp2_tp2_clip_adamw_step_per_microbatch.mlir", """
BUG: the step counter advances twice per step (once per microbatch): the bias
corrections use the wrong count.""", {"verdict": "violated", "kind": "optimizer", "at": "%pw1"}, ref,
          plan("step_per_microbatch"))


if __name__ == "__main__":
    sys.exit(main())
