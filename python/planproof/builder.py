"""Build a spec in code: a small builder over the JSON format (docs/json-format.md).

    from planproof.builder import SpecBuilder
    s = SpecBuilder("Megatron MLP, tp=2")
    ref = s.reference
    x, w = ref.input("x", [2, 4]), ref.input("w", [4, 2])
    ref.output(ref.op("matmul", [x, w], lhs_dim=1, rhs_dim=0, result="y"))

    plan = s.plan(tp=2)                                   # mesh axes, major to minor
    px = plan.input("x", dims=[None, "tp"])               # holds reference input "x"
    pw = plan.input("w", dims=["tp", None])
    part = plan.op("matmul", [px, pw], lhs_dim=1, rhs_dim=0)
    y = plan.op("all_reduce", [part], axes=["tp"], kind="sum")
    plan.output(y, value="y", dims=[None, None])
    planproof.verify(s).verdict                           # 'verified'

Values are their names (str). Every op records where the builder was called from
(`"loc"`: file and line), so a violation points at the planner's own line; pass
`loc=None` to leave it out, or a dict to give another place. `to_dict()` is the JSON
object; `json()` its text.
"""
from __future__ import annotations

import inspect
import json as _json
import os
from typing import Any, Dict, List, Optional, Sequence, Union

Dim = Union[None, str, Sequence[str], Dict[str, Any]]

_HERE = os.path.abspath(__file__)
_CALLER = object()  # loc's default: the caller's file and line


def _caller_loc() -> Optional[Dict[str, Any]]:
    """The first frame outside this file: where the user's code called the builder."""
    frame = inspect.currentframe()
    try:
        while frame is not None and os.path.abspath(frame.f_code.co_filename) == _HERE:
            frame = frame.f_back
        if frame is None or frame.f_code.co_filename.startswith("<"):
            return None
        return {"file": frame.f_code.co_filename, "line": frame.f_lineno}
    finally:
        del frame


class _Program:
    """The ops of the reference or the plan, in program order."""

    def __init__(self, prefix: str):
        self._inputs: List[Dict[str, Any]] = []
        self._ops: List[Dict[str, Any]] = []
        self._names: set = set()
        self._prefix = prefix
        self._count = 0

    def _fresh(self, result: Optional[str]) -> str:
        if result is None:
            while True:
                result = f"{self._prefix}{self._count}"
                self._count += 1
                if result not in self._names:
                    break
        if not isinstance(result, str) or not result:
            raise ValueError(f"a result name is a non-empty string, not {result!r}")
        if result in self._names:
            raise ValueError(f"'{result}' is defined twice")
        self._names.add(result)
        return result

    def _use(self, operands: Sequence[str]) -> List[str]:
        if isinstance(operands, str):
            raise TypeError("operands are a list of value names, not one string")
        for o in operands:
            if o not in self._names:
                raise ValueError(f"'{o}' is used before it is defined")
        return list(operands)

    def op(self, op: str, operands: Sequence[str] = (), *, result: Optional[str] = None,
           shape: Optional[Sequence[Union[int, str]]] = None, loc: Any = _CALLER,
           draws: Optional[Dict[str, Any]] = None, **attrs: Any) -> str:
        """Appends `result = op(operands) {attrs}` and returns the result's name (a fresh
        one unless given). `shape` for the ops whose result shape does not follow from
        their operands (reshape, broadcast, constant, dropout_mask, power); `draws` for
        an independent-RNG dropout_mask; the other keywords are the op's attributes."""
        entry: Dict[str, Any] = {"result": None, "op": op, "operands": self._use(operands)}
        if attrs:
            entry["attrs"] = attrs
        if shape is not None:
            entry["shape"] = list(shape)
        if draws is not None:
            entry["draws"] = draws
        where = _caller_loc() if loc is _CALLER else loc
        if where is not None:
            entry["loc"] = where
        entry["result"] = self._fresh(result)
        self._ops.append(entry)
        return entry["result"]


class Reference(_Program):
    """The single-device step: inputs, ops, outputs."""

    def __init__(self):
        super().__init__("r")
        self._outputs: List[str] = []
        self._updates: Dict[str, str] = {}

    def input(self, name: str, shape: Optional[Sequence[Union[int, str]]] = None, *,
              dtype: Optional[str] = None, bound: Optional[int] = None) -> str:
        """A named input: f32 of `shape` by default; token ids with dtype='i64' and
        `bound`; one integer step input with dtype='index' and no shape."""
        entry: Dict[str, Any] = {"name": self._fresh(name)}
        if shape is not None:
            entry["shape"] = list(shape)
        if dtype is not None:
            entry["dtype"] = dtype
        if bound is not None:
            entry["bound"] = bound
        self._inputs.append(entry)
        return name

    def output(self, *values: str) -> None:
        """The values the step returns, each known by its name."""
        self._outputs.extend(self._use(values))

    def update(self, next_value: str, of: str) -> None:
        """Says output `next_value` is the next value of input `of` (counters, steps)."""
        self._updates[next_value] = of

    def to_dict(self) -> Dict[str, Any]:
        d: Dict[str, Any] = {"inputs": self._inputs, "ops": self._ops, "outputs": self._outputs}
        if self._updates:
            d["updates"] = dict(self._updates)
        return d


