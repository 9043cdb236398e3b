//===- Picks.cpp - sums over a one-hot's classes ------------------------------===//
//
// A one-hot of ids in [0, bound) over V >= bound classes has exactly one 1 in each row.
// So the sum over its classes of the one-hot times a value constant along the classes
// (a broadcast of a row value b) is b; and since a product with the one-hot distributes
// over a sum, the sum over the classes of one-hot x (A + sum_i c_i bcast(b_i)) is the
// sum over the classes of one-hot x A, plus sum_i c_i b_i. A cross-entropy picks the
// label's log-probability, x - max - log(sum exp): the single-device step picks from
// that difference, a vocabulary-parallel one (Megatron's, written by hand in JAX's
// shard_map) picks the label's logit and subtracts the rest itself; in this form both
// are pick(x) - max - log(sum exp), and the backward passes' row sums of one-hot
// cotangents likewise meet. Their totals, built in the frameworks' own shapes, meet
// written in one flat shape (sumOf). Stated once here, part of the terms' one normal
// form: applied to reference and plan alike by the reduction's term (NormalForm.cpp,
// layoutNormalForm), named in the proof trace where it applies (TermPool::applied);
// certified in LayoutEngineTest.
//
//===----------------------------------------------------------------------===//
#include "LayoutEngine/LayoutState.h"

#include "Ref/RefDialect.h"

#include <algorithm>

using namespace mlir;

