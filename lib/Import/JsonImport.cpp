//===- JsonImport.cpp - the JSON interchange format -------------*- C++ -*-===//
//
// JSON -> ref/dist dialects. nlohmann/json parses (with exceptions, caught here); a
// small position scanner maps JSON pointers to line:col; ops are created generically
// from their registered names with result types inferred by the dialects' own shape
// rules, then the module is verified like any parsed MLIR.
//
//===----------------------------------------------------------------------===//
#include "Import/JsonImport.h"
#include "Import/SizeExpr.h"

#include "Dist/DistDialect.h"
#include "Support/Rational.h"
#include "Ref/RefDialect.h"
#include "Spec/Spec.h"
#include "Support/Input.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <set>
#include <functional>
#include <sstream>

using namespace mlir;
using namespace planproof;
using nlohmann::json;

const std::map<std::string, std::map<std::string, std::string>> &planproof::jsonOpAttributes() {
  // Generated from the ops' ODS definitions (tools/planproof-tblgen): every op of the
  // JSON format with each attribute's kind.
  static const std::map<std::string, std::map<std::string, std::string>> table = {
#include "Ref/RefJsonOps.inc"
#include "Dist/DistJsonOps.inc"
  };
  return table;
}

//===----------------------------------------------------------------------===//
// Import
//===----------------------------------------------------------------------===//

namespace {
/// Thrown for bad input; carries the JSON pointer of the offending value.
struct JsonError {
  std::string path, message;
};

/// "/plan/ops/3/operands/1" -> "plan.ops[3].operands[1]"
std::string dotted(const std::string &ptr) {
  std::string out;
  std::stringstream ss(ptr);
  std::string part;
  std::getline(ss, part, '/');
  while (std::getline(ss, part, '/')) {
    bool index = !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit);
    out += index ? "[" + part + "]" : (out.empty() ? "" : ".") + part;
  }
  return out.empty() ? "(top level)" : out;
}

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

/// nlohmann's DOM builder, with every error kept with its byte position: syntax errors
/// and numbers outside the doubles (1e999), which json::parse reports without one.
struct LocatingDomParser : nlohmann::detail::json_sax_dom_parser<json> {
  using Base = nlohmann::detail::json_sax_dom_parser<json>;
  explicit LocatingDomParser(json &root) : Base(root, /*allow_exceptions=*/false) {}
  size_t errorByte = 0;
  std::string message;
  bool parse_error(std::size_t position, const std::string &token,
                   const nlohmann::detail::exception &ex) {
    errorByte = position;
    std::string what = ex.what();
    if (ex.id == 406)
      message = "the number " + token + " is outside the range of doubles";
    else
      message = what.find("parse error") != std::string::npos ? what.substr(what.find("parse error"))
                                                               : what;
    return false;
  }
};

bool parseJsonLocated(const std::string &text, json &root, size_t &byte, std::string &why) {
  LocatingDomParser handler(root);
  bool ok = false;
  try {
    ok = json::sax_parse(text, &handler, json::input_format_t::json, /*strict=*/true);
  } catch (const json::exception &e) {
    handler.message = e.what();
  }
  if (ok)
    return true;
  byte = handler.errorByte;
  why = handler.message.empty() ? "malformed JSON" : handler.message;
  root = json();
  return false;
}

class Importer {
public:
  Importer(MLIRContext &ctx, const std::string &path, Spec &spec)
      : ctx(ctx), path(path), spec(spec), builder(&ctx) {}

