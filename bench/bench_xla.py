"""XLA captures (test/xla/cases): time of `planproof import-xla` and of `planproof verify`
on the spec it writes, medians over runs, with the spec's size.

    python3 bench/bench_xla.py --runs 3 --out bench/results-xla.md
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

CASES = [
    ("mlp_dp2_tp4", []),
    ("sp_mlp_dp2_tp4", []),
    ("llama_block_dp2_tp4", []),
    ("shard_map_mlp_tp4", ["--reference"]),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    rows = []
    folder = os.path.join(ROOT, "test", "xla", "cases")
    tmp = tempfile.mkdtemp()
    for name, extra in CASES:
        cmd = [PLANPROOF, "import-xla", os.path.join(folder, name + ".before.hlo"),
               os.path.join(folder, name + ".after.hlo"), "--mesh", "dp=2,tp=4",
               "-o", os.path.join(tmp, name + ".json")]
        if extra:
            cmd += ["--reference", os.path.join(folder, name + ".reference.hlo")]
        imports, verifies, engine = [], [], []
        verdict = ""
        for _ in range(a.runs):
            t0 = time.perf_counter()
            subprocess.run(cmd, check=True, capture_output=True)
            imports.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            p = subprocess.run([PLANPROOF, "verify", "--format", "json",
                                os.path.join(tmp, name + ".json")], capture_output=True, text=True)
            verifies.append(time.perf_counter() - t0)
            r = json.loads(p.stdout)
            verdict = r["verdict"]
            engine.append(r["stats"]["milliseconds"] / 1000)
        spec = json.load(open(os.path.join(tmp, name + ".json")))
        hlo = sum(1 for line in open(os.path.join(folder, name + ".after.hlo")) if " = " in line)
        rows.append(f"| {name} | {hlo} | {len(spec['reference']['ops'])} | {len(spec['plan']['ops'])} | "
                    f"{verdict} | {statistics.median(imports):.3f} | {statistics.median(engine):.2f} | "
                    f"{statistics.median(verifies):.2f} |")
    text = ("| case | HLO instructions after partitioning | reference ops | plan ops | verdict | "
            "import-xla s | engine s | verify wall s |\n|---|---|---|---|---|---|---|---|\n"
            + "\n".join(rows) + "\n")
    if a.out:
        write_results(a.out, "python3 bench/bench_xla.py --runs %d --out %s" % (a.runs, a.out), text)
    print(text)


if __name__ == "__main__":
    main()
