//===- ShapeReduction.cpp - deciding parametric specs at reduced sizes -*- C++ -*-===//
//
// A parametric JSON spec ("dims") is imported at its full sizes (types only) and at
// the smallest *faithful* reduced sizes: symbols start at 2 x (mesh and segment
// product) and are halved greedily while the reduced program keeps the same ops and
// every dimension either unchanged or >= 2 (>= 2 per segment). docs/shape-reduction.md
// has the argument for why a verdict at those sizes holds at the full sizes.
//
//===----------------------------------------------------------------------===//
#include "Dist/DistDialect.h"
#include "Import/JsonImport.h"
#include "Spec/Spec.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <memory>

using namespace mlir;
using namespace planproof;

/// Whether `small` is a faithful reduction of `large`: the same ops in the same order,
/// and every dimension either unchanged or reduced to at least 2 elements (at least 2
/// per segment for interleaved layouts), so that every shard block of every split stays
/// non-empty with >= 2 elements (docs/shape-reduction.md).
static bool faithfulReduction(Spec &small, Spec &large) {
  std::vector<Operation *> a, b;
  small.modules.back()->walk([&](Operation *op) { a.push_back(op); });
  large.modules.back()->walk([&](Operation *op) { b.push_back(op); });
  if (a.size() != b.size())
    return false;
  auto sameType = [](Type x, Type y, int64_t segments = 1) {
    auto tx = dyn_cast<RankedTensorType>(x), ty = dyn_cast<RankedTensorType>(y);
    if (!tx || !ty)
      return x == y;
    if (tx.getRank() != ty.getRank())
      return false;
    for (int64_t d = 0; d < tx.getRank(); ++d) {
      int64_t r = tx.getDimSize(d), n = ty.getDimSize(d);
      if (r != n && (r > n || r < 2 * segments))
        return false;
    }
    return true;
  };
  auto segmentsOf = [](func::FuncOp f, unsigned i, bool result) -> int64_t {
    auto l = result ? f.getResultAttrOfType<dist::LayoutAttr>(i, dist::kLayoutAttr)
                    : f.getArgAttrOfType<dist::LayoutAttr>(i, dist::kLayoutAttr);
    int64_t k = 1;
    if (l && l.getSegments())
      for (int64_t s : l.getSegments().asArrayRef())
        k = std::max(k, s < 0 ? -s : s); // a zigzag split has 2 segments
    return k;
  };
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i]->getName() != b[i]->getName() || a[i]->getNumResults() != b[i]->getNumResults())
      return false;
    for (unsigned k = 0; k < a[i]->getNumResults(); ++k)
      if (!sameType(a[i]->getResult(k).getType(), b[i]->getResult(k).getType()))
        return false;
    if (auto fa = dyn_cast<func::FuncOp>(a[i])) {
      auto fb = cast<func::FuncOp>(b[i]);
      if (fa.getNumArguments() != fb.getNumArguments() || fa.getNumResults() != fb.getNumResults())
        return false;
      for (unsigned k = 0; k < fa.getNumArguments(); ++k)
        if (!sameType(fa.getArgumentTypes()[k], fb.getArgumentTypes()[k], segmentsOf(fa, k, false)))
          return false;
      for (unsigned k = 0; k < fa.getNumResults(); ++k)
        if (!sameType(fa.getResultTypes()[k], fb.getResultTypes()[k], segmentsOf(fa, k, true)))
          return false;
    }
  }
  return true;
}

bool planproof::importParametric(MLIRContext &ctx, const std::string &path,
                                 const std::string &text, Spec &spec, Diagnostics &diags) {
  // Import at the full sizes first: types only, cheap, and the reference for checking a
  // reduction.
  auto sources = spec.sources;
  bool reduceShapes = spec.reduceShapes;
  auto fresh = [&]() {
    auto out = std::make_unique<Spec>();
    out->path = spec.path;
    out->sources = sources;
    out->reduceShapes = reduceShapes;
    return out;
  };
  std::unique_ptr<Spec> full = fresh();
  if (!importJsonText(ctx, path, text, *full, nullptr, diags))
    return false;
  std::unique_ptr<Spec> best = std::move(full);
  Spec &fullSpec = *best;
  std::map<std::string, int64_t> values;
  for (const ReducedDim &d : fullSpec.reducedDims)
    values[d.name] = std::min(d.full, fullSpec.reductionQuantum);
  bool shrinkable = llvm::any_of(fullSpec.reducedDims, [&](const ReducedDim &d) {
    return values[d.name] < d.full;
  });
  if (reduceShapes && shrinkable) {
    std::unique_ptr<Spec> keepFull = std::move(best);
    auto attempt = [&](const std::map<std::string, int64_t> &vals) -> std::unique_ptr<Spec> {
      std::unique_ptr<Spec> cand = fresh();
      Diagnostics ignored; // a size that fails to import is not a reduction to take
      if (!importJsonText(ctx, path, text, *cand, &vals, ignored) ||
          !faithfulReduction(*cand, *keepFull))
        return nullptr;
      return cand;
    };
    best = attempt(values);
    if (best) {
      // Greedily halve each symbol while the reduction stays faithful.
      for (const ReducedDim &d : keepFull->reducedDims)
        while (values[d.name] > 2) {
          auto next = values;
          next[d.name] = std::max<int64_t>(2, values[d.name] / 2);
          std::unique_ptr<Spec> cand = attempt(next);
          if (!cand)
            break;
          values = next;
          best = std::move(cand);
        }
    } else {
      best = std::move(keepFull);
    }
  }
  Spec &chosen = *best;
  spec.modules = std::move(chosen.modules);
  spec.names = std::move(chosen.names);
  spec.sources = std::move(chosen.sources); // with the user's files that ops' `loc` name
  spec.reducedDims = chosen.reducedDims;
  spec.reductionQuantum = chosen.reductionQuantum;
  return true;
}
