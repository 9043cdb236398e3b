"""Translation of a traced PyTorch step (an FX graph of aten ops and functional
collectives, from `make_fx`) into the ops of a planproof spec (the JSON interchange
format, docs/json-format.md).

One table, `RULES`, says what each covered aten op means in planproof's `ref` and `dist`
ops; docs/torch.md lists it. An op outside the table is not guessed at: translation stops
with `Unsupported`, naming the op and the user's source line, and the capture's verdict
is *inconclusive*.

Shapes come from the traced values (`node.meta["val"]`), so every op's result shape is
the one PyTorch computed; implicit broadcasting is made explicit (`reshape` to drop
size-1 dims, then `broadcast`), scalars become `constant` tensors or `scale` factors.
"""
import linecache
import math
import operator
import os

import torch

aten = torch.ops.aten


class Unsupported(Exception):
    """An op, argument or placement the translation does not cover."""

    def __init__(self, what, loc=None):
        super().__init__(what)
        self.what = what
        self.loc = loc

    def __str__(self):
        if self.loc:
            return f"{self.loc['file']}:{self.loc['line']}: {self.what}"
        return self.what


# Files whose frames are never the user's line: torch itself and this package.
_SKIP_DIRS = [os.path.dirname(torch.__file__), os.path.dirname(os.path.dirname(__file__))]


def user_loc(node):
    """The innermost frame of the user's code in the node's recorded stack trace, below
    the traced step (frames of torch, of this package and of the capture's caller are
    not the user's step); None for ops with no such frame (the backward pass)."""
    trace = node.meta.get("stack_trace") or ""
    frames = []
    for line in trace.splitlines():
        line = line.strip()
        if not line.startswith('File "'):
            continue
        try:
            end = line.index('"', len('File "'))
            file = line[len('File "'):end]
            lineno = int(line[end:].split("line ")[1].split(",")[0])
        except (ValueError, IndexError):
            continue
        frames.append((file, lineno))
    # The step starts below the last frame of this package (the traced function).
    ours = [i for i, (f, _) in enumerate(frames)
            if os.path.abspath(f).startswith(_SKIP_DIRS[1] + os.sep)]
    if not ours:
        return None
    best = None
    for file, lineno in frames[ours[-1] + 1:]:
        path = os.path.abspath(file)
        if any(path.startswith(d + os.sep) for d in _SKIP_DIRS) or file.startswith("<"):
            continue
        best = {"file": path, "line": lineno}
    if best:
        text = linecache.getline(best["file"], best["line"])
        best["col"] = len(text) - len(text.lstrip()) + 1 if text.strip() else 1
    return best


class Element:
    """Element `i` of a foreach op's node (`_foreach_mul_`, `_foreach_norm`, ...): what a
    rule reads of its node -- the per-tensor op as its target, the element's arguments,
    its tensor's metadata (the tensor it overwrites, for an in-place op, which returns
    nothing)."""

    op = "call_function"

    def __init__(self, node, i, target, args, kwargs, val):
        self.name = f"{node.name}_{i}"
        self.target = target
        self.args = tuple(args)
        self.kwargs = dict(kwargs)
        self.meta = dict(node.meta, val=val)


def _fresh_list(node):
    """Whether the elements of `node`'s result are tensors of their own (a functional
    foreach op's), not views of one storage (split's)."""
    packet = getattr(getattr(node, "target", None), "overloadpacket", None)
    return packet is not None and packet.__name__.startswith("_foreach_") and \
        not packet.__name__.endswith("_")


def _shape(node):
    """The shape of the value planproof holds for `node`: the tensor's, with a trailing
    2 for a complex tensor (held as its real and imaginary parts, `view_as_real`)."""
    v = node.meta.get("val") if isinstance(node, (torch.fx.Node, Element)) else None
    if isinstance(v, torch.Tensor):
        return [int(d) for d in v.shape] + ([2] if v.is_complex() else [])
    return None


def _is_complex(node):
    v = node.meta.get("val") if isinstance(node, (torch.fx.Node, Element)) else None
    return isinstance(v, torch.Tensor) and v.is_complex()


def _nodes(args):
    for a in args:
        if isinstance(a, torch.fx.Node):
            yield a
        elif isinstance(a, (list, tuple)):
            yield from _nodes(a)


class Translator:
    """Emits the ops of one function (the reference or the plan) into `self.ops`.

    `group_axes` maps a process group's name to the mesh axes it spans (plan only)."""

    def __init__(self, prefix, group_axes=None):
        self.ops = []
        self.defs = {}     # value name -> the op computing it (an entry of `ops`)
        self.values = {}   # FX node -> value name
        self.shapes = {}   # value name -> shape
        self.prefix = prefix
        self.group_axes = group_axes or {}
        self.counter = 0
        self.loc = None
        self.node = None
        self.reshaped = {}      # a reshape's result -> the value it reshapes
        self.ints = set()       # integer values (token ids): only embedding takes them
        self.int_bounds = {}    # integer input -> the table rows it indexes
        # Labels that may be the ignored label (their captured values hold it): input ->
        # that value, set by the caller; input -> the name of its `kept` input (an i64
        # vector of bound 2, 1 where the label is a class); ids -> the kept column as
        # a float [N] value, once emitted.
        self.ignored = {}
        self.kept = {}
        self.kept_cols = {}
        self.pieces = {}        # piece I of an even split into N: value -> (source, dim, N, I)
        # The optimizer's update (inside torch.optim's "Optimizer.step#..." profiler
        # range): its ops are located at `update_loc` (where the user builds the
        # optimizer) and, in the reference, carry the role `update_role` ("optimizer").
        self.update_depth = 0
        self.update_loc = None
        self.update_role = None
        self.view_of = {}       # a view's node -> the node whose storage it shares
        self.defined = {}       # node -> its position, for the nodes translated so far
        self.stale = set()      # nodes whose storage an in-place op overwrote since
        self.unwritten = set()  # `empty` tensors not written yet (a collective's output)
        self.objects = {}       # graph constants that are no tensors: process groups, ...
        # Masks of token ids made float tensors (_mask_value): value -> its IdsExpr; the
        # values that are 0 at every id outside a shard's [lo, hi): value -> that mask;
        # tensors filled with zeros.
        self.mask_of = {}
        self.zero_outside = {}
        self.zero_filled = set()
        self.row_sums = {}      # value -> its sums over the last dim, where known exactly
        self.unmasked = {}      # x * [id in shard] -> x (the other factor)
        # What the translation takes for granted about the inputs, beyond their types:
        # the spec's "assumptions", shown with every verdict.
        self.assumptions = []
        # Ids compared with a bound that every id passes alike and a value below 0 would
        # not (`labels >= 0`): id input -> that test; and the ids that index a table's
        # rows (token ids, whose domain the rows are). Labels tested so are classes only
        # by assumption, stated once the graph is read.
        self.order_tested = {}
        self.below_all = []     # (labels, k, loc): `labels < k` read as true (check_below_all)
        self.row_lookups = set()
        self.order_ranges = {}  # id input -> the ranges [lo, hi) such tests bound
        self.derived_ids = {}   # ids made of runs of other ids (labels[..., 1:]) -> those

    def assume(self, text):
        if text not in self.assumptions:
            self.assumptions.append(text)

    # -- values -------------------------------------------------------------------------
    def fresh(self, hint):
        self.counter += 1
        return f"{hint}_{self.counter}"

    def bind_input(self, node, name, shape, integer=False):
        """An input of the step. Integer tensors (token ids, labels) are held flat, [N]:
        the ops that read them (embedding, the labels' one-hot rows) take ids in one
        dim, and views of them are the same ids (`_view`)."""
        self.values[node] = name
        self.shapes[name] = [math.prod(shape)] if integer else list(shape)
        if integer:
            self.ints.add(name)
        if integer and name in self.ignored:
            self.kept[name] = name + "_kept"
            self.shapes[name + "_kept"] = [math.prod(shape)]

    def emit(self, op, operands, shape, attrs=None, result_shape_attr=False, name=None):
        result = name or self.fresh(self.node.name if self.node is not None else op)
        entry = {"result": result, "op": op, "operands": list(operands)}
        if attrs:
            entry["attrs"] = attrs
        if result_shape_attr:
            entry["shape"] = list(shape)
        if self.loc:
            entry["loc"] = dict(self.loc)
        if self.update_depth and self.update_role:
            entry["role"] = self.update_role
        self.ops.append(entry)
        self.defs[result] = entry
        self.shapes[result] = list(shape)
        return result

    def number(self, v, depth=0):
        """The number every element of value `v` holds, where it is computed from
        constants alone (an optimizer's step count: zeros, then += 1); None otherwise."""
        entry = self.defs.get(v)
        if entry is None or depth > 64:
            return None
        op, attrs = entry["op"], entry.get("attrs", {})
        if op == "constant":
            return float(attrs["value"])
        if op == "literal":
            vals = set(attrs["values"])
            return float(vals.pop()) if len(vals) == 1 else None
        xs = [self.number(x, depth + 1) for x in entry["operands"]]
        if any(x is None for x in xs):
            return None
        if op in ("reshape", "broadcast"):
            return xs[0]
        if op == "scale":
            return xs[0] * float(attrs["factor"])
        if op in ("add", "sub", "mul") and len(xs) == 2:
            return xs[0] + xs[1] if op == "add" else \
                xs[0] - xs[1] if op == "sub" else xs[0] * xs[1]
        return None

    def fail(self, what):
        raise Unsupported(what, self.loc)

    def value(self, arg, shape=None):
        """The value name of an FX argument; a Python number becomes a constant tensor of
        `shape`."""
        if isinstance(arg, torch.fx.Node):
            if arg in self.unwritten:
                self.fail(f"`{arg.name}` (torch.empty) is read before anything writes it")
            if arg in self.stale:
                self.fail(f"`{arg.name}` is read after an in-place update of a tensor it "
                          "shares storage with (a view, or the tensor it views)")
            if arg not in self.values:
                self.fail(f"operand `{arg.name}` has no translated value")
            v = self.values[arg]
            if v is None or not isinstance(v, str):
                self.fail(f"operand `{arg.name}` is not a tensor planproof models")
            if v in self.ints and not getattr(self, "_ids_ok", False):
                self.fail(f"integer tensor `{arg.name}` used by an op other than embedding")
            return v
        if isinstance(arg, (int, float)) and not isinstance(arg, bool) and shape is not None:
            n = _root_of_integer(arg)
            if n is not None:  # sqrt(n), as the double nearest it was meant (below)
                c = self.emit("constant", [], shape, {"value": float(n)}, result_shape_attr=True)
                return self.emit("sqrt", [c], shape)
            return self.emit("constant", [], shape, {"value": float(arg)}, result_shape_attr=True)
        self.fail(f"argument {arg!r} is not a tensor")

    # -- shapes -------------------------------------------------------------------------
    def reshape(self, v, shape):
        # A reshape of a reshape reads the original (keepdim sums viewed back are the
        # sums themselves: one value, as the reference has it).
        v = self.reshaped.get(v, v)
        if self.shapes[v] == list(shape):
            return v
        if math.prod(self.shapes[v]) != math.prod(shape):
            self.fail(f"reshape of {self.shapes[v]} into {list(shape)}")
        r = self.emit("reshape", [v], shape, result_shape_attr=True)
        self.reshaped[r] = v
        return r

    def broadcast_to(self, v, shape):
        """NumPy broadcasting of `v` to `shape`, made explicit."""
        src = self.shapes[v]
        shape = list(shape)
        if src == shape:
            return v
        if len(src) > len(shape):
            self.fail(f"cannot broadcast {src} to {shape}")
        offset = len(shape) - len(src)
        kept, dims = [], []
        for k, d in enumerate(src):
            target = shape[offset + k]
            if d == target:
                kept.append(d)
                dims.append(offset + k)
            elif d != 1:
                self.fail(f"cannot broadcast {src} to {shape}")
        v = self.reshape(v, kept)
        if kept == shape:
            return v
        return self.emit("broadcast", [v], shape, {"dims": dims}, result_shape_attr=True)

    # -- ops ----------------------------------------------------------------------------
    def binary(self, op, a, b, shape):
        av = self.broadcast_to(self.value(a, shape), shape)
        bv = self.broadcast_to(self.value(b, shape), shape)
        return self.emit(op, [av, bv], shape)

    def scale(self, v, factor, shape):
        return self.emit("scale", [v], shape, {"factor": float(factor)})

    def reduce(self, op, x, dims, keepdim, shape):
        xs = self.shapes[x]
        dims = sorted({d % len(xs) for d in dims}) if xs else []
        if not dims:
            return x
        kept = [d for k, d in enumerate(xs) if k not in dims]
        r = self.emit(op, [x], kept, {"dims": dims})
        return self.reshape(r, shape) if keepdim else r

    # -- in-place ops ---------------------------------------------------------------------
    # An in-place op (`add_`, `mul_`, the optimizer's `addcdiv_`) computes its out-of-place
    # op's value and makes it the new value of the tensor it overwrites: later reads of
    # that node see the new value (the graph's order is the program's). What could read
    # the old storage under another name is refused: after the update, every *other* node
    # sharing its storage (a view of it, or what it is a view of) is stale, and reading a
    # stale node stops the translation (Unsupported) rather than guess.
    def storage(self, node):
        """The node whose storage `node` shares (itself unless it is a view)."""
        seen = 0
        while node in self.view_of and seen < 10000:
            node, seen = self.view_of[node], seen + 1
        return node

    def in_place(self, node):
        """The rule of an in-place op: its out-of-place op's (None when there is none)."""
        name = node.target.overloadpacket.__name__
        if not name.endswith("_") or name.startswith("_"):
            return None
        functional = getattr(aten, name[:-1], None)
        overload = getattr(functional, node.target._overloadname, None) if functional else None
        rule = RULES.get(overload) or RULES.get(functional)
        if rule is None:
            return None

        def update(t, node, dest, *args, **kw):
            if not isinstance(dest, torch.fx.Node):
                t.fail(f"in-place `{node.target}` on {dest!r}")
            shape = t.shapes[t.value(dest)]
            result = rule(t, node, dest, *args, **kw)
            if not isinstance(result, str) or t.shapes[result] != shape:
                t.fail(f"in-place `{node.target}` whose result is not of its operand's shape")
            return t.overwrite(dest, result)
        return update

    def overwrite(self, dest, result):
        """`result` is the new value of the tensor of node `dest` (an in-place op, a c10d
        collective writing its output tensor): later reads of `dest` see it, and every
        other node sharing its storage is stale."""
        if _shape(dest) != self.shapes[result]:
            self.fail(f"`{dest.name}` overwritten by a value of another shape")
        root = self.storage(dest)
        for other in self.defined:
            if other is not dest and self.storage(other) is root:
                self.stale.add(other)
        self.values[dest] = result
        self.unwritten.discard(dest)
        return result

    def run(self, gm):
        """Translates every node of `gm`; returns the value names of its outputs."""
        outputs = None
        forward_loc = {}  # autograd sequence number -> the forward op's user line
        for i, node in enumerate(gm.graph.nodes):
            self.node = node
            self.defined[node] = i
            self.loc = user_loc(node)
            seq = node.meta.get("seq_nr")
            if self.loc and seq is not None:
                forward_loc.setdefault(seq, self.loc)
            elif self.loc is None and seq is not None:
                # A backward op: where its forward op is in the user's code.
                self.loc = forward_loc.get(seq)
            if node.target is torch.ops.profiler._record_function_enter_new.default and \
                    str(node.args[0] if node.args else "").startswith("Optimizer.step"):
                self.update_depth += 1
            elif node.target is torch.ops.profiler._record_function_exit._RecordFunction and \
                    self.update_depth:
                self.update_depth -= 1
            if self.update_depth and self.loc is None:
                self.loc = self.update_loc
            if node.op == "placeholder":
                continue  # bound by the caller
            if node.op == "output":
                outputs = [self.value(a) if isinstance(a, torch.fx.Node) and
                           self.values.get(a) is not None else None for a in node.args[0]]
                continue
            if node.op == "get_attr":
                const = getattr(gm, node.target, None)
                if isinstance(const, (torch.ScriptObject, torch.fx.GraphModule)):
                    # A process group or reduction of a c10d collective, a subgraph of a
                    # higher-order op (FlexAttention's mask): read by its rule.
                    self.objects[node] = const
                    self.values[node] = None
                elif isinstance(const, torch.Tensor) and not const.is_floating_point() and \
                        not const.is_complex():
                    # An integer constant (FlexAttention's block-mask tables and the
                    # buffers its mask reads): only a rule that evaluates it reads it.
                    self.objects[node] = const
                    self.values[node] = IdsExpr("int_constant", None)
                else:
                    self.values[node] = self.constant(node, const)
                continue
            if node.op != "call_function":
                self.fail(f"FX node `{node.name}` ({node.op}) is not an op call")
            target = node.target
            if target is operator.getitem:
                src, idx = node.args
                pieces = self.values.get(src)
                if not isinstance(pieces, tuple):
                    self.fail(f"element {idx} of `{src.name}`")
                # An element without a value (attention's log-sum-exp) fails when read.
                self.values[node] = pieces[idx]
                if not _fresh_list(src):
                    self.view_of[node] = src  # (conservatively: the parts alias)
                continue
            packet = getattr(target, "overloadpacket", None)
            rule = RULES.get(target) or RULES.get(packet)
            if rule is None and packet is not None:
                rule = self.in_place(node)
            if rule is None and packet is not None and packet.__name__.startswith("_foreach_"):
                rule = multi_tensor.foreach
            if rule is None:
                self.fail(f"op `{target}` is not covered (docs/torch.md lists the covered "
                          "ops); the result is inconclusive")
            if rule not in COMPLEX_RULES and (_is_complex(node) or any(
                    _is_complex(a) for a in _nodes(list(node.args) + list(node.kwargs.values())))):
                self.fail(f"op `{target}` on complex tensors (covered for complex: views, "
                          "slices, mul, conj, view_as_real/complex)")
            self.values[node] = rule(self, node, *node.args, **node.kwargs)
            if packet is not None and packet.__name__ in VIEWS and node.args and \
                    isinstance(node.args[0], torch.fx.Node):
                self.view_of[node] = node.args[0]
        check_below_all(self)
        for ids, test in self.order_tested.items():
            ranges = self.order_ranges.get(ids, [])
            shard = ranges and all(hi < self.int_bounds.get(ids, hi + 1) for _, hi in ranges)
            if ids not in self.row_lookups and not shard:
                # (token ids' domain is a table's rows; a range test [0, hi) whose end
                # splits the classes says which shard holds a class)
                self.assume(f"the labels are classes on every token: the step tests them "
                            f"for a value below 0 (`{test}`) and the captured batch holds "
                            "none, so batches with such tokens (padding) are not checked; "
                            "capture a batch that holds one to have them checked")
        return outputs

    def constant(self, node, value):
        """A tensor constant of the graph (a `torch.tensor(...)` in the step, a complex
        buffer such as rotary's `freqs_cis`): a literal (a complex one of its real and
        imaginary parts)."""
        if isinstance(value, torch.Tensor) and value.is_complex():
            value = torch.view_as_real(value)
        if not isinstance(value, torch.Tensor) or not value.is_floating_point() or \
                value.numel() > 65536:
            self.fail(f"constant `{node.target}` is not a float tensor of at most 65536 "
                      "elements")
        shape = [int(d) for d in value.shape]
        return self.emit("literal", [], shape,
                         {"values": [float(x) for x in value.detach().double().flatten()]},
                         result_shape_attr=True)


