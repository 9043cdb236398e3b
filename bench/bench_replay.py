#!/usr/bin/env python3
"""CPU throughput of the numeric replay (issue 5): the parametric TP=8 MLP of
verify-specs/json at growing sizes, fp32 and bf16. Reports the median wall time over
--runs runs, the scalar operations of one replay (three reference runs for the error
model plus the plan on every rank) and the throughput.

    python3 bench/bench_replay.py --runs 3 --out bench/results-replay.md
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import PLANPROOF, ROOT  # noqa: E402

SPEC = os.path.join(ROOT, "verify-specs", "json", "mlp_tp8_parametric.json")
SIZES = [(64, 256, 1024), (128, 512, 2048), (256, 1024, 2048)]


def work(B, H, F, tp=8):
    # matmuls dominate: forward 2 * B*H*F, backward 4 * B*H*F; the reference runs four
    # times (fp64, storage precision, reversed and pairwise sums), the plan once (its ranks together
    # do the reference's work).
    return 5 * 6 * B * H * F


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    rows = ["| B x H x F | dtype | verdict | median wall s | scalar ops | Gops/s |",
            "|---|---|---|---|---|---|"]
    for B, H, F in SIZES:
        for dtype in ("fp32", "bf16"):
            times, verdict = [], "?"
            for _ in range(args.runs):
                t0 = time.perf_counter()
                p = subprocess.run([PLANPROOF, "replay", SPEC, "--dtype", dtype,
                                    "--shape", f"B={B},H={H},F={F}"],
                                   capture_output=True, text=True)
                times.append(time.perf_counter() - t0)
                verdict = {0: "within tolerance", 1: "diverged"}.get(p.returncode, f"exit {p.returncode}")
            med = statistics.median(times)
            w = work(B, H, F)
            rows.append(f"| {B} x {H} x {F} | {dtype} | {verdict} | {med:.2f} | {w:.3g} | {w / med / 1e9:.2f} |")
            print(rows[-1], flush=True)
    text = "\n".join(rows) + "\n"
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(f"Command: python3 bench/bench_replay.py --runs {args.runs}\n\n" + text)


if __name__ == "__main__":
    main()
