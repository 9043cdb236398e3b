#!/usr/bin/env python3
"""The catalogue's production-sized seeded bugs (verify-specs/scale/*.plan) at their own
sizes and shrunk: the layout engine's verdict and first place at production degrees,
then `planproof shrink` -- the smallest configuration where the element engine shows a
counterexample that running it confirms, the violation's kind and op, how many
configurations were tried, wall time and peak memory of the whole search (one run each:
the search is deterministic, its time is not).

    python3 bench/bench_shrink.py --out bench/results-shrink.md
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from common import PLANPROOF, ROOT, write_results  # noqa: E402


def timed(args, limit=900):
    t0 = time.perf_counter()
    p = subprocess.run(["/usr/bin/time", "-f", "%M", PLANPROOF] + args, capture_output=True,
                       text=True, timeout=limit)
    wall = time.perf_counter() - t0
    mib = int(p.stderr.strip().splitlines()[-1]) / 1024
    try:
        j = json.loads(p.stdout)
    except json.JSONDecodeError:
        j = {}
    return p.returncode, j, wall, mib


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    rows = ["| recipe | production degrees | layout engine at production size | shrunk to | "
            "violation | tried | shrink wall s | peak MiB |",
            "|---|---|---|---|---|---|---|---|"]
    for path in sorted(glob.glob(os.path.join(ROOT, "verify-specs", "scale", "*.plan"))):
        recipe = json.load(open(path))
        if not recipe.get("edits"):
            continue
        name = os.path.basename(path)[:-len(".plan")]
        _, big, bwall, _ = timed(["verify", "--engine", "layout", "--format", "json", path])
        places = big.get("inconclusive", []) + big.get("violations", [])
        first = places[0].get("location", {}).get("line", "?") if places else "-"
        prod = f"{big.get('verdict', '?')} (line {first}), {bwall:.1f} s"
        rc, j, wall, mib = timed(["shrink", "--format", "json", path])
        if j.get("reproduced"):
            v = j["report"]["violations"][0]
            ranks = j["report"].get("stats", {}).get("ranks", "")
            found = f"{j['shrunk']['parallel']}" + (f" ({ranks} ranks)" if ranks else "")
            if j.get("schedule"):
                what = f"{v['kind']} at `{v.get('op', '')}` (the exact schedule check's wait cycle)"
            else:
                what = f"{v['kind']} at `{v.get('op', '')}`, {j['counterexamples_confirmed']} of " \
                       f"{j['counterexamples']} counterexamples confirmed, replay {j['replay']}"
        else:
            found, what = "not reproduced", (j.get("tried") or [{}])[-1].get("outcome", f"exit {rc}")
        rows.append(f"| {name} | {recipe['parallel']} | {prod} | {found} | {what} | "
                    f"{len(j.get('tried', []))} | {wall:.1f} | {mib:.0f} |")
        print(rows[-1], flush=True)
    text = "\n".join(rows) + "\n"
    if a.out:
        write_results(a.out, "python3 bench/bench_shrink.py --out bench/results-shrink.md", text)
    print(text)


if __name__ == "__main__":
    main()
