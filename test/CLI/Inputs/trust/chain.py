"""A chain of N additions y_i = y_{i-1} + z, as a JSON spec; with WRONG >= 0 the plan's
op WRONG adds x instead of z. usage: chain.py N WRONG (bench/bench_trust.py imports it)"""
import json
import sys


def chain_spec(n, wrong):
    ref_ops, plan_ops, prev = [], [], "x"
    for i in range(n):
        ref_ops.append({"result": f"y{i}", "op": "add", "operands": [prev, "z"]})
        plan_ops.append({"result": f"y{i}", "op": "add", "operands": [prev, "x" if i == wrong else "z"]})
        prev = f"y{i}"
    layout = {"dims": ["tp"]}
    return {
        "planproof": 1,
        "reference": {"inputs": [{"name": "x", "shape": [2]}, {"name": "z", "shape": [2]}],
                      "ops": ref_ops, "outputs": [prev]},
        "plan": {"mesh": {"name": "mesh", "axes": [{"name": "tp", "size": 2}]},
                 "inputs": [{"name": "x", "value": "x", "layout": layout},
                            {"name": "z", "value": "z", "layout": layout}],
                 "ops": plan_ops,
                 "outputs": [{"name": prev, "value": prev, "layout": layout}]},
    }


if __name__ == "__main__":
    print(json.dumps(chain_spec(int(sys.argv[1]), int(sys.argv[2]))))