# --- the rules: one per aten op (or op packet) ---------------------------------------------
RULES = {}

# Ops whose result shares its first operand's storage (an in-place update of one makes
# the others stale).
VIEWS = {"view", "_unsafe_view", "reshape", "t", "transpose", "permute", "expand", "alias",
         "squeeze", "unsqueeze", "detach", "slice", "select", "as_strided", "split",
         "split_with_sizes", "unbind", "flatten", "view_as", "diagonal", "narrow", "unfold",
         "contiguous"}


def rule(*targets):
    def register(fn):
        for t in targets:
            RULES[t] = fn
        return fn
    return register


def _out(node):
    s = _shape(node)
    if s is None:
        raise Unsupported(f"`{node.name}` has no tensor result")
    return s


@rule(aten.mm.default)
def _mm(t, node, a, b):
    return t.emit("matmul", [t.value(a), t.value(b)], _out(node), {"lhs_dim": 1, "rhs_dim": 0})


@rule(aten.dot.default)
def _dot(t, node, a, b):
    return t.emit("dot", [t.value(a), t.value(b)], _out(node))


@rule(aten.bmm.default)
def _bmm(t, node, a, b):
    return t.emit("batch_matmul", [t.value(a), t.value(b)], _out(node), {"lhs_dim": 2, "rhs_dim": 1})


@rule(aten.addmm.default)
def _addmm(t, node, bias, a, b, beta=1, alpha=1):
    if beta != 1 or alpha != 1:
        t.fail("addmm with beta or alpha other than 1")
    shape = _out(node)
    prod = t.emit("matmul", [t.value(a), t.value(b)], shape, {"lhs_dim": 1, "rhs_dim": 0})
    return t.emit("add", [prod, t.broadcast_to(t.value(bias), shape)], shape)


@rule(aten.t.default)
def _t(t, node, a):
    v = t.value(a)
    if len(t.shapes[v]) < 2:
        return v
    return t.emit("transpose", [v], _out(node), {"perm": [1, 0]})


@rule(aten.transpose.int)
def _transpose(t, node, a, d0, d1):
    v = t.value(a)
    n = len(t.shapes[v])
    perm = list(range(n))
    perm[d0 % n], perm[d1 % n] = perm[d1 % n], perm[d0 % n]
    if perm == list(range(n)):
        return v
    return t.emit("transpose", [v], _out(node), {"perm": perm})


@rule(aten.permute.default)
def _permute(t, node, a, dims):
    v = t.value(a)
    n = len(t.shapes[v])
    perm = [d % n for d in dims]
    if perm == list(range(n)):
        return v
    return t.emit("transpose", [v], _out(node), {"perm": perm})


@rule(aten.view.default, aten._unsafe_view.default, aten.reshape.default,
      aten.unsqueeze.default, aten.squeeze.dim, aten.squeeze.dims, aten.squeeze.default,
      aten.flatten.using_ints)
def _view(t, node, a, *rest):
    raw = t.values.get(a) if isinstance(a, torch.fx.Node) else None
    if isinstance(raw, IdsExpr) and raw.kind in IdsExpr.PER_ID:
        return raw  # a function of each id, viewed (unsqueezed to mask embedding rows)
    if isinstance(raw, str) and raw in t.ints and a not in t.stale and \
            t.shapes[raw] == [math.prod(_out(node))]:
        return raw  # token ids (held flat) viewed as themselves
    return t.reshape(t.value(a), _out(node))


@rule(aten.expand.default)
def _expand(t, node, a, size, implicit=False):
    return t.broadcast_to(t.value(a), _out(node))


@rule(aten.clone.default, aten.detach.default, aten.alias.default, aten.lift_fresh_copy.default,
      aten.contiguous.default, torch.ops._c10d_functional.wait_tensor.default)
def _identity(t, node, a, *rest, **kw):
    raw = t.values.get(a) if isinstance(a, torch.fx.Node) else None
    if isinstance(raw, IdsExpr) or (raw in t.ints and a not in t.stale):
        return raw  # token ids (and the shard masks built from them) pass through
    if isinstance(a, torch.fx.Node) and a in t.values and raw is None and a not in t.unwritten:
        return None  # an alias of a result without a value (attention's log-sum-exp)
    return t.value(a)


@rule(aten._to_copy.default)
def _to_copy(t, node, a, **kw):
    """A copy, or a conversion between floating-point types (bf16 and fp16 autocast,
    mixed precision): the same real number -- values are reals, and a format's rounding
    is the replay's concern (`--dtype`), as for XLA's converts."""
    dtype = kw.get("dtype")
    if dtype is not None and not (dtype.is_floating_point and not dtype.is_complex):
        t.fail(f"conversion to {dtype} (planproof models floating-point values)")
    raw = t.values.get(a) if isinstance(a, torch.fx.Node) else None
    if isinstance(raw, IdsExpr) and raw.kind in ("mask", "inside"):
        return _mask_value(t, raw, _out(node))
    if isinstance(raw, IdsExpr) and raw.kind == "arange" and dtype is not None:
        return _positions(t, raw.hi)  # positions as numbers (rotary angles)
    return t.value(a)


def _positions(t, n):
    """The numbers 0..n-1 as a float literal (exact integers)."""
    if n > 65536:
        t.fail("positions as numbers past 65536 elements")
    return t.emit("literal", [], [n], {"values": [float(i) for i in range(n)]},
                  result_shape_attr=True)


def _scaled_operand(t, b, alpha, shape):
    """alpha * b, broadcast to `shape` (a number b stays a constant)."""
    if isinstance(b, (int, float)) and not isinstance(b, bool):
        return t.value(float(b) * float(alpha), shape)
    v = t.broadcast_to(t.value(b, shape), shape)
    return v if alpha == 1 else t.scale(v, alpha, shape)


@rule(aten.add.Tensor, aten.add.Scalar)
def _add(t, node, a, b, alpha=1):
    shape = _out(node)
    return t.emit("add", [t.broadcast_to(t.value(a, shape), shape),
                          _scaled_operand(t, b, alpha, shape)], shape)


@rule(aten.sub.Tensor, aten.sub.Scalar)
def _sub(t, node, a, b, alpha=1):
    ids = _ids_of(t, a)
    if ids is not None:
        if not isinstance(b, int) or alpha != 1:
            t.fail("arithmetic on token ids other than subtracting a shard's first row")
        return IdsExpr("shift", ids, lo=b)
    shape = _out(node)
    r = t.emit("sub", [t.broadcast_to(t.value(a, shape), shape),
                       _scaled_operand(t, b, alpha, shape)], shape)
    m = t.mask_of.get(t.values.get(a)) if isinstance(a, torch.fx.Node) else None
    if m is not None and m.kind == "mask" and b == 1 and alpha == 1:
        t.zero_outside[r] = m  # [id outside] - 1 = -[id inside]: 0 for ids outside
    return r


@rule(aten.lerp.Scalar, aten.lerp.Tensor)
def _lerp(t, node, a, b, weight):
    # a + w (b - a), as torch.lerp computes it (Adam's first moment)
    shape = _out(node)
    av = t.broadcast_to(t.value(a, shape), shape)
    diff = t.emit("sub", [t.broadcast_to(t.value(b, shape), shape), av], shape)
    if isinstance(weight, (int, float)) and not isinstance(weight, bool):
        step = t.scale(diff, weight, shape)
    else:
        step = t.emit("mul", [t.broadcast_to(t.value(weight, shape), shape), diff], shape)
    return t.emit("add", [av, step], shape)


@rule(aten.addcmul.default, aten.addcdiv.default)
def _addc(t, node, a, b, c, value=1):
    # a + value * (b * c), a + value * (b / c) (Adam's second moment and its update)
    shape = _out(node)
    op = "mul" if node.target.overloadpacket in (aten.addcmul, aten.addcmul_) else "div"
    term = t.binary(op, b, c, shape)
    if value != 1:
        term = t.scale(term, value, shape)
    return t.emit("add", [t.broadcast_to(t.value(a, shape), shape), term], shape)


@rule(aten.copy.default)
def _copy(t, node, dest, src, non_blocking=False):
    # The values of src, in dest's shape (copy_ is the in-place form).
    return t.broadcast_to(t.value(src, _out(node)), _out(node))


@rule(torch.ops.profiler._record_function_enter_new.default,
      torch.ops.profiler._record_function_exit._RecordFunction)
def _profiler(t, node, *args, **kw):
    return None  # profiler ranges (torch.optim's "Optimizer.step#..."): no value


@rule(aten.rsub.Scalar)
def _rsub(t, node, a, b, alpha=1):
    if alpha != 1:
        t.fail("rsub with alpha other than 1")
    return t.binary("sub", b, a, _out(node))


