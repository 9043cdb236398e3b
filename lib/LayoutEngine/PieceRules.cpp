//===- PieceRules.cpp - how ops distribute over row pieces ----------------===//
//
// The identities of Pieces.cpp's file comment, one function per op family: each says
// whether it applies to an op's normalized operands (Operands) and, if so, gives the
// op's value over the pieces (docs/layout-engine.md, "Whole-batch references").
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

bool PieceComparison::Normalizer::distribute(OperationName name, DictionaryAttr attrs,
                                             const Shape &shape,
                                             const std::vector<Weighted> &in, Weighted &out) {
  Operands o{terms, name, attrs, name.getStringRef(), shape, in, {}, {}};
  if (!o.piece(*this))
    return false;
  return distributeElementwise(o, out) || distributeMatmul(o, out) ||
         distributeMeanLoss(o, out) || distributeRowWise(o, out) ||
         distributeCrossEntropySum(o, out) || distributeReduceSum(o, out) ||
         distributeTranspose(o, out) || distributeTokenOps(o, out) ||
         distributeReshape(o, out) || distributeSlice(o, out) ||
         distributeBatchMatmul(o, out) || distributeCausalSoftmax(o, out);
}

bool PieceComparison::Normalizer::distributeElementwise(Operands &o, Weighted &out) {
  if (!(o.name.hasTrait<OpTrait::Elementwise>()))
    return false;
  std::vector<std::vector<Weighted> *> all;
  for (size_t i = 0; i < o.in.size(); ++i) {
    if (o.dims[i] != o.dims[0])
      return false;
    all.push_back(&o.parts[i]);
  }
  if (!align(all, o.dims[0]))
    return false;
  for (size_t i = 1; i < o.in.size(); ++i)
    if (!o.alike(0, i))
      return false;
  std::vector<Weighted> pieces;
  for (size_t k = 0; k < o.parts[0].size(); ++k) {
    std::vector<Weighted> args;
    for (size_t i = 0; i < o.in.size(); ++i)
      args.push_back(o.parts[i][k]);
    pieces.push_back(rebuild(o.name, o.attrs, o.pieceShape(k, 0, o.dims[0]), args));
  }
  out.first = concat(o.dims[0], o.shape, pieces, out.second);
  return true;
}

bool PieceComparison::Normalizer::distributeMatmul(Operands &o, Weighted &out) {
  if (!(o.op == "ref.matmul"))
    return false;
  auto ld = o.attrs.getAs<IntegerAttr>("lhs_dim"), rd = o.attrs.getAs<IntegerAttr>("rhs_dim");
  if (!ld || !rd || o.in.size() != 2)
    return false;
  int l = (int)ld.getInt(), r = (int)rd.getInt();
  std::vector<Weighted> pieces;
  if (o.dims[0] == l && o.dims[1] == r && o.alike(0, 1)) { // over the contraction: a sum
    for (size_t k = 0; k < o.parts[0].size(); ++k)
      pieces.push_back(rebuild(o.name, o.attrs, o.shape, {o.parts[0][k], o.parts[1][k]}));
    out = sumOf(o.shape, pieces);
    return true;
  }
  if (o.dims[0] == 1 - l && o.dims[1] < 0) { // the lhs's free dimension: result rows
    for (size_t k = 0; k < o.parts[0].size(); ++k)
      pieces.push_back(rebuild(o.name, o.attrs, o.pieceShape(k, 0, 0), {o.parts[0][k], o.in[1]}));
    out.first = concat(0, o.shape, pieces, out.second);
    return true;
  }
  if (o.dims[1] == 1 - r && o.dims[0] < 0) { // the rhs's free dimension: result columns
    for (size_t k = 0; k < o.parts[1].size(); ++k)
      pieces.push_back(rebuild(o.name, o.attrs, o.pieceShape(k, 1, 1), {o.in[0], o.parts[1][k]}));
    out.first = concat(1, o.shape, pieces, out.second);
    return true;
  }
  return false;
}

bool PieceComparison::Normalizer::distributeMeanLoss(Operands &o, Weighted &out) {
  if (!((o.op == "ref.mse_loss" || o.op == "ref.mse_loss_grad") && o.in.size() == 2 && o.alike(0, 1) &&
         o.dims[0] == o.dims[1]))
    return false;
  int64_t n = elements(terms.shapeOf(o.in[0].first));
  std::vector<Weighted> pieces;
  for (size_t k = 0; k < o.parts[0].size(); ++k) {
    Shape s = o.op == "ref.mse_loss" ? o.shape : o.pieceShape(k, 0, o.dims[0]);
    Weighted w = rebuild(o.name, o.attrs, s, {o.parts[0][k], o.parts[1][k]});
    // Both are means over their elements: a piece weighs its share of them.
    w.second = w.second * Rational(elements(terms.shapeOf(o.parts[0][k].first))) / Rational(n);
    pieces.push_back(w);
  }
  if (o.op == "ref.mse_loss")
    out = sumOf(o.shape, pieces);
  else
    out.first = concat(o.dims[0], o.shape, pieces, out.second);
  return true;
}

