#!/usr/bin/env python3
"""The planner's loop of examples/planner/planner.py through the Python binding (issue
17): a small auto-parallelizer enumerating the dp x tp (x SP) layouts of a Llama3-8B
block (reduced sizes) on N ranks and, per layout, candidates one all-reduce apart
(dropped, narrowed, averaged). A narrowed or averaged all-reduce is an edit of the
loaded plan (Session.edit, then undone), a dropped one is loaded against its layout's
reference (Session.load_plan); each is decided by the layout engine, then the element
engine where it does not prove it; side by side, each candidate in a fresh session (the
whole spec parsed, differentiated and run again). Per-candidate medians, kept
(verified) and rejected (violated) apart, and the share the reuse saves.

    python3 bench/bench_planner_python.py --out bench/results-planner-python.md
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
from common import ROOT, write_results  # noqa: E402

EXAMPLE = os.path.join(ROOT, "examples", "planner", "planner.py")
RUNS = [(2, 6), (4, 3), (8, 2)]  # (ranks, at most this many candidates per layout; 0: all)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    command = "python3 bench/bench_planner_python.py"
    out = ["Per-candidate wall time (edit or load_plan, then verify, engine \"auto\"), median over the "
           "candidates, in one process; \"fresh\": the same candidate in a new Session.", "",
           "| ranks | layouts | candidates | kept / rejected | all: reuse / fresh ms | saved "
           "| kept: reuse / fresh ms | rejected: reuse / fresh ms |",
           "|---|---|---|---|---|---|---|---|"]
    for ranks, moves in RUNS:
        path = os.path.join(tempfile.mkdtemp(prefix="planproof-planner-py-"), "s.json")
        cmd = [sys.executable, EXAMPLE, "--ranks", str(ranks), "--fresh", "--quiet",
               "--summary-json", path] + (["--max-moves", str(moves)] if moves else [])
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            out.append(f"| {ranks} | failed: {p.stderr.strip()[:120]} | | | | | | |")
            continue
        s = json.load(open(path))
        k, r = s.get("kept", {}), s.get("rejected", {})

        def pair(d):
            return (f"{d['median_ms']:.1f} / {d['fresh_median_ms']:.1f}"
                    if d and "fresh_median_ms" in d else "-")
        out.append(f"| {ranks} | {s['layouts']} | {s['candidates']}"
                   f"{'' if not moves else f' (<= {moves} a layout)'} | "
                   f"{k.get('count', 0)} / {r.get('count', 0)} | "
                   f"{s['median_ms']:.1f} / {s['fresh_median_ms']:.1f} | "
                   f"{100 * (1 - s['median_ms'] / s['fresh_median_ms']):.0f}% | {pair(k)} | {pair(r)} |")
    text = "\n".join(out) + "\n"
    if a.out:
        write_results(a.out, command, text)
    print(text)


if __name__ == "__main__":
    main()
