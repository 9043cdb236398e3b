"""planproof: a verifier of the parallel plans of distributed training.

    import planproof
    r = planproof.verify("verify-specs/mlp/mlp_tp2.mlir")
    print(r.verdict)                      # 'verified', 'violated' or 'inconclusive'
    for v in r.violations:
        print(v.kind, v.at, v.message)    # e.g. reduction  plan.mlir:12:5  ...

A spec (the single-device reference step and its parallel plan) is a file (MLIR or the
JSON format of docs/json-format.md), JSON or MLIR text (`load_text`), a dict in the JSON
format, or a `planproof.builder.SpecBuilder`. Errors in it raise `SpecError` with the
file, line and column (or JSON path) the CLI would print. A `Session` keeps what does
not change between a planner's candidates: `Session.load_plan` loads a candidate plan
against a loaded reference, and the layout engine reuses the reference's run and every
plan state it has seen (docs/python.md).

The subpackages capture specs from frameworks: `planproof.torch` (PyTorch's DTensor
plans) and `planproof.xla` (XLA's SPMD partitioner); they do not need the extension
module, which is loaded on first use of the functions here.
"""
from __future__ import annotations

import json as _json
import os
import threading
from typing import TYPE_CHECKING, Any, Mapping, Union

from ._errors import SpecError

if TYPE_CHECKING:  # the extension's types, for type checkers (python/planproof/_planproof.pyi)
    from ._planproof import ReplayResult, Result, Session, Spec

__all__ = ["SpecError", "Session", "Spec", "Result", "Finding", "Counterexample", "Location",
           "Stats", "ReplayResult", "ReplayOutput", "load", "load_text", "verify", "replay",
           "plan", "VERDICTS"]

#: The three verdicts, as `Result.verdict` spells them.
VERDICTS = ("verified", "violated", "inconclusive")

_EXTENSION_NAMES = ("Session", "Spec", "Result", "Finding", "Counterexample", "Location",
                    "Stats", "ReplayResult", "ReplayOutput")


def _build_dirs():
    """Where a build of this source tree may have written the extension module:
    $PLANPROOF_BUILD, then the README's build folder beside python/."""
    here = os.path.dirname(os.path.realpath(__file__))
    root = os.path.dirname(os.path.dirname(here))
    dirs = []
    if os.environ.get("PLANPROOF_BUILD"):
        dirs.append(os.path.join(os.environ["PLANPROOF_BUILD"], "python", "planproof"))
    dirs.append(os.path.join(root, "build", "python", "planproof"))
    return [d for d in dirs if os.path.isdir(d)]


_ext = None


def _extension():
    """The extension module planproof._planproof, found beside this file (an installed
    package) or in the build folder of this source tree."""
    global _ext
    if _ext is None:
        for d in _build_dirs():
            if d not in __path__:
                __path__.append(d)
        try:
            from . import _planproof
        except ImportError as e:
            raise ImportError(
                "planproof's extension module is not built: run `make run` or `make test` "
                "in the source tree (README), or set PLANPROOF_BUILD to the build folder "
                f"({e})") from e
        _ext = _planproof
    return _ext


def __getattr__(name: str) -> Any:
    if name in _EXTENSION_NAMES:
        return getattr(_extension(), name)
    raise AttributeError(f"module 'planproof' has no attribute '{name}'")


_local = threading.local()


def _session():
    """This thread's default Session (a Session is not for concurrent use)."""
    s = getattr(_local, "session", None)
    if s is None:
        s = _local.session = _extension().Session()
    return s


Source = Union["Spec", str, os.PathLike, Mapping[str, Any], Any]


