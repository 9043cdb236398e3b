//===- JsonBuild.cpp - JSON ops and functions as ref/dist IR ----*- C++ -*-===//
//
// The JSON importer (JsonImporter.h), its second half: parsing with byte positions, ops
// created generically from their registered names (operand counts from their ODS
// traits, result types inferred by the dialects' shape rules), rank-coordinate and
// index arithmetic, the reference and plan functions, the expectation, and the whole
// run with every error located.
//
//===----------------------------------------------------------------------===//
#include "Import/JsonImporter.h"
#include "Import/SizeExpr.h"

#include "Support/Input.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"

#include <algorithm>
#include <functional>
#include <sstream>

using namespace mlir;
using namespace planproof;
using nlohmann::json;

namespace {
/// "" when `n` operands fit the operand-count trait of `op` (from its ODS definition),
/// else what it takes ("2 operands", "at least 1 operand").
std::string operandArity(RegisteredOperationName op, size_t n) {
  auto plural = [](size_t k) { return std::to_string(k) + (k == 1 ? " operand" : " operands"); };
  size_t exact = SIZE_MAX, atLeast = 0;
  if (op.hasTrait<OpTrait::ZeroOperands>())
    exact = 0;
  else if (op.hasTrait<OpTrait::OneOperand>())
    exact = 1;
  else if (op.hasTrait<OpTrait::NOperands<2>::Impl>())
    exact = 2;
  else if (op.hasTrait<OpTrait::NOperands<3>::Impl>())
    exact = 3;
  else if (op.hasTrait<OpTrait::NOperands<4>::Impl>())
    exact = 4;
  else if (op.hasTrait<OpTrait::NOperands<5>::Impl>())
    exact = 5;
  else if (op.hasTrait<OpTrait::AtLeastNOperands<1>::Impl>())
    atLeast = 1;
  else if (op.hasTrait<OpTrait::AtLeastNOperands<2>::Impl>())
    atLeast = 2;
  else if (op.hasTrait<OpTrait::AtLeastNOperands<3>::Impl>())
    atLeast = 3;
  if (exact != SIZE_MAX)
    return n == exact ? "" : plural(exact);
  return n >= atLeast ? "" : "at least " + plural(atLeast);
}

} // namespace

