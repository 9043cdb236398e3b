#!/usr/bin/env python3
"""Verification time and peak memory of generated plans (`planproof plan`) along the
axes of TrainVerify's scaling study: layers, microbatches, TP, DP, PP (with its three
schedules), CP, combined 4-D meshes, and (for MoE models) EP.

    python3 bench/bench_scaling.py --runs 1 --limit 600 --out bench/results-scaling.md

Each axis grows until a run passes --limit seconds (or the engine gives up); the rest
of that axis is then skipped. Columns: the verdict, the element engine's own time,
the process's wall time and peak resident memory (medians over --runs runs; peak is
the maximum).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import PLANPROOF, ROOT, repeat, summarize, verify_timed, write_results  # noqa: E402

MODELS = os.path.join(ROOT, "verify-specs", "models")

# (axis, model, parallel)
AXES = [
    ("layers", "llama3-405b", ["layers=1", "layers=2", "layers=4", "layers=8", "layers=16"]),
    ("microbatches", "llama3-405b", ["dp=2,microbatches=1,layers=1", "dp=2,microbatches=2,layers=1",
                                     "dp=2,microbatches=4,layers=1", "dp=2,microbatches=8,layers=1"]),
    ("tp", "llama3-405b", ["tp=1,layers=1", "tp=2,layers=1", "tp=4,layers=1", "tp=8,layers=1"]),
    ("dp", "llama3-405b", ["dp=1,layers=1", "dp=2,layers=1", "dp=4,layers=1", "dp=8,layers=1",
                           "dp=16,layers=1"]),
    ("cp", "llama3-405b", ["cp=1,layers=1", "cp=2,layers=1", "cp=4,layers=1"]),
    ("dp x tp (x sp)", "llama3-405b", ["dp=2,tp=2,layers=1", "dp=2,tp=2,sp,layers=1",
                                        "dp=2,cp=2,tp=2,layers=1", "dp=4,tp=4,layers=1"]),
    ("pp", "llama3-405b", ["pp=2,microbatches=2", "pp=4,microbatches=4", "pp=8,microbatches=8",
                           "pp=16,microbatches=16"]),
    ("pp (8 layers, 2 microbatches)", "llama3-405b", ["layers=8,microbatches=2",
                                                      "pp=2,microbatches=2,layers=8",
                                                      "pp=4,microbatches=2,layers=8",
                                                      "pp=8,microbatches=2,layers=8"]),
    ("pp schedule", "llama3-405b", ["pp=4,microbatches=4,schedule=gpipe", "pp=4,microbatches=4",
                                    "pp=4,microbatches=4,schedule=interleaved"]),
    ("4-D", "llama3-405b", ["dp=2,pp=2,cp=2,tp=2", "dp=2,pp=2,cp=2,tp=2,microbatches=2",
                            "dp=2,pp=4,cp=2,tp=2,microbatches=4", "dp=4,pp=4,cp=2,tp=4,microbatches=4"]),
    ("MoE 3-D/4-D with pp (dense layer, then MoE)", "deepseek-v3-671b",
     ["pp=2,ep=2,tp=2", "pp=2,ep=2,cp=2,tp=2", "dp=2,pp=2,ep=2,tp=2", "dp=2,pp=2,ep=2,cp=2,tp=2"]),
    ("ep (MoE)", "deepseek-v3-671b", ["ep=2,layers=1", "ep=4,layers=1", "ep=8,layers=1"]),
    ("MoE 3-D/4-D", "deepseek-moe-16b", ["ep=2,tp=2,layers=1", "ep=2,cp=2,layers=1",
                                         "ep=2,cp=2,tp=2,layers=1", "dp=2,ep=2,cp=2,tp=2,layers=1"]),
]


def run(spec, limit):
    r = verify_timed(spec, limit)
    if r is None:
        return None
    p, wall, peak = r
    try:
        j = json.loads(p.stdout)
    except json.JSONDecodeError:
        return "error: " + p.stderr.strip().splitlines()[0][:80], 0, wall, peak, 0, ""
    why = ""
    if j["verdict"] == "inconclusive" and j.get("inconclusive"):
        why = j["inconclusive"][0].get("reason", "")[:60]
    return j["verdict"], j["stats"]["milliseconds"], wall, peak, j["stats"]["ranks"], why


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--limit", type=int, default=600)
    ap.add_argument("--axes", default="")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    rows = ["| axis | model | parallel | ranks | verdict | engine s | wall s | peak MiB |",
            "|---|---|---|---|---|---|---|---|"]
    tmp = tempfile.mkdtemp()
    for axis, model, points in AXES:
        if args.axes and axis not in args.axes.split(";"):
            continue
        stop = False
        for par in points:
            if stop:
                rows.append(f"| {axis} | {model} | {par} | | skipped (the previous point passed the limit) | | | |")
                print(rows[-1], flush=True)
                continue
            spec = os.path.join(tmp, "p.mlir")
            g = subprocess.run([PLANPROOF, "plan", "--model", os.path.join(MODELS, model + ".json"),
                                "--parallel", par, "-o", spec], capture_output=True, text=True)
            if g.returncode != 0:
                rows.append(f"| {axis} | {model} | {par} | | not generated: {g.stderr.strip()[:80]} | | | |")
                print(rows[-1], flush=True)
                continue
            results = repeat(lambda: run(spec, args.limit), args.runs)
            if not results:
                rows.append(f"| {axis} | {model} | {par} | | past {args.limit} s | | | |")
                stop = True
            else:
                verdict, _, _, _, ranks, why = results[-1]
                eng, wall, peak = summarize(results)
                v = verdict + (f" ({why})" if why else "")
                rows.append(f"| {axis} | {model} | {par} | {ranks} | {v} | {eng:.2f} | {wall:.2f} | {peak:.0f} |")
                stop = verdict == "inconclusive"
            print(rows[-1], flush=True)
    text = "\n".join(rows) + "\n"
    if args.out:
        write_results(args.out, f"python3 bench/bench_scaling.py --runs {args.runs} --limit {args.limit}", text)


if __name__ == "__main__":
    main()