def load(source: Source, *, full_shapes: bool = False, session: "Session | None" = None) -> "Spec":
    """Loads a spec: a path (str or os.PathLike) to an MLIR or .json file, a dict in the
    JSON format, a `planproof.builder.SpecBuilder`, or an already loaded `Spec` (returned
    as it is). Text is `load_text`'s. Raises SpecError for what cannot be loaded."""
    ext = _extension()
    s = session or _session()
    if isinstance(source, ext.Spec):
        return source
    if hasattr(source, "to_dict") and callable(source.to_dict):
        source = source.to_dict()
    if isinstance(source, Mapping):
        try:
            text = _json.dumps(source)
        except (TypeError, ValueError) as e:
            raise SpecError(f"the spec is not JSON data: {e}", "<dict>") from e
        return s.load_text(text, name="<dict>.json", full_shapes=full_shapes)
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        if not os.path.isfile(path):
            if path.lstrip().startswith(("{", "module", "func.func")) or "\n" in path:
                raise SpecError("a spec's text was given where a path belongs; use "
                                "planproof.load_text(text)", "<text>")
            raise SpecError("no such file", path)
        return s.load(path, full_shapes=full_shapes)
    raise TypeError("a spec is a path, a dict, a SpecBuilder or a Spec, not "
                    f"{type(source).__name__}")


def load_text(text: str, *, name: str = "<text>", full_shapes: bool = False,
              session: "Session | None" = None) -> "Spec":
    """Loads a spec from text: JSON when it starts with '{' (or `name` ends in .json),
    else MLIR. Diagnostics call it `name`."""
    return (session or _session()).load_text(text, name=name, full_shapes=full_shapes)


def verify(source: Source, *, engine: str = "auto", time_limit: float = 600.0,
           threads: int = 2, solver_budget: int = 5_000_000,
           solver_timeout_ms: "int | None" = None, check_fixes: bool = True,
           full_shapes: bool = False, explain_proof: bool = False,
           session: "Session | None" = None) -> "Result":
    """Loads (see `load`) and decides a spec. 'verified' only for what was proven;
    unsupported ops and budgets reached give 'inconclusive' with the reason
    (`solver_budget`: Z3's resource limit per query, counted work, so the verdict is the
    same on any machine; `solver_timeout_ms` is its older form, ms x 500 units;
    `time_limit` is the outer wall-clock bound)
    (`Result.inconclusive`). engine: 'auto' (the default: layout, then element where the
    layout engine does not prove the plan), 'element' (every rank on every element, at
    reduced shapes) or 'layout' (layouts and reference terms, at any size; never
    'violated'). explain_proof: with a verified verdict, `Result.proof` says which rules
    proved each output."""
    s = session or _session()
    spec = load(source, full_shapes=full_shapes, session=s)
    return s.verify(spec, engine=engine, time_limit=time_limit, threads=threads,
                    solver_budget=solver_budget, solver_timeout_ms=solver_timeout_ms,
                    check_fixes=check_fixes, explain_proof=explain_proof)


def replay(source: Source, *, dtype: str = "fp32", order: str = "ring", seed: int = 1,
           time_limit: float = 600.0, localize: bool = True,
           session: "Session | None" = None) -> "ReplayResult":
    """Runs the reference (fp64) and the plan (at `dtype`: fp64, fp32, bf16; collective
    reductions in `order`: rank, ring, tree) on the same seeded inputs on the CPU and
    compares every output; on a divergence, finds the first plan op that leaves the
    reference (docs/replay.md)."""
    s = session or _session()
    spec = load(source, session=s)
    return s.replay(spec, dtype=dtype, order=order, seed=seed, time_limit=time_limit,
                    localize=localize)


def plan(model: Union[str, os.PathLike], parallel: str = "") -> str:
    """`planproof plan`: the spec (MLIR text: the reference step and its SPMD plan) of a
    model configuration file (verify-specs/models/*.json) under a parallel configuration
    such as "dp=2,tp=2,sp,microbatches=2" or "dp=64,tp=8,pp=16,size=full" (docs/plan.md).
    Raises SpecError for a model file it cannot read or a configuration it cannot write."""
    return _extension().generate_plan(os.fspath(model), parallel)
