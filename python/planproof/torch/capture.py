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
import functools
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

from .aten import Translator, Unsupported, resolve_pieces


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


@contextlib.contextmanager
def _loss_parallel_through_backward():
    """A loss computed under DTensor's `loss_parallel()` needs its backward under that
    context too (PyTorch's rule: `loss.backward()` inside it); a case's loss function
    returns the loss, leaving the context before the capture runs the backward, so the
    context's exit (which drops its loss ops) is deferred to after the backward."""
    try:
        from torch.distributed.tensor.parallel import loss as lp
    except ImportError:  # (a PyTorch without loss parallelism)
        yield
        return
    real = lp._disable_custom_loss_ops
    deferred = []
    lp._disable_custom_loss_ops = lambda: deferred.append(True)
    try:
        yield
    finally:
        lp._disable_custom_loss_ops = real
        if deferred:
            real()


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
        if axis is None or isinstance(p, Replicate):
            continue  # (None: a mesh dim of one rank, which distributes nothing)
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
    """The capture's mesh axes that the dims of a DTensor's mesh are; None for a dim of
    one rank that the capture's mesh does not name (torchtitan keeps a `dp_shard` dim of
    size 1 on every parameter's mesh): a placement on it distributes nothing -- a shard
    of one piece is the whole, a partial value of one rank is complete."""
    mesh = dtensor.device_mesh
    names = mesh.mesh_dim_names
    if not names or any(n not in axes and mesh.size(i) != 1 for i, n in enumerate(names)):
        raise Unsupported(f"a DTensor on a mesh with dims {names}, which are not dims of the "
                          f"capture's mesh {axes}")
    return [n if n in axes else None for n in names]


class _Step(torch.nn.Module):
    """The user's model and loss as one module, so that `functional_call` can swap in
    traced parameters."""

    def __init__(self, model, loss_fn):
        super().__init__()
        self.model = model
        self.loss_fn = loss_fn

    def forward(self, inputs):
        return self.loss_fn(self.model, **inputs)


# Modules that wrap another keep it under these names, which the parameters' names
# then carry (activation checkpointing's checkpoint_wrapper, torch.compile's
# OptimizedModule); a parameter's name is its name without them, as in the model's
# state dict (torch.distributed.checkpoint strips them alike).
_WRAPPER_PREFIXES = ("_checkpoint_wrapped_module.", "_orig_mod.")


def _fqn(name):
    for prefix in _WRAPPER_PREFIXES:
        name = name.replace(prefix, "")
    return name


def _without_recomputation(model):
    """`model` with every activation-checkpointing wrapper (torch's checkpoint_wrapper,
    which torchtitan's FullAC and SelectiveAC apply to each block) replaced by the block
    it wraps. The wrapper recomputes the block's forward during backward, from the same
    inputs: the same values, where the block draws no random numbers -- and a random op
    is outside the translation's table (an inconclusive capture), so the step traced
    without it has the wrapped step's values wherever a capture succeeds. (make_fx does
    not follow the recomputation: it runs inside the autograd engine's unpack hooks and
    leaves tensors it made as constants of the graph.)"""
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import ActivationWrapper
    if isinstance(model, ActivationWrapper):
        return _without_recomputation(model._checkpoint_wrapped_module)
    for name, child in list(model.named_children()):
        inner = _without_recomputation(child)
        if inner is not child:
            setattr(model, name, inner)
    return model


def _params(model):
    return [(_fqn(n), p) for n, p in model.named_parameters() if p.requires_grad]


def eagerly(fn):
    """`fn` with torch.compile'd modules and functions running eagerly (TorchDynamo
    disabled while it runs): make_fx cannot trace a dynamo-optimized function, and a
    capture checks the program as written -- that the compiler computes what the eager
    program does is PyTorch's contract, not checked here. (torchtitan compiles each
    block; their parameters' names lose the compiled module's `_orig_mod.`, _fqn.)"""
    @functools.wraps(fn)
    def run(*args, **kwargs):
        import torch._dynamo
        with torch._dynamo.config.patch(disable=True, error_on_nested_fx_trace=False):
            return fn(*args, **kwargs)
    return run


