"""Seeds a pipeline deadlock in a plan written by `planproof plan` (1F1B, chunk j on
stage j): stage S receives the cotangent of microbatch 0 from stage S+1 before it
sends the activation that cotangent needs, both unbatched.

    python3 seed_deadlock.py PLAN.mlir OUT.mlir S
"""
import re
import sys

src, out, s = sys.argv[1], sys.argv[2], int(sys.argv[3])
with open(src, encoding="utf-8") as f:
    lines = f.read().split("\n")
recv = next(i for i, l in enumerate(lines)
            if re.search(r'= dist\.recv from %d to %d tag "grad/c%d/mb0"' % (s + 1, s, s + 1), l))
send = next(i for i, l in enumerate(lines)
            if re.search(r'dist\.send %%\S+ from %d to %d tag "act/c%d/mb0"' % (s, s + 1, s + 1), l))
assert send < recv, "the send comes first in the generated plan"
batch = re.search(r" \{batch = \d+ : i64\}", lines[recv])
if batch:
    lines = [l.replace(batch.group(0), "") for l in lines]
lines.insert(send, lines.pop(recv))
with open(out, "w", encoding="utf-8") as f:
    f.write("\n".join(lines))
