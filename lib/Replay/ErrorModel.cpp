//===- ErrorModel.cpp - a replay's numbers against the reference ----------===//
//
// What both replay backends share once they have their numbers (ReplayInternal.h): the
// tolerance of each reference element (the rounding noise the reference itself shows
// when summed in three orders, with a margin, plus a few units of roundoff), the
// comparison of every plan output with the fp64 truth through its layout, and the
// search for the first plan intermediate that leaves its tolerance.
//
//===----------------------------------------------------------------------===//
#include "Replay/ReplayInternal.h"

#include "Engine/Verifier.h"
#include "LayoutEngine/LayoutEngine.h"
#include "Semantics/OpSemantics.h"

#include <cmath>
#include <thread>

using namespace mlir;
using namespace planproof;
using namespace planproof::replay;

namespace {

/// The tolerance of one reference element (see replaySpec).
double elementTolerance(double w, double a, double c, double e, double u, double scale) {
  double noise = std::max({std::fabs(a - w), std::fabs(c - w), std::fabs(e - w)});
  return 16 * noise + 32 * u * std::fabs(w) + 4 * u * scale + 1e-300;
}

} // namespace

double replay::unitRoundoff(ReplayDtype d) {
  return d == ReplayDtype::F64 ? std::ldexp(1.0, -53)
         : d == ReplayDtype::F32 ? std::ldexp(1.0, -24)
                                 : std::ldexp(1.0, -8);
}

namespace {
/// Of the layout engine's departures, the one whose op comes first in the plan, or
/// null; with `stop`, only one before that plan op.
const VerifyResult::Departure *firstDeparture(const Spec &spec, const VerifyResult &v,
                                              Operation *stop = nullptr) {
  llvm::DenseMap<Operation *, const VerifyResult::Departure *> byOp;
  for (const VerifyResult::Departure &d : v.departures)
    if (d.at)
      byOp.try_emplace(d.at, &d);
  for (Operation *op : spec.planOps()) {
    if (op == stop)
      return nullptr;
    if (auto it = byOp.find(op); it != byOp.end())
      return it->second;
  }
  return stop || v.departures.empty() ? nullptr : &v.departures.front();
}

VerifyResult layoutRun(const Spec &spec, const ReplayOptions &options) {
  VerifyOptions vo;
  vo.deadline = options.deadline;
  vo.checkFixes = false;
  return verifyByLayouts(spec, vo);
}

/// Where the layout engine finds the plan departing from the reference, as the first
/// divergence, when the element engine could not say (`why`, for the report): false when
/// it finds none.
bool layoutDeparture(const Spec &spec, const ReplayOptions &options, const std::string &why,
                     ReplayDivergence &out) {
  VerifyResult v = layoutRun(spec, options);
  const VerifyResult::Departure *first = firstDeparture(spec, v);
  if (!first)
    return false;
  const VerifyResult::Departure &d = *first;
  out.found = true;
  out.byLayouts = true;
  out.location = d.location;
  out.op = d.op;
  out.value = "";
  out.note = d.message;
  out.why = why;
  return true;
}

/// After a numeric first divergence at plan op `at` (`out.op`): the layout engine's
/// first departure, noted in `out` when its op comes before `at` in the plan.
void earlierDeparture(const Spec &spec, const ReplayOptions &options, Operation *at,
                      ReplayDivergence &out) {
  VerifyResult v = layoutRun(spec, options);
  if (const VerifyResult::Departure *d = firstDeparture(spec, v, at)) {
    out.earlierOp = d->op;
    out.earlierNote = d->message;
    out.earlierLocation = d->location;
  }
}
} // namespace

