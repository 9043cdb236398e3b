//===- Pieces.cpp - terms compared piece by piece over their rows ---------===//
//
// A reference that computes the whole batch and a plan that computes it microbatch by
// microbatch build different terms for one value: mse(f(x)) against
// 1/2 mse(f(slice_0 x)) + 1/2 mse(f(slice_1 x)). Where an output's terms differ, the
// engine normalizes both by the *row pieces* the slices of inputs in either term cut
// (docs/layout-engine.md, "Whole-batch references"): an input with cuts is the
// concatenation of its elementary slices, a slice of it the concatenation of those in
// its window, and ops distribute over concatenations by exact identities. An op with
// layout factors (dialects/Ref/LayoutFactors.h, certified in LayoutFactorsTest) of
// operands pieced alike along one of its factors (PieceRules.cpp):
//
//   pass-through  f(concat(a_i), w)             = concat(f(a_i, w))
//   counted       f(concat(a_i), ...)           = concat((n_i / n) f(a_i, ...))
//   sum           f(concat(a_i), concat(b_i))   = sum_i f(a_i, b_i)
//   mean          f(concat(a_i), ...)           = sum_i (n_i / n) f(a_i, ...)
//   max           f(concat(a_i))                = maximum(... maximum(f(a_0), f(a_1)) ...)
//
// (an elementwise op, a product's free dimension, a batch, a lookup's tokens, rotary's
// positions; mse_loss_grad; a contraction, reduce_sum, cross_entropy_sum,
// embedding_grad over tokens; mse_loss, reduce_mean; reduce_max), and the rest:
//
//   div(sum_k a_k, d)                           = sum_k div(a_k, d)
//   sum_k view(a_k), one transpose or reshape   = view(sum_k a_k)
//   broadcast of pieces along a source dim      = concat of the pieces' broadcasts
//   sum_k concat(a_ik)                          = concat(sum_k a_ik)
//   reshape of pieces along a group's lead dim  = concat of the pieces' reshapes
//   slice whole along the pieced dim            = concat of the pieces' slices
//
// where the pieces of all concatenated operands have the same extents (n_i: a piece's
// extent along the factor, n the whole's). Terms normalized by these rules are equal
// only if the values are: each rule is an identity of the ops' definitions
// (Semantics/OpSemantics.h), and everything else is rebuilt as it was.
//
//===----------------------------------------------------------------------===//
#include "LayoutEngine/PiecesInternal.h"

#include "Ref/RefDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

#include <map>
#include <set>
#include <unordered_map>

using namespace mlir;