@eagerly
def capture(model_fn, loss_fn, inputs, mesh_shape, mesh_dim_names, parallelize,
            input_placements=None, description="", optimizer=None, grad_sync=None,
            dtensor_inputs=False, loss_placements=None, plan_loss_fn=None,
            param_placements=None, microbatches=1):
    """Captures the step `loss_fn(model, **inputs)`, its gradients and (with `optimizer`)
    the parameter update, on one device and parallelized by `parallelize(model, mesh)`,
    as a planproof spec (a JSON-ready dict).

    model_fn: builds the model (called once per step traced).
    inputs: name -> the full (global) tensor of each data input.
    input_placements: name -> the DTensor placements of that input on the mesh (default
      replicated); each rank receives its shard.
    dtensor_inputs: the plan's loss_fn receives each input as a DTensor of its
      placements (built from the rank's shard) rather than as the plain shard.
    grad_sync(grads, mesh): the parallel step only, between backward and the update:
      what a data-parallel wrapper does to the gradients (an all-reduce by hand, a
      redistribute); `grads` maps parameter names to gradients, and it returns that map.
    optimizer(params): a torch.optim optimizer over `params` (per tensor, foreach or fused), the
      update of both steps; the updated parameters and the optimizer's state are
      outputs too.
    plan_loss_fn(model, mesh, **inputs): the parallel step's loss, where it is written
      differently (a data-parallel step dividing by the token count all-reduced over
      the mesh); default loss_fn.
    param_placements: parameter name -> placements, for a parallelized model that holds
      a parameter as a plain tensor of this rank's shard (Megatron-style layers); its
      gradient, update and optimizer state are claimed with the same placements.
    microbatches: the parallel step accumulates gradients over that many equal pieces
      of each rank's inputs along dim 0 (gradient accumulation): one forward and
      backward per piece, the gradients summed as `.grad` accumulates them, the logged
      loss the sum of the pieces' losses; the plan's loss function then also receives
      `batch`, the rank's whole inputs (a global token count is counted over it).
    loss_placements: how each rank's loss makes the global one, when it is a plain
      tensor (default: it is the global loss on every rank); e.g. [Partial("avg")] for
      a data-parallel step whose logged loss is the mean over ranks.
    Raises Unsupported for what the translation does not cover (the caller reports the
    verdict as inconclusive)."""
    # make_fx and DTensor's distribute_tensor import the compiler stack (torch._dynamo,
    # torch._inductor: about 2 s) on first use. Imported here, in the parent, so that the
    # forked process tracing each rank inherits them instead of importing them again.
    import torch._dynamo  # noqa: F401
    import torch._inductor  # noqa: F401
    mesh_shape = tuple(mesh_shape)
    axes = [str(a) for a in mesh_dim_names]
    input_placements = input_placements or {}
    names = list(inputs)

    # --- the reference: one device -----------------------------------------------------
    # Traced in a process of its own, like every rank below: autograd cannot run in a
    # forked process once it ran in the parent.
    ref_inputs, ref_ops, out_names, ref_params, assumptions = _in_child(
        lambda: _trace_reference(model_fn, loss_fn, inputs, names, optimizer))
    if not isinstance(microbatches, int) or isinstance(microbatches, bool) or \
            microbatches < 1:
        raise CaptureError(f"microbatches must be a positive integer, not {microbatches!r}")
    if microbatches > 1 and dtensor_inputs:
        raise Unsupported("gradient accumulation over DTensor inputs (microbatches with "
                          "dtensor_inputs)")
    opts = dict(optimizer=optimizer, grad_sync=grad_sync, dtensor_inputs=dtensor_inputs,
                loss_placements=loss_placements, plan_loss_fn=plan_loss_fn,
                param_placements=param_placements, microbatches=microbatches)

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
    programs = []
    for rank in ranks:
        def trace_rank(rank=rank):
            fake_world(world, rank)
            mesh = init_device_mesh("cpu", mesh_shape, mesh_dim_names=tuple(axes))
            return _trace_plan(mesh, axes, mesh_shape, model_fn, loss_fn, parallelize, inputs,
                               names, input_placements, ref_params, out_names, **opts)
        ops, plan_inputs_r, outputs, pieces, coord, assumed = _in_child(trace_rank)
        assumptions += [a for a in assumed if a not in assumptions]
        if not programs:
            plan_inputs = plan_inputs_r
        if plan_inputs_r != plan_inputs:
            raise Unsupported(f"rank {rank} has other inputs than rank 0: not an SPMD plan "
                              "that planproof can check from one trace")
        programs.append((ops, outputs, pieces, coord))
    # The same program on every rank, up to the pieces of a split each rank takes by its
    # coordinate (aten.resolve_pieces).
    resolved = resolve_pieces(programs, dict(zip(axes, (int(n) for n in mesh_shape))))
    if resolved is not None:
        plan_ops, plan_outputs = resolved
    else:
        raise Unsupported("the ranks run different programs (the step branches on the rank, "
                          "or its shards differ): not an SPMD plan that planproof can check "
                          "from one trace")

    spec = {
        "planproof": 1,
        "description": description or "captured by planproof.torch",
        "reference": {"inputs": ref_inputs, "ops": ref_ops, "outputs": out_names},
        "plan": {"mesh": {"name": "mesh", "axes": [{"name": a, "size": int(s)}
                                                  for a, s in zip(axes, mesh_shape)]},
                 "inputs": plan_inputs, "ops": plan_ops, "outputs": plan_outputs},
    }
    if assumptions:  # what the translation took for granted, shown with every verdict
        spec["assumptions"] = assumptions
    return spec


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