namespace planproof::json_import {

void Importer::buildOps(const json &ops, const std::string &ptr,
                        std::map<std::string, Value> &values, bool plan) {
  for (size_t i = 0; i < ops.size(); ++i) {
    std::string p = ptr + "/" + std::to_string(i);
    const json &o = ops[i];
    std::string opName = name(o, p, "op");
    if (opName == "axis_index")
      opName = "dist.axis_index";
    if (opName == "dist.axis_index" || opName.rfind("arith.", 0) == 0) {
      if (!plan && opName == "dist.axis_index")
        fail(p + "/op", "rank coordinates ('" + opName + "') belong in the plan");
      buildIndexOp(o, p, opName, values);
      continue;
    }
    if (opName.find('.') == std::string::npos) // bare: the dialect that has it
      opName = (jsonOpAttributes().count("dist." + opName) ? "dist." : "ref.") + opName;
    if (!jsonOpAttributes().count(opName))
      fail(p + "/op", "unknown op '" + opName + "'");
    if (!plan && opName.rfind("dist.", 0) == 0)
      fail(p + "/op", "the reference is single-device; collectives like '" + opName +
                          "' belong in the plan");
    buildTensorOp(o, p, opName, values, plan);
  }
}

/// A ref or dist op, created generically from its registered name: its result, operands
/// and attributes, the operand count of its ODS definition, then its result type.
void Importer::buildTensorOp(const json &o, const std::string &p, const std::string &opName,
                             std::map<std::string, Value> &values, bool plan) {
  std::string result = name(o, p, "result");
  if (values.count(result))
    fail(p + "/result", "value '" + result + "' is defined twice");
  SmallVector<Value> operands;
  const json &ins = field(o, p, "operands", json::value_t::array);
  for (size_t k = 0; k < ins.size(); ++k) {
    std::string q = p + "/operands/" + std::to_string(k);
    if (!ins[k].is_string())
      fail(q, "operands are value names (strings)");
    auto it = values.find(ins[k].get<std::string>());
    if (it == values.end())
      fail(q, "unknown value '" + ins[k].get<std::string>() + "' (not defined before this op)");
    operands.push_back(it->second);
  }
  SmallVector<NamedAttribute> attrs = opAttributes(o, p, opName, plan);
  auto registered = RegisteredOperationName::lookup(opName, &ctx);
  // The operand count the op's ODS definition declares, checked before any shape
  // rule looks at the operands (the rules index them).
  std::string arity = operandArity(*registered, operands.size());
  if (!arity.empty())
    fail(p + "/operands", "op '" + opName + "' takes " + arity + ", got " +
                              std::to_string(operands.size()));
  OperationState state(opLoc(o, p), *registered);
  state.addOperands(operands);
  state.addAttributes(attrs);
  state.addTypes(NoneType::get(&ctx));
  Operation *op = builder.create(state);
  values[result] = op->getResult(0);
  spec.names[op->getResult(0)] = "%" + result;
  // Infer the result type with the dialects' own shape rules.
  inferResultType(op, o, p, opName);
}

/// An op's attributes: its "attrs" (every required one present), and on a plan's
/// ref.dropout_mask its "draws", and its "role".
SmallVector<NamedAttribute> Importer::opAttributes(const json &o, const std::string &p,
                                                   const std::string &opName, bool plan) {
  SmallVector<NamedAttribute> attrs;
  if (o.contains("attrs")) {
    if (!o["attrs"].is_object())
      fail(p + "/attrs", "'attrs' must be an object");
    for (auto it = o["attrs"].begin(); it != o["attrs"].end(); ++it) {
      NamedAttribute a = attribute(opName, it.key(), *it, p + "/attrs/" + it.key());
      if (!(it->is_boolean() && !it->get<bool>()))
        attrs.push_back(a);
    }
  }
  for (auto &[k, t] : jsonOpAttributes().at(opName)) {
    bool given = llvm::any_of(attrs, [&](NamedAttribute a) { return a.getName() == k; });
    if (!given && t != "flag" && t.back() != '?') // flags and "int?" are optional
      fail(p, "op '" + opName + "' needs attribute '" + k + "' (" + t + ")");
  }
  if (o.contains("draws")) {
    // Independent RNG mode: the piece of a reference mask this draw stands for.
    const json &dr = o["draws"];
    std::string q = p + "/draws";
    if (!plan || opName != "ref.dropout_mask" || !dr.is_object())
      fail(q, "'draws' is an object on a plan's ref.dropout_mask");
    std::string v = name(dr, q, "value");
    attrs.push_back(builder.getNamedAttr(dist::kDrawsAttr, builder.getStringAttr(v)));
    if (!o.contains("shape") || !o["shape"].is_array())
      fail(p, "op 'ref.dropout_mask' needs the result 'shape'");
    attrs.push_back(builder.getNamedAttr(
        dist::kLayoutAttr, layout(dr.contains("layout") ? dr["layout"] : json(), q + "/layout",
                                  (int64_t)o["shape"].size())));
    if (dr.contains("block_offset")) {
      const json &off = dr["block_offset"];
      if (!off.is_array())
        fail(q + "/block_offset", "'block_offset' is a list of integers");
      SmallVector<int64_t> offs;
      for (size_t k = 0; k < off.size(); ++k)
        offs.push_back(intValue(off[k], q + "/block_offset/" + std::to_string(k)));
      attrs.push_back(
          builder.getNamedAttr(dist::kBlockOffsetAttr, builder.getDenseI64ArrayAttr(offs)));
    }
  }
  if (o.contains("role")) {
    // The semantic role of the value (a violation kind), as ref.role in MLIR.
    if (!o["role"].is_string())
      fail(p + "/role", "'role' must be a violation kind (a string)");
    attrs.push_back(
        builder.getNamedAttr("ref.role", builder.getStringAttr(o["role"].get<std::string>())));
  }
  return attrs;
}

/// Sets the result type of the just-created `op`: its given 'shape', or what the shape
/// rules of its dialect infer from its operands.
void Importer::inferResultType(Operation *op, const json &o, const std::string &p,
                               const std::string &opName) {
  SmallVector<Type> types;
  if (o.contains("shape")) {
    // Ops whose result shape is not implied by their operands (reshape, broadcast).
    if (isa<InferTypeOpInterface>(op) || isa<dist::DistDialect>(op->getDialect()))
      fail(p + "/shape", "op '" + opName + "' infers its result shape; do not give 'shape'");
    op->getResult(0).setType(RankedTensorType::get(shape(o, p), builder.getF32Type()));
  } else if (!isa<InferTypeOpInterface>(op) && !isa<dist::DistDialect>(op->getDialect())) {
    fail(p, "op '" + opName + "' needs the result 'shape'");
  } else if (isa<dist::SelectOnOp>(op)) {
    // The type of what it selects between.
    op->getResult(0).setType(op->getOperand(0).getType());
  } else if (auto infer = dyn_cast<InferTypeOpInterface>(op)) {
    if (failed(infer.inferReturnTypes(&ctx, op->getLoc(), op->getOperands(),
                                      op->getRawDictionaryAttrs(), op->getPropertiesStorage(),
                                      op->getRegions(), types)))
      fail(p, "the operands do not fit op '" + opName + "' (see the error above)");
    op->getResult(0).setType(types[0]);
  } else {
    FailureOr<RankedTensorType> t = dist::expectedResultType(op);
    if (failed(t))
      fail(p, "invalid collective (see the error above)");
    op->getResult(0).setType(*t);
  }
}

/// Rank-coordinate arithmetic: dist.axis_index and arith.constant/addi/subi/muli on
/// `index` values (the row offset of a vocabulary shard, say).
void Importer::buildIndexOp(const json &o, const std::string &p, const std::string &opName,
                            std::map<std::string, Value> &values) {
  std::string result = name(o, p, "result");
  if (values.count(result))
    fail(p + "/result", "value '" + result + "' is defined twice");
  SmallVector<Value> operands;
  if (o.contains("operands")) {
    const json &ins = field(o, p, "operands", json::value_t::array);
    for (size_t k = 0; k < ins.size(); ++k) {
      std::string q = p + "/operands/" + std::to_string(k);
      auto it = ins[k].is_string() ? values.find(ins[k].get<std::string>()) : values.end();
      if (it == values.end() || !it->second.getType().isIndex())
        fail(q, "expected the name of an index value defined before this op");
      operands.push_back(it->second);
    }
  }
  const json attrs = o.contains("attrs") && o["attrs"].is_object() ? o["attrs"] : json::object();
  Location l = opLoc(o, p);
  Operation *op = nullptr;
  if (opName == "dist.axis_index") {
    if (!attrs.contains("axis") || !attrs["axis"].is_string() || !operands.empty())
      fail(p, "dist.axis_index takes no operands and a string attribute 'axis'");
    op = dist::AxisIndexOp::create(builder, l, builder.getIndexType(),
                                   builder.getStringAttr(attrs["axis"].get<std::string>()));
  } else if (opName == "arith.constant") {
    if (!attrs.contains("value") || !operands.empty())
      fail(p, "arith.constant takes no operands and an integer attribute 'value'");
    op = arith::ConstantOp::create(builder, l,
                                   builder.getIndexAttr(intValue(attrs["value"], p + "/attrs/value")));
  } else if (opName == "arith.addi" || opName == "arith.subi" || opName == "arith.muli") {
    if (operands.size() != 2)
      fail(p + "/operands", opName + " takes two index operands");
    if (opName == "arith.addi")
      op = arith::AddIOp::create(builder, l, operands[0], operands[1]);
    else if (opName == "arith.subi")
      op = arith::SubIOp::create(builder, l, operands[0], operands[1]);
    else
      op = arith::MulIOp::create(builder, l, operands[0], operands[1]);
  } else {
    fail(p + "/op", "unknown op '" + opName + "' (on index values: arith.constant, addi, "
                    "subi, muli)");
  }
  values[result] = op->getResult(0);
  spec.names[op->getResult(0)] = "%" + result;
}

/// The reference's inputs: names, dtypes, shapes, bounds (recorded for the plan).
Importer::FuncArgs Importer::referenceInputs(const json &inputs, const std::string &ptr) {
  FuncArgs args;
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::string p = ptr + "/inputs/" + std::to_string(i);
    std::string n = name(inputs[i], p, "name");
    if (refInputShapes.count(n))
      fail(p + "/name", "input '" + n + "' is declared twice");
    NamedAttrList attrs;
    attrs.append(ref::kNameAttr, builder.getStringAttr(n));
    // Token ids: {"dtype": "i64", "bound": N} (values in [0, N)); integer step inputs
    // (random seeds and counters, step counts): {"dtype": "index"}, no shape.
    std::string dtype = inputs[i].contains("dtype") && inputs[i]["dtype"].is_string()
                            ? inputs[i]["dtype"].get<std::string>() : "f32";
    if (dtype != "f32" && dtype != "i64" && dtype != "index")
      fail(p + "/dtype", "dtype must be \"f32\", \"i64\" or \"index\"");
    if (dtype == "index") {
      if (inputs[i].contains("shape"))
        fail(p + "/shape", "an index input is one integer; it has no shape");
      refInputShapes[n] = {};
      refIndexInputs.insert(n);
      args.add(builder.getIndexType(), loc(p), n, attrs);
      continue;
    }
    Shape s = shape(inputs[i], p);
    refInputShapes[n] = s;
    if (dtype == "i64" || inputs[i].contains("bound")) {
      // f32 with a bound: values are integers in [0, bound) (0/1 masks).
      if (!inputs[i].contains("bound"))
        fail(p, "token ids need a 'bound' (values in [0, bound))");
      int64_t bound = intValue(inputs[i]["bound"], p + "/bound");
      if (bound < 1)
        fail(p + "/bound", "'bound' must be a positive integer");
      refInputBounds[n] = bound;
    }
    if (inputs[i].contains("nonnegative")) {
      if (!inputs[i]["nonnegative"].is_boolean())
        fail(p + "/nonnegative", "'nonnegative' must be true or false");
      if (inputs[i]["nonnegative"].get<bool>()) {
        if (dtype != "f32" || inputs[i].contains("bound"))
          fail(p + "/nonnegative", "'nonnegative' applies to real (f32) inputs without a 'bound'");
        refNonnegative.insert(n);
      }
    }
    if (dtype == "i64")
      refI64Inputs.insert(n);
    if (refInputBounds.count(n))
      attrs.append("ref.bound", builder.getI64IntegerAttr(refInputBounds[n]));
    if (refNonnegative.count(n))
      attrs.append("ref.nonnegative", builder.getUnitAttr());
    args.add(RankedTensorType::get(
                 s, dtype == "i64" ? Type(builder.getI64Type()) : Type(builder.getF32Type())),
             loc(p), n, attrs);
  }
  return args;
}

