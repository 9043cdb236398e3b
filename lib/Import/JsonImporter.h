//===- JsonImporter.h - the JSON importer's internals ---------*- C++ -*-===//
//
// The importer of the JSON interchange format (docs/json-format.md), shared by
// JsonImport.cpp (the attribute table, values, shapes, layouts, attributes, the entry
// points) and JsonBuild.cpp (ops, the reference and plan functions, the whole run).
// Internal to lib/Import.
//
//===----------------------------------------------------------------------===//
#ifndef PLANPROOF_IMPORT_JSONIMPORTER_H
#define PLANPROOF_IMPORT_JSONIMPORTER_H

#include "Import/JsonImport.h"

#include "Dist/DistDialect.h"
#include "Ref/RefDialect.h"
#include "Spec/Spec.h"
#include "Support/Input.h"
#include "Support/JsonDocument.h"
#include "Support/Printable.h"
#include "Support/Rational.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <nlohmann/json.hpp>

#include <fstream>
#include <map>
#include <set>
#include <string>

namespace planproof::json_import {

using namespace mlir;
using nlohmann::json;

/// Thrown for bad input; carries the JSON pointer of the offending value.
struct JsonError {
  std::string path, message;
};

class Importer {
public:
  Importer(MLIRContext &ctx, const std::string &path, Spec &spec)
      : ctx(ctx), path(path), spec(spec), builder(&ctx) {}

  bool run(const std::string &text, Diagnostics &diags);

private:
  Location loc(const std::string &ptr) {
    SourceLoc at = doc.at(ptr);
    return FileLineColLoc::get(&ctx, path, std::max(1u, at.line), std::max(1u, at.col));
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
  /// only a regular file of at most 4 MiB in the spec's folder or one the user named
  /// (sourceExcerptAllowed; any other shows no snippet).
  void readUserSource(const std::string &file) {
    if (spec.sources.count(file))
      return;
    std::vector<std::string> &lines = spec.sources[file];
    if (!sourceExcerptAllowed(path, file))
      return;
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
    if (std::string why = nameProblem(n); !why.empty())
      fail(ptr + "/" + key, "'" + printable(n, false) + "' is not a name: " + why);
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
  void buildTensorOp(const json &o, const std::string &p, const std::string &opName,
                     std::map<std::string, Value> &values, bool plan);
  SmallVector<NamedAttribute> opAttributes(const json &o, const std::string &p,
                                           const std::string &opName, bool plan);
  void inferResultType(Operation *op, const json &o, const std::string &p,
                       const std::string &opName);

  /// A function's arguments as read from its JSON inputs, before the function exists.
  struct FuncArgs {
    SmallVector<Type> types;
    SmallVector<Location> locs;
    std::vector<std::string> names;
    std::vector<NamedAttrList> attrs;
    void add(Type type, Location l, const std::string &name, const NamedAttrList &a) {
      types.push_back(type);
      locs.push_back(l);
      names.push_back(name);
      attrs.push_back(a);
    }
  };
  FuncArgs referenceInputs(const json &inputs, const std::string &ptr);
  FuncArgs planInputs(const json &inputs, const std::string &ptr);
  Block *bindArguments(func::FuncOp func, const FuncArgs &args, const std::string &ptr,
                       std::map<std::string, Value> &values);
  func::FuncOp buildReference(const json &ref, const std::string &ptr);
  void setReferenceResultAttrs(func::FuncOp func, const json &ref, const std::string &ptr);
  dist::MeshOp buildMesh(const json &mesh, const std::string &ptr);
  func::FuncOp buildPlan(const json &plan, const std::string &ptr, dist::MeshOp &meshOut);
  void expectation(const json &j, const std::string &ptr, ModuleOp module);
  /// "assumptions": the module attribute `planproof.assumptions` (Spec::assumptions).
  void assumptions(const json &j, const std::string &ptr, ModuleOp module);

  MLIRContext &ctx;
  std::string path;
  Spec &spec;
  OpBuilder builder;
  JsonDocument doc; // the parsed text, and where each of its values is
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
  /// A float attribute's value: a double that denotes exactly the number written.
  double floatValue(const json &v, const std::string &ptr);
};

} // namespace planproof::json_import

#endif
