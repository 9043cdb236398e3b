"""The Python binding (`import planproof`): loading every kind of source, verdicts with
their violations, replay, the planner's loop (Session.load_plan and the layout engine's
reuse), the plan generator, the builder, and bad input with its place. Run by ctest
(test/CMakeLists.txt) with the build's extension module."""
import json
import os
import pathlib
import subprocess
import sys
import threading

import pytest

import planproof
from planproof import SpecError
from planproof.builder import SpecBuilder

ROOT = pathlib.Path(__file__).resolve().parents[2]
SPECS = ROOT / "verify-specs"
TP2 = SPECS / "mlp" / "mlp_tp2.mlir"
AVG = SPECS / "mlp" / "mlp_tp2_row_allreduce_avg.mlir"
MODEL = SPECS / "models" / "llama3-8b.json"


def test_verify_a_file():
    r = planproof.verify(str(TP2))
    assert r.verdict == "verified" and r.verified and bool(r)
    assert r.violations == [] and r.inconclusive == []
    assert r.stats.ranks == 2 and r.stats.plan_ops > 0 and r.stats.obligations > 0
    assert "verified" in r.text
    assert json.loads(r.json)["verdict"] == "verified"


def test_auto_is_the_default_and_explains_its_proof():
    r = planproof.verify(str(TP2), explain_proof=True)
    assert r.verdict == "verified"
    assert r.proof and all(p.engine == "layout" for p in r.proof)
    assert "output `w1_next`" in {p.output for p in r.proof}
    rules = {k.rule for p in r.proof for k in p.rules}
    assert "contraction" in rules and "collective `dist.all_reduce`" in rules
    assert all(k.count > 0 for p in r.proof for k in p.rules if k.rule == "contraction")
    assert json.loads(r.json)["proof"][0]["engine"] == "layout"
    e = planproof.verify(str(TP2), engine="element", explain_proof=True)
    assert [p.engine for p in e.proof] == ["element"]
    assert e.proof[0].rules[0].rule == "equal canonical forms"
    assert planproof.verify(str(TP2)).proof == []


def test_a_spec_with_calls_is_proved_function_by_function_as_the_cli_does():
    # The library's policy is the CLI's (API/Policy.h): calls kept first.
    calls = ROOT / "test" / "CLI" / "Inputs" / "calls" / "two_layers.mlir"
    r = planproof.verify(str(calls), explain_proof=True)
    assert r.verdict == "verified"
    assert "the calls were kept" in r.text
    assert any(k.rule.startswith("calls: ") for p in r.proof for k in p.rules)
    build = pathlib.Path(os.environ.get("PLANPROOF_BUILD", ROOT / "build"))
    cli = subprocess.run([str(build / "bin" / "planproof"), "verify", str(calls)],
                         capture_output=True, text=True, timeout=120)
    assert cli.returncode == 0 and "the calls were kept" in cli.stdout


def test_a_violation_has_kind_place_op_and_counterexample():
    r = planproof.verify(AVG)  # os.PathLike
    assert r.verdict == "violated" and not r
    v = r.violations[0]
    assert v.kind == "reduction"
    assert v.op == "%y_pre"
    assert v.at.file.endswith("mlp_tp2_row_allreduce_avg.mlir") and v.at.line == 61
    assert '"avg"' in v.message
    assert 'class="verdict violated"' in r.html and "data-culprit" in r.html
    assert any("partial-sum over tp" in n for n in v.notes)
    assert "sum" in v.hint
    c = v.counterexample
    assert c is not None and c.inputs and c.reference != c.plan
    assert c.rank_values


def test_assumptions_come_with_the_verdict():
    spec = json.loads((SPECS / "json" / "mlp_tp2.json").read_text())
    assert planproof.verify(spec).assumptions == []
    spec["assumptions"] = ["the labels are classes on every token"]
    r = planproof.verify(spec)
    assert r.verdict == "verified"
    assert r.assumptions == ["the labels are classes on every token"]
    assert "note: assumed: the labels are classes on every token" in r.text
    assert json.loads(r.json)["assumptions"] == r.assumptions
    spec["assumptions"] = [""]
    with pytest.raises(SpecError):
        planproof.verify(spec)


