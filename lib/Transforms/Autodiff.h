//===- Autodiff.h - deriving the reference backward pass --------*- C++ -*-===//
//
// Reverse-mode automatic differentiation over the ref dialect: every `ref.grad` op is
// replaced by the ref ops that compute the gradients it asks for. One derivative rule
// per op, written in terms of other ref ops, so the derived backward pass has the same
// meaning in every engine as hand-written backward code.
//
//===----------------------------------------------------------------------===//
#ifndef PLANPROOF_TRANSFORMS_AUTODIFF_H
#define PLANPROOF_TRANSFORMS_AUTODIFF_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include <functional>
#include <memory>
#include <string>

namespace planproof {

/// Expands every ref.grad in `root`. On failure (an op on the path from a `wrt` value to
/// the loss has no derivative rule) returns failure and sets `why` and `where`; the IR is
/// then left partially expanded and must not be verified.
/// `nameOf`, when given, names values for diagnostics: each op of the backward pass is
/// located at the grad op under the name "d(<name of the value it differentiates>)".
/// `replaced`, when given, is told each ref.grad result, the value that replaces it and
/// the `wrt` value it is the gradient of (so that diagnostics can keep the names the
/// spec's author wrote).
mlir::LogicalResult
expandGradOps(mlir::Operation *root, std::string &why, mlir::Location &where,
              std::function<std::string(mlir::Value)> nameOf = nullptr,
              std::function<void(mlir::Value, mlir::Value, mlir::Value)> replaced = nullptr);

/// `--ref-expand-grad` for planproof-opt.
std::unique_ptr<mlir::Pass> createExpandGradPass();
void registerAutodiffPasses();

} // namespace planproof

#endif