@rule(aten.mul.Tensor, aten.mul.Scalar)
def _mul(t, node, a, b):
    if _is_complex(node):
        return _complex_mul(t, node, a, b)
    shape = _out(node)
    for x, y in ((a, b), (b, a)):
        if isinstance(y, (int, float)) and not isinstance(y, bool):
            return t.scale(t.broadcast_to(t.value(x), shape), y, shape)
    for x, y in ((a, b), (b, a)):
        raw = t.values.get(x) if isinstance(x, torch.fx.Node) else None
        m = t.mask_of.get(t.values.get(y)) if isinstance(y, torch.fx.Node) else None
        if isinstance(raw, IdsExpr) and raw.kind == "clamped_embedding":
            # torchtitan's vocabulary-parallel embedding: the rows of the clamped
            # shifted ids times [id in [lo, lo + rows)] -- embedding with the offset lo
            # (rows outside the shard give zeros).
            rows = t.shapes[raw.table][0]
            if m is None or m.kind != "inside" or m.ids != raw.ids or \
                    (m.lo, m.hi) != (raw.lo, raw.lo + rows):
                t.fail("the rows of clamped shifted ids multiplied by other than the mask "
                       "of the ids in the shard")
            return t.reshape(_offset_embedding(t, raw.table, raw.ids, raw.lo, rows), shape)
    av = t.broadcast_to(t.value(a, shape), shape)
    bv = t.broadcast_to(t.value(b, shape), shape)
    r = t.emit("mul", [av, bv], shape)
    for y, other in ((a, bv), (b, av)):
        m = t.mask_of.get(t.values.get(y)) if isinstance(y, torch.fx.Node) else None
        if m is not None and m.kind == "inside":
            t.zero_outside[r] = m
            t.unmasked[r] = other
    return r


@rule(aten.div.Tensor, aten.div.Scalar)
def _div(t, node, a, b):
    # A division by a number stays a division (x / 3 is not x * 0.333...).
    return t.binary("div", a, b, _out(node))


@rule(aten.neg.default)
def _neg(t, node, a):
    return t.scale(t.value(a), -1.0, _out(node))


@rule(aten.maximum.default)
def _maximum(t, node, a, b):
    return t.binary("maximum", a, b, _out(node))


@rule(aten.minimum.default)
def _minimum(t, node, a, b):
    return t.binary("minimum", a, b, _out(node))


@rule(aten.abs.default)
def _abs(t, node, a):
    """|x| = max(x, -x) (Adamax's norm; its backward, through comparisons, is not
    covered)."""
    shape = _out(node)
    v = t.value(a)
    return t.emit("maximum", [v, t.scale(v, -1.0, shape)], shape)


def _unary(op):
    def fn(t, node, a):
        return t.emit(op, [t.value(a)], _out(node))
    return fn


for _op, _name in ((aten.exp.default, "exp"), (aten.log.default, "log"),
                   (aten.rsqrt.default, "rsqrt"), (aten.sqrt.default, "sqrt"),
                   (aten.reciprocal.default, "recip"), (aten.silu.default, "silu"),
                   (aten.tanh.default, "tanh"), (aten.sigmoid.default, "logistic"),
                   (aten.erf.default, "erf"), (aten.sin.default, "sin"),
                   (aten.cos.default, "cos")):
    RULES[_op] = _unary(_name)


@rule(aten.relu.default)
def _relu(t, node, a):
    # max(x, 0)
    return t.binary("maximum", a, 0.0, _out(node))


@rule(aten.threshold_backward.default)
def _threshold_backward(t, node, grad, x, threshold):
    # grad where x > threshold, else 0: grad * step(x - threshold)
    shape = _out(node)
    xv = t.value(x)
    if float(threshold) != 0.0:
        xv = t.emit("sub", [xv, t.value(float(threshold), shape)], shape)
    return t.emit("mul", [t.value(grad), t.emit("step", [xv], shape)], shape)


@rule(aten.tanh_backward.default)
def _tanh_backward(t, node, grad, out):
    # grad * (1 - out^2), from the forward's output
    shape = _out(node)
    g, y = t.value(grad), t.value(out)
    return t.emit("sub", [g, t.emit("mul", [g, t.emit("mul", [y, y], shape)], shape)], shape)


@rule(aten.sigmoid_backward.default)
def _sigmoid_backward(t, node, grad, out):
    # grad * out * (1 - out), from the forward's output
    shape = _out(node)
    g, y = t.value(grad), t.value(out)
    return t.emit("mul", [g, t.emit("sub", [y, t.emit("mul", [y, y], shape)], shape)], shape)


# The tanh approximation's constants, as PyTorch's kernel has them: sqrt(2/pi) (as the
# double nearest it) and the cubic's coefficient.
_GELU_TANH_C = math.sqrt(2.0 / math.pi)
_GELU_TANH_K = 0.044715


def _gelu_tanh_inner(t, x, shape):
    """tanh(c * (x + k x^3)), with x^3 and the constants written out."""
    cube = t.emit("mul", [t.emit("mul", [x, x], shape), x], shape)
    inner = t.emit("add", [x, t.scale(cube, _GELU_TANH_K, shape)], shape)
    return t.emit("tanh", [t.scale(inner, _GELU_TANH_C, shape)], shape)


@rule(aten.gelu.default)
def _gelu(t, node, a, approximate="none"):
    """The exact GELU is planproof's `gelu`; the tanh approximation (GPT-2's) is its
    formula, 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), in elementwise ops."""
    shape = _out(node)
    if approximate == "tanh":
        x = t.value(a)
        th = _gelu_tanh_inner(t, x, shape)
        one_plus = t.emit("add", [t.value(1.0, shape), th], shape)
        return t.scale(t.emit("mul", [x, one_plus], shape), 0.5, shape)
    if approximate != "none":
        t.fail(f"gelu with approximate='{approximate}'")
    return t.emit("gelu", [t.value(a)], shape)


@rule(aten.gelu_backward.default)
def _gelu_backward(t, node, grad, a, approximate="none"):
    """The tanh approximation's derivative, written out: with th = tanh(c (x + k x^3)),
    g * (0.5 (1 + th) + 0.5 x (1 - th^2) c (1 + 3 k x^2))."""
    shape = _out(node)
    if approximate == "tanh":
        x, g = t.value(a), t.value(grad)
        th = _gelu_tanh_inner(t, x, shape)
        one = t.value(1.0, shape)
        left = t.scale(t.emit("add", [one, th], shape), 0.5, shape)
        sech2 = t.emit("sub", [t.value(1.0, shape), t.emit("mul", [th, th], shape)], shape)
        slope = t.emit("add", [t.value(1.0, shape),
                               t.scale(t.emit("mul", [x, x], shape), 3 * _GELU_TANH_K, shape)],
                       shape)
        right = t.scale(t.emit("mul", [t.emit("mul", [x, sech2], shape), slope], shape),
                        0.5 * _GELU_TANH_C, shape)
        return t.emit("mul", [g, t.emit("add", [left, right], shape)], shape)
    if approximate != "none":
        t.fail(f"gelu_backward with approximate='{approximate}'")
    return t.emit("gelu_grad", [t.value(a), t.value(grad)], shape)


def _norm_dims(t, x, normalized_shape):
    shape = list(t.shapes[x])
    k = len(normalized_shape)
    if k == 0 or k > len(shape) or shape[len(shape) - k:] != list(normalized_shape):
        t.fail(f"layer_norm over {list(normalized_shape)} of a {shape} tensor")
    axis = len(shape) - k
    return shape, list(range(axis, len(shape))), shape[:axis] + [1] * k


@rule(aten.native_layer_norm.default)
def _layer_norm(t, node, a, normalized_shape, weight, bias, eps):
    """LayerNorm by its definition, over the last dims: mu = mean(x), var = mean((x -
    mu)^2) (biased), rstd = rsqrt(var + eps), (x - mu) rstd w + b; mu and rstd are
    results too (the backward reads them), kept as [..., 1]."""
    x = t.value(a)
    shape, dims, kept = _norm_dims(t, x, normalized_shape)
    mu = t.reduce("reduce_mean", x, dims, True, kept)
    xc = t.emit("sub", [x, t.broadcast_to(mu, shape)], shape)
    var = t.reduce("reduce_mean", t.emit("mul", [xc, xc], shape), dims, True, kept)
    rstd = t.emit("rsqrt", [t.emit("add", [var, t.value(float(eps), kept)], kept)], kept)
    out = t.emit("mul", [xc, t.broadcast_to(rstd, shape)], shape)
    if weight is not None:
        out = t.emit("mul", [out, t.broadcast_to(t.value(weight), shape)], shape)
    if bias is not None:
        out = t.emit("add", [out, t.broadcast_to(t.value(bias), shape)], shape)
    return (out, mu, rstd)


@rule(aten.native_layer_norm_backward.default)
def _layer_norm_backward(t, node, grad, a, normalized_shape, mean, rstd, weight, bias,
                         output_mask):
    """With xhat = (x - mu) rstd and gw = g w: dx = rstd (gw - mean(gw) - xhat
    mean(gw xhat)) over the normalized dims; dw = sum of g xhat and db = sum of g over
    the leading dims."""
    x, g = t.value(a), t.value(grad)
    shape, dims, kept = _norm_dims(t, x, normalized_shape)
    mu, rs = t.value(mean), t.value(rstd)
    rsb = t.broadcast_to(rs, shape)
    xhat = t.emit("mul", [t.emit("sub", [x, t.broadcast_to(mu, shape)], shape), rsb], shape)
    gw = g if weight is None else t.emit("mul", [g, t.broadcast_to(t.value(weight), shape)],
                                         shape)
    m1 = t.broadcast_to(t.reduce("reduce_mean", gw, dims, True, kept), shape)
    m2 = t.broadcast_to(t.reduce("reduce_mean", t.emit("mul", [gw, xhat], shape), dims, True,
                                 kept), shape)
    inner = t.emit("sub", [t.emit("sub", [gw, m1], shape), t.emit("mul", [xhat, m2], shape)],
                   shape)
    dx = t.emit("mul", [rsb, inner], shape) if output_mask[0] else None
    lead = list(range(len(shape) - len(dims)))
    norm = list(normalized_shape)
    dw = db = None
    if output_mask[1] and weight is not None:
        dw = t.reduce("reduce_sum", t.emit("mul", [g, xhat], shape), lead, False, norm)
    if output_mask[2] and bias is not None:
        db = t.reduce("reduce_sum", g, lead, False, norm)
    return (dx, dw, db)


@rule(aten.silu_backward.default)
def _silu_backward(t, node, grad, a):
    return t.emit("silu_grad", [t.value(a), t.value(grad)], _out(node))


@rule(aten.pow.Tensor_Scalar)
def _pow(t, node, a, exponent):
    """x^k for integer |k| <= 8 as products (of x, or of recip(x)), and x^(k + 1/2) for
    those k with one sqrt or rsqrt factor: exact, no transcendental function."""
    shape = _out(node)
    v = t.value(a)
    e = float(exponent)
    if e == 0:
        return t.emit("constant", [], shape, {"value": 1.0}, result_shape_attr=True)
    whole = math.floor(abs(e))
    half = abs(e) - whole
    if half not in (0.0, 0.5) or whole > 8:
        t.fail(f"pow with exponent {exponent}")
    base = v if e > 0 else t.emit("recip", [v], shape)
    factors = [base] * whole
    if half:
        factors.append(t.emit("sqrt" if e > 0 else "rsqrt", [v], shape))
    out = factors[0]
    for f in factors[1:]:
        out = t.emit("mul", [out, f], shape)
    return out


def _reduction(op):
    """sum / mean / amax, over `dims` (all of them when none are given), with keepdim."""
    def fn(t, node, a, dims=None, keepdim=False, dtype=None):
        raw = t.values.get(a) if isinstance(a, torch.fx.Node) else None
        if op == "reduce_sum" and isinstance(raw, IdsExpr) and raw.kind == "all" and \
                not dims and dtype is None:
            # The count of labels that are not the ignored label: all of them, every
            # label being a class (the domain the proof covers).
            return t.emit("constant", [], [], {"value": float(t.shapes[raw.ids][0])},
                          result_shape_attr=True)
        v = t.value(a)
        if not dims:
            dims = range(len(t.shapes[v]))
        return t.reduce(op, v, dims, keepdim, _out(node))
    return fn


for _op, _name in ((aten.sum.default, "reduce_sum"), (aten.sum.dim_IntList, "reduce_sum"),
                   (aten.mean.default, "reduce_mean"), (aten.mean.dim, "reduce_mean"),
                   (aten.amax.default, "reduce_max")):
    RULES[_op] = _reduction(_name)


@rule(aten.linalg_vector_norm.default)
def _vector_norm(t, node, a, ord=2, dim=None, keepdim=False, dtype=None):
    """The 2-norm: sqrt of the sum of squares over `dim` (every dimension when none); the
    infinity norm: the largest |x|, |x| = max(x, -x); other orders are not covered."""
    if float(ord) not in (2.0, math.inf) or dtype is not None:
        t.fail(f"vector_norm of order {ord}" + (f" in {dtype}" if dtype is not None else "")
               + " (the 2-norm and the infinity norm are covered)")
    v = t.value(a)
    shape = t.shapes[v]
    dims = range(len(shape)) if not dim else [d % len(shape) for d in dim]
    if float(ord) == math.inf:
        magnitude = t.emit("maximum", [v, t.scale(v, -1.0, list(shape))], list(shape))
        return t.reduce("reduce_max", magnitude, dims, keepdim, _out(node))
    sq = t.emit("mul", [v, v], list(shape))
    total = t.reduce("reduce_sum", sq, dims, keepdim, _out(node))
    return t.emit("sqrt", [total], _out(node))


@rule(aten.ones_like.default, aten.zeros_like.default, aten.full_like.default,
      aten.ones.default, aten.zeros.default, aten.full.default, aten.scalar_tensor.default,
      aten.new_ones.default, aten.new_zeros.default, aten.new_full.default)