def test_json_file_dict_and_text_agree():
    path = SPECS / "json" / "mlp_tp2.json"
    as_dict = json.loads(path.read_text())
    assert planproof.verify(path).verdict == "verified"
    assert planproof.verify(as_dict).verdict == "verified"
    assert planproof.verify(planproof.load_text(path.read_text())).verdict == "verified"
    spec = planproof.load_text(TP2.read_text(), name="tp2.mlir")
    assert spec.name == "tp2.mlir" and spec.ranks == 2
    assert planproof.verify(spec).verdict == "verified"
    bug = json.loads((SPECS / "json" / "mlp_tp2_bias_before_allreduce.json").read_text())
    r = planproof.verify(bug)
    assert r.verdict == "violated" and r.violations[0].kind == bug["expect"]["kind"]


def _mlp(reduce_kind):
    """The tensor-parallel matmul of the JSON format's example, built in code."""
    s = SpecBuilder("tp=2 matmul")
    ref = s.reference
    x, w = ref.input("x", [2, 4]), ref.input("w", [4, 2])
    ref.output(ref.op("matmul", [x, w], lhs_dim=1, rhs_dim=0, result="y"))
    plan = s.plan(tp=2)
    px = plan.input("x", dims=[None, "tp"])
    pw = plan.input("w", dims=["tp", None])
    part = plan.op("matmul", [px, pw], lhs_dim=1, rhs_dim=0)
    line = sys._getframe().f_lineno + 1
    y = plan.op("all_reduce", [part], axes=["tp"], kind=reduce_kind)
    plan.output(y, value="y", dims=[None, None])
    return s, line


def test_builder():
    s, _ = _mlp("sum")
    d = s.to_dict()
    assert d["plan"]["mesh"]["axes"] == [{"name": "tp", "size": 2}]
    assert d["plan"]["ops"][1]["attrs"] == {"axes": ["tp"], "kind": "sum"}
    assert planproof.verify(s).verdict == "verified"
    assert planproof.verify(json.loads(s.json())).verdict == "verified"


def test_builder_violation_points_at_the_planners_line():
    s, line = _mlp("avg")
    r = planproof.verify(s)
    assert r.verdict == "violated"
    v = r.violations[0]
    assert v.kind == "reduction"
    assert v.at.file == __file__ and v.at.line == line


def test_builder_refuses_what_it_cannot_write():
    s = SpecBuilder()
    x = s.reference.input("x", [2])
    with pytest.raises(ValueError, match="used before"):
        s.reference.op("neg", ["nope"])
    with pytest.raises(ValueError, match="twice"):
        s.reference.op("neg", [x], result="x")
    with pytest.raises(TypeError):
        s.reference.op("neg", "x")
    with pytest.raises(ValueError, match="no plan"):
        s.to_dict()
    with pytest.raises(ValueError, match="at least one axis"):
        s.plan()


def test_replay():
    r = planproof.replay(TP2, dtype="bf16")
    assert r.ran and not r.diverged
    assert r.outputs and all(o.within for o in r.outputs)
    bad = planproof.replay(AVG)
    assert bad.ran and bad.diverged
    assert bad.first_op == "%y_pre" and bad.first_at.line == 61
    with pytest.raises(ValueError, match="dtype"):
        planproof.replay(TP2, dtype="fp8")
    assert r.seed == 1


def test_replay_never_within_tolerance_on_nothing_compared():
    # A reference that is not finite anywhere: no draw helps, the replay could not run
    # (it must not say within tolerance), and the seed it tried last is reported.
    nf = ROOT / "test" / "CLI" / "Inputs" / "replay_nonfinite.mlir"
    r = planproof.replay(nf)
    assert not r.ran and not r.diverged
    assert "output `y` was not compared" in r.failure
    assert r.seed == 3001


