"""Where the layout engine places a seeded bug in a production-sized plan.

    python3 bench/bench_localization.py --per-op 12 --seed 3 \
        --out bench/results-localization.md

Plans written by `planproof plan ...,size=full` at real model sizes and published
degrees are mutated (scripts/mutate.py: a collective's kind or axes, a layout, a
constant, an operand, a dropped collective ...), and each mutant is verified by the
layout engine. At these sizes no counterexample can be computed, so a mutant is never
*violated* (unless the schedule check finds a deadlock): it must be *inconclusive*, and
the question is where the report points. A mutant counts as located when the report's
first location is the mutated line, the op that is wrong. A mutant the layout engine
still verifies is listed: at full size it cannot be cross-checked here (test/CLI/
layout.test cross-checks mutants at small sizes with the element engine).
"""
import argparse
import collections
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "scripts"))
from common import PLANPROOF, ROOT, write_results  # noqa: E402
import mutate  # noqa: E402

PLANS = [
    ("llama3-405b", "dp=64,tp=8,layers=16", "405B sizes, 16 layers, dp 64 x tp 8"),
    ("llama3-70b", "dp=16,tp=8,sp,zero=2,layers=16", "70B sizes, 16 layers, dp 16 x tp 8 + SP + ZeRO-2"),
    ("llama3-70b", "dp=8,tp=8,pp=4,microbatches=4,layers=8",
     "70B sizes, 8 layers, dp 8 x tp 8 x pp 4, 4 mb"),
    ("deepseek-v2-236b", "dp=16,tp=8,ep=16,layers=2", "DeepSeek-V2 sizes, 2 layers, dp 16 x tp 8 x ep 16"),
]


def located_lines(op, what, original, mutated):
    """The lines (1-based, in the mutant) that locate a mutant: the mutated line; for a
    dropped collective (its line deleted, its result replaced by its operand), the line
    defining that operand or the first line using it in the dropped op's place."""
    line = int(what.split(":")[0].split()[1])
    if op != "drop":
        return {line}
    old = original.split("\n")[line - 1]
    m = re.match(r'\s*(%[\w.]+) = dist\.\w+ (%[\w.]+)', old)
    src = m.group(2)
    pattern = re.compile(re.escape(src) + r'(?![\w.])')
    lines = mutated.split("\n")
    out = set()
    for k, text in enumerate(lines):
        if pattern.search(text):
            if k < line - 1 and " = " in text and pattern.search(text.split(" = ")[0]):
                out.add(k + 1)
            elif k >= line - 1:
                out.add(k + 1)
                break
    return out


