"""A small builder for planproof MLIR specs: tracks each SSA value's shape so that spec
generators write ops, not type strings. Used by scripts/gen_transformer_specs.py."""


def ttype(shape):
    return "tensor<" + "".join(f"{s}x" for s in shape) + "f32>"


class Func:
    def __init__(self, mesh=None):
        self.mesh = mesh or {}  # axis -> size
        self.shapes = {}
        self.lines = []

    # -- bookkeeping -------------------------------------------------------------
    def arg(self, name, shape):
        self.shapes[name] = list(shape)
        return name

    def emit(self, result, text, shape):
        self.shapes[result] = list(shape)
        self.lines.append(f"%{result} = {text}")
        return result

    def comment(self, text):
        self.lines.append(f"// {text}")

    def t(self, v):
        return ttype(self.shapes[v])

    def group(self, axes):
        n = 1
        for a in axes:
            n *= self.mesh[a]
        return n

    # -- ref ops --------------------------------------------------------------------
    def matmul(self, r, a, b, ld=1, rd=0):
        sa, sb = self.shapes[a], self.shapes[b]
        assert sa[ld] == sb[rd], (r, sa, sb)
        return self.emit(r, f"ref.matmul %{a}, %{b} contract({ld}, {rd}) : {self.t(a)}, {self.t(b)}",
                         [sa[1 - ld], sb[1 - rd]])

    def batch_matmul(self, r, a, b, ld, rd):
        sa, sb = self.shapes[a], self.shapes[b]
        assert sa[0] == sb[0] and sa[ld] == sb[rd], (r, sa, sb)
        return self.emit(r, f"ref.batch_matmul %{a}, %{b} contract({ld}, {rd}) : {self.t(a)}, {self.t(b)}",
                         [sa[0], sa[3 - ld], sb[3 - rd]])

    def dot(self, r, a, b):
        assert self.shapes[a] == self.shapes[b] and len(self.shapes[a]) == 1
        return self.emit(r, f"ref.dot %{a}, %{b} : {self.t(a)}", [])

    def binary(self, op, r, a, b):
        assert self.shapes[a] == self.shapes[b], (r, self.shapes[a], self.shapes[b])
        return self.emit(r, f"ref.{op} %{a}, %{b} : {self.t(a)}", self.shapes[a])

    def unary(self, op, r, a):
        return self.emit(r, f"ref.{op} %{a} : {self.t(a)}", self.shapes[a])

    def scale(self, r, a, factor):
        return self.emit(r, f"ref.scale %{a} by {factor} : {self.t(a)}", self.shapes[a])

    def rms_norm(self, r, x, w, eps="1.0e-5"):
        return self.emit(r, f"ref.rms_norm %{x}, %{w} eps {eps} : {self.t(x)}, {self.t(w)}",
                         self.shapes[x])

    def rotary(self, r, x, cos, sin):
        return self.emit(r, f"ref.rotary %{x}, %{cos}, %{sin} : {self.t(x)}, {self.t(cos)}",
                         self.shapes[x])

    def reshape(self, r, x, shape):
        return self.emit(r, f"ref.reshape %{x} : {self.t(x)} -> {ttype(shape)}", shape)

    def transpose(self, r, x, perm):
        s = self.shapes[x]
        return self.emit(r, f"ref.transpose %{x} perm [{', '.join(map(str, perm))}] : {self.t(x)}",
                         [s[p] for p in perm])

    def broadcast(self, r, x, dims, shape):
        return self.emit(r, f"ref.broadcast %{x} dims [{', '.join(map(str, dims))}] : "
                            f"{self.t(x)} -> {ttype(shape)}", shape)

    def slice(self, r, x, offsets, sizes):
        return self.emit(r, f"ref.slice %{x} offsets [{', '.join(map(str, offsets))}] "
                            f"sizes [{', '.join(map(str, sizes))}] : {self.t(x)}", sizes)

    def reduce(self, op, r, x, dims):
        s = [n for i, n in enumerate(self.shapes[x]) if i not in dims]
        return self.emit(r, f"ref.{op} %{x} dims [{', '.join(map(str, dims))}] : {self.t(x)}", s)

    def constant(self, r, value, shape):
        return self.emit(r, f"ref.constant {value} : {ttype(shape)}", shape)

    # -- collectives ------------------------------------------------------------------
    def all_reduce(self, r, x, axes, kind="sum"):
        return self.emit(r, f'dist.all_reduce %{x} over [{", ".join(f"{chr(34)}{a}{chr(34)}" for a in axes)}] '
                            f'"{kind}" : {self.t(x)} -> {self.t(x)}', self.shapes[x])

    def _resized(self, x, dim, factor):
        s = list(self.shapes[x])
        s[dim] = s[dim] * factor if factor >= 1 else s[dim] // int(round(1 / factor))
        return s

    def all_gather(self, r, x, axes, dim):
        s = list(self.shapes[x])
        s[dim] *= self.group(axes)
        ax = ", ".join(f'"{a}"' for a in axes)
        return self.emit(r, f"dist.all_gather %{x} over [{ax}] dim {dim} : {self.t(x)} -> {ttype(s)}", s)

    def reduce_scatter(self, r, x, axes, dim, kind="sum"):
        s = list(self.shapes[x])
        s[dim] //= self.group(axes)
        ax = ", ".join(f'"{a}"' for a in axes)
        return self.emit(r, f'dist.reduce_scatter %{x} over [{ax}] dim {dim} "{kind}" : '
                            f"{self.t(x)} -> {ttype(s)}", s)

    def shard_slice(self, r, x, axes, dim):
        s = list(self.shapes[x])
        s[dim] //= self.group(axes)
        ax = ", ".join(f'"{a}"' for a in axes)
        return self.emit(r, f"dist.shard_slice %{x} over [{ax}] dim {dim} : {self.t(x)} -> {ttype(s)}", s)