bool PieceComparison::Normalizer::distributeRowWise(Operands &o, Weighted &out) {
  if (!(o.name.hasTrait<ref::OpTrait::RowWise>() && o.dims[0] >= 0 &&
         o.dims[0] + 1 < (int)terms.shapeOf(o.in[0].first).size()))
    return false;
  // Row by row over the last dimension: pieces along another dimension are rows;
  // operands of the first one's rank are pieced alike, lower-rank ones (a norm's
  // weight) whole.
  size_t rank = terms.shapeOf(o.in[0].first).size();
  std::vector<std::vector<Weighted> *> all{&o.parts[0]};
  for (size_t i = 1; i < o.in.size(); ++i) {
    if (terms.shapeOf(o.in[i].first).size() == rank) {
      if (o.dims[i] != o.dims[0])
        return false;
      all.push_back(&o.parts[i]);
    } else if (o.dims[i] >= 0) {
      return false;
    }
  }
  if (!align(all, o.dims[0]))
    return false;
  std::vector<Weighted> pieces;
  for (size_t k = 0; k < o.parts[0].size(); ++k) {
    std::vector<Weighted> args;
    for (size_t i = 0; i < o.in.size(); ++i)
      args.push_back(o.dims[i] >= 0 ? o.parts[i][k] : o.in[i]);
    pieces.push_back(rebuild(o.name, o.attrs, o.pieceShape(k, 0, o.dims[0]), args));
  }
  out.first = concat(o.dims[0], o.shape, pieces, out.second);
  return true;
}

bool PieceComparison::Normalizer::distributeCrossEntropySum(Operands &o, Weighted &out) {
  if (!(o.op == "ref.cross_entropy_sum" && o.in.size() == 3 && o.dims[0] == 0 && o.dims[1] == 0 &&
         o.dims[2] == 0))
    return false;
  // A sum over the rows (tokens) of logits, labels and mask pieced alike.
  std::vector<std::vector<Weighted> *> all{&o.parts[0], &o.parts[1], &o.parts[2]};
  if (!align(all, 0) || !o.alike(0, 1) || !o.alike(0, 2))
    return false;
  std::vector<Weighted> pieces;
  for (size_t k = 0; k < o.parts[0].size(); ++k)
    pieces.push_back(rebuild(o.name, o.attrs, o.shape, {o.parts[0][k], o.parts[1][k], o.parts[2][k]}));
  out = sumOf(o.shape, pieces);
  return true;
}

bool PieceComparison::Normalizer::distributeReduceSum(Operands &o, Weighted &out) {
  bool mean = o.op == "ref.reduce_mean";
  if (!((o.op == "ref.reduce_sum" || mean || o.op == "ref.reduce_max") && o.in.size() == 1 &&
        o.dims[0] >= 0))
    return false;
  auto red = o.attrs.getAs<DenseI64ArrayAttr>("dims");
  if (!red)
    return false;
  ArrayRef<int64_t> rd = red.asArrayRef();
  std::vector<Weighted> pieces;
  if (llvm::is_contained(rd, o.dims[0])) {
    // A sum over the pieced dimension is the pieces' sums; a mean, their means
    // weighted by their share of the dimension; a maximum, the maximum of the pieces'
    // maxima (exact), folded in the pieces' order as a running maximum over
    // microbatches is written.
    if (o.op == "ref.reduce_max") {
      OperationName maximum("ref.maximum", ctx);
      std::optional<Weighted> acc;
      for (auto &p : o.parts[0]) {
        Weighted w = rebuild(o.name, o.attrs, o.shape, {p});
        acc = acc ? rebuild(maximum, DictionaryAttr::get(ctx), o.shape, {*acc, w}) : w;
      }
      if (!acc)
        return false;
      out = *acc;
      return true;
    }
    int64_t whole = terms.shapeOf(o.in[0].first)[o.dims[0]];
    for (auto &p : o.parts[0]) {
      Weighted w = rebuild(o.name, o.attrs, o.shape, {p});
      if (mean)
        w.second = w.second * Rational(terms.shapeOf(p.first)[o.dims[0]]) / Rational(whole);
      pieces.push_back(w);
    }
    out = sumOf(o.shape, pieces);
    return true;
  }
  int at = o.dims[0];
  for (int64_t d : rd)
    at -= d < o.dims[0];
  for (size_t k = 0; k < o.parts[0].size(); ++k)
    pieces.push_back(rebuild(o.name, o.attrs, o.pieceShape(k, 0, at), {o.parts[0][k]}));
  out.first = concat(at, o.shape, pieces, out.second);
  return true;
}

