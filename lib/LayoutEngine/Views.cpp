//===- Views.cpp - one value written through other layout ops -------------===//
//
// Exact identities that let the reference's and the plan's terms meet where they reach
// one value through other layout ops (docs/layout-engine.md, "Views"): dimensions of
// size 1 as a broadcast's copies, slices and concatenations of broadcasts, reshapes
// that compose, transposes that only move dimensions of size 1, reshapes of stacked
// pieces. Rules.cpp's `combine` and `markBroadcast` apply them to both sides alike.
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

/// A reshape that only inserts or drops dimensions of size 1 -- dropping only copied
/// ones -- is a broadcast of x's source (of x itself where x is no broadcast): result
/// dimension dims[k] is source dimension k (a dimension of size 1 is a broadcast's
/// copy). The dimensions are matched in order from the last; a source dimension of
/// size 1 takes the nearest result dimension of size 1 (any would do: the values are
/// the same, and one choice gives one term). False for any other reshape.
bool unitReshape(const State &x, const Shape &out, TermId &source, std::vector<int64_t> &dims) {
  size_t n = x.global.size();
  std::vector<int64_t> sourceDim(n, -1); // x's dimension -> its source's
  if (x.broadcast) {
    for (size_t k = 0; k < x.sourceDims.size(); ++k)
      if (x.sourceDims[k] < 0 || x.sourceDims[k] >= (int64_t)n)
        return false;
      else
        sourceDim[x.sourceDims[k]] = (int64_t)k;
  } else {
    for (size_t d = 0; d < n; ++d)
      sourceDim[d] = (int64_t)d;
  }
  std::vector<int64_t> to(n, -1); // x's dimension -> the result's
  size_t j = out.size();
  for (size_t d = n; d-- > 0;) {
    if (x.global[d] == 1 && sourceDim[d] < 0)
      continue; // a copy: dropped
    if (x.global[d] != 1)
      while (j > 0 && out[j - 1] == 1)
        --j;
    if (j == 0 || out[j - 1] != x.global[d])
      return false;
    to[d] = (int64_t)--j;
  }
  while (j > 0 && out[j - 1] == 1)
    --j;
  if (j != 0)
    return false;
  source = x.broadcast ? x.source : x.term;
  dims.assign(x.broadcast ? x.sourceDims.size() : n, 0);
  for (size_t d = 0; d < n; ++d)
    if (sourceDim[d] >= 0)
      dims[sourceDim[d]] = to[d];
  return true;
}

/// A slice of a broadcast (whole on every rank) is the broadcast of its source's slice
/// along the source dimensions: the copies' slice is copies.
TermId slicedSource(TermPool &terms, Operation &slice, const State &x) {
  auto s = cast<ref::SliceOp>(slice);
  std::vector<int64_t> whole, offsets, sizes;
  for (int64_t d : x.sourceDims) {
    whole.push_back(x.global[d]);
    offsets.push_back(s.getOffsets()[d]);
    sizes.push_back(s.getSizes()[d]);
  }
  return sliceTerm(terms, s.getContext(), x.source, whole, offsets, sizes);
}

bool sliceOfBroadcast(Operation &op, const std::vector<const State *> &in) {
  return isa<ref::SliceOp>(op) && in.size() == 1 && in[0]->broadcast && !in[0]->isSplit();
}