namespace planproof::layouts {

namespace {

/// The weighted summands of `t` (a sum node's operands, scales taken out; else t).
std::vector<std::pair<TermId, Rational>> summandsOf(const TermPool &terms, TermId t) {
  if (!terms.isOp<ref::AddOp>(t))
    return {{t, Rational(1)}};
  return weightedOperands(terms, t);
}

/// `t`, a summand in shape `s` whose dims `cls` become the classes: where it is a
/// broadcast copying every class dim of more than one element and reading every other
/// such dim of `s`, in order, its value per row (its source as [rows]).
bool rowValue(TermPool &terms, Operation &op, TermId t, const Shape &s,
              const std::vector<bool> &cls, int64_t rows, TermId &row) {
  TermId source;
  std::vector<int64_t> dims;
  if (!terms.broadcastOf(t, dims, source) || !std::is_sorted(dims.begin(), dims.end()))
    return false;
  if (dims.empty()) {  // one value everywhere
    row = terms.broadcast({rows}, {}, source);
    return true;
  }
  for (size_t d = 0; d < s.size(); ++d) {
    bool read = std::find(dims.begin(), dims.end(), (int64_t)d) != dims.end();
    if (s[d] != 1 && read == (bool)cls[d])
      return false;  // a class dim read, or a row dim copied
  }
  Shape from = terms.shapeOf(source);
  int64_t n = 1;
  for (int64_t d : from)
    n *= d;
  if (n != rows)
    return false;
  row = reshapeTerm(terms, op, source, {rows});
  return true;
}

} // namespace

namespace {
constexpr const char *kPickRows =
    "picks: a one-hot's rows sum to 1 (over its classes, one-hot x a row value is the value)";

/// A bound of the integer values of `t` (each in [0, bound)): an input's, through
/// slices, reshapes and concatenations (which only move values); 0 where none is known.
int64_t idsBound(const TermPool &terms, TermId t) {
  if (terms.isLeaf(t))
    return terms.boundOf(t);
  if ((terms.isOp<ref::SliceOp>(t) || terms.isOp<ref::ReshapeOp>(t)) &&
      terms.operands(t).size() == 1)
    return idsBound(terms, terms.operands(t)[0]);
  if (!terms.isConcat(t) || terms.operands(t).empty())
    return 0;
  int64_t most = 0;
  for (TermId u : terms.operands(t)) {
    int64_t b = idsBound(terms, u);
    if (b <= 0)
      return 0;
    most = std::max(most, b);
  }
  return most;
}

/// `h` is a one-hot of ids with a bound, over at least that many classes, no offset;
/// or rows of such (each row still has one 1): a slice keeping every class, a
/// concatenation of such along the rows (a microbatch's or a rank's cut of one).
bool wholeOneHot(const TermPool &terms, TermId h) {
  TermId rows;
  std::vector<int64_t> offsets, sizes;
  if (sliceParts(terms, h, rows, offsets, sizes) && offsets.size() == 2 && offsets[1] == 0 &&
      terms.shapeOf(rows).size() == 2 && sizes[1] == terms.shapeOf(rows)[1])
    return wholeOneHot(terms, rows);
  if (int64_t dim; concatDim(terms, h, dim) && dim == 0 && !terms.operands(h).empty())
    return llvm::all_of(terms.operands(h), [&](TermId part) { return wholeOneHot(terms, part); });
  if (!terms.isOp<ref::OneHotOp>(h) || terms.operands(h).size() != 1)
    return false;
  Shape s = terms.shapeOf(h);
  int64_t b = idsBound(terms, terms.operands(h)[0]);
  return s.size() == 2 && b > 0 && b <= s[1];
}
} // namespace

std::vector<std::pair<TermId, Rational>> weightedOperands(const TermPool &terms, TermId t) {
  std::vector<std::pair<TermId, Rational>> out;
  for (TermId s : terms.operands(t)) {
    Rational c(1);
    TermId v = s;
    if (!terms.scaleOf(s, c, v))
      v = s;
    out.push_back({v, c});
  }
  return out;
}

bool pickedRows(TermPool &terms, Operation &op, TermId u, const std::vector<int64_t> &dims,
                const Shape &global, TermId &out, Rational &factor) {
  Shape us = terms.shapeOf(u);
  if (us.size() != 2 || std::find(dims.begin(), dims.end(), 1) == dims.end())
    return false;
  for (int64_t d : dims)
    if (d != 0 && d != 1)
      return false;
  if (wholeOneHot(terms, u)) {  // its row sums: ones
    terms.applied(kPickRows);
    TermId ones = terms.broadcast({us[0]}, {}, terms.one());
    factor = Rational(1);
    out = ones;
    if (std::find(dims.begin(), dims.end(), 0) != dims.end()) {
      out = terms.one();
      factor = Rational(us[0]);
    }
    return true;
  }
  if (!terms.isOp<ref::MulOp>(u) || terms.operands(u).size() != 2)
    return false;
  int k = -1;
  for (int i = 0; i < 2; ++i)
    if (wholeOneHot(terms, terms.operands(u)[i]))
      k = i;
  if (k < 0)
    return false;
  TermId oneHot = terms.operands(u)[k], y = terms.operands(u)[1 - k];
  // The other factor (or the operand of its reshape) as weighted summands, with the
  // dims of its shape that become the classes.
  TermId inner = y;
  bool reshaped = terms.isOp<ref::ReshapeOp>(y);
  if (reshaped)
    inner = terms.operands(y)[0];
  Shape is = terms.shapeOf(inner);
  std::vector<bool> cls(is.size(), false);
  if (!reshaped) {
    cls[1] = true;
  } else {
    std::vector<ReshapeGroup> groups;
    bool found = false;
    if (!reshapeGroups(is, us, groups))
      return false;
    for (const ReshapeGroup &g : groups)
      if (std::find(g.b.begin(), g.b.end(), 1) != g.b.end()) {
        if (g.b.size() != 1)
          return false;  // the classes merged with rows
        for (int64_t d : g.a)
          cls[d] = true;
        found = true;
      }
    if (!found)
      return false;
  }
  std::vector<std::pair<TermId, Rational>> rest, total;
  for (auto &[t, c] : summandsOf(terms, inner)) {
    TermId row;
    if (rowValue(terms, op, t, is, cls, us[0], row))
      total.push_back({row, c});
    else
      rest.push_back({t, c});
  }
  if (total.empty())
    return false;
  terms.applied(kPickRows);
  MLIRContext *ctx = op.getContext();
  if (!rest.empty()) {  // one-hot x the rest, summed over the classes
    auto [r, f] = rest.size() == 1 ? rest[0] : terms.sum(terms.key(inner), rest);
    TermId ry = reshaped ? reshapeTerm(terms, op, r, us) : r;
    TermId product = terms.node(terms.key(u), {oneHot, ry});
    // The op it is (u's: a product), for what reads terms as ops (Pieces.cpp rebuilds
    // a term's pieces by its op; a node without one stays whole there).
    OperationName name(ref::MulOp::getOperationName(), ctx);
    DictionaryAttr attrs;
    if (terms.opOf(u, name, attrs))
      terms.setOp(product, name, attrs);
    total.push_back({sumTerm(terms, op, product, {1}, {us[0]}), f});
  }
  auto [s, f] = terms.sum(terms.head(OperationName(ref::AddOp::getOperationName(), ctx),
                                     DictionaryAttr::get(ctx), {us[0]}),
                          total);
  factor = f;
  out = s;
  if (std::find(dims.begin(), dims.end(), 0) != dims.end()) {
    auto [t, g] = sumOf(terms, op, s, {0}, global);
    out = t;
    factor = f * g;
  }
  return true;
}

std::pair<TermId, Rational> sumOf(TermPool &terms, Operation &op, TermId u,
                                  const std::vector<int64_t> &dims, const Shape &global) {
  TermId t;
  Rational f;
  if (pickedRows(terms, op, u, dims, global, t, f))
    return {t, f};
  // Rows of a one-hot's product (a slice whole along the classes, a microbatch's cut
  // of a product over the batch): a sum over dimensions the slice keeps whole is the
  // slice of the sum over them, so the pick is written as above, then sliced; the sum
  // over the slice's other dimensions is taken of that. (Pieces of one product summed
  // over the rows they tile then meet the sum over all rows: TermPool::joinSlicedSums.)
  TermId v;
  std::vector<int64_t> offsets, sizes;
  if (sliceParts(terms, u, v, offsets, sizes)) {
    Shape vs = terms.shapeOf(v);
    std::vector<int64_t> whole, rest;
    bool valid = vs.size() == offsets.size() && vs.size() == sizes.size();
    for (int64_t d : dims) {
      valid &= d >= 0 && d < (int64_t)vs.size();
      if (valid)
        (offsets[d] == 0 && sizes[d] == vs[d] ? whole : rest).push_back(d);
    }
    // The shape of the sum over `whole`, and the slice and the rest's dims there.
    Shape inner;
    std::vector<int64_t> innerOffsets, innerSizes, innerRest;
    for (int64_t d = 0; valid && d < (int64_t)vs.size(); ++d) {
      if (llvm::is_contained(whole, d))
        continue;
      if (llvm::is_contained(rest, d))
        innerRest.push_back((int64_t)inner.size());
      inner.push_back(vs[d]);
      innerOffsets.push_back(offsets[d]);
      innerSizes.push_back(sizes[d]);
    }
    if (valid && !whole.empty() && pickedRows(terms, op, v, whole, inner, t, f)) {
      TermId rows = sliceTerm(terms, op.getContext(), t, inner, innerOffsets, innerSizes);
      if (innerRest.empty())
        return {rows, f};
      auto [s, g] = sumOf(terms, op, rows, innerRest, global);
      return {s, f * g};
    }
  }
  // Sums of reshapes and over unit dims written through the operands' (as sumTerm
  // does), so that a one-hot's sum under them is seen; the sum of all elements in one
  // shape (below). So a total reached through reshapes of the frameworks' choosing is
  // one term.
  Shape us = terms.shapeOf(u);
  // Over dimensions of one element only: the value, reshaped.
  bool units = !dims.empty();
  for (int64_t d : dims)
    units &= d >= 0 && d < (int64_t)us.size() && us[d] == 1;
  if (units)
    return {reshapeTerm(terms, op, u, global), Rational(1)};
  bool all = global.empty() && !us.empty() && dims.size() == us.size();
  for (size_t k = 0; all && k < dims.size(); ++k)
    all = std::count(dims.begin(), dims.end(), (int64_t)k) == 1;
  // Over whole groups of a reshape: the reshape of its operand's sum (as sumTerm), the
  // operand's sum taken here.
  std::vector<int64_t> inner;
  Shape kept;
  if (!all && reducedThroughReshape(terms, u, dims, inner, kept) && !inner.empty()) {
    auto [t, g] = sumOf(terms, op, terms.operands(u)[0], inner, kept);
    return {reshapeTerm(terms, op, t, global), g};
  }
  if (!all)
    return {sumTerm(terms, op, u, dims, global), Rational(1)};
  auto every = [&](TermId v) {
    std::vector<int64_t> d(terms.shapeOf(v).size());
    for (size_t k = 0; k < d.size(); ++k)
      d[k] = (int64_t)k;
    return d;
  };
  if (terms.isOp<ref::ReshapeOp>(u)) {
    TermId v = terms.operands(u)[0];
    return sumOf(terms, op, v, every(v), {});
  }
  // A sum with a reshaped summand: every summand reshaped to the flat shape (the sum
  // of all elements does not see the shape), so that sums built in two shapes of one
  // value -- a summand of the other shape arrives reshaped -- meet.
  if (!terms.isOp<ref::AddOp>(u) || us.size() == 1)
    return {sumTerm(terms, op, u, dims, global), Rational(1)};
  std::vector<std::pair<TermId, Rational>> parts = summandsOf(terms, u);
  if (llvm::none_of(parts, [&](const auto &p) { return terms.isOp<ref::ReshapeOp>(p.first); }))
    return {sumTerm(terms, op, u, dims, global), Rational(1)};
  int64_t n = 1;
  for (int64_t d : us)
    n *= d;
  std::vector<std::pair<TermId, Rational>> flat;
  for (auto &[v, c] : parts)
    flat.push_back({reshapeTerm(terms, op, v, {n}), c});
  MLIRContext *ctx = op.getContext();
  auto [whole, g] = terms.sum(terms.head(OperationName(ref::AddOp::getOperationName(), ctx),
                                         DictionaryAttr::get(ctx), {n}),
                              flat);
  return {sumTerm(terms, op, whole, {0}, global), g};
}

} // namespace planproof::layouts
