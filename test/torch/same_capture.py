"""Exits 1 (with the first difference) unless two captures are the same spec: the same
ops, names, shapes and attributes, and the same source lines (paths may differ)."""
import json
import os
import sys


def norm(spec):
    for part in ("reference", "plan"):
        for op in spec[part]["ops"]:
            if "loc" in op:
                op["loc"]["file"] = os.path.basename(op["loc"]["file"])
    spec.pop("description", None)
    return spec


a, b = (norm(json.load(open(p))) for p in sys.argv[1:3])
if a != b:
    for part in ("reference", "plan"):
        for k in a[part]:
            if a[part][k] != b[part].get(k):
                print(f"{sys.argv[1]} and {sys.argv[2]} differ in {part}.{k}", file=sys.stderr)
                sys.exit(1)
    print(f"{sys.argv[1]} and {sys.argv[2]} differ", file=sys.stderr)
    sys.exit(1)
