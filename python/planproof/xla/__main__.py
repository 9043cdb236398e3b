"""python -m planproof.xla CASE.py [--out-dir DIR] [--name NAME] [--verify] [--engine E]
    [--time-limit SECONDS] [--format text|json|sarif] [--planproof BIN]

CASE.py defines `planproof_case()`, returning a dict with
  step           the training step (a Python function of arrays or pytrees of arrays)
  args           example arguments (arrays or jax.ShapeDtypeStruct), or a function of
                 the mesh returning them
  mesh_shape     e.g. (2, 4), and mesh_axes, e.g. ("dp", "tp")
  in_shardings   PartitionSpecs (pytrees matching args), out_shardings likewise
and optionally `description`, `make_step` (a function of the jax Mesh returning the
step, for steps that need it: shard_map), and `reference_step`: the single-device step
whose meaning the parallel one must keep (needed with shard_map, where the module before
partitioning already computes per shard; written to DIR/CASE.reference.hlo), and
`output_names` (an identifier per leaf of the step's results; default: their pytree
paths, `out1_w1`). The step is compiled with jax.jit for that many virtual
CPU devices; XLA's modules before and after its SPMD partitioner are written to
DIR/CASE.before.hlo and DIR/CASE.after.hlo (DIR: the case's folder), then
`planproof import-xla` writes DIR/CASE.json; with --verify, `planproof verify` checks it
and this command exits with its status. A case that cannot be run is exit 2; a program
the import does not cover is exit 3 (inconclusive), naming the op and the user's line.
"""
import argparse
import glob
import math
import os
import runpy
import shutil
import subprocess
import sys
import tempfile


