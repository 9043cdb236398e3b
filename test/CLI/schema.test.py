"""Validates JSON specs against docs/spec.schema.json (used by schema.test)."""
import json
import os
import sys

import jsonschema

schema = json.load(open(sys.argv[1]))
jsonschema.Draft202012Validator.check_schema(schema)
print("schema ok")
validator = jsonschema.Draft202012Validator(schema)
for path in sys.argv[2:]:
    errors = list(validator.iter_errors(json.load(open(path))))
    name = os.path.basename(path)
    print(f"{name} valid" if not errors else f"{name} INVALID: {errors[0].message}")
bad = json.load(open(sys.argv[2]))
del bad["plan"]
if list(validator.iter_errors(bad)):
    print("rejects a spec without a plan")