  bool run(const std::string &text, std::string &errors);

private:
  Location loc(const std::string &ptr) {
    auto it = positions.find(ptr);
    if (it == positions.end())
      return FileLineColLoc::get(&ctx, path, 1, 1);
    return FileLineColLoc::get(&ctx, path, it->second.first, it->second.second);
  }
  [[noreturn]] void fail(const std::string &ptr, const std::string &msg) { throw JsonError{ptr, msg}; }
  /// An op's location: its place in the JSON file, and first, where an importer from a
  /// framework recorded one, the user's source line (`"loc": {"file", "line", "col"}`):
  /// diagnostics then point at the user's code.
  Location opLoc(const json &o, const std::string &p) {
    if (!o.contains("loc"))
      return loc(p);
    const json &l = o["loc"];
    if (!l.is_object() || !l.contains("file") || !l["file"].is_string() || !l.contains("line") ||
        !l["line"].is_number_integer() || (l.contains("col") && !l["col"].is_number_integer()))
      fail(p + "/loc", "'loc' must be {\"file\": string, \"line\": integer, \"col\": integer}");
    int64_t line = l["line"].get<int64_t>(), col = l.contains("col") ? l["col"].get<int64_t>() : 1;
    if (line < 1 || line > (1 << 30) || col < 1 || col > (1 << 20))
      fail(p + "/loc", "'loc' line and col must be positive");
    // A relative path is relative to the JSON file's folder (captures checked in as
    // fixtures beside the code they come from).
    std::string file = l["file"].get<std::string>();
    if (!file.empty() && !llvm::sys::path::is_absolute(file)) {
      llvm::SmallString<256> joined(llvm::sys::path::parent_path(path));
      llvm::sys::path::append(joined, file);
      llvm::sys::path::remove_dots(joined, true);
      file = std::string(joined);
    }
    readUserSource(file);
    Location user = FileLineColLoc::get(&ctx, file, (unsigned)line, (unsigned)col);
    return FusedLoc::get(&ctx, {user, loc(p)});
  }
  /// The user's source file named by a `loc`, for the snippets of diagnostics: read once,
  /// only a regular file of at most 4 MiB (a missing one shows no snippet).
  void readUserSource(const std::string &file) {
    if (spec.sources.count(file))
      return;
    std::vector<std::string> &lines = spec.sources[file];
    llvm::sys::fs::file_status st;
    if (llvm::sys::fs::status(file, st) || st.type() != llvm::sys::fs::file_type::regular_file ||
        st.getSize() > (4u << 20))
      return;
    std::ifstream in(file, std::ios::binary);
    std::string text;
    while (std::getline(in, text) && lines.size() < (1u << 20))
      lines.push_back(text);
  }

  const json &field(const json &obj, const std::string &ptr, const char *key, json::value_t type) {
    if (!obj.is_object())
      fail(ptr, "expected an object");
    auto it = obj.find(key);
    if (it == obj.end())
      fail(ptr, std::string("missing required field '") + key + "'");
    bool ok = it->type() == type ||
              (type == json::value_t::number_integer && it->is_number_unsigned());
    if (!ok)
      fail(ptr + "/" + key, std::string("field '") + key + "' has the wrong type (expected " +
                                typeName(type) + ")");
    return *it;
  }
  static const char *typeName(json::value_t t) {
    switch (t) {
    case json::value_t::object: return "an object";
    case json::value_t::array: return "an array";
    case json::value_t::string: return "a string";
    case json::value_t::number_integer: return "an integer";
    default: return "another type";
    }
  }
  std::string name(const json &obj, const std::string &ptr, const char *key) {
    std::string n = field(obj, ptr, key, json::value_t::string).get<std::string>();
    if (n.empty())
      fail(ptr + "/" + key, std::string("'") + key + "' must not be empty");
    return n;
  }
  Shape shape(const json &obj, const std::string &ptr);
  dist::LayoutAttr layout(const json &j, const std::string &ptr, int64_t rank);
  NamedAttribute attribute(const std::string &op, const std::string &key, const json &v,
                           const std::string &ptr);
  void buildOps(const json &ops, const std::string &ptr, std::map<std::string, Value> &values,
                bool plan);
  void buildIndexOp(const json &o, const std::string &p, const std::string &opName,
                    std::map<std::string, Value> &values);
  func::FuncOp buildReference(const json &ref, const std::string &ptr);
  func::FuncOp buildPlan(const json &plan, const std::string &ptr, dist::MeshOp &meshOut);
  void expectation(const json &j, const std::string &ptr, ModuleOp module);