/// Creates the body of `func` with `args` as its arguments, known in `values` and in
/// spec.names by their names, with their attributes.
Block *Importer::bindArguments(func::FuncOp func, const FuncArgs &args, const std::string &ptr,
                               std::map<std::string, Value> &values) {
  Block *body = builder.createBlock(&func.getBody(), {}, args.types, args.locs);
  // Argument and result attributes are set once per function: setting them one index
  // at a time rebuilds the whole array each time (quadratic in the count).
  SmallVector<DictionaryAttr> argDicts;
  for (size_t i = 0; i < args.names.size(); ++i) {
    if (values.count(args.names[i]))
      fail(ptr + "/inputs/" + std::to_string(i) + "/name",
           "value '" + args.names[i] + "' is defined twice");
    values[args.names[i]] = body->getArgument(i);
    spec.names[body->getArgument(i)] = "%" + args.names[i];
    argDicts.push_back(args.attrs[i].getDictionary(&ctx));
  }
  func.setAllArgAttrs(argDicts);
  return body;
}

func::FuncOp Importer::buildReference(const json &ref, const std::string &ptr) {
  const json &inputs = field(ref, ptr, "inputs", json::value_t::array);
  const json &ops = field(ref, ptr, "ops", json::value_t::array);
  const json &outputs = field(ref, ptr, "outputs", json::value_t::array);
  FuncArgs args = referenceInputs(inputs, ptr);
  auto func = func::FuncOp::create(loc(ptr), "reference", builder.getFunctionType(args.types, {}));
  func->setAttr(ref::kReferenceAttr, builder.getUnitAttr());
  std::map<std::string, Value> values;
  Block *body = bindArguments(func, args, ptr, values);
  builder.setInsertionPointToEnd(body);
  buildOps(ops, ptr + "/ops", values, false);
  SmallVector<Value> results;
  for (size_t i = 0; i < outputs.size(); ++i) {
    std::string p = ptr + "/outputs/" + std::to_string(i);
    if (!outputs[i].is_string())
      fail(p, "reference outputs are value names (strings)");
    auto it = values.find(outputs[i].get<std::string>());
    if (it == values.end())
      fail(p, "unknown value '" + outputs[i].get<std::string>() + "'");
    results.push_back(it->second);
  }
  func::ReturnOp::create(builder, loc(ptr + "/outputs"), results);
  func.setType(builder.getFunctionType(args.types, ValueRange(results).getTypes()));
  setReferenceResultAttrs(func, ref, ptr);
  return func;
}