def verify(path, limit, binary=PLANPROOF):
    try:
        p = subprocess.run([binary, "verify", "--engine", "layout", "--format", "json", path],
                           capture_output=True, text=True, timeout=limit)
    except subprocess.TimeoutExpired:
        return "timeout", None
    if p.returncode not in (0, 1, 3):
        return "exit %d" % p.returncode, None
    r = json.loads(p.stdout)
    first = None
    if r.get("violations"):
        first = r["violations"][0].get("location", {}).get("line")
    elif r.get("inconclusive"):
        first = r["inconclusive"][0].get("location", {}).get("line")
    return r["verdict"], first


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--per-op", type=int, default=12, help="mutants per operator and plan")
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--limit", type=float, default=120)
    ap.add_argument("--out", default="", help="write the table here (e.g. "
                    "bench/results-localization.md); by default it is only printed")
    ap.add_argument("--baseline", help="another planproof binary, run on the same mutants: "
                    "its located count is shown beside")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    work = tempfile.mkdtemp(prefix="planproof-localization-")
    rows, misses = [], []
    totals = collections.Counter()
    for model, par, title in PLANS:
        base = os.path.join(work, model + ".mlir")
        subprocess.run([PLANPROOF, "plan", "--model",
                        os.path.join(ROOT, "verify-specs", "models", model + ".json"),
                        "--parallel", par + ",size=full", "-o", base], check=True)
        text = open(base).read()
        by_op = collections.defaultdict(list)
        for op, what, mutated in mutate.sites(text):
            by_op[op].append((what, mutated))
        chosen = []
        for op in sorted(by_op):
            sites = by_op[op]
            for what, mutated in rng.sample(sites, min(args.per_op, len(sites))):
                chosen.append((op, what, mutated))
        paths = []
        for k, (op, what, mutated) in enumerate(chosen):
            path = os.path.join(work, "%s_%d.mlir" % (model, k))
            with open(path, "w") as fh:
                fh.write(mutated)
            paths.append(path)
        t0 = time.perf_counter()
        with ThreadPoolExecutor(args.jobs) as pool:
            results = list(pool.map(lambda p: verify(p, args.limit), paths))
        seconds = time.perf_counter() - t0
        if args.baseline:
            with ThreadPoolExecutor(args.jobs) as pool:
                base = list(pool.map(lambda p: verify(p, args.limit, args.baseline), paths))
            count_base = sum(1 for (op, what, mutated), (verdict, line) in zip(chosen, base)
                             if verdict in ("inconclusive", "violated")
                             and line in located_lines(op, what, text, mutated))
        count = collections.Counter()
        for (op, what, mutated), (verdict, line) in zip(chosen, results):
            want = located_lines(op, what, text, mutated)
            count["mutants"] += 1
            if verdict == "verified":
                count["verified"] += 1
                misses.append((title, what, "verified"))
            elif verdict in ("inconclusive", "violated"):
                count[verdict] += 1
                if line in want:
                    count["located"] += 1
                else:
                    misses.append((title, what, "first location line %s" % line))
            elif verdict == "exit 2":
                count["ill-typed"] += 1
            else:
                count["failed"] += 1
                misses.append((title, what, verdict))
        totals.update(count)
        decided = count["inconclusive"] + count["violated"]
        rows.append("| %s | %d | %d | %d | %d | %d | %d | %d (%.0f%%) |%s %.2f |" % (
            title, count["mutants"], count["ill-typed"], count["violated"], count["inconclusive"],
            count["verified"], count["failed"], count["located"], 100.0 * count["located"] / max(1, decided),
            (" %d (%.0f%%) |" % (count_base, 100.0 * count_base / max(1, decided))) if args.baseline else "",
            seconds / max(1, count["mutants"])))
        totals["located by the baseline"] += count_base if args.baseline else 0
        print(rows[-1], flush=True)
    text = ("Mutants of plans at real model sizes and published degrees, verified by the "
            "layout engine; *located*: the report's first location is the mutated line "
            "(share of the mutants not verified); *ill-typed*: rejected as bad input (exit 2, "
            "a located type error: most changes of a dimension, a layout or an operand). "
            + ("*baseline*: the same mutants located by the baseline binary (%s).\n\n" % args.baseline
               if args.baseline else "\n") +
            "| plan | mutants | ill-typed | violated | inconclusive | verified | failed | located |"
            + (" baseline located |" if args.baseline else "") + " s per mutant |\n"
            "|---|---|---|---|---|---|---|---|" + ("---|" if args.baseline else "") + "---|\n"
            + "\n".join(rows) + "\n")
    decided = totals["inconclusive"] + totals["violated"]
    text += ("\nIn all: %d mutants, %d located of %d not verified (%.0f%%), %d verified, "
             "%d failed (a crash, a timeout or an exit other than 0, 1, 2, 3).\n" % (
                 totals["mutants"], totals["located"], decided,
                 100.0 * totals["located"] / max(1, decided), totals["verified"], totals["failed"]))
    if args.baseline:
        text += "The baseline located %d of them (%.0f%%).\n" % (
            totals["located by the baseline"],
            100.0 * totals["located by the baseline"] / max(1, decided))
    if misses:
        text += "\nNot located, verified or failed:\n\n" + "\n".join(
            "- %s: %s -- %s" % m for m in misses) + "\n"
    if args.out:
        write_results(args.out, "python3 bench/bench_localization.py --per-op %d --seed %d%s" % (
            args.per_op, args.seed, " --baseline " + args.baseline if args.baseline else ""), text)
    print(text)


if __name__ == "__main__":
    main()
