"""same_import.py A.json B.json: two imports of XLA captures are the same spec (ops,
operands, attributes, shapes, layouts, mesh), apart from the description and where the
source files lie. Exit 1 with the first difference."""
import json
import os
import sys


def canonical(path):
    spec = json.load(open(path))
    spec.pop("description", None)
    for part in ("reference", "plan"):
        for op in spec[part]["ops"]:
            if "loc" in op:
                op["loc"]["file"] = os.path.basename(op["loc"]["file"])
    return spec


a, b = canonical(sys.argv[1]), canonical(sys.argv[2])
if a != b:
    for part in ("reference", "plan"):
        for k in sorted(set(a[part]) | set(b[part])):
            if a[part].get(k) != b[part].get(k):
                x, y = a[part].get(k), b[part].get(k)
                if isinstance(x, list) and isinstance(y, list):
                    for i, (u, v) in enumerate(zip(x, y)):
                        if u != v:
                            print(f"{part}.{k}[{i}]: {u} != {v}")
                            sys.exit(1)
                    print(f"{part}.{k}: {len(x)} != {len(y)} entries")
                else:
                    print(f"{part}.{k} differs")
                sys.exit(1)
    print("the specs differ")
    sys.exit(1)