def _filled(t, node, *args, **kw):
    packet = node.target.overloadpacket
    if packet in (aten.ones_like, aten.ones, aten.new_ones):
        value = 1.0
    elif packet in (aten.zeros_like, aten.zeros, aten.new_zeros):
        value = 0.0
    elif packet in (aten.full_like, aten.new_full):
        value = args[-1] if packet is aten.full_like else args[2]
    elif packet is aten.full:
        value = args[1]
    else:  # scalar_tensor
        value = args[0]
    if kw.get("dtype") in (torch.int64, torch.int32, torch.bool):
        # An integer tensor (where's other branch, FlexAttention's unused counters):
        # only a rule that evaluates it may read it.
        return IdsExpr("int_constant", None, lo=int(value))
    if kw.get("dtype") not in (None, torch.float32):
        t.fail(f"a {kw.get('dtype')} tensor (planproof models float32 values)")
    r = t.emit("constant", [], _out(node), {"value": float(value)}, result_shape_attr=True)
    if float(value) == 0:
        t.zero_filled.add(r)
    return r


@rule(aten._softmax.default)
def _softmax(t, node, a, dim, half_to_float=False):
    v = t.value(a)
    if dim % len(t.shapes[v]) != len(t.shapes[v]) - 1:
        t.fail("softmax over a dimension other than the last")
    return t.emit("softmax", [v], _out(node))


@rule(aten._log_softmax.default)
def _log_softmax(t, node, a, dim, half_to_float=False):
    v = t.value(a)
    shape = _out(node)
    if dim % len(shape) != len(shape) - 1:
        t.fail("log_softmax over a dimension other than the last")
    # (x - m) - log(sum(exp(x - m))), m the row maximum: the form every stable
    # implementation computes (torch's kernel, a vocabulary-parallel cross-entropy
    # all-reducing m and the sum), so that those meet it op for op.
    d = len(shape) - 1
    rows = shape[:-1]
    kept = rows + [1]
    m = t.broadcast_to(t.reshape(t.reduce("reduce_max", v, [d], False, rows), kept), shape)
    shifted = t.emit("sub", [v, m], shape)
    total = t.reduce("reduce_sum", t.emit("exp", [shifted], shape), [d], False, rows)
    lse = t.broadcast_to(t.reshape(t.emit("log", [total], rows), kept), shape)
    return t.emit("sub", [shifted, lse], shape)


@rule(aten._softmax_backward_data.default)
def _softmax_backward(t, node, grad, out, dim, input_dtype):
    # dx = y * (g - sum_j g_j y_j)
    shape = _out(node)
    g, y = t.value(grad), t.value(out)
    d = dim % len(shape)
    gy = t.emit("mul", [g, y], shape)
    s = t.reduce("reduce_sum", gy, [d], False, [k for i, k in enumerate(shape) if i != d])
    diff = t.emit("sub", [g, t.broadcast_to(t.reshape(s, [k if i != d else 1 for i, k in enumerate(shape)]), shape)], shape)
    return t.emit("mul", [y, diff], shape)


@rule(aten._log_softmax_backward_data.default)
def _log_softmax_backward(t, node, grad, out, dim, input_dtype):
    # dx = g - exp(y) * sum_j g_j
    shape = _out(node)
    g, y = t.value(grad), t.value(out)
    d = dim % len(shape)
    if g in t.row_sums and d == len(shape) - 1:
        s = t.row_sums[g]  # (nll_loss_backward's rows: one nonzero each)
    else:
        s = t.reduce("reduce_sum", g, [d], False, [k for i, k in enumerate(shape) if i != d])
    sb = t.broadcast_to(t.reshape(s, [k if i != d else 1 for i, k in enumerate(shape)]), shape)
    return t.emit("sub", [g, t.emit("mul", [t.emit("exp", [y], shape), sb], shape)], shape)


@rule(aten.mse_loss.default)
def _mse_loss(t, node, a, b, reduction=1):
    if reduction != 1:
        t.fail("mse_loss with a reduction other than 'mean'")
    return t.emit("mse_loss", [t.value(a), t.value(b)], _out(node))


@rule(aten.mse_loss_backward.default)
def _mse_loss_backward(t, node, grad, a, b, reduction=1):
    # d/da mean((a-b)^2) * g = 2 (a - b) g / N
    if reduction != 1:
        t.fail("mse_loss_backward with a reduction other than 'mean'")
    shape = _out(node)
    n = math.prod(shape)
    diff = t.emit("sub", [t.value(a), t.value(b)], shape)
    g = t.broadcast_to(t.value(grad), shape)
    prod = t.scale(t.emit("mul", [diff, g], shape), 2.0, shape)
    return t.emit("div", [prod, t.value(float(n), shape)], shape)


class IdsExpr:
    """What the translation knows of an integer tensor computed from token ids, for
    DTensor's vocabulary-parallel embedding (`MaskPartial`): `mask` = ids outside
    [lo, hi) (`lt`, `ge`, `bitwise_or`), `shift` = ids - lo, `masked_shift` = the shift
    with the masked ids set to 0, `masked_embedding` = the lookup of those in the
    shard's table. Only the whole idiom -- that lookup with the masked rows zeroed --
    becomes an op (planproof's `embedding` with a row offset); reading any part
    otherwise stops the translation."""

    # Kinds that are a function of each id (elementwise), so views pass them through.
    PER_ID = ("mask", "inside", "all", "none", "shift", "masked_shift", "clamped_shift")

    def __init__(self, kind, ids, lo=None, hi=None, mask=None, table=None, shape=None):
        self.kind, self.ids, self.lo, self.hi = kind, ids, lo, hi
        self.mask, self.table, self.shape = mask, table, shape


def _ids_of(t, x):
    """The token-id input `x` is (through identities), or None."""
    raw = t.values.get(x) if isinstance(x, torch.fx.Node) else None
    return raw if isinstance(raw, str) and raw in t.ints else None


@rule(aten.lt.Scalar, aten.ge.Scalar, aten.gt.Scalar, aten.le.Scalar)
def _compare_ids(t, node, a, k):
    """Token ids against a bound: `ids < k` (`ids <= k - 1`) and `ids >= k` (`ids > k - 1`)
    of integer ids, as a mask of the ids outside [k, ...) or [..., k). Labels that may be
    the ignored label L (t.kept) tested by a bound every class passes alike and L does
    not (`labels >= 0`, `labels > -100` for L = -100): their kept column, or 1 minus it."""
    ids = _ids_of(t, a)
    if ids is None or not isinstance(k, int) or isinstance(k, bool):
        t.fail(f"comparison `{node.target}` (covered: token ids against a shard's row "
               "bounds, as DTensor's vocabulary-parallel embedding does)")
    below = node.target in (aten.lt.Scalar, aten.le.Scalar)
    if node.target in (aten.gt.Scalar, aten.le.Scalar):
        k += 1  # (of integers: > k is >= k + 1, <= k is < k + 1)
    if ids in t.kept:
        return _compare_ignorable(t, node, ids, k, below)
    if k <= 0:  # the same on every id, but not on a label below 0
        t.order_tested.setdefault(ids, f"{'<' if below else '>='} {k}")
    lo, hi = (k, None) if below else (None, k)
    return IdsExpr("mask", ids, lo=lo, hi=hi)


def _compare_ignorable(t, node, ids, k, below):
    """`ids < k` (below) or `ids >= k` of labels that may be the ignored label L < 0, each
    a class in [0, bound) or L: with L < k <= 0 every class passes `>= k` and L does not,
    so the test is the kept column (1 minus it for `<`); `>= k` with k <= L, and `< k`
    with k at least the classes' bound (checked once the whole step is read, when the
    bound is known: t.below_all), hold on every label. Other bounds split the classes."""
    ignored = t.ignored[ids]
    shape = _out(node)
    if ignored >= 0:  # (capture.ignored_labels: always a negative value)
        t.fail(f"comparison of labels whose ignored label {ignored} is not below the classes")
    if ignored < k <= 0:
        col = t.reshape(_kept_col(t, ids), shape)
        return t.emit("sub", [t.value(1.0, shape), col], shape) if below else col
    if not below and k <= ignored:
        return IdsExpr("all", ids)
    if below and k > 0:
        t.below_all.append((ids, k, t.loc))
        return IdsExpr("all", ids)
    t.fail(f"comparison `{node.target}` of labels that may be the ignored label {ignored} "
           "with a bound that splits the classes (covered: a bound that every class passes "
           "and the ignored label fails, or that every label passes)")


def check_below_all(t):
    """Each `labels < k` read as true on every label (_compare_ignorable) is: k is at
    least the labels' bound, the classes they index."""
    for ids, k, loc in t.below_all:
        bound = t.int_bounds.get(ids)
        if bound is None or k < bound:
            raise Unsupported(f"comparison of labels with {k}, which splits their "
                              f"{'classes' if bound is None else f'{bound} classes'} (covered: "
                              "a bound that every class passes and the ignored label fails, "
                              "or that every label passes)", loc)


@rule(aten.bitwise_or.Tensor)
def _mask_or(t, node, a, b):
    ma, mb = (t.values.get(x) if isinstance(x, torch.fx.Node) else None for x in (a, b))
    if not (isinstance(ma, IdsExpr) and isinstance(mb, IdsExpr) and ma.kind == mb.kind == "mask"
            and ma.ids == mb.ids):
        t.fail("bitwise_or other than of two bounds on the same token ids")
    lo = ma.lo if ma.lo is not None else mb.lo
    hi = ma.hi if ma.hi is not None else mb.hi
    if lo is None or hi is None:
        t.fail("bitwise_or of two bounds on the same side")
    t.order_ranges.setdefault(ma.ids, []).append((lo, hi))  # (outside [lo, hi))
    return IdsExpr("mask", ma.ids, lo=lo, hi=hi)


@rule(aten.bitwise_and.Tensor)
def _mask_and(t, node, a, b):
    """ids >= lo & ids < hi: the ids in [lo, hi) (torchtitan's vocabulary-parallel
    embedding)."""
    ma, mb = (t.values.get(x) if isinstance(x, torch.fx.Node) else None for x in (a, b))
    for one, other in ((ma, b), (mb, a)):  # (a test true on every label: the other one)
        if isinstance(one, IdsExpr) and one.kind == "all" and isinstance(other, torch.fx.Node):
            return t.values[other] if isinstance(t.values.get(other), IdsExpr) else t.value(other)
    if not (isinstance(ma, IdsExpr) and isinstance(mb, IdsExpr) and ma.kind == mb.kind == "mask"
            and ma.ids == mb.ids):
        t.fail("bitwise_and other than of two bounds on the same token ids")
    # (a "mask" from ge(k) has hi = k: ids >= k; from lt(k) lo = k: ids < k)
    ge = ma if ma.hi is not None and ma.lo is None else mb
    lt = mb if ge is ma else ma
    if ge.hi is None or ge.lo is not None or lt.lo is None or lt.hi is not None:
        t.fail("bitwise_and of two bounds on the same side")
    t.order_ranges.setdefault(ge.ids, []).append((ge.hi, lt.lo))
    return IdsExpr("inside", ge.ids, lo=ge.hi, hi=lt.lo)


@rule(aten.ne.Scalar, aten.eq.Scalar)
def _ids_vs_constant(t, node, a, k):
    """ids != k and ids == k. For a negative k (the ignored label -100: `labels != -100`,
    label smoothing's mask `labels == -100`): true, and false, for every id, the ids
    being rows of a table (the domain the proof covers; a captured label outside it
    stops the capture). For a class k (a padding token's id: `labels != pad_id`): 1 -
    the ids' one-hot column of k, and that column, as 0/1 numbers. For labels that may
    be the ignored label: their kept column (k that label), or it times the class's
    column (an ignored token's label is no class). A negative k that no captured label
    holds leaves the labels classes: an assumption the spec states."""
    ids = _ids_of(t, a)
    if ids is None or not isinstance(k, int) or isinstance(k, bool):
        t.fail(f"comparison `{node.target}` (covered: token ids against a number)")
    shape = _out(node)
    eq = node.target is aten.eq.Scalar
    if ids in t.kept and k == t.ignored[ids]:
        # Labels that may be ignored: which are kept (or ignored), as 0/1 numbers.
        col = t.reshape(_kept_col(t, ids), shape)
        return t.emit("sub", [t.value(1.0, shape), col], shape) if eq else col
    if k < 0:
        # (no captured label is k: the spec's labels are classes, which it says)
        t.assume(f"the labels are classes on every token: the step compares them with {k} "
                 "(an ignored label) and the captured batch holds none, so batches with "
                 "such tokens (padding) are not checked; capture a batch that holds one to "
                 "have them checked")
        return IdsExpr("none" if eq else "all", ids)
    n = t.shapes[ids][0]
    if ids not in t.kept:
        return t.reshape(_mask_value(t, IdsExpr("inside" if eq else "mask", ids, lo=k,
                                                hi=k + 1), [n]), shape)
    col = t.emit("mul", [_mask_value(t, IdsExpr("inside", ids, lo=k, hi=k + 1), [n]),
                         _kept_col(t, ids)], [n])
    if not eq:
        col = t.emit("sub", [t.value(1.0, [n]), col], [n])
    return t.reshape(col, shape)


@rule(aten.bitwise_not.default)
def _ids_not(t, node, a):
    """not of a comparison `_ids_vs_constant` decided: the other decision."""
    m = t.values.get(a) if isinstance(a, torch.fx.Node) else None
    if not (isinstance(m, IdsExpr) and m.kind in ("all", "none")):
        t.fail("bitwise_not other than of a comparison of token ids that the domain decides")
    return IdsExpr("none" if m.kind == "all" else "all", m.ids)


@rule(aten.where.self)
def _where(t, node, cond, a, b):
    """where(c, a, b) with c true everywhere (`_ids_vs_constant`): a."""
    c = t.values.get(cond) if isinstance(cond, torch.fx.Node) else None
    if not (isinstance(c, IdsExpr) and c.kind == "all"):
        t.fail("where with a condition other than one true for every token id")
    raw = t.values.get(a) if isinstance(a, torch.fx.Node) else None
    if isinstance(raw, IdsExpr) or (isinstance(raw, str) and raw in t.ints):
        return raw
    return t.broadcast_to(t.value(a, _out(node)), _out(node))


