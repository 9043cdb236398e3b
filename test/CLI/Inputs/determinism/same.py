"""same.py A.json B.json: whether two JSON reports say the same -- verdict, violations,
reasons and every stat but the wall-clock milliseconds. Prints 'same' or the first
difference."""
import json
import sys

a, b = (json.load(open(p)) for p in sys.argv[1:3])
for r in (a, b):
    r["stats"].pop("milliseconds", None)
for key in sorted(set(a) | set(b)):
    if a.get(key) != b.get(key):
        print(f"differ in {key}: {a.get(key)!r} vs {b.get(key)!r}")
        sys.exit(1)
print("same")
