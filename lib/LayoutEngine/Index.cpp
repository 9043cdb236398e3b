//===- Index.cpp - the layout engine's rules for index values -------------===//
//
// Index values (step counters, seeds, offsets) as terms, with the linear rank part of
// values computed from dist.axis_index (State::rankCoeff), and the one op that takes
// a rank-dependent value: dropout_mask's counter (docs/layout-engine.md).
//
//===----------------------------------------------------------------------===//
#include "LayoutEngine/LayoutState.h"

#include "Dist/DistDialect.h"
#include "Ref/RefDialect.h"
#include "Support/Limits.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/BuiltinTypes.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <map>

using namespace mlir;

namespace planproof::layouts {

/// Whether t is an index constant's leaf, and its value.
bool constantLeaf(const TermPool &terms, TermId t, int64_t &v) {
  const TermPool::HeadData &h = terms.headData(t);
  if (h.constant)
    v = h.params[0];
  return h.constant;
}

namespace {

/// A rank-dependent index value `r` times the constant `k`: its term and its rank
/// coefficients times k.
State rankTimesConstant(RuleContext &c, Operation &op, const State &r, const State &k) {
  if (!k.isConst)
    return State::unknown(&op, "a rank-dependent index value times a value that is not a "
                               "constant");
  TermId zero = c.terms.leaf("0", "index constant");
  State out;
  out.known = true;
  out.term = zero;
  int64_t v = 0;
  if (k.constValue == 1)
    out.term = r.term;
  else if (constantLeaf(c.terms, r.term, v) && checkedMul(v, k.constValue, v))
    out.term = c.terms.leaf(std::to_string(v), "index constant"); // constants fold
  else if (!(r.term == zero))
    out.term = c.terms.indexNode(c.terms.head(op.getName(), op.getAttrDictionary(), {}),
                                 {r.term, k.term});
  for (auto [a, w] : r.rankCoeff) {
    int64_t p = 0;
    if (!checkedMul(w, k.constValue, p))
      return State::unknown(&op, "a rank-dependent index value that overflows");
    if (p != 0)
      out.rankCoeff.push_back({a, p});
  }
  if (out.rankCoeff.empty() && out.term == zero) {
    out.isConst = true;
    out.constValue = 0;
  }
  return out;
}

} // namespace

State indexRule(RuleContext &c, Operation &op, const std::vector<const State *> &in) {
  // An index value is a scalar term (the same on every rank), plus, for a value
  // computed from dist.axis_index, a linear function of the rank's coordinates
  // (State::rankCoeff): constants, +, - and * by a constant keep that form. Constants
  // fold, so that a term never holds a rank part that happens to be constant.
  auto noRule = [&]() { return State::unknown(&op, "no layout rule for `" + opName(op) + "`"); };
  auto constant = [&](int64_t v) {
    State k;
    k.known = true;
    k.isConst = true;
    k.constValue = v;
    k.term = c.terms.leaf(std::to_string(v), "index constant");
    return k;
  };
  if (auto ax = dyn_cast<dist::AxisIndexOp>(op)) {
    int a = c.mesh.axisIndex(ax.getAxis().str());
    if (a < 0)
      return noRule();
    State out = constant(0);
    if (c.mesh.shape[a] > 1) {
      out.isConst = false;
      out.rankCoeff = {{a, 1}};
    }
    return out;
  }
  if (!isa<arith::ConstantOp, arith::AddIOp, arith::SubIOp, arith::MulIOp>(op) ||
      op.getNumResults() != 1 || !op.getResult(0).getType().isIndex())
    return noRule();
  for (size_t i = 0; i < in.size(); ++i) {
    if (!in[i]->known)
      return *in[i];
    if (!op.getOperand(i).getType().isIndex())
      return noRule();
  }
  if (auto k = dyn_cast<arith::ConstantOp>(op)) {
    auto v = dyn_cast<IntegerAttr>(k.getValue());
    return v ? constant(v.getInt()) : noRule();
  }
  const State &x = *in[0], &y = *in[1];
  bool mul = isa<arith::MulIOp>(op);
  int64_t sign = isa<arith::SubIOp>(op) ? -1 : 1;
  State out;
  out.known = true;
  // The rank-independent part.
  bool xPure = x.rankCoeff.empty(), yPure = y.rankCoeff.empty();
  if (mul && !xPure && !yPure)
    return State::unknown(&op, "a product of rank-dependent index values the layout engine "
                               "does not follow");
  auto fold = [&](int64_t a, int64_t b, int64_t &v) {
    return mul ? checkedMul(a, b, v) : checkedAdd(a, sign * b, v);
  };
  int64_t v = 0;
  if (x.isConst && y.isConst && fold(x.constValue, y.constValue, v)) {
    out = constant(v);
  } else if (mul && ((x.isConst && x.constValue == 0) || (y.isConst && y.constValue == 0))) {
    return constant(0);
  } else if (mul) {
    // A rank part times a constant; a pure part times anything.
    if (!xPure || !yPure)
      return rankTimesConstant(c, op, xPure ? y : x, xPure ? x : y);
    if (x.isConst && x.constValue == 1)
      out.term = y.term;
    else if (y.isConst && y.constValue == 1)
      out.term = x.term;
    else
      out.term = c.terms.indexNode(c.terms.head(op.getName(), op.getAttrDictionary(), {}),
                                   {x.term, y.term});
  } else if (y.term == c.terms.leaf("0", "index constant")) { // 0, or a rank part alone
    out.term = x.term;
  } else if (x.term == c.terms.leaf("0", "index constant") && sign > 0) {
    out.term = y.term;
  } else {
    out.term = c.terms.indexNode(c.terms.head(op.getName(), op.getAttrDictionary(), {}),
                                 {x.term, y.term});
  }
  if (xPure && yPure)
    return out;
  // The rank part: linear.
  std::map<int, int64_t> coeff;
  for (auto [a, w] : x.rankCoeff)
    coeff[a] += w;
  for (auto [a, w] : y.rankCoeff)
    coeff[a] += sign * w;
  out.isConst = false;
  for (auto [a, w] : coeff)
    if (w != 0)
      out.rankCoeff.push_back({a, w});
  if (out.rankCoeff.empty() && out.term == c.terms.leaf("0", "index constant"))
    return constant(0);
  return out;
}

/// dropout_mask(key, counter): element i draws (key, counter + i), i its row-major
/// index. Where the counter is a term plus a rank part whose coefficients are the
/// blocks' strides of a split of dimension 0 (the minor axis's coefficient the
/// block's element count, each major one the next one's times that axis' size), every
/// rank draws exactly the pairs of its rows of the mask that (key, term) draws over the
/// whole: the block of that mask under the split. The rank part is what tells the
/// split; any other rank dependence has no rule.
State dropoutRule(RuleContext &c, Operation &op, const std::vector<const State *> &in) {
  const State &key = *in[0], &ctr = *in[1];
  if (!key.known)
    return key;
  if (!ctr.known)
    return ctr;
  if (!key.rankCoeff.empty())
    return State::unknown(&op, "its key differs from rank to rank");
  Shape local;
  if (!resultShape(op, local) || local.empty())
    return State::unknown(&op, "`ref.dropout_mask` without a tensor result");
  int64_t block = checkedProduct(local);
  std::vector<std::pair<int, int64_t>> axes = ctr.rankCoeff;
  std::sort(axes.begin(), axes.end(), [](auto &a, auto &b) { return a.second > b.second; });
  int64_t stride = block;
  for (size_t i = axes.size(); i-- > 0;) {
    if (axes[i].second != stride)
      return State::unknown(&op, "its counter advances by " + std::to_string(axes[i].second) +
                                     " per rank along " + c.mesh.axes[axes[i].first] +
                                     " where the blocks of its rows hold " +
                                     std::to_string(stride) + " elements");
    if (!checkedMul(stride, c.mesh.shape[axes[i].first], stride))
      return State::unknown(&op, "its counter's stride overflows");
  }
  State out;
  out.known = true;
  out.split.assign(local.size(), {});
  out.global = local;
  for (auto &[a, k] : axes)
    out.split[0].push_back(a);
  out.global[0] = local[0] * c.size(out.split[0]);
  std::string why;
  if (!consistent(c, out, local, why))
    return State::unknown(&op, why);
  out.term = c.terms.node(c.terms.head(op.getName(), op.getAttrDictionary(), out.global),
                          {key.term, ctr.term});
  c.terms.setOp(out.term, op.getName(), op.getAttrDictionary());
  return out;
}

} // namespace planproof::layouts
