//===- JsonExport.cpp - specs back to the JSON interchange format -*- C++ -*-===//
#include "Import/JsonExport.h"
#include "Support/Printable.h"

#include "Dist/DistDialect.h"
#include "Import/JsonImport.h"
#include "Ref/RefDialect.h"
#include "Spec/Spec.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"

#include <nlohmann/json.hpp>

#include <set>

using namespace mlir;
using namespace planproof;
using json = nlohmann::ordered_json;

namespace {

struct Exporter {
  Exporter(const Spec &spec, std::string &error) : spec(spec), error(error) {}
  const Spec &spec;
  std::string &error;
  llvm::DenseMap<Value, std::string> names;
  std::set<std::string> used;

  std::string fresh(std::string base) {
    if (base.empty() || base[0] == '<')
      base = "v";
    std::string n = base;
    for (int i = 1; used.count(n); ++i)
      n = base + "_" + std::to_string(i);
    used.insert(n);
    return n;
  }
  std::string nameOf(Value v) {
    auto it = names.find(v);
    if (it != names.end())
      return it->second;
    std::string n = spec.nameOf(v);
    if (!n.empty() && n[0] == '%')
      n = n.substr(1);
    return names[v] = fresh(n);
  }

  static json shapeOf(Type t) {
    json s = json::array();
    for (int64_t d : cast<RankedTensorType>(t).getShape())
      s.push_back(d);
    return s;
  }

  json layout(Attribute a) {
    auto l = cast<dist::LayoutAttr>(a);
    json dims = json::array();
    ArrayRef<int64_t> segs = l.getSegments() ? l.getSegments().asArrayRef() : ArrayRef<int64_t>{};
    for (auto [i, d] : llvm::enumerate(l.getDims())) {
      auto axes = cast<ArrayAttr>(d);
      json entry;
      if (axes.size() == 1)
        entry = cast<StringAttr>(axes[0]).getValue().str();
      else if (!axes.empty()) {
        entry = json::array();
        for (Attribute x : axes)
          entry.push_back(cast<StringAttr>(x).getValue().str());
      }
      if (i < segs.size() && segs[i] == dist::kZigzagSegments)
        entry = json{{"axes", entry}, {"segments", "zigzag"}};
      else if (i < segs.size() && segs[i] != 1)
        entry = json{{"axes", entry}, {"segments", segs[i]}};
      dims.push_back(entry);
    }
    json out = {{"dims", dims}};
    json partial = json::object();
    const char *kinds[3] = {"sum", "avg", "max"};
    ArrayAttr lists[3] = {l.getSum(), l.getAvg(), l.getMax()};
    for (int k = 0; k < 3; ++k)
      if (lists[k] && !lists[k].empty()) {
        json axes = json::array();
        for (Attribute x : lists[k])
          axes.push_back(cast<StringAttr>(x).getValue().str());
        partial[kinds[k]] = axes;
      }
    if (!partial.empty())
      out["partial"] = partial;
    return out;
  }

  bool op(Operation &o, json &ops) {
    std::string name = o.getName().getStringRef().str();
    // Rank-coordinate arithmetic on index values.
    if (auto ax = dyn_cast<dist::AxisIndexOp>(o)) {
      ops.push_back({{"result", nameOf(ax.getResult())}, {"op", "dist.axis_index"},
                     {"operands", json::array()}, {"attrs", {{"axis", ax.getAxis().str()}}}});
      return true;
    }
    if (o.getNumResults() == 1 && o.getResult(0).getType().isIndex()) {
      json j = {{"result", nameOf(o.getResult(0))}, {"op", name}};
      json operands = json::array();
      for (Value v : o.getOperands())
        operands.push_back(nameOf(v));
      j["operands"] = operands;
      if (auto c = dyn_cast<arith::ConstantOp>(o)) {
        auto v = dyn_cast<IntegerAttr>(c.getValue());
        if (!v) {
          error = toSourceLoc(o.getLoc()).str() + ": a non-integer index constant";
          return false;
        }
        j["attrs"] = {{"value", v.getInt()}};
      } else if (!isa<arith::AddIOp, arith::SubIOp, arith::MulIOp>(o)) {
        error = toSourceLoc(o.getLoc()).str() + ": '" + name +
                "' on index values cannot be written in the JSON format";
        return false;
      }
      ops.push_back(j);
      return true;
    }
    auto table = jsonOpAttributes().find(name);
    if (table == jsonOpAttributes().end() || o.getNumResults() != 1) {
      error = toSourceLoc(o.getLoc()).str() + ": '" + name +
              "' cannot be written in the JSON format (multi-result ops are MLIR only)";
      return false;
    }
    json j = {{"result", nameOf(o.getResult(0))}, {"op", name}};
    json operands = json::array();
    for (Value v : o.getOperands()) {
      operands.push_back(nameOf(v));
    }
    j["operands"] = operands;
    json attrs = json::object();
    for (auto &[key, kind] : table->second) {
      Attribute a = o.getAttr(key);
      if (kind == "flag") {
        if (a)
          attrs[key] = true;
        continue;
      }
      if (kind == "int?" && !a)
        continue;
      if (kind == "int" || kind == "int?")
        attrs[key] = cast<IntegerAttr>(a).getInt();
      else if (kind == "float")
        attrs[key] = cast<FloatAttr>(a).getValueAsDouble();
      else if (kind == "string")
        attrs[key] = cast<StringAttr>(a).getValue().str();
      else if (kind == "int[]")
        attrs[key] = std::vector<int64_t>(cast<DenseI64ArrayAttr>(a).asArrayRef());
      else if (kind == "float[]")
        attrs[key] = std::vector<double>(cast<DenseF64ArrayAttr>(a).asArrayRef());
      else if (kind == "coords") {
        json coords = json::object();
        for (NamedAttribute c : cast<DictionaryAttr>(a))
          coords[c.getName().str()] = cast<IntegerAttr>(c.getValue()).getInt();
        attrs[key] = coords;
      } else {
        json list = json::array();
        for (Attribute x : cast<ArrayAttr>(a))
          list.push_back(cast<StringAttr>(x).getValue().str());
        attrs[key] = list;
      }
    }
    if (!attrs.empty())
      j["attrs"] = attrs;
    if (auto draws = o.getAttrOfType<StringAttr>(dist::kDrawsAttr)) {
      json d = {{"value", draws.getValue().str()}};
      if (Attribute l = o.getAttr(dist::kLayoutAttr))
        d["layout"] = layout(l);
      if (auto off = o.getAttrOfType<DenseI64ArrayAttr>(dist::kBlockOffsetAttr))
        d["block_offset"] = std::vector<int64_t>(off.asArrayRef());
      j["draws"] = d;
    }
    if (auto role = o.getAttrOfType<StringAttr>("ref.role"))
      j["role"] = role.getValue().str();
    if (!isa<InferTypeOpInterface>(o) && !isa<dist::DistDialect>(o.getDialect()))
      j["shape"] = shapeOf(o.getResult(0).getType());
    ops.push_back(j);
    return true;
  }

