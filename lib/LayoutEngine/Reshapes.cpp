//===- Reshapes.cpp - functions of reshaped values as reshapes of functions ----===//
//
// A reshape moves no element: it renames positions. So an elementwise function of
// values reshaped alike is the reshape of the function of the values, and a reduction
// over dimensions that a reshape keeps whole is the reshape of the reduction
// (docs/layout-engine.md, "Reshapes"). Frameworks compute one activation in shapes of
// their own choosing -- torchtitan's FSDP stacks sequence positions along the batch
// ([B, S, H] becomes [B S, 1, H]) -- so the reference's and the plan's terms meet only
// when both are written as a reshape of the computation in the shape they share.
// Rules.cpp's `combine` applies these identities to reference and plan alike.
//
//===----------------------------------------------------------------------===//
#include "LayoutEngine/LayoutState.h"

#include "Ref/RefDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"

#include <algorithm>
#include <set>

using namespace mlir;

namespace planproof::layouts {

/// The groups of a row-major reshape between shapes `a` and `b` of one element count:
/// the shortest runs of dimensions of more than one element whose products agree, in
/// order (a reshape merges or splits each run and moves no element across runs).
/// Dimensions of size 1 belong to no group. False when the counts differ.
bool reshapeGroups(const Shape &a, const Shape &b, std::vector<ReshapeGroup> &groups) {
  groups.clear();
  std::vector<int64_t> x, y;
  for (size_t d = 0; d < a.size(); ++d)
    if (a[d] != 1)
      x.push_back((int64_t)d);
  for (size_t d = 0; d < b.size(); ++d)
    if (b[d] != 1)
      y.push_back((int64_t)d);
  size_t i = 0, j = 0;
  while (i < x.size() || j < y.size()) {
    if (i == x.size() || j == y.size() || a[x[i]] <= 0 || b[y[j]] <= 0)
      return false;
    ReshapeGroup g;
    int64_t p = a[x[i]], q = b[y[j]];
    g.a.push_back(x[i++]);
    g.b.push_back(y[j++]);
    while (p != q) {
      if (p < q) {
        if (i == x.size() || a[x[i]] <= 0 || p > INT64_MAX / a[x[i]])
          return false;
        p *= a[x[i]];
        g.a.push_back(x[i++]);
      } else {
        if (j == y.size() || b[y[j]] <= 0 || q > INT64_MAX / b[y[j]])
          return false;
        q *= b[y[j]];
        g.b.push_back(y[j++]);
      }
    }
    groups.push_back(std::move(g));
  }
  return true;
}

/// The dimensions of shape `t` that a broadcast of shape `s` with source dimensions
/// `dims` (in order) has as source dimensions once reshaped to `t`: where every group
/// of the reshape is copied whole (each of its dimensions of more than one element) or
/// a source group whole. False otherwise.
static bool sourceDimsIn(const Shape &s, const Shape &t, const std::vector<int64_t> &dims,
                         std::vector<int64_t> &toDims) {
  std::vector<ReshapeGroup> groups;
  if (!reshapeGroups(s, t, groups))
    return false;
  for (size_t k = 0; k + 1 < dims.size(); ++k)
    if (dims[k] >= dims[k + 1])
      return false;
  std::set<int64_t> sourceDims(dims.begin(), dims.end());
  toDims.clear();
  for (const ReshapeGroup &g : groups) {
    size_t copied = 0;
    for (int64_t d : g.a)
      copied += !sourceDims.count(d);
    if (copied != 0 && copied != g.a.size())
      return false;
    if (!copied)
      toDims.insert(toDims.end(), g.b.begin(), g.b.end());
  }
  return true;
}

/// Term `b` (of shape `s`) reshaped to `t`, written without a reshape at its head: the
/// operand of a reshape from `t`; or, for a broadcast that copies whole groups of the
/// reshape (every dimension of more than one element of a group copied, or every one
/// a source dimension, the source dimensions in order), the broadcast in shape `t` of
/// its source reshaped by the same groups (dimensions of size 1 of `t` are copies).
/// False for any other term: the reshape would stay at the head.
bool reshapedOperand(TermPool &terms, Operation &op, TermId b, const Shape &s,
                     const Shape &t, TermId &out) {
  if (terms.isOp<ref::ReshapeOp>(b) && terms.shapeOf(terms.operands(b)[0]) == t) {
    out = terms.operands(b)[0];
    return true;
  }
  TermId source;
  std::vector<int64_t> dims, toDims;
  if (!terms.broadcastOf(b, dims, source) || !sourceDimsIn(s, t, dims, toDims))
    return false;
  Shape sourceShape;
  for (int64_t d : toDims)
    sourceShape.push_back(t[d]);
  if (terms.shapeOf(source) != sourceShape)
    source = reshapeTerm(terms, op, source, sourceShape);
  out = toDims.size() == t.size() ? source : terms.broadcast(t, toDims, source);
  return true;
}

/// An elementwise op whose operands all have the result's shape, one of them a reshape
/// of a value of shape `inner` and every other one reshaped to `inner` without a reshape
/// at its head (reshapedOperand): true, with the operands' states in shape `inner`
/// (same factors; no split: only terms are built from them). The op of those is the
/// op's value reshaped back, element for element.
/// Operand `s` of shape `global` in shape `inner` (reshapedOperand): its state there,
/// unsplit (only terms are built from it); false where it is no reshape from `inner`,
/// broadcast so or constant.
static bool liftedOperand(TermPool &terms, Operation &op, const State &s, const Shape &global,
                          const Shape &inner, State &x) {
  if (s.global != global)
    return false;
  x = State();
  x.known = true;
  x.global = inner;
  x.split.assign(inner.size(), DimSplit());
  x.factor = s.factor;
  if (!reshapedOperand(terms, op, s.term, global, inner, x.term))
    return false;
  x.broadcast = terms.broadcastOf(x.term, x.sourceDims, x.source);
  return x.broadcast || terms.shapeOf(x.term) == inner;
}

bool elementwiseOfReshapes(TermPool &terms, Operation &op, const Shape &global,
                           const std::vector<const State *> &in, Shape &inner,
                           std::vector<State> &lifted) {
  if (op.hasTrait<ref::OpTrait::RowWise>())
    return rowWiseOfReshapes(terms, op, global, in, inner, lifted);
  if (!op.hasTrait<OpTrait::Elementwise>() || in.size() < 2 || op.getNumResults() != 1)
    return false;
  // The reshaped operand whose operand comes first in term order decides the shape, so
  // the choice depends on the terms only.
  TermId from = 0;
  bool any = false;
  for (const State *s : in) {
    if (s->global != global || !terms.isOp<ref::ReshapeOp>(s->term))
      continue;
    TermId u = terms.operands(s->term)[0];
    if (!any || u < from)
      from = u;
    any = true;
  }
  if (!any)
    return false;
  inner = terms.shapeOf(from);
  if (inner == global)
    return false;
  lifted.clear();
  for (const State *s : in) {
    State x;
    if (!liftedOperand(terms, op, *s, global, inner, x))
      return false;
    lifted.push_back(std::move(x));
  }
  return true;
}

bool rowWiseOfReshapes(TermPool &terms, Operation &op, const Shape &global,
                       const std::vector<const State *> &in, Shape &inner,
                       std::vector<State> &lifted) {
  // Row by row over the last dimension (RowWise): where the first operand is a reshape
  // of a value of shape T with the same last dimension, each row of the result's shape
  // is one row of T, renamed (row-major); the operands of the first one's rank must be
  // reshapes from T too (reshapedOperand), the lower-rank ones (a norm's weight) are
  // read whole either way.
  if (in.empty() || op.getNumResults() != 1 || global.empty() || in[0]->global != global ||
      !terms.isOp<ref::ReshapeOp>(in[0]->term))
    return false;
  inner = terms.shapeOf(terms.operands(in[0]->term)[0]);
  if (inner.empty() || inner == global || inner.back() != global.back())
    return false;
  lifted.clear();
  for (const State *s : in) {
    State x = *s;
    if (s->global.size() > global.size() ||
        (s->global.size() == global.size() && !liftedOperand(terms, op, *s, global, inner, x)))
      return false;
    lifted.push_back(std::move(x));
  }
  return true;
}

bool reducedThroughReshape(const TermPool &terms, TermId u, const std::vector<int64_t> &dims,
                           std::vector<int64_t> &inner, Shape &kept) {
  if (!terms.isOp<ref::ReshapeOp>(u))
    return false;
  Shape from = terms.shapeOf(terms.operands(u)[0]);
  std::set<int64_t> summed(dims.begin(), dims.end());
  std::vector<ReshapeGroup> groups;
  inner.clear();
  bool whole = reshapeGroups(terms.shapeOf(u), from, groups);
  for (size_t k = 0; whole && k < groups.size(); ++k) {
    size_t n = 0;
    for (int64_t d : groups[k].a)
      n += summed.count(d);
    whole = n == 0 || n == groups[k].a.size();
    if (n)
      inner.insert(inner.end(), groups[k].b.begin(), groups[k].b.end());
  }
  if (!whole)
    return false;
  std::sort(inner.begin(), inner.end());
  kept.clear();
  for (int64_t d = 0; d < (int64_t)from.size(); ++d)
    if (!std::binary_search(inner.begin(), inner.end(), d))
      kept.push_back(from[d]);
  return true;
}

/// The reduction `name` (reduce_sum or reduce_max) of `u` over `dims`, of result shape
/// `global`: a reduction of the same reduction is one over both sets of dimensions; one
/// of a reshape over whole groups of the reshape (every dimension of more than one
/// element of a group reduced, or none) is the reshape of the reduction over the
/// operand's dimensions of those groups -- each result element reduces the same
/// elements either way.
static TermId reductionTerm(TermPool &terms, Operation &op, TermId u,
                            const std::vector<int64_t> &dims, const Shape &global,
                            OperationName name) {
  MLIRContext *ctx = op.getContext();
  Builder b(ctx);
  std::vector<int64_t> inner;
  Shape kept;
  if (reducedThroughReshape(terms, u, dims, inner, kept)) {
    TermId v = terms.operands(u)[0];
    TermId s = inner.empty() ? v : reductionTerm(terms, op, v, inner, kept, name);
    return terms.shapeOf(s) == global ? s : reshapeTerm(terms, op, s, global);
  }
  std::vector<int64_t> all(dims.begin(), dims.end());
  DictionaryAttr attrs;
  OperationName innerName = name;
  if (terms.headData(u).op == name.getStringRef() && terms.opOf(u, innerName, attrs) &&
      innerName == name) {
    if (auto first = attrs.getAs<DenseI64ArrayAttr>("dims")) {
      TermId v = terms.operands(u)[0];
      std::set<int64_t> merged(first.asArrayRef().begin(), first.asArrayRef().end());
      std::vector<int64_t> kept;
      for (int64_t d = 0; d < (int64_t)terms.shapeOf(v).size(); ++d)
        if (!merged.count(d))
          kept.push_back(d);
      bool ok = true;
      for (int64_t d : dims)
        if (d < 0 || d >= (int64_t)kept.size())
          ok = false;
        else
          merged.insert(kept[d]);
      if (ok) {
        u = v;
        all.assign(merged.begin(), merged.end());
      }
    }
  }
  auto attr = b.getDictionaryAttr({b.getNamedAttr("dims", b.getDenseI64ArrayAttr(all))});
  TermId t = terms.node(terms.head(name, attr, global), {u});
  terms.setOp(t, name, attr);
  return t;
}

TermId sumTerm(TermPool &terms, Operation &op, TermId u, const std::vector<int64_t> &dims,
               const Shape &global) {
  return reductionTerm(terms, op, u, dims, global,
                       OperationName(ref::ReduceSumOp::getOperationName(), op.getContext()));
}

TermId maxTerm(TermPool &terms, Operation &op, TermId u, const std::vector<int64_t> &dims,
               const Shape &global) {
  return reductionTerm(terms, op, u, dims, global,
                       OperationName(ref::ReduceMaxOp::getOperationName(), op.getContext()));
}


/// Dimension d - 1 of `a` has one entry on every rank (split over axes A, |A| of them)
/// and dimension d is split over axes C (or whole): on every rank the block is also
/// that of `a` reshaped with the two merged, split over A then C (row-major: the rank
/// at (p, q) holds entry p's block q of d, the merged dimension's block p |C| + q; and
/// dimension d - 1 becomes of size 1). True, with that state.
bool mergedIntoNext(RuleContext &c, Operation &op, const State &a, int64_t d, State &out) {
  if (!a.known || d < 1 || d >= (int64_t)a.global.size() || a.split.size() != a.global.size() ||
      a.windowed() || !a.partialMax.empty() || a.split[d - 1].empty() || a.global[d] <= 0 ||
      c.size(a.split[d - 1]) != a.global[d - 1] || a.global[d - 1] > INT64_MAX / a.global[d])
    return false;
  out = a;
  out.global[d - 1] = 1;
  out.global[d] = a.global[d - 1] * a.global[d];
  out.split[d - 1] = DimSplit();
  out.split[d] = a.split[d - 1];
  out.split[d].insert(out.split[d].end(), a.split[d].begin(), a.split[d].end());
  out.term = reshapeTerm(c.terms, op, a.term, out.global);
  out.broadcast = false;
  out.sourceDims.clear();
  out.rowSums.reset();
  return true;
}

/// batch_matmul of operands whose contracted dimensions the ranks cut differently
/// only because a dimension before one of them has one entry on every rank: XLA's
/// weight gradients contract batch and sequence at once, the batch split over dp with
/// one entry per rank ([B, S, D] by [1, B S, F], or [F, B, S] by [B, S, D]). Where
/// merging such a dimension into the contracted one (mergedIntoNext) of the lhs, the
/// rhs or both makes the contracted dimensions of one size and split alike, and the
/// batch dimensions split alike (or the rhs a batch of one, batchOfOne): true, with
/// those operands' states. Each describes the same blocks as the original, so the
/// product's rule applies to them as to any true description of the operands.
bool batchIntoRows(RuleContext &c, Operation &op, const std::vector<const State *> &in,
                   std::vector<State> &out) {
  auto m = dyn_cast<ref::BatchMatmulOp>(op);
  if (!m || in.size() != 2 || !in[0]->known || !in[1]->known ||
      in[0]->global.size() != 3 || in[1]->global.size() != 3)
    return false;
  int64_t ld = m.getLhsDim(), rd = m.getRhsDim();
  auto fits = [&](const State &a, const State &b) {
    return a.global[ld] == b.global[rd] && a.split[ld] == b.split[rd] &&
           ((a.split[0] == b.split[0] && a.global[0] == b.global[0]) || batchOfOne(a, b, ld));
  };
  if (fits(*in[0], *in[1]))
    return false; // the product's rule takes them as they are
  State l, r;
  bool canL = mergedIntoNext(c, op, *in[0], ld, l), canR = mergedIntoNext(c, op, *in[1], rd, r);
  for (int choice = 1; choice <= 3; ++choice) {
    bool mergeL = choice & 1, mergeR = choice & 2;
    if ((mergeL && !canL) || (mergeR && !canR))
      continue;
    const State &a = mergeL ? l : *in[0], &b = mergeR ? r : *in[1];
    if (!fits(a, b))
      continue;
    out = {a, b};
    return true;
  }
  return false;
}


/// A broadcast x (with copies) described under global shape `target` with the same
/// blocks on every rank: its copied dimensions (whole, or split: a block of copies is
/// copies) whole groups of the reshape between the shapes, its source described under the source dimensions' shape in `target`
/// (placedAs) -- the broadcast of the same blocks of the same source. Its copied
/// dimensions come out whole (a block of copies is copies under any split). False
/// where that fails.
bool broadcastPlacedAs(RuleContext &c, Operation &op, const State &x, const Shape &target,
                       State &out) {
  std::vector<int64_t> toDims;
  if (!x.known || !x.broadcast || x.windowed() || !x.partialMax.empty() ||
      !sourceDimsIn(x.global, target, x.sourceDims, toDims))
    return false;
  // (A copied dimension's block is copies under any split -- plain blocks: x is not
  // windowed -- so its split says nothing of the blocks; the out state's copied
  // dimensions come out whole, and an elementwise op then gives them the lead's split.)
  State src = x;
  src.broadcast = false;
  src.sourceDims.clear();
  src.term = x.source;
  src.global.clear();
  src.split.clear();
  for (int64_t d : x.sourceDims) {
    src.global.push_back(x.global[d]);
    src.split.push_back(x.split[d]);
  }
  // Every rank's block keeps its local shape (x's: an elementwise op's operands share
  // one type, so `target` has x's rank), so the source's local shape in `target` is
  // that of the target's source dimensions.
  if (target.size() != x.global.size())
    return false;
  Shape srcTarget, srcLocal;
  for (int64_t d : toDims)
    srcTarget.push_back(target[d]);
  Shape local;
  if (!localShape(c, x, local))
    return false;
  for (int64_t d : toDims)
    srcLocal.push_back(local[d]);
  State placed;
  if (src.global == srcTarget)
    placed = src;
  else if (!placedAs(c, op, src, srcTarget, placed, &srcLocal))
    return false;
  out = x;
  out.global = target;
  out.split.assign(target.size(), DimSplit());
  for (size_t k = 0; k < toDims.size(); ++k)
    out.split[toDims[k]] = placed.split[k];
  out.source = placed.term;
  out.sourceDims = toDims;
  out.term = c.terms.broadcast(target, toDims, placed.term);
  out.rowSums.reset();
  return true;
}

void ReferenceShapes::note(Operation &op, const std::vector<const State *> &in, const State &out) {
  if (out.known)
    terms.insert(out.term);
  if (in.empty() || !in[0]->known || !out.known)
    return;
  if (isa<ref::ReshapeOp>(op)) {
    reshapes[in[0]->global].insert(out.global);
    reshapesOf[in[0]->term].insert(out.global);
  }
  if (isa<ref::BroadcastOp>(op))
    broadcasts[in[0]->global].insert(out.global);
  if (auto t = dyn_cast<ref::TransposeOp>(op))
    transposes[std::vector<int64_t>(t.getPerm().begin(), t.getPerm().end())].insert(in[0]->global);
}

} // namespace planproof::layouts
