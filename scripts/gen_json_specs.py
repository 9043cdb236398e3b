#!/usr/bin/env python3
"""Generates the JSON-format specs in verify-specs/json/: the TP=2 MLP training step as
a Python planner would emit it (docs/json-format.md), correct and with seeded bugs.

Run from the repository root: python3 scripts/gen_json_specs.py
"""
import json
import os

OUT = os.path.join(os.path.dirname(__file__), "..", "verify-specs", "json")


def op(result, name, *operands, **attrs):
    o = {"result": result, "op": name, "operands": list(operands)}
    if attrs:
        o["attrs"] = attrs
    return o


def reference(B, H, F):
    return {
        "inputs": [{"name": "x", "shape": [B, H]}, {"name": "w1", "shape": [H, F]},
                   {"name": "b1", "shape": [F]}, {"name": "w2", "shape": [F, H]},
                   {"name": "b2", "shape": [H]}, {"name": "t", "shape": [B, H]}],
        "ops": [
            op("h_pre", "matmul", "x", "w1", lhs_dim=1, rhs_dim=0),
            op("h_b", "bias_add", "h_pre", "b1"),
            op("a", "gelu", "h_b"),
            op("y_pre", "matmul", "a", "w2", lhs_dim=1, rhs_dim=0),
            op("y", "bias_add", "y_pre", "b2"),
            op("loss", "mse_loss", "y", "t"),
            op("dy", "mse_loss_grad", "y", "t"),
            op("db2", "reduce_sum", "dy", dims=[0]),
            op("dw2", "matmul", "a", "dy", lhs_dim=0, rhs_dim=0),
            op("da", "matmul", "dy", "w2", lhs_dim=1, rhs_dim=1),
            op("dh", "gelu_grad", "h_b", "da"),
            op("db1", "reduce_sum", "dh", dims=[0]),
            op("dw1", "matmul", "x", "dh", lhs_dim=0, rhs_dim=0),
            op("dx", "matmul", "dh", "w1", lhs_dim=1, rhs_dim=1),
            op("w1_next", "sgd_update", "w1", "dw1", lr=0.1),
            op("b1_next", "sgd_update", "b1", "db1", lr=0.1),
            op("w2_next", "sgd_update", "w2", "dw2", lr=0.1),
            op("b2_next", "sgd_update", "b2", "db2", lr=0.1),
        ],
        "outputs": ["loss", "dx", "w1_next", "b1_next", "w2_next", "b2_next"],
    }


def plan(tp, bug=None):
    rep2 = {"dims": [None, None]}
    col = {"dims": [None, "tp"]}
    row = {"dims": ["tp", None]}
    ops = [
        op("h_pre", "matmul", "x", "w1", lhs_dim=1, rhs_dim=0),
        op("h_b", "bias_add", "h_pre", "b1"),
        op("a", "gelu", "h_b"),
        op("y_part", "matmul", "a", "w2", lhs_dim=1, rhs_dim=0),
    ]
    if bug == "bias_before_allreduce":
        ops += [op("y_b", "bias_add", "y_part", "b2"),
                op("y", "all_reduce", "y_b", axes=["tp"], kind="sum")]
    else:
        ops += [op("y_pre", "all_reduce", "y_part", axes=["tp"], kind="sum"),
                op("y", "bias_add", "y_pre", "b2")]
    ops += [
        op("loss", "mse_loss", "y", "t"),
        op("dy", "mse_loss_grad", "y", "t"),
        op("db2", "reduce_sum", "dy", dims=[0]),
        op("dw2", "matmul", "a", "dy", lhs_dim=0, rhs_dim=0),
        op("da", "matmul", "dy", "w2", lhs_dim=1, rhs_dim=1),
        op("dh", "gelu_grad", "h_b", "da"),
        op("db1", "reduce_sum", "dh", dims=[0]),
        op("dw1", "matmul", "x", "dh", lhs_dim=0, rhs_dim=0),
        op("dx_part", "matmul", "dh", "w1", lhs_dim=1, rhs_dim=1),
        op("dx", "all_reduce", "dx_part", axes=["tp"], kind="sum"),
        op("w1n", "sgd_update", "w1", "dw1", lr=0.1),
        op("b1n", "sgd_update", "b1", "db1", lr=0.1),
        op("w2n", "sgd_update", "w2", "dw2", lr=0.1),
        op("b2n", "sgd_update", "b2", "db2", lr=0.1),
    ]
    return {
        "mesh": {"name": "mesh", "axes": [{"name": "tp", "size": tp}]},
        "inputs": [
            {"name": "x", "value": "x", "layout": rep2},
            {"name": "w1", "value": "w1", "layout": col},
            {"name": "b1", "value": "b1", "layout": {"dims": ["tp"]}},
            {"name": "w2", "value": "w2", "layout": row},
            {"name": "b2", "value": "b2", "layout": {"dims": [None]}},
            {"name": "t", "value": "t", "layout": rep2},
        ],
        "ops": ops,
        "outputs": [
            {"name": "loss", "value": "loss", "layout": {"dims": []}},
            {"name": "dx", "value": "dx", "layout": rep2},
            {"name": "w1n", "value": "w1_next", "layout": col},
            {"name": "b1n", "value": "b1_next", "layout": {"dims": ["tp"]}},
            {"name": "w2n", "value": "w2_next", "layout": row},
            {"name": "b2n", "value": "b2_next", "layout": {"dims": [None]}},
        ],
    }


