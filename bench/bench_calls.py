#!/usr/bin/env python3
"""Plans with each layer stated once (`compact`, docs/calls.md) against the same plans
written out, side by side in one run: text size, layout-engine wall time (median) and
peak memory, verdict. The layout engine reads the calls expanded, so the saving is the
text and its parsing, not the proof.

    python3 bench/bench_calls.py --runs 3 --out bench/results-calls.md
"""
import argparse
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
from bench_layout import plan, verify  # noqa: E402
from common import write_results  # noqa: E402

CONFIGS = [
    ("llama3-405b", "dp=64,tp=8", "Llama3-405B, dp 64 x tp 8"),
    ("llama3-70b", "dp=16,tp=8,pp=4,microbatches=32,layers=80", "Llama3-70B, 16 x 8 x 4, 32 mb"),
    ("llama3-405b", "dp=64,tp=8,pp=16,microbatches=16,seq=2048", "Llama3-405B, 64 x 8 x 16, 16 mb"),
    ("deepseek-v2-236b", "dp=16,tp=8,pp=4,ep=16", "DeepSeek-V2-236B, 16 x 8 x 4 x 16"),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="planproof-calls-")
    path = os.path.join(tmp, "plan.mlir")
    out = ["Plans by `planproof plan --parallel ...,size=full` written out and with "
           "`compact` (each distinct layer a private function, called per layer and "
           "microbatch), verified by `planproof verify --engine layout`; medians of %d runs, "
           "peak memory the largest." % a.runs, "",
           "| configuration | form | verdict | plan text MiB | wall s | peak MiB |",
           "|---|---|---|---|---|---|"]
    for model, par, label in CONFIGS:
        for form in ("written out", "compact"):
            full = par + ",size=full" + (",compact" if form == "compact" else "")
            ok, msg = plan(model, full, path)
            if not ok:
                out.append(f"| {label} | {form} | not generated: {msg[0][:80]} | | | |")
                continue
            size = os.path.getsize(path) / 2**20
            r = verify(path, "layout", a.runs)
            out.append(f"| {label} | {form} | {r['verdict']} | {size:.1f} | {r['wall']:.2f} | "
                       f"{r['mib']:.0f} |")
    text = "\n".join(out) + "\n"
    if a.out:
        write_results(a.out, "python3 bench/bench_calls.py --runs %d" % a.runs, text)
    print(text)


if __name__ == "__main__":
    main()
