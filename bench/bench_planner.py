#!/usr/bin/env python3
"""A planner's loop through the public API (issue 16): candidate plans one op apart,
re-verified by the layout engine three ways: edited in place (Session::edit, the layout
engine re-deriving only what the edited op reaches), loaded as text against the loaded
reference (Session::loadPlan: the reference's run and plan states seen before reused),
and each in a fresh Session.

Plans written by `planproof plan ...,size=full` (the models' real sizes); the loop is
bench/planner/PlannerBench.cpp (`planproof-bench-planner SPEC N`): candidate i flips
the reduction ("sum" <-> "avg") of one collective an edit can change (in these plans,
which derive their backward pass, the collectives after the loss: the gradients'),
every other candidate undoes it.

    python3 bench/bench_planner.py --candidates 40 --out bench/results-planner.md
"""
import argparse
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
from common import PLANPROOF, ROOT, write_results  # noqa: E402

BENCH = os.path.join(ROOT, "build", "bin", "planproof-bench-planner")
MODELS = os.path.join(ROOT, "verify-specs", "models")
CONFIGS = [
    ("llama3-8b", "dp=8,tp=8,sp,layers=1", "one block, dp 8 x tp 8 + SP"),
    ("llama3-8b", "dp=8,tp=8,sp,layers=4", "4 layers, dp 8 x tp 8 + SP"),
    ("llama3-8b", "dp=8,tp=8,sp,layers=32", "32 layers, dp 8 x tp 8 + SP"),
    ("deepseek-v2-236b", "dp=16,tp=8,ep=16,layers=2", "a dense and an MoE layer, dp 16 x tp 8 x ep 16"),
    ("llama3-70b", "dp=8,tp=8,pp=4,microbatches=4,layers=8", "8 layers, dp 8 x tp 8 x pp 4, 4 mb"),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--candidates", type=int, default=40)
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="planproof-planner-")
    command = "python3 bench/bench_planner.py --candidates %d" % a.candidates
    out = ["Per-candidate wall time (edit or load, then verify by the layout engine), median "
           "and quartiles over the candidates, in one process:", "",
           "| model | plan | plan ops | edit: median ms (quartiles) | reuse: median ms (quartiles) "
           "| fresh: median ms (quartiles) | edit / fresh | states re-derived after an edit "
           "| verdicts (verified / not) |",
           "|---|---|---|---|---|---|---|---|---|"]
    for model, par, what in CONFIGS:
        path = os.path.join(tmp, "plan.mlir")
        subprocess.run([PLANPROOF, "plan", "--model", os.path.join(MODELS, model + ".json"),
                        "--parallel", par + ",size=full", "-o", path], check=True)
        p = subprocess.run([BENCH, path, str(a.candidates)], capture_output=True, text=True)
        if p.returncode != 0:
            out.append(f"| {model} | {what} | | failed: {p.stderr.strip()[:100]} | | | | | |")
            continue
        lines = {l.split(":")[0]: l for l in p.stdout.splitlines()}
        ops = lines["base"].split(", ")[1].split()[0]

        def parse(line):
            med = float(line.split("median ")[1].split(" ms")[0])
            q = line.split("quartiles ")[1].split(")")[0]
            ver = line.split("; ")[1]
            reused = float(line.split("reused ")[1].rstrip("%"))
            return med, q, ver, reused

        em, eq, ev, er = parse(lines["edit"])
        rm, rq, _, _ = parse(lines["reuse"])
        fm, fq, _, _ = parse(lines["fresh"])
        out.append(f"| {model} | {what} | {ops} | {em:.2f} ({eq}) | {rm:.2f} ({rq}) | "
                   f"{fm:.2f} ({fq}) | {em / fm:.2f} | {100 - er:.1f}% | "
                   f"{ev.replace(' verified, ', ' / ').replace(' not', '')} |")
    text = "\n".join(out) + "\n"
    if a.out:
        write_results(a.out, command, text)
    print(text)


if __name__ == "__main__":
    main()
