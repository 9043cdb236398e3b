//===- Maxima.cpp - values each rank holds a maximum of, through ops ----------===//
//
// A partial maximum (each rank's maximum of its block, over axes A, before its
// all_reduce "max") passes through the ops that commute with the elementwise maximum
// over the ranks (docs/layout-engine.md, "Maxima: an infinity norm of norms").
//
//===----------------------------------------------------------------------===//
#include "LayoutEngine/LayoutState.h"

#include "Ref/RefDialect.h"

using namespace mlir;

namespace planproof::layouts {

/// Values each rank holds the maximum of its block of, over the same axes A, through an
/// op that commutes with the elementwise maximum over the ranks: one that moves, copies
/// or cuts elements alike on every rank (reshape, transpose, broadcast, slice,
/// detach), scales them by c >= 0, shifts them by a value replicated over A (add, the
/// left of sub or bias_add), or is itself a maximum -- concatenations of such
/// values (max_r concat(a_r, b_r) = concat(max_r a_r, max_r b_r)), their elementwise
/// maximum (max_r max(a_r, b_r) = max(max_r a_r, max_r b_r)), reduce_max (a maximum
/// of maxima; the result is also partial-max over the axes a reduced dimension is
/// split over). An operand replicated over A (neither split nor partial over it) is
/// the maximum of its copies, and joins the others as it is. The op's rule runs on the
/// operands as if complete; the result is partial-max over A. False where the op is
/// none of these.
bool throughMaxima(RuleContext &c, Operation &op, const std::vector<const State *> &in,
                   State &out) {
  std::vector<int> axes;
  for (const State *s : in)
    if (!s->partialMax.empty())
      axes = s->partialMax;
  if (axes.empty())
    return false;
  auto scale = dyn_cast<ref::ScaleOp>(op);
  bool one = in.size() == 1 && (isa<ref::ReshapeOp, ref::TransposeOp, ref::BroadcastOp,
                                    ref::SliceOp, ref::DetachOp, ref::ReduceMaxOp>(op) ||
                                (scale && scale.getFactorAttr().getValueAsDouble() >= 0));
  // A shift by a value the same on every rank of A: max_r(a_r + b) = max_r(a_r) + b and
  // max_r(a_r - b) = max_r(a_r) - b, with the maximum on the left of a subtraction or a
  // bias (b - a_r would take the minimum) and on one operand only (max_r(a_r + c_r) is
  // no sum of maxima).
  bool shift = false;
  if (isa<ref::AddOp, ref::SubOp, ref::BiasAddOp>(op) && in.size() == 2) {
    int with = -1, count = 0;
    for (int i = 0; i < 2; ++i)
      if (!in[i]->partialMax.empty())
        with = i, ++count;
    shift = count == 1 && (isa<ref::AddOp>(op) || with == 0);
    if (!shift)
      return false;
  }
  if (!one && !shift && !isa<ref::ConcatOp, ref::MaximumOp>(op))
    return false;
  std::vector<State> moved;
  moved.reserve(in.size());
  for (const State *s : in) {
    if (!s->known || (s->partialMax != axes && !s->partialMax.empty()) ||
        intersects(s->splitAxes(), axes) || intersects(s->partial, axes) ||
        !s->rankCoeff.empty())
      return false;
    moved.push_back(*s);
    moved.back().partialMax.clear();
  }
  std::vector<const State *> ptrs;
  for (const State &s : moved)
    ptrs.push_back(&s);
  out = planRule(c, op, ptrs);
  if (out.known && (intersects(out.splitAxes(), axes) || intersects(out.partial, axes)))
    out = State::unknown(&op, "its operand is each rank's maximum over " +
                                  axesText(c.mesh, axes) +
                                  ", and its result would be split or summed over them");
  else if (out.known)
    out.partialMax = sortedUnion(out.partialMax, axes);
  return true;
}

} // namespace planproof::layouts