  /// Pipelined and checkpoint specs have no JSON form yet.
  bool checkExportable() {
    func::FuncOp plan = spec.plan;
    // A spec whose calls were not expanded (past the expansion's bound) has nothing
    // the JSON format can write in their place.
    if (!spec.undecidable.empty()) {
      error = spec.undecidableAt.str() + ": error: cannot export this spec: " + spec.undecidable;
      return false;
    }
    // What is written must be readable again: at most kMaxExportOps ops (each a JSON
    // object of a few hundred bytes, well under the input limit).
    int64_t ops = 0;
    for (func::FuncOp f : {spec.reference, spec.plan})
      f.walk([&](Operation *) { ++ops; });
    if (ops > (int64_t)kMaxExportOps) {
      error = toSourceLoc(plan.getLoc()).str() + ": error: cannot export this spec: its " +
              std::to_string(ops) + " ops (its calls expanded) are more than the " +
              std::to_string(kMaxExportOps) + " a JSON spec may hold";
      return false;
    }
    bool checkpoints = static_cast<bool>(spec.resume);
    plan.walk([&](dist::SaveOp) { checkpoints = true; });
    if (spec.pipelineAxis >= 0) {
      error = toSourceLoc(plan.getLoc()).str() +
              ": error: pipelined plans (dist.send, dist.recv, stages) are MLIR only; the JSON "
              "format has no pipeline ops yet";
      return false;
    }
    if (checkpoints) {
      error = toSourceLoc(plan.getLoc()).str() +
              ": error: checkpoint specs (dist.save, dist.load and a resuming plan) are MLIR only; "
              "the JSON format has no checkpoint ops yet";
      return false;
    }
    return true;
  }

  /// The reference's inputs (their names, shapes, dtypes and bounds).
  json referenceInputs() {
    func::FuncOp ref = spec.reference;
    json inputs = json::array();
    for (unsigned i = 0; i < ref.getNumArguments(); ++i) {
      std::string n = spec.refInputs[i];
      names[ref.getArgument(i)] = n;
      used.insert(n);
      if (ref.getArgument(i).getType().isIndex()) {
        inputs.push_back({{"name", n}, {"dtype", "index"}});
        continue;
      }
      json in = {{"name", n}, {"shape", shapeOf(ref.getArgument(i).getType())}};
      if (spec.refInputBounds[i]) {
        auto elem = cast<RankedTensorType>(ref.getArgument(i).getType()).getElementType();
        if (!elem.isF32())
          in["dtype"] = "i64";
        in["bound"] = spec.refInputBounds[i];
      }
      if (spec.refInputNonnegative[i])
        in["nonnegative"] = true;
      inputs.push_back(in);
    }
    return inputs;
  }