def write(name, description, expect, spec):
    doc = {"planproof": 1, "description": description, "expect": expect}
    if "dims" in spec:
        doc["dims"] = spec.pop("dims")
    doc.update(spec)
    with open(os.path.join(OUT, name), "w") as fh:
        json.dump(doc, fh, indent=2)
        fh.write("\n")


def parametric(spec, dims):
    """Writes the reference input shapes with dimension symbols: B x H inputs, H x F
    weights, and so on (the plan's shapes follow from the layouts)."""
    sym = {"x": ["B", "H"], "w1": ["H", "F"], "b1": ["F"], "w2": ["F", "H"], "b2": ["H"],
           "t": ["B", "H"]}
    for inp in spec["reference"]["inputs"]:
        inp["shape"] = sym[inp["name"]]
    spec["dims"] = dims
    return spec


def main():
    os.makedirs(OUT, exist_ok=True)
    dims = {"B": 4096, "H": 8192, "F": 32768}
    write("mlp_tp8_parametric.json", "GENERATED by scripts/gen_json_specs.py. The Megatron MLP "
          "step at real sizes (batch 4096, width 8192, FFN 32768) on TP=8, written with "
          "dimension symbols: planproof decides it at reduced sizes (docs/shape-reduction.md).",
          {"verdict": "verified"},
          parametric({"reference": reference(2, 4, 4), "plan": plan(8)}, dims))
    write("mlp_tp8_parametric_bias_before_allreduce.json", "GENERATED by "
          "scripts/gen_json_specs.py. BUG at real sizes on TP=8: the row-parallel bias is "
          "added on every rank before the all_reduce.",
          {"verdict": "violated", "kind": "reduction", "at": "y_b"},
          parametric({"reference": reference(2, 4, 4), "plan": plan(8, "bias_before_allreduce")}, dims))
    write("mlp_tp2.json", "GENERATED by scripts/gen_json_specs.py. Megatron TP=2 MLP step "
          "in the JSON interchange format.", {"verdict": "verified"},
          {"reference": reference(2, 4, 4), "plan": plan(2)})
    write("mlp_tp2_bias_before_allreduce.json", "GENERATED by scripts/gen_json_specs.py. "
          "BUG: the row-parallel bias is added on every rank before the all_reduce.",
          {"verdict": "violated", "kind": "reduction", "at": "y_b"},
          {"reference": reference(2, 4, 4), "plan": plan(2, "bias_before_allreduce")})


if __name__ == "__main__":
    main()
