//===- JsonImport.cpp - the JSON interchange format -------------*- C++ -*-===//
//
// JSON -> ref/dist dialects. nlohmann/json parses (with exceptions, caught here); a
// small position scanner maps JSON pointers to line:col; ops are created generically
// from their registered names with result types inferred by the dialects' own shape
// rules, then the module is verified like any parsed MLIR.
//
//===----------------------------------------------------------------------===//
#include "Import/JsonImport.h"
#include "Import/JsonImporter.h"
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

using namespace planproof::json_import;

//===----------------------------------------------------------------------===//
// Values, shapes, layouts and attributes
//===----------------------------------------------------------------------===//

namespace planproof::json_import {

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

double Importer::floatValue(const json &v, const std::string &ptr) {
  // A float attribute holds a double, which denotes the rational exactConstant gives
  // it (docs/semantics.md, "Constants"). A value it cannot denote exactly -- an integer
  // past 2^53 such as 2^53 + 1, a size expression's exact result -- would be read as
  // another number (2^63 - 1 as 2^63 once verified a wrong plan): refused.
  Rational exact = evalExpr(v, ptr), denoted;
  // A JSON float is the double it reads as (exactConstant gives its meaning); an
  // integer is converted with round-to-nearest; a size expression's value likewise
  // through its rational (refused below unless that is exact).
  double d = v.is_number_float() ? v.get<double>()
             : v.is_number_integer() ? (double)v.get<int64_t>()
                                     : exact.toDouble();
  std::string why;
  if (!exactConstant(d, denoted, why) || !(denoted == exact))
    fail(ptr, "the value " + exact.str() + " is not exactly a float constant: a float "
              "attribute holds a double, and the nearest one, " + denoted.str() +
              ", is another number");
  return d;
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
    return {name, builder.getF64FloatAttr(floatValue(v, ptr))};
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
      items.push_back(floatValue(v[k], ptr + "/" + std::to_string(k)));
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

} // namespace planproof::json_import

bool planproof::importJsonSpec(MLIRContext &ctx, const std::string &path, Spec &spec,
                               Diagnostics &diags) {
  std::string text;
  return readInputFile(path, text, diags) && importJsonSpecText(ctx, path, text, spec, diags);
}

bool planproof::importJsonSpecText(MLIRContext &ctx, const std::string &path,
                                   const std::string &text, Spec &spec, Diagnostics &diags) {
  if (!checkNesting(path, text, Syntax::Json, diags))
    return false;
  {
    std::vector<std::string> lines;
    std::stringstream ls(text);
    std::string line;
    while (std::getline(ls, line))
      lines.push_back(line);
    spec.sources[path] = std::move(lines);
  }
  return importParametric(ctx, path, text, spec, diags);
}

bool planproof::importJsonText(MLIRContext &ctx, const std::string &path, const std::string &text,
                               Spec &spec, const std::map<std::string, int64_t> *fixedDims,
                               Diagnostics &diags) {
  Importer importer(ctx, path, spec);
  importer.fixedDims = fixedDims;
  return importer.run(text, diags);
}