def _output_names(out_info):
    """The step's results named by their pytree paths, as identifiers: the second
    result's leaf 'w1' is `out1_w1`, a lone result `out`. (None where two would clash.)"""
    import re

    import jax
    leaves = jax.tree_util.tree_flatten_with_path(out_info)[0]
    names = []
    for path, _ in leaves:
        parts = []
        for k in path:
            for attr in ("idx", "key", "name"):
                if hasattr(k, attr):
                    parts.append(str(getattr(k, attr)))
                    break
        name = "out" + "".join(("" if i == 0 and p.isdigit() else "_") + p
                               for i, p in enumerate(parts))
        names.append(re.sub(r"[^A-Za-z0-9_]", "_", name)[:200])
    return names if len(set(names)) == len(names) else None


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m planproof.xla", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("case")
    ap.add_argument("--out-dir", default="")
    ap.add_argument("--name", default="", help="base name of the files written (default: the case's)")
    ap.add_argument("--devices", type=int, default=8,
                    help="virtual CPU devices (default 8; the case's mesh must use all)")
    ap.add_argument("--verify", action="store_true")
    ap.add_argument("--engine", default="auto", choices=["auto", "element", "layout"],
                    help="the engine of --verify (planproof verify --engine; default auto)")
    ap.add_argument("--time-limit", type=float, default=None, metavar="SECONDS",
                    help="planproof's --time-limit for the import and --verify: past it, "
                         "the report says so (exit 3)")
    ap.add_argument("--planproof", default=os.environ.get("PLANPROOF", "") or shutil.which("planproof") or "planproof")
    ap.add_argument("--format", default="text", choices=["text", "json", "sarif"])
    a = ap.parse_args(argv)
    limit = ["--time-limit", repr(a.time_limit)] if a.time_limit is not None else []
    case_path = os.path.abspath(a.case)
    name = a.name or os.path.splitext(os.path.basename(case_path))[0]
    out_dir = os.path.abspath(a.out_dir or os.path.dirname(case_path))
    dump = tempfile.mkdtemp(prefix="planproof-xla-")
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                               f" --xla_force_host_platform_device_count={a.devices}"
                               f" --xla_dump_to={dump} --xla_dump_hlo_as_text"
                               " --xla_dump_hlo_pass_re=spmd-partitioning"
                               " --xla_dump_large_constants")
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    sys.path.insert(0, os.path.dirname(case_path))
    try:
        import jax
        import numpy as np
        from jax.sharding import Mesh, NamedSharding
        case = runpy.run_path(case_path)["planproof_case"]()
        shape = tuple(case["mesh_shape"])
        if math.prod(shape) != a.devices:
            raise ValueError(f"mesh {shape} does not use the {a.devices} devices")
        mesh = Mesh(np.array(jax.devices()[:a.devices]).reshape(shape), tuple(case["mesh_axes"]))
        args = case["args"](mesh) if callable(case["args"]) else case["args"]
        to_sharding = lambda specs: jax.tree.map(lambda p: NamedSharding(mesh, p), specs,
                                                 is_leaf=lambda x: isinstance(x, jax.sharding.PartitionSpec))
        step = case["make_step"](mesh) if "make_step" in case else case["step"]
        fn = jax.jit(step, in_shardings=to_sharding(case["in_shardings"]),
                     out_shardings=to_sharding(case["out_shardings"]))
        # The mesh in context, for with_sharding_constraint(x, PartitionSpec) in the step.
        with jax.set_mesh(mesh):
            lowered = fn.lower(*args)
            lowered.compile()
        out_names = case.get("output_names") or _output_names(lowered.out_info)
        reference = case.get("reference_step")
        if reference is not None:
            if reference.__name__ == step.__name__:
                raise ValueError("reference_step needs a name other than the step's")
            jax.jit(reference).lower(*args).compile()
    except Exception as e:  # the user's file: any failure is bad input
        print(f"{a.case}: error: the case could not be compiled: {type(e).__name__}: {e}",
              file=sys.stderr)
        return 2
    module = f"jit_{step.__name__}"
    found = {}
    for kind, pattern in (("before", "*before_spmd-partitioning.txt"),
                          ("after", "*after_spmd-partitioning*.txt")):
        files = sorted(f for f in glob.glob(os.path.join(dump, pattern))
                       if f".{module}." in os.path.basename(f))
        if not files:
            print(f"{a.case}: error: XLA wrote no {kind}-partitioning dump for {module} in "
                  f"{dump} (is the step jitted over more than one device?)", file=sys.stderr)
            return 2
        found[kind] = files[-1]
    if reference is not None:
        files = sorted(glob.glob(os.path.join(dump, f"*.jit_{reference.__name__}.before_optimizations.txt")))
        if not files:
            print(f"{a.case}: error: XLA wrote no module for the reference step in {dump}",
                  file=sys.stderr)
            return 2
        found["reference"] = files[-1]
    os.makedirs(out_dir, exist_ok=True)
    paths = {}
    for kind, f in found.items():
        paths[kind] = os.path.join(out_dir, f"{name}.{kind}.hlo")
        with open(f) as src:
            text = src.read()
        # User paths relative to the output folder (planproof reads a relative path from
        # the spec's folder), so that fixtures move with the code they come from.
        rel = os.path.relpath(os.path.dirname(case_path), out_dir)
        text = text.replace(f'"{os.path.dirname(case_path)}/',
                            '"' if rel == "." else f'"{rel}/')
        with open(paths[kind], "w") as dst:
            dst.write(text)
    shutil.rmtree(dump, ignore_errors=True)
    spec = os.path.join(out_dir, f"{name}.json")
    cmd = [a.planproof, "import-xla", paths["before"], paths["after"], "-o", spec,
           "--mesh", ",".join(f"{n}={s}" for n, s in zip(case["mesh_axes"], shape))]
    if "reference" in paths:
        cmd += ["--reference", paths["reference"]]
    if case.get("description"):
        cmd += ["--description", case["description"]]
    if out_names:
        cmd += ["--output-names", ",".join(out_names)]
    r = subprocess.run(cmd + limit)
    if r.returncode != 0:
        return r.returncode
    print(f"{spec}: imported from {os.path.basename(paths['before'])} and "
          f"{os.path.basename(paths['after'])}", file=sys.stderr)
    if not a.verify:
        return 0
    # The case's folder holds the user's code: its lines may be quoted in the report.
    return subprocess.run([a.planproof, "verify", spec, "--engine", a.engine, "--format",
                           a.format, "--source-root",
                           os.path.dirname(os.path.abspath(a.case))] + limit).returncode


if __name__ == "__main__":
    sys.exit(main())