def test_bad_mlir_names_file_and_line(tmp_path):
    f = tmp_path / "broken.mlir"
    text = TP2.read_text().replace("ref.gelu %h_b", "ref.gelu %nowhere", 1)
    f.write_text(text)
    with pytest.raises(SpecError) as e:
        planproof.verify(f)
    line = text[:text.index("%nowhere")].count("\n") + 1
    assert e.value.file == str(f) and e.value.line == line and e.value.column > 0
    assert "undeclared" in e.value.message
    assert str(f) in e.value.diagnostics and "error:" in e.value.diagnostics
    assert str(e.value).startswith(f"{f}:{e.value.line}:")


def test_bad_json_names_the_json_path():
    d = json.loads((SPECS / "json" / "mlp_tp2.json").read_text())
    d["plan"]["ops"][0]["operands"] = ["x", "undefined_value"]
    with pytest.raises(SpecError) as e:
        planproof.verify(d)
    assert "plan.ops[0]" in e.value.message or "plan.ops[0]" in e.value.diagnostics
    assert "undefined_value" in e.value.diagnostics
    with pytest.raises(SpecError, match="JSON"):
        planproof.verify({"reference": {"inputs": [object()]}})


def test_other_bad_sources():
    with pytest.raises(SpecError, match="no such file"):
        planproof.verify("no/such/spec.mlir")
    with pytest.raises(SpecError, match="load_text"):
        planproof.verify(TP2.read_text())
    with pytest.raises(TypeError):
        planproof.verify(42)
    with pytest.raises(SpecError):
        planproof.load_text("module {", name="cut.mlir")
    with pytest.raises(SpecError):
        planproof.load_text("{", name="cut.json")
    with pytest.raises(ValueError, match="engine"):
        planproof.verify(TP2, engine="fast")
    with pytest.raises(ValueError, match="time_limit"):
        planproof.verify(TP2, time_limit=0)


def test_plan_generator():
    text = planproof.plan(MODEL, "dp=2,tp=2,sp,layers=1")
    assert "dist.mesh" in text and "ref.reference" in text
    assert planproof.verify(planproof.load_text(text, name="gen.mlir")).verdict == "verified"
    with pytest.raises(SpecError):
        planproof.plan(MODEL, "dp=two")
    with pytest.raises(SpecError) as e:
        planproof.plan(SPECS / "models" / "missing.json", "dp=2")
    assert "missing.json" in e.value.file


def _plan_part(text):
    """The mesh and the plan function of a generated spec (what load_plan takes)."""
    at = text.index("\n  dist.mesh")
    return "module {\n" + text[at + 1:]


def test_planner_loop_reuses_the_reference():
    text = planproof.plan(MODEL, "dp=4,tp=4,sp,layers=1,size=full")
    session = planproof.Session()
    base = session.load_text(text, name="base.mlir")
    first = session.verify(base, engine="layout")
    assert first.verdict == "verified" and not first.stats.reused_reference
    plan = _plan_part(text)
    again = session.verify(session.load_plan(base, plan), engine="layout")
    assert again.verdict == "verified"
    assert again.stats.reused_reference and again.stats.reused_states == again.stats.plan_ops
    # One collective changed: the layout engine cannot prove it; the rest is reused.
    at = plan.index('"sum"')
    changed = plan[:at] + '"avg"' + plan[at + 5:]
    r = session.verify(session.load_plan(base, changed, name="cand.mlir"), engine="layout")
    assert r.verdict == "inconclusive" and r.inconclusive
    assert 0 < r.stats.reused_states < r.stats.plan_ops
    with pytest.raises(SpecError):
        session.load_plan(base, "module {")
    other = planproof.Session()
    with pytest.raises(ValueError, match="another Session"):
        other.verify(base)
    with pytest.raises(ValueError, match="another Session"):
        other.load_plan(base, plan)