/// A concatenation of broadcasts with the same source dimensions, laid out alike, is a
/// broadcast: along a source dimension, of the sources' concatenation (each scaled by
/// its factor over the first's); along a copied one, of their one source where they
/// copy the same source with the same factor. False otherwise.
bool concatOfBroadcasts(TermPool &terms, Operation &op, const Shape &global,
                        const std::vector<const State *> &in, TermId &source) {
  auto concat = dyn_cast<ref::ConcatOp>(op);
  if (!concat || in.empty() || in[0]->factor.isZero())
    return false;
  const State &first = *in[0];
  for (const State *s : in)
    if (!s->broadcast || s->sourceDims != first.sourceDims || s->split != first.split ||
        s->windowed())
      return false;
  int64_t dim = (int64_t)concat.getDim();
  auto at = std::find(first.sourceDims.begin(), first.sourceDims.end(), dim);
  if (at == first.sourceDims.end()) {
    for (const State *s : in)
      if (s->source != first.source || s->factor != first.factor)
        return false;
    source = first.source;
    return true;
  }
  Shape whole;
  for (int64_t d : first.sourceDims)
    whole.push_back(global[d]);
  std::vector<TermId> ts;
  for (const State *s : in)
    ts.push_back(terms.scaled(s->source, s->factor / first.factor));
  source = terms.concat(concatHead(op.getContext(), at - first.sourceDims.begin(), whole), ts);
  return true;
}

/// The term of reshape `op` of t to `shape`: reshapes compose (a reshape of a reshape
/// is the first one's operand's, or that operand).
TermId reshapeTerm(TermPool &terms, Operation &op, TermId t, const Shape &shape) {
  return terms.reshaped(t, shape, op.getContext());
}

/// An elementwise function of a reshape is the reshape of the function, element by
/// element: f(reshape(x)) = reshape(f(x)), and f(c reshape(x)) = reshape(f(c x)).
/// (Captures reshape a row sum to [N, 1] for its all_reduce and take the log of that;
/// a reference takes the log of the sum.)
bool functionOfReshape(TermPool &terms, Operation &op, const State &x, const Shape &global,
                       TermId &out) {
  if (!isa<ref::ScalarFunctionOp>(op) || op.getNumOperands() != 1 ||
      !terms.isOp<ref::ReshapeOp>(x.term))
    return false;
  // c reshape(u) = reshape(c u): the factor goes inside, as f takes it.
  TermId v = terms.operands(x.term)[0];
  TermId u = terms.scaled(v, x.factor);
  TermId fu = terms.node(terms.head(op.getName(), op.getAttrDictionary(), terms.shapeOf(v)), {u});
  terms.setOp(fu, op.getName(), op.getAttrDictionary());
  out = reshapeTerm(terms, op, fu, global);
  return true;
}

/// A transpose that keeps the dimensions of more than one element in their order only
/// moves dimensions of size 1: a reshape.
bool unitTranspose(Operation &op, const Shape &in) {
  auto t = dyn_cast<ref::TransposeOp>(op);
  if (!t || t.getPerm().size() != in.size())
    return false;
  int64_t last = -1;
  for (int64_t p : t.getPerm()) {
    if (p < 0 || p >= (int64_t)in.size())
      return false;
    if (in[p] == 1)
      continue;
    if (p < last)
      return false;
    last = p;
  }
  return true;
}

/// A reshape of a concatenation along dimension e, every dimension before e of size
/// 1, is the concatenation of the operands' reshapes along the result's first
/// dimension f of size other than 1: in row-major order the operands follow each
/// other, and each is a run of whole rows of f when its size is a multiple of the
/// size of f's row.
bool reshapeOfConcat(TermPool &terms, Operation &op, const Shape &global, const State &x,
                     TermId &out) {
  int64_t e;
  if (!concatDim(terms, x.term, e) || e >= (int64_t)x.global.size())
    return false;
  for (int64_t d = 0; d < e; ++d)
    if (x.global[d] != 1)
      return false;
  auto ops = terms.operands(x.term);
  // Operands of one shape whose dimensions before g are of size 1 follow each other
  // in row-major order along g too: where their concatenation along g is one term (the
  // slices of a value put back together), the reshape is that term's.
  Shape piece = terms.shapeOf(ops[0]);
  bool same = !piece.empty();
  for (TermId u : ops)
    same &= terms.shapeOf(u) == piece;
  for (size_t g = 0; same && g < piece.size(); ++g) {
    Shape joined = piece;
    joined[g] *= (int64_t)ops.size();
    TermId j = joinedConcat(terms, op.getContext(), concatHead(op.getContext(), (int64_t)g, joined),
                            std::vector<TermId>(ops.begin(), ops.end()));
    int64_t cd;
    if (!concatDim(terms, j, cd)) {
      out = joined == global ? j : reshapeTerm(terms, op, j, global);
      return true;
    }
    if (piece[g] != 1)
      break;
  }
  size_t f = 0;
  while (f < global.size() && global[f] == 1)
    ++f;
  if (f == global.size())
    return false;
  int64_t row = 1, rows = 0;
  for (size_t d = f + 1; d < global.size(); ++d)
    row *= global[d];
  std::vector<TermId> pieces;
  for (TermId u : ops) {
    int64_t n = 1;
    for (int64_t d : terms.shapeOf(u))
      n *= d;
    if (row <= 0 || n % row != 0)
      return false;
    Shape piece = global;
    piece[f] = n / row;
    rows += piece[f];
    pieces.push_back(terms.shapeOf(u) == piece ? u : reshapeTerm(terms, op, u, piece));
  }
  if (rows != global[f])
    return false;
  out = joinedConcat(terms, op.getContext(), concatHead(op.getContext(), (int64_t)f, global), pieces);
  return true;
}