  MLIRContext &ctx;
  std::string path;
  Spec &spec;
  OpBuilder builder;
  std::map<std::string, std::pair<unsigned, unsigned>> positions;
  std::map<std::string, Shape> refInputShapes;
  std::map<std::string, int64_t> refInputBounds;
  std::set<std::string> refNonnegative;
  std::set<std::string> refIndexInputs; // integer step inputs (seeds, counters, steps)
  std::set<std::string> refI64Inputs;   // token ids
  std::set<size_t> paddedArgs;          // plan inputs with "padded": true
  std::map<std::string, int64_t> meshAxes;
  /// Dimension symbols of a parametric spec ("dims"), at the values this import uses.
  std::map<std::string, int64_t> dimValues;

public:
  /// Values to give the dimension symbols instead of their full sizes (shape
  /// reduction, docs/shape-reduction.md); null: the full sizes.
  const std::map<std::string, int64_t> *fixedDims = nullptr;

private:
  void readDims(const json &root);
  Rational evalExpr(const json &v, const std::string &ptr);
  int64_t intValue(const json &v, const std::string &ptr);
};

Rational Importer::evalExpr(const json &v, const std::string &ptr) {
  if (v.is_number_integer())
    return Rational(v.get<int64_t>());
  if (v.is_number()) {
    Rational r;
    std::string why;
    if (!exactConstant(v.get<double>(), r, why))
      fail(ptr, why);
    return r;
  }
  if (!v.is_string())
    fail(ptr, "expected a number or a size expression");
  std::string text = v.get<std::string>(), why;
  Rational out;
  if (!evalSizeExpr(text, dimValues, out, why))
    fail(ptr, "in size expression '" + text + "': " + why);
  return out;
}

int64_t Importer::intValue(const json &v, const std::string &ptr) {
  if (v.is_number_float())
    fail(ptr, "expected an integer");
  Rational r = evalExpr(v, ptr);
  int64_t out;
  if (!r.asInt64(out))
    fail(ptr, "expected an integer" + std::string(r.isInteger() ? " that fits 64 bits" : "") +
                  ", got " + r.str() + (v.is_string() ? " from '" + v.get<std::string>() + "'" : ""));
  return out;
}

/// Reads "dims" and chooses the values this import uses: each symbol of size at least
/// 2L becomes 2L, where L is the product of the mesh axis sizes and of the interleaving
/// segment counts, so every split still divides and every shard keeps >= 2 elements
/// (docs/shape-reduction.md).
void Importer::readDims(const json &root) {
  if (!root.contains("dims"))
    return;
  const json &dims = root["dims"];
  if (!dims.is_object())
    fail("/dims", "'dims' must map dimension names to sizes");
  int64_t L = 1;
  if (root.contains("plan") && root["plan"].is_object() && root["plan"].contains("mesh") &&
      root["plan"]["mesh"].is_object() && root["plan"]["mesh"].contains("axes") &&
      root["plan"]["mesh"]["axes"].is_array())
    for (const json &a : root["plan"]["mesh"]["axes"])
      if (a.is_object() && a.contains("size") && a["size"].is_number_integer() &&
          a["size"].get<int64_t>() > 0 && L < (int64_t(1) << 30))
        L *= a["size"].get<int64_t>();
  std::function<void(const json &)> segments = [&](const json &j) {
    if (j.is_object()) {
      if (j.contains("segments") && j["segments"].is_number_integer() &&
          j["segments"].get<int64_t>() > 1 && L < (int64_t(1) << 30))
        L *= j["segments"].get<int64_t>();
      if (j.contains("segments") && j["segments"] == "zigzag" && L < (int64_t(1) << 30))
        L *= 2;
      for (auto it = j.begin(); it != j.end(); ++it)
        segments(*it);
    } else if (j.is_array()) {
      for (const json &e : j)
        segments(e);
    }
  };
  segments(root);
  spec.reductionQuantum = 2 * L;
  for (auto it = dims.begin(); it != dims.end(); ++it) {
    std::string p = "/dims/" + it.key();
    bool ident = !it.key().empty() && (isalpha((unsigned char)it.key()[0]) || it.key()[0] == '_') &&
                 std::all_of(it.key().begin(), it.key().end(),
                             [](char c) { return isalnum((unsigned char)c) || c == '_'; });
    if (!ident)
      fail(p, "dimension names are identifiers");
    if (!it->is_number_integer() || it->get<int64_t>() < 1 || it->get<int64_t>() > (int64_t(1) << 31))
      fail(p, "dimension sizes must be integers between 1 and 2^31");
    int64_t full = it->get<int64_t>(), used = full;
    if (fixedDims && fixedDims->count(it.key()))
      used = fixedDims->at(it.key());
    dimValues[it.key()] = used;
    spec.reducedDims.push_back({it.key(), full, used});
  }
}

