//===- NormalForm.cpp - terms of layout ops and reductions in one form ----===//
//
// Terms of layout ops written in another order, and reductions, in the terms' one normal
// form (docs/layout-engine.md, "Terms and factors", "Reshapes", "A one-hot's rows sum
// to 1"): applied by combine (Rules.cpp) to reference and plan alike.
//
//===----------------------------------------------------------------------===//
#include "LayoutEngine/LayoutState.h"

#include "Ref/RefDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"

#include <algorithm>

using namespace mlir;

namespace planproof::layouts {

/// Terms of layout ops written in another order, in one form (exact identities):
/// row-major reshapes compose (a reshape of a reshape is the first operand's reshape,
/// or that operand), a transposed product is the product of the other order, and a
/// transpose of a transpose of a matrix is the matrix.
bool layoutNormalForm(TermPool &terms, Operation &op, const Shape &global,
                      const std::vector<const State *> &in, Combined &out) {
  if (!in.empty() && unitTranspose(op, in[0]->global)) {
    out = {terms.shapeOf(in[0]->term) == global ? in[0]->term
                                                : reshapeTerm(terms, op, in[0]->term, global),
           in[0]->factor};
    return true;
  }
  if (isa<ref::ReshapeOp>(op) && in.size() == 1 && terms.shapeOf(in[0]->term) == global) {
    out = {in[0]->term, in[0]->factor}; // a reshape to the shape it has: the value
    return true;
  }
  if (isa<ref::ReshapeOp>(op) && (terms.isOp<ref::ReshapeOp>(in[0]->term) ||
                                   terms.uniformBroadcast(in[0]->term))) {
    out = {reshapeTerm(terms, op, in[0]->term, global), in[0]->factor};
    return true;
  }
  if (TermId t; in.size() == 1 && functionOfReshape(terms, op, *in[0], global, t)) {
    out = {t, Rational(1)};
    return true;
  }
  // Sums in one form (Reshapes.cpp: a sum of a sum, a sum of a reshape over whole
  // groups); a mean is the sum over the count of its elements.
  if (auto sum = dyn_cast<ref::ReduceSumOp>(op); sum && in.size() == 1) {
    std::vector<int64_t> dims(sum.getDims().begin(), sum.getDims().end());
    auto [t, f] = sumOf(terms, op, in[0]->term, dims, global); // (Picks.cpp)
    out = {t, in[0]->factor * f};
    return true;
  }
  // A maximum likewise. It is positively homogeneous, max(c x) = c max(x) for c > 0:
  // such a factor stays outside (then a reshape under it can lift); any other goes
  // inside, as for an op not linear in its operand.
  if (auto mx = dyn_cast<ref::ReduceMaxOp>(op); mx && in.size() == 1) {
    std::vector<int64_t> dims(mx.getDims().begin(), mx.getDims().end());
    bool positive = in[0]->factor.sign() > 0;
    out = {maxTerm(terms, op, positive ? in[0]->term : terms.scaled(in[0]->term, in[0]->factor),
                   dims, global),
           positive ? in[0]->factor : Rational(1)};
    return true;
  }
  if (auto m = dyn_cast<ref::ReduceMeanOp>(op); m && in.size() == 1) {
    int64_t count = 1;
    for (int64_t d : m.getDims())
      if (d >= 0 && d < (int64_t)in[0]->global.size())
        count *= in[0]->global[d];
    if (count > 0) {
      std::vector<int64_t> dims(m.getDims().begin(), m.getDims().end());
      auto [t, f] = sumOf(terms, op, in[0]->term, dims, global);
      out = {t, in[0]->factor * f / Rational(count)};
      return true;
    }
  }
  // (A reshape that only adds or drops dimensions of size 1 of a broadcast with copies
  // is that broadcast: State::copies.)
  TermId source;
  std::vector<int64_t> dims;
  if (isa<ref::ReshapeOp>(op) && in.size() == 1 && in[0]->broadcast &&
      in[0]->sourceDims.empty()) { // a uniform value, every element its source
    out = {terms.broadcast(global, {}, in[0]->source), in[0]->factor};
    return true;
  }
  if (isa<ref::ReshapeOp>(op) && in[0]->broadcast && in[0]->copies() &&
      unitReshape(*in[0], global, source, dims)) {
    out = {terms.broadcast(global, dims, source), in[0]->factor};
    return true;
  }
  if (TermId t; isa<ref::ReshapeOp>(op) && reshapeOfConcat(terms, op, global, *in[0], t)) {
    out = {t, in[0]->factor};
    return true;
  }
  if (auto t = dyn_cast<ref::TransposeOp>(op); t && t.getPerm().size() == 2 &&
                                                 t.getPerm()[0] == 1) {
    OperationName name = op.getName();
    DictionaryAttr attrs;
    TermId x = in[0]->term;
    if (terms.headIs(x, "ref.transpose{perm=array<i64: 1, 0>;}") &&
        terms.shapeOf(terms.operands(x)[0]) == global) {
      out = {terms.operands(x)[0], in[0]->factor};
      return true;
    }
    if (terms.isOp<ref::MatmulOp>(x) && terms.opOf(x, name, attrs)) {
      auto l = attrs.getAs<IntegerAttr>("lhs_dim"), r = attrs.getAs<IntegerAttr>("rhs_dim");
      if (l && r) {
        Builder b(op.getContext());
        auto swapped = b.getDictionaryAttr({b.getNamedAttr("lhs_dim", r),
                                            b.getNamedAttr("rhs_dim", l)});
        const auto &ab = terms.operands(x);
        out = {terms.node(terms.head(name, swapped, global), {ab[1], ab[0]}), in[0]->factor};
        terms.setOp(out.term, name, swapped);
        return true;
      }
    }
  }
  return false;
}

} // namespace planproof::layouts
