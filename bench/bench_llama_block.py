#!/usr/bin/env python3
"""Benchmark of issue 3: a Llama-style block under DP x TP with sequence parallelism.

Usage (repository root, after `make build`):
    python3 bench/bench_llama_block.py [--runs N] [--out bench/results-llama-block.md]

For each configuration: generate the spec with scripts/gen_llama_block.py, verify it N
times, report the median wall time and engine time, the peak resident memory (one extra
run), and planproof's own counts (obligations, solver calls, expression terms).
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import PLANPROOF, ROOT, peak_rss_mib  # noqa: E402
GEN = os.path.join(ROOT, "scripts", "gen_llama_block.py")

CONFIGS = [  # (layers, batch, seq, dp, tp, sp)
    (1, 2, 2, 2, 2, True),
    (2, 2, 2, 2, 2, True),
    (4, 2, 2, 2, 2, True),
    (2, 2, 4, 2, 2, True),
    (2, 2, 2, 1, 2, True),
    (2, 2, 2, 2, 2, False),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    lines = [f"machine: {platform.machine()}, {os.cpu_count()} cores, {platform.platform()}",
             f"runs per configuration: {a.runs} (medians)", "",
             "| layers | batch x seq | mesh | SP | verdict | ranks | obligations | solver | "
             "expression terms | engine s | wall s | peak MiB |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as tmp:
        for L, B, S, dp, tp, sp in CONFIGS:
            path = os.path.join(tmp, f"block_{L}_{B}_{S}_{dp}_{tp}_{sp}.mlir")
            subprocess.run([sys.executable, GEN, path, "--layers", str(L), "--batch", str(B),
                            "--seq", str(S), "--dp", str(dp), "--tp", str(tp)] +
                           (["--sp"] if sp else []), check=True)
            walls, engines = [], []
            for _ in range(a.runs):
                start = time.perf_counter()
                out = subprocess.run([PLANPROOF, "verify", "--format", "json", path],
                                     capture_output=True, text=True).stdout
                walls.append(time.perf_counter() - start)
                report = json.loads(out)
                engines.append(report["stats"]["milliseconds"] / 1000)
            st = report["stats"]
            mesh = f"dp{dp} x tp{tp}" if dp > 1 else f"tp{tp}"
            lines.append(f"| {L} | {B} x {S} | {mesh} | {'yes' if sp else 'no'} | {report['verdict']} | "
                         f"{st['ranks']} | {st['obligations']} | {st['solver_queries']} | "
                         f"{st['expression_terms']} | {statistics.median(engines):.2f} | "
                         f"{statistics.median(walls):.2f} | {peak_rss_mib(path):.0f} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if a.out:
        with open(a.out, "w") as fh:
            fh.write(text)


if __name__ == "__main__":
    main()