/// The reference's result attributes: each output's name, and the step inputs that
/// outputs update ("updates").
void Importer::setReferenceResultAttrs(func::FuncOp func, const json &ref,
                                       const std::string &ptr) {
  const json &outputs = ref["outputs"];
  std::vector<NamedAttrList> resultAttrs(outputs.size());
  std::map<std::string, size_t> outputIndex;
  for (size_t i = 0; i < outputs.size(); ++i) {
    resultAttrs[i].append(ref::kNameAttr, builder.getStringAttr(outputs[i].get<std::string>()));
    outputIndex.emplace(outputs[i].get<std::string>(), i);
  }
  if (ref.contains("updates")) {
    // {"offset_next": "offset"}: an output is the next value of a step input.
    const json &up = ref["updates"];
    if (!up.is_object())
      fail(ptr + "/updates", "'updates' maps output names to the inputs they update");
    for (auto it = up.begin(); it != up.end(); ++it) {
      std::string q = ptr + "/updates/" + it.key();
      auto pos = outputIndex.find(it.key());
      if (pos == outputIndex.end())
        fail(q, "'" + it.key() + "' is not an output of the reference");
      if (!it->is_string() || !refInputShapes.count(it->get<std::string>()))
        fail(q, "the updated input must be the name of a reference input");
      resultAttrs[pos->second].set("ref.updates", builder.getStringAttr(it->get<std::string>()));
    }
  }
  SmallVector<DictionaryAttr> resultDicts;
  for (NamedAttrList &a : resultAttrs)
    resultDicts.push_back(a.getDictionary(&ctx));
  func.setAllResultAttrs(resultDicts);
}