Shape Importer::shape(const json &obj, const std::string &ptr) {
  const json &s = field(obj, ptr, "shape", json::value_t::array);
  Shape out;
  int64_t total = 1;
  for (size_t k = 0; k < s.size(); ++k) {
    std::string p = ptr + "/shape/" + std::to_string(k);
    int64_t d = intValue(s[k], p);
    if (d < 1)
      fail(p, "dimension sizes must be positive integers");
    if (d > (int64_t(1) << 31) || total > (int64_t(1) << 40) / d)
      fail(p, "shape is absurdly large (more than 2^40 elements)");
    total *= d;
    out.push_back(d);
  }
  return out;
}

dist::LayoutAttr Importer::layout(const json &j, const std::string &ptr, int64_t rank) {
  if (!j.is_object())
    fail(ptr, "a layout must be an object {\"dims\": [...], \"partial\": {...}}");
  const json &dims = field(j, ptr, "dims", json::value_t::array);
  if ((int64_t)dims.size() != rank)
    fail(ptr + "/dims", "layout has " + std::to_string(dims.size()) +
                            " dimension entries but the tensor has rank " + std::to_string(rank));
  auto axisName = [&](const json &a, const std::string &p) {
    if (!a.is_string())
      fail(p, "mesh axis names must be strings");
    std::string n = a.get<std::string>();
    if (!meshAxes.count(n))
      fail(p, "unknown mesh axis '" + n + "'");
    return StringAttr::get(&ctx, n);
  };
  SmallVector<Attribute> dimAttrs;
  SmallVector<int64_t> segments;
  bool anySegments = false;
  for (size_t d = 0; d < dims.size(); ++d) {
    std::string p = ptr + "/dims/" + std::to_string(d);
    SmallVector<Attribute> axes;
    const json *entry = &dims[d];
    int64_t segs = 1;
    if (entry->is_object()) {
      // {"axes": [...], "segments": k}: an interleaved split.
      // {"axes": [...], "segments": "zigzag"}: the load-balanced split of causal CP.
      if (!entry->contains("axes") || !entry->contains("segments") ||
          !((*entry)["segments"].is_number_integer() || (*entry)["segments"] == "zigzag"))
        fail(p, "an interleaved split is {\"axes\": [...], \"segments\": k} or "
                "{\"axes\": [...], \"segments\": \"zigzag\"}");
      segs = (*entry)["segments"].is_string() ? dist::kZigzagSegments
                                               : (*entry)["segments"].get<int64_t>();
      anySegments = true;
      entry = &(*entry)["axes"];
      p += "/axes";
    }
    if (entry->is_array()) {
      for (size_t k = 0; k < entry->size(); ++k)
        axes.push_back(axisName((*entry)[k], p + "/" + std::to_string(k)));
    } else if (entry->is_string()) {
      axes.push_back(axisName(*entry, p));
    } else if (!entry->is_null()) {
      fail(p, "a dimension entry is null, an axis name, a list of axis names, or "
              "{\"axes\": [...], \"segments\": k}");
    }
    dimAttrs.push_back(ArrayAttr::get(&ctx, axes));
    segments.push_back(segs);
  }
  SmallVector<Attribute> partial[3];
  const char *kinds[3] = {"sum", "avg", "max"};
  if (j.contains("partial")) {
    const json &pj = j["partial"];
    if (!pj.is_object())
      fail(ptr + "/partial", "'partial' must be an object like {\"sum\": [\"tp\"]}");
    for (auto it = pj.begin(); it != pj.end(); ++it) {
      int k = -1;
      for (int i = 0; i < 3; ++i)
        if (it.key() == kinds[i])
          k = i;
      std::string p = ptr + "/partial/" + it.key();
      if (k < 0)
        fail(p, "unknown partial kind '" + it.key() + "' (expected sum, avg or max)");
      if (!it->is_array())
        fail(p, "partial axes must be an array of mesh axis names");
      for (size_t n = 0; n < it->size(); ++n)
        partial[k].push_back(axisName((*it)[n], p + "/" + std::to_string(n)));
    }
  }
  std::string err;
  auto attr = dist::LayoutAttr::getChecked(
      [&] {
        return emitError(loc(ptr));
      },
      &ctx, ArrayAttr::get(&ctx, dimAttrs), ArrayAttr::get(&ctx, partial[0]),
      ArrayAttr::get(&ctx, partial[1]), ArrayAttr::get(&ctx, partial[2]),
      DenseI64ArrayAttr::get(&ctx, anySegments ? segments : SmallVector<int64_t>{}));
  if (!attr)
    fail(ptr, "invalid layout (see the error above)");
  return attr;
}

