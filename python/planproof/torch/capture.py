"""Capture of a PyTorch training step, single-device and parallel, as a planproof spec.

Both steps are traced with `make_fx` into graphs of aten ops; the parallel one runs on
a fake process group (no communication, one process: rank 0's program, which is every
rank's program for DTensor's SPMD rules) with the DTensors created *inside* the traced
function from their local shards (`DTensor.from_local`), so that the shards are inputs
of the graph rather than constants baked into it. The functional collectives DTensor
issues (`_c10d_functional.all_reduce`, ...) name their process group; the device mesh
says which mesh dimension each group is. Placements become planproof layouts:
`Shard(d)` splits tensor dim `d` over the mesh dim's axis, `Partial(op)` marks a partial
value, `Replicate()` nothing.

What the verifier then checks: the plan's loss and every parameter's gradient (as the
shards the placements say) equal the reference step's, for every input.
"""
import contextlib
import math
import os
import pickle
import re
import traceback
import warnings

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard
from torch.fx.experimental.proxy_tensor import make_fx

from .aten import Translator, Unsupported


@contextlib.contextmanager
def _user_stack_traces():
    """FX keeps a node's stack trace from the first `forward` frame on, which drops the
    user's loss function and hooks (a ParallelStyle's output function); during capture
    every frame is kept, and `aten.user_loc` picks the innermost one of the user's."""
    tracer = torch.fx.proxy.TracerBase
    saved = tracer._filter_traceback_frames
    tracer._filter_traceback_frames = lambda self, summary: summary
    try:
        yield
    finally:
        tracer._filter_traceback_frames = saved


@contextlib.contextmanager
def _anomaly():
    """Anomaly mode (each autograd node keeps its forward op's stack), without its warning."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Anomaly Detection has been enabled")
        with torch.autograd.detect_anomaly(check_nan=False):
            yield


def _grad_with_forward_lines(loss, wrt):
    """torch.autograd.grad(loss, wrt), each backward op recorded with the stack trace of
    the forward op it differentiates (kept by anomaly mode on the autograd node), so that
    backward ops carry the user's line too."""
    from torch.fx import traceback as fx_traceback
    seen, todo = set(), [loss.grad_fn]
    while todo:
        node = todo.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        stack = list(node.metadata.get("traceback_", []))
        node.register_prehook(lambda grads, stack=stack: fx_traceback.set_stack_trace(stack))
        todo.extend(fn for fn, _ in node.next_functions)
    with fx_traceback.preserve_node_meta():
        return torch.autograd.grad(loss, wrt)


MAX_RANKS = 64


def _ident(name):
    return re.sub(r"[^A-Za-z0-9_]", "_", name)


def fake_world(world_size, rank=0):
    """A fake process group of `world_size` ranks, this process being `rank` (a group
    set up before by someone else is left alone when it fits)."""
    from torch.testing._internal.distributed.fake_pg import FakeStore
    if dist.is_initialized():
        if dist.get_world_size() == world_size and dist.get_rank() == rank:
            return
        dist.destroy_process_group()
    dist.init_process_group("fake", store=FakeStore(), rank=rank, world_size=world_size)


def check_even(placements, shape, mesh_shape, what):
    """Every shard of a split dimension has the same size: the plan traced on one rank
    is then every rank's program, and planproof's layouts describe it."""
    ways = [1] * len(shape)
    for size, p in zip(mesh_shape, placements):
        if isinstance(p, Shard):
            ways[p.dim % len(shape)] *= size
    for d, (n, k) in enumerate(zip(shape, ways)):
        if n % k:
            raise Unsupported(f"{what}: dim {d} of size {n} is split {k} ways, unevenly "
                              "(ranks would hold shards of different sizes)")


def layout_of(placements, ndim, axes):
    """The planproof layout (JSON) of placements on the mesh dims named `axes` (a
    DTensor's own mesh, which may be a sub-mesh: its other dims are replicated)."""
    dims = [[] for _ in range(ndim)]
    partial = {}
    for axis, p in zip(axes, placements):
        if isinstance(p, Replicate):
            continue
        if isinstance(p, Shard) and type(p) is Shard:
            dims[p.dim % ndim].append(axis)
        elif isinstance(p, Partial):
            kind = {"sum": "sum", "avg": "avg", "max": "max"}.get(str(p.reduce_op).lower())
            if kind is None:
                raise Unsupported(f"placement {p} (a partial {p.reduce_op})")
            partial.setdefault(kind, []).append(axis)
        else:
            raise Unsupported(f"placement {p} is not covered (Shard, Replicate, Partial)")
    out = {"dims": [None if not d else d[0] if len(d) == 1 else d for d in dims]}
    if partial:
        out["partial"] = partial
    return out