/// Each operand a slice k along b of one value v (at offset k m, of size m, whole along
/// every other dimension; k = 0, 1, ... covering b), of local size 1 along the
/// concatenated dimension e, which they split, every dimension between e and b of size
/// 1, and e before b where m > 1: in row-major order each rank's slices follow each
/// other, so its concatenation is its reshape of its block of v (b is not split: a
/// slice's block is the block's slice). The state is the reshape rule's
/// (reshapeSplitOf) of v's. (PyTorch stacks a sequence's tp chunks so before a
/// reduce_scatter: one position each, or several.)
bool concatOfUnitSlices(RuleContext &c, Operation &op, const std::vector<const State *> &in,
                        State &out) {
  auto cat = dyn_cast<ref::ConcatOp>(op);
  if (!cat || in.size() < 2)
    return false;
  int64_t e = cat.getDim(), n = (int64_t)in.size();
  const State &x = *in[0];
  if (e < 0 || e >= (int64_t)x.split.size() || x.split[e].empty() || x.windowed())
    return false;
  TermId v = 0;
  Shape whole;
  int64_t b = -1, m = 1;
  for (int64_t k = 0; k < n; ++k) {
    const State &s = *in[k];
    TermId input;
    std::vector<int64_t> offsets, sizes;
    if (!s.known || s.split != x.split || s.partial != x.partial || s.factor != x.factor ||
        !s.partialMax.empty() || s.broadcast || !s.rankCoeff.empty() || s.isConst ||
        !sliceParts(c.terms, s.term, input, offsets, sizes) || (k > 0 && input != v))
      return false;
    if (k == 0) {
      v = input;
      whole = c.terms.shapeOf(v);
      if (whole.size() != sizes.size())
        return false;
      for (size_t d = 0; d < whole.size(); ++d)
        if (sizes[d] != whole[d]) {
          if (b >= 0)
            return false; // sliced along two dimensions
          b = (int64_t)d;
        }
      if (b < 0 || b == e || sizes[b] <= 0 || whole[b] != n * sizes[b] ||
          s.global != Shape(sizes) || (sizes[b] > 1 && e > b))
        return false;
      m = sizes[b];
    }
    for (size_t d = 0; d < whole.size(); ++d)
      if ((int64_t)d == b ? offsets[d] != k * m || sizes[d] != m
                          : offsets[d] != 0 || sizes[d] != whole[d])
        return false;
  }
  if (!x.split[b].empty() || whole[e] != c.size(x.split[e]))
    return false; // b split, or more than one row along e on a rank
  for (int64_t d = std::min(e, b) + 1; d < std::max(e, b); ++d)
    if (whole[d] != 1)
      return false;
  State of = x;
  of.term = v;
  of.global = whole;
  Shape local = whole, outLocal;
  for (size_t d = 0; d < whole.size(); ++d)
    local[d] = whole[d] / c.size(x.split[d]);
  auto type = dyn_cast<RankedTensorType>(op.getResult(0).getType());
  if (!type)
    return false;
  outLocal.assign(type.getShape().begin(), type.getShape().end());
  SplitResult r = reshapeSplitOf(c, of, local, outLocal);
  if (!r.why.empty())
    return false;
  out = of;
  out.term = r.global == whole ? v : reshapeTerm(c.terms, op, v, r.global);
  out.global = r.global;
  out.split = r.split;
  return true;
}