@rule(aten.clamp.default)
def _clamp(t, node, a, lo=None, hi=None):
    """clamp(ids - lo, 0, rows - 1): the shifted ids kept in a shard's rows; of a
    floating-point value, max(x, lo) then min(., hi) (a gradient clipping's coefficient,
    clamp(max_norm / norm, max=1))."""
    raw = t.values.get(a) if isinstance(a, torch.fx.Node) else None
    if isinstance(raw, str) and raw not in t.ints and not isinstance(lo, torch.fx.Node) \
            and not isinstance(hi, torch.fx.Node):
        shape = _out(node)
        v = t.value(a)
        if lo is not None:
            v = t.emit("maximum", [v, t.value(float(lo), shape)], shape)
        if hi is not None:
            v = t.emit("minimum", [v, t.value(float(hi), shape)], shape)
        return v
    if not (isinstance(raw, IdsExpr) and raw.kind == "shift" and lo == 0 and
            isinstance(hi, int) and hi >= 0):
        t.fail("clamp other than of shifted token ids to [0, rows - 1]")
    return IdsExpr("clamped_shift", raw.ids, lo=raw.lo, hi=raw.lo + hi + 1)


@rule(aten.arange.default, aten.arange.start)
def _arange(t, node, *args, **kw):
    """The numbers 0..N-1: index_put's rows, or positions looked up in an embedding table
    (its first N rows); nothing else reads them."""
    if node.target is aten.arange.start and args[0] != 0:
        t.fail("arange not from 0")
    dtype = kw.get("dtype")
    if dtype is not None and dtype.is_floating_point:  # arange(n, dtype=float): numbers
        return _positions(t, int(args[-1]))
    return IdsExpr("arange", None, hi=int(args[-1]))


@rule(aten.gather.default)
def _gather(t, node, x, dim, index, sparse_grad=False):
    """gather(x, -1, masked shifted ids): column id - lo of each row (0 for the ids
    outside the shard, which the next masked_fill zeroes)."""
    raw = t.values.get(index) if isinstance(index, torch.fx.Node) else None
    xv = t.value(x)
    if not (isinstance(raw, IdsExpr) and raw.kind == "masked_shift" and
            dim % len(t.shapes[xv]) == len(t.shapes[xv]) - 1 and len(t.shapes[xv]) == 2):
        t.fail("gather other than on the last dim of [N, C] by shifted token ids masked "
               "to a shard (torchtitan's vocabulary-parallel cross-entropy)")
    return IdsExpr("masked_gather", raw.ids, lo=raw.lo, mask=raw.mask, table=xv)


@rule(aten.index_put_.default, aten.index_put.default)
def _index_put(t, node, x, indices, values, accumulate=False):
    """x[arange(N), ids - lo] = v on zeros x: v at column id - lo of each row -- the rows
    of the identity the ids select with the shard's offset, times v -- when v is 0 at
    every id outside the shard (masked shifted ids point those rows at column 0)."""
    xv = t.value(x)
    rows_ix, cols = (t.values.get(i) if isinstance(i, torch.fx.Node) else None
                     for i in (list(indices) + [None, None])[:2])
    if not (len(indices) == 2 and not accumulate and xv in t.zero_filled and
            isinstance(rows_ix, IdsExpr) and rows_ix.kind == "arange" and
            isinstance(cols, IdsExpr) and cols.kind == "masked_shift" and
            len(t.shapes[xv]) == 2 and rows_ix.hi == t.shapes[xv][0]):
        t.fail("index_put other than of values at (row, shifted token id) into zeros")
    v = t.value(values)
    m = t.zero_outside.get(v)
    n, c = t.shapes[xv]
    if m is None or m.ids != cols.ids or (m.lo, m.hi) != (cols.mask.lo, cols.mask.hi) or \
            m.hi - m.lo != c or t.shapes[v] != [n]:
        t.fail("index_put of values that are not zero for the ids outside the shard")
    hot = _offset_one_hot(t, cols.ids, m.lo, c)
    return t.emit("mul", [hot, t.broadcast_to(t.reshape(v, [n, 1]), [n, c])], [n, c])


def _offset_one_hot(t, ids, lo, classes):
    """[id == lo + j] for the `classes` columns j: the rows of the identity the ids
    select with the offset lo (ids outside [lo, lo + classes) give rows of zeros)."""
    offset = t.emit("arith.constant", [], [], {"value": int(lo)})
    return t.emit("one_hot", [ids, offset], [t.shapes[ids][0], classes], result_shape_attr=True)


def _offset_embedding(t, table, ids, lo, rows):
    """embedding(table, ids) with row v the global row lo + v (rows outside give 0)."""
    offset = t.emit("arith.constant", [], [], {"value": int(lo)})
    return t.emit("embedding", [table, ids, offset], [t.shapes[ids][0], t.shapes[table][1]])


def _mask_value(t, m, shape):
    """A mask of the ids as a float tensor: [id in [lo, hi)] is the sum of the identity's
    rows the ids select with the offset lo; [id outside] is 1 minus that."""
    if m.lo is None or m.hi is None or m.hi - m.lo <= 0:
        t.fail(f"a mask of the ids in [{m.lo}, {m.hi}) (covered: a nonempty shard)")
    rows = m.hi - m.lo
    n = t.shapes[m.ids][0]
    inside = t.emit("reduce_sum", [_offset_one_hot(t, m.ids, m.lo, rows)], [n], {"dims": [1]})
    v = inside if m.kind == "inside" else t.emit("sub", [t.value(1.0, [n]), inside], [n])
    v = t.reshape(v, shape)
    t.mask_of[v] = m
    if m.kind == "inside":
        t.zero_outside[v] = m
    return v


def _offset_pick(t, x, ids, lo, hi, shape):
    """x[t, id_t - lo] for the ids in [lo, hi), 0 for the others."""
    n, c = t.shapes[x]
    if hi - lo != c:
        t.fail(f"a pick of ids in [{lo}, {hi}) from {c} columns")
    hot = _offset_one_hot(t, ids, lo, c)
    picked = t.emit("reduce_sum", [t.emit("mul", [x, hot], [n, c])], [n], {"dims": [1]})
    return t.reshape(picked, shape)


@rule(aten.masked_fill.Scalar, aten.masked_fill_.Scalar)
def _masked_fill(t, node, x, mask, value):
    """The two masked fills of DTensor's vocabulary-parallel lookup: the shifted ids of
    other shards' rows set to 0, then their looked-up rows set to 0 -- together
    `embedding(table, ids, offset=lo)` (rows outside [lo, lo + rows) give zeros); and a
    fill by a mask no id satisfies (`_ids_vs_constant`): the value itself."""
    raw = t.values.get(x) if isinstance(x, torch.fx.Node) else None
    m = t.values.get(mask) if isinstance(mask, torch.fx.Node) else None
    if isinstance(m, IdsExpr) and m.kind == "none":  # a mask the domain decides: empty
        return raw if isinstance(raw, IdsExpr) else t.value(x)
    if not (isinstance(raw, IdsExpr) and isinstance(m, IdsExpr) and m.kind == "mask" and
            value == 0 and m.ids == raw.ids and m.lo == raw.lo):
        t.fail("masked_fill other than DTensor's vocabulary-parallel embedding masks")
    if raw.kind == "masked_gather":
        # The picked entries of ids outside the shard zeroed: x[t, id - lo] for the ids
        # in [lo, hi), 0 for the others -- x times the rows of the identity that the
        # ids select with the shard's offset, summed.
        if (raw.mask.lo, raw.mask.hi) != (m.lo, m.hi):
            t.fail("masked_fill of a gather by another mask than its ids'")
        return _offset_pick(t, raw.table, raw.ids, m.lo, m.hi, _out(node))
    if raw.kind == "shift":
        return IdsExpr("masked_shift", raw.ids, lo=raw.lo, mask=m)
    if raw.kind != "masked_embedding" or raw.mask is not m and (raw.mask.lo, raw.mask.hi) != (m.lo, m.hi):
        t.fail("masked_fill of an embedding by another mask than its ids'")
    rows = t.shapes[raw.table][0]
    if m.hi - m.lo != rows:
        t.fail(f"a vocabulary shard of {rows} rows masked to ids [{m.lo}, {m.hi})")
    t.int_bounds[raw.ids] = t.int_bounds.get(raw.ids, m.hi)
    offset = t.emit("arith.constant", [], [], {"value": int(m.lo)})
    return t.emit("embedding", [raw.table, raw.ids, offset], raw.shape)


def _ids(t, node, indices, ignorable_ok=False):
    """The token ids `indices`, an integer input of the step or a view of one (held flat,
    [N], whatever the view's shape). Labels that may be the ignored label only where the
    caller models it (`ignorable_ok`: the kept column, `_kept_col`)."""
    t._ids_ok = True
    try:
        v = t.value(indices)
    finally:
        t._ids_ok = False
    if v not in t.ints or len(t.shapes[v]) != 1:
        t.fail("embedding of ids that are not an integer input of the step")
    if v in t.kept and not ignorable_ok:
        t.fail(f"`{node.target}` of labels that may be the ignored label {t.ignored[v]} "
               "(covered: nll_loss with that ignore_index, comparisons with it)")
    return v


def _kept_col(t, ids):
    """1 where label `ids` is a class, 0 where it is the ignored label: column 1 of the
    one-hot of its `kept` input (an i64 vector of bound 2), [N]."""
    if ids not in t.kept_cols:
        kept = t.kept[ids]
        n = t.shapes[ids][0]
        hot = t.emit("one_hot", [kept], [n, 2], result_shape_attr=True)
        col = t.emit("slice", [hot], [n, 1], {"offsets": [0, 1], "sizes": [n, 1]})
        t.kept_cols[ids] = t.reshape(col, [n])
    return t.kept_cols[ids]


@rule(aten.embedding.default)
def _embedding(t, node, weight, indices, padding_idx=-1, scale_grad=False, sparse=False):
    raw = t.values.get(indices) if isinstance(indices, torch.fx.Node) else None
    looked_up = raw.ids if isinstance(raw, IdsExpr) else _ids_of(t, indices)
    if looked_up is not None:
        t.row_lookups.add(looked_up)
    if isinstance(raw, IdsExpr) and raw.kind == "arange":
        # Positions 0..n-1 (nanoGPT's `wpe(torch.arange(t))`): the table's first n rows.
        table = t.value(weight)
        rows, width = t.shapes[table]
        if raw.hi > rows or _out(node) != [raw.hi, width]:
            t.fail(f"an embedding of positions 0..{raw.hi - 1} in a table of {rows} rows")
        return t.emit("slice", [table], [raw.hi, width],
                      {"offsets": [0, 0], "sizes": [raw.hi, width]}) if raw.hi < rows else table
    if isinstance(raw, IdsExpr):
        # DTensor's vocabulary-parallel lookup: the shifted ids of this shard's rows;
        # the rows outside it are zeroed next (masked_fill), which completes the idiom.
        if raw.kind not in ("masked_shift", "clamped_shift"):
            t.fail("an embedding of ids transformed otherwise than by a shard's offset")
        if raw.kind == "clamped_shift":
            # torchtitan's vocabulary-parallel lookup; the mask multiplies next (_mul).
            table = t.value(weight)
            if raw.hi - raw.lo != t.shapes[table][0]:
                t.fail(f"ids clamped to [0, {raw.hi - raw.lo}) looking up a table of "
                       f"{t.shapes[table][0]} rows")
            return IdsExpr("clamped_embedding", raw.ids, lo=raw.lo, table=table,
                           shape=_out(node))
        return IdsExpr("masked_embedding", raw.ids, lo=raw.lo, mask=raw.mask,
                       table=t.value(weight), shape=_out(node))
    table = t.value(weight)
    ids = _ids(t, node, indices)
    # torch requires every id to index a row: that is the domain the proof covers.
    rows = t.shapes[table][0]
    _bound_ids(t, ids, rows)
    out = _out(node)
    if len(out) == 2:
        return t.emit("embedding", [table, ids], out)
    # ids of more dims ([B, S]): the rows of the flat ids, viewed as [B, S, W]
    rows_flat = t.emit("embedding", [table, ids], [t.shapes[ids][0], out[-1]])
    return t.reshape(rows_flat, out)


@rule(aten.embedding_dense_backward.default)
def _embedding_backward(t, node, grad, indices, num_weights, padding_idx, scale_grad):
    if scale_grad:
        t.fail("embedding backward with scale_grad_by_freq")
    raw = t.values.get(indices) if isinstance(indices, torch.fx.Node) else None
    padded = padding_idx not in (-1, None)
    if padded and isinstance(raw, IdsExpr):
        t.fail("embedding backward with padding_idx of positions or of a vocabulary shard")
    if isinstance(raw, IdsExpr) and raw.kind == "arange":
        # The backward of a lookup of positions 0..n-1: the gradient's rows are the
        # first n rows' gradients, the others' are zero.
        g = t.value(grad)
        n, width = raw.hi, t.shapes[g][-1]
        if t.shapes[g] != [n, width] or int(num_weights) < n:
            t.fail("the backward of a lookup of positions whose gradient is not [n, width]")
        if int(num_weights) == n:
            return g
        zeros = t.emit("constant", [], [int(num_weights) - n, width], {"value": 0.0},
                       result_shape_attr=True)
        return t.emit("concat", [g, zeros], _out(node), {"dim": 0})
    if isinstance(raw, IdsExpr) and raw.kind == "clamped_shift":
        # The backward of torchtitan's vocabulary-parallel lookup: the gradient rows of
        # the clamped shifted ids summed into the shard's rows. It is embedding_grad with
        # the offset lo when the gradient is 0 at every id outside [lo, hi) (it is the
        # product with that mask): clamping would add those to rows 0 and rows - 1.
        g = t.value(grad)
        m = t.zero_outside.get(g)
        if m is None or m.ids != raw.ids or (m.lo, m.hi) != (raw.lo, raw.hi) or \
                int(num_weights) != raw.hi - raw.lo:
            t.fail("the backward of a lookup by clamped ids whose gradient is not zero "
                   "for the ids outside the shard")
        # The shard's rows of g * [id in shard] are those of g: the lookup reads g
        # itself (the product need not be formed and then simplified again).
        g = t.unmasked.get(g, g)
        flat = [t.shapes[raw.ids][0], t.shapes[g][-1]]
        offset = t.emit("arith.constant", [], [], {"value": int(raw.lo)})
        return t.emit("embedding_grad", [t.reshape(g, flat), raw.ids, offset], _out(node),
                      result_shape_attr=True)
    ids = _ids(t, node, indices)
    g = t.value(grad)
    flat = [t.shapes[ids][0], t.shapes[g][-1]]
    out = t.emit("embedding_grad", [t.reshape(g, flat), ids], _out(node),
                 result_shape_attr=True)
    return _zero_row(t, out, int(padding_idx), _out(node)) if padded else out


