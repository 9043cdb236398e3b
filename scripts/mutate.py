#!/usr/bin/env python3
"""Mutation testing of planproof over the catalogue's correct specs (`make mutate`).

Every spec in the catalogue that expects "verified" is mutated in its plan, one small
change at a time, the way plans go wrong in practice: a collective's reduction kind,
the mesh axes it reduces over, a layout, a constant, an operand, an offset or
dimension, a pipeline stage, an RNG attribute, a collective dropped. Each mutant is
verified:

  invalid       planproof rejects it as bad input (exit 2): not a plan
  killed        violated (exit 1)
  inconclusive  exit 3
  survived      verified (exit 0): then it is *replayed* numerically (the reference
                and the mutant on random inputs). A survivor whose replay diverges is a
                FALSE PROOF -- the verifier said "verified" for a wrong plan -- and is
                the one number that must stay 0. Survivors within tolerance are
                equivalent mutants (a swap of a commutative operand, an unused value).

usage: mutate.py PLANPROOF SPEC_DIR [--per-op K] [--seed S] [--jobs J]
                 [--time-limit SECONDS] [--out REPORT.md] [--keep DIR] [--only SUBSTR]
                 [--engine element|layout|auto]
Exit status: 1 when a survivor diverges (a false proof), 0 otherwise.
"""
import argparse
import collections
import concurrent.futures
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time

FLOAT = r"-?\d+\.\d*(?:[eE][-+]?\d+)?|-?\d+[eE][-+]?\d+"


def plan_start(lines):
    """Index of the first line of the plan (and resume) functions: mutants only touch
    the plan, never the reference."""
    for i, line in enumerate(lines):
        if "dist.mesh @" in line:
            return i
    return len(lines)


def mlir_float(x):
    """x as an MLIR float literal: its shortest repr, with a '.' in the mantissa (MLIR
    reads "5e-06" as an integer followed by junk)."""
    s = repr(float(x))
    mantissa, e, exponent = s.partition("e")
    if e and "." not in mantissa:
        s = mantissa + ".0e" + exponent
    return s


def mesh_axes(text):
    m = re.search(r'dist\.mesh @\w+ axes = \[([^\]]*)\]', text)
    return re.findall(r'"([^"]+)"', m.group(1)) if m else []