NamedAttribute Importer::attribute(const std::string &op, const std::string &key, const json &v,
                                   const std::string &ptr) {
  const auto &table = jsonOpAttributes().at(op);
  auto it = table.find(key);
  if (it == table.end()) {
    std::string known;
    for (auto &[k, t] : table)
      known += (known.empty() ? "" : ", ") + k;
    fail(ptr, "op '" + op + "' has no attribute '" + key + "'" +
                  (known.empty() ? "" : " (it takes: " + known + ")"));
  }
  const std::string &kind = it->second;
  StringAttr name = StringAttr::get(&ctx, key);
  if ((kind == "int" || kind == "int?") && (v.is_number_integer() || v.is_string()))
    return {name, builder.getI64IntegerAttr(intValue(v, ptr))};
  if (kind == "float" && (v.is_number() || v.is_string()))
    return {name, builder.getF64FloatAttr(evalExpr(v, ptr).toDouble())};
  if (kind == "string" && v.is_string())
    return {name, builder.getStringAttr(v.get<std::string>())};
  if (kind == "flag" && v.is_boolean())
    return {name, builder.getUnitAttr()}; // false is dropped by the caller
  if (kind == "int[]" && v.is_array() &&
      std::all_of(v.begin(), v.end(),
                  [](const json &e) { return e.is_number_integer() || e.is_string(); })) {
    std::vector<int64_t> items;
    for (size_t k = 0; k < v.size(); ++k)
      items.push_back(intValue(v[k], ptr + "/" + std::to_string(k)));
    return {name, builder.getDenseI64ArrayAttr(items)};
  }
  if (kind == "float[]" && v.is_array()) {
    std::vector<double> items;
    for (size_t k = 0; k < v.size(); ++k)
      items.push_back(evalExpr(v[k], ptr + "/" + std::to_string(k)).toDouble());
    return {name, builder.getDenseF64ArrayAttr(items)};
  }
  if (kind == "coords" && v.is_object()) {
    // {"tp": 0}: mesh axes to coordinates.
    SmallVector<NamedAttribute> items;
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (!meshAxes.count(it.key()))
        fail(ptr + "/" + it.key(), "unknown mesh axis '" + it.key() + "'");
      items.push_back(builder.getNamedAttr(it.key(), builder.getI64IntegerAttr(
                                                        intValue(*it, ptr + "/" + it.key()))));
    }
    return {name, builder.getDictionaryAttr(items)};
  }
  if (kind == "string[]" && v.is_array() &&
      std::all_of(v.begin(), v.end(), [](const json &e) { return e.is_string(); })) {
    SmallVector<Attribute> items;
    for (const json &e : v)
      items.push_back(builder.getStringAttr(e.get<std::string>()));
    return {name, builder.getArrayAttr(items)};
  }
  fail(ptr, "attribute '" + key + "' of op '" + op + "' must be of type " + kind);
}

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
        attrs.push_back(builder.getNamedAttr(dist::kBlockOffsetAttr, builder.getDenseI64ArrayAttr(offs)));
      }
    }
    if (o.contains("role")) {
      // The semantic role of the value (a violation kind), as ref.role in MLIR.
      if (!o["role"].is_string())
        fail(p + "/role", "'role' must be a violation kind (a string)");
      attrs.push_back(builder.getNamedAttr("ref.role", builder.getStringAttr(o["role"].get<std::string>())));
    }
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

