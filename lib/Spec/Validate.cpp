//===- Validate.cpp - sizes and constants an engine may compute with ------===//
//
// Every tensor type in a spec has a static shape inside the caps of Support/Limits.h,
// and every float constant of a `ref` op is an exact rational (docs/semantics.md):
// checked before anything computes with sizes or constants, for MLIR and JSON alike,
// when a spec is analyzed and again for each op an edit changes (lib/Spec/Edit.h).
//
//===----------------------------------------------------------------------===//
#include "Spec/Spec.h"
#include "Ref/RefDialect.h"
#include "Support/Limits.h"
#include "Support/Rational.h"

using namespace mlir;
using namespace planproof;

bool planproof::validateOpSizesAndConstants(Operation *op, const std::string &path,
                                            Diagnostics &diags) {
  auto report = [&](Location loc, const std::string &msg) {
    return diags.error(toSourceLoc(loc), msg, path);
  };
  auto checkType = [&](Type t, Location loc, const std::string &what) {
    if (isa<UnrankedTensorType>(t))
      return report(loc, what + " is an unranked tensor: shapes must be written out");
    auto r = dyn_cast<RankedTensorType>(t);
    if (!r)
      return true;
    std::string why = shapeProblem(r.getShape(), ShapedType::kDynamic);
    if (!why.empty())
      return report(loc, what + " has an unsupported shape: " + why);
    return true;
  };
  std::string name = op->getName().getStringRef().str();
  for (auto [i, t] : llvm::enumerate(op->getResultTypes()))
    if (!checkType(t, op->getLoc(), "result #" + std::to_string(i) + " of '" + name + "'"))
      return false;
  for (Region &region : op->getRegions())
    for (Block &block : region)
      for (BlockArgument arg : block.getArguments())
        if (!checkType(arg.getType(), arg.getLoc(),
                       "argument #" + std::to_string(arg.getArgNumber()) + " of '" + name + "'"))
          return false;
  if (auto f = dyn_cast<func::FuncOp>(op))
    for (auto [i, t] : llvm::enumerate(f.getResultTypes()))
      if (!checkType(t, op->getLoc(),
                     "result #" + std::to_string(i) + " of function @" + f.getSymName().str()))
        return false;
  if (!op->getDialect() || !isa<ref::RefDialect>(op->getDialect()))
    return true;
  for (NamedAttribute a : op->getAttrs()) {
    auto f = dyn_cast<FloatAttr>(a.getValue());
    if (!f)
      continue;
    Rational r;
    std::string why;
    if (!exactConstant(f.getValueAsDouble(), r, why))
      return report(op->getLoc(), "'" + name + "' attribute '" + a.getName().str() + "': " + why);
  }
  return true;
}

bool planproof::validateSizesAndConstants(Spec &spec, Diagnostics &diags) {
  for (auto &m : spec.modules) {
    bool ok = true;
    m->walk([&](Operation *op) {
      ok = validateOpSizesAndConstants(op, spec.path, diags);
      return ok ? WalkResult::advance() : WalkResult::interrupt();
    });
    if (!ok)
      return false;
  }
  return true;
}
