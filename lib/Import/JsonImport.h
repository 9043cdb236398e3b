//===- JsonImport.h - the JSON interchange format ---------------*- C++ -*-===//
//
// Imports a spec written in planproof's JSON interchange format (docs/json-format.md,
// docs/spec.schema.json) -- what a Python planner emits most easily -- into the `ref`
// and `dist` dialects. Every op gets a FileLineColLoc pointing into the JSON file, so
// violations and errors name the line of the JSON op; errors also name the JSON path.
//
//===----------------------------------------------------------------------===//
#ifndef PLANPROOF_IMPORT_JSONIMPORT_H
#define PLANPROOF_IMPORT_JSONIMPORT_H

#include "Support/Diagnostic.h"

#include "mlir/IR/MLIRContext.h"

#include <map>
#include <string>
#include <vector>

namespace planproof {

struct Spec;

/// Imports `path` into a new module of `spec` (names, sources and expectation too).
/// On failure records located errors in `diags` and returns false.
bool importJsonSpec(mlir::MLIRContext &ctx, const std::string &path, Spec &spec,
                    Diagnostics &diags);

/// The same from JSON text already read (named `path` in diagnostics).
bool importJsonSpecText(mlir::MLIRContext &ctx, const std::string &path, const std::string &text,
                        Spec &spec, Diagnostics &diags);

/// The ops of the JSON format, by full name, with the attribute names and kinds each
/// accepts ("int", "int?", "float", "string", "flag", "int[]", "float[]", "string[]",
/// "coords"): generated from the ops' ODS definitions by tools/planproof-tblgen.
const std::map<std::string, std::map<std::string, std::string>> &jsonOpAttributes();

/// One import of JSON `text` into `spec`, with the dimension symbols at `fixedDims`
/// (null: their full sizes). Used by the shape reduction.
bool importJsonText(mlir::MLIRContext &ctx, const std::string &path, const std::string &text,
                    Spec &spec, const std::map<std::string, int64_t> *fixedDims,
                    Diagnostics &diags);

/// Imports a (possibly parametric) JSON spec, at the smallest faithful reduced sizes
/// when it declares "dims" and spec.reduceShapes is set (lib/Import/ShapeReduction.cpp).
bool importParametric(mlir::MLIRContext &ctx, const std::string &path, const std::string &text,
                      Spec &spec, Diagnostics &diags);

} // namespace planproof

#endif
