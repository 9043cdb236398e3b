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
  for (size_t i = 0; i < in.size(); ++i) {
    if (dims[i] >= 0 || !terms.headIs(in[i].first, "bcast{}:"))
      continue;
    dims[i] = dims[lead];
    for (auto &p : parts[lead]) {
      Shape s = terms.shapeOf(in[i].first);
      if (s.size() != terms.shapeOf(p.first).size())
        return false;
      s[dims[i]] = terms.shapeOf(p.first)[dims[lead]];
      parts[i].push_back({terms.broadcast(s, {}, terms.operands(in[i].first)[0]), in[i].second});
    }
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
         distributeTranspose(o, out);
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
  if (!(o.op == "ref.reduce_sum" && o.in.size() == 1 && o.dims[0] >= 0))
    return false;
  auto red = o.attrs.getAs<DenseI64ArrayAttr>("dims");
  if (!red)
    return false;
  ArrayRef<int64_t> rd = red.asArrayRef();
  std::vector<Weighted> pieces;
  if (llvm::is_contained(rd, o.dims[0])) {
    for (auto &p : o.parts[0])
      pieces.push_back(rebuild(o.name, o.attrs, o.shape, {p}));
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

} // namespace planproof::layouts