/// The plan's mesh ("mesh": name and axes), its axes recorded in meshAxes.
dist::MeshOp Importer::buildMesh(const json &mesh, const std::string &ptr) {
  const json &axes = field(mesh, ptr, "axes", json::value_t::array);
  if (axes.empty())
    fail(ptr + "/axes", "a mesh needs at least one axis");
  SmallVector<Attribute> axisNames;
  SmallVector<int64_t> sizes;
  int64_t ranks = 1;
  for (size_t i = 0; i < axes.size(); ++i) {
    std::string p = ptr + "/axes/" + std::to_string(i);
    std::string n = name(axes[i], p, "name");
    if (std::string why = axisNameProblem(n); !why.empty())
      fail(p + "/name", why);
    const json &size = field(axes[i], p, "size", json::value_t::number_integer);
    int64_t s = size.get<int64_t>();
    if (s < 1 || s > (int64_t(1) << 20) || ranks > (int64_t(1) << 40) / s)
      fail(p + "/size",
           "mesh axis sizes must be between 1 and 2^20, and the mesh at most 2^40 ranks");
    if (meshAxes.count(n))
      fail(p + "/name", "mesh axis '" + n + "' is declared twice");
    ranks *= s;
    meshAxes[n] = s;
    axisNames.push_back(builder.getStringAttr(n));
    sizes.push_back(s);
  }
  std::string meshName = mesh.contains("name") ? name(mesh, ptr, "name") : "mesh";
  return dist::MeshOp::create(builder, loc(ptr), meshName, builder.getArrayAttr(axisNames),
                              builder.getDenseI64ArrayAttr(sizes));
}

