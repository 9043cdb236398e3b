#!/usr/bin/env python3
"""Writes the op list of docs/spec.schema.json from the ops' ODS definitions.

The build generates each dialect's JSON ops (build/dialects/*/<Dialect>JsonOps.json,
tools/planproof-tblgen); this script sets the schema's op enum to every one of them,
qualified and bare, plus the index ops the importer builds itself (rank coordinates and
`arith` on `index`). `make schema` runs it; the unit test "the published JSON schema
lists exactly the importable ops" fails until it has been run after an op changes.

usage: update_schema.py SCHEMA OPS_JSON...
"""
import json
import sys

# Not in the generated lists: the importer builds these itself (docs/json-format.md).
INDEX_OPS = ["dist.axis_index", "axis_index", "arith.constant", "arith.addi", "arith.subi",
             "arith.muli"]


def main():
    schema_path, lists = sys.argv[1], sys.argv[2:]
    names = []
    for path in lists:
        for name in json.load(open(path)):
            names += [name, name.split(".", 1)[1]]
    names += INDEX_OPS
    with open(schema_path) as f:
        schema = json.load(f)
    schema["$defs"]["op"]["properties"]["op"]["enum"] = names
    with open(schema_path, "w") as f:
        f.write(json.dumps(schema, indent=2, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