def _mesh_axes(dtensor, axes):
    names = dtensor.device_mesh.mesh_dim_names
    if not names or any(n not in axes for n in names):
        raise Unsupported(f"a DTensor on a mesh with dims {names}, which are not dims of the "
                          f"capture's mesh {axes}")
    return list(names)


class _Step(torch.nn.Module):
    """The user's model and loss as one module, so that `functional_call` can swap in
    traced parameters."""

    def __init__(self, model, loss_fn):
        super().__init__()
        self.model = model
        self.loss_fn = loss_fn

    def forward(self, inputs):
        return self.loss_fn(self.model, **inputs)


def _params(model):
    return [(n, p) for n, p in model.named_parameters() if p.requires_grad]


def capture(model_fn, loss_fn, inputs, mesh_shape, mesh_dim_names, parallelize,
            input_placements=None, description=""):
    """Captures the step `loss_fn(model, **inputs)` and its gradients, on one device and
    parallelized by `parallelize(model, mesh)`, as a planproof spec (a JSON-ready dict).

    model_fn: builds the model (called once per step traced).
    inputs: name -> the full (global) tensor of each data input.
    input_placements: name -> the DTensor placements of that input on the mesh (default
      replicated); the plan's rank 0 receives its shard.
    Raises Unsupported for what the translation does not cover (the caller reports the
    verdict as inconclusive)."""
    mesh_shape = tuple(mesh_shape)
    axes = [str(a) for a in mesh_dim_names]
    input_placements = input_placements or {}
    names = list(inputs)

    # --- the reference: one device -----------------------------------------------------
    # Traced in a process of its own, like every rank below: autograd cannot run in a
    # forked process once it ran in the parent.
    ref_inputs, ref_ops, out_names, ref_params = _in_child(
        lambda: _trace_reference(model_fn, loss_fn, inputs, names))

    # --- the plan: every rank's program, DTensors from their local shards -----------
    # The plan is an SPMD program: the one traced on rank 0, which must be every rank's.
    # That is checked: the step is traced on every rank and must translate to the same
    # ops. (A capture is for small degrees: at most MAX_RANKS ranks.)
    world = math.prod(mesh_shape)
    if world > MAX_RANKS:
        raise Unsupported(f"a mesh of {world} ranks: capture at a smaller degree (at most "
                          f"{MAX_RANKS} ranks, each traced)")
    ranks = range(world)
    # Each rank is traced in a process of its own (forked: the fake process group and
    # the device mesh's groups are per process).
    plan_ops = None
    for rank in ranks:
        def trace_rank(rank=rank):
            fake_world(world, rank)
            mesh = init_device_mesh("cpu", mesh_shape, mesh_dim_names=tuple(axes))
            return _trace_plan(mesh, axes, mesh_shape, model_fn, loss_fn, parallelize, inputs,
                               names, input_placements, ref_params, out_names)
        traced = _in_child(trace_rank)
        if plan_ops is None:
            plan_ops, plan_inputs, plan_outputs = traced
        elif _without_locs(traced[0]) != _without_locs(plan_ops) or traced[1:] != (plan_inputs, plan_outputs):
            raise Unsupported(f"rank {rank} runs another program than rank 0 (the step "
                              "branches on the rank, or its shards differ): not an SPMD plan "
                              "that planproof can check from one trace")

    return {
        "planproof": 1,
        "description": description or "captured by planproof.torch",
        "reference": {"inputs": ref_inputs, "ops": ref_ops, "outputs": out_names},
        "plan": {"mesh": {"name": "mesh", "axes": [{"name": a, "size": int(s)}
                                                  for a, s in zip(axes, mesh_shape)]},
                 "inputs": plan_inputs, "ops": plan_ops, "outputs": plan_outputs},
    }


def _name_outputs(t, outs, names):
    """Gives the reference's output values their output names (a reference output is
    known by its value's name): the op computing each is renamed, or, for a value that is
    an input or returned twice, copied by `scale 1`."""
    producer = {op["result"]: op for op in t.ops}
    renamed = {}
    for v, want in zip(outs, names):
        if v is None:
            raise Unsupported(f"the reference's `{want}` is not a translated tensor")
        if v in producer and v not in renamed:
            renamed[v] = want
        else:
            src = renamed.get(v, v)
            t.ops.append({"result": want, "op": "scale", "operands": [src],
                          "attrs": {"factor": 1.0}})
    for op in t.ops:
        if op["result"] in renamed:
            op["result"] = renamed[op["result"]]
        op["operands"] = [renamed.get(o, o) for o in op["operands"]]


