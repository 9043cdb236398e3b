//===- LoadSpec.h - loading a spec from files or text -----------*- C++ -*-===//
#ifndef PLANPROOF_IMPORT_LOADSPEC_H
#define PLANPROOF_IMPORT_LOADSPEC_H

#include "Spec/Spec.h"

namespace planproof {

/// Loads a spec from one file (.mlir or .json). On failure returns false after
/// recording located errors in `diags`.
bool loadSpec(mlir::MLIRContext &ctx, const std::string &path, Spec &spec, Diagnostics &diags);

/// Loads a spec from text: JSON when `name` ends in ".json", else MLIR; `name` is the
/// file name diagnostics give (nothing is read from disk).
bool loadSpecText(mlir::MLIRContext &ctx, const std::string &name, const std::string &text,
                  Spec &spec, Diagnostics &diags);

/// Loads a spec from a reference file and a plan file (.mlir or .json each).
bool loadSpecPair(mlir::MLIRContext &ctx, const std::string &refPath,
                  const std::string &planPath, Spec &spec, Diagnostics &diags);

/// Loads a candidate plan against the reference of `base` (a loaded spec of the same
/// context): `text` is MLIR holding the mesh and the plan function only; the
/// reference, already derived, is copied from `base` rather than parsed and derived
/// again (a planner's loop, include/planproof/planproof.h: Session::loadPlan).
bool loadPlanWithReference(mlir::MLIRContext &ctx, const Spec &base, const std::string &name,
                           const std::string &text, Spec &spec, Diagnostics &diags);

} // namespace planproof

#endif
