"""Mutation fuzzing of planproof's input paths (used by fuzz.test): every mutated JSON or
MLIR spec must end with exit status 0, 1, 2 or 3 -- never a crash, an abort or a hang.

usage: fuzz.test.py PLANPROOF SEED COUNT SPEC...
"""
import copy
import json
import os
import random
import subprocess
import sys
import tempfile

planproof, seed, count, specs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
rng = random.Random(seed)
WEIRD = [None, True, -1, 0, 1, 2**40, 2**63, 1.5, -0.0, "", "tp", "x", [], {}, [None], {"a": 1}]


def paths(node, prefix=()):
    yield prefix
    if isinstance(node, dict):
        for k, v in node.items():
            yield from paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from paths(v, prefix + (i,))


def mutate_json(doc):
    doc = copy.deepcopy(doc)
    for _ in range(rng.randint(1, 3)):
        ps = [p for p in paths(doc) if p]
        p = rng.choice(ps)
        parent = doc
        for k in p[:-1]:
            parent = parent[k]
        k = p[-1]
        action = rng.random()
        if action < 0.3:
            parent[k] = rng.choice(WEIRD)
        elif action < 0.5 and isinstance(parent, dict):
            del parent[k]
        elif action < 0.6 and isinstance(parent, list):
            parent.insert(k, copy.deepcopy(parent[k]))
        elif isinstance(parent[k], int) and not isinstance(parent[k], bool):
            parent[k] = rng.choice([0, -parent[k], parent[k] * 3, parent[k] + 1, 2**31])
        elif isinstance(parent[k], str):
            parent[k] = rng.choice(["", parent[k] + "x", "tp", "dp", "x", "matmul", "all_reduce"])
        else:
            parent[k] = rng.choice(WEIRD)
    return json.dumps(doc)


def mutate_text(text):
    lines = text.split("\n")
    for _ in range(rng.randint(1, 3)):
        i = rng.randrange(len(lines))
        action = rng.random()
        if action < 0.3:
            del lines[i]
        elif action < 0.6:
            lines.insert(i, lines[rng.randrange(len(lines))])
        else:
            line = lines[i]
            if line:
                j = rng.randrange(len(line))
                lines[i] = line[:j] + rng.choice(["", "0", "9", "-", "]", "}", "tp", "x", "%y"]) + line[j + 1:]
    return "\n".join(lines)


bad = 0
with tempfile.TemporaryDirectory() as tmp:
    for n in range(count):
        spec = rng.choice(specs)
        text = open(spec).read()
        if spec.endswith(".json"):
            mutated, ext = (mutate_json(json.loads(text)) if rng.random() < 0.8
                            else text[: rng.randrange(len(text))]), ".json"
        else:
            mutated, ext = mutate_text(text), ".mlir"
        path = os.path.join(tmp, f"case{n}{ext}")
        with open(path, "w") as fh:
            fh.write(mutated)
        try:
            engine = rng.choice(["element", "layout", "auto"])
            rc = subprocess.run([planproof, "verify", "--engine", engine, "--format", "json", path],
                                capture_output=True, timeout=60).returncode
        except subprocess.TimeoutExpired:
            rc = "hang"
        if rc not in (0, 1, 2, 3):
            bad += 1
            print(f"BAD exit {rc} on a mutation of {os.path.basename(spec)} (--engine {engine})")
            print(mutated[:2000])
print(f"fuzz: {count} cases, {bad} crashes or hangs")
