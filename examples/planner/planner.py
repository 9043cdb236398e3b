#!/usr/bin/env python3
"""A small auto-parallelizer that asks planproof about every candidate it considers.

For a model configuration (verify-specs/models/*.json) and a number of ranks, the
planner enumerates the layouts of one transformer block: every data x tensor
parallel split of the ranks (dp * tp = ranks, tp dividing the KV heads), with and
without sequence parallelism. For each layout it takes the plan `planproof plan` writes
(the reference implementation of a correct plan) and then, as a planner's
communication optimizer does, tries to make it cheaper one collective at a time:

    drop     leave an all-reduce out (its operand used as its result)
    narrow   reduce over fewer mesh axes (a smaller group)
    avg      average instead of sum (a smaller gradient scale)

A narrowed or averaged all-reduce is an edit of the loaded plan (Session.edit: the
collective's attribute changed in place, with its derived adjoint, then undone), which
the layout engine re-verifies by re-deriving only the states the edit reaches; a
dropped one is loaded as text against the layout's reference (Session.load_plan: the
reference is parsed and differentiated once per layout), reusing every state derived
before. Each is decided by the layout engine, then by the element engine where the
layout engine cannot prove it (engine "auto"). The planner keeps the verified candidates
and prints why each rejected one is wrong: the kind, the op and planproof's message.

    python3 examples/planner/planner.py --ranks 4            # the test suite's run
    python3 examples/planner/planner.py --ranks 8 --fresh    # also each candidate in a
                                                             # fresh session, for the
                                                             # share the reuse saves
"""
import argparse
import os
import re
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "python"))

import planproof  # noqa: E402

# `%r = dist.all_reduce %x over ["dp", "tp"] "sum" : T -> T`
ALL_REDUCE = re.compile(r'^(\s*)(%[\w$.-]+) = dist\.all_reduce (%[\w$.-]+) over \[([^\]]*)\] '
                        r'"(\w+)"(.*)$')


def layouts(model, ranks):
    """The (dp, tp, sp) layouts of `ranks` ranks the model admits."""
    import json
    with open(model) as f:
        m = json.load(f)
    kv = m.get("kv_heads", m["heads"])
    out = []
    for tp in range(1, ranks + 1):
        if ranks % tp or kv % tp:
            continue
        for sp in ([False, True] if tp > 1 else [False]):
            par = f"dp={ranks // tp},tp={tp}" + (",sp" if sp else "") + ",layers=1"
            out.append(par)
    return out


def plan_part(text):
    """The mesh and the plan function of a spec (what Session.load_plan takes)."""
    at = text.index("\n  dist.mesh")
    return "module {\n" + text[at + 1:]


def moves(plan):
    """Every one-collective change the optimizer tries: (description, candidate text, the
    edit that makes it of the loaded plan -- (value, attribute, to) -- or None)."""
    lines = plan.split("\n")
    for i, line in enumerate(lines):
        m = ALL_REDUCE.match(line)
        if not m:
            continue
        indent, result, operand, axes, kind, _ = m.groups()
        axis_list = [a.strip() for a in axes.split(",") if a.strip()]
        # drop: the operand stands for the result everywhere below.
        use = re.compile(re.escape(result) + r"(?![\w$.-])")
        rest = [use.sub(operand, x) for x in lines[i + 1:]]
        yield f"drop the all_reduce of {result}", "\n".join(lines[:i] + rest), None
        if len(axis_list) > 1:
            for keep in axis_list:
                narrowed = line.replace(f"over [{axes}]", f"over [{keep}]")
                yield (f"reduce {result} over {keep} only",
                       "\n".join(lines[:i] + [narrowed] + lines[i + 1:]),
                       (result, "axes", f"[{keep}]"))
        if kind == "sum":
            flipped = line.replace('"sum"', '"avg"')
            yield (f"average {result} instead of summing",
                   "\n".join(lines[:i] + [flipped] + lines[i + 1:]), (result, "kind", '"avg"'))


