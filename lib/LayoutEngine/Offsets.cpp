//===- Offsets.cpp - ops whose rank-dependent offset names the rank's rows ---===//
//
// causal_softmax with a query chunk's global start, position_mask with each rank's
// query and key offsets, embedding and embedding_grad with a vocabulary shard's first
// row, one_hot with its shard's first class: each offset is a constant plus a linear function of the rank's coordinates
// (dist.axis_index arithmetic, Index.cpp), and each rule compares it with the window
// of rows the rank holds (Windows.cpp), coefficient by coefficient
// (docs/layout-engine.md, "Context parallelism: rows chosen per rank").
//
//===----------------------------------------------------------------------===//
#include "LayoutEngine/LayoutState.h"
#include "Support/Limits.h"

#include "Ref/RefDialect.h"

#include "mlir/IR/BuiltinTypes.h"

#include <algorithm>
#include <cstdlib>

using namespace mlir;

namespace planproof::layouts {

namespace {
/// The window an index offset names on a dimension of `length` local rows: its
/// constant part and rank coefficients; the dimension's axes, major (largest stride)
/// first, and the rows every rank's window reaches.
bool offsetWindow(RuleContext &c, const State &off, int64_t length, DimSplit &d,
                  int64_t &reach) {
  Window w;
  w.length = length;
  if (!indexConstant(c.terms, off, w.base))
    return false;
  w.coeff = off.rankCoeff;
  std::sort(w.coeff.begin(), w.coeff.end());
  int64_t lo = 0, hi = 0;
  if (!windowReach(c.mesh, w, lo, hi) || lo < 0)
    return false;
  auto byStride = w.coeff;
  std::sort(byStride.begin(), byStride.end(),
            [](const auto &a, const auto &b) { return std::abs(a.second) > std::abs(b.second); });
  d = DimSplit();
  for (auto [a, cf] : byStride)
    d.push_back(a);
  d.windows = {w};
  reach = hi;
  normalizeWindows(c.mesh, d, reach);
  return true;
}

} // namespace

/// causal_softmax with an offset on a rank's chunk of query rows: query i of the chunk
/// sees keys j <= offset + i. Where the rows are one window of the reference's rows
/// starting at row w(p) of every rank p, and the keys whole, the rank's rows are rows
/// w(p) .. of causal_softmax of the whole exactly when offset(p) = w(p) + (Sk - Sq),
/// the whole's own offset: both are linear in the coordinates, so they are compared
/// coefficient by coefficient.
State causalOffsetRule(RuleContext &c, Operation &op, const std::vector<const State *> &in) {
  const State &x = *in[0], &off = *in[1];
  if (!x.known)
    return x;
  if (!off.known)
    return off;
  size_t n = x.split.size();
  Shape local;
  if (n < 2 || !resultShape(op, local))
    return State::unknown(&op, "`ref.causal_softmax` needs queries and keys");
  if (!x.partial.empty() || !x.partialMax.empty())
    return State::unknown(&op, "operand #0 is a partial sum over " +
                                   axesText(c.mesh, x.partial) +
                                   " and `ref.causal_softmax` is not linear in it: it must be "
                                   "reduced first");
  if (!x.split[n - 1].empty() || !x.split[n - 1].windows.empty())
    return State::unknown(&op, "`ref.causal_softmax` on split keys (" + c.show(x) + ")");
  for (size_t d = 0; d + 2 < n; ++d)
    if (hasZero(x.split[d]))
      return State::unknown(&op, "`ref.causal_softmax` of rows of zeros");
  std::vector<Window> rows = windowsOf(c.mesh, x.split[n - 2], x.global[n - 2]);
  if (rows.size() != 1 || rows[0].zero)
    return State::unknown(&op, "`ref.causal_softmax` with one offset on each rank's rows, which "
                               "are not one run of the queries (" + c.show(x) + ")");
  int64_t k = 0;
  if (!indexConstant(c.terms, off, k))
    return State::unknown(&op, "the causal offset is not a constant plus a multiple of the "
                               "rank's coordinates");
  int64_t want = rows[0].base + (x.global[n - 1] - x.global[n - 2]);
  std::vector<std::pair<int, int64_t>> coeff = off.rankCoeff;
  std::sort(coeff.begin(), coeff.end());
  if (k != want || coeff != rows[0].coeff) {
    auto text = [&](int64_t base, const std::vector<std::pair<int, int64_t>> &cs) {
      std::string t = std::to_string(base);
      for (auto [a, cf] : cs)
        t += (cf < 0 ? " - " : " + ") + std::to_string(cf < 0 ? -cf : cf) + " x " +
             c.mesh.axes[a];
      return t;
    };
    return State::unknown(&op, "the causal offset is " + text(k, coeff) + " on each rank, but "
                               "must be " + text(want, rows[0].coeff) +
                               ": the position among the keys of the chunk's first query, the "
                               "whole's query " + text(rows[0].base, rows[0].coeff));
  }
  State out = freshResult(x);
  out.term = c.terms.node(c.terms.head(op.getName(), op.getAttrDictionary(), x.global),
                          {c.terms.scaled(x.term, x.factor)});
  c.terms.setOp(out.term, op.getName(), op.getAttrDictionary());
  out.factor = Rational(1);
  std::string why;
  if (!consistent(c, out, local, why))
    return State::unknown(&op, why);
  return out;
}

/// embedding with an offset (a vocabulary-parallel lookup): each rank looks up the ids
/// that fall in its rows of the table, zeros elsewhere. Where the offset is the start
/// of the rank's block of the table's rows and the blocks tile them, every id falls in
/// exactly one rank's block: summed over the table's axes, the lookup of the whole
/// table -- a partial sum of the reference's embedding.
State embeddingRule(RuleContext &c, Operation &op, const std::vector<const State *> &in) {
  const State &table = *in[0], &ids = *in[1], &off = *in[2];
  Shape local;
  if (!resultShape(op, local) || local.size() != 2 || table.split.size() != 2 ||
      ids.split.size() != 1)
    return State::unknown(&op, "`ref.embedding` needs a [rows, width] table and a vector of ids");
  if (!table.partial.empty() || !table.partialMax.empty() || !ids.partial.empty() ||
      hasZero(table) || hasZero(ids))
    return State::unknown(&op, "`ref.embedding` of a partial table or ids");
  DimSplit want;
  int64_t reach = 0;
  if (!offsetWindow(c, off, cast<RankedTensorType>(op.getOperand(0).getType()).getDimSize(0),
                    want, reach))
    return State::unknown(&op, "the embedding offset is not a constant plus a multiple of the "
                               "rank's coordinates");
  const DimSplit &rows = table.split[0];
  if (windowsOf(c.mesh, rows, table.global[0]) != windowsOf(c.mesh, want, table.global[0]) ||
      !tiles(c.mesh, rows, table.global[0]))
    return State::unknown(&op, "the embedding offset is not the first row of the rank's block "
                               "of the table (" + c.show(table) + ")");
  State out;
  out.known = true;
  out.split = {ids.split[0], table.split[1]};
  out.global = {ids.global[0], table.global[1]};
  out.partial = sortedUnion({}, rows);
  out.term = c.terms.node(c.terms.head(op.getName(), op.getAttrDictionary(), out.global),
                          {table.term, ids.term});
  out.factor = table.factor; // linear in it (NonlinearOp's clear bit), as combine keeps it
  c.terms.setOp(out.term, op.getName(), op.getAttrDictionary());
  std::string why;
  if (!consistent(c, out, local, why))
    return State::unknown(&op, why);
  return out;
}

/// one_hot with an offset (a vocabulary-parallel rank's labels): the rank's column j is
/// class offset + j, so it holds the window of columns its offset names of the one-hot
/// over every column the ranks' windows reach ([id == offset + j] is that one-hot's
/// element at column offset + j for every id, ids outside the columns included). Where
/// the reach is the reference's classes, the term is the reference's one-hot; where the
/// windows are blocks, the split is a plain one (normalizeWindows).
State oneHotRule(RuleContext &c, Operation &op, const std::vector<const State *> &in) {
  const State &ids = *in[0], &off = *in[1];
  Shape local;
  if (!resultShape(op, local) || local.size() != 2 || ids.split.size() != 1)
    return State::unknown(&op, "`ref.one_hot` needs [tokens] ids and a [tokens, classes] result");
  if (!ids.partial.empty() || !ids.partialMax.empty() || hasZero(ids))
    return State::unknown(&op, "`ref.one_hot` of partial ids");
  DimSplit cols;
  int64_t reach = 0;
  if (!offsetWindow(c, off, local[1], cols, reach))
    return State::unknown(&op, "the one-hot offset is not a constant plus a multiple of the "
                               "rank's coordinates, or it is negative on some rank");
  State out;
  out.known = true;
  out.split = {ids.split[0], cols};
  out.global = {ids.global[0], reach};
  out.term = c.terms.node(c.terms.head(op.getName(), op.getAttrDictionary(), out.global),
                          {c.terms.scaled(ids.term, ids.factor)});
  c.terms.setOp(out.term, op.getName(), op.getAttrDictionary());
  std::string why;
  if (!consistent(c, out, local, why))
    return State::unknown(&op, why);
  return out;
}

/// The reference's one_hot with a constant first class c (a class's column, `labels ==
/// PAD`): columns c .. c + w - 1 of the one-hot of c + w classes -- the term the plan's
/// one_hot with that offset on every rank has (oneHotRule), so the two meet.
bool referenceOneHot(RuleContext &c, Operation &op, const std::vector<const State *> &in,
                     State &out) {
  if (!isa<ref::OneHotOp>(op) || in.size() != 2 || !in[0]->known || !in[1]->known)
    return false;
  const State &ids = *in[0];
  Shape local;
  int64_t first = 0, reach = 0;
  if (!resultShape(op, local) || local.size() != 2 || ids.global.size() != 1 ||
      !in[1]->rankCoeff.empty() || !indexConstant(c.terms, *in[1], first) || first < 0 ||
      !checkedAdd(first, local[1], reach))
    return false;
  Shape whole = {local[0], reach};
  TermId all = c.terms.node(c.terms.head(op.getName(), op.getAttrDictionary(), whole),
                            {c.terms.scaled(ids.term, ids.factor)});
  c.terms.setOp(all, op.getName(), op.getAttrDictionary());
  out = State();
  out.known = true;
  out.global = local;
  out.split.assign(2, {});
  out.term = sliceTerm(c.terms, op.getContext(), all, whole, {0, first}, {local[0], local[1]});
  return true;
}

/// embedding_grad with an offset: rank row v gathers the gradients of the tokens whose
/// id is offset + v, so the rank holds the rows from its offset of the whole
/// scatter-add over its tokens -- the window the offset names, summed over the tokens'
/// axes.
State embeddingGradRule(RuleContext &c, Operation &op, const std::vector<const State *> &in) {
  const State &dx = *in[0], &ids = *in[1], &off = *in[2];
  Shape local;
  if (!resultShape(op, local) || local.size() != 2 || dx.split.size() != 2 ||
      ids.split.size() != 1)
    return State::unknown(&op, "`ref.embedding_grad` needs [tokens, width] gradients and ids");
  if (!dx.partial.empty() || !dx.partialMax.empty() || !ids.partial.empty() || hasZero(dx) ||
      hasZero(ids))
    return State::unknown(&op, "`ref.embedding_grad` of partial gradients or ids");
  if (dx.split[0] != ids.split[0] || dx.global[0] != ids.global[0] ||
      !tiles(c.mesh, dx.split[0], dx.global[0]))
    return State::unknown(&op, "its gradients' tokens and ids are laid out differently (" +
                               c.show(dx) + " and " + c.show(ids) + ")");
  State out;
  out.known = true;
  int64_t reach = 0;
  DimSplit rows;
  if (!offsetWindow(c, off, local[0], rows, reach))
    return State::unknown(&op, "the embedding offset is not a constant plus a multiple of the "
                               "rank's coordinates");
  out.split = {rows, dx.split[1]};
  out.global = {reach, dx.global[1]};
  out.partial = sortedUnion({}, dx.split[0]);
  out.term = c.terms.node(c.terms.head(op.getName(), op.getAttrDictionary(), out.global),
                          {dx.term, ids.term});
  out.factor = dx.factor; // linear in it (NonlinearOp's clear bit), as combine keeps it
  c.terms.setOp(out.term, op.getName(), op.getAttrDictionary());
  std::string why;
  if (!consistent(c, out, local, why))
    return State::unknown(&op, why);
  return out;
}

/// position_mask with offsets that differ from rank to rank: element [i, j] depends on
/// the positions q0 + i and k0 + j only, so the rank's mask is the window of rows q0(p)
/// .. and columns k0(p) .. of the mask with offsets 0 over the rows and columns every
/// rank's windows reach. Each offset is a constant plus a linear function of the
/// coordinates; the windows are that function (a plain split where they are its blocks).
State positionMaskRule(RuleContext &c, Operation &op, const std::vector<const State *> &in) {
  for (const State *s : in)
    if (!s->known)
      return *s;
  Shape local;
  if (!resultShape(op, local) || local.size() != 2)
    return State::unknown(&op, "`ref.position_mask` needs a [queries, keys] result");
  State out;
  out.known = true;
  out.split.assign(2, {});
  out.global.assign(2, 0);
  for (int d = 0; d < 2; ++d)
    if (!offsetWindow(c, *in[d], local[d], out.split[d], out.global[d]))
      return State::unknown(&op, "a mask offset that is not a constant plus a multiple of the "
                                 "rank's coordinates, or that is negative on some rank");
  TermId zero = c.terms.leaf("0", "index constant");
  out.term = c.terms.node(c.terms.head(op.getName(), op.getAttrDictionary(), out.global),
                          {zero, zero});
  c.terms.setOp(out.term, op.getName(), op.getAttrDictionary());
  std::string why;
  if (!consistent(c, out, local, why))
    return State::unknown(&op, why);
  return out;
}

} // namespace planproof::layouts
