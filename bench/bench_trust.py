#!/usr/bin/env python3
"""Bounded runs on hostile inputs (issue 13): how long verification and localization
take along a chain of N ops, with and without a wrong operand near its start; how the
JSON import grows with the number of outputs; how fast absurd inputs are refused.

usage: python3 bench/bench_trust.py [--runs R] [--out bench/results-trust-inputs.md]
Medians of R runs (default 3); wall seconds and peak memory from /usr/bin/time.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
from common import PLANPROOF, ROOT, write_results  # noqa: E402

sys.path.insert(0, os.path.join(ROOT, "test", "CLI", "Inputs", "trust"))
from chain import chain_spec  # noqa: E402



def outputs_spec(n):
    lay = {"dims": ["tp"]}
    return {"planproof": 1,
            "reference": {"inputs": [{"name": f"x{i}", "shape": [2]} for i in range(n)],
                          "ops": [{"result": f"y{i}", "op": "scale", "operands": [f"x{i}"],
                                   "attrs": {"factor": 2}} for i in range(n)],
                          "outputs": [f"y{i}" for i in range(n)]},
            "plan": {"mesh": {"name": "mesh", "axes": [{"name": "tp", "size": 2}]},
                     "inputs": [{"name": f"x{i}", "value": f"x{i}", "layout": lay} for i in range(n)],
                     "ops": [{"result": f"y{i}", "op": "scale", "operands": [f"x{i}"],
                              "attrs": {"factor": 2}} for i in range(n)],
                     "outputs": [{"name": f"y{i}", "value": f"y{i}", "layout": lay} for i in range(n)]}}


def timed(path, runs, extra=()):
    walls, peaks, verdict = [], [], ""
    for _ in range(runs):
        t0 = time.perf_counter()
        p = subprocess.run(["/usr/bin/time", "-f", "%M", PLANPROOF, "verify", path, "--format", "json",
                            *extra], capture_output=True, text=True)
        walls.append(time.perf_counter() - t0)
        peaks.append(int(p.stderr.strip().splitlines()[-1]) / 1024)
        try:
            verdict = json.loads(p.stdout)["verdict"]
        except (ValueError, KeyError):
            verdict = f"exit {p.returncode}"
    return verdict, statistics.median(walls), max(peaks)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results-trust-inputs.md"))
    a = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        def write(name, spec):
            path = os.path.join(tmp, name)
            with open(path, "w") as f:
                json.dump(spec, f)
            return path
        for n in (1000, 10000, 100000):
            for wrong, what in ((-1, "correct"), (1, "wrong operand at op 1")):
                v, wall, peak = timed(write(f"chain{n}_{wrong}.json", chain_spec(n, wrong)), a.runs)
                rows.append(f"| chain of {n} adds, {what} | {v} | {wall:.2f} | {peak:.0f} |")
        for n in (1000, 10000, 30000):
            v, wall, peak = timed(write(f"outputs{n}.json", outputs_spec(n)), a.runs)
            rows.append(f"| {n} outputs (JSON import) | {v} | {wall:.2f} | {peak:.0f} |")
        nested = os.path.join(tmp, "nested.json")
        with open(nested, "w") as f:
            f.write('{"planproof": 1, "description": ' + "[" * 100000 + "]" * 100000 + "}")
        v, wall, peak = timed(nested, a.runs)
        rows.append(f"| 10^5 nested JSON arrays | {v} | {wall:.2f} | {peak:.0f} |")
    v, wall, peak = timed("/dev/zero", 1)
    rows.append(f"| /dev/zero | {v} | {wall:.2f} | {peak:.0f} |")
    table = ("| input | answer | wall s (median) | peak MiB |\n|---|---|---|---|\n" +
             "\n".join(rows) + "\n")
    print(table)
    write_results(a.out, "python3 bench/bench_trust.py --runs " + str(a.runs), table)


if __name__ == "__main__":
    main()