def reference_func(f, inputs, outputs):
    """inputs: [(name, shape)], outputs: [(ref output name, value)]."""
    args = ",\n                       ".join(f'%{n}: {ttype(s)} {{ref.name = "{n}"}}' for n, s in inputs)
    res = ", ".join(f'{f.t(v)} {{ref.name = "{n}"}}' for n, v in outputs)
    body = "\n".join("    " + l for l in f.lines)
    vals = ", ".join(f"%{v}" for _, v in outputs)
    tys = ", ".join(f.t(v) for _, v in outputs)
    return (f"  func.func @reference({args})\n      -> ({res})\n      attributes {{ref.reference}} {{\n"
            f"{body}\n    return {vals} : {tys}\n  }}\n")


def plan_func(f, mesh, inputs, outputs):
    """inputs: [(name, ref value, layout, local shape)], outputs: [(ref output, value, layout)]."""
    axes = ", ".join(f'"{a}"' for a in mesh)
    shape = ", ".join(str(s) for s in mesh.values())
    args = ",\n                  ".join(
        f'%{n}: {ttype(s)} {{dist.value = "{v}", dist.layout = {lay}}}' for n, v, lay, s in inputs)
    res = ",\n          ".join(f'{f.t(v)} {{dist.value = "{n}", dist.layout = {lay}}}'
                               for n, v, lay in outputs)
    body = "\n".join("    " + l for l in f.lines)
    vals = ", ".join(f"%{v}" for _, v, _ in outputs)
    tys = ", ".join(f.t(v) for _, v, _ in outputs)
    return (f"  dist.mesh @mesh axes = [{axes}] shape = [{shape}]\n\n"
            f"  func.func @plan({args})\n      -> ({res})\n      attributes {{dist.mesh = @mesh}} {{\n"
            f"{body}\n    return {vals} : {tys}\n  }}\n")


def module(header, expect, ref, plan):
    exp = ", ".join(f'{k} = "{v}"' for k, v in expect.items())
    return (header + f"module attributes {{planproof.expect = {{{exp}}}}} {{\n{ref}\n{plan}}}\n")