  /// The "reference" object: inputs, ops (with copies for repeated outputs), outputs,
  /// updates.
  bool exportReference(json &section) {
    func::FuncOp ref = spec.reference;
    // Reference: outputs are known by their values' names, so values returned as
    // outputs take the output's name (a copy when one value is returned twice or is
    // an input).
    json inputs = referenceInputs(), refOps = json::array(), refOuts = json::array();
    auto ret = cast<func::ReturnOp>(ref.getBody().front().getTerminator());
    llvm::DenseMap<Value, std::string> outputName;
    std::vector<std::pair<Value, std::string>> copies;
    for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
      if (outputName.count(v) || isa<BlockArgument>(v))
        copies.push_back({v, spec.refOutputs[i]});
      else
        outputName[v] = spec.refOutputs[i];
      used.insert(spec.refOutputs[i]);
    }
    for (auto &[v, n] : outputName)
      names[v] = n;
    for (Operation &o : ref.getBody().front()) {
      if (isa<func::ReturnOp>(o))
        continue;
      if (!op(o, refOps))
        return false;
    }
    for (auto &[v, n] : copies) {
      if (v.getType().isIndex()) {
        std::string zero = fresh("zero");
        refOps.push_back({{"result", zero}, {"op", "arith.constant"}, {"operands", json::array()},
                          {"attrs", {{"value", 0}}}});
        refOps.push_back({{"result", n}, {"op", "arith.addi"}, {"operands", {nameOf(v), zero}}});
        continue;
      }
      refOps.push_back({{"result", n}, {"op", "ref.scale"}, {"operands", {nameOf(v)}},
                        {"attrs", {{"factor", 1.0}}}});
    }
    json updates = json::object();
    for (unsigned i = 0; i < ref.getNumResults(); ++i)
      if (auto u = ref.getResultAttrOfType<StringAttr>(i, "ref.updates"))
        updates[spec.refOutputs[i]] = u.getValue().str();
    for (const std::string &n : spec.refOutputs)
      refOuts.push_back(n);
    section = {{"inputs", inputs}, {"ops", refOps}, {"outputs", refOuts}};
    if (!updates.empty())
      section["updates"] = updates;
    return true;
  }

  /// The "plan" object: mesh, rng mode, inputs, ops, outputs (value names start afresh).
  bool exportPlan(json &section) {
    func::FuncOp plan = spec.plan;
    names.clear();
    used.clear();
    json axes = json::array();
    for (size_t i = 0; i < spec.mesh.axes.size(); ++i)
      axes.push_back({{"name", spec.mesh.axes[i]}, {"size", spec.mesh.shape[i]}});
    json pIns = json::array(), pOps = json::array(), pOuts = json::array();
    for (const Binding &b : spec.planInputs) {
      json in = {{"name", nameOf(plan.getArgument(b.index))}, {"value", b.refName}};
      if (!plan.getArgument(b.index).getType().isIndex())
        in["layout"] = layout(plan.getArgAttrOfType<dist::LayoutAttr>(b.index, dist::kLayoutAttr));
      if (b.layout.padded)
        in["padded"] = true;
      pIns.push_back(in);
    }
    for (Operation &o : plan.getBody().front()) {
      if (isa<func::ReturnOp>(o))
        continue;
      if (!op(o, pOps))
        return false;
    }
    auto pret = cast<func::ReturnOp>(plan.getBody().front().getTerminator());
    for (const Binding &b : spec.planOutputs) {
      json out = {{"name", nameOf(pret.getOperand(b.index))}, {"value", b.refName}};
      if (!pret.getOperand(b.index).getType().isIndex())
        out["layout"] =
            layout(plan.getResultAttrOfType<dist::LayoutAttr>(b.index, dist::kLayoutAttr));
      if (b.layout.padded)
        out["padded"] = true;
      pOuts.push_back(out);
    }
    section = {{"mesh", {{"name", spec.mesh.name}, {"axes", axes}}}};
    if (auto rng = plan->getAttrOfType<StringAttr>(dist::kRngAttr))
      section["rng"] = rng.getValue().str();
    section["inputs"] = pIns;
    section["ops"] = pOps;
    section["outputs"] = pOuts;
    return true;
  }

  bool run(std::string &out) {
    if (!checkExportable())
      return false;
    json reference, plan;
    if (!exportReference(reference))
      return false;
    if (!exportPlan(plan))
      return false;
    json doc = {{"planproof", 1}};
    if (!spec.assumptions.empty())
      doc["assumptions"] = spec.assumptions;
    if (spec.expect.present) {
      json e = {{"verdict", spec.expect.verdict}};
      if (!spec.expect.kind.empty())
        e["kind"] = spec.expect.kind;
      if (!spec.expect.at.empty())
        e["at"] = spec.expect.at[0] == '%' ? spec.expect.at.substr(1) : spec.expect.at;
      if (!spec.expect.engine.empty())
        e["engine"] = spec.expect.engine;
      doc["expect"] = e;
    }
    doc["reference"] = reference;
    doc["plan"] = plan;
    out = jsonEscapeHidden(doc.dump(2, ' ', false, json::error_handler_t::replace)) + "\n";
    return true;
  }
};
} // namespace

bool planproof::exportJsonSpec(const Spec &spec, std::string &out, std::string &error) {
  try {
    return Exporter(spec, error).run(out);
  } catch (const std::exception &e) {
    error = std::string("internal error while exporting: ") + e.what();
    return false;
  }
}