class CaptureError(Exception):
    """The step could not be traced (an error in the user's code or its parallelization)."""


def _in_child(fn):
    """fn() in a forked process; its result (or its Unsupported) comes back pickled."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        os.close(r)
        try:
            result = ("ok", fn())
        except Unsupported as e:
            result = ("unsupported", e.what, e.loc)
        except BaseException as e:  # noqa: BLE001 -- reported by the parent
            result = ("error", f"{type(e).__name__}: {e}", traceback.format_exc())
        try:
            data = pickle.dumps(result)
        except Exception as e:  # noqa: BLE001
            data = pickle.dumps(("error", f"unpicklable result: {e}", ""))
        with os.fdopen(w, "wb") as f:
            f.write(data)
        os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        data = f.read()
    os.waitpid(pid, 0)
    if not data:
        raise CaptureError("the process tracing one rank died")
    result = pickle.loads(data)
    if result[0] == "unsupported":
        raise Unsupported(result[1], result[2])
    if result[0] == "error":
        raise CaptureError(result[1] + ("\n" + result[2] if result[2] else ""))
    return result[1]


def _without_locs(ops):
    return [{k: v for k, v in op.items() if k != "loc"} for op in ops]


def _trace_plan(mesh, axes, mesh_shape, model_fn, loss_fn, parallelize, inputs, names,
                input_placements, ref_params, out_names):
    """Traces and translates the parallel step on this process's rank of `mesh`:
    (plan ops, plan inputs, plan outputs)."""
    plan_model = parallelize(model_fn(), mesh)
    plan_step = _Step(plan_model, loss_fn)
    plan_params = _params(plan_model)
    if [n for n, _ in plan_params] != [n for n, _ in ref_params] or \
            [tuple(p.shape) for _, p in plan_params] != [s for _, s in ref_params]:
        raise Unsupported("the parallelized model's parameters differ from the model's: "
                          f"{[n for n, _ in plan_params]} vs {[n for n, _ in ref_params]}")
    pspecs = []
    param_axes = []
    for n, p in plan_params:
        if isinstance(p, DTensor):
            pspecs.append((tuple(p.placements), p.shape, p.stride()))
            param_axes.append((_mesh_axes(p, axes), p.device_mesh))
        else:
            pspecs.append((tuple(Replicate() for _ in axes), p.shape, p.stride()))
            param_axes.append((axes, mesh))
    in_specs = []
    for n in names:
        pl = tuple(input_placements.get(n, [Replicate() for _ in axes]))
        in_specs.append(pl)
    captured = {}

    def plan(*flat):
        ls, xs = flat[:len(plan_params)], flat[len(plan_params):]
        # A DTensor parameter is rebuilt from its traced local shard; a plain one (not
        # parallelized: replicated) stays a plain tensor.
        dparams = [DTensor.from_local(l, m, pl, run_check=False, shape=shape, stride=stride)
                   if isinstance(p, DTensor) else l
                   for l, (pl, shape, stride), (_, m), (_, p) in
                   zip(ls, pspecs, param_axes, plan_params)]
        # Data reaches every rank as a plain tensor, its own shard (what a data loader
        # gives it); input_placements say which shard that is.
        dinputs = dict(zip(names, xs))
        with _anomaly():
            loss = torch.func.functional_call(
                plan_step, {"model." + n: p for (n, _), p in zip(plan_params, dparams)},
                (dinputs,))
        grads = _grad_with_forward_lines(loss, dparams)
        outs, placements = [], []
        for v in (loss, *grads):
            if isinstance(v, DTensor):
                placements.append((tuple(v.placements), _mesh_axes(v, axes)))
                outs.append(v.to_local())
            else:
                # A plain tensor is claimed whole on every rank (the strictest claim).
                placements.append(((), axes))
                outs.append(v)
        captured["placements"] = placements
        return tuple(outs)

    plan_args = []
    for (n, p), (pl, shape, stride) in zip(plan_params, pspecs):
        local = p.to_local() if isinstance(p, DTensor) else p
        plan_args.append(local.detach().clone().requires_grad_(True))
    for n, pl in zip(names, in_specs):
        plan_args.append(_local_shard(inputs[n], pl, mesh))
    with _user_stack_traces():
        plan_gm = make_fx(plan, record_stack_traces=True)(*plan_args)

    groups = {}
    for i, a in enumerate(axes):
        groups[str(mesh.get_group(i).group_name)] = [a]
    if mesh.size() == dist.get_world_size():
        groups.setdefault(str(dist.group.WORLD.group_name), list(axes))
    plan_t = Translator("plan", groups)
    plan_inputs = []
    placeholders = [n for n in plan_gm.graph.nodes if n.op == "placeholder"]
    labels = [(n, pl, shape, pa) for (n, _), (pl, shape, _), (pa, _) in
              zip(plan_params, pspecs, param_axes)] + \
             [(n, pl, inputs[n].shape, axes) for n, pl in zip(names, in_specs)]
    sizes = dict(zip(axes, mesh_shape))
    for node, arg, (label, pl, shape, pa) in zip(placeholders, plan_args, labels):
        nm = _ident(label)
        check_even(pl, shape, [sizes[a] for a in pa], f"`{label}`")
        plan_t.bind_input(node, nm, arg.shape, not arg.is_floating_point())
        plan_inputs.append({"name": nm, "value": nm, "layout": layout_of(pl, len(shape), pa)})
    plan_outs = plan_t.run(plan_gm)
    plan_outputs = []
    for v, ref_name, (pl, pa), shape in zip(plan_outs, out_names, captured["placements"],
                                            [()] + [shape for _, shape in ref_params]):
        if v is None:
            raise Unsupported(f"the plan's `{ref_name}` is not a translated tensor")
        check_even(pl, shape, [sizes[a] for a in pa], f"`{ref_name}`")
        plan_outputs.append({"name": v, "value": ref_name, "layout": layout_of(pl, len(shape), pa)})

    return plan_t.ops, plan_inputs, plan_outputs


def _local_shard(x, placements, mesh):
    """This rank's shard of the global tensor `x` under `placements` on `mesh`."""
    coord = mesh.get_coordinate()
    for d, p in enumerate(placements):
        if isinstance(p, Shard):
            x = x.chunk(mesh.size(d), dim=p.dim)[coord[d]]
        elif not isinstance(p, Replicate):
            raise Unsupported(f"input placement {p} (inputs are Shard or Replicate)")
    return x.contiguous()


