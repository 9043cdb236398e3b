"""python -m planproof.torch CASE.py [--out SPEC.json] [--verify [--engine E]] [--time-limit SECONDS]
    [--format text|json|sarif] [--check-numerics] [--planproof BIN]

CASE.py defines `planproof_case()`, returning the keyword arguments of
`planproof.torch.capture` (model_fn, loss_fn, inputs, mesh_shape, mesh_dim_names,
parallelize, and optionally input_placements, description). The captured spec is
written to SPEC.json (default: CASE.json beside CASE.py); with --verify, `planproof
verify` checks it and this command exits with its status (0 verified, 1 violated,
3 inconclusive), with --engine auto by default (the layout engine, then the element engine
where it does not prove: a framework's step at its real sizes is decided at once, a
violation still gets the element engine's counterexample). An op or placement the capture does not cover is *inconclusive*
(exit 3), naming it and the user's line; a case file that cannot be run is exit 2.
"""
import argparse
import json
import os
import runpy
import shutil
import subprocess
import sys


def _relative_locs(spec, folder):
    """User source paths relative to the spec's folder where they lie below it (planproof
    reads a relative `loc` path from the JSON file's folder), so captures move with the
    code they come from."""
    for part in ("reference", "plan"):
        for op in spec[part]["ops"]:
            loc = op.get("loc")
            if loc and os.path.isabs(loc["file"]):
                rel = os.path.relpath(loc["file"], folder)
                if not rel.startswith(".."):
                    loc["file"] = rel


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m planproof.torch", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("case")
    ap.add_argument("--out", default="")
    ap.add_argument("--verify", action="store_true")
    ap.add_argument("--engine", default="auto", choices=["auto", "element", "layout"],
                    help="the engine of --verify (planproof verify --engine; default auto)")
    ap.add_argument("--time-limit", type=float, default=None, metavar="SECONDS",
                    help="planproof's --time-limit for --verify and --check-numerics: past it, "
                         "the report says so (exit 3)")
    ap.add_argument("--planproof", default=os.environ.get("PLANPROOF", "") or shutil.which("planproof") or "planproof")
    ap.add_argument("--format", default="text", choices=["text", "json", "sarif"])
    ap.add_argument("--check-numerics", action="store_true",
                    help="also replay the translated single-device step at concrete inputs "
                         "against PyTorch's own outputs (a check of the translation)")
    a = ap.parse_args(argv)
    limit = ["--time-limit", repr(a.time_limit)] if a.time_limit is not None else []
    out = a.out or os.path.splitext(a.case)[0] + ".json"
    # The case's folder is importable, as for a script run from it.
    sys.path.insert(0, os.path.dirname(os.path.abspath(a.case)))
    try:
        case = runpy.run_path(a.case)["planproof_case"]()
    except Exception as e:  # the user's file: any failure is bad input
        print(f"{a.case}: error: the case could not be run: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    from .aten import Unsupported
    from .capture import capture
    try:
        spec = capture(**case)
        _relative_locs(spec, os.path.dirname(os.path.abspath(out)))
    except Unsupported as e:
        print(f"{e.loc['file']}:{e.loc['line']}: " if e.loc else f"{a.case}: ", end="", file=sys.stderr)
        print(f"inconclusive: {e.what}", file=sys.stderr)
        print(f"{a.case}: inconclusive -- the capture does not cover this step", file=sys.stderr)
        return 3
    except Exception as e:  # the step did not trace: the user's code or its parallelization
        print(f"{a.case}: error: the step could not be captured: {type(e).__name__}: {e}",
              file=sys.stderr)
        return 2
    with open(out, "w") as f:
        json.dump(spec, f, indent=1)
        f.write("\n")
    print(f"{out}: captured {len(spec['reference']['ops'])} reference ops, "
          f"{len(spec['plan']['ops'])} plan ops on mesh "
          + " x ".join(f"{x['name']}={x['size']}" for x in spec["plan"]["mesh"]["axes"]),
          file=sys.stderr)
    if a.check_numerics:
        from .numerics import numeric_spec
        check = os.path.splitext(out)[0] + ".numerics.json"
        ids, spec_n = numeric_spec(**case)
        with open(check, "w") as f:
            json.dump(spec_n, f)
        cmd = [a.planproof, "replay", check] + limit
        if ids:
            import numpy
            folder = os.path.splitext(out)[0] + ".numerics-inputs"
            os.makedirs(folder, exist_ok=True)
            for name, t in ids.items():
                numpy.save(os.path.join(folder, name + ".npy"), t.numpy().astype("int64"))
            cmd += ["--inputs", folder]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            sys.stderr.write(r.stdout + r.stderr)
            print(f"{a.case}: inconclusive -- the translated step disagrees with PyTorch at "
                  f"concrete inputs ({check}): a translation rule is wrong", file=sys.stderr)
            return 3
        print(f"{check}: the translated step agrees with PyTorch at concrete inputs",
              file=sys.stderr)
    if not a.verify:
        return 0
    # The case's folder holds the user's code: its lines may be quoted in the report.
    return subprocess.run([a.planproof, "verify", out, "--engine", a.engine,
                           "--format", a.format, "--source-root",
                           os.path.dirname(os.path.abspath(a.case))] + limit).returncode


if __name__ == "__main__":
    sys.exit(main())
