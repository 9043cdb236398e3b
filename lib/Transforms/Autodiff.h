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
/// `ruled`, when given, is told (op, null) for each op whose derivative rule ran --
/// a rule reads its own op's attributes and no other op's, so an op never told was
/// read by the derivation as a value only -- and (collective, adjoint) for each adjoint
/// collective a collective's rule made, whose attributes are the collective's
/// (all_reduce: axes, kind; all_gather and reduce_scatter, shard_slice and shard_pad:
/// axes, dim, zigzag of each other; all_to_all: axes, its split_dim the other's
/// concat_dim and back; select_on: on).
/// `throughCalls`: a func.call on the way from a `wrt` value to the loss is
/// differentiated by a call of its callee's vector-Jacobian function, derived once per
/// callee and set of differentiated arguments and added to the module (Vjp.cpp,
/// docs/calls.md); without it a call has no derivative rule (the loader expands calls
/// first).
mlir::LogicalResult
expandGradOps(mlir::Operation *root, std::string &why, mlir::Location &where,
              std::function<std::string(mlir::Value)> nameOf = nullptr,
              std::function<void(mlir::Value, mlir::Value, mlir::Value)> replaced = nullptr,
              std::function<void(mlir::Operation *, mlir::Operation *)> ruled = nullptr,
              bool throughCalls = false);

/// `--ref-expand-grad` for planproof-opt.
std::unique_ptr<mlir::Pass> createExpandGradPass();
void registerAutodiffPasses();

} // namespace planproof

#endif