void replay::findFirstDivergence(
    const Spec &spec, const ReplayOptions &options,
    const std::function<const NumTensor *(int, Value)> &ref,
    const std::function<const std::vector<NumTensor> *(Value)> &plan, ReplayDivergence &out) {
  // Walks the plan in program order and compares every op result that holds a reference
  // value exactly (the verifier's relations) with that value, element by element.
  std::string why;
  std::vector<PlanValueRelation> rels = relatePlanValues(spec, why);
  if (rels.empty()) {
    out.note = why.empty() ? "no plan intermediate holds a reference value exactly" : why;
    // The element engine cannot relate the plan's values (a plan beyond its budget):
    // the layout engine may still say where the plan departs.
    if (!why.empty())
      layoutDeparture(spec, options, "no intermediate was compared (" + why + ")", out);
    return;
  }
  NumericDomain d{options.dtype, options.order};
  double u = unitRoundoff(options.dtype);
  const Mesh &mesh = spec.mesh;
  for (const PlanValueRelation &rel : rels) {
    const NumTensor *tw = ref(Truth, rel.refValue), *ta = ref(Forward, rel.refValue),
                    *tc = ref(Reverse, rel.refValue), *te = ref(Pairwise, rel.refValue);
    const std::vector<NumTensor> *pv = plan(rel.planValue);
    if (!tw || !ta || !tc || !te || !pv)
      continue;
    const NumTensor &w = *tw, &a = *ta, &c = *tc, &e = *te;
    double scale = 0;
    for (double x : w.data)
      scale = std::max(scale, std::isfinite(x) ? std::fabs(x) : 0.0);
    const std::vector<NumTensor> &per = *pv;
    for (int64_t r = 0; r < mesh.numRanks(); ++r) {
      if (rel.layout.isPartial() && mesh.positionInGroup(r, rel.layout.partialAxes()) != 0)
        continue;
      for (int64_t l = 0; l < (int64_t)per[r].data.size(); ++l) {
        std::vector<int64_t> idx = per[r].unravel(l);
        for (size_t k = 0; k < rel.offset.size(); ++k)
          idx[k] += rel.offset[k];
        auto g = rel.layout.globalIndex(mesh, r, rel.block.empty() ? per[r].shape : rel.block, idx);
        if (!Layout::inBounds(g, w.shape))
          continue;
        int64_t at = w.linear(g);
        if (!std::isfinite(w.data[at]) || !std::isfinite(a.data[at]) ||
            !std::isfinite(c.data[at]) || !std::isfinite(e.data[at]))
          continue;
        double got;
        if (!gatherPartial(d, mesh, rel.layout, per, r, l, got))
          continue; // max mixed with sum: not a layout values are gathered through
        double tol = elementTolerance(w.data[at], a.data[at], c.data[at], e.data[at], u, scale);
        double err = std::isfinite(got) ? std::fabs(got - w.data[at]) : INFINITY;
        if (err <= tol)
          continue;
        Operation *op = rel.planValue.getDefiningOp();
        out.found = true;
        out.location = toSourceLoc(op->getLoc());
        out.op = spec.nameOf(rel.planValue) + " = " + op->getName().getStringRef().str();
        out.value = spec.nameOf(rel.refValue);
        out.rank = mesh.rankStr(r);
        out.local = per[r].unravel(l);
        out.global = g;
        out.plan = got;
        out.reference = w.data[at];
        out.tolerance = tol;
        earlierDeparture(spec, options, op, out);
        return;
      }
    }
  }
  // Every intermediate that holds a reference value is within tolerance: the numbers
  // leave the reference where the plan computes something else. The verifier's first
  // wrong op (operands that hold reference values, a result that holds none) is that
  // point. (Its fix hints are not shown here: not checked, which saves re-verifying.)
  VerifyOptions vo;
  vo.deadline = options.deadline;
  vo.checkFixes = false;
  VerifyResult v = verifySpec(spec, vo);
  for (const Violation &viol : v.violations)
    if (!viol.at.empty()) {
      out.found = true;
      out.location = viol.location;
      out.op = viol.at;
      out.value = "";
      out.note = "[" + viol.kind + "] " + viol.message;
      return;
    }
  out.note = "every plan intermediate that holds a reference value is within tolerance, "
             "and the verifier names no wrong op";
  if (v.verdict == Verdict::Inconclusive)
    layoutDeparture(spec, options,
                    "every intermediate that holds a reference value is within tolerance and "
                    "the element engine names no wrong op",
                    out);
}