func::FuncOp Importer::buildReference(const json &ref, const std::string &ptr) {
  const json &inputs = field(ref, ptr, "inputs", json::value_t::array);
  const json &ops = field(ref, ptr, "ops", json::value_t::array);
  const json &outputs = field(ref, ptr, "outputs", json::value_t::array);
  SmallVector<Type> argTypes;
  std::vector<std::string> argNames;
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::string p = ptr + "/inputs/" + std::to_string(i);
    std::string n = name(inputs[i], p, "name");
    if (refInputShapes.count(n))
      fail(p + "/name", "input '" + n + "' is declared twice");
    argNames.push_back(n);
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
      argTypes.push_back(builder.getIndexType());
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
    argTypes.push_back(RankedTensorType::get(
        s, dtype == "i64" ? Type(builder.getI64Type()) : Type(builder.getF32Type())));
  }
  auto func = func::FuncOp::create(loc(ptr), "reference", builder.getFunctionType(argTypes, {}));
  func->setAttr(ref::kReferenceAttr, builder.getUnitAttr());
  SmallVector<Location> argLocs;
  for (size_t i = 0; i < inputs.size(); ++i)
    argLocs.push_back(loc(ptr + "/inputs/" + std::to_string(i)));
  Block *body = builder.createBlock(&func.getBody(), {}, argTypes, argLocs);
  std::map<std::string, Value> values;
  // Argument and result attributes are set once per function: setting them one index
  // at a time rebuilds the whole array each time (quadratic in the count).
  SmallVector<DictionaryAttr> argDicts;
  for (size_t i = 0; i < argNames.size(); ++i) {
    values[argNames[i]] = body->getArgument(i);
    spec.names[body->getArgument(i)] = "%" + argNames[i];
    NamedAttrList attrs;
    attrs.append(ref::kNameAttr, builder.getStringAttr(argNames[i]));
    if (refInputBounds.count(argNames[i]))
      attrs.append("ref.bound", builder.getI64IntegerAttr(refInputBounds[argNames[i]]));
    if (refNonnegative.count(argNames[i]))
      attrs.append("ref.nonnegative", builder.getUnitAttr());
    argDicts.push_back(attrs.getDictionary(&ctx));
  }
  func.setAllArgAttrs(argDicts);
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
  func.setType(builder.getFunctionType(argTypes, ValueRange(results).getTypes()));
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
  return func;
}