def why(result):
    """One line on why planproof rejects a candidate."""
    if result.violations:
        v = result.violations[0]
        return f"{result.verdict} [{v.kind}] at {v.op} ({v.at.line}): {v.message}"
    if result.inconclusive:
        return f"{result.verdict}: {result.inconclusive[0][1]}"
    return result.verdict


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default=os.path.join(ROOT, "verify-specs", "models", "llama3-8b.json"))
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--max-moves", type=int, default=0,
                    help="at most this many candidates per layout (0: all)")
    ap.add_argument("--fresh", action="store_true",
                    help="also verify each candidate in a fresh session (the whole spec "
                         "loaded, no reuse), for the share the reuse saves")
    ap.add_argument("--quiet", action="store_true", help="only the summary")
    ap.add_argument("--summary-json", default="",
                    help="also write the summary (counts and medians) to this JSON file")
    a = ap.parse_args()

    times, fresh_times, kept, rejected = [], [], [], []
    by_verdict = {"kept": ([], []), "rejected": ([], [])}  # (reuse, fresh) ms
    for par in layouts(a.model, a.ranks):
        text = planproof.plan(a.model, par)
        session = planproof.Session()
        t = time.perf_counter()
        base = session.load_text(text, name=f"{par}.mlir")
        first = session.verify(base, engine="auto", check_fixes=False)
        base_ms = 1e3 * (time.perf_counter() - t)
        if first.verdict != "verified":
            print(f"{par}: the generated plan is {why(first)}", file=sys.stderr)
            return 1
        kept.append((par, "as generated"))
        if not a.quiet:
            print(f"{par}: as generated: verified ({base_ms:.0f} ms, reference loaded and run)")
        plan = plan_part(text)
        for n, (what, cand, edit) in enumerate(moves(plan)):
            if a.max_moves and n >= a.max_moves:
                break
            t = time.perf_counter()
            if edit:
                undo = session.edit(base, [edit])
                r = session.verify(base, engine="auto", check_fixes=False)
                session.edit(base, undo)
            else:
                spec = session.load_plan(base, cand, name=f"{par}: {what}")
                r = session.verify(spec, engine="auto", check_fixes=False)
            ms = 1e3 * (time.perf_counter() - t)
            times.append(ms)
            if a.fresh:
                t = time.perf_counter()
                alone = planproof.Session()
                whole = text[:text.index("\n  dist.mesh") + 1] + cand[len("module {\n"):]
                f = alone.verify(alone.load_text(whole, name="fresh.mlir"), engine="auto",
                                 check_fixes=False)
                fresh_times.append(1e3 * (time.perf_counter() - t))
                if f.verdict != r.verdict:
                    print(f"{par}: {what}: {r.verdict} with reuse, {f.verdict} fresh",
                          file=sys.stderr)
                    return 1
            group = by_verdict["kept" if r.verdict == "verified" else "rejected"]
            group[0].append(ms)
            if a.fresh:
                group[1].append(fresh_times[-1])
            if r.verdict == "verified":
                kept.append((par, what))
                line = f"  kept      {what}: verified"
            else:
                rejected.append((par, what, r))
                line = f"  rejected  {what}: {why(r)}"
            if not a.quiet:
                print(f"{line} ({ms:.1f} ms, {r.stats.reused_states}/{r.stats.plan_ops} "
                      f"plan states reused)")
    print(f"{len(kept)} plans kept, {len(rejected)} rejected of {len(kept) + len(rejected)}; "
          f"per candidate: median {statistics.median(times):.1f} ms over {len(times)}")
    if fresh_times:
        saved = 1 - statistics.median(times) / statistics.median(fresh_times)
        print(f"fresh session per candidate: median {statistics.median(fresh_times):.1f} ms; "
              f"the reuse saves {100 * saved:.0f}%")
    summary = {"layouts": len(layouts(a.model, a.ranks)), "candidates": len(times),
               "median_ms": statistics.median(times),
               "fresh_median_ms": statistics.median(fresh_times) if fresh_times else None}
    for name, (reuse, fresh) in by_verdict.items():
        if reuse:
            line = f"  {name} ({len(reuse)}): median {statistics.median(reuse):.1f} ms"
            summary[name] = {"count": len(reuse), "median_ms": statistics.median(reuse)}
            if fresh:
                line += f", fresh {statistics.median(fresh):.1f} ms"
                summary[name]["fresh_median_ms"] = statistics.median(fresh)
            print(line)
    if a.summary_json:
        import json
        with open(a.summary_json, "w") as f:
            json.dump(summary, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