bool PieceComparison::Normalizer::distributeTranspose(Operands &o, Weighted &out) {
  if (!(o.op == "ref.transpose" && o.in.size() == 1 && o.dims[0] >= 0))
    return false;
  auto perm = o.attrs.getAs<DenseI64ArrayAttr>("perm");
  if (!perm)
    return false;
  int at = -1;
  for (int64_t j = 0; j < perm.size(); ++j)
    if (perm[j] == o.dims[0])
      at = (int)j;
  if (at < 0)
    return false;
  std::vector<Weighted> pieces;
  for (size_t k = 0; k < o.parts[0].size(); ++k)
    pieces.push_back(rebuild(o.name, o.attrs, o.pieceShape(k, 0, at), {o.parts[0][k]}));
  out.first = concat(at, o.shape, pieces, out.second);
  return true;
}

bool PieceComparison::Normalizer::distributeTokenOps(Operands &o, Weighted &out) {
  // Lookups by token id are row by row of the ids: embedding and one_hot of pieced ids
  // are the concatenation of the pieces' lookups, the table gradient of ids and output
  // gradients pieced alike the sum of the pieces' (a scatter-add adds each token's
  // row). The table and the offset stay whole; ids are never scaled.
  bool grad = o.op == "ref.embedding_grad";
  if (!(grad || o.op == "ref.embedding" || o.op == "ref.one_hot"))
    return false;
  size_t ids = o.op == "ref.one_hot" ? 0 : 1;
  if (o.in.size() <= ids || o.dims[ids] != 0)
    return false;
  for (size_t i = 0; i < o.in.size(); ++i)
    if (i != ids && o.dims[i] >= 0 && !(grad && i == 0 && o.dims[0] == 0))
      return false;
  for (auto &p : o.parts[ids])
    if (p.second != Rational(1))
      return false;
  std::vector<std::vector<Weighted> *> all{&o.parts[ids]};
  if (grad) {
    if (o.dims[0] != 0)
      return false;
    all.push_back(&o.parts[0]);
  }
  if (!align(all, 0) || (grad && !o.alike(0, ids)))
    return false;
  std::vector<Weighted> pieces;
  for (size_t k = 0; k < o.parts[ids].size(); ++k) {
    std::vector<Weighted> args = o.in;
    args[ids] = o.parts[ids][k];
    if (grad)
      args[0] = o.parts[0][k];
    pieces.push_back(rebuild(o.name, o.attrs, grad ? o.shape : o.pieceShape(k, ids, 0), args));
  }
  if (grad)
    out = sumOf(o.shape, pieces);
  else
    out.first = concat(0, o.shape, pieces, out.second);
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
  out.first = concat(d, o.shape, pieces, out.second);
  return true;
}

bool PieceComparison::Normalizer::distributeBatchMatmul(Operands &o, Weighted &out) {
  // Per batch entry a matmul: pieces along both batches alike are the pieces' products
  // along the result's batch; along one operand's free dimension, the result's rows
  // (lhs) or columns (rhs); along both contracted dimensions alike, a sum.
  if (!(o.op == "ref.batch_matmul" && o.in.size() == 2))
    return false;
  auto ld = o.attrs.getAs<IntegerAttr>("lhs_dim"), rd = o.attrs.getAs<IntegerAttr>("rhs_dim");
  if (!ld || !rd)
    return false;
  int l = (int)ld.getInt(), r = (int)rd.getInt();
  std::vector<Weighted> pieces;
  auto each = [&](int resultDim, bool lhs, bool rhs) {
    size_t from = lhs ? 0 : 1;
    for (size_t k = 0; k < o.parts[from].size(); ++k) {
      Shape s = resultDim < 0 ? o.shape : o.pieceShape(k, from, resultDim);
      pieces.push_back(rebuild(o.name, o.attrs, s,
                               {lhs ? o.parts[0][k] : o.in[0], rhs ? o.parts[1][k] : o.in[1]}));
    }
  };
  if (o.dims[0] == 0 && o.dims[1] == 0) {
    std::vector<std::vector<Weighted> *> all{&o.parts[0], &o.parts[1]};
    if (!align(all, 0) || !o.alike(0, 1))
      return false;
    each(0, true, true);
  } else if (o.dims[0] == l && o.dims[1] == r && o.alike(0, 1)) {
    each(-1, true, true);
    out = sumOf(o.shape, pieces);
    return true;
  } else if (o.dims[0] == 3 - l && o.dims[1] < 0) {
    each(1, true, false);
  } else if (o.dims[1] == 3 - r && o.dims[0] < 0) {
    each(2, false, true);
  } else {
    return false;
  }
  out.first = concat(o.dims[0] == 0 ? 0 : o.dims[0] >= 0 ? 1 : 2, o.shape, pieces, out.second);
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
  out.first = concat(o.dims[0], o.shape, pieces, out.second);
  return true;
}

} // namespace planproof::layouts
