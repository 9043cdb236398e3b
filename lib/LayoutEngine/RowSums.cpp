//===- RowSums.cpp - a one-hot block times a function of its own row sums -===//
//
// A vocabulary-parallel loss's backward pass may update the picked entries of each
// rank's one-hot columns through their row sums (torchtitan's loss-parallel
// cross-entropy: `one_hot * ((1 - one_hot.sum(1)) - 1)`). The row sums of a rank's
// block of a one-hot are 0 or 1 -- 1 exactly on the rows whose class lies in the
// block -- so the block times any function h of its own row sums is the block times
// h(1): where an entry is 1 its row sums to 1, where it is 0 the product is 0. The
// row sums themselves are a partial sum over the axes that split the classes, whose
// state says only what the ranks' summands add up to; the rule needs what each rank
// holds. So a partial sum made from a one-hot's block carries, in its state, the
// summand of every rank (State::RowSums): a x (the row sums of the rank's block of the
// one-hot, under the one-hot's split) + b, through the ops that keep it known on every
// rank (an affine function with uniform constants, a broadcast); every other op drops
// it. Certified in LayoutEngineTest, with near misses (another offset's one-hot, the
// row sums of another dimension, a product of another one-hot).
//
//===----------------------------------------------------------------------===//
#include "LayoutEngine/LayoutState.h"

#include "Ref/RefDialect.h"

using namespace mlir;
using namespace planproof;
using namespace planproof::layouts;

namespace {

/// Whether `s` is every rank's copy of one number (a uniform replicated value): `v`.
bool uniformConstant(TermPool &terms, const State &s, Rational &v) {
  if (!s.known || !s.partial.empty() || !s.partialMax.empty() || s.isSplit() ||
      !s.uniformOne(terms.one()))
    return false;
  v = s.factor;
  return true;
}

} // namespace

void planproof::layouts::annotateRowSums(RuleContext &c, Operation &op,
                                         const std::vector<const State *> &in, State &out) {
  out.rowSums.reset();
  if (!out.known || out.partial.empty() || !out.partialMax.empty())
    return;
  // Each rank's row sums of its block of a one-hot (along its class dimension, the
  // last): a partial sum over the axes that split the classes.
  if (auto sum = dyn_cast<ref::ReduceSumOp>(op)) {
    const State &x = *in[0];
    int last = (int)x.global.size() - 1;
    if (!x.known || !x.partial.empty() || !x.partialMax.empty() || x.broadcast ||
        !x.rankCoeff.empty() || last < 0 || sum.getDims().size() != 1 ||
        sum.getDims()[0] != last || !c.terms.isOp<ref::OneHotOp>(x.term) ||
        (x.split[last].empty() && x.split[last].windows.empty()))
      return;
    State::RowSums r;
    r.of = x.term;
    r.dim = last;
    r.split = x.split;
    r.a = x.factor;
    for (int k = 0; k < last; ++k)
      r.at.push_back(k);
    out.rowSums = r;
    return;
  }
  // An affine function of the summands with a number every rank holds.
  if (isa<ref::AddOp, ref::SubOp>(op) && in.size() == 2) {
    for (int i = 0; i < 2; ++i) {
      Rational v;
      if (!in[i]->rowSums || in[i]->partial != out.partial ||
          !uniformConstant(c.terms, *in[1 - i], v))
        continue;
      State::RowSums r = *in[i]->rowSums;
      bool negate = isa<ref::SubOp>(op) && i == 1; // v - (a s + b)
      bool minus = isa<ref::SubOp>(op) && i == 0;  // (a s + b) - v
      if (negate) {
        r.a = Rational(0) - r.a;
        r.b = v - r.b;
      } else {
        r.b = minus ? r.b - v : r.b + v;
      }
      out.rowSums = r;
      return;
    }
    return;
  }
  if (auto scale = dyn_cast<ref::ScaleOp>(op)) {
    Rational k;
    std::string why;
    if (!in[0]->rowSums || !exactConstant(scale.getFactor().convertToDouble(), k, why))
      return;
    State::RowSums r = *in[0]->rowSums;
    r.a = r.a * k;
    r.b = r.b * k;
    out.rowSums = r;
    return;
  }
  // Copies along new dimensions: the copied dimensions index no dimension of the
  // one-hot.
  if (auto b = dyn_cast<ref::BroadcastOp>(op)) {
    if (!in[0]->rowSums)
      return;
    State::RowSums r = *in[0]->rowSums;
    std::vector<int64_t> at(out.global.size(), -1);
    for (auto [k, d] : llvm::enumerate(b.getDims()))
      if (d < 0 || d >= (int64_t)at.size() || k >= r.at.size())
        return;
      else
        at[d] = r.at[k];
    r.at = at;
    out.rowSums = r;
  }
}

bool planproof::layouts::oneHotTimesRowSums(RuleContext &c, Operation &op,
                                            const std::vector<const State *> &in,
                                            State &out) {
  (void)c;
  if (!isa<ref::MulOp>(op) || in.size() != 2)
    return false;
  for (int i = 0; i < 2; ++i) {
    const State &y = *in[i], &x = *in[1 - i];
    if (!y.known || !y.rowSums || !x.known || !x.partial.empty() || !x.partialMax.empty() ||
        !x.rankCoeff.empty() || x.broadcast || !y.partialMax.empty())
      continue;
    const State::RowSums &r = *y.rowSums;
    // The block of the one-hot every rank holds, and each of its entries against its
    // own row's sum (the operands' local shapes are one: the op's verifier; the copies'
    // dimension may have a global size of its own).
    if (x.term != r.of || x.split != r.split || r.at.size() != x.global.size())
      continue;
    bool rows = true;
    for (size_t k = 0; k < r.at.size(); ++k)
      rows &= (int)k == r.dim ? r.at[k] == -1 : r.at[k] == (int64_t)k;
    if (!rows)
      continue;
    out = x;
    out.factor = x.factor * (r.a + r.b);
    return true;
  }
  return false;
}