bool batchOfOne(const State &lhs, const State &rhs, int64_t lhsDim) {
  return lhsDim == 2 && lhs.global.size() == 3 && rhs.global.size() == 3 &&
         rhs.global[0] == 1 && rhs.split[0].empty() && rhs.split[0].windows.empty() &&
         lhs.global[0] > 1;
}

bool batchOfOneProduct(TermPool &terms, Operation &op, const Shape &global,
                       const State &lhs, const State &rhs, TermId &out) {
  auto m = dyn_cast<ref::BatchMatmulOp>(op);
  if (!m || !batchOfOne(lhs, rhs, m.getLhsDim()) || global.size() != 3)
    return false;
  Shape rows{1, lhs.global[0] * lhs.global[1], lhs.global[2]};
  Shape product{1, rows[1], global[2]};
  TermId t = terms.node(terms.head(op.getName(), op.getAttrDictionary(), product),
                        {reshapeTerm(terms, op, lhs.term, rows), rhs.term});
  terms.setOp(t, op.getName(), op.getAttrDictionary());
  out = reshapeTerm(terms, op, t, global);
  return true;
}

bool literalView(TermPool &terms, Operation &op, TermId &source, std::vector<int64_t> &dims,
                 double &uniform, bool &isUniform) {
  auto lit = dyn_cast<ref::LiteralOp>(op);
  if (!lit)
    return false;
  auto type = dyn_cast<RankedTensorType>(lit.getType());
  if (!type || !type.hasStaticShape())
    return false;
  ArrayRef<int64_t> shape = type.getShape();
  ArrayRef<double> v = lit.getValues();
  size_t rank = shape.size();
  std::vector<int64_t> stride(rank, 1);
  for (size_t d = rank; d-- > 1;)
    stride[d - 1] = stride[d] * shape[d];
  if (rank == 0 || v.empty() || (int64_t)v.size() != stride[0] * shape[0])
    return false;
  for (int64_t d : shape)
    if (d <= 0)
      return false;
  // Dimension d copies when every element equals the one at index 0 along d.
  std::vector<bool> copied(rank, true);
  bool any = false;
  for (size_t d = 0; d < rank; ++d) {
    for (size_t i = 0; copied[d] && i < v.size(); ++i) {
      int64_t at = ((int64_t)i / stride[d]) % shape[d];
      copied[d] = at == 0 || v[i] == v[i - at * stride[d]];
    }
    any |= copied[d];
  }
  if (!any)
    return false;
  dims.clear();
  Shape reducedShape;
  for (size_t d = 0; d < rank; ++d)
    if (!copied[d]) {
      dims.push_back((int64_t)d);
      reducedShape.push_back(shape[d]);
    }
  isUniform = dims.empty();
  uniform = v[0];
  if (isUniform)
    return true;
  // The elements at index 0 of the copied dimensions, in row-major order.
  std::vector<double> reduced;
  for (size_t i = 0; i < v.size(); ++i) {
    bool first = true;
    for (size_t d = 0; first && d < rank; ++d)
      first = !copied[d] || ((int64_t)i / stride[d]) % shape[d] == 0;
    if (first)
      reduced.push_back(v[i]);
  }
  Builder b(op.getContext());
  auto attrs = b.getDictionaryAttr(
      {b.getNamedAttr(lit.getValuesAttrName(), b.getDenseF64ArrayAttr(reduced))});
  source = terms.node(terms.head(op.getName(), attrs, reducedShape), {});
  terms.setOp(source, op.getName(), attrs);
  return true;
}

} // namespace planproof::layouts