def _code_loc(fn):
    """Where a user's function (the optimizer factory) is written, as an op `loc`."""
    code = getattr(fn, "__code__", None)
    if code is None or code.co_filename.startswith("<"):
        return None
    import linecache
    text = linecache.getline(code.co_filename, code.co_firstlineno)
    return {"file": os.path.abspath(code.co_filename), "line": code.co_firstlineno,
            "col": len(text) - len(text.lstrip()) + 1 if text.strip() else 1}


def _mark_loss_normalization(ops, params):
    """Gives the reference's loss normalizer its role: the ops computing a divisor of the
    loss that depends on no parameter (a token count, a batch size) carry
    `"role": "loss-normalization"`, so that a plan normalizing by another count (its own
    rank's tokens) is reported as a loss-normalization error."""
    producer = {op["result"]: op for op in ops}
    uses_param = set()
    for op in ops:  # ops are in program order
        if any(o in params or o in uses_param for o in op["operands"]):
            uses_param.add(op["result"])
    todo, on_path = ["loss"], set()
    while todo:
        v = todo.pop()
        if v in on_path or v not in producer:
            continue
        on_path.add(v)
        todo.extend(producer[v]["operands"])
    divisors = [producer[v]["operands"][1] for v in on_path
                if producer[v]["op"] == "div" and producer[v]["operands"][1] not in uses_param]
    marked = set()
    while divisors:
        v = divisors.pop()
        if v in marked or v not in producer:
            continue
        marked.add(v)
        producer[v]["role"] = "loss-normalization"
        divisors.extend(producer[v]["operands"])


class CaptureError(Exception):
    """The step could not be traced (an error in the user's code or its parallelization)."""