namespace {
/// One plan output against the reference (see compareOutputs).
ReplayOutput compareOutput(const Spec &spec, NumericDomain fwd, double u,
                           const std::map<std::string, NumTensor> *refs[4],
                           const std::vector<std::vector<NumTensor>> &plan, size_t o) {
  const Mesh &mesh = spec.mesh;
  const Binding &b = spec.planOutputs[o];
  const NumTensor &want = refs[Truth]->at(b.refName);
  const NumTensor &a = refs[Forward]->at(b.refName), &c = refs[Reverse]->at(b.refName),
                  &e = refs[Pairwise]->at(b.refName);
  double scale = 0;
  for (double x : want.data)
    scale = std::max(scale, std::fabs(x));
  ReplayOutput out;
  out.name = b.refName;
  out.elements = (int64_t)want.data.size();
  out.shape = want.shape;
  if (out.elements <= ReplayOutput::kMaxRatioElements)
    out.ratio.assign(want.data.size(), 0.0f);
  double worstRatio = -1;
  for (int64_t r = 0; r < mesh.numRanks(); ++r) {
    bool leader = !b.layout.isPartial() || mesh.positionInGroup(r, b.layout.partialAxes()) == 0;
    if (!leader || !spec.onStage(r, b.stage))
      continue;
    b.layout.forEachElement(mesh, r, plan[o][r].shape, want.shape, [&](int64_t l, int64_t at) {
      if (at < 0)
        return;
      double got;
      if (!gatherPartial(fwd, mesh, b.layout, plan[o], r, l, got))
        return; // max mixed with sum: not a layout values are gathered through
      double w = want.data[at];
      // Where the reference itself leaves a function's domain at these inputs (the
      // square root of a negative random moment), in fp64 or in the storage
      // precision, there is nothing to compare.
      if (!std::isfinite(w) || !std::isfinite(a.data[at]) || !std::isfinite(c.data[at]) ||
          !std::isfinite(e.data[at])) {
        ++out.undefined;
        return;
      }
      // The tolerance of this element: the rounding noise the reference itself shows
      // when summed in two orders, with a margin, plus a few units of roundoff of
      // the element and of the output's scale.
      double tol = elementTolerance(w, a.data[at], c.data[at], e.data[at], u, scale);
      double err = std::isfinite(got) ? std::fabs(got - w) : INFINITY;
      out.maxAbsError = std::max(out.maxAbsError, err);
      out.maxRelError = std::max(out.maxRelError, err / std::max(std::fabs(w), 1e-300));
      double ratio = err / tol;
      if (!out.ratio.empty())
        out.ratio[at] = std::max(out.ratio[at], std::isnan(ratio) ? INFINITY : (float)ratio);
      if (ratio > worstRatio) {
        worstRatio = ratio;
        out.worst = unravelIndex(want.shape, at);
        out.worstRank = mesh.rankStr(r);
        out.worstError = err;
        out.worstTolerance = tol;
        out.worstReference = w;
        out.worstPlan = got;
      }
      if (!(err <= tol))
        out.within = false;
    });
  }
  return out;
}
} // namespace

void replay::compareOutputs(const Spec &spec, const ReplayOptions &options,
                            const std::map<std::string, NumTensor> *refs[4],
                            const std::vector<std::vector<NumTensor>> &plan, ReplayResult &result) {
  NumericDomain fwd{options.dtype, options.order};
  double u = unitRoundoff(options.dtype);
  // Outputs are compared independently, each on a core.
  std::vector<ReplayOutput> outs(spec.planOutputs.size());
  parallelChunks((int64_t)outs.size(), 1, [&](int64_t begin, int64_t end) {
    for (int64_t o = begin; o < end; ++o)
      outs[o] = compareOutput(spec, fwd, u, refs, plan, o);
  });
  for (ReplayOutput &o : outs)
    result.outputs.push_back(std::move(o));
}