namespace planproof::layouts {


bool PieceComparison::Normalizer::sliceOf(TermId t, TermId &input, std::vector<int64_t> &offsets,
                         std::vector<int64_t> &sizes) const {
  OperationName name("ref.slice", ctx);
  DictionaryAttr attrs;
  OperationName actual = name;
  if (!terms.isOp<ref::SliceOp>(t) || !terms.opOf(t, actual, attrs) || actual != name)
    return false;
  auto o = attrs.getAs<DenseI64ArrayAttr>("offsets");
  auto s = attrs.getAs<DenseI64ArrayAttr>("sizes");
  if (!o || !s || terms.operands(t).size() != 1)
    return false;
  input = terms.operands(t)[0];
  offsets.assign(o.asArrayRef().begin(), o.asArrayRef().end());
  sizes.assign(s.asArrayRef().begin(), s.asArrayRef().end());
  return true;
}

void PieceComparison::Normalizer::collect(TermId t) {
  Deeper guard(depth);
  if (depth > kMaxDepth) {
    tooDeep = true;
    return;
  }
  if (!seen.insert(t).second)
    return;
  TermId input;
  std::vector<int64_t> offsets, sizes;
  if (sliceOf(t, input, offsets, sizes)) {
    int d = cutDim(terms.shapeOf(input), offsets, sizes);
    if (d == -2 && cuttable(input))
      cuts[input].bad = true;
    else if (d >= 0)
      requestCut(input, d, offsets[d], offsets[d] + sizes[d]);
  }
  for (TermId u : terms.operands(t))
    collect(u);
}

void PieceComparison::Normalizer::requestCut(TermId t, int d, int64_t from, int64_t to) {
  Deeper guard(depth);
  if (depth > kMaxDepth) {
    tooDeep = true;
    return;
  }
  deadline.check("comparing terms by pieces");
  Shape whole = terms.shapeOf(t);
  // (Each request once: the work stays bounded by the terms times their windows.)
  if (d < 0 || d >= (int)whole.size() || !requested.insert({t, d, from, to}).second)
    return;
  if (cuttable(t)) {
    Cut &c = cuts[t];
    if (c.dim >= 0 && c.dim != d)
      c.bad = true;
    c.dim = d;
    c.at.insert({0, from, to, whole[d]});
    return;
  }
  // Rows of a value computed row by row are those of its operands' rows: a lookup by
  // token id (embedding, one_hot: row i reads id i), an elementwise op of operands of
  // its shape. Cutting those operands there makes the rules above rewrite the value
  // into the concatenation whose pieces the slice takes (a value computed whole, then
  // cut into microbatches: a tied embedding's lookup before a pipeline's stages).
  // A concatenation's rows are its operands' (along its dimension, each from its
  // offset); a slice's rows its input's, from its offset.
  int cd = -1;
  std::vector<Weighted> parts;
  if (piecesOf(t, cd, parts)) {
    int64_t at = 0;
    for (const Weighted &u : parts) {
      int64_t len = d < (int)terms.shapeOf(u.first).size() ? terms.shapeOf(u.first)[d] : 0;
      if (cd != d)
        requestCut(u.first, d, from, to);
      else if (std::max(from, at) < std::min(to, at + len))
        requestCut(u.first, d, std::max(from, at) - at, std::min(to, at + len) - at);
      at += len;
    }
    return;
  }
  TermId input;
  std::vector<int64_t> offsets, sizes;
  if (sliceOf(t, input, offsets, sizes)) {
    if (d < (int)offsets.size())
      requestCut(input, d, offsets[d] + from, offsets[d] + to);
    return;
  }
  OperationName name("ref.slice", ctx);
  DictionaryAttr attrs;
  if (!terms.opOf(t, name, attrs))
    return;
  auto ops = terms.operands(t);
  if ((name.getStringRef() == "ref.embedding" || name.getStringRef() == "ref.one_hot") &&
      d == 0) {
    TermId ids = ops[name.getStringRef() == "ref.embedding" ? 1 : 0];
    if (terms.shapeOf(ids).size() == 1)
      requestCut(ids, 0, from, to);
    return;
  }
  if (name.hasTrait<OpTrait::Elementwise>())
    for (TermId u : ops)
      if (terms.shapeOf(u) == whole)
        requestCut(u, d, from, to);
}

bool PieceComparison::Normalizer::settle() {
  for (auto it = cuts.begin(); it != cuts.end();)
    it = it->second.bad || it->second.dim < 0 ? cuts.erase(it) : std::next(it);
  // Flat buffers of one length (a parameter and its optimizer moments, ZeRO's flat
  // shards) are cut alike, so that their pieces line up in elementwise updates: any
  // cut of an input is exact (an input is the concatenation of its slices anywhere).
  // Not a flat input that a broadcast reads (a bias copied over the tokens): its
  // positions become another dimension's there, and a length shared with the cut
  // buffers (as many features as tokens) would piece the broadcast along it; it keeps
  // the cuts of its own slices, which it gives the others. (Every choice of cuts is
  // exact; this one is the one under which both sides' pieces line up.)
  std::set<TermId> broadcastSources;
  for (TermId t : seen)
    if (terms.kindIs(t, TermPool::HeadData::Broadcast) && terms.operands(t).size() == 1)
      broadcastSources.insert(terms.operands(t)[0]);
  std::map<int64_t, std::set<int64_t>> flat;
  for (auto &[leaf, c] : cuts)
    if (terms.shapeOf(leaf).size() == 1)
      flat[terms.shapeOf(leaf)[0]].insert(c.at.begin(), c.at.end());
  for (TermId leaf : seen) {
    Shape s = terms.isLeaf(leaf) ? terms.shapeOf(leaf) : Shape{};
    if (s.size() != 1 || !flat.count(s[0]) || broadcastSources.count(leaf))
      continue;
    Cut &c = cuts[leaf];
    c.dim = 0;
    c.at.insert(flat[s[0]].begin(), flat[s[0]].end());
  }
  return !cuts.empty();
}

TermId PieceComparison::Normalizer::slice(TermId input, const Shape &whole, int dim, int64_t from, int64_t to) {
  std::vector<int64_t> offsets(whole.size(), 0), sizes(whole.begin(), whole.end());
  offsets[dim] = from;
  sizes[dim] = to - from;
  Builder b(ctx);
  auto attrs = b.getDictionaryAttr({b.getNamedAttr("offsets", b.getDenseI64ArrayAttr(offsets)),
                                    b.getNamedAttr("sizes", b.getDenseI64ArrayAttr(sizes))});
  TermId t = terms.node(headFrom("ref.slice", attrs, sizes), {input});
  terms.setOp(t, OperationName("ref.slice", ctx), attrs);
  return t;
}

TermId PieceComparison::Normalizer::concat(int dim, const Shape &shape, const std::vector<Weighted> &pieces,
                          Rational &f) {
  if (pieces.size() == 1) {
    f = pieces[0].second;
    return pieces[0].first;
  }
  f = pieces[0].second;
  bool same = true;
  for (auto &p : pieces)
    same &= p.second == f;
  if (!same)
    f = Rational(1);
  std::vector<TermId> ts;
  for (auto &[t, g] : pieces)
    ts.push_back(terms.scaled(t, g / f));
  ++made;
  return terms.concat(concatHead(ctx, dim, shape), ts);
}

bool PieceComparison::Normalizer::piecesOf(TermId t, int &dim, std::vector<Weighted> &pieces) const {
  const TermPool::HeadData &h = terms.headData(t);
  if (!h.concat)
    return false;
  dim = (int)h.params[0];
  pieces = weightedOperands(terms, t);
  return true;
}

bool PieceComparison::Normalizer::cutUniform(TermId t, int dim, int64_t len, TermId &out) {
  Deeper guard(depth);
  if (depth > kMaxDepth)
    return false;
  Shape whole = terms.shapeOf(t);
  if (dim >= (int)whole.size())
    return false;
  Shape piece = whole;
  piece[dim] = len;
  std::vector<int64_t> dims;
  TermId source;
  Rational c;
  TermId u;
  if (terms.broadcastOf(t, dims, source)) { // copies along dim: fewer copies
    if (llvm::is_contained(dims, (int64_t)dim))
      return false;
    out = terms.broadcast(piece, dims, source);
    return true;
  }
  if (terms.scaleOf(t, c, u)) {
    if (!cutUniform(u, dim, len, out))
      return false;
    out = terms.scaled(out, c);
    return true;
  }
  // An elementwise op of such operands (of its shape): the op of their cuts.
  OperationName name("ref.slice", ctx);
  DictionaryAttr attrs;
  if (!terms.opOf(t, name, attrs) || !name.hasTrait<OpTrait::Elementwise>())
    return false;
  std::vector<Weighted> in;
  for (TermId v : terms.operands(t)) {
    if (terms.shapeOf(v) != whole || !cutUniform(v, dim, len, out))
      return false;
    in.push_back({out, Rational(1)});
  }
  Weighted w = rebuild(name, attrs, piece, in);
  out = terms.scaled(w.first, w.second);
  return true;
}

bool PieceComparison::Normalizer::cutCopies(TermId t, int dim, const std::vector<Weighted> &like,
                                            std::vector<Weighted> &out) {
  std::vector<int64_t> dims;
  TermId source;
  if (!terms.broadcastOf(t, dims, source) || llvm::is_contained(dims, (int64_t)dim))
    return false;
  Shape whole = terms.shapeOf(t);
  if (dim >= (int)whole.size())
    return false;
  out.clear();
  for (auto &p : like) {
    Shape piece = whole;
    piece[dim] = terms.shapeOf(p.first)[dim];
    out.push_back({terms.broadcast(piece, dims, source), Rational(1)});
  }
  return true;
}

int PieceComparison::Normalizer::pieceAlike(const std::vector<Weighted> &xs,
                                            std::vector<std::vector<Weighted>> &parts) {
  parts.assign(xs.size(), {});
  std::vector<int> dims(xs.size(), -1);
  size_t lead = xs.size();
  for (size_t i = 0; i < xs.size(); ++i)
    if (piecesOf(xs[i].first, dims[i], parts[i]) && lead == xs.size())
      lead = i;
  if (lead == xs.size())
    return -1;
  int d = dims[lead];
  std::vector<std::vector<Weighted> *> all;
  for (size_t i = 0; i < xs.size(); ++i) {
    if (dims[i] < 0 && cutCopies(xs[i].first, d, parts[lead], parts[i]))
      dims[i] = d;
    if (dims[i] != d)
      return -1;
    all.push_back(&parts[i]);
  }
  if (!align(all, d))
    return -1;
  for (auto &ps : parts) {
    if (ps.size() != parts[lead].size())
      return -1;
    for (size_t k = 0; k < ps.size(); ++k)
      if (terms.shapeOf(ps[k].first)[d] != terms.shapeOf(parts[lead][k].first)[d])
        return -1;
  }
  return d;
}

bool PieceComparison::Normalizer::swapConcat(int dim, const Shape &shape,
                                             const std::vector<Weighted> &operands, Weighted &out) {
  // concat_dim(concat_d(a_k), concat_d(b_k), ...) = concat_d(concat_dim(a_k, b_k, ...))
  // for d != dim, where the operands are pieced alike along d.
  std::vector<std::vector<Weighted>> parts;
  int d = pieceAlike(operands, parts);
  if (d < 0 || d == dim)
    return false;
  std::vector<Weighted> pieces;
  for (size_t k = 0; k < parts[0].size(); ++k) {
    std::vector<Weighted> row;
    Shape s = shape;
    s[d] = terms.shapeOf(parts[0][k].first)[d];
    for (size_t i = 0; i < parts.size(); ++i)
      row.push_back({parts[i][k].first, parts[i][k].second * operands[i].second});
    Weighted w;
    w.first = concat(dim, s, row, w.second);
    pieces.push_back(w);
  }
  out.first = concat(d, shape, pieces, out.second);
  return true;
}

Weighted PieceComparison::Normalizer::sumOf(const Shape &shape, const std::vector<Weighted> &summands) {
  ++made;
  // Summands that are all one view of their operands -- transposes by one permutation,
  // or reshapes from one shape -- are that view of the operands' sum (the views are
  // linear): microbatches' gradients summed after XLA's transposes meet the whole
  // batch's transposed sum.
  if (summands.size() >= 2) {
    OperationName view("ref.add", ctx);
    DictionaryAttr viewAttrs;
    Shape from;
    std::vector<Weighted> inner;
    for (const auto &[t, g] : summands) {
      Rational c(1);
      TermId v = t;
      if (!terms.scaleOf(t, c, v))
        v = t;
      OperationName name("ref.add", ctx);
      DictionaryAttr attrs;
      if (terms.operands(v).size() != 1 || !terms.opOf(v, name, attrs) ||
          (name.getStringRef() != "ref.transpose" && name.getStringRef() != "ref.reshape"))
        break;
      TermId src = terms.operands(v)[0];
      if (inner.empty()) {
        view = name;
        viewAttrs = attrs;
        from = terms.shapeOf(src);
      } else if (name != view || attrs != viewAttrs || terms.shapeOf(src) != from) {
        break;
      }
      inner.push_back({src, c * g});
    }
    if (inner.size() == summands.size())
      return rebuild(view, viewAttrs, shape, {sumOf(from, inner)});
  }
  return terms.sum(terms.head(OperationName("ref.add", ctx), DictionaryAttr::get(ctx), shape),
                   summands);
}

/// The node of op `name` over `in` (normalized operands with factors), with factors
/// taken out as the rules do: a product of them for a multilinear op, the operand's
/// for a linear op of one operand, else inside as scale nodes.
Weighted PieceComparison::Normalizer::rebuild(OperationName name, DictionaryAttr attrs, const Shape &shape,
                             const std::vector<Weighted> &in) {
  ++made;
  // A transpose that only moves dimensions of size 1 is a reshape, in the form the
  // rules give it (NormalForm.cpp, layoutNormalForm): a microbatch of one row transposed.
  if (auto perm = attrs ? attrs.getAs<DenseI64ArrayAttr>("perm") : DenseI64ArrayAttr();
      name.getStringRef() == "ref.transpose" && in.size() == 1 && perm) {
    Shape src = terms.shapeOf(in[0].first);
    int64_t last = -1;
    bool units = perm.size() == (int64_t)src.size();
    for (int64_t p : perm.asArrayRef()) {
      if (!units || p < 0 || p >= (int64_t)src.size())
        units = false;
      else if (src[p] != 1)
        units = p > last && (last = p, true);
    }
    if (units)
      return {src == shape ? in[0].first : terms.reshaped(in[0].first, shape, ctx), in[0].second};
  }
  std::vector<TermId> ts;
  Rational f(1);
  bool multilinear = name.hasTrait<ref::OpTrait::Multilinear>();
  bool linear1 = name.hasTrait<ref::OpTrait::Linear>() && in.size() == 1;
  // An op linear in an operand with the others fixed (NonlinearOp's clear bits) takes
  // that operand's factor out, as Rules.cpp's combine does.
  unsigned nonlinear = ~0u;
  if (auto *c = name.getInterface<ref::NonlinearOp>())
    nonlinear = c->getNonlinearOperands();
  for (size_t i = 0; i < in.size(); ++i) {
    auto &[t, g] = in[i];
    if (multilinear || linear1 || (i < 32 && !((nonlinear >> i) & 1))) {
      f = f * g;
      ts.push_back(t);
    } else {
      ts.push_back(terms.scaled(t, g));
    }
  }
  TermId t = terms.node(terms.head(name, attrs, shape), ts);
  terms.setOp(t, name, attrs);
  return {t, f};
}

/// One of the identities of the file comment, where it applies to `in`.

bool PieceComparison::Normalizer::sliceOfConcat(TermId input, const std::vector<int64_t> &offsets,
                                               const std::vector<int64_t> &sizes,
                                               Weighted &out) {
  Weighted x = norm(input);
  int d = -1;
  std::vector<Weighted> parts;
  if (!piecesOf(x.first, d, parts))
    return false;
  Shape whole = terms.shapeOf(x.first);
  for (size_t k = 0; k < whole.size(); ++k)
    if ((int)k != d && (offsets[k] != 0 || sizes[k] != whole[k]))
      return false;
  std::vector<Weighted> taken;
  int64_t at = 0;
  for (auto &p : parts) {
    int64_t len = terms.shapeOf(p.first)[d];
    TermId part;
    if (at >= offsets[d] && at + len <= offsets[d] + sizes[d])
      taken.push_back({p.first, p.second * x.second});
    else if (at < offsets[d] + sizes[d] && at + len > offsets[d]) {
      // The window cuts a piece: only one that is the same along d everywhere.
      int64_t lo = std::max(at, offsets[d]), hi = std::min(at + len, offsets[d] + sizes[d]);
      if (!cutUniform(p.first, d, hi - lo, part))
        return false;
      taken.push_back({part, p.second * x.second});
    }
    at += len;
  }
  if (taken.empty())
    return false;
  Shape shape(sizes.begin(), sizes.end());
  out.first = concat(d, shape, taken, out.second);
  return true;
}

bool PieceComparison::Normalizer::align(std::vector<std::vector<Weighted> *> parts, int dim) {
  std::vector<std::pair<std::vector<Weighted> *, int>> each;
  for (auto *ps : parts)
    each.push_back({ps, dim});
  return align(each);
}

bool PieceComparison::Normalizer::align(
    const std::vector<std::pair<std::vector<Weighted> *, int>> &parts) {
  std::set<int64_t> cutsAt;
  int64_t total = -1;
  for (auto [ps, dim] : parts) {
    int64_t at = 0;
    for (auto &p : *ps) {
      Shape sh = terms.shapeOf(p.first);
      if ((int)sh.size() <= dim)
        return false;
      at += sh[dim];
      cutsAt.insert(at);
    }
    if (total >= 0 && at != total)
      return false;
    total = at;
  }
  for (auto [ps, dim] : parts) {
    std::vector<Weighted> out;
    int64_t at = 0;
    for (auto &p : *ps) {
      Shape sh = terms.shapeOf(p.first);
      int64_t end = at + sh[dim];
      auto first = cutsAt.upper_bound(at);
      if (*first >= end) { // no boundary inside
        out.push_back(p);
        at = end;
        continue;
      }
      if (!terms.uniformBroadcast(p.first))
        return false;
      TermId source = terms.operands(p.first)[0];
      for (int64_t from = at; from < end;) {
        int64_t to = *cutsAt.upper_bound(from);
        Shape piece = sh;
        piece[dim] = to - from;
        out.push_back({terms.broadcast(piece, {}, source), p.second});
        from = to;
      }
      at = end;
    }
    *ps = std::move(out);
  }
  return true;
}

bool PieceComparison::Normalizer::prefix(const Weighted &x, int dim, int64_t count,
                                        Weighted &out) {
  int d = -1;
  std::vector<Weighted> parts;
  if (!piecesOf(x.first, d, parts) || d != dim)
    return false;
  std::vector<Weighted> head;
  int64_t at = 0;
  for (auto &p : parts) {
    if (at == count)
      break;
    Shape s = terms.shapeOf(p.first);
    if ((int)s.size() <= dim)
      return false;
    at += s[dim];
    head.push_back({p.first, p.second * x.second});
  }
  if (at != count)
    return false;
  Shape shape = terms.shapeOf(x.first);
  shape[dim] = count;
  out.first = concat(dim, shape, head, out.second);
  return true;
}

/// A sum: its normalized summands; concatenations alike become the concatenation of
/// the pieces' sums.
Weighted PieceComparison::Normalizer::normSum(TermId t) {
  Weighted out{t, Rational(1)};
  Shape shape = terms.shapeOf(t);
  std::vector<Weighted> summands;
  for (TermId s : terms.operands(t))
    summands.push_back(norm(s));
  // Concatenations alike: the concatenation of the pieces' sums.
  std::vector<std::vector<Weighted>> parts;
  int d = summands.empty() ? -1 : pieceAlike(summands, parts);
  if (d >= 0) {
    std::vector<Weighted> pieces;
    for (size_t k = 0; k < parts[0].size(); ++k) {
      std::vector<Weighted> each;
      for (size_t i = 0; i < summands.size(); ++i)
        each.push_back({parts[i][k].first, parts[i][k].second * summands[i].second});
      pieces.push_back(sumOf(terms.shapeOf(parts[0][k].first), each));
    }
    out.first = concat(d, shape, pieces, out.second);
  } else {
    out = sumOf(shape, summands);
  }
  return out;
}

/// A broadcast: of its normalized source; of pieces along a source dimension, the
/// pieces' broadcasts.
Weighted PieceComparison::Normalizer::normBroadcast(TermId t) {
  Weighted out{t, Rational(1)};
  std::vector<int64_t> dims = terms.headData(t).params;
  Weighted src = norm(terms.operands(t)[0]);
  int d = -1;
  std::vector<Weighted> parts;
  if (piecesOf(src.first, d, parts) && d < (int)dims.size()) {
    // A broadcast of pieces along a source dimension: the pieces' broadcasts.
    Shape whole = terms.shapeOf(t);
    int at = (int)dims[d];
    std::vector<Weighted> pieces;
    for (auto &p : parts) {
      Shape s = whole;
      s[at] = terms.shapeOf(p.first)[d];
      pieces.push_back({terms.broadcast(s, dims, p.first), p.second * src.second});
    }
    out.first = concat(at, whole, pieces, out.second);
  } else {
    out = {terms.broadcast(terms.shapeOf(t), dims, src.first), src.second};
  }
  return out;
}

/// A node with its op recorded: its operands normalized, then distributed over
/// pieces where an identity applies, else rebuilt.
Weighted PieceComparison::Normalizer::normOp(TermId t) {
  Weighted out{t, Rational(1)};
  OperationName name("ref.add", ctx);
  DictionaryAttr attrs;
  if (!terms.operands(t).empty() && terms.opOf(t, name, attrs)) {
    std::vector<Weighted> in;
    for (TermId v : terms.operands(t))
      in.push_back(norm(v));
    Shape shape = terms.shapeOf(t);
    if (name.getStringRef() == "ref.div" && in.size() == 2 &&
        terms.isOp<ref::AddOp>(in[0].first)) {
      // Division is linear in its numerator: a sum over the same denominator.
      std::vector<Weighted> each;
      for (TermId u : terms.operands(in[0].first)) {
        Rational c(1);
        TermId v = u;
        if (!terms.scaleOf(u, c, v))
          v = u;
        each.push_back(rebuild(name, attrs, shape, {{v, c * in[0].second}, in[1]}));
      }
      out = sumOf(shape, each);
    } else if (!distribute(terms.factorsOf(t), name, attrs, shape, in, out)) {
      out = rebuild(name, attrs, shape, in);
    }
  }
  return out;
}

Weighted PieceComparison::Normalizer::norm(TermId t) {
  if (auto it = memo.find(t); it != memo.end()) {
    used |= usedBy[t];
    return it->second;
  }
  // The rules used below t, kept with it (the memo's), then added to the caller's.
  uint32_t outer = used;
  used = 0;
  Weighted out = normUncached(t);
  usedBy[t] = used;
  used |= outer;
  return out;
}

Weighted PieceComparison::Normalizer::normUncached(TermId t) {
  Deeper guard(depth);
  if (depth > kMaxDepth)
    tooDeep = true;
  deadline.check("comparing terms by pieces");
  if (exhausted())
    return {t, Rational(1)};
  Weighted out{t, Rational(1)};
  Rational c;
  TermId u;
  TermId input;
  std::vector<int64_t> offsets, sizes;
  if (terms.scaleOf(t, c, u)) {
    out = norm(u);
    out.second = out.second * c;
  } else if (cuttable(t) && cuts.count(t)) {
    const Cut &cut = cuts[t];
    Shape whole = terms.shapeOf(t);
    std::vector<Weighted> pieces;
    for (auto it = cut.at.begin(); std::next(it) != cut.at.end(); ++it)
      pieces.push_back({slice(t, whole, cut.dim, *it, *std::next(it)), Rational(1)});
    out.first = concat(cut.dim, whole, pieces, out.second);
  } else if (sliceOf(t, input, offsets, sizes) && cuts.count(input) &&
             cutDim(terms.shapeOf(input), offsets, sizes) == cuts[input].dim) {
    const Cut &cut = cuts[input];
    Shape whole = terms.shapeOf(input);
    int d = cut.dim;
    std::vector<Weighted> pieces;
    for (auto it = cut.at.begin(); std::next(it) != cut.at.end(); ++it)
      if (*it >= offsets[d] && *std::next(it) <= offsets[d] + sizes[d])
        pieces.push_back({slice(input, whole, d, *it, *std::next(it)), Rational(1)});
    Shape shape(sizes.begin(), sizes.end());
    out.first = concat(d, shape, pieces, out.second);
  } else if (sliceOf(t, input, offsets, sizes) && sliceOfConcat(input, offsets, sizes, out)) {
    // A slice that takes whole pieces of a concatenation: those pieces.
  } else if (terms.isOp<ref::AddOp>(t)) {
    out = normSum(t);
  } else if (terms.kindIs(t, TermPool::HeadData::Broadcast)) { // linear in its source
    out = normBroadcast(t);
  } else if (terms.isConcat(t)) {
    int dim = -1;
    std::vector<Weighted> pieces;
    piecesOf(t, dim, pieces);
    for (auto &p : pieces) {
      Weighted w = norm(p.first);
      p = {w.first, w.second * p.second};
    }
    if (!swapConcat(dim, terms.shapeOf(t), pieces, out))
      out.first = concat(dim, terms.shapeOf(t), pieces, out.second);
  } else {
    out = normOp(t);
  }
  memo[t] = out;
  return out;
}

std::vector<std::string> PieceComparison::Normalizer::usedRules() const {
  static const char *names[] = {
      "pieces: an op on pieces of a pass-through factor, piece by piece",
      "pieces: an op on pieces of a counted factor, each piece weighed by its share",
      "pieces: an op on pieces of a summed factor, the sum of the pieces'",
      "pieces: an op on pieces of an averaged factor, the pieces' weighed by their shares",
      "pieces: an op on pieces of a maximized factor, the maximum of the pieces'",
      "pieces: a reshape of pieces along a dimension group's leading dimension",
      "pieces: a slice whole along the pieces",
      "pieces: a causal softmax with an offset, over pieces of a batch dimension",
  };
  std::vector<std::string> out;
  for (unsigned k = 0; k < sizeof(names) / sizeof(names[0]); ++k)
    if (used & (1u << k))
      out.push_back(names[k]);
  return out;
}

PieceComparison::PieceComparison(TermPool &terms, MLIRContext *ctx, const Deadline &deadline)
    : n(std::make_unique<Normalizer>(terms, ctx, deadline)) {}
PieceComparison::~PieceComparison() = default;

void PieceComparison::add(TermId t) { n->collect(t); }

bool PieceComparison::equal(TermId a, const Rational &fa, TermId b, const Rational &fb) {
  return equalPrefix(a, fa, b, fb, -1, 0);
}

bool PieceComparison::equalPrefix(TermId a, const Rational &fa, TermId b, const Rational &fb,
                                  int dim, int64_t count) {
  if (!settled) {
    n->settle();
    settled = true;
  }
  if (n->exhausted())
    return false;
  n->used = 0;
  Weighted x = n->norm(a), y = n->norm(b);
  lastRules = n->usedRules();
  Weighted head;
  if (dim >= 0 && !n->exhausted() && !n->prefix(x, dim, count, head))
    return false;
  if (dim >= 0)
    x = head;
  return !n->exhausted() && x.first == y.first && x.second * fa == y.second * fb;
}

std::string PieceComparison::scaling(TermId a, const Rational &fa, TermId b, const Rational &fb) {
  if (!settled) {
    n->settle();
    settled = true;
  }
  if (n->exhausted())
    return "";
  Weighted x = n->norm(a), y = n->norm(b);
  if (n->exhausted() || x.first != y.first || y.second * fb == Rational(0) ||
      x.second * fa == y.second * fb)
    return "";
  return "the plan computes " + (x.second * fa / (y.second * fb)).str() +
         " times the reference's value (compared microbatch by microbatch): a scaling is "
         "wrong -- a loss normalized by another count, or an average over other ranks";
}

} // namespace planproof::layouts
