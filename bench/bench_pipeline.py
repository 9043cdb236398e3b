#!/usr/bin/env python3
"""Verification time and peak memory of pipelined plans (issue 6) as microbatches,
stages, data parallelism and model chunks grow: the MLP pipelines of
scripts/gen_pipeline_specs.py (one 4x4 layer per stage and chunk, microbatches of 2 rows).

    python3 bench/bench_pipeline.py --runs 3 --out bench/results-pipeline.md

Columns: the verdict, the element engine's own time (stats.milliseconds), the process's
wall time and peak resident memory; medians over --runs runs. Each run is limited to
--limit seconds; a run past it is reported as such.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import PLANPROOF, ROOT, repeat, summarize, verify_timed, write_results  # noqa: E402

GEN = os.path.join(ROOT, "scripts", "gen_pipeline_specs.py")

# (label, stages, microbatches, dp, schedule, chunks)
SWEEPS = [
    ("microbatches", 2, 2, 1, "1f1b", 1), ("microbatches", 2, 4, 1, "1f1b", 1),
    ("microbatches", 2, 8, 1, "1f1b", 1), ("microbatches", 2, 16, 1, "1f1b", 1),
    ("stages", 2, 4, 1, "1f1b", 1), ("stages", 4, 4, 1, "1f1b", 1), ("stages", 6, 4, 1, "1f1b", 1),
    ("stages", 8, 4, 1, "1f1b", 1),
    ("dp", 2, 4, 1, "1f1b", 1), ("dp", 2, 4, 2, "1f1b", 1), ("dp", 2, 4, 4, "1f1b", 1),
    ("dp", 2, 4, 8, "1f1b", 1),
    ("chunks", 2, 4, 1, "interleaved", 1), ("chunks", 2, 4, 1, "interleaved", 2),
    ("chunks", 2, 4, 1, "interleaved", 3),
    ("schedule", 4, 4, 1, "gpipe", 1), ("schedule", 4, 4, 1, "1f1b", 1),
    ("schedule", 4, 4, 1, "interleaved", 1),
]


def run(spec, limit):
    r = verify_timed(spec, limit)
    if r is None:
        return None
    p, wall, peak = r
    j = json.loads(p.stdout)
    return j["verdict"], j["stats"]["milliseconds"], wall, peak, j["stats"]["ranks"], j["stats"]["obligations"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--limit", type=int, default=300)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    rows = ["| axis | stages | microbatches | dp | schedule | chunks | layers | ranks | verdict | engine s | wall s | peak MiB |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    tmp = tempfile.mkdtemp()
    for label, S, M, dp, kind, v in SWEEPS:
        spec = os.path.join(tmp, f"p_{S}_{M}_{dp}_{kind}_{v}.mlir")
        subprocess.run([sys.executable, GEN, "--one", spec, str(S), str(M), str(dp), kind, str(v)], check=True)
        results = repeat(lambda: run(spec, args.limit), args.runs)
        if not results:
            rows.append(f"| {label} | {S} | {M} | {dp} | {kind} | {v} | {S * v} | {S * dp} | past {args.limit} s | | | |")
        else:
            verdict, _, _, _, ranks, _ = results[-1]
            eng, wall, peak = summarize(results)
            rows.append(f"| {label} | {S} | {M} | {dp} | {kind} | {v} | {S * v} | {ranks} | {verdict} | "
                        f"{eng:.2f} | {wall:.2f} | {peak:.0f} |")
        print(rows[-1], flush=True)
    text = "\n".join(rows) + "\n"
    if args.out:
        write_results(args.out, f"python3 bench/bench_pipeline.py --runs {args.runs}", text)


if __name__ == "__main__":
    main()
