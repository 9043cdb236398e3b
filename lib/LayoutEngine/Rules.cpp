//===- Rules.cpp - the layout engine's transfer rules --------------------===//
//
// One rule per op family, each with its side conditions; docs/layout-engine.md gives
// the argument for each and for why the rules together prove a plan. A rule that
// cannot show its side conditions returns an unknown state that says which one fails;
// it never guesses.
//
// The terms and states are in Terms.cpp, the collectives' rules in Collectives.cpp.
// Facts about ops come from ODS (dialects/Ref/RefInterfaces.td): MLIR's `Elementwise`
// trait, ref's `Linear` and `Multilinear` traits and the NonlinearOp interface.
//
//===----------------------------------------------------------------------===//
#include "LayoutEngine/LayoutState.h"

#include "Dist/DistDialect.h"
#include "Ref/RefDialect.h"
#include "Support/Limits.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>

using namespace mlir;

namespace planproof::layouts {

namespace {

//===----------------------------------------------------------------------===//
// Op facts (ODS) and the combination of terms
//===----------------------------------------------------------------------===//

unsigned tensorOperands(Operation &op) {
  unsigned n = 0;
  for (Value v : op.getOperands())
    n += isa<RankedTensorType>(v.getType());
  return n;
}

/// f(sum_r x_r, sum_r y_r, ...) = sum_r f(x_r, y_r, ...).
bool linearTogether(Operation &op) { return op.hasTrait<ref::OpTrait::Linear>(); }

/// f is linear in operand i with the others fixed.
bool linearIn(Operation &op, unsigned i) {
  if (op.hasTrait<ref::OpTrait::Multilinear>())
    return true;
  if (linearTogether(op) && tensorOperands(op) == 1)
    return true;
  if (auto n = dyn_cast<ref::NonlinearOp>(&op))
    return !((n.getNonlinearOperands() >> i) & 1);
  return false;
}


struct Combined {
  TermId term;
  Rational factor;
};

/// What broadcast `b` of a value in state `x` copies: x's own source when x is a
/// broadcast (the dimensions composed), else x's term.
void broadcastSource(const State &x, ref::BroadcastOp b, TermId &source,
                     std::vector<int64_t> &dims) {
  auto opDims = b.getDims();
  dims.clear();
  if (x.broadcast) {
    source = x.source;
    for (int64_t d : x.sourceDims)
      dims.push_back(opDims[d]);
  } else {
    source = x.term;
    dims.assign(opDims.begin(), opDims.end());
  }
}

/// The term and factor of `op` applied to `in`: factors stay outside the term as far
/// as linearity allows (the same function for reference and plan, so that the same
/// computation gives the same term whichever way its constants were grouped).
bool combine(TermPool &terms, Operation &op, const Shape &global,
             const std::vector<const State *> &in, Combined &out, std::string &why) {
  if (auto s = dyn_cast<ref::ScaleOp>(op)) {
    Rational f;
    if (!exactConstant(s.getFactorAttr().getValueAsDouble(), f, why))
      return false;
    out = {in[0]->term, in[0]->factor * f};
    return true;
  }
  if (isa<ref::DetachOp>(op)) {
    out = {in[0]->term, in[0]->factor};
    return true;
  }
  if (auto k = dyn_cast<ref::ConstantOp>(op)) {
    Rational v;
    if (!exactConstant(k.getValueAttr().getValueAsDouble(), v, why))
      return false;
    out = {terms.broadcast(global, {}, terms.one()), v};
    return true;
  }
  if (auto b = dyn_cast<ref::BroadcastOp>(op)) {
    TermId source;
    std::vector<int64_t> dims;
    broadcastSource(*in[0], b, source, dims);
    out = {terms.broadcast(global, dims, source), in[0]->factor};
    return true;
  }
  if (isa<ref::ReshapeOp>(op) && terms.headIs(in[0]->term, "ref.reshape{")) {
    // Row-major reshapes compose: reshape(reshape(u)) is u's reshape, or u itself.
    TermId u = terms.operands(in[0]->term)[0];
    if (terms.shapeOf(u) == global) {
      out = {u, in[0]->factor};
    } else {
      out = {terms.node(terms.head(op.getName(), op.getAttrDictionary(), global), {u}),
             in[0]->factor};
      terms.setOp(out.term, op.getName(), op.getAttrDictionary());
    }
    return true;
  }
  if (auto t = dyn_cast<ref::TransposeOp>(op); t && t.getPerm().size() == 2 &&
                                                 t.getPerm()[0] == 1) {
    // The transpose of a product is the product of the other order:
    // matmul(a, b) contract(l, r) transposed is matmul(b, a) contract(r, l); and a
    // transpose of a transpose of a matrix is the matrix.
    OperationName name = op.getName();
    DictionaryAttr attrs;
    TermId x = in[0]->term;
    if (terms.headIs(x, "ref.transpose{perm=array<i64: 1, 0>;}") &&
        terms.shapeOf(terms.operands(x)[0]) == global) {
      out = {terms.operands(x)[0], in[0]->factor};
      return true;
    }
    if (terms.headIs(x, "ref.matmul{") && terms.opOf(x, name, attrs)) {
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
  if (isa<ref::MulOp>(op))
    for (unsigned i = 0; i < 2; ++i)
      if (in[i]->uniformOne(terms.one())) {
        out = {in[1 - i]->term, in[0]->factor * in[1]->factor};
        return true;
      }
  const std::string &head = terms.head(op.getName(), op.getAttrDictionary(), global);
  if (isa<ref::AddOp>(op)) { // the normal form of sums (TermPool::sum)
    std::vector<std::pair<TermId, Rational>> weighted;
    for (const State *s : in)
      weighted.push_back({s->term, s->factor});
    auto [t, f] = terms.sum(head, weighted);
    out = {t, f};
    return true;
  }
  std::vector<TermId> ts;
  Rational factor(1);
  if (linearTogether(op) && !in.empty() && !in[0]->factor.isZero()) {
    factor = in[0]->factor;
    for (const State *s : in)
      ts.push_back(terms.scaled(s->term, s->factor / factor));
  } else {
    for (unsigned i = 0; i < in.size(); ++i) {
      if (linearIn(op, i)) {
        factor = factor * in[i]->factor;
        ts.push_back(in[i]->term);
      } else {
        ts.push_back(terms.scaled(in[i]->term, in[i]->factor));
      }
    }
  }
  if (isa<ref::ConcatOp>(op)) {
    out = {terms.concat(head, ts), factor};
  } else {
    out = {terms.node(head, ts), factor};
    terms.setOp(out.term, op.getName(), op.getAttrDictionary());
  }
  return true;
}

/// Marks `out` a broadcast where `op` makes one: a constant, a broadcast, a product
/// with the uniform one, a scale or detach of a broadcast.
void markBroadcast(TermPool &terms, Operation &op, const std::vector<const State *> &in,
                   State &out) {
  auto inherit = [&](const State &from) {
    out.broadcast = from.broadcast;
    out.source = from.source;
    out.sourceDims = from.sourceDims;
  };
  if (isa<ref::ConstantOp>(op)) {
    out.broadcast = true;
    out.source = terms.one();
    out.sourceDims.clear();
  } else if (auto b = dyn_cast<ref::BroadcastOp>(op)) {
    out.broadcast = true;
    broadcastSource(*in[0], b, out.source, out.sourceDims);
  } else if (isa<ref::MulOp>(op) && in[0]->uniformOne(terms.one())) {
    inherit(*in[1]);
  } else if (isa<ref::MulOp>(op) && in[1]->uniformOne(terms.one())) {
    inherit(*in[0]);
  } else if (isa<ref::ScaleOp, ref::DetachOp>(op)) {
    inherit(*in[0]);
  }
}

/// The tensor operands' states, or an unknown state (the first unknown operand's, or
/// one for an operand that is not a tensor).
bool operandStates(Operation &op, const std::vector<const State *> &in, State &unknown) {
  for (unsigned i = 0; i < op.getNumOperands(); ++i) {
    if (!isa<RankedTensorType>(op.getOperand(i).getType()) &&
        !op.getOperand(i).getType().isIndex()) {
      unknown = State::unknown(&op, "`" + opName(op) + "` takes an operand of a type the "
                                    "layout engine does not follow");
      return false;
    }
    if (!in[i]->known) {
      unknown = *in[i];
      return false;
    }
    if (!in[i]->rankCoeff.empty()) {
      unknown = State::unknown(&op, "`" + opName(op) + "` takes an index value that differs "
                                    "from rank to rank, which the layout engine does not "
                                    "follow here");
      return false;
    }
  }
  return true;
}

} // namespace

//===----------------------------------------------------------------------===//
// The reference
//===----------------------------------------------------------------------===//

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
    const State &r = xPure ? y : x, &k = xPure ? x : y;
    if (!xPure || !yPure) {
      if (!k.isConst)
        return State::unknown(&op, "a rank-dependent index value times a value that is not a "
                                   "constant");
      TermId zero = c.terms.leaf("0", "index constant");
      out = constant(0);
      out.isConst = false;
      if (!(r.term == zero))
        out.term = c.terms.node(c.terms.head(op.getName(), op.getAttrDictionary(), {}),
                                {r.term, k.term});
      for (auto [a, w] : r.rankCoeff) {
        int64_t p = 0;
        if (!checkedMul(w, k.constValue, p))
          return State::unknown(&op, "a rank-dependent index value that overflows");
        if (p != 0)
          out.rankCoeff.push_back({a, p});
      }
      if (out.rankCoeff.empty() && out.term == zero)
        return constant(0);
      return out;
    }
    if (x.isConst && x.constValue == 1)
      out.term = y.term;
    else if (y.isConst && y.constValue == 1)
      out.term = x.term;
    else
      out.term = c.terms.node(c.terms.head(op.getName(), op.getAttrDictionary(), {}),
                              {x.term, y.term});
  } else if (y.term == c.terms.leaf("0", "index constant")) { // 0, or a rank part alone
    out.term = x.term;
  } else if (x.term == c.terms.leaf("0", "index constant") && sign > 0) {
    out.term = y.term;
  } else {
    out.term = c.terms.node(c.terms.head(op.getName(), op.getAttrDictionary(), {}),
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

State referenceRule(RuleContext &c, Operation &op, const std::vector<const State *> &in) {
  if (isa<arith::ArithDialect>(op.getDialect()))
    return indexRule(c, op, in);
  State bad;
  if (!operandStates(op, in, bad))
    return bad;
  Shape local;
  if (!isa<ref::RefDialect>(op.getDialect()) || !resultShape(op, local))
    return State::unknown(&op, "the reference op `" + opName(op) +
                                   "` is not a ref op with one tensor result");
  Combined k;
  std::string why;
  if (!combine(c.terms, op, local, in, k, why))
    return State::unknown(&op, why);
  State out;
  out.known = true;
  out.term = k.term;
  out.factor = k.factor;
  out.global = local;
  out.split.assign(local.size(), {});
  markBroadcast(c.terms, op, in, out);
  return out;
}

//===----------------------------------------------------------------------===//
// Ref ops in the plan
//===----------------------------------------------------------------------===//

namespace {

/// What a split rule produces: the result's split and global shape, the axes whose
/// blocks the op sums over (contractions, reductions: the result is a partial sum over
/// them) and a factor (means over split dimensions).
struct SplitResult {
  std::vector<std::vector<int>> split;
  Shape global;
  std::vector<int> contracted;
  std::vector<int> maxOver; // a reduce_max's split reduced dimensions: a partial max
  Rational factor = Rational(1);
  std::string why; // non-empty: no rule
};

SplitResult fail(std::string why) {
  SplitResult r;
  r.why = std::move(why);
  return r;
}

/// matmul: the contracted dimensions must be split alike (the same blocks of k on
/// every rank), and a free dimension's axes must not split the other operand.
SplitResult matmulSplit(RuleContext &c, ref::MatmulOp m, const State &a, const State &b) {
  int64_t ld = m.getLhsDim(), rd = m.getRhsDim();
  if (a.split[ld] != b.split[rd])
    return fail("it contracts dim " + std::to_string(ld) + " of its lhs, split over " +
                axesText(c.mesh, a.split[ld]) + ", with dim " + std::to_string(rd) +
                " of its rhs, split over " + axesText(c.mesh, b.split[rd]) +
                ": the ranks do not hold matching blocks of the contraction");
  const auto &af = a.split[1 - ld], &bf = b.split[1 - rd];
  if (intersects(af, b.splitAxes()) || intersects(bf, a.splitAxes()))
    return fail("an axis splits a free dimension of one operand and the other operand");
  SplitResult r;
  r.split = {af, bf};
  r.global = {a.global[1 - ld], b.global[1 - rd]};
  r.contracted = a.split[ld];
  return r;
}

SplitResult batchMatmulSplit(RuleContext &c, ref::BatchMatmulOp m, const State &a,
                             const State &b) {
  int64_t ld = m.getLhsDim(), rd = m.getRhsDim();
  if (a.split[0] != b.split[0] || a.split[ld] != b.split[rd])
    return fail("its operands' batch dimensions or contracted dimensions are split "
                "differently (lhs " + c.show(a) + ", rhs " + c.show(b) + ")");
  const auto &af = a.split[3 - ld], &bf = b.split[3 - rd];
  if (intersects(af, b.splitAxes()) || intersects(bf, a.splitAxes()))
    return fail("an axis splits a free dimension of one operand and the other operand");
  SplitResult r;
  r.split = {a.split[0], af, bf};
  r.global = {a.global[0], a.global[3 - ld], b.global[3 - rd]};
  r.contracted = a.split[ld];
  return r;
}

/// reduce_sum / reduce_mean over `dims`: the split of a reduced dimension becomes a
/// partial sum; a mean over a split dimension divides by the local count, which is
/// the global count over the number of blocks.
SplitResult reduceSplit(RuleContext &c, Operation &op, llvm::ArrayRef<int64_t> dims,
                        const State &x) {
  SplitResult r;
  for (size_t d = 0; d < x.split.size(); ++d) {
    if (std::find(dims.begin(), dims.end(), (int64_t)d) == dims.end()) {
      r.split.push_back(x.split[d]);
      r.global.push_back(x.global[d]);
    } else {
      r.contracted.insert(r.contracted.end(), x.split[d].begin(), x.split[d].end());
      if (isa<ref::ReduceMaxOp>(op))
        r.maxOver.insert(r.maxOver.end(), x.split[d].begin(), x.split[d].end());
      if (isa<ref::ReduceMeanOp>(op))
        r.factor = r.factor * Rational(c.size(x.split[d]));
    }
  }
  return r;
}

/// mse_loss (a mean over all elements) and mse_loss_grad (2 (p - t) / count): on
/// operands split alike, the local count is the global one over the number of blocks.
SplitResult mseSplit(RuleContext &c, Operation &op, const State &p, const State &t) {
  if (p.split != t.split)
    return fail("its prediction and target are split differently (" + c.show(p) + " and " +
                c.show(t) + ")");
  SplitResult r;
  r.factor = Rational(c.size(p.splitAxes()));
  if (isa<ref::MseLossOp>(op)) {
    r.contracted = p.splitAxes();
  } else {
    r.split = p.split;
    r.global = p.global;
  }
  return r;
}

/// Row by row over the last dimension (RowWise; cross_entropy_sum's rows too): the last
/// dimension is whole on every rank, operands of the first one's rank are split like
/// it, and lower-rank operands (a norm's weight) are whole -- or, with `rowData` (a
/// token mask with one entry per row), split like the first one's leading dimensions.
SplitResult rowWiseSplit(RuleContext &c, Operation &op, const std::vector<const State *> &in,
                         bool rowData = false) {
  const State &x = *in[0];
  size_t n = x.split.size();
  if (n == 0 || !x.split.back().empty())
    return fail("`" + opName(op) + "` works along the last dimension, which is split (" +
                c.show(x) + ")");
  for (size_t i = 1; i < in.size(); ++i) {
    const State &o = *in[i];
    bool alike;
    if (o.split.size() == n)
      alike = o.split == x.split && o.global == x.global;
    else if (rowData) // one entry per row: split exactly like the rows
      alike = o.split.size() + 1 == n &&
              std::equal(o.split.begin(), o.split.end(), x.split.begin()) &&
              std::equal(o.global.begin(), o.global.end(), x.global.begin());
    else // indexed by the last dimension, which every rank holds whole
      alike = !o.isSplit();
    if (!alike)
      return fail("operand #" + std::to_string(i) + " of `" + opName(op) + "` is " + c.show(o) +
                  ", not whole nor split like the rows of operand #0 (" + c.show(x) + ")");
  }
  SplitResult r;
  r.split = x.split;
  r.global = x.global;
  return r;
}

/// A row-major reshape: the dimensions fall into groups whose sizes multiply alike on
/// both sides; a group's leading input dimension may be split (its blocks are then
/// consecutive ranges of the group, which are the blocks of the group's leading output
/// dimension), its other dimensions not.
/// The reshape's split when its global result has shape `outGlobal` (a shape the
/// reference reshapes x's global shape to): the dimensions fall into groups by their
/// *global* sizes, so dimensions of local size 1 cannot join the wrong group. In each
/// group the split input dimensions must leave each rank one consecutive range of the
/// group (every dimension before the last split one of local size 1), and the output
/// dimensions take the axes, major to minor, in order: each output dimension's number
/// of blocks (global over local size) is the product of the axes it takes, and every
/// one before the last that takes any has local size 1. False where that fails.
bool reshapeByGlobal(RuleContext &c, const State &x, const Shape &inLocal, const Shape &outLocal,
                     const Shape &outGlobal, SplitResult &r) {
  size_t nIn = inLocal.size(), nOut = outLocal.size();
  if (outGlobal.size() != nOut || x.global.size() != nIn)
    return false;
  r = SplitResult();
  r.split.assign(nOut, {});
  r.global = outGlobal;
  size_t i = 0, j = 0;
  while (i < nIn || j < nOut) {
    size_t i0 = i, j0 = j;
    int64_t a = 1, b = 1;
    if (i < nIn)
      a *= x.global[i++];
    if (j < nOut)
      b *= outGlobal[j++];
    while (a != b) {
      if (a < b && i < nIn)
        a *= x.global[i++];
      else if (b < a && j < nOut)
        b *= outGlobal[j++];
      else
        return false;
    }
    std::vector<int> axes;
    size_t lastSplit = i;
    for (size_t k = i0; k < i; ++k)
      if (!x.split[k].empty()) {
        axes.insert(axes.end(), x.split[k].begin(), x.split[k].end());
        lastSplit = k;
      }
    for (size_t k = i0; lastSplit < i && k < lastSplit; ++k)
      if (inLocal[k] != 1)
        return false;
    size_t next = 0, lastOut = j0;
    for (size_t to = j0; to < j; ++to) {
      if (outLocal[to] <= 0 || outGlobal[to] % outLocal[to] != 0)
        return false;
      int64_t blocks = outGlobal[to] / outLocal[to], got = 1;
      while (got < blocks && next < axes.size())
        got *= c.mesh.shape[axes[next]], r.split[to].push_back(axes[next++]);
      if (got != blocks)
        return false;
      if (blocks > 1)
        lastOut = to;
    }
    if (next != axes.size())
      return false;
    // The output block is the same consecutive range: one index per rank in every
    // dimension before the last split one.
    for (size_t k = j0; k < lastOut; ++k)
      if (outLocal[k] != 1)
        return false;
  }
  return true;
}

SplitResult reshapeSplit(RuleContext &c, Operation &op, const State &x, const Shape &outLocal) {
  auto inType = cast<RankedTensorType>(op.getOperand(0).getType());
  Shape inLocal(inType.getShape().begin(), inType.getShape().end());
  SplitResult r;
  if (auto it = c.referenceReshapes.find(x.global); it != c.referenceReshapes.end())
    for (const Shape &target : it->second)
      if (reshapeByGlobal(c, x, inLocal, outLocal, target, r))
        return r;
  r.split.assign(outLocal.size(), {});
  // Per split group, the ways its axes may be placed on the group's output dimensions.
  using Placement = std::vector<std::pair<size_t, std::vector<int>>>;
  std::vector<std::vector<Placement>> choices;
  size_t i = 0, j = 0, nIn = inLocal.size(), nOut = outLocal.size();
  while (i < nIn || j < nOut) {
    // One group: a dimension of each side (where a side has one left), then more of the
    // smaller side until both products agree.
    size_t i0 = i, j0 = j;
    int64_t a = 1, b = 1;
    if (i < nIn)
      a *= inLocal[i++];
    if (j < nOut)
      b *= outLocal[j++];
    while (a != b) {
      if (a < b && i < nIn)
        a *= inLocal[i++];
      else if (b < a && j < nOut)
        b *= outLocal[j++];
      else
        break;
    }
    if (a != b)
      return fail("the reshape's dimensions do not fall into groups of equal size");
    // The group's split dimensions: every dimension before the last of them must be of
    // local size 1 (each rank then holds one index there), so that a rank's elements
    // are one consecutive range of the group: the block, over the split axes in order
    // (major to minor), of the group's leading output dimension.
    std::vector<int> axes;
    size_t lastSplit = i;
    for (size_t k = i0; k < i; ++k)
      if (!x.split[k].empty()) {
        axes.insert(axes.end(), x.split[k].begin(), x.split[k].end());
        lastSplit = k;
      }
    for (size_t k = i0; lastSplit < i && k < lastSplit; ++k)
      if (inLocal[k] != 1)
        return fail("the reshape merges split dimension " + std::to_string(lastSplit) +
                    " with dimension " + std::to_string(k) + " before it, which holds " +
                    std::to_string(inLocal[k]) + " elements on each rank");
    if (!axes.empty()) {
      if (j0 >= j)
        return fail("a split dimension disappears in the reshape");
      // Likewise any output dimension of the group up to the first of local size
      // other than 1: the dimensions before it are of size 1 in the whole too.
      std::vector<size_t> places;
      for (size_t to = j0; to < j; ++to) {
        places.push_back(to);
        if (outLocal[to] != 1)
          break;
      }
      // The axes, major to minor, go to those dimensions in order: each of them but the
      // last holds one index per rank, so the blocks compose row-major as in the input.
      std::vector<Placement> options;
      std::vector<size_t> cut(places.size() - 1, 0); // axes before place k+1
      while (true) {
        Placement o;
        size_t from = 0;
        for (size_t k = 0; k < places.size(); ++k) {
          size_t to = k + 1 < places.size() ? cut[k] : axes.size();
          o.push_back({places[k], std::vector<int>(axes.begin() + from, axes.begin() + to)});
          from = to;
        }
        options.push_back(o);
        size_t k = cut.size(); // next non-decreasing cut vector
        while (k > 0 && cut[k - 1] == axes.size())
          --k;
        if (k == 0)
          break;
        ++cut[k - 1];
        for (size_t m = k; m < cut.size(); ++m)
          cut[m] = cut[k - 1];
      }
      choices.push_back(options);
    }
  }
  // One option per split group: the first whose global shape the reference reshapes
  // x's global shape to, else the first.
  auto apply = [&](const std::vector<size_t> &pick, SplitResult &out) {
    out.global = outLocal;
    out.split.assign(outLocal.size(), {});
    for (size_t k = 0; k < choices.size(); ++k)
      for (auto &[dim, ax] : choices[k][pick[k]]) {
        out.split[dim] = ax;
        out.global[dim] = outLocal[dim] * c.size(ax);
      }
  };
  std::vector<size_t> pick(choices.size(), 0), best = pick;
  auto it = c.referenceReshapes.find(x.global);
  for (int tries = 0; it != c.referenceReshapes.end() && tries < 256; ++tries) {
    SplitResult trial;
    apply(pick, trial);
    if (it->second.count(trial.global)) {
      best = pick;
      break;
    }
    size_t k = 0; // the next combination
    while (k < pick.size() && ++pick[k] == choices[k].size())
      pick[k++] = 0;
    if (k == pick.size())
      break;
  }
  apply(best, r);
  return r;
}

/// bias_add: the bias is split like the input's last dimension.
SplitResult biasAddSplit(RuleContext &c, const State &x, const State &b) {
  if (b.split[0] != x.split.back())
    return fail("its bias is split over " + axesText(c.mesh, b.split[0]) +
                " and the last dimension of its input over " +
                axesText(c.mesh, x.split.back()));
  SplitResult r;
  r.split = x.split;
  r.global = x.global;
  return r;
}

/// transpose: splits move with their dimensions.
SplitResult transposeSplit(ref::TransposeOp t, const State &x) {
  SplitResult r;
  for (int64_t p : t.getPerm()) {
    r.split.push_back(x.split[p]);
    r.global.push_back(x.global[p]);
  }
  return r;
}

/// causal_softmax: row r's mask depends on its position r mod Sq among the queries and
/// on Sk, whole on every rank when the last two dimensions are not split (and there is
/// no offset operand, which the index check refuses anyway).
SplitResult causalSoftmaxSplit(RuleContext &c, ref::CausalSoftmaxOp cs, const State &x) {
  size_t n = x.split.size();
  if (cs.getOffset() || n < 2 || !x.split[n - 1].empty() || !x.split[n - 2].empty())
    return fail("`ref.causal_softmax` on split queries or keys (" + c.show(x) + ")");
  SplitResult r;
  r.split = x.split;
  r.global = x.global;
  return r;
}

/// broadcast: operand dimension k becomes result dimension dims[k]; the new dimensions
/// are copies, whole on every rank.
SplitResult broadcastSplit(ref::BroadcastOp b, const State &x, const Shape &local) {
  SplitResult r;
  r.split.assign(local.size(), {});
  r.global = local;
  auto dims = b.getDims();
  for (size_t k = 0; k < dims.size() && k < x.split.size(); ++k) {
    r.split[dims[k]] = x.split[k];
    r.global[dims[k]] = x.global[k];
  }
  return r;
}

/// rotary: each [S, D] slice of the input is rotated with the whole tables: the
/// leading dimensions may be split, the last two and the tables not.
SplitResult rotarySplit(RuleContext &c, const std::vector<const State *> &in) {
  const State &x = *in[0];
  size_t n = x.split.size();
  for (size_t d = n >= 2 ? n - 2 : 0; d < n; ++d)
    if (!x.split[d].empty())
      return fail("`ref.rotary` on a split position or feature dimension (" + c.show(x) + ")");
  if (in[1]->isSplit() || in[2]->isSplit())
    return fail("`ref.rotary`'s tables are split");
  SplitResult r;
  r.split = x.split;
  r.global = x.global;
  return r;
}

/// cross_entropy_sum: a sum over the tokens (rows) of per-row terms: rows split alike
/// (the mask like the rows), the result a partial sum over the rows' axes.
SplitResult crossEntropySumSplit(RuleContext &c, Operation &op,
                                 const std::vector<const State *> &in) {
  SplitResult r = rowWiseSplit(c, op, in, /*rowData=*/true);
  if (r.why.empty()) {
    r.contracted = in[0]->split[0];
    r.split.clear();
    r.global.clear();
  }
  return r;
}

/// An op that maps each index of its operand's leading (batch) dimensions on its own,
/// reading the last `inner` dimensions whole (capacity_dispatch: each batch index's
/// [tokens, experts] mask): a split of the batch dimensions is the split of the
/// result's; the inner and any new trailing dimensions stay whole.
SplitResult batchDimsSplit(RuleContext &c, Operation &op, const State &x, const Shape &local,
                           size_t inner) {
  size_t n = x.split.size();
  if (n < inner)
    return fail("`" + opName(op) + "` needs " + std::to_string(inner) + " dimensions");
  for (size_t d = n - inner; d < n; ++d)
    if (!x.split[d].empty())
      return fail("`" + opName(op) + "` reads its operand's last " + std::to_string(inner) +
                  " dimensions whole, and dimension " + std::to_string(d) + " is split (" +
                  c.show(x) + "); only its batch dimensions may be");
  SplitResult r;
  r.split = x.split;
  r.global = x.global;
  for (size_t d = n; d < local.size(); ++d) {
    r.split.push_back({});
    r.global.push_back(local[d]);
  }
  return r;
}

SplitResult splitRule(RuleContext &c, Operation &op, const std::vector<const State *> &in,
                      const Shape &local) {
  bool anySplit = false;
  for (const State *s : in)
    anySplit |= s->isSplit();
  if (!anySplit) {
    // Every rank holds the whole of every operand: the op computes the whole result.
    SplitResult r;
    r.split.assign(local.size(), {});
    r.global = local;
    return r;
  }
  if (op.hasTrait<mlir::OpTrait::Elementwise>()) {
    for (const State *s : in)
      if (s->split != in[0]->split || s->global != in[0]->global)
        return fail("its operands are split differently (" + c.show(*in[0]) + " and " +
                    c.show(*s) + ")");
    SplitResult r;
    r.split = in[0]->split;
    r.global = in[0]->global;
    return r;
  }
  if (auto m = dyn_cast<ref::MatmulOp>(op))
    return matmulSplit(c, m, *in[0], *in[1]);
  if (auto m = dyn_cast<ref::BatchMatmulOp>(op))
    return batchMatmulSplit(c, m, *in[0], *in[1]);
  if (isa<ref::BiasAddOp>(op))
    return biasAddSplit(c, *in[0], *in[1]);
  if (auto red = dyn_cast<ref::ReduceSumOp>(op))
    return reduceSplit(c, op, red.getDims(), *in[0]);
  if (auto red = dyn_cast<ref::ReduceMeanOp>(op))
    return reduceSplit(c, op, red.getDims(), *in[0]);
  if (auto red = dyn_cast<ref::ReduceMaxOp>(op))
    return reduceSplit(c, op, red.getDims(), *in[0]);
  if (auto t = dyn_cast<ref::TransposeOp>(op))
    return transposeSplit(t, *in[0]);
  if (isa<ref::MseLossOp, ref::MseLossGradOp>(op))
    return mseSplit(c, op, *in[0], *in[1]);
  if (op.hasTrait<ref::OpTrait::RowWise>())
    return rowWiseSplit(c, op, in);
  if (isa<ref::ReshapeOp>(op))
    return reshapeSplit(c, op, *in[0], local);
  if (auto cs = dyn_cast<ref::CausalSoftmaxOp>(op))
    return causalSoftmaxSplit(c, cs, *in[0]);
  if (auto b = dyn_cast<ref::BroadcastOp>(op))
    return broadcastSplit(b, *in[0], local);
  if (isa<ref::RotaryOp>(op))
    return rotarySplit(c, in);
  if (isa<ref::CrossEntropySumOp>(op))
    return crossEntropySumSplit(c, op, in);
  if (isa<ref::CapacityDispatchOp>(op))
    return batchDimsSplit(c, op, *in[0], local, 2);
  for (size_t i = 0; i < in.size(); ++i)
    if (in[i]->isSplit())
      return fail("no layout rule for `" + opName(op) + "` on a split operand (operand #" +
                  std::to_string(i) + " is " + c.show(*in[i]) + ")");
  return fail("no layout rule for `" + opName(op) + "`");
}

/// The axes the result is a partial sum over, from the operands' (linearity), or why
/// the op cannot take them.
bool operandPartials(RuleContext &c, Operation &op, const std::vector<const State *> &in,
                     std::vector<int> &partial, std::string &why) {
  std::vector<unsigned> which;
  for (unsigned i = 0; i < in.size(); ++i)
    if (!in[i]->partial.empty())
      which.push_back(i);
  partial.clear();
  if (which.empty())
    return true;
  bool allAlike = which.size() == in.size();
  for (unsigned i : which)
    allAlike &= in[i]->partial == in[which[0]]->partial;
  if (allAlike && linearTogether(op))
    partial = in[0]->partial;
  else if (which.size() == 1 && linearIn(op, which[0]))
    partial = in[which[0]]->partial;
  else {
    unsigned i = which[0];
    why = "operand #" + std::to_string(i) + " is a partial sum over " +
          axesText(c.mesh, in[i]->partial) + " and `" + opName(op) +
          "` is not linear in it (with its other operands as they are): it must be "
          "reduced first";
    return false;
  }
  for (const State *s : in)
    if (intersects(s->splitAxes(), partial)) {
      why = "the partial sum over " + axesText(c.mesh, partial) +
            " meets an operand split over the same axes";
      return false;
    }
  return true;
}

State refOpRule(RuleContext &c, Operation &op, const std::vector<const State *> &operands) {
  // A broadcast operand's block under a split of its copied dimensions is a broadcast
  // of the same source: for an elementwise op it takes the split and global shape of
  // the first operand that is not a broadcast, where its source dimensions are split
  // alike and its copied ones whole.
  std::vector<const State *> in = operands;
  std::vector<State> adopted;
  adopted.reserve(2 * in.size()); // pointers into it stay valid: at most two per operand
  if (op.hasTrait<mlir::OpTrait::Elementwise>()) {
    const State *lead = nullptr;
    for (const State *s : in)
      if (!s->broadcast && !lead)
        lead = s;
    for (size_t i = 0; lead && i < in.size(); ++i) {
      const State &b = *in[i];
      if (!b.broadcast || b.split == lead->split || b.split.size() != lead->split.size())
        continue;
      bool fits = true;
      for (size_t d = 0; d < b.split.size(); ++d) {
        bool fromSource = std::find(b.sourceDims.begin(), b.sourceDims.end(), (int64_t)d) !=
                          b.sourceDims.end();
        fits &= fromSource ? b.split[d] == lead->split[d] && b.global[d] == lead->global[d]
                           : b.split[d].empty();
      }
      if (!fits)
        continue;
      State u = b;
      u.split = lead->split;
      u.global = lead->global;
      u.term = c.terms.broadcast(u.global, u.sourceDims, u.source);
      adopted.push_back(u);
      in[i] = &adopted.back();
    }
  }
  // An op linear in all its operands together, some of them partial sums over axes
  // the others are replicated on: the rank-wise results sum, over those axes, to the
  // op of the sums, in which a replicated operand counts once per rank of the group
  // -- it is a partial sum whose value is the group's size times its own.
  if (linearTogether(op)) {
    std::vector<int> all;
    for (const State *s : in)
      all = sortedUnion(all, s->partial);
    for (size_t i = 0; i < in.size() && !all.empty(); ++i) {
      std::vector<int> missing;
      for (int a : all)
        if (std::find(in[i]->partial.begin(), in[i]->partial.end(), a) == in[i]->partial.end())
          missing.push_back(a);
      if (missing.empty() || intersects(missing, in[i]->splitAxes()) ||
          !in[i]->partialMax.empty())
        continue; // as they are: operandPartials says why they do not combine
      State u = *in[i];
      u.partial = all;
      u.factor = u.factor * Rational(c.size(missing));
      adopted.push_back(u);
      in[i] = &adopted.back();
    }
  }
  Shape local;
  if (!resultShape(op, local))
    return State::unknown(&op, "`" + opName(op) + "` does not have one tensor result");
  std::string why;
  for (size_t i = 0; i < in.size(); ++i)
    if (!in[i]->partialMax.empty())
      return State::unknown(&op, "operand #" + std::to_string(i) + " is each rank's maximum of "
                                 "its block over " + axesText(c.mesh, in[i]->partialMax) +
                                 ": it must be completed by all_reduce \"max\" first");
  std::vector<int> partial;
  if (!operandPartials(c, op, in, partial, why))
    return State::unknown(&op, why);
  SplitResult sr = splitRule(c, op, in, local);
  if (!sr.why.empty())
    return State::unknown(&op, sr.why);
  State out;
  out.known = true;
  out.split = sr.split;
  out.global = sr.global;
  if (intersects(partial, sr.contracted))
    return State::unknown(&op, "a contraction sums over axes its operand is already partial over");
  if (sr.maxOver.empty()) {
    out.partial = sortedUnion(partial, sr.contracted);
  } else {
    out.partial = partial; // empty: reduce_max takes no partial sum (NonlinearOp)
    out.partialMax = sortedUnion({}, sr.maxOver);
  }
  if (!consistent(c, out, local, why))
    return State::unknown(&op, why);
  Combined k;
  if (!combine(c.terms, op, out.global, in, k, why))
    return State::unknown(&op, why);
  out.term = k.term;
  out.factor = k.factor * sr.factor;
  markBroadcast(c.terms, op, in, out);
  return out;
}

/// dropout_mask(key, counter): element i draws (key, counter + i), i its row-major
/// index. Where the counter is a term plus a rank part whose coefficients are the
/// blocks' strides of a split of dimension 0 (the minor axis's coefficient the
/// block's element count, each major one the next one's times that axis' size), every
/// rank draws exactly the pairs of its rows of the mask that (key, term) draws over the
/// whole: the block of that mask under the split. The rank part is what tells the
/// split; any other rank dependence has no rule.
State dropoutRule(RuleContext &c, ref::DropoutMaskOp d, const std::vector<const State *> &in) {
  const State &key = *in[0], &ctr = *in[1];
  if (!key.known)
    return key;
  if (!ctr.known)
    return ctr;
  Operation &op = *d;
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

} // namespace

State planRule(RuleContext &c, Operation &op, const std::vector<const State *> &in) {
  if (isa<dist::AxisIndexOp>(op))
    return indexRule(c, op, in);
  if (isa<dist::DistDialect>(op.getDialect())) {
    for (const State *s : in)
      if (!s->known)
        return *s;
    return collectiveRule(c, op, in);
  }
  if (isa<arith::ArithDialect>(op.getDialect()))
    return indexRule(c, op, in);
  if (!isa<ref::RefDialect>(op.getDialect()))
    return State::unknown(&op, "no layout rule for `" + opName(op) + "`");
  if (auto d = dyn_cast<ref::DropoutMaskOp>(op))
    return dropoutRule(c, d, in);
  State bad;
  if (!operandStates(op, in, bad))
    return bad;
  if (auto slice = dyn_cast<ref::SliceOp>(op); slice && in[0]->isSplit())
    return sliceRule(c, op, *in[0]);
  return refOpRule(c, op, in);
}

} // namespace planproof::layouts