class Plan(_Program):
    """The SPMD program every rank runs on the mesh."""

    def __init__(self, axes: Dict[str, int], mesh_name: str, rng: Optional[str]):
        super().__init__("p")
        if not axes:
            raise ValueError("a mesh has at least one axis, e.g. plan(tp=2)")
        self._mesh = {"name": mesh_name,
                      "axes": [{"name": a, "size": n} for a, n in axes.items()]}
        self._rng = rng
        self._outputs: List[Dict[str, Any]] = []

    @staticmethod
    def _layout(dims: Optional[Sequence[Dim]], partial: Optional[Dict[str, Sequence[str]]],
                layout: Optional[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
        if layout is not None:
            if dims is not None or partial is not None:
                raise ValueError("give either layout= or dims=/partial=, not both")
            return dict(layout)
        if dims is None:
            return None
        out: Dict[str, Any] = {"dims": [list(d) if isinstance(d, (list, tuple)) else d
                                        for d in dims]}
        if partial:
            out["partial"] = {k: list(v) for k, v in partial.items()}
        return out

    def input(self, name: str, value: Optional[str] = None, *,
              dims: Optional[Sequence[Dim]] = None, layout: Optional[Dict[str, Any]] = None,
              shape: Optional[Sequence[int]] = None) -> str:
        """A plan argument `name` holding reference input `value` (default: the same
        name) under the layout `dims`: per tensor dimension None (whole), an axis name,
        a list of axes (major to minor) or {"axes": ..., "segments": n | "zigzag"}.
        Index inputs take no layout."""
        entry: Dict[str, Any] = {"name": self._fresh(name), "value": value or name}
        lay = self._layout(dims, None, layout)
        if lay is not None:
            entry["layout"] = lay
        if shape is not None:
            entry["shape"] = list(shape)
        self._inputs.append(entry)
        return name

    def output(self, plan_value: str, value: Optional[str] = None, *,
               dims: Optional[Sequence[Dim]] = None,
               partial: Optional[Dict[str, Sequence[str]]] = None,
               layout: Optional[Dict[str, Any]] = None) -> None:
        """Declares that plan value `plan_value`, gathered through its layout, is the
        reference output `value` (default: the same name)."""
        self._use([plan_value])
        entry: Dict[str, Any] = {"name": plan_value, "value": value or plan_value}
        lay = self._layout(dims, partial, layout)
        if lay is None:
            raise ValueError(f"output '{plan_value}' needs its layout (dims=[...])")
        entry["layout"] = lay
        self._outputs.append(entry)

    def to_dict(self) -> Dict[str, Any]:
        d: Dict[str, Any] = {"mesh": self._mesh}
        if self._rng is not None:
            d["rng"] = self._rng
        d.update({"inputs": self._inputs, "ops": self._ops, "outputs": self._outputs})
        return d


class SpecBuilder:
    """A spec under construction: `reference`, then `plan(...)` for the mesh."""

    def __init__(self, description: Optional[str] = None, *,
                 dims: Optional[Dict[str, int]] = None, expect: Optional[Dict[str, Any]] = None):
        self.description = description
        self.dims = dict(dims) if dims else None
        self.expect = expect
        self.reference = Reference()
        self._plan: Optional[Plan] = None

    def plan(self, mesh_name: str = "mesh", rng: Optional[str] = None, **axes: int) -> Plan:
        """The plan on a mesh whose axes (name=size, major to minor) are the keywords:
        plan(dp=2, tp=4). `rng`: "exact" (default) or "independent" (docs/rng.md)."""
        if self._plan is not None:
            raise ValueError("the spec already has a plan")
        self._plan = Plan(axes, mesh_name, rng)
        return self._plan

    def to_dict(self) -> Dict[str, Any]:
        """The spec as the JSON format's object."""
        if self._plan is None:
            raise ValueError("the spec has no plan yet: call plan(axis=size, ...)")
        d: Dict[str, Any] = {"planproof": 1}
        if self.description:
            d["description"] = self.description
        if self.expect:
            d["expect"] = self.expect
        if self.dims:
            d["dims"] = self.dims
        d["reference"] = self.reference.to_dict()
        d["plan"] = self._plan.to_dict()
        return d

    def json(self, indent: Optional[int] = 1) -> str:
        """The JSON text (for a file `planproof verify` reads)."""
        return _json.dumps(self.to_dict(), indent=indent)
