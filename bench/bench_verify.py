#!/usr/bin/env python3
"""Times `planproof verify` on the bundled specs and on a tensor-parallel size sweep.

Usage (from the repository root, after `make build`):
    python3 bench/bench_verify.py [--runs N] [--out bench/results.md]

For each spec: the median over N runs of the engine time reported by planproof itself
(stats.milliseconds: symbolic execution + obligations + localization, without process
start-up and parsing) and of the whole process wall time. Machines are shared and
noisy: read medians and ratios, not single numbers.
"""
import argparse
import glob
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
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import gen_mlp_specs  # noqa: E402


def run_once(path):
    """One run in a child process; returns (report, wall ms)."""
    start = time.perf_counter()
    out = subprocess.run([PLANPROOF, "verify", "--format", "json", path],
                         capture_output=True, text=True).stdout
    return json.loads(out), (time.perf_counter() - start) * 1000


def measure(path, runs):
    engine, wall = [], []
    report = None
    for _ in range(runs):
        report, ms = run_once(path)
        engine.append(report["stats"]["milliseconds"])
        wall.append(ms)
    return (statistics.median(engine), statistics.median(wall), report["verdict"],
            report["stats"], peak_rss_mib(path))


def sweep_specs(tmp):
    """The TP MLP at growing tensor-parallel sizes, two hidden features per shard."""
    specs = []
    for tp in (2, 4, 8, 16):
        B, H, F = 2, 4, 2 * tp
        text = (gen_mlp_specs.comment(f"TP={tp} sweep") +
                'module attributes {planproof.expect = {verdict = "verified"}} {\n' +
                gen_mlp_specs.reference(B, H, F, True) + "\n" +
                gen_mlp_specs.tp_plan(B, H, F, tp) + "}\n")
        path = os.path.join(tmp, f"mlp_tp{tp}_sweep.mlir")
        with open(path, "w") as fh:
            fh.write(text)
        specs.append(path)
    return specs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=11)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    lines = [f"machine: {platform.machine()}, {os.cpu_count()} cores, {platform.platform()}",
             f"runs per spec: {args.runs} (medians)", "",
             "| spec | verdict | ranks | obligations | solver | expression terms | engine ms | process ms | peak MiB |",
             "|---|---|---|---|---|---|---|---|---|"]
    specs = sorted(glob.glob(os.path.join(ROOT, "verify-specs", "**", "*.mlir"), recursive=True) +
                   glob.glob(os.path.join(ROOT, "verify-specs", "**", "*.json"), recursive=True))
    with tempfile.TemporaryDirectory() as tmp:
        for path in specs + sweep_specs(tmp):
            eng, wall, verdict, st, rss = measure(path, args.runs)
            name = os.path.relpath(path, ROOT) if path.startswith(ROOT) else os.path.basename(path)
            lines.append(f"| {name} | {verdict} | {st['ranks']} | {st['obligations']} | "
                         f"{st['solver_queries']} | {st['expression_terms']} | {eng:.1f} | "
                         f"{wall:.1f} | {rss:.0f} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text)


if __name__ == "__main__":
    main()
