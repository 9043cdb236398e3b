#!/usr/bin/env python3
"""`%at FILE NAME` prints LINE:COL of the plan op that defines %NAME in the spec FILE (the
column of the op's name, where planproof's diagnostics point); `%at FILE OP OPERAND`
prints that of the result-less op `OP %OPERAND` (a dist.save, a dist.send). Tests state
the op a violation belongs to, and FileCheck gets its place from here (-DAT=...),
so that editing a spec's comments does not break them. Exits 1 unless exactly one line
of the plan function (or, failing that, of the file) matches."""
import re
import sys


def main(argv):
    path, name = argv[1], argv[2]
    lines = open(path, encoding="utf-8").read().split("\n")
    start = next((i for i, l in enumerate(lines) if "func.func @plan" in l), 0)
    end = next((i for i in range(start + 1, len(lines)) if "func.func @" in lines[i]), len(lines))
    if len(argv) > 3:
        pattern = re.compile(r"^(\s*)" + re.escape(name) + r"\s+%" + re.escape(argv[3]) + r"\b")
    else:
        ident = re.escape(name.lstrip("%"))
        pattern = re.compile(r"^\s*(?:%[\w.$-]+\s*,\s*)*%" + ident +
                             r"(?:\s*,\s*%[\w.$-]+)*\s*=\s*()")
    for lo, hi in ((start, end), (0, len(lines))):
        found = [(i, m) for i in range(lo, hi) for m in [pattern.match(lines[i])] if m]
        if len(found) == 1:
            i, m = found[0]
            col = m.end(1) + 1 if len(argv) > 3 else m.end() + 1
            print(f"{i + 1}:{col}")
            return 0
        if len(found) > 1:
            break
    sys.stderr.write(f"at.py: {path}: no single definition of {' '.join(argv[2:])}\n")
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