func::FuncOp Importer::buildPlan(const json &plan, const std::string &ptr, dist::MeshOp &meshOut) {
  const json &mesh = field(plan, ptr, "mesh", json::value_t::object);
  const json &axes = field(mesh, ptr + "/mesh", "axes", json::value_t::array);
  if (axes.empty())
    fail(ptr + "/mesh/axes", "a mesh needs at least one axis");
  SmallVector<Attribute> axisNames;
  SmallVector<int64_t> sizes;
  int64_t ranks = 1;
  for (size_t i = 0; i < axes.size(); ++i) {
    std::string p = ptr + "/mesh/axes/" + std::to_string(i);
    std::string n = name(axes[i], p, "name");
    const json &size = field(axes[i], p, "size", json::value_t::number_integer);
    int64_t s = size.get<int64_t>();
    if (s < 1 || s > (int64_t(1) << 20) || ranks > (int64_t(1) << 40) / s)
      fail(p + "/size", "mesh axis sizes must be between 1 and 2^20, and the mesh at most 2^40 ranks");
    if (meshAxes.count(n))
      fail(p + "/name", "mesh axis '" + n + "' is declared twice");
    ranks *= s;
    meshAxes[n] = s;
    axisNames.push_back(builder.getStringAttr(n));
    sizes.push_back(s);
  }
  std::string meshName = mesh.contains("name") && mesh["name"].is_string()
                             ? mesh["name"].get<std::string>() : "mesh";
  meshOut = dist::MeshOp::create(builder, loc(ptr + "/mesh"), meshName,
                                 builder.getArrayAttr(axisNames),
                                 builder.getDenseI64ArrayAttr(sizes));
  const json &inputs = field(plan, ptr, "inputs", json::value_t::array);
  // Checked here, used by the caller once the function is in the module.
  field(plan, ptr, "ops", json::value_t::array);
  field(plan, ptr, "outputs", json::value_t::array);
  SmallVector<Type> argTypes;
  SmallVector<Location> argLocs;
  std::vector<std::string> argNames;
  std::vector<dist::LayoutAttr> argLayouts;
  std::vector<std::string> argValues;
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::string p = ptr + "/inputs/" + std::to_string(i);
    std::string n = name(inputs[i], p, "name");
    std::string v = name(inputs[i], p, "value");
    auto it = refInputShapes.find(v);
    if (it == refInputShapes.end())
      fail(p + "/value", "'" + v + "' is not an input of the reference");
    if (refIndexInputs.count(v)) {
      // One integer, the same on every rank: no layout.
      if (inputs[i].contains("layout") || inputs[i].contains("shape"))
        fail(p, "'" + v + "' is an index; it takes no layout or shape");
      argTypes.push_back(builder.getIndexType());
      argLocs.push_back(loc(p));
      argNames.push_back(n);
      argLayouts.push_back(nullptr);
      argValues.push_back(v);
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
    argTypes.push_back(RankedTensorType::get(
        local, refI64Inputs.count(v) ? Type(builder.getI64Type()) : Type(builder.getF32Type())));
    argLocs.push_back(loc(p));
    argNames.push_back(n);
    argLayouts.push_back(l);
    argValues.push_back(v);
    if (padded)
      paddedArgs.insert(i);
  }
  auto func = func::FuncOp::create(loc(ptr), "plan", builder.getFunctionType(argTypes, {}));
  func->setAttr(dist::kMeshAttr, FlatSymbolRefAttr::get(&ctx, meshName));
  if (plan.contains("rng")) {
    if (!plan["rng"].is_string() || (plan["rng"] != "exact" && plan["rng"] != "independent"))
      fail(ptr + "/rng", "'rng' is \"exact\" or \"independent\"");
    func->setAttr(dist::kRngAttr, builder.getStringAttr(plan["rng"].get<std::string>()));
  }
  Block *body = builder.createBlock(&func.getBody(), {}, argTypes, argLocs);
  std::map<std::string, Value> values;
  SmallVector<DictionaryAttr> argDicts;
  for (size_t i = 0; i < argNames.size(); ++i) {
    if (values.count(argNames[i]))
      fail(ptr + "/inputs/" + std::to_string(i) + "/name", "value '" + argNames[i] + "' is defined twice");
    values[argNames[i]] = body->getArgument(i);
    spec.names[body->getArgument(i)] = "%" + argNames[i];
    NamedAttrList attrs;
    attrs.append(dist::kValueAttr, builder.getStringAttr(argValues[i]));
    if (argLayouts[i])
      attrs.append(dist::kLayoutAttr, argLayouts[i]);
    if (paddedArgs.count(i))
      attrs.append(dist::kPaddedAttr, builder.getUnitAttr());
    argDicts.push_back(attrs.getDictionary(&ctx));
  }
  func.setAllArgAttrs(argDicts);
  return func; // ops and outputs are added by the caller once the function is in the module
}