def test_planner_loop_edits_the_loaded_plan():
    text = planproof.plan(MODEL, "dp=4,tp=4,sp,layers=1,size=full")
    session = planproof.Session()
    spec = session.load_text(text, name="base.mlir")
    assert session.verify(spec, engine="layout").verdict == "verified"
    # A gradient's all_reduce over dp (after the loss the plan differentiates).
    grad = '%g_l0_wq over ["dp"] "sum"'
    line = next(l for l in text.splitlines() if grad in l)
    name = line.split("=")[0].strip()
    undo = session.edit(spec, [(name, "kind", '"avg"')])
    assert undo == [(name, "kind", '"sum"')]
    r = session.verify(spec, engine="layout")
    alone = planproof.Session()
    byitself = alone.verify(alone.load_text(text.replace(grad, grad.replace("sum", "avg")),
                                            name="base.mlir"), engine="layout")
    assert r.verdict == byitself.verdict == "inconclusive"
    assert [(str(a), w) for a, w in r.inconclusive] == [(str(a), w) for a, w in byitself.inconclusive]
    assert 0 < r.stats.reused_states < r.stats.plan_ops
    assert session.edit(spec, undo) == [(name, "kind", '"avg"')]
    back = session.verify(spec, engine="layout")
    assert back.verdict == "verified" and back.stats.reused_states == back.stats.plan_ops
    # Edits that cannot be made raise and change nothing.
    with pytest.raises(SpecError, match="no op of the plan function defines"):
        session.edit(spec, [("%nowhere", "kind", '"avg"')])
    # A forward collective: its derived adjoint changes with it, as a fresh derivation
    # of the changed text would make it.
    rs = '%l0_attn_3d over ["tp"] dim 1 "sum"'
    undo = session.edit(spec, [("%l0_attn_rs", "axes", '["dp"]')])
    r = session.verify(spec, engine="layout")
    byitself = alone.verify(alone.load_text(text.replace(rs, rs.replace('"tp"', '"dp"')),
                                            name="base.mlir"), engine="layout")
    assert r.verdict == byitself.verdict == "inconclusive"
    assert [(str(a), w) for a, w in r.inconclusive] == [(str(a), w) for a, w in byitself.inconclusive]
    session.edit(spec, undo)
    # What the derivation read beyond a collective's own attributes: load the text.
    with pytest.raises(SpecError, match="is differentiated by the plan's derivation"):
        session.edit(spec, [("%l0_attn_rs", "kind", '"avg"')])
    assert session.verify(spec, engine="layout").verdict == "verified"
    with pytest.raises(ValueError, match="another Session"):
        planproof.Session().edit(spec, undo)


def test_sessions_in_threads():
    results = []

    def work():
        results.append(planproof.verify(TP2).verdict)

    threads = [threading.Thread(target=work) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == ["verified"] * 3


def test_type_hints_name_what_the_extension_has():
    """The type hints (python/planproof/_planproof.pyi): every attribute they declare exists."""
    import ast
    ext = planproof._extension()
    tree = ast.parse((pathlib.Path(planproof.__file__).parent / "_planproof.pyi").read_text())
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            cls = getattr(ext, node.name)
            for item in node.body:
                name = item.target.id if isinstance(item, ast.AnnAssign) else \
                    item.name if isinstance(item, ast.FunctionDef) else None
                if name and name != "__init__":
                    assert hasattr(cls, name), f"{node.name}.{name}"
        elif isinstance(node, ast.FunctionDef):
            assert hasattr(ext, node.name)


def test_the_readme_line_from_the_source_tree():
    """The issue's line, with the README's set-up only: python3 in the source tree."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PLANPROOF_BUILD")}
    if os.environ.get("PLANPROOF_BUILD") and not (ROOT / "build" / "python").is_dir():
        pytest.skip("the build folder is not the source tree's build/")
    p = subprocess.run(
        ["python3", "-c", "import planproof; print(planproof.verify("
         "'verify-specs/mlp/mlp_tp2.mlir').verdict)"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "verified"
