//===- PlanEdit.cpp - fixes as edits of the plan -----------------*- C++ -*-===//
#include "Engine/PlanEdit.h"

#include "Dist/DistDialect.h"
#include "Ref/RefDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace planproof;

namespace {
std::shared_ptr<PlanEdit> make(PlanEdit::Kind k, Operation *op) {
  auto e = std::make_shared<PlanEdit>();
  e->kind = k;
  e->op = op;
  return e;
}

/// The #dist.layout of `l` on `mesh`.
dist::LayoutAttr layoutAttr(MLIRContext *ctx, const Layout &l, const Mesh &mesh) {
  auto names = [&](const std::vector<int> &axes) {
    SmallVector<Attribute> out;
    for (int a : axes)
      out.push_back(StringAttr::get(ctx, mesh.axes[a]));
    return ArrayAttr::get(ctx, out);
  };
  SmallVector<Attribute> dims;
  for (const auto &d : l.dims)
    dims.push_back(names(d));
  std::vector<int> kinds[3];
  for (auto &[axis, k] : l.partial)
    kinds[k == ReduceKind::Sum ? 0 : k == ReduceKind::Avg ? 1 : 2].push_back(axis);
  SmallVector<int64_t> segments(l.segments.begin(), l.segments.end());
  return dist::LayoutAttr::get(ctx, ArrayAttr::get(ctx, dims), names(kinds[0]), names(kinds[1]),
                               names(kinds[2]), DenseI64ArrayAttr::get(ctx, segments));
}
} // namespace

std::shared_ptr<PlanEdit> PlanEdit::setAttr(Operation *op, std::string attr, Attribute v) {
  auto e = make(SetAttr, op);
  e->attr = std::move(attr);
  e->value = v;
  return e;
}
std::shared_ptr<PlanEdit> PlanEdit::removeAttr(Operation *op, std::string attr) {
  auto e = make(RemoveAttr, op);
  e->attr = std::move(attr);
  return e;
}
std::shared_ptr<PlanEdit> PlanEdit::insertAllReduce(Operation *op, unsigned operand,
                                                    std::string kind,
                                                    std::vector<std::string> axes) {
  auto e = make(InsertAllReduce, op);
  e->operand = operand;
  e->reduceKind = std::move(kind);
  e->axes = std::move(axes);
  return e;
}
std::shared_ptr<PlanEdit> PlanEdit::scaleResult(Operation *op, Rational factor) {
  auto e = make(ScaleResult, op);
  e->factor = factor;
  return e;
}
std::shared_ptr<PlanEdit> PlanEdit::forward(Operation *op) { return make(Forward, op); }
std::shared_ptr<PlanEdit> PlanEdit::replaceOperand(Operation *op, unsigned operand, Value with) {
  auto e = make(ReplaceOperand, op);
  e->operand = operand;
  e->with = with;
  return e;
}
std::shared_ptr<PlanEdit> PlanEdit::resultLayout(Operation *plan, unsigned result, Layout l) {
  auto e = make(ResultLayout, plan);
  e->operand = result;
  e->layout = std::move(l);
  return e;
}

bool PlanEdit::apply(const Where &at, const Mesh &mesh, std::string &why) const {
  if (!applyOne(at, mesh, why))
    return false;
  for (const auto &e : also)
    if (!e->apply(at, mesh, why))
      return false;
  return true;
}

bool PlanEdit::applyOne(const Where &at, const Mesh &mesh, std::string &why) const {
  Operation *target = at.op(op);
  if (!target)
    return (why = "the op is not in the copy", false);
  MLIRContext *ctx = target->getContext();
  OpBuilder b(target);
  switch (kind) {
  case SetAttr:
  case RemoveAttr: {
    std::vector<Operation *> targets{target};
    if (everyLike)
      for (Operation *o : alike)
        if (Operation *t = at.op(o)) // derived ops follow the written ones
          targets.push_back(t);
    for (Operation *t : targets) {
      if (kind == SetAttr)
        t->setAttr(attr, value);
      else
        t->removeAttr(attr);
    }
    return true;
  }
  case InsertAllReduce: {
    if (operand >= target->getNumOperands())
      return (why = "no such operand", false);
    Value v = target->getOperand(operand);
    SmallVector<Attribute> names;
    for (const std::string &a : axes)
      names.push_back(StringAttr::get(ctx, a));
    if (everyUse) {
      if (Operation *def = v.getDefiningOp())
        b.setInsertionPointAfter(def);
      else
        b.setInsertionPointToStart(v.getParentBlock());
    }
    auto reduced = dist::AllReduceOp::create(b, target->getLoc(), v.getType(), v,
                                             ArrayAttr::get(ctx, names),
                                             StringAttr::get(ctx, reduceKind));
    if (Attribute stage = target->getAttr("dist.stage"))
      reduced->setAttr("dist.stage", stage);
    if (!everyUse) {
      target->setOperand(operand, reduced);
      return true;
    }
    v.replaceUsesWithIf(reduced, [&](OpOperand &use) {
      Operation *user = use.getOwner();
      return user != reduced.getOperation() && !isa<dist::DistDialect>(user->getDialect());
    });
    return true;
  }
  case ScaleResult: {
    if (target->getNumResults() != 1 || !isa<RankedTensorType>(target->getResult(0).getType()))
      return (why = "not a tensor-valued op", false);
    b.setInsertionPointAfter(target);
    Value r = target->getResult(0);
    auto scaled = ref::ScaleOp::create(b, target->getLoc(), r, llvm::APFloat(factor.toDouble()));
    if (Attribute stage = target->getAttr("dist.stage"))
      scaled->setAttr("dist.stage", stage);
    r.replaceAllUsesExcept(scaled, scaled);
    return true;
  }
  case Forward:
    if (target->getNumResults() != 1 || target->getNumOperands() < 1 ||
        target->getOperand(0).getType() != target->getResult(0).getType())
      return (why = "the op's operand and result differ in type", false);
    target->getResult(0).replaceAllUsesWith(target->getOperand(0));
    target->erase();
    return true;
  case ReplaceOperand: {
    Value w = at.value(with);
    if (!w || operand >= target->getNumOperands() || w.getType() != target->getOperand(operand).getType())
      return (why = "the replacement does not fit", false);
    target->setOperand(operand, w);
    return true;
  }
  case ResultLayout: {
    auto f = dyn_cast<func::FuncOp>(target);
    if (!f || operand >= f.getNumResults())
      return (why = "no such result", false);
    f.setResultAttr(operand, dist::kLayoutAttr, layoutAttr(ctx, layout, mesh));
    if (layout.padded)
      f.setResultAttr(operand, dist::kPaddedAttr, UnitAttr::get(ctx));
    else
      f.removeResultAttr(operand, StringAttr::get(ctx, dist::kPaddedAttr));
    return true;
  }
  }
  return (why = "unknown edit", false);
}
