//===- PlanEdit.h - fixes as edits of the plan, checked before they are shown -*- C++ -*-===//
//
// A fix hint is only printed once it is *checked*: the edit it describes is applied to
// a copy of the spec and the copy is verified again (Verifier.cpp, checkFixes); the
// hint stays only if the violation goes away. A PlanEdit is that edit, on the ops of
// the loaded spec; apply() performs it on a clone through the clone's IR mapping.
//
//===----------------------------------------------------------------------===//
#ifndef PLANPROOF_ENGINE_PLANEDIT_H
#define PLANPROOF_ENGINE_PLANEDIT_H

#include "Semantics/Layout.h"
#include "Support/Rational.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Operation.h"

#include <memory>
#include <string>
#include <vector>

namespace planproof {

struct PlanEdit {
  enum Kind {
    SetAttr,         // op's attribute `attr` becomes `value`
    RemoveAttr,      // op's attribute `attr` is dropped
    InsertAllReduce, // operand #operand of op is all-reduced (`reduceKind` over `axes`) first
                     // (with `everyUse`: right after it is computed, for every op but
                     // collectives)
    ScaleResult,     // op's result is scaled by `factor` for all its users
    Forward,         // op's result is replaced by its operand #0 (the op removed)
    ReplaceOperand,  // operand #operand of op becomes `with`
    ResultLayout,    // the plan's result #operand is declared with `layout`
  } kind;
  mlir::Operation *op = nullptr; // for ResultLayout: the plan function
  std::string attr;
  mlir::Attribute value;
  unsigned operand = 0;
  std::string reduceKind;
  std::vector<std::string> axes;
  Rational factor{1};
  bool everyUse = false;
  /// SetAttr, RemoveAttr: the other ops with the same defect (the way there and back of
  /// an all_to_all, the K and the V gather), edited too when `everyLike` is set.
  std::vector<mlir::Operation *> alike;
  bool everyLike = false;
  mlir::Value with;
  Layout layout;
  /// Further edits made after this one, as one fix (moving a collective: a reduction
  /// inserted here, and the later one that reduced the same axes removed).
  std::vector<std::shared_ptr<const PlanEdit>> also;

  static std::shared_ptr<PlanEdit> setAttr(mlir::Operation *op, std::string attr, mlir::Attribute v);
  static std::shared_ptr<PlanEdit> removeAttr(mlir::Operation *op, std::string attr);
  static std::shared_ptr<PlanEdit> insertAllReduce(mlir::Operation *op, unsigned operand,
                                                   std::string kind, std::vector<std::string> axes);
  static std::shared_ptr<PlanEdit> scaleResult(mlir::Operation *op, Rational factor);
  static std::shared_ptr<PlanEdit> forward(mlir::Operation *op);
  static std::shared_ptr<PlanEdit> replaceOperand(mlir::Operation *op, unsigned operand, mlir::Value with);
  static std::shared_ptr<PlanEdit> resultLayout(mlir::Operation *plan, unsigned result, Layout l);

  /// Where the edited ops and values are in the copy being edited: through `written`
  /// (the spec's ops to their copies as written), then `copy` (those to the copy).
  struct Where {
    const mlir::IRMapping &written, &copy;
    mlir::Operation *op(mlir::Operation *o) const {
      mlir::Operation *w = written.lookupOrNull(o);
      return w ? copy.lookupOrNull(w) : nullptr;
    }
    mlir::Value value(mlir::Value v) const {
      mlir::Value w = written.lookupOrNull(v);
      return w ? copy.lookupOrNull(w) : mlir::Value();
    }
  };

  /// Performs the edit on the copy `at` locates; `mesh` names the plan's mesh axes.
  /// False, with `why`, when it cannot (an op that is not written in the plan: a
  /// derived gradient's).
  bool apply(const Where &at, const Mesh &mesh, std::string &why) const;

private:
  bool applyOne(const Where &at, const Mesh &mesh, std::string &why) const;
};

} // namespace planproof

#endif