/// The plan's inputs: the reference input each holds and its layout, local shape and
/// padding.
Importer::FuncArgs Importer::planInputs(const json &inputs, const std::string &ptr) {
  FuncArgs args;
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::string p = ptr + "/inputs/" + std::to_string(i);
    std::string n = name(inputs[i], p, "name");
    std::string v = name(inputs[i], p, "value");
    auto it = refInputShapes.find(v);
    if (it == refInputShapes.end())
      fail(p + "/value", "'" + v + "' is not an input of the reference");
    NamedAttrList attrs;
    attrs.append(dist::kValueAttr, builder.getStringAttr(v));
    if (refIndexInputs.count(v)) {
      // One integer, the same on every rank: no layout.
      if (inputs[i].contains("layout") || inputs[i].contains("shape"))
        fail(p, "'" + v + "' is an index; it takes no layout or shape");
      args.add(builder.getIndexType(), loc(p), n, attrs);
      continue;
    }
    dist::LayoutAttr l = layout(inputs[i].contains("layout") ? inputs[i]["layout"] : json(),
                                p + "/layout", it->second.size());
    // The local shape follows from the reference shape and the layout (rounded up
    // when the layout is padded).
    bool padded = inputs[i].contains("padded") && inputs[i]["padded"] == true;
    Shape local = it->second;
    for (size_t d = 0; d < local.size(); ++d) {
      int64_t parts = 1;
      for (Attribute a : cast<ArrayAttr>(l.getDims()[d]))
        parts *= meshAxes[cast<StringAttr>(a).getValue().str()];
      int64_t segs = l.getSegments() && !l.getSegments().empty() ? l.getSegments()[d] : 1;
      if (padded && segs == 1) {
        local[d] = (local[d] + parts - 1) / parts;
        continue;
      }
      if (local[d] % (parts * segs) != 0)
        fail(p + "/layout/dims/" + std::to_string(d),
             "dimension " + std::to_string(d) + " of '" + v + "' (size " +
                 std::to_string(local[d]) + ") does not divide by the " + std::to_string(parts) +
                 " ranks splitting it (if its shards are padded, say \"padded\": true)");
      local[d] /= parts;
    }
    if (inputs[i].contains("shape") && shape(inputs[i], p) != local)
      fail(p + "/shape", "local shape " + shapeStr(shape(inputs[i], p)) +
                             " is not the shard " + shapeStr(local) + " of '" + v + "'");
    attrs.append(dist::kLayoutAttr, l);
    if (padded) {
      paddedArgs.insert(i);
      attrs.append(dist::kPaddedAttr, builder.getUnitAttr());
    }
    args.add(RankedTensorType::get(local, refI64Inputs.count(v) ? Type(builder.getI64Type())
                                                                : Type(builder.getF32Type())),
             loc(p), n, attrs);
  }
  return args;
}

func::FuncOp Importer::buildPlan(const json &plan, const std::string &ptr, dist::MeshOp &meshOut) {
  const json &mesh = field(plan, ptr, "mesh", json::value_t::object);
  meshOut = buildMesh(mesh, ptr + "/mesh");
  const json &inputs = field(plan, ptr, "inputs", json::value_t::array);
  // Checked here, used by the caller once the function is in the module.
  field(plan, ptr, "ops", json::value_t::array);
  field(plan, ptr, "outputs", json::value_t::array);
  FuncArgs args = planInputs(inputs, ptr);
  auto func = func::FuncOp::create(loc(ptr), "plan", builder.getFunctionType(args.types, {}));
  func->setAttr(dist::kMeshAttr, FlatSymbolRefAttr::get(&ctx, meshOut.getSymName()));
  if (plan.contains("rng")) {
    if (!plan["rng"].is_string() || (plan["rng"] != "exact" && plan["rng"] != "independent"))
      fail(ptr + "/rng", "'rng' is \"exact\" or \"independent\"");
    func->setAttr(dist::kRngAttr, builder.getStringAttr(plan["rng"].get<std::string>()));
  }
  std::map<std::string, Value> values;
  bindArguments(func, args, ptr, values);
  return func; // ops and outputs are added by the caller once the function is in the module
}

void Importer::expectation(const json &j, const std::string &ptr, ModuleOp module) {
  if (!j.is_object())
    fail(ptr, "'expect' must be an object");
  SmallVector<NamedAttribute> fields;
  for (const char *k : {"verdict", "kind", "at", "engine"})
    if (j.contains(k)) {
      if (!j[k].is_string())
        fail(ptr + "/" + k, std::string("'") + k + "' must be a string");
      fields.push_back(builder.getNamedAttr(k, builder.getStringAttr(j[k].get<std::string>())));
    }
  module->setAttr("planproof.expect", builder.getDictionaryAttr(fields));
}