void Importer::expectation(const json &j, const std::string &ptr, ModuleOp module) {
  if (!j.is_object())
    fail(ptr, "'expect' must be an object");
  SmallVector<NamedAttribute> fields;
  for (const char *k : {"verdict", "kind", "at"})
    if (j.contains(k)) {
      if (!j[k].is_string())
        fail(ptr + "/" + k, std::string("'") + k + "' must be a string");
      fields.push_back(builder.getNamedAttr(k, builder.getStringAttr(j[k].get<std::string>())));
    }
  module->setAttr("planproof.expect", builder.getDictionaryAttr(fields));
}

bool Importer::run(const std::string &text, std::string &errors) {
  json root;
  std::string why;
  size_t byte = 0;
  if (!parseJsonLocated(text, root, byte, why)) {
    unsigned line = 1, col = 1;
    for (size_t k = 0; k + 1 < byte && k < text.size(); ++k) {
      if (text[k] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    errors += path + ":" + std::to_string(line) + ":" + std::to_string(col) +
              ": error: malformed JSON: " + why + "\n";
    return false;
  }
  positions = locateJsonValues(text);
  OwningOpRef<ModuleOp> module(ModuleOp::create(FileLineColLoc::get(&ctx, path, 1, 1)));
  // Diagnostics from the dialects' shape rules and verifiers, located in the JSON file.
  std::string diags;
  ScopedDiagnosticHandler handler(&ctx, [&](Diagnostic &d) {
    diags += toSourceLoc(d.getLocation()).str() + ": error: " + d.str() + "\n";
    return success();
  });
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
  } catch (const JsonError &e) {
    errors += diags;
    errors += toSourceLoc(loc(e.path)).str() + ": error: " + dotted(e.path) + ": " + e.message + "\n";
    return false;
  } catch (const json::exception &e) {
    errors += diags + path + ": error: " + e.what() + "\n";
    return false;
  }
  if (failed(verify(*module))) {
    errors += diags;
    return false;
  }
  spec.modules.push_back(std::move(module));
  return true;
}
} // namespace

bool planproof::importJsonSpec(MLIRContext &ctx, const std::string &path, Spec &spec,
                               std::string &errors) {
  std::string text;
  return readInputFile(path, text, errors) && importJsonSpecText(ctx, path, text, spec, errors);
}

bool planproof::importJsonSpecText(MLIRContext &ctx, const std::string &path,
                                   const std::string &text, Spec &spec, std::string &errors) {
  if (!checkNesting(path, text, Syntax::Json, errors))
    return false;
  {
    std::vector<std::string> lines;
    std::stringstream ls(text);
    std::string line;
    while (std::getline(ls, line))
      lines.push_back(line);
    spec.sources[path] = std::move(lines);
  }
  return importParametric(ctx, path, text, spec, errors);
}

bool planproof::importJsonText(MLIRContext &ctx, const std::string &path, const std::string &text,
                               Spec &spec, const std::map<std::string, int64_t> *fixedDims,
                               std::string &errors) {
  Importer importer(ctx, path, spec);
  importer.fixedDims = fixedDims;
  return importer.run(text, errors);
}