def _zero_row(t, v, row, shape):
    """`v` [rows, width] with row `row` zeroed: nn.Embedding's padding_idx, whose row
    the backward skips (every token of that id adds nothing), as a product with a 0/1
    column."""
    rows = shape[0]
    if not 0 <= row < rows or rows > 65536:
        t.fail(f"padding_idx {row} of a table of {rows} rows (at most 65536)")
    col = t.emit("literal", [], [rows, 1], {"values": [0.0 if r == row else 1.0 for r in range(rows)]},
                 result_shape_attr=True)
    return t.emit("mul", [v, t.broadcast_to(col, shape)], shape)


def _slice_of(t, v, dim, start, size, shape):
    src = t.shapes[v]
    offsets = [0] * len(src)
    sizes = list(src)
    offsets[dim] = start
    sizes[dim] = size
    if sizes == src:
        return v
    return t.emit("slice", [v], shape, {"offsets": offsets, "sizes": sizes})


def resolve_pieces(programs, axis_sizes):
    """One program from the per-rank programs of an SPMD step, or None when they differ.

    `programs`: per rank, (ops, outputs, pieces, coord): `pieces` maps each value that is
    piece I of an even split of a value into N (dim D) to (value, D, N, I); `coord` the
    rank's mesh coordinate. The ranks' ops must be equal op by op, except where an
    operand is, on each rank, a piece of the same split taken by the rank's own coordinate
    (DTensor's redistribution to `Shard`: split, then take piece `coord`): that operand
    becomes a `shard_slice` of the split value over the mesh axes (major first) whose
    coordinate is the piece's index on every rank -- when exactly one sequence of axes
    is."""
    import itertools
    first_ops, first_outs = programs[0][0], programs[0][1]
    if any(len(p[0]) != len(first_ops) or len(p[1]) != len(first_outs) for p in programs):
        return None
    sequences = [seq for n in range(1, len(axis_sizes) + 1)
                 for seq in itertools.permutations(axis_sizes, n)]
    made, out = {}, []
    alias = [{} for _ in programs]  # per rank: a value name -> the name resolved for it

    def operand(names, before):
        if all(n == names[0] for n in names):
            return names[0]
        if all(n in a for n, a in zip(names, alias)) and \
                len({a[n] for n, a in zip(names, alias)}) == 1:
            return alias[0][names[0]]
        # A piece of a split per rank, the split's source resolved the same on all ranks.
        infos = [p[2].get(n) for p, n in zip(programs, names)]
        if any(i is None for i in infos):
            return None
        infos = [(a.get(i[0], i[0]),) + tuple(i[1:]) for i, a in zip(infos, alias)]
        if any(i[:3] != infos[0][:3] for i in infos):
            return None
        src, dim, count = infos[0][:3]
        fits = [seq for seq in sequences
                if math.prod(axis_sizes[a] for a in seq) == count and
                all(_mixed_radix(p[3], seq, axis_sizes) == i[3] for p, i in zip(programs, infos))]
        if len(fits) != 1:
            return None
        key = (src, dim, fits[0])
        if key not in made:
            made[key] = f"{src}_shard_{'_'.join(fits[0])}"
            before.append({"result": made[key], "op": "shard_slice", "operands": [src],
                           "attrs": {"axes": list(fits[0]), "dim": dim}})
        for n, a in zip(names, alias):
            a[n] = made[key]
        return made[key]

    def rank_constant(k, op):
        """An index constant that differs between ranks as a multiple of their
        coordinate on some mesh axes (a vocabulary shard's first row): the ops computing
        it from dist.axis_index, or None."""
        values = [p[0][k]["attrs"]["value"] for p in programs]
        for seq in sequences:
            coords = [_mixed_radix(p[3], seq, axis_sizes) for p in programs]
            if not any(coords):
                continue
            step = next(v // c for v, c in zip(values, coords) if c)
            if all(v == step * c for v, c in zip(values, coords)):
                ops, name = [], op["result"]
                index = None
                for a in seq:
                    ax = {"result": f"{name}_{a}", "op": "dist.axis_index", "operands": [],
                          "attrs": {"axis": a}}
                    ops.append(ax)
                    if index is None:
                        index = ax["result"]
                    else:
                        size = {"result": f"{name}_{a}_size", "op": "arith.constant",
                                "operands": [], "attrs": {"value": axis_sizes[a]}}
                        mul = {"result": f"{name}_{a}_mul", "op": "arith.muli",
                               "operands": [index, size["result"]]}
                        add = {"result": f"{name}_{a}_add", "op": "arith.addi",
                               "operands": [mul["result"], ax["result"]]}
                        ops += [size, mul, add]
                        index = add["result"]
                stride = {"result": f"{name}_step", "op": "arith.constant", "operands": [],
                          "attrs": {"value": step}}
                ops += [stride, {"result": name, "op": "arith.muli",
                                 "operands": [index, stride["result"]]}]
                for o in ops:
                    if "loc" in op:
                        o["loc"] = op["loc"]
                return ops
        return None

    for k, op in enumerate(first_ops):
        bare = {key: v for key, v in op.items() if key not in ("loc", "operands")}
        if op["op"] == "arith.constant" and all(
                p[0][k]["op"] == "arith.constant" and p[0][k]["result"] == op["result"]
                for p in programs[1:]) and \
                len({p[0][k]["attrs"]["value"] for p in programs}) > 1:
            made_ops = rank_constant(k, op)
            if made_ops is None:
                return None
            out.extend(made_ops)
            continue
        if any({key: v for key, v in p[0][k].items() if key not in ("loc", "operands")} != bare
               for p in programs[1:]):
            return None
        before = []
        operands = [operand([p[0][k]["operands"][j] for p in programs], before)
                    for j in range(len(op["operands"]))]
        if None in operands:
            return None
        for b in before:
            if "loc" in op:
                b["loc"] = op["loc"]
        out.extend(before)
        out.append(dict(op, operands=operands))
    outputs = []
    for j, o in enumerate(first_outs):
        if any({k: v for k, v in p[1][j].items() if k != "name"} !=
               {k: v for k, v in o.items() if k != "name"} for p in programs[1:]):
            return None
        name = operand([p[1][j]["name"] for p in programs], out)
        if name is None:
            return None
        outputs.append(dict(o, name=name))
    return out, outputs


def _mixed_radix(coord, seq, sizes):
    k = 0
    for a in seq:
        k = k * sizes[a] + coord[a]
    return k


def _ids_rows(t, node, a, dim):
    """Token ids `a` (held flat) cut along `dim` of their tensor shape: the flat ids and
    how many of them one index of `dim` spans -- a cut whose rows are contiguous runs
    of the flat ids, as a microbatch's rows are (every dimension before `dim` of size
    1); None when `a` is no token-id input (or its view)."""
    raw = t.values.get(a) if isinstance(a, torch.fx.Node) else None
    if not (isinstance(raw, str) and raw in t.ints and a not in t.stale):
        return None
    shape = list(a.meta["val"].shape)
    d = dim % len(shape)
    if t.shapes[raw] != [math.prod(shape)]:
        t.fail("a cut of token ids whose shape is not theirs")
    if math.prod(shape[:d]) != 1:
        if node.target is not aten.slice.Tensor:
            t.fail("a cut of token ids along a dimension whose rows are not contiguous "
                   "(covered: rows of the leading dimension, as microbatches are cut, and "
                   "slices along any dimension, as `labels[..., 1:]`)")
        return raw, None  # (a slice of each leading index's run: _ids_runs)
    return raw, math.prod(shape[d + 1:])


def _ids_runs(t, ids, pieces):
    """Flat ids made of `pieces` of flat ids `ids`, in order: (start, size, ignored), a
    run of them -- or, ignored, that many ignored labels (a pad with the ignored label),
    which read the run's classes (those of the row they pad, so that a shard of rows
    pads as the whole batch does) and count for nothing. Token ids themselves, derived
    from `ids` (their bound is its bound); labels that may be ignored where `ids` may be
    or where a pad puts the ignored label, with their kept column alike."""
    if len(pieces) > 4096:
        t.fail("token ids cut into more than 4096 runs")
    n = t.shapes[ids][0]
    if any(a < 0 or a + b > n for a, b, _ in pieces):
        t.fail("a pad of token ids longer than their rows")
    runs = [_slice_of(t, ids, 0, a, b, [b]) for a, b, _ in pieces if b > 0]
    size = sum(b for _, b, _ in pieces)
    out = runs[0] if len(runs) == 1 else t.emit("concat", runs, [size], {"dim": 0})
    t.ints.add(out)
    t.shapes[out] = [size]
    t.derived_ids[out] = ids
    padded = any(ignored for _, _, ignored in pieces)
    if ids in t.kept or padded:
        col = _kept_col(t, ids) if ids in t.kept else t.value(1.0, [n])
        cols = [_slice_of(t, col, 0, a, b, [b]) if not ignored else t.value(0.0, [b])
                for a, b, ignored in pieces if b > 0]
        t.kept_cols[out] = cols[0] if len(cols) == 1 else t.emit("concat", cols, [size], {"dim": 0})
        t.kept[out] = None  # (its kept column only: t.kept_cols)
    return out


def _bound_ids(t, ids, n):
    """Token ids `ids` index n rows (or classes); so do the ids they are derived from."""
    while ids is not None:
        t.int_bounds[ids] = min(t.int_bounds.get(ids, n), n)
        ids = t.derived_ids.get(ids)


def _ids_slice(t, ids, start, size):
    """The token ids [start, start + size) of flat ids `ids`: token ids themselves."""
    out = _slice_of(t, ids, 0, start, size, [size])
    t.ints.add(out)
    if ids in t.kept:  # labels that may be ignored: their kept vector alike
        if t.kept[ids] is None:  # (derived: its kept column only)
            t.kept_cols[out] = _slice_of(t, t.kept_cols[ids], 0, start, size, [size])
            t.kept[out] = None
        else:
            t.kept[out] = _slice_of(t, t.kept[ids], 0, start, size, [size])
        t.ignored[out] = t.ignored[ids]
    if ids in t.derived_ids:
        t.derived_ids[out] = ids
    return out


@rule(aten.split.Tensor, aten.split_with_sizes.default)
def _split(t, node, a, split, dim=0):
    ids = _ids_rows(t, node, a, dim)
    v = ids[0] if ids else t.value(a)
    src = list(a.meta["val"].shape) if ids else t.shapes[v]
    d = dim % len(src)
    sizes = list(split) if isinstance(split, (list, tuple)) else \
        [min(split, src[d] - k) for k in range(0, src[d], split)]
    out, start = [], 0
    for k, size in enumerate(sizes):
        shape = list(src)
        shape[d] = size
        if ids:
            out.append(_ids_slice(t, v, start * ids[1], size * ids[1]))
            start += size
            continue
        out.append(_slice_of(t, v, d, start, size, shape))
        if len(sizes) > 1 and len(set(sizes)) == 1:
            t.pieces[out[-1]] = (v, d, len(sizes), k)
        start += size
    return tuple(out)


@rule(aten.constant_pad_nd.default)
def _pad(t, node, a, pad, value=0):
    """Labels padded along their last dimension with the ignored label (Hugging Face's
    causal-LM loss: `F.pad(labels, (0, 1), value=-100)`, then `[..., 1:]`): each row's
    run with ignored labels before and after it (_ids_runs)."""
    raw = t.values.get(a) if isinstance(a, torch.fx.Node) else None
    if not (isinstance(raw, str) and raw in t.ints):
        t.fail("constant_pad_nd (covered: token ids padded with the ignored label)")
    pad = [int(p) for p in pad]
    shape = list(a.meta["val"].shape)
    if len(pad) < 2 or any(pad[2:]) or min(pad) < 0 or not shape:
        t.fail("a pad of token ids other than along their last dimension, by >= 0")
    if value != int(value) or value >= 0 or (raw in t.ignored and t.ignored[raw] != value):
        t.fail(f"a pad of token ids with {value} (covered: the ignored label, a negative "
               "number)")
    s_last = shape[-1]
    pieces = []
    for p in range(math.prod(shape[:-1])):
        pieces += [(p * s_last, pad[0], True), (p * s_last, s_last, False),
                   (p * s_last, pad[1], True)]
    out = _ids_runs(t, raw, [x for x in pieces if x[1] > 0])
    t.ignored[out] = int(value)
    return out


@rule(aten.slice.Tensor)
def _slice(t, node, a, dim=0, start=None, end=None, step=1):
    ids = _ids_rows(t, node, a, dim)
    if ids:
        if step != 1:
            t.fail("slice with a step other than 1")
        lo, hi, _ = slice(start, end).indices(a.meta["val"].shape[dim])
        if ids[1] is None:  # each leading index's run cut alike (labels[..., 1:])
            shape = list(a.meta["val"].shape)
            d = dim % len(shape)
            inner, run = math.prod(shape[d + 1:]), math.prod(shape[d:])
            pieces = [(p * run + lo * inner, max(0, hi - lo) * inner, False)
                      for p in range(math.prod(shape[:d]))]
            out = _ids_runs(t, ids[0], pieces)
            if ids[0] in t.ignored:
                t.ignored[out] = t.ignored[ids[0]]
            return out
        return _ids_slice(t, ids[0], lo * ids[1], max(0, hi - lo) * ids[1])
    v = t.value(a)
    src = t.shapes[v]
    d = dim % (len(src) - (1 if _is_complex(a) else 0))
    if step != 1:
        t.fail("slice with a step other than 1")
    lo, hi, _ = slice(start, end).indices(src[d])
    return _slice_of(t, v, d, lo, max(0, hi - lo), _out(node))


@rule(aten.slice_backward.default)
def _slice_backward(t, node, grad, input_sizes, dim, start, end, step):
    # The adjoint of slice: the gradient at [start, end) of `dim`, zeros elsewhere.
    if step != 1:
        t.fail("slice_backward with a step other than 1")
    sizes = [int(s) for s in input_sizes]
    d = dim % len(sizes)
    lo, hi, _ = slice(start, end).indices(sizes[d])
    hi = max(lo, hi)
    parts = []
    for a, b in ((0, lo), (lo, hi), (hi, sizes[d])):
        if b <= a:
            continue
        if a == lo and b == hi:
            parts.append(t.value(grad))
        else:
            shape = list(sizes)
            shape[d] = b - a
            parts.append(t.emit("constant", [], shape, {"value": 0.0}, result_shape_attr=True))
    if len(parts) == 1:
        return parts[0]
    return t.emit("concat", parts, _out(node), {"dim": d})


@rule(aten.cat.default)
def _cat(t, node, tensors, dim=0):
    vals = [t.value(x) for x in tensors]
    vals = [v for v in vals if t.shapes[v][dim % len(t.shapes[v])] > 0]
    if len(vals) == 1:
        return vals[0]
    return t.emit("concat", vals, _out(node), {"dim": dim % len(_out(node))})


@rule(aten.stack.default)
def _stack(t, node, tensors, dim=0):
    """Each tensor given a dimension of size 1 at `dim`, concatenated along it."""
    out = _out(node)
    d = dim % len(out)
    vals = []
    for x in tensors:
        v = t.value(x)
        shape = list(t.shapes[v])
        vals.append(t.reshape(v, shape[:d] + [1] + shape[d:]))
    if len(vals) == 1:
        return vals[0]
    return t.emit("concat", vals, out, {"dim": d})


def _root_of_integer(x):
    """n where the number `x` is the double nearest sqrt(n), n an integer in [2, 2**20]
    that is not a square: DTensor divides a replicated norm by math.sqrt of an axis's
    size (a Replicate -> partial 2-norm partition), and the step means that root, whose
    square is n exactly, not the double's square. None for any other number."""
    if not isinstance(x, float) or not x > 1:
        return None
    n = round(x * x)
    if 2 <= n <= 1 << 20 and math.isqrt(n) ** 2 != n and math.sqrt(n) == x:
        return n
    return None


def _kept_of(t, node, ids, ignore_index, classes):
    """1 where nll_loss counts label `ids`' token, 0 where it skips it, [N]; None where it
    counts every token. A token is skipped where its label is `ignore_index`: for labels
    that may be the ignored label (t.kept), their kept column (and `ignore_index` must be
    that label); for an `ignore_index` that is a class (a padding token's id), 1 - the
    labels' one-hot column of that class -- tokens of that class are skipped, whichever
    tokens the captured batch holds. Past the classes, no label is it. Otherwise (a
    negative `ignore_index` no captured label holds) the labels are classes and every
    token counts; the spec says so in its assumptions (t.assume)."""
    if ids in t.kept:
        if ignore_index != t.ignored[ids]:
            t.fail(f"nll_loss with ignore_index {ignore_index} of labels that hold "
                   f"{t.ignored[ids]}")
        return _kept_col(t, ids)
    n = t.shapes[ids][0]
    if 0 <= ignore_index < classes:  # (as `labels != ignore_index` is: _ids_vs_constant)
        key = (ids, ignore_index)
        if key not in t.kept_cols:
            t.kept_cols[key] = _mask_value(t, IdsExpr("mask", ids, lo=ignore_index,
                                                      hi=ignore_index + 1), [n])
        return t.kept_cols[key]
    if ignore_index >= classes:  # no label is one (torch refuses labels past the classes)
        return None
    t.assume(f"the labels nll_loss reads are classes on every token: it skips a token "
             f"labelled {ignore_index} (its ignore_index), and the captured batch holds none, "
             "so batches with such tokens (padding) are not checked; capture a batch that "
             "holds one to have them checked")
    return None


def _one_hot(t, node, target, classes, ignore_index):
    """The one-hot rows of the labels `target` (an i64 input) that nll_loss counts,
    [N, classes]: `one_hot`, the identity's rows selected by label (torch requires every
    label to be a class or the ignored one, so the labels are bounded by `classes`; an
    ignored label's row is zeros, _kept_of)."""
    ids = _ids(t, node, target, ignorable_ok=True)
    _bound_ids(t, ids, classes)
    hot = t.emit("one_hot", [ids], [t.shapes[ids][0], classes], result_shape_attr=True)
    kept = _kept_of(t, node, ids, ignore_index, classes)
    if kept is not None:  # an ignored label's row: zeros (nll_loss skips the token)
        n = t.shapes[ids][0]
        col = t.reshape(kept, [n, 1])
        hot = t.emit("mul", [hot, t.broadcast_to(col, [n, classes])], [n, classes])
    return hot, ids, kept


def _label_count(t, n, kept):
    """The number of tokens nll_loss counts: N, or the sum of their kept column (its
    `total_weight`)."""
    if kept is None:
        return t.value(float(n), [])
    return t.emit("reduce_sum", [kept], [], {"dims": [0]})


@rule(aten.nll_loss_forward.default)
def _nll_loss(t, node, logp, target, weight, reduction, ignore_index):
    lp = t.value(logp)
    if weight is not None or len(t.shapes[lp]) != 2 or reduction not in (0, 1, 2):
        t.fail("nll_loss other than on [N, C] log-probabilities, unweighted")
    n, c = t.shapes[lp]
    hot, _, kept = _one_hot(t, node, target, c, ignore_index)
    if reduction == 0:
        # Each token's loss, [N] (0 where its label is ignored: its one-hot row is
        # zeros); the total weight torch returns beside it is read by no one (no value).
        rows = t.emit("reduce_sum", [t.emit("mul", [hot, lp], [n, c])], [n], {"dims": [1]})
        return (t.scale(rows, -1.0, [n]), None)
    picked = t.emit("reduce_sum", [t.emit("mul", [hot, lp], [n, c])], [], {"dims": [0, 1]})
    total = _label_count(t, n, kept)
    loss = t.scale(picked, -1.0, [])
    if reduction == 1:  # mean over the labelled tokens
        loss = t.emit("div", [loss, total], [])
    return (loss, total)


@rule(aten.nll_loss_backward.default)
def _nll_loss_backward(t, node, grad, logp, target, weight, reduction, ignore_index, total):
    lp = t.value(logp)
    if weight is not None or len(t.shapes[lp]) != 2 or reduction not in (0, 1, 2):
        t.fail("nll_loss backward other than on [N, C] log-probabilities, unweighted")
    n, c = t.shapes[lp]
    hot, ids, kept = _one_hot(t, node, target, c, ignore_index)
    gv = t.value(grad)
    if reduction == 0:  # each token's own gradient, [N]: row i is -grad_i at its label
        if t.shapes[gv] != [n]:
            t.fail(f"nll_loss backward of a per-token gradient of shape {t.shapes[gv]}")
        out = t.scale(t.emit("mul", [hot, t.broadcast_to(t.reshape(gv, [n, 1]), [n, c])],
                             [n, c]), -1.0, [n, c])
        sums = t.scale(gv, -1.0, [n])
        t.row_sums[out] = sums if kept is None else t.emit("mul", [sums, kept], [n])
        return out
    if kept is not None and reduction == 1:
        # The mean over the kept tokens: the gradient over their count, then spread (as
        # autograd writes a sum over a count: `sum / tokens`).
        gv = t.emit("div", [gv, _label_count(t, n, kept)], t.shapes[gv])
    g = t.broadcast_to(gv, [n, c])
    out = t.scale(t.emit("mul", [hot, g], [n, c]), -1.0, [n, c])
    mean = reduction == 1 and kept is None  # (over the constant count N)
    if mean:
        out = t.emit("div", [out, t.value(float(n), [n, c])], [n, c])
    # Each row holds one nonzero: the label is one of the c classes (the domain the
    # proof covers), so its row sums are -g (over n for the mean), times the kept
    # column where tokens may be skipped (a skipped row is zeros). log_softmax's
    # backward reads them (g - exp(y) * rowsum), and a fused cross-entropy backward
    # (softmax - one-hot) meets it only in this form.
    sums = t.scale(t.broadcast_to(gv, [n]), -1.0, [n])
    if kept is not None:
        sums = t.emit("mul", [sums, kept], [n])
    if mean:
        sums = t.emit("div", [sums, t.value(float(n), [n])], [n])
    t.row_sums[out] = sums
    return out


# --- complex tensors (rotary embeddings as torchtitan writes them) ---------------------------
# A complex tensor is held as its real and imaginary parts on a trailing dim of 2
# (`view_as_real`), so `view_as_complex` and `view_as_real` are the identity.
@rule(aten.view_as_complex.default, aten.view_as_real.default, aten._conj.default)
def _complex_view(t, node, a):
    v = t.value(a)
    if node.target is not aten._conj.default or not _is_complex(a):
        return v
    shape = _out(node)
    re, im = _parts(t, v, shape)
    half = shape[:-1] + [1]
    return t.emit("concat", [re, t.scale(im, -1.0, half)], shape, {"dim": len(shape) - 1})


def _parts(t, v, shape):
    half = shape[:-1] + [1]
    n = len(shape)
    return (t.emit("slice", [v], half, {"offsets": [0] * n, "sizes": half}),
            t.emit("slice", [v], half, {"offsets": [0] * (n - 1) + [1], "sizes": half}))


def _complex_mul(t, node, a, b):
    """(ar + i ai)(br + i bi) = (ar br - ai bi) + i (ar bi + ai br)."""
    if not (_is_complex(a) and _is_complex(b)):
        t.fail("a product of a complex and a real tensor")
    shape = _out(node)
    half = shape[:-1] + [1]
    ar, ai = _parts(t, t.broadcast_to(t.value(a), shape), shape)
    br, bi = _parts(t, t.broadcast_to(t.value(b), shape), shape)
    re = t.emit("sub", [t.emit("mul", [ar, br], half), t.emit("mul", [ai, bi], half)], half)
    im = t.emit("add", [t.emit("mul", [ar, bi], half), t.emit("mul", [ai, br], half)], half)
    return t.emit("concat", [re, im], shape, {"dim": len(shape) - 1})


# --- attention -------------------------------------------------------------------------------
def _heads(t, v, shape):
    """[B, H, S, D] -> [B*H, S, D] (batch_matmul's one batch dim)."""
    return t.reshape(v, [shape[0] * shape[1]] + shape[2:])


def _attention_probs(t, q3, k3, scale, causal):
    bh, sq, d = t.shapes[q3]
    sk = t.shapes[k3][1]
    scores = t.emit("batch_matmul", [q3, k3], [bh, sq, sk], {"lhs_dim": 2, "rhs_dim": 2})
    scores = t.scale(scores, scale, [bh, sq, sk])
    return t.emit("causal_softmax" if causal else "softmax", [scores], [bh, sq, sk])


def _sdpa_args(t, node, q, k, v, dropout_p, is_causal, attn_mask, scale, gqa=False):
    """q's and k's shapes and the scale. With `gqa`, k and v may have fewer heads than
    q, a divisor of q's (grouped-query attention: SDPA's enable_gqa, which the CPU
    kernels take as they are, and FlexAttention's)."""
    if dropout_p:
        t.fail("scaled_dot_product_attention with dropout")
    if attn_mask is not None:
        t.fail("scaled_dot_product_attention with an attn_mask (is_causal is covered)")
    qs, ks = t.shapes[t.value(q)], t.shapes[t.value(k)]
    grouped = gqa and len(qs) == 4 and len(ks) == 4 and ks[1] > 0 and qs[1] % ks[1] == 0
    if (len(qs) != 4 or qs[0] != ks[0] or ks != t.shapes[t.value(v)] or
            (qs[1] != ks[1] and not grouped)):
        t.fail("scaled_dot_product_attention other than on [B, H, S, D] q, k, v of one "
               "head count (expand the KV heads first)")
    if is_causal and qs[2] != ks[2]:
        t.fail("causal attention with queries and keys of different lengths")
    return qs, ks, (1.0 / math.sqrt(qs[3]) if scale is None else float(scale))


@rule(aten._scaled_dot_product_flash_attention_for_cpu.default)
def _sdpa(t, node, q, k, v, dropout_p=0.0, is_causal=False, attn_mask=None, scale=None):
    """softmax(scale Q K^T [causal]) V per batch entry and head; the log-sum-exp result
    (used by the backward op only, which recomputes the probabilities) has no value."""
    qs, ks, sc = _sdpa_args(t, node, q, k, v, dropout_p, is_causal, attn_mask, scale, gqa=True)
    return (_attention(t, q, k, v, qs, sc, is_causal), None)


def _kv_expanded(t, x, heads):
    """Grouped-query attention's keys or values [B, Hkv, S, D] for `heads` query heads:
    query head h reads KV head h // G, G = heads / Hkv (FlexAttention's
    repeat_interleave along the heads) -- x reshaped to [B, Hkv, 1, S, D], copied G
    times along the new dimension and merged back into [B, heads, S, D]."""
    shape = t.shapes[x]
    if shape[1] == heads:
        return x
    g = heads // shape[1]
    r = t.reshape(x, shape[:2] + [1] + shape[2:])
    r = t.broadcast_to(r, shape[:2] + [g] + shape[2:])
    return t.reshape(r, [shape[0], heads] + shape[2:])


def _kv_summed(t, dx3, ks, heads):
    """The adjoint of _kv_expanded, from the expanded heads' gradient [B * heads, S, D]:
    the gradient of each KV head is the sum of its G query heads' (viewed as
    [B, Hkv, G, S, D], summed over G); with as many KV heads as query heads, dx3 viewed
    as [B, H, S, D]."""
    if ks[1] == heads:
        return t.reshape(dx3, ks)
    r = t.reshape(dx3, [ks[0], ks[1], heads // ks[1]] + ks[2:])
    return t.reduce("reduce_sum", r, [2], False, ks)


def _attention(t, q, k, v, qs, sc, is_causal):
    q3, k3, v3 = (_heads(t, x, t.shapes[x])
                  for x in (t.value(q), _kv_expanded(t, t.value(k), qs[1]),
                            _kv_expanded(t, t.value(v), qs[1])))
    p = _attention_probs(t, q3, k3, sc, is_causal)
    out = t.emit("batch_matmul", [p, v3], t.shapes[q3], {"lhs_dim": 2, "rhs_dim": 1})
    return t.reshape(out, qs)


@rule(aten._scaled_dot_product_flash_attention_for_cpu_backward.default)
def _sdpa_backward(t, node, grad_out, q, k, v, out, logsumexp, dropout_p=0.0,
                   is_causal=False, attn_mask=None, scale=None):
    """With P the probabilities and dO the output's gradient: dV = P^T dO,
    dS = P * (dO V^T - rowsum(P * dO V^T)), dQ = scale dS K, dK = scale dS^T Q."""
    qs, ks, sc = _sdpa_args(t, node, q, k, v, dropout_p, is_causal, attn_mask, scale, gqa=True)
    return _attention_backward(t, grad_out, q, k, v, qs, ks, sc, is_causal)


def _flex_mask(t, node, q, k, block_mask, mask_buffers):
    """Whether the mask of a FlexAttention call is causal (True) or absent (False): its
    mask function (the block mask's last element, a traced subgraph) evaluated at every
    (batch, head, query, key) of the traced sizes, with the buffers it reads -- constants
    of the graph (the BlockMask is built before the step, as torchtitan's trainer builds
    it from the batch's positions: the proof covers inputs of that document structure).
    Any other mask is not covered."""
    mask_mod = t.objects.get(block_mask[-1]) if isinstance(block_mask[-1], torch.fx.Node) else None
    bufs = [t.objects.get(b) if isinstance(b, torch.fx.Node) else b for b in mask_buffers]
    if mask_mod is None or any(not isinstance(b, torch.Tensor) for b in bufs):
        t.fail("FlexAttention whose mask reads values computed in the step (build the "
               "BlockMask before it, as torchtitan's trainer does)")
    b_, h_, sq, _ = t.shapes[t.value(q)]
    sk = t.shapes[t.value(k)][2]
    if b_ * h_ * sq * sk > 65536:
        t.fail(f"FlexAttention mask of {b_ * h_ * sq * sk} entries (at most 65536 are evaluated)")
    ix = lambda i: torch.tensor(i, dtype=torch.int32)  # noqa: E731
    dense = torch.zeros(b_, h_, sq, sk, dtype=torch.bool)
    with torch.no_grad():
        for b in range(b_):
            for h in range(h_):
                for i in range(sq):
                    for j in range(sk):
                        dense[b, h, i, j] = bool(mask_mod(ix(b), ix(h), ix(i), ix(j), *bufs))
    _check_block_tables(t, block_mask, dense)
    causal = bool((dense == torch.ones(sq, sk, dtype=torch.bool).tril()).all())
    full = bool(dense.all())
    if full:
        return False
    if causal and sq == sk:
        return True
    t.fail("FlexAttention with a mask other than causal or none at the traced positions "
           "(a document mask over several documents, a sliding window) is not covered")


def _check_block_tables(t, block_mask, dense):
    """The block mask's sparsity tables agree with its mask function: the kernels visit
    only the blocks the tables list and skip the mask function on "full" blocks, so a
    listed-full block must be wholly unmasked and every block with an unmasked entry
    must be listed (forward: kv blocks of each query block; backward: query blocks of
    each kv block). A BlockMask from create_block_mask agrees by construction; one
    assembled otherwise may not, and then the op is not what its mask function says."""
    def const(x):
        v = t.objects.get(x) if isinstance(x, torch.fx.Node) else x
        return v if v is None or isinstance(v, (int, torch.Tensor)) else False

    parts = [const(x) for x in block_mask[:16]]
    if any(p is False for p in parts) or parts[2] is None or parts[3] is None:
        t.fail("a FlexAttention block mask whose tables are not constants of the graph")
    b_, h_, sq, sk = dense.shape
    qbs, kbs = int(parts[14]), int(parts[15])
    if (int(parts[0]), int(parts[1])) != (sq, sk):
        t.fail(f"a FlexAttention block mask for lengths {parts[0]}, {parts[1]} on "
               f"{sq} queries and {sk} keys")
    nq, nk = -(-sq // qbs), -(-sk // kbs)

    def block(b, h, qb, kb):
        return dense[b, h, qb * qbs:(qb + 1) * qbs, kb * kbs:(kb + 1) * kbs]

    def listed(num, idx, b, h, row):
        if num is None:
            return set()
        bb, hh = (b if num.shape[0] > 1 else 0), (h if num.shape[1] > 1 else 0)
        return {int(x) for x in idx[bb, hh, row, :int(num[bb, hh, row])]}

    def agree(first, rows, cols, b, h, transposed):
        """Each row block's listed column blocks (tables parts[first..first+3]) cover
        its unmasked blocks, and its full ones are wholly unmasked."""
        if parts[first] is None:
            return True
        for r in range(rows):
            some = listed(parts[first], parts[first + 1], b, h, r)
            whole = listed(parts[first + 2], parts[first + 3], b, h, r)
            for c in range(cols):
                blk = block(b, h, c, r) if transposed else block(b, h, r, c)
                if (c in whole and not bool(blk.all())) or (bool(blk.any()) and c not in some | whole):
                    return False
        return True

    for b in range(b_):
        for h in range(h_):
            # forward: the kv blocks of each query block; backward: the query blocks of
            # each kv block
            if not (agree(2, nq, nk, b, h, False) and agree(6, nk, nq, b, h, True)):
                t.fail("a FlexAttention block mask whose tables disagree with its mask function")


def _flex_checks(t, score_mod, score_buffers, kernel_options):
    graph = t.objects.get(score_mod) if isinstance(score_mod, torch.fx.Node) else None
    if graph is None or score_buffers:
        t.fail("FlexAttention with a score_mod that is not a traced subgraph")
    nodes = list(graph.graph.nodes)
    placeholders = [n for n in nodes if n.op == "placeholder"]
    out = [n for n in nodes if n.op == "output"][0].args[0]
    out = out[0] if isinstance(out, (tuple, list)) else out
    if not placeholders or out is not placeholders[0]:
        t.fail("FlexAttention with a score_mod other than the identity")
    if kernel_options.get("PRESCALE_QK"):
        t.fail("FlexAttention with PRESCALE_QK")


@rule(torch.ops.higher_order.flex_attention)
def _flex_attention(t, node, q, k, v, score_mod, block_mask, scale, kernel_options,
                    score_buffers=(), mask_buffers=()):
    """FlexAttention (torchtitan's attention) with the identity score_mod and a mask that
    is causal or absent (_flex_mask): the attention of SDPA; its log-sum-exp and max
    results have no value."""
    _flex_checks(t, score_mod, score_buffers, kernel_options)
    qs, ks, sc = _sdpa_args(t, node, q, k, v, 0.0, False, None, scale, gqa=True)
    causal = _flex_mask(t, node, q, k, block_mask, mask_buffers)
    return (_attention(t, q, k, v, qs, sc, causal), None, None)


@rule(torch.ops.higher_order.flex_attention_backward)
def _flex_attention_backward(t, node, q, k, v, out, logsumexp, grad_out, grad_logsumexp,
                             fw_graph, joint_graph, block_mask, scale, kernel_options,
                             score_buffers=(), mask_buffers=()):
    if grad_logsumexp is not None and not isinstance(t.values.get(grad_logsumexp), IdsExpr):
        t.fail("FlexAttention backward with a gradient of its log-sum-exp")
    _flex_checks(t, fw_graph, score_buffers, kernel_options)
    qs, ks, sc = _sdpa_args(t, node, q, k, v, 0.0, False, None, scale, gqa=True)
    causal = _flex_mask(t, node, q, k, block_mask, mask_buffers)
    return _attention_backward(t, grad_out, q, k, v, qs, ks, sc, causal) + ((),)


def _attention_backward(t, grad_out, q, k, v, qs, ks, sc, is_causal):
    q3, k3, v3 = (_heads(t, x, t.shapes[x])
                  for x in (t.value(q), _kv_expanded(t, t.value(k), qs[1]),
                            _kv_expanded(t, t.value(v), qs[1])))
    g3 = _heads(t, t.value(grad_out), qs)
    p = _attention_probs(t, q3, k3, sc, is_causal)
    bh, sq, sk = t.shapes[p]
    dv = t.emit("batch_matmul", [p, g3], t.shapes[v3], {"lhs_dim": 1, "rhs_dim": 1})
    dp = t.emit("batch_matmul", [g3, v3], [bh, sq, sk], {"lhs_dim": 2, "rhs_dim": 2})
    rows = t.reduce("reduce_sum", t.emit("mul", [p, dp], [bh, sq, sk]), [2], True, [bh, sq, 1])
    ds = t.emit("mul", [p, t.emit("sub", [dp, t.broadcast_to(rows, [bh, sq, sk])], [bh, sq, sk])],
                [bh, sq, sk])
    dq = t.scale(t.emit("batch_matmul", [ds, k3], t.shapes[q3], {"lhs_dim": 2, "rhs_dim": 1}),
                 sc, t.shapes[q3])
    dk = t.scale(t.emit("batch_matmul", [ds, q3], t.shapes[k3], {"lhs_dim": 1, "rhs_dim": 1}),
                 sc, t.shapes[k3])
    return (t.reshape(dq, qs), _kv_summed(t, dk, ks, qs[1]), _kv_summed(t, dv, ks, qs[1]))


@rule(aten.empty.memory_format, aten.empty_like.default, aten.new_empty.default)
def _empty(t, node, *args, **kw):
    # No value until something writes it (a c10d collective's output buffer).
    t.unwritten.add(node)
    return None


# --- functional collectives ----------------------------------------------------------------
_c10d = torch.ops._c10d_functional
_KINDS = {"sum": "sum", "avg": "avg", "max": "max"}


def _axes(t, group):
    name = str(group)
    if name not in t.group_axes:
        t.fail(f"a collective over process group '{name}', which is no dimension of the "
               "device mesh")
    return list(t.group_axes[name])


# --- c10d collectives (torch.distributed.all_reduce & co., in place) --------------------------
def _pg_axes(t, pg):
    obj = t.objects.get(pg) if isinstance(pg, torch.fx.Node) else None
    if obj is None:
        t.fail("a c10d collective whose process group is not a constant of the graph")
    import torch.distributed as dist
    return _axes(t, dist.ProcessGroup.unbox(obj).group_name)


def _red_kind(t, op):
    obj = t.objects.get(op) if isinstance(op, torch.fx.Node) else None
    import torch.distributed as dist
    name = str(dist.ReduceOp.unbox(obj).op).split(".")[-1].lower() if obj is not None else ""
    if name not in _KINDS:
        t.fail(f"a c10d reduction '{name or op}' (sum, avg and max are covered)")
    return _KINDS[name]


@rule(torch.ops.c10d.allreduce_.default)
def _c10d_all_reduce(t, node, tensors, pg, op, sparse_indices=None, async_op=True, timeout=-1):
    if sparse_indices is not None:
        t.fail("a sparse all_reduce")
    axes, kind = _pg_axes(t, pg), _red_kind(t, op)
    outs = []
    for x in tensors:
        v = t.value(x)
        r = t.emit("all_reduce", [v], t.shapes[v], {"axes": axes, "kind": kind})
        outs.append(t.overwrite(x, r))
    return (tuple(outs), None)


@rule(torch.ops.c10d._allgather_base_.default)
def _c10d_all_gather(t, node, out, x, pg, async_op=True, timeout=-1):
    r = t.emit("all_gather", [t.value(x)], _shape(out), {"axes": _pg_axes(t, pg), "dim": 0})
    return (t.overwrite(out, r), None)


@rule(torch.ops.c10d._reduce_scatter_base_.default)
def _c10d_reduce_scatter(t, node, out, x, pg, op, async_op=True, timeout=-1):
    r = t.emit("reduce_scatter", [t.value(x)], _shape(out),
               {"axes": _pg_axes(t, pg), "dim": 0, "kind": _red_kind(t, op)})
    return (t.overwrite(out, r), None)


@rule(_c10d.all_reduce.default)
def _all_reduce(t, node, x, op, group):
    kind = _KINDS.get(str(op).lower())
    if kind is None:
        t.fail(f"all_reduce with reduction '{op}'")
    return t.emit("all_reduce", [t.value(x)], _out(node), {"axes": _axes(t, group), "kind": kind})


@rule(_c10d.all_gather_into_tensor.default)
def _all_gather(t, node, x, group_size, group):
    return t.emit("all_gather", [t.value(x)], _out(node), {"axes": _axes(t, group), "dim": 0})


@rule(_c10d.reduce_scatter_tensor.default)
def _reduce_scatter(t, node, x, op, group_size, group):
    kind = _KINDS.get(str(op).lower())
    if kind is None:
        t.fail(f"reduce_scatter with reduction '{op}'")
    return t.emit("reduce_scatter", [t.value(x)], _out(node),
                  {"axes": _axes(t, group), "dim": 0, "kind": kind})


# Rules that hold for complex operands (held as [..., 2]): the views, slices and copies
# (their shapes carry the trailing 2), view_as_real/complex, conj and the product.
COMPLEX_RULES = {RULES[op] for op in (
    aten.view.default, aten._unsafe_view.default, aten.reshape.default, aten.unsqueeze.default,
    aten.expand.default, aten.clone.default, aten.alias.default, aten.detach.default,
    aten.slice.Tensor, aten.view_as_complex.default, aten.view_as_real.default,
    aten._conj.default, aten.mul.Tensor)}


from . import multi_tensor  # noqa: E402 (its rules: the foreach and fused optimizer ops)