void Importer::assumptions(const json &j, const std::string &ptr, ModuleOp module) {
  if (!j.is_array())
    fail(ptr, "'assumptions' must be an array of strings");
  SmallVector<Attribute> texts;
  for (size_t i = 0; i < j.size(); ++i) {
    if (!j[i].is_string() || j[i].get<std::string>().empty())
      fail(ptr + "/" + std::to_string(i), "an assumption must be a non-empty string");
    texts.push_back(builder.getStringAttr(j[i].get<std::string>()));
  }
  module->setAttr("planproof.assumptions", builder.getArrayAttr(texts));
}

bool Importer::run(const std::string &text, Diagnostics &diags) {
  if (!doc.parse(path, text, diags))
    return false;
  json &root = doc.root;
  OwningOpRef<ModuleOp> module(ModuleOp::create(FileLineColLoc::get(&ctx, path, 1, 1)));
  // Diagnostics from the dialects' shape rules and verifiers, located in the JSON file.
  CollectMlirDiagnostics collect(ctx, diags);
  try {
    if (!root.is_object())
      fail("", "a spec must be a JSON object with 'reference' and 'plan'");
    if (root.contains("planproof") && !(root["planproof"].is_number_integer() && root["planproof"] == 1))
      fail("/planproof", "unsupported format version (this planproof reads version 1)");
    readDims(root);
    builder.setInsertionPointToEnd(module->getBody());
    const json &ref = field(root, "", "reference", json::value_t::object);
    const json &plan = field(root, "", "plan", json::value_t::object);
    func::FuncOp refFunc = buildReference(ref, "/reference");
    module->push_back(refFunc);
    builder.setInsertionPointToEnd(module->getBody());
    dist::MeshOp mesh;
    func::FuncOp planFunc = buildPlan(plan, "/plan", mesh);
    module->push_back(planFunc);
    // Build the plan body now that the function can see its mesh.
    std::map<std::string, Value> values;
    Block &body = planFunc.getBody().front();
    for (unsigned i = 0; i < body.getNumArguments(); ++i)
      values[spec.names[body.getArgument(i)].substr(1)] = body.getArgument(i);
    builder.setInsertionPointToEnd(&body);
    buildOps(plan["ops"], "/plan/ops", values, true);
    const json &outputs = plan["outputs"];
    SmallVector<Value> results;
    for (size_t i = 0; i < outputs.size(); ++i) {
      std::string p = "/plan/outputs/" + std::to_string(i);
      std::string from = name(outputs[i], p, "name");
      auto it = values.find(from);
      if (it == values.end())
        fail(p + "/name", "unknown value '" + from + "'");
      results.push_back(it->second);
    }
    func::ReturnOp::create(builder, loc("/plan/outputs"), results);
    planFunc.setType(builder.getFunctionType(planFunc.getArgumentTypes(),
                                             ValueRange(results).getTypes()));
    SmallVector<DictionaryAttr> resultDicts;
    for (size_t i = 0; i < outputs.size(); ++i) {
      std::string p = "/plan/outputs/" + std::to_string(i);
      std::string v = name(outputs[i], p, "value");
      NamedAttrList attrs;
      attrs.append(dist::kValueAttr, builder.getStringAttr(v));
      if (results[i].getType().isIndex()) {
        if (outputs[i].contains("layout"))
          fail(p + "/layout", "'" + v + "' is an index; it takes no layout");
        resultDicts.push_back(attrs.getDictionary(&ctx));
        continue;
      }
      auto rank = cast<RankedTensorType>(results[i].getType()).getRank();
      if (outputs[i].contains("padded") && outputs[i]["padded"] == true)
        attrs.append(dist::kPaddedAttr, builder.getUnitAttr());
      attrs.append(dist::kLayoutAttr,
                   layout(outputs[i].contains("layout") ? outputs[i]["layout"] : json(),
                          p + "/layout", rank));
      resultDicts.push_back(attrs.getDictionary(&ctx));
    }
    planFunc.setAllResultAttrs(resultDicts);
    if (root.contains("expect"))
      expectation(root["expect"], "/expect", *module);
    if (root.contains("assumptions"))
      assumptions(root["assumptions"], "/assumptions", *module);
  } catch (const JsonError &e) {
    return diags.error(toSourceLoc(loc(e.path)), readableJsonPath(e.path) + ": " + e.message);
  } catch (const json::exception &e) {
    return diags.error({path}, e.what());
  }
  if (failed(verify(*module)))
    return false;
  spec.modules.push_back(std::move(module));
  return true;
}
} // namespace planproof::json_import
