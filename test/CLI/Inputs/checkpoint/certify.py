#!/usr/bin/env python3
"""The layout engine's checkpoint rule certified against the element engine: every spec
of DIR (scripts/gen_checkpoint_specs.py --variants: saved on one number of data ranks,
resumed on another, correct and with each seeded bug) is verified by both engines; a
correct one must be verified by both, a seeded bug violated by the element engine and
never verified by the layout engine.

usage: certify.py PLANPROOF DIR [--sample]

--sample: every correct spec, and of the near misses one per seeded bug, each with
another pair of meshes (make test; make test-slow certifies them all).
"""
import os
import subprocess
import sys


def verdict(planproof, engine, path):
    p = subprocess.run([planproof, "verify", "--engine", engine, path], capture_output=True,
                       text=True, timeout=600)
    last = (p.stdout.strip().splitlines() or [""])[-1]
    return last.split(": ", 1)[-1].split(" ")[0]


def chosen(names, sample):
    """The specs to certify: all, or a sample (every correct one; per seeded bug -- the
    name's part after the meshes -- one, rotating through the mesh pairs)."""
    if not sample:
        return names
    out, bugs = [], {}
    for name in names:
        parts = name[:-len(".mlir")].split("_", 4)  # ckpt, dpA, to, dpB, bug
        if len(parts) < 5:
            out.append(name)
        else:
            bugs.setdefault(parts[4], []).append(name)
    for k, (bug, group) in enumerate(sorted(bugs.items())):
        out.append(group[k % len(group)])
    return sorted(out)


def main():
    planproof, d = sys.argv[1], sys.argv[2]
    sample = "--sample" in sys.argv[3:]
    both = misses = bad = 0
    for name in chosen(sorted(os.listdir(d)), sample):
        path = os.path.join(d, name)
        correct = "verified" in open(path).read().split("planproof.expect", 1)[1][:40]
        e, l = verdict(planproof, "element", path), verdict(planproof, "layout", path)
        if correct and e == l == "verified":
            both += 1
        elif not correct and e == "violated" and l != "verified":
            misses += 1
        else:
            bad += 1
            print(f"DISAGREE {name}: element {e}, layout {l}")
    print(f"certified: {both + misses + bad} specs, {both} verified by both engines, {misses} "
          f"near misses violated by the element engine and not proved by the layout engine, "
          f"{bad} disagreements")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
