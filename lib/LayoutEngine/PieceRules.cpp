//===- PieceRules.cpp - how ops distribute over row pieces ----------------===//
//
// The identities of Pieces.cpp's file comment: one over the op's declared layout
// factors for every op that has them, and those of the ops without (reshape, slice, a
// causal softmax with an offset). Each says whether it applies to an op's normalized
// operands (Operands) and, if so, gives the op's value over the pieces
// (docs/layout-engine.md, "Whole-batch references").
//
//===----------------------------------------------------------------------===//
#include "LayoutEngine/PiecesInternal.h"

#include "Ref/RefDialect.h"

#include "mlir/IR/Builders.h"

#include <optional>

using namespace mlir;

namespace planproof::layouts {

bool PieceComparison::Normalizer::Operands::piece(Normalizer &n) {
  // Each operand as pieces (a concatenation), or whole.
  dims.assign(in.size(), -1);
  parts.assign(in.size(), {});
  bool any = false;
  for (size_t i = 0; i < in.size(); ++i)
    if (n.piecesOf(in[i].first, dims[i], parts[i])) {
      for (auto &p : parts[i])
        p.second = p.second * in[i].second;
      any = true;
    }
  if (!any)
    return false;
  // A splat (a broadcast of a scalar, every element one value) is pieced like any
  // pieced operand: each piece is the splat at the piece's shape.
  size_t lead = 0;
  while (dims[lead] < 0)
    ++lead;
  // So is a broadcast that copies along the pieced dimension, of the same rank.
  for (size_t i = 0; i < in.size(); ++i) {
    if (dims[i] >= 0 || terms.shapeOf(in[i].first).size() != terms.shapeOf(in[lead].first).size() ||
        !n.cutCopies(in[i].first, dims[lead], parts[lead], parts[i]))
      continue;
    dims[i] = dims[lead];
    for (auto &p : parts[i])
      p.second = in[i].second;
  }
  return true;
}

bool PieceComparison::Normalizer::Operands::alike(size_t i, size_t j) const {
  if (dims[i] < 0 || dims[j] < 0 || parts[i].size() != parts[j].size())
    return false;
  for (size_t k = 0; k < parts[i].size(); ++k)
    if (terms.shapeOf(parts[i][k].first)[dims[i]] != terms.shapeOf(parts[j][k].first)[dims[j]])
      return false;
  return true;
}

Shape PieceComparison::Normalizer::Operands::pieceShape(size_t k, size_t from,
                                                       int resultDim) const {
  Shape s = shape;
  s[resultDim] = terms.shapeOf(parts[from][k].first)[dims[from]];
  return s;
}

bool PieceComparison::Normalizer::distribute(const TermPool::OpFactors *factors,
                                             OperationName name, DictionaryAttr attrs,
                                             const Shape &shape,
                                             const std::vector<Weighted> &in, Weighted &out) {
  Operands o{terms, name, attrs, name.getStringRef(), shape, in, {}, {}};
  if (!o.piece(*this))
    return false;
  return (factors && distributeFactors(*factors, o, out)) || distributeReshape(o, out) ||
         distributeSlice(o, out) || distributeCausalSoftmax(o, out);
}

bool PieceComparison::Normalizer::distributeFactors(const TermPool::OpFactors &of, Operands &o,
                                                    Weighted &out) {
  // The op's layout factors (LayoutFactorsOpInterface, certified in
  // LayoutFactorsTest) say how it distributes over pieces of one factor: the operands
  // that index it pieced alike along their dimension of it, the others whole, the op
  // on each piece gives
  //   pass-through: the result's piece along the factor's result dimension;
  //   counted:      that piece times its share n_k / n of the factor's n positions;
  //   sum:          a summand of the result; mean: a summand times n_k / n;
  //   max:          a term of the result's maximum (folded in the pieces' order);
  //   whole:        nothing (the op reads all positions at once).
  const ref::LayoutFactors &f = of.factors;
  if (of.tensorOperand.size() != o.in.size() || f.result.size() != o.shape.size())
    return false;
  // Each tensor operand's ranks must be the ones the factors were declared for (a
  // plan op described under another global shape is not this op's signature).
  std::vector<int> index(o.in.size(), -1); // the operand's dimension list in f
  for (size_t i = 0; i < o.in.size(); ++i) {
    int k = of.tensorOperand[i];
    if (k < 0) {
      if (o.dims[i] >= 0)
        return false;
      continue;
    }
    if ((size_t)k >= f.operands.size() ||
        f.operands[k].size() != terms.shapeOf(o.in[i].first).size())
      return false;
    index[i] = k;
  }
  // The one factor the pieces cut.
  int factor = -1;
  for (size_t i = 0; i < o.in.size(); ++i) {
    if (o.dims[i] < 0)
      continue;
    int g = index[i] < 0 ? -1 : f.operands[index[i]][o.dims[i]];
    if (g < 0 || (factor >= 0 && g != factor))
      return false;
    factor = g;
  }
  if (factor < 0)
    return false;
  ref::FactorKind kind = f.kinds[factor];
  if (kind == ref::FactorKind::Whole)
    return false;
  // Every operand that indexes the factor is pieced along it, alike; the rest whole.
  std::vector<std::pair<std::vector<Weighted> *, int>> cut;
  for (size_t i = 0; i < o.in.size(); ++i) {
    int at = -1;
    if (index[i] >= 0)
      for (size_t d = 0; d < f.operands[index[i]].size(); ++d)
        if (f.operands[index[i]][d] == factor) {
          if (at >= 0)
            return false; // (an operand indexing it twice: a diagonal)
          at = (int)d;
        }
    if (at != o.dims[i])
      return false;
    if (at >= 0)
      cut.push_back({&o.parts[i], at});
  }
  if (!align(cut))
    return false;
  size_t lead = 0;
  while (o.dims[lead] < 0)
    ++lead;
  for (size_t i = 0; i < o.in.size(); ++i)
    if (o.dims[i] >= 0 && !o.alike(lead, i))
      return false;
  int resultDim = -1;
  for (size_t d = 0; d < f.result.size(); ++d)
    if (f.result[d] == factor)
      resultDim = resultDim < 0 ? (int)d : -2;
  bool along = kind == ref::FactorKind::PassThrough || kind == ref::FactorKind::Counted;
  if (resultDim == -2 || (along != (resultDim >= 0)))
    return false;
  int64_t whole = terms.shapeOf(o.in[lead].first)[o.dims[lead]];
  std::vector<Weighted> pieces;
  std::optional<Weighted> maximum;
  for (size_t k = 0; k < o.parts[lead].size(); ++k) {
    std::vector<Weighted> args;
    for (size_t i = 0; i < o.in.size(); ++i)
      args.push_back(o.dims[i] >= 0 ? o.parts[i][k] : o.in[i]);
    Shape s = along ? o.pieceShape(k, lead, resultDim) : o.shape;
    Weighted w = rebuild(o.name, o.attrs, s, args);
    int64_t n = terms.shapeOf(o.parts[lead][k].first)[o.dims[lead]];
    if (kind == ref::FactorKind::Counted || kind == ref::FactorKind::Mean)
      w.second = w.second * Rational(n) / Rational(whole);
    if (kind == ref::FactorKind::Max)
      maximum = maximum ? rebuild(OperationName("ref.maximum", ctx), DictionaryAttr::get(ctx),
                                  o.shape, {*maximum, w})
                        : w;
    pieces.push_back(w);
  }
  switch (kind) {
  case ref::FactorKind::PassThrough: used |= PassThrough; break;
  case ref::FactorKind::Counted: used |= Counted; break;
  case ref::FactorKind::Sum: used |= Sum; break;
  case ref::FactorKind::Mean: used |= Mean; break;
  case ref::FactorKind::Max: used |= Max; break;
  case ref::FactorKind::Whole: break;
  }
  if (kind == ref::FactorKind::Max) {
    if (!maximum)
      return false;
    out = *maximum;
  } else if (along) {
    out.first = concat(resultDim, o.shape, pieces, out.second);
  } else {
    out = sumOf(o.shape, pieces);
  }
  return true;
}

bool PieceComparison::Normalizer::distributeReshape(Operands &o, Weighted &out) {
  // A reshape keeps row-major order: pieces along the leading dimension of one of its
  // dimension groups (every dimension before it in the group of size 1) are
  // consecutive runs of the group's elements, so they are pieces along the group's
  // first output dimension of more than one element, where each run fills whole rows
  // of the dimensions after it.
  if (!(o.op == "ref.reshape" && o.in.size() == 1 && o.dims[0] >= 0))
    return false;
  Shape in = terms.shapeOf(o.in[0].first);
  const Shape &res = o.shape;
  size_t d = (size_t)o.dims[0];
  std::vector<DimGroup> groups;
  if (!dimGroups(in, res, groups))
    return false;
  for (const DimGroup &g : groups) {
    if (d < g.i0 || d >= g.i1)
      continue;
    for (size_t k = g.i0; k < d; ++k)
      if (in[k] != 1)
        return false;
    size_t lead = g.j0;
    while (lead < g.j1 && res[lead] == 1)
      ++lead;
    if (lead == g.j1)
      return false;
    int64_t innerIn = 1, innerOut = 1;
    for (size_t k = d + 1; k < g.i1; ++k)
      innerIn *= in[k];
    for (size_t k = lead + 1; k < g.j1; ++k)
      innerOut *= res[k];
    std::vector<Weighted> pieces;
    for (auto &p : o.parts[0]) {
      int64_t n = terms.shapeOf(p.first)[d] * innerIn;
      if (n % innerOut)
        return false;
      Shape s = res;
      s[lead] = n / innerOut;
      pieces.push_back(rebuild(o.name, o.attrs, s, {p}));
    }
    used |= Reshape;
    out.first = concat((int)lead, res, pieces, out.second);
    return true;
  }
  return false;
}

bool PieceComparison::Normalizer::distributeSlice(Operands &o, Weighted &out) {
  // A slice whole along the pieced dimension: the pieces' slices.
  if (!(o.op == "ref.slice" && o.in.size() == 1 && o.dims[0] >= 0))
    return false;
  auto off = o.attrs.getAs<DenseI64ArrayAttr>("offsets");
  auto sz = o.attrs.getAs<DenseI64ArrayAttr>("sizes");
  int d = o.dims[0];
  Shape in = terms.shapeOf(o.in[0].first);
  if (!off || !sz || off.size() != (int64_t)in.size() || off[d] != 0 || sz[d] != in[d])
    return false;
  Builder b(ctx);
  std::vector<Weighted> pieces;
  for (auto &p : o.parts[0]) {
    std::vector<int64_t> sizes(sz.asArrayRef().begin(), sz.asArrayRef().end());
    sizes[d] = terms.shapeOf(p.first)[d];
    auto attrs = b.getDictionaryAttr({b.getNamedAttr("offsets", off),
                                      b.getNamedAttr("sizes", b.getDenseI64ArrayAttr(sizes))});
    pieces.push_back(rebuild(o.name, attrs, Shape(sizes.begin(), sizes.end()), {p}));
  }
  used |= Slice;
  out.first = concat(d, o.shape, pieces, out.second);
  return true;
}

bool PieceComparison::Normalizer::distributeCausalSoftmax(Operands &o, Weighted &out) {
  // The mask reads positions in the last two dimensions only: pieces along a batch
  // dimension before them are the pieces' softmaxes (the offset, if any, unchanged).
  if (!(o.op == "ref.causal_softmax" && !o.in.empty() && o.dims[0] >= 0 &&
        o.dims[0] + 2 < (int)o.shape.size()))
    return false;
  for (size_t i = 1; i < o.in.size(); ++i)
    if (o.dims[i] >= 0)
      return false;
  std::vector<Weighted> pieces;
  for (size_t k = 0; k < o.parts[0].size(); ++k) {
    std::vector<Weighted> args = o.in;
    args[0] = o.parts[0][k];
    pieces.push_back(rebuild(o.name, o.attrs, o.pieceShape(k, 0, o.dims[0]), args));
  }
  used |= CausalOffset;
  out.first = concat(o.dims[0], o.shape, pieces, out.second);
  return true;
}

} // namespace planproof::layouts
