#!/usr/bin/env python3
"""Checks that planproof's layers depend one way (lib/CMakeLists.txt lists them).

Every `#include "Layer/..."` in lib/<Layer>/ must name the layer itself or one the table
below allows, and every library a lib/<Layer>/CMakeLists.txt links must belong to one. Exits
1 naming each include that goes the wrong way, or any lib/ directory the table lacks.
"""
import os
import re
import sys

# The dialects (Ref, Dist) are below every layer.
DIALECTS = {"Ref", "Dist"}
# Each layer and the layers it may include, below it.
ALLOWED = {
    "Support": set(),
    "Semantics": {"Support"},
    "Transforms": {"Support"},
    "Spec": {"Support", "Semantics", "Transforms"},
    "Import": {"Support", "Semantics", "Transforms", "Spec", "Plan"},
    "Interp": {"Support", "Semantics", "Spec"},
    "Engine": {"Support", "Semantics", "Spec", "Interp"},
    "LayoutEngine": {"Support", "Semantics", "Spec", "Engine"},
    "Device": {"Support", "Semantics"},
    # (The replay asks the engines where a divergence starts: the element engine's
    # relations, else the layout engine's departures.)
    "Replay": {"Support", "Semantics", "Spec", "Interp", "Engine", "LayoutEngine", "Device"},
    "Report": {"Support", "Semantics", "Spec", "Engine", "LayoutEngine", "Replay"},
    "Plan": {"Support"},
    "API": {"Support", "Semantics", "Transforms", "Spec", "Import", "Interp", "Engine",
            "LayoutEngine", "Device", "Replay", "Report", "Plan", "planproof"},
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([A-Za-z]+)/')
# The library of each layer (lib/<Layer>/CMakeLists.txt); Device's folder holds two.
LIBRARIES = {"PlanproofSupport": "Support", "PlanproofSemantics": "Semantics",
             "PlanproofTransforms": "Transforms", "PlanproofSpec": "Spec",
             "PlanproofImport": "Import", "PlanproofInterp": "Interp",
             "PlanproofEngine": "Engine", "PlanproofLayoutEngine": "LayoutEngine",
             "PlanproofDevice": "Device",
             "PlanproofCuda": "Device", "PlanproofReplay": "Replay",
             "PlanproofReport": "Report", "PlanproofPlan": "Plan", "PlanproofLib": "API"}
LINK = re.compile(r"target_link_libraries\(\s*(\w+)([^)]*)\)", re.S)


def check_links(root, bad):
    """Each library links only libraries of its own layer or of layers it may use."""
    for layer in sorted(ALLOWED):
        path = os.path.join(root, layer, "CMakeLists.txt")
        if not os.path.exists(path):
            bad.append(f"lib/{layer}: no CMakeLists.txt")
            continue
        with open(path, encoding="utf-8") as f:
            text = f.read()
        for m in LINK.finditer(text):
            for dep in re.findall(r"\bPlanproof\w+", m.group(2)):
                if dep in ("PlanproofRef", "PlanproofDist"):
                    continue
                to = LIBRARIES.get(dep)
                if to is None:
                    bad.append(f"lib/{layer}/CMakeLists.txt: {m.group(1)} links {dep}, "
                               "a library scripts/check_layers.py does not know")
                elif to != layer and to not in ALLOWED[layer]:
                    bad.append(f"lib/{layer}/CMakeLists.txt: {m.group(1)} links {dep} "
                               f"({to}), a layer above it or beside it")


def main():
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib")
    bad = []
    for layer in sorted(os.listdir(root)):
        path = os.path.join(root, layer)
        if not os.path.isdir(path):
            continue
        if layer not in ALLOWED:
            bad.append(f"lib/{layer}: a directory that is no layer of scripts/check_layers.py")
            continue
        ok = ALLOWED[layer] | DIALECTS | {layer}
        for name in sorted(os.listdir(path)):
            if not name.endswith((".h", ".cpp", ".cu", ".def", ".inc")):
                continue
            with open(os.path.join(path, name), encoding="utf-8") as f:
                for n, line in enumerate(f, 1):
                    m = INCLUDE.match(line)
                    if m and m.group(1) not in ("mlir", "llvm") and m.group(1) not in ok:
                        bad.append(f"lib/{layer}/{name}:{n}: {layer} includes "
                                   f"{m.group(1)}, a layer above it or beside it")
    check_links(root, bad)
    for b in bad:
        print(b)
    if bad:
        return 1
    print(f"layers: {len(ALLOWED)} checked, every include and link goes down")
    return 0


if __name__ == "__main__":
    sys.exit(main())
