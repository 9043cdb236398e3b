#!/usr/bin/env python3
"""The layout engine at production degrees and sizes (issue 16).

Plans written by `planproof plan --parallel ...,size=full` (the models' own hidden
sizes, heads, FFN widths, vocabularies and layer counts; sequence 4096, one sample per
data rank and microbatch; 2048 for Llama3-405B's pipelined configuration; capacity
factor 1 for DeepSeek-V3), verified by `planproof verify --engine layout`: wall time,
peak memory and verdict, medians over runs, with TrainVerify's published time where the
configuration is one of its six. Then cost against layers, dp, tp, ep, pp and
microbatches at full size, and
the two engines side by side on the reduced plans both can decide.

    python3 bench/bench_layout.py --runs 3 --out bench/results-layout.md
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

sys.path.insert(0, os.path.dirname(__file__))
from common import PLANPROOF, ROOT  # noqa: E402

MODELS = os.path.join(ROOT, "verify-specs", "models")

# TrainVerify's six configurations (dp x tp x pp [x ep], microbatches) and its
# published verification times on a 32-core, 1 TB machine.
TRAINVERIFY = [
    ("llama3-8b", "dp=512", "512 x 1 x 1", "685 s"),
    ("llama3-70b", "dp=16,tp=8,pp=4,microbatches=32,layers=80", "16 x 8 x 4, 32 mb", "2.37 h"),
    ("deepseek-moe-16b", "dp=16,tp=4,pp=2,ep=16", "16 x 4 x 2 x 16", "22.5 min"),
    ("deepseek-v2-236b", "dp=16,tp=8,pp=4,ep=16", "16 x 8 x 4 x 16", "2.36 h"),
    # Capacity factor 1: without drops each expert's slots would hold all its group's
    # tokens, [256 experts, 2^21 slots, 7168] = 2^41.8 elements.
    ("deepseek-v3-671b", "dp=32,tp=8,pp=8,ep=16,cf=1", "32 x 8 x 8 x 16, cf 1", "8.99 h"),
    # Sequence 2048: at 4096, 1024 samples' attention scores pass 2^40 elements.
    ("llama3-405b", "dp=64,tp=8,pp=16,microbatches=16,seq=2048", "64 x 8 x 16, 16 mb",
     "8.0 h"),
]
# The same models and data/tensor degrees without the pipeline, for comparison.
WITHOUT_PP = [
    ("llama3-70b", "dp=16,tp=8", "16 x 8 (no pp, 1 mb)"),
    ("llama3-70b", "dp=16,tp=8,sp", "16 x 8 + SP"),
    ("llama3-405b", "dp=64,tp=8", "64 x 8 (no pp, 1 mb)"),
    ("llama3-405b", "dp=64,tp=8,sp,zero=2", "64 x 8 + SP + ZeRO-2"),
]


def plan(model, parallel, path):
    p = subprocess.run([PLANPROOF, "plan", "--model", os.path.join(MODELS, model + ".json"),
                        "--parallel", parallel, "-o", path], capture_output=True, text=True)
    return p.returncode == 0, (p.stderr or p.stdout).strip().splitlines()[-1:] or [""]


def verify(path, engine, runs, limit=600):
    rows = []
    for _ in range(runs):
        t0 = time.perf_counter()
        try:
            p = subprocess.run(["/usr/bin/time", "-f", "%M", PLANPROOF, "verify", "--engine", engine,
                                "--format", "json", path], capture_output=True, text=True,
                               timeout=limit)
        except subprocess.TimeoutExpired:
            return {"verdict": f"> {limit} s", "wall": limit, "mib": 0, "why": ""}
        wall = time.perf_counter() - t0
        try:
            j = json.loads(p.stdout)
        except json.JSONDecodeError:
            j = {"verdict": f"exit {p.returncode}"}
        why = ""
        for r in j.get("inconclusive", [])[:1]:
            why = r.get("reason", "")[:110]
        rows.append((wall, int(p.stderr.strip().splitlines()[-1]) / 1024, j.get("verdict", "?"),
                     why, j.get("stats", {}).get("plan_ops", ""), j.get("stats", {})))
    return {"wall": statistics.median(r[0] for r in rows), "mib": max(r[1] for r in rows),
            "verdict": rows[0][2], "why": rows[0][3], "ops": rows[0][4], "stats": rows[0][5]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="planproof-layout-")
    path = os.path.join(tmp, "plan.mlir")
    out = ["Command: python3 bench/bench_layout.py --runs %d" % a.runs, "",
           "Machine: %s (%d cores), %s" % (platform.node() or "?", os.cpu_count() or 0,
                                         time.strftime("%Y-%m-%d")), ""]

    out += ["## TrainVerify's configurations, at the models' real sizes", "",
            "| model | degrees | verdict | wall s | peak MiB | plan text MiB | TrainVerify | why not verified |",
            "|---|---|---|---|---|---|---|---|"]
    for model, par, degrees, theirs in TRAINVERIFY:
        ok, msg = plan(model, par + ",size=full", path)
        if not ok:
            out.append(f"| {model} | {degrees} | not generated | | | | {theirs} | {msg[0][:110]} |")
            continue
        r = verify(path, "layout", a.runs)
        size = os.path.getsize(path) / 2**20
        out.append(f"| {model} | {degrees} | {r['verdict']} | {r['wall']:.2f} | {r['mib']:.0f} | "
                   f"{size:.1f} | {theirs} | {r['why']} |")
    out += ["", "The same models and data/tensor degrees without pipeline stages:", "",
            "| model | degrees | verdict | wall s | peak MiB | plan text MiB |", "|---|---|---|---|---|---|"]
    for model, par, degrees in WITHOUT_PP:
        ok, msg = plan(model, par + ",size=full", path)
        r = verify(path, "layout", a.runs) if ok else {"verdict": msg[0], "wall": 0, "mib": 0}
        size = os.path.getsize(path) / 2**20 if ok else 0
        out.append(f"| {model} | {degrees} | {r['verdict']} | {r['wall']:.2f} | {r['mib']:.0f} | {size:.1f} |")

    out += ["", "## Cost at full size against layers, dp and tp (Llama3-405B sizes)", "",
            "| parallel | verdict | wall s | peak MiB |", "|---|---|---|---|"]
    for par in ["dp=8,tp=8,layers=8", "dp=8,tp=8,layers=32", "dp=8,tp=8,layers=126",
                "dp=1,tp=8,layers=32", "dp=64,tp=8,layers=32", "dp=256,tp=1,layers=32",
                "dp=8,tp=1,layers=32", "dp=8,tp=2,layers=32", "dp=8,tp=4,layers=32"]:
        ok, msg = plan("llama3-405b", par + ",size=full", path)
        r = verify(path, "layout", a.runs) if ok else {"verdict": msg[0], "wall": 0, "mib": 0}
        out.append(f"| {par} | {r['verdict']} | {r['wall']:.2f} | {r['mib']:.0f} |")

    out += ["", "## Cost at full size against expert parallelism (DeepSeek-V2 sizes, 160 "
            "experts, 8 layers, dp 16 x tp 8)", "",
            "| parallel | verdict | wall s | peak MiB | plan ops |", "|---|---|---|---|---|"]
    for ep in (1, 2, 4, 8, 16):
        par = "dp=16,tp=8,ep=%d,layers=8" % ep
        ok, msg = plan("deepseek-v2-236b", par + ",size=full", path)
        r = verify(path, "layout", a.runs) if ok else {"verdict": msg[0], "wall": 0, "mib": 0, "ops": ""}
        out.append(f"| {par} | {r['verdict']} | {r['wall']:.2f} | {r['mib']:.0f} | {r['ops']} |")

    out += ["", "## Cost at full size against pipeline stages and microbatches (Llama3-70B sizes, "
            "16 layers, dp 8 x tp 8, 1F1B)", "",
            "| parallel | verdict | wall s | peak MiB | plan ops | plan text MiB |",
            "|---|---|---|---|---|---|"]
    curve = ["pp=%d,microbatches=8" % n for n in (1, 2, 4, 8)]
    curve += ["pp=4,microbatches=%d" % n for n in (1, 2, 4, 16, 32)]
    for par in curve:
        full = "dp=8,tp=8,layers=16," + par + ",size=full"
        ok, msg = plan("llama3-70b", full, path)
        r = verify(path, "layout", a.runs) if ok else {"verdict": msg[0], "wall": 0, "mib": 0, "ops": ""}
        size = os.path.getsize(path) / 2**20 if ok else 0
        out.append(f"| {par} | {r['verdict']} | {r['wall']:.2f} | {r['mib']:.0f} | {r['ops']} | {size:.1f} |")

    out += ["", "## Cost at full size against context parallelism (Llama3-405B sizes, dp 8 x tp 8, "
            "sequence 4096 in zigzag chunks)", "",
            "| parallel | verdict | wall s | peak MiB | plan ops |", "|---|---|---|---|---|"]
    curve = ["cp=%d,layers=32" % n for n in (1, 2, 4, 8, 16)]
    curve += ["cp=4,layers=%d" % n for n in (8, 126)]
    for par in curve:
        ok, msg = plan("llama3-405b", "dp=8,tp=8," + par + ",size=full", path)
        r = verify(path, "layout", a.runs) if ok else {"verdict": msg[0], "wall": 0, "mib": 0, "ops": ""}
        out.append(f"| {par} | {r['verdict']} | {r['wall']:.2f} | {r['mib']:.0f} | {r['ops']} |")

    out += ["", "## Both engines on reduced plans (Llama3-8B, `planproof plan` default sizes)", "",
            "| parallel | element verdict | element wall s | layout verdict | layout wall s | ratio |",
            "|---|---|---|---|---|---|"]
    for par in ["dp=2,tp=2,sp,layers=1", "dp=2,tp=2,sp,layers=2", "dp=2,tp=2,sp,layers=4",
                "dp=4,tp=2,layers=2", "dp=2,tp=4,layers=2", "dp=2,cp=2,tp=2,layers=2"]:
        ok, msg = plan("llama3-8b", par, path)
        if not ok:
            continue
        e = verify(path, "element", a.runs)
        l = verify(path, "layout", a.runs)
        out.append(f"| {par} | {e['verdict']} | {e['wall']:.2f} | {l['verdict']} | {l['wall']:.3f} | "
                   f"{e['wall'] / max(l['wall'], 1e-9):.0f}x |")
    text = "\n".join(out) + "\n"
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
    print(text)


if __name__ == "__main__":
    main()