def _trace_reference(model_fn, loss_fn, inputs, names):
    """Traces and translates the single-device step: (inputs, ops, output names, the
    parameters' (name, shape))."""
    ref_model = model_fn()
    ref_step = _Step(ref_model, loss_fn)
    ref_params = _params(ref_model)

    def reference(*flat):
        ps, xs = flat[:len(ref_params)], flat[len(ref_params):]
        with _anomaly():
            loss = torch.func.functional_call(
                ref_step, {"model." + n: p for (n, _), p in zip(ref_params, ps)},
                (dict(zip(names, xs)),))
        grads = _grad_with_forward_lines(loss, ps)
        return (loss, *grads)

    ref_args = [p.detach().clone().requires_grad_(True) for _, p in ref_params] + \
               [inputs[n] for n in names]
    with _user_stack_traces():
        ref_gm = make_fx(reference, record_stack_traces=True)(*ref_args)

    ref_t = Translator("ref")
    ref_inputs = []
    placeholders = [n for n in ref_gm.graph.nodes if n.op == "placeholder"]
    for node, (label, arg) in zip(placeholders, [(n, p) for n, p in ref_params] +
                                  [(n, inputs[n]) for n in names]):
        nm = _ident(label)
        integer = not arg.is_floating_point()
        ref_t.bind_input(node, nm, arg.shape, integer)
        ref_inputs.append({"name": nm, "shape": [int(d) for d in arg.shape]})
    ref_outs = ref_t.run(ref_gm)
    for entry in ref_inputs:
        if entry["name"] in ref_t.ints:
            # Token ids: every id indexes a row of the tables it is looked up in.
            if entry["name"] not in ref_t.int_bounds:
                raise Unsupported(f"integer input `{entry['name']}` is not looked up in an "
                                  "embedding table (no bound on its values)")
            entry.update({"dtype": "i64", "bound": int(ref_t.int_bounds[entry["name"]])})
    out_names = ["loss"] + ["grad_" + _ident(n) for n, _ in ref_params]
    _name_outputs(ref_t, ref_outs, out_names)

    return ref_inputs, ref_t.ops, out_names, [(n, tuple(p.shape)) for n, p in ref_params]
