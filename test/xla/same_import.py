"""same_import.py A.json B.json: two imports of XLA captures are the same spec (ops,
operands, attributes, shapes, layouts, mesh), apart from the description, where the
source files lie, and the results' names (planproof.xla names them by their pytree
paths: a copy of each result under its name, `--output-names`). Exit 1 with the first
difference."""
import json
import os
import sys


def unnamed(spec):
    """The spec with each result that is a copy of a value (scale by 1, or + 0 for a
    step count) replaced by that value, the copies dropped."""
    ops = spec["reference"]["ops"]
    producer = {op["result"]: op for op in ops}
    zeros = {op["result"] for op in ops
             if op["op"] == "arith.constant" and op.get("attrs", {}).get("value") == 0}
    renamed, dropped = {}, set()
    for o in spec["reference"]["outputs"]:
        op = producer.get(o)
        if op and op["op"] == "scale" and op.get("attrs", {}).get("factor") == 1:
            renamed[o] = op["operands"][0]
        elif op and op["op"] == "arith.addi" and op["operands"][1] in zeros:
            renamed[o] = op["operands"][0]
            dropped.add(op["operands"][1])
        else:
            continue
        dropped.add(o)
    spec["reference"]["ops"] = [op for op in ops if op["result"] not in dropped]
    spec["reference"]["outputs"] = [renamed.get(o, o) for o in spec["reference"]["outputs"]]
    for o in spec["plan"]["outputs"]:
        o["value"] = renamed.get(o["value"], o["value"])
    return spec


def canonical(path):
    spec = unnamed(json.load(open(path)))
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
