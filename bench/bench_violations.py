"""Verifying seeded-bug specs: two planproof binaries side by side, in one run.

    python3 bench/bench_violations.py --baseline OLD/bin/planproof --runs 3 \
        --out bench/results-violations.md

A violated spec costs more than a verified one: each failing output's counterexample is
searched for and minimized (many evaluations of its expression DAG), the culprit is
localized and explained, and every fix hint is re-verified. The two binaries alternate
on each spec (one thread each, `--threads 1`), so machine noise hits both alike; the
table gives medians of wall time and the ratio, and checks that both report the same
verdict, kind and culprit.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from common import PLANPROOF, ROOT, write_results  # noqa: E402

SPECS = [
    "cp/dp2_cp2_kv_gather_rank_order.mlir",
    "cp/dp2_cp2_loss_not_scaled_by_cp.mlir",
    "transformer/llama_tp2_backward_mlp_input_grad_not_reduced.mlir",
    "moe/ep2_tp2_all_to_all_wrong_group.mlir",
    "mlp/mlp_tp2_grad_clip_sum_of_local_norms.mlir",
]


def run(binary, spec):
    t0 = time.perf_counter()
    p = subprocess.run([binary, "verify", "--threads", "1", "--format", "json", spec],
                       capture_output=True, text=True, timeout=900)
    wall = time.perf_counter() - t0
    r = json.loads(p.stdout)
    v = r["violations"][0] if r.get("violations") else {}
    return wall, (r["verdict"], v.get("kind"), v.get("op"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--baseline", required=True, help="the planproof binary to compare with")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    rows = ["| spec | verdict [kind @ op] | baseline s | this build s | speed-up |",
            "|---|---|---|---|---|"]
    for s in SPECS:
        path = os.path.join(ROOT, "verify-specs", s)
        base, new = [], []
        for _ in range(a.runs):
            tb, vb = run(a.baseline, path)
            tn, vn = run(PLANPROOF, path)
            base.append(tb)
            new.append(tn)
            if vb != vn:
                sys.exit(f"{s}: the binaries disagree: {vb} vs {vn}")
        mb, mn = statistics.median(base), statistics.median(new)
        what = f"{vn[0]} [{vn[1]} @ {vn[2]}]" if vn[1] else vn[0]
        rows.append(f"| {s} | {what} | {mb:.1f} | {mn:.1f} | {mb / mn:.1f}x |")
        print(rows[-1], flush=True)
    text = "\n".join(rows) + "\n"
    if a.out:
        write_results(a.out, "python3 bench/bench_violations.py --baseline OLD --runs "
                      f"{a.runs} --out {a.out}", text)


if __name__ == "__main__":
    main()