def sites(text):
    """Every mutation this spec offers: (operator, description, mutated text)."""
    lines = text.split("\n")
    start = plan_start(lines)
    axes = mesh_axes(text)
    out = []

    def edit(i, new_line, op, what):
        mutated = lines[:i] + [new_line] + lines[i + 1:]
        out.append((op, f"line {i + 1}: {what}", "\n".join(mutated)))

    defined = []  # plan SSA values, in order
    for i in range(start, len(lines)):
        line = lines[i]
        code = line.split("//")[0]
        if not code.strip():
            continue
        # kind: the reduction of a collective.
        for m in re.finditer(r'"(sum|avg|max)"', code):
            if "dist.all_reduce" in code or "dist.reduce_scatter" in code:
                for k in ("sum", "avg", "max"):
                    if k != m.group(1):
                        edit(i, line[:m.start()] + f'"{k}"' + line[m.end():], "kind",
                             f"reduction {m.group(1)} -> {k}")
        # axis: the mesh axes a collective runs over.
        m = re.search(r'over \[([^\]]*)\]', code)
        if m:
            used = re.findall(r'"([^"]+)"', m.group(1))
            for j, a in enumerate(used):
                for b in axes:
                    if b not in used:
                        new = used[:j] + [b] + used[j + 1:]
                        edit(i, line[:m.start()] + "over [" + ", ".join(f'"{x}"' for x in new) + "]" +
                             line[m.end():], "axis", f"axis {a} -> {b}")
                if len(used) > 1:
                    new = used[:j] + used[j + 1:]
                    edit(i, line[:m.start()] + "over [" + ", ".join(f'"{x}"' for x in new) + "]" +
                         line[m.end():], "axis", f"axis {a} dropped")
        # layout: a split dropped or added, a partial kind changed.
        for m in re.finditer(r'#dist\.layout<\[([^\]]*)\]([^>]*)>', code):
            entries = [e.strip() for e in m.group(1).split(",")] if m.group(1).strip() else []
            rest = m.group(2)
            for j, e in enumerate(entries):
                alts = ["_"] if e != "_" else [a for a in axes if a not in m.group(0)]
                for alt in alts[:2]:
                    new = entries[:j] + [alt] + entries[j + 1:]
                    edit(i, line[:m.start()] + "#dist.layout<[" + ", ".join(new) + "]" + rest + ">" +
                         line[m.end():], "layout", f"dim {j}: {e} -> {alt}")
            if len(entries) >= 2 and entries[0] != entries[1]:
                new = [entries[1], entries[0]] + entries[2:]
                edit(i, line[:m.start()] + "#dist.layout<[" + ", ".join(new) + "]" + rest + ">" +
                     line[m.end():], "layout", "dims 0 and 1 swapped")
            for k1, k2 in (("sum", "avg"), ("avg", "sum"), ("max", "sum")):
                if f"{k1} = [" in rest:
                    edit(i, line[:m.start()] + "#dist.layout<[" + m.group(1) + "]" +
                         rest.replace(f"{k1} = [", f"{k2} = [") + ">" + line[m.end():], "layout",
                         f"partial {k1} -> {k2}")
        # constant: float attributes of plan ops.
        for m in re.finditer(r'(\b(?:by|lr|p|base|eps)\s+|ref\.constant\s+)(' + FLOAT + r')', code):
            v = float(m.group(2))
            for new, what in ((v * 2, "x2"), (v / 2, "/2"), (-v, "negated"),
                              (v + 1e-3 * (abs(v) or 1), "+1e-3 relative")):
                if new == v:
                    continue
                edit(i, line[:m.start(2)] + mlir_float(new) + line[m.end(2):], "constant",
                     f"{m.group(2)} {what}")
        # offset: integer attributes (dims, contraction, slice offsets, index constants).
        for pat in (r'contract\((\d+), (\d+)\)', r'\bdim (\d+)', r'dims \[([\d, ]+)\]',
                    r'arith\.constant (\d+) : index', r'offsets \[([\d, ]+)\]',
                    r'dist\.block_offset = array<i64: ([\d, ]+)>', r'split_dim (\d+)',
                    r'concat_dim (\d+)'):
            for m in re.finditer(pat, code):
                for g in range(1, (m.lastindex or 0) + 1):
                    nums = [int(x) for x in m.group(g).split(",")]
                    for j, n in enumerate(nums):
                        for d in (1, -1):
                            if n + d < 0:
                                continue
                            new = nums[:j] + [n + d] + nums[j + 1:]
                            rep = ", ".join(str(x) for x in new)
                            edit(i, line[:m.start(g)] + rep + line[m.end(g):], "offset",
                                 f"{m.group(0)}: {n} -> {n + d}")
        # stage: pipeline stages of ops, sends and receives.
        for m in re.finditer(r'dist\.stage = (\d+)|\bfrom (\d+)|\bto (\d+)', code):
            g = m.lastindex
            n = int(m.group(g))
            for new in (n + 1, n - 1):
                if new >= 0:
                    edit(i, line[:m.start(g)] + str(new) + line[m.end(g):], "stage",
                         f"{m.group(0)} -> {new}")
        # rng: the RNG mode and which reference mask a draw stands for.
        for m in re.finditer(r'dist\.rng = "(exact|independent)"', code):
            other = "exact" if m.group(1) == "independent" else "independent"
            edit(i, line[:m.start(1)] + other + line[m.end(1):], "rng", f"rng {m.group(1)} -> {other}")
        if "ref.dropout_mask" in code:
            m = re.search(r'ref\.dropout_mask (%[\w.]+), (%[\w.]+)', code)
            if m:
                swapped = line[:m.start()] + f"ref.dropout_mask {m.group(2)}, {m.group(1)}" + line[m.end():]
                edit(i, swapped, "rng", "key and counter swapped")
        # operand: two operands of a binary op swapped; an operand replaced.
        m = re.match(r'(\s*)(%[\w.]+) = (ref\.\w+|dist\.\w+) (%[\w.]+), (%[\w.]+)(.*)', line)
        if m and m.group(4) != m.group(5):
            edit(i, f"{m.group(1)}{m.group(2)} = {m.group(3)} {m.group(5)}, {m.group(4)}{m.group(6)}",
                 "operand", f"{m.group(3)} operands swapped")
        m2 = re.match(r'(\s*)(%[\w.]+) = (ref\.\w+|dist\.\w+) (%[\w.]+)(.*)', line)
        if m2 and defined:
            for other in defined[-3:]:
                if other != m2.group(4) and other != m2.group(2):
                    edit(i, f"{m2.group(1)}{m2.group(2)} = {m2.group(3)} {other}{m2.group(5)}",
                         "operand", f"{m2.group(3)} operand {m2.group(4)} -> {other}")
        # drop: a collective removed (its result replaced by its operand).
        m3 = re.match(r'\s*(%[\w.]+) = dist\.(all_reduce|reduce_scatter|all_gather|all_to_all) (%[\w.]+)', line)
        if m3 and m3.group(2) == "all_reduce":
            res, src = m3.group(1), m3.group(3)
            rest = "\n".join(lines[i + 1:])
            rest = re.sub(re.escape(res) + r'(?![\w.])', src, rest)
            mutated = "\n".join(lines[:i]) + "\n" + rest
            out.append(("drop", f"line {i + 1}: {m3.group(2)} dropped", mutated))
        d = re.match(r'\s*(%[\w.]+) = ', line)
        if d:
            defined.append(d.group(1))
    return out