def _in_child(fn):
    """fn() in a forked process; its result (or its Unsupported) comes back pickled."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        os.close(r)
        try:
            # One thread: an OpenMP pool the parent started (any parallel op before the
            # fork) has no threads in the child, and a parallel region would wait for
            # them forever. Tracing computes on tiny tensors.
            torch.set_num_threads(1)
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


def _groups_by_ranks(mesh, axes, groups):
    """Process groups made outside the mesh (Megatron-core's parallel_state builds its
    own with new_group) mean the mesh axes whose ranks they hold: a group whose ranks, in
    order, are this rank's row-major neighbours along some axes is a collective over
    those axes. Groups that are no such set stay unknown (their collectives are
    inconclusive)."""
    import itertools
    import torch.distributed.distributed_c10d as c10d
    me = dist.get_rank()
    ranks_of_mesh = mesh.mesh
    coord = (ranks_of_mesh == me).nonzero()[0].tolist()
    for pg in list(getattr(c10d._world, "pg_names", {})):
        name = str(getattr(pg, "group_name", ""))
        if not name or name in groups:
            continue
        try:
            ranks = list(dist.get_process_group_ranks(pg))
        except Exception:  # not a group of this process
            continue
        if me not in ranks:
            continue
        for k in range(1, len(axes) + 1):
            for sub in itertools.combinations(range(len(axes)), k):
                index = tuple(slice(None) if i in sub else coord[i] for i in range(len(axes)))
                if ranks_of_mesh[index].flatten().tolist() == ranks:
                    groups.setdefault(name, [axes[i] for i in sub])


def _forward_backward(step, params, leaves, inputs):
    """The step's loss on `inputs` and the gradients of `leaves` (the parameters as the
    model sees them, named by `params`)."""
    with _loss_parallel_through_backward():
        with _anomaly():
            loss = torch.func.functional_call(
                step, {"model." + n: p for (n, _), p in zip(params, leaves)}, (inputs,))
        return loss, list(_grad_with_forward_lines(loss, leaves))


def _accumulated(step, params, leaves, inputs, microbatches):
    """The loss and the gradients of `leaves`, over `microbatches` equal pieces of every
    input along dim 0 (gradient accumulation, as a trainer's loop runs it): a forward
    and a backward per piece, the gradients summed in the pieces' order (`.grad +=`),
    the losses summed (the logged loss); the loss function receives the piece, and
    `batch`, the whole inputs, where it takes an argument of that name."""
    import inspect
    try:
        params_of = inspect.signature(step.loss_fn).parameters.values()
    except (TypeError, ValueError):
        params_of = []
    takes_batch = any(p.name == "batch" or p.kind is p.VAR_KEYWORD for p in params_of)
    pieces = {}
    for n, x in inputs.items():
        if not isinstance(x, torch.Tensor) or x.dim() == 0 or x.shape[0] % microbatches:
            raise Unsupported(f"input `{n}` cannot be cut into {microbatches} equal "
                              "microbatches along dim 0")
        pieces[n] = x.split(x.shape[0] // microbatches)
    loss, grads = None, None
    for i in range(microbatches):
        piece = {n: p[i] for n, p in pieces.items()}
        if takes_batch:
            piece["batch"] = inputs
        part, g = _forward_backward(step, params, leaves, piece)
        loss = part if loss is None else loss + part
        grads = g if grads is None else [a + b for a, b in zip(grads, g)]
    return loss, grads


def _run_step(step, params, leaves, inputs, optimizer, grad_sync=None, mesh=None,
              microbatches=1):
    """One training step, traced or not: the loss, the gradients of `leaves` (the
    parameters as the model sees them, named by `params`; accumulated over
    `microbatches`), after `grad_sync` where the parallel step has one, and with
    `optimizer` the updated parameters and the optimizer's state. Returns [(output
    name, tensor, the parameter's name or None)] in the spec's output order."""
    if microbatches > 1:
        loss, grads = _accumulated(step, params, leaves, inputs, microbatches)
    else:
        loss, grads = _forward_backward(step, params, leaves, inputs)
    if grad_sync is not None:
        synced = grad_sync({n: g for (n, _), g in zip(params, grads)}, mesh)
        if not isinstance(synced, dict) or set(synced) != {n for n, _ in params}:
            raise CaptureError("grad_sync must return a dict with a gradient for every "
                               "parameter")
        grads = [synced[n] for n, _ in params]
    outs = [("loss", loss, None)] + [("grad_" + _ident(n), g, n)
                                     for (n, _), g in zip(params, grads)]
    if optimizer is None:
        return outs
    # The update runs on leaves sharing the parameters' storage (torch.optim updates
    # them in place; the translation follows the in-place ops).
    updated = [p.detach() for p in leaves]
    for p, g in zip(updated, grads):
        p.grad = g
    opt = optimizer(updated)
    opt.step()
    outs += [("new_" + _ident(n), p, n) for (n, _), p in zip(params, updated)]
    for (n, _), p in zip(params, updated):
        for key, v in sorted(opt.state[p].items()):
            if isinstance(v, torch.Tensor) and v.is_floating_point():
                outs.append((f"{_ident(key)}_{_ident(n)}", v, n if v.dim() else None))
    return outs


def _tie_hint(plan_params, ref_shape):
    """Why the parallelized model may have parameters the model has not: a parameter the
    model holds under two names (tied weights) that parallelizing made two."""
    extra = [n for n, _ in plan_params if n not in ref_shape]
    if not extra:
        return ""
    return (f" ({', '.join(extra)}: not a parameter of the single-device model by that "
            "name; if the model ties it to another (one parameter under two names), "
            "parallelizing made it a parameter of its own: tie them again after "
            "parallelizing, as torchtitan's Decoder.init_states does)")


def _trace_plan(mesh, axes, mesh_shape, model_fn, loss_fn, parallelize, inputs, names,
                input_placements, ref_params, out_names, optimizer=None, grad_sync=None,
                dtensor_inputs=False, loss_placements=None, plan_loss_fn=None,
                param_placements=None, microbatches=1):
    """Traces and translates the parallel step on this process's rank of `mesh`:
    (plan ops, plan inputs, plan outputs, the pieces of even splits (Translator.pieces),
    this rank's coordinate by mesh axis)."""
    plan_model = _without_recomputation(parallelize(model_fn(), mesh))
    if plan_loss_fn is not None:
        @functools.wraps(plan_loss_fn)  # (its signature: whether it takes `batch`)
        def loss_fn(model, **xs):
            return plan_loss_fn(model, mesh, **xs)
    plan_step = _Step(plan_model, loss_fn)
    plan_params = _params(plan_model)
    ref_shape = dict(ref_params)
    declared = {n: tuple(pl) for n, pl in (param_placements or {}).items()}
    if sorted(declared) != sorted(n for n in declared if n in ref_shape):
        raise CaptureError(f"param_placements names parameters the model does not have: "
                           f"{sorted(n for n in declared if n not in ref_shape)}")
    if [n for n, _ in plan_params] != [n for n, _ in ref_params] or any(
            (tuple(p.shape) if n not in declared or isinstance(p, DTensor) else
             _global_shape(p.shape, declared[n], mesh_shape, n)) != ref_shape[n]
            for n, p in plan_params):
        raise Unsupported("the parallelized model's parameters differ from the model's: "
                          f"{[(n, tuple(p.shape)) for n, p in plan_params]} vs {ref_params}"
                          + _tie_hint(plan_params, ref_shape))
    pspecs = []
    param_axes = []
    for n, p in plan_params:
        if isinstance(p, DTensor):
            pspecs.append((tuple(p.placements), p.shape, p.stride()))
            param_axes.append((_mesh_axes(p, axes), p.device_mesh))
        elif n in declared:
            # A plain tensor holding this rank's shard (Megatron's parallel layers).
            pspecs.append((declared[n], torch.Size(ref_shape[n]), None))
            param_axes.append((axes, mesh))
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
        # Data reaches every rank as its own shard (what a data loader gives it), a
        # plain tensor or (dtensor_inputs) a DTensor; input_placements say which shard.
        dinputs = dict(zip(names, xs))
        if dtensor_inputs:
            dinputs = {n: DTensor.from_local(x, mesh, pl, run_check=False,
                                             shape=inputs[n].shape, stride=inputs[n].stride())
                       for (n, x), pl in zip(dinputs.items(), in_specs)}
        named = _run_step(plan_step, plan_params, dparams, dinputs, optimizer, grad_sync, mesh,
                          microbatches)
        if [n for n, _, _ in named] != out_names:
            raise Unsupported(f"the parallel step's outputs {[n for n, _, _ in named]} are "
                              f"not the single-device step's {out_names}")
        outs, placements, shapes = [], [], []
        for k, (name, v, param) in enumerate(named):
            shapes.append(tuple(v.shape))
            if isinstance(v, DTensor):
                placements.append((tuple(v.placements), _mesh_axes(v, axes)))
                outs.append(v.to_local())
            elif not isinstance(v, torch.Tensor):
                raise Unsupported(f"the parallel step's `{name}` is not a tensor")
            else:
                # A plain tensor is claimed whole on every rank (the strictest claim),
                # the loss as loss_placements say, a sharded parameter's gradient,
                # update and state as its param_placements say.
                pl = tuple(loss_placements) if k == 0 and loss_placements else ()
                if param in declared:
                    pl = declared[param]
                    shapes[-1] = ref_shape[param]
                placements.append((pl, axes))
                outs.append(v)
        captured["placements"] = placements
        captured["shapes"] = shapes
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
    _groups_by_ranks(mesh, axes, groups)
    plan_t = Translator("plan", groups)
    plan_t.update_loc = _code_loc(optimizer)
    plan_t.ignored = ignored_labels(inputs)
    plan_inputs = []
    placeholders = [n for n in plan_gm.graph.nodes if n.op == "placeholder"]
    labels = [(n, pl, shape, pa) for (n, _), (pl, shape, _), (pa, _) in
              zip(plan_params, pspecs, param_axes)] + \
             [(n, pl, inputs[n].shape, axes) for n, pl in zip(names, in_specs)]
    sizes = dict(zip(axes, mesh_shape))
    for node, arg, (label, pl, shape, pa) in zip(placeholders, plan_args, labels):
        nm = _ident(label)
        check_even(pl, shape, [sizes.get(a, 1) for a in pa], f"`{label}`")
        integer = not arg.is_floating_point()
        plan_t.bind_input(node, nm, arg.shape, integer)
        layout = layout_of(pl, len(shape), pa)
        if integer:
            layout = _flat_layout(layout, shape, f"`{label}`")
        plan_inputs.append({"name": nm, "value": nm, "layout": layout})
        if nm in plan_t.kept:  # labels that may be ignored: which are kept, alike
            plan_inputs.append({"name": plan_t.kept[nm], "value": plan_t.kept[nm], "layout": layout})
    plan_outs = plan_t.run(plan_gm)
    plan_outputs = []
    for v, ref_name, (pl, pa), shape in zip(plan_outs, out_names, captured["placements"],
                                            captured["shapes"]):
        if v is None:
            raise Unsupported(f"the plan's `{ref_name}` is not a translated tensor")
        check_even(pl, shape, [sizes.get(a, 1) for a in pa], f"`{ref_name}`")
        plan_outputs.append({"name": v, "value": ref_name, "layout": layout_of(pl, len(shape), pa)})

    coord = dict(zip(axes, (int(c) for c in mesh.get_coordinate())))
    return plan_t.ops, plan_inputs, plan_outputs, plan_t.pieces, coord, plan_t.assumptions


def _flat_layout(layout, shape, what):
    """The layout of an integer input held flat (aten.Translator.bind_input): its one
    dim is split as the tensor's only split dim, which must have no dim of more than
    one element before it (so that each rank's block stays contiguous in the flat
    order)."""
    split = [d for d, axes in enumerate(layout["dims"]) if axes is not None]
    if not split:
        return {**layout, "dims": [None]}
    if len(split) > 1 or any(int(n) != 1 for n in list(shape)[:split[0]]):
        raise Unsupported(f"{what}: integer input split on dim {split} of shape "
                          f"{list(shape)} (covered: a split that keeps each rank's ids "
                          "contiguous in row-major order)")
    return {**layout, "dims": [layout["dims"][split[0]]]}


def _global_shape(local, placements, mesh_shape, what):
    """The global shape of which `local` is one rank's even shard under `placements`."""
    shape = list(local)
    for size, p in zip(mesh_shape, placements):
        if isinstance(p, Shard):
            shape[p.dim % len(shape)] *= int(size)
        elif not isinstance(p, Replicate):
            raise Unsupported(f"`{what}`: param_placements {p} (Shard or Replicate)")
    return tuple(shape)


def _local_shard(x, placements, mesh):
    """This rank's shard of the global tensor `x` under `placements` on `mesh`."""
    coord = mesh.get_coordinate()
    for d, p in enumerate(placements):
        if isinstance(p, Shard):
            x = x.chunk(mesh.size(d), dim=p.dim)[coord[d]]
        elif not isinstance(p, Replicate):
            raise Unsupported(f"input placement {p} (inputs are Shard or Replicate)")
    return x.contiguous()


def ignored_labels(inputs):
    """Integer inputs whose captured values hold a negative number, one for all of them
    (the ignored label, -100 for `ignore_index`): name (as in the spec) -> it. Such
    labels are modelled as a class or that value on each token (aten.Translator.kept)."""
    out = {}
    for n, x in inputs.items():
        if isinstance(x, torch.Tensor) and not x.is_floating_point() and x.dtype != torch.bool:
            neg = x[x < 0].unique()
            if len(neg) == 1:
                out[_ident(n)] = int(neg[0])
    return out


def ignored_values(inputs):
    """The values the spec's integer inputs take for the captured `inputs`: an ignorable
    label's ignored value replaced by class 0 (what a `where` would put there: the
    model's ids hold a class on every token), its `kept` vector 1 elsewhere."""
    values = {_ident(n): v for n, v in inputs.items()}
    for n, c in ignored_labels(inputs).items():
        x = values[n]
        values[n] = torch.where(x == c, torch.zeros_like(x), x)
        values[n + "_kept"] = (x != c).to(x.dtype)
    return values


def _check_id_inputs(entries, values):
    """Token ids and labels are proved for every value in [0, bound) (the rows or classes
    they index): a captured input holding another value -- an ignored label, -100 for
    `ignore_index` -- shows data outside the domain the proof covers. What a step does on
    those tokens (which tokens the loss counts, what it divides by) would go unchecked,
    so the capture stops, inconclusive."""
    for entry in entries:
        if entry.get("dtype") != "i64":
            continue
        x, bound = values[entry["name"]], entry["bound"]
        outside = ((x < 0) | (x >= bound)).nonzero()
        if len(outside):
            at = [int(i) for i in outside[0]]
            raise Unsupported(
                f"integer input `{entry['name']}` holds {int(x[tuple(at)])} at {at}, outside "
                f"[0, {bound}), the ids or classes the proof covers: ignored labels "
                "(`ignore_index`) are not modelled, so the step's handling of those tokens "
                "(which ones the loss counts, what it divides by) would go unchecked")


def _trace_reference(model_fn, loss_fn, inputs, names, optimizer=None):
    """Traces and translates the single-device step: (inputs, ops, output names, the
    parameters' (name, shape))."""
    ref_model = _without_recomputation(model_fn())
    ref_step = _Step(ref_model, loss_fn)
    ref_params = _params(ref_model)
    captured = {}

    def reference(*flat):
        ps, xs = flat[:len(ref_params)], flat[len(ref_params):]
        named = _run_step(ref_step, ref_params, ps, dict(zip(names, xs)), optimizer)
        captured["names"] = [n for n, _, _ in named]
        return tuple(v for _, v, _ in named)

    ref_args = [p.detach().clone().requires_grad_(True) for _, p in ref_params] + \
               [inputs[n] for n in names]
    with _user_stack_traces():
        ref_gm = make_fx(reference, record_stack_traces=True)(*ref_args)

    ref_t = Translator("ref")
    ref_t.update_loc, ref_t.update_role = _code_loc(optimizer), "optimizer"
    ref_t.ignored = ignored_labels(inputs)
    ref_inputs = []
    placeholders = [n for n in ref_gm.graph.nodes if n.op == "placeholder"]
    for node, (label, arg) in zip(placeholders, [(n, p) for n, p in ref_params] +
                                  [(n, inputs[n]) for n in names]):
        nm = _ident(label)
        integer = not arg.is_floating_point()
        ref_t.bind_input(node, nm, arg.shape, integer)
        ref_inputs.append({"name": nm, "shape": [int(d) for d in ref_t.shapes[nm]]})
    ref_outs = ref_t.run(ref_gm)
    for entry in ref_inputs:
        if entry["name"] in ref_t.ints:
            # Token ids: every id indexes a row of the tables it is looked up in.
            if entry["name"] not in ref_t.int_bounds:
                raise Unsupported(f"integer input `{entry['name']}` is not looked up in an "
                                  "embedding table (no bound on its values)")
            entry.update({"dtype": "i64", "bound": int(ref_t.int_bounds[entry["name"]])})
    for k in reversed(range(len(ref_inputs))):  # which labels are kept, after each
        if ref_inputs[k]["name"] in ref_t.kept:
            ref_inputs.insert(k + 1, {"name": ref_t.kept[ref_inputs[k]["name"]],
                                      "shape": ref_inputs[k]["shape"], "dtype": "i64", "bound": 2})
    _check_id_inputs(ref_inputs, ignored_values({n: inputs[n] for n in names}))
    out_names = captured["names"]
    if len(set(out_names)) != len(out_names):
        raise Unsupported(f"two outputs of the step have one name: {out_names}")
    _name_outputs(ref_t, ref_outs, out_names)
    _mark_loss_normalization(ref_t.ops, {_ident(n) for n, _ in ref_params})

    return (ref_inputs, ref_t.ops, out_names, [(n, tuple(p.shape)) for n, p in ref_params],
            ref_t.assumptions)
