"""A numeric cross-check of the translation itself: the translated single-device step,
evaluated by `planproof replay` at concrete inputs, against what PyTorch computes there.

The spec built here has the translated reference ops with every input a `literal` of
its concrete value (PyTorch's side computed in float64 where the user's code lets it), and a one-rank "plan" whose outputs are PyTorch's own loss,
gradients (and updated parameters and optimizer state) as literals; `planproof replay` runs the reference in fp64 and compares within
its fp32 error model. A translation rule that misstates an op's meaning shows as a
divergence, whatever the plan does (both sides of a capture share the rules, so a wrong
rule could otherwise hide a plan's bug in that op).
"""
import torch

from .capture import (_Step, _ident, _in_child, _params, _run_step, _trace_reference, eagerly,
                      ignored_values)


@eagerly
def numeric_spec(model_fn, loss_fn, inputs, optimizer=None, **_ignored):
    """(integer input values by name, the cross-check spec)."""
    names = list(inputs)
    ref_inputs, ref_ops, out_names, _, _ = _in_child(
        lambda: _trace_reference(model_fn, loss_fn, inputs, names, optimizer))
    model = model_fn()  # (checkpoint wrappers kept: PyTorch's side recomputes)
    params = _params(model)
    values = {_ident(n): p.detach().clone() for n, p in params}
    values.update(ignored_values(inputs))
    # PyTorch's side runs in float64 (the same values, widened exactly): the check is of
    # the translation's meaning, and PyTorch's fp32 kernels (a blocked, online softmax in
    # SDPA) round differently from the order replay's fp32 error model assumes. Code that
    # casts to float32 itself (`xq.float()` in a rotary embedding) still runs in fp32.
    model = model.double()
    leaves = [p.detach().clone().double().requires_grad_(True) for _, p in params]
    wide = {n: v.double() if v.is_floating_point() else v for n, v in inputs.items()}
    named = _run_step(_Step(model, loss_fn), params, leaves, wide, optimizer)
    if [n for n, _, _ in named] != out_names:
        raise RuntimeError(f"the step's outputs {[n for n, _, _ in named]} are not the "
                           f"traced step's {out_names}")
    outs = [v.detach().clone() for _, v, _ in named]

    def literal(name, t):
        return {"result": name, "op": "literal", "operands": [],
                "attrs": {"values": [float(x) for x in t.detach().double().flatten()]},
                "shape": list(t.shape)}

    # Float inputs become literals; integer inputs (token ids) stay inputs, whose values
    # the caller hands to replay (`--inputs`, one .npy file each): `ids` below.
    ints = [i for i in ref_inputs if i.get("dtype") == "i64"]
    ops = [literal(i["name"], values[i["name"]]) for i in ref_inputs
           if i.get("dtype") != "i64"] + ref_ops
    plan_ops = [literal("torch_" + n, t) for n, t in zip(out_names, outs)]
    ids = {i["name"]: values[i["name"]].flatten() for i in ints}  # (held flat)
    inputs_ref = ints or [{"name": "unused", "shape": [1]}]
    inputs_plan = [{"name": i["name"], "value": i["name"],
                    "layout": {"dims": [None] * len(i["shape"])}} for i in inputs_ref]
    return ids, {
        "planproof": 1,
        "description": "planproof.torch numeric cross-check: the translated reference at "
                       "concrete inputs vs PyTorch's outputs",
        "reference": {"inputs": inputs_ref, "ops": ops, "outputs": out_names},
        "plan": {"mesh": {"name": "mesh", "axes": [{"name": "one", "size": 1}]},
                 "inputs": inputs_plan,
                 "ops": plan_ops,
                 "outputs": [{"name": "torch_" + n, "value": n,
                              "layout": {"dims": [None] * t.dim()}}
                             for n, t in zip(out_names, outs)]},
    }