def expected_verified(text):
    return 'verdict = "verified"' in text


def run(cmd, timeout):
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        return p.returncode, p.stdout + p.stderr
    except subprocess.TimeoutExpired:
        return "timeout", ""
    except OSError as e:
        return "error", str(e)


def check(planproof, spec, op, what, text, limit, keep, engine="element"):
    fd, path = tempfile.mkstemp(suffix=".mlir", prefix="mutant-")
    with os.fdopen(fd, "w") as f:
        f.write(text.replace('planproof.expect = {verdict = "verified"}', 'planproof.mutant'))
    try:
        rc, out = run([planproof, "verify", path, "--threads", "1", "--time-limit", str(limit),
                       "--engine", engine], limit + 60)
        status = {0: "survived", 1: "killed", 2: "invalid", 3: "inconclusive",
                  "timeout": "HANG", "error": "ERROR"}.get(rc, "CRASH")
        replay = ""
        if status == "survived" and engine != "element":
            # Another engine's proof is checked by the element engine, exactly.
            erc, _ = run([planproof, "verify", path, "--threads", "1", "--time-limit", str(limit)],
                         limit + 60)
            if erc == 1:
                replay = "DIVERGED"
        if status == "survived" and not replay:
            rrc, rout = run([planproof, "replay", path, "--time-limit", str(limit)], limit + 60)
            replay = {0: "within", 1: "DIVERGED"}.get(rrc, "could-not-run")
        if (status in ("CRASH", "HANG") or replay == "DIVERGED") and keep:
            os.makedirs(keep, exist_ok=True)
            name = os.path.basename(spec).replace(".mlir", "") + f"-{op}-{abs(hash(what)) % 10**8}.mlir"
            with open(os.path.join(keep, name), "w") as f:
                f.write(f"// mutant of {spec}: {op}: {what}\n" + text)
        return spec, op, what, status, replay, out.strip().splitlines()[-1:] if out else []
    except Exception as e:  # a harness failure is reported, never a lost run
        return spec, op, what, "ERROR", "", [str(e)]
    finally:
        os.unlink(path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("planproof")
    ap.add_argument("specs")
    ap.add_argument("--per-op", type=int, default=3, help="mutants per operator per spec")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--time-limit", type=int, default=120)
    ap.add_argument("--out", default="")
    ap.add_argument("--keep", default="", help="write crashing and false-proof mutants here")
    ap.add_argument("--only", default="", help="only specs whose path contains this")
    ap.add_argument("--engine", default="element",
                    help="the engine verifying the mutants (element, layout, auto); a "
                         "survivor of another engine is also verified by the element "
                         "engine, and a violation there is a false proof")
    ap.add_argument("--log", default="", help="results so far, one JSON line per mutant; "
                    "a run given an existing log skips the mutants it holds")
    a = ap.parse_args()
    # A private copy of the binary: a rebuild during the run must not change or break it.
    copy_dir = tempfile.mkdtemp(prefix="mutate-bin-")
    binary = os.path.join(copy_dir, "planproof")
    shutil.copy2(a.planproof, binary)
    a.planproof = binary
    done = {}
    if a.log and os.path.exists(a.log):
        with open(a.log) as f:
            for line in f:
                r = json.loads(line)
                done[(r[0], r[1], r[2])] = tuple(r[:4]) + (r[4], r[5])
    rng = random.Random(a.seed)
    jobs = []
    for root, _, files in os.walk(a.specs):
        for f in sorted(files):
            path = os.path.join(root, f)
            if not f.endswith(".mlir") or a.only not in path:
                continue
            text = open(path).read()
            if not expected_verified(text):
                continue
            by_op = collections.defaultdict(list)
            for op, what, mutated in sites(text):
                by_op[op].append((what, mutated))
            for op in sorted(by_op):
                chosen = by_op[op]
                rng.shuffle(chosen)
                for what, mutated in chosen[:a.per_op]:
                    jobs.append((path, op, what, mutated))
    jobs.sort(key=lambda j: (j[0], j[1], j[2]))
    started = time.time()
    results = [done[(p, op, what)] for p, op, what, _ in jobs if (p, op, what) in done]
    todo = [j for j in jobs if (j[0], j[1], j[2]) not in done]
    log = open(a.log, "a") if a.log else None
    with concurrent.futures.ThreadPoolExecutor(max_workers=a.jobs) as ex:
        futures = [ex.submit(check, a.planproof, p, op, what, text, a.time_limit, a.keep, a.engine)
                   for p, op, what, text in todo]
        for n, fut in enumerate(concurrent.futures.as_completed(futures), 1):
            r = fut.result()
            results.append(r)
            if log:
                log.write(json.dumps(list(r)) + "\n")
                log.flush()
            spec, op, what, status, replay, last = r
            if status in ("CRASH", "HANG", "ERROR") or replay == "DIVERGED":
                print(f"{status} {replay} {spec}: {op}: {what}", flush=True)
            if n % 50 == 0:
                print(f"mutate: {n}/{len(todo)} ({time.time() - started:.0f} s)", file=sys.stderr,
                      flush=True)
    table = collections.defaultdict(collections.Counter)
    for spec, op, what, status, replay, last in results:
        table[op][status] += 1
        if status == "survived":
            table[op]["replay " + replay] += 1
    cols = ["mutants", "invalid", "killed", "inconclusive", "survived", "replay within",
            "replay DIVERGED", "replay could-not-run", "CRASH", "HANG"]
    lines = ["| operator | " + " | ".join(cols) + " |", "|" + "---|" * (len(cols) + 1)]
    total = collections.Counter()
    for op in sorted(table):
        c = table[op]
        c["mutants"] = sum(c[s] for s in ("invalid", "killed", "inconclusive", "survived", "CRASH",
                                          "HANG", "ERROR"))
        total.update(c)
        lines.append(f"| {op} | " + " | ".join(str(c[k]) for k in cols) + " |")
    lines.append("| **all** | " + " | ".join(str(total[k]) for k in cols) + " |")
    specs = len({r[0] for r in results})
    summary = (f"{len(results)} mutants of {specs} correct specs, seed {a.seed}, {a.per_op} per "
               f"operator per spec, {time.time() - started:.0f} s with {a.jobs} jobs")
    report = summary + "\n\n" + "\n".join(lines) + "\n"
    survivors = [r for r in results if r[3] == "survived"]
    if survivors:
        report += "\nSurvivors (verified mutants) and their replay:\n\n"
        for spec, op, what, status, replay, last in sorted(survivors):
            report += f"- `{spec}` {op}: {what} -- replay {replay}\n"
    print(report)
    if a.out:
        with open(a.out, "w") as f:
            f.write(report)
    bad = total["replay DIVERGED"] + total["CRASH"] + total["HANG"] + total["ERROR"]
    print(f"mutate: {bad} false proofs or crashes", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
