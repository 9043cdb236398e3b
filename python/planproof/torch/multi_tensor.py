"""The multi-tensor ops of torch.optim and clip_grad_norm_ (foreach and fused kernels),
translated into the per-tensor ops they stand for (rules registered in aten.RULES)."""
import math

import torch

from .aten import RULES, Element, Unsupported, rule

aten = torch.ops.aten


# The foreach ops (torch.optim's and clip_grad_norm_'s `foreach=True` kernels) are lists
# of per-tensor ops: element i of `_foreach_OP(xs, ys, s)` is OP(xs[i], ys[i], s) -- a
# list argument contributes its element i, anything else (a number, one tensor) is
# passed to every element -- and `_foreach_OP_` overwrites xs[i] with it. Each element
# is translated by OP's own rule (so each op keeps one translation); a foreach op whose
# OP has no rule is not covered.
_FOREACH_BASE = {"norm": aten.linalg_vector_norm}
_FOREACH_OVERLOADS = {"Scalar": ("Scalar", "Tensor", "default"),
                      "ScalarList": ("Scalar", "Tensor", "default"),
                      "List": ("Tensor", "default"), "Tensor": ("Tensor", "default"),
                      "default": ("default",)}


def _foreach_target(t, node):
    """The per-tensor op of a foreach op and its rule, and whether it is in place."""
    name = node.target.overloadpacket.__name__[len("_foreach_"):]
    in_place = name.endswith("_")
    base = name[:-1] if in_place else name
    packet = _FOREACH_BASE.get(base) or getattr(aten, base, None)
    for overload in _FOREACH_OVERLOADS.get(node.target._overloadname, ()):
        target = getattr(packet, overload, None) if packet is not None else None
        rule = RULES.get(target) if target is not None else None
        if rule is not None:
            return target, rule, in_place
    t.fail(f"op `{node.target}` (a list of `{base}`s) is not covered: `{base}` has no "
           "translation (docs/torch.md lists the covered ops); the result is inconclusive")


def foreach(t, node, *args, **kwargs):
    target, rule, in_place = _foreach_target(t, node)
    tensors = args[0] if args else None
    if not isinstance(tensors, (list, tuple)) or \
            not all(isinstance(x, torch.fx.Node) for x in tensors):
        t.fail(f"`{node.target}` whose first argument is not a list of tensors")
    n = len(tensors)

    def element(a, i):
        if isinstance(a, (list, tuple)):
            if len(a) != n:
                t.fail(f"`{node.target}` with lists of {n} and {len(a)} elements")
            return a[i]
        return a
    vals = node.meta.get("val")
    results = []
    for i, dest in enumerate(tensors):
        val = dest.meta.get("val") if in_place else \
            (vals[i] if isinstance(vals, (list, tuple)) and len(vals) == n else None)
        el = Element(node, i, target, [element(a, i) for a in args],
                     {k: element(v, i) for k, v in kwargs.items()}, val)
        try:
            result = rule(t, el, *el.args, **el.kwargs)
        except Unsupported as e:
            raise Unsupported(f"`{node.target}`, element {i}: {e.what}", e.loc) from None
        if not isinstance(result, str):
            t.fail(f"element {i} of `{node.target}` is not a tensor planproof models")
        if in_place:
            if t.shapes[result] != t.shapes[t.value(dest)]:
                t.fail(f"`{node.target}` whose element {i} is not of its operand's shape")
            t.overwrite(dest, result)
        results.append(result)
    return None if in_place else tuple(results)


@rule(aten._fused_adamw_.default, aten._fused_adamw_.tensor_lr,
      aten._fused_adam_.default, aten._fused_adam_.tensor_lr)
def _fused_adam(t, node, params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, *,
                lr, beta1, beta2, weight_decay, eps, amsgrad, maximize, grad_scale=None,
                found_inf=None):
    """torch.optim.Adam/AdamW(fused=True) (torchtitan's default optimizer): for each
    tensor i, the update of PyTorch's fused kernel (aten/src/ATen/native/cpu/
    FusedAdamKernel.cpp), at the step count its state holds -- AdamW decays the
    parameter by (1 - lr wd), Adam adds wd p to the gradient; m = beta1 m + (1 - beta1) g,
    v = beta2 v + (1 - beta2) g g, p -= lr / (1 - beta1^step) * m /
    (sqrt(v) / sqrt(1 - beta2^step) + eps), amsgrad's maximum of v's in place of v. It
    overwrites the parameters and both moments."""
    adamw = node.target.overloadpacket is aten._fused_adamw_
    if grad_scale is not None or found_inf is not None:
        t.fail(f"`{node.target}` with a gradient scaler (grad_scale, found_inf)")
    lists = [params, grads, exp_avgs, exp_avg_sqs, steps] + ([max_exp_avg_sqs] if amsgrad else [])
    if not all(isinstance(x, (list, tuple)) and len(x) == len(params) for x in lists):
        t.fail(f"`{node.target}` with lists of different lengths")
    if isinstance(lr, torch.fx.Node):
        lr = t.number(t.value(lr))
        if lr is None:
            t.fail(f"`{node.target}` with a learning rate that is not a constant")
    for i, p in enumerate(params):
        step = t.number(t.value(steps[i]))
        if step is None or step < 1 or step != int(step):
            t.fail(f"`{node.target}` at a step count that is not a constant positive integer")
        shape = t.shapes[t.value(p)]
        for x in (grads[i], exp_avgs[i], exp_avg_sqs[i]):
            if t.shapes[t.value(x)] != shape:
                t.fail(f"`{node.target}`: element {i}'s tensors differ in shape")
        pv, g = t.value(p), t.value(grads[i])
        if maximize:
            g = t.scale(g, -1.0, shape)
        if weight_decay and adamw:
            pv = t.scale(pv, 1.0 - lr * weight_decay, shape)
        elif weight_decay:
            g = t.emit("add", [g, t.scale(t.value(p), weight_decay, shape)], shape)
        m = t.emit("add", [t.scale(t.value(exp_avgs[i]), beta1, shape),
                           t.scale(g, 1.0 - beta1, shape)], shape)
        v = t.emit("add", [t.scale(t.value(exp_avg_sqs[i]), beta2, shape),
                           t.scale(t.emit("mul", [g, g], shape), 1.0 - beta2, shape)], shape)
        second = v
        if amsgrad:
            second = t.emit("maximum", [t.value(max_exp_avg_sqs[i]), v], shape)
            t.overwrite(max_exp_avg_sqs[i], second)
        denom = t.emit("add", [t.emit("div", [t.emit("sqrt", [second], shape),
                                              t.value(math.sqrt(1.0 - beta2 ** step), shape)],
                                      shape),
                               t.value(float(eps), shape)], shape)
        step_size = lr / (1.0 - beta1 ** step)
        update = t.emit("div", [t.scale(m, step_size, shape), denom], shape)
        t.overwrite(exp_avgs[i], m)
        t.overwrite(exp_avg_sqs[i], v)
        t.overwrite(p, t.emit("sub", [pv, update], shape))
    return None
