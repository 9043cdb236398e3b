//===- Collectives.cpp - the layout engine's rules for collectives -------===//
//
// all_reduce, reduce_scatter, all_gather, all_to_all and shard_slice on states
// (docs/layout-engine.md). Each rule states its side conditions; a rule that cannot
// show them gives an unknown state saying which one fails.
//
//===----------------------------------------------------------------------===//
#include "LayoutEngine/LayoutState.h"

#include "Dist/DistDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"

#include <algorithm>

using namespace mlir;

namespace planproof::layouts {

namespace {

/// A sum or mean over the groups of `axes`: a partial sum over an axis is completed;
/// over an axis the value is replicated on, the sum counts it once per rank.
bool reduceOver(RuleContext &c, State &s, const std::vector<int> &axes, StringRef kind,
                std::string &why) {
  if (intersects(axes, s.splitAxes())) {
    why = "it reduces over " + axesText(c.mesh, axes) + ", which split its operand (" +
          c.show(s) + "): the ranks it sums hold different blocks";
    return false;
  }
  if (kind == "max") {
    if (intersects(axes, s.partial)) {
      why = "a max over ranks of a partial sum is not the max of the sum";
      return false;
    }
    return true; // the max of equal values
  }
  std::vector<int> rest;
  for (int a : s.partial)
    if (std::find(axes.begin(), axes.end(), a) == axes.end())
      rest.push_back(a);
  for (int a : axes)
    if (std::find(s.partial.begin(), s.partial.end(), a) == s.partial.end())
      s.factor = s.factor * Rational(c.mesh.shape[a]);
  s.partial = rest;
  if (kind == "avg")
    s.factor = s.factor / Rational(c.size(axes));
  else if (kind != "sum") {
    why = "unknown reduction '" + kind.str() + "'";
    return false;
  }
  return true;
}

/// Dimension d gains `axes` as its minor ones (reduce_scatter, shard_slice): plain
/// blocks, or zigzag chunks of the block it had.
bool scatterDim(RuleContext &c, const State &s, DimSplit &d, int64_t global,
                const std::vector<int> &axes, bool zigzag, std::string &why) {
  if (!d.windows.empty() && !zigzag) // rows chosen per rank: each keeps a part of them
    return scatterWindows(c.mesh, d, global, axes, why);
  if (!d.windows.empty()) {
    why = "it splits a dimension whose rows are already chosen per rank (" + c.show(s) + ")";
    return false;
  }
  d.insert(d.end(), axes.begin(), axes.end());
  if (!zigzag)
    return true;
  d.windows = zigzagWindows(c.mesh, d, global);
  if (d.windows.empty())
    why = "the zigzag chunks do not divide the dimension";
  return !d.windows.empty();
}

/// Dimension `dim` of s, whose blocks over `axes` go back where a split took them from
/// (all_gather, shard_pad): `axes` must be its minor axes, and its rows the blocks the
/// op assumes (zigzag or plain).
bool unsplitDim(RuleContext &c, State &s, int64_t dim, const std::vector<int> &axes,
                bool zigzag, const char *verb, std::string &why) {
  auto &d = s.split[dim];
  if (d.size() < axes.size() || !std::equal(axes.begin(), axes.end(), d.end() - axes.size())) {
    why = std::string("it ") + verb + " dim " + std::to_string(dim) + " over " +
          axesText(c.mesh, axes) + ", which are not the minor axes splitting that dimension (" +
          c.show(s) + ")";
    return false;
  }
  std::vector<Window> assumed =
      zigzag ? zigzagWindows(c.mesh, d, s.global[dim]) : std::vector<Window>();
  if (d.windows != assumed) {
    why = std::string("it ") + verb + " dim " + std::to_string(dim) +
          (zigzag ? " in zigzag chunk order" : " in rank order") +
          ", and its operand's rows are laid out otherwise (" + c.show(s) + ")";
    return false;
  }
  d.resize(d.size() - axes.size());
  d.windows.clear();
  return true;
}

/// `s` named by the opaque stack term `head` (its parameters; the global shape is
/// appended) of its term.
void nameStack(RuleContext &c, State &s, std::string head) {
  head += "}:";
  for (int64_t g : s.global)
    head += std::to_string(g) + "x";
  s.term = c.terms.node(head, {s.term});
  s.broadcast = false;
  s.sourceDims.clear();
}

/// all_gather along dim e of a value split over `axes` -- exactly those, in that
/// order -- along another dimension d, e whole: rank k of the group holds block k of d,
/// and every rank receives the blocks side by side along e. Its value is the
/// concatenation along e of the term's slices of d in group order (split elsewhere as
/// it was): the stacked gather a sequence-parallel norm makes before a reshape. With e
/// split over other axes (plain blocks), each rank receives its block of each piece:
/// e laid out in windows (stackedWindows). DTensor gathers a feature dimension so.
bool stackGather(RuleContext &c, MLIRContext *ctx, State &s, int64_t e,
                 const std::vector<int> &axes, std::string &why) {
  int64_t d = -1;
  for (size_t k = 0; k < s.split.size(); ++k) {
    const DimSplit &ks = s.split[k];
    if ((int64_t)k != e && ks.windows.empty() && ks.size() >= axes.size() &&
        std::equal(axes.begin(), axes.end(), ks.end() - axes.size()))
      d = (int64_t)k;
  }
  if (d < 0 || axes.empty() || !s.split[e].windows.empty() || intersects(axes, s.partial) ||
      intersects(axes, s.split[e]))
    return false;
  int64_t n = c.size(axes);
  if (s.split[d].size() > axes.size() && !s.split[e].empty())
    return false;
  if (s.split[d].size() > axes.size()) {
    // Split over more axes B before them: the blocks stacked differ with the rank's
    // coordinates on B. The value is named by a `stack` term of the operand's (which no
    // reference computes); a slice of one piece reads it back (stackSlice).
    std::string head = "stack{" + std::to_string(e) + ";" + std::to_string(d) + ";";
    for (int a : axes)
      head += std::to_string(a) + ",";
    s.split[d].resize(s.split[d].size() - axes.size());
    s.global[d] /= n;
    s.global[e] *= n;
    nameStack(c, s, head);
    why.clear();
    return true;
  }
  int64_t rows = s.global[d] / n;
  std::vector<TermId> pieces;
  for (int64_t k = 0; k < n; ++k) {
    std::vector<int64_t> offsets(s.global.size(), 0), sizes = s.global;
    offsets[d] = k * rows;
    sizes[d] = rows;
    pieces.push_back(sliceTerm(c.terms, ctx, s.term, s.global, offsets, sizes));
  }
  Shape global = s.global;
  global[d] = rows;
  global[e] *= n;
  if (!s.split[e].empty()) {
    // e split over other axes S: every rank receives its S-block of each piece, one
    // after the other (Stacks.cpp) -- windows.
    s.split[e].windows = stackedWindows(c.mesh, s.split[e], s.global[e], n);
    if (s.split[e].windows.empty())
      return false;
    normalizeWindows(c.mesh, s.split[e], global[e]);
  }
  s.term = joinedConcat(c.terms, ctx, concatHead(ctx, e, global), pieces);
  s.global = global;
  s.split[d].clear();
  s.broadcast = false;
  s.sourceDims.clear();
  why.clear();
  return true;
}

/// all_gather along dim e (whole) over axes A of a value split along another dim d over
/// the axes of A that split it -- the minor axes of d's split, in A's order -- and
/// replicated over the rest of A: piece k of the stack (k's digits the coordinates on
/// A, in A's order) is the block of d of the ranks with those coordinates. XLA writes a
/// device permutation so: such a gather, then a shard_slice in another order of A
/// (permutedPick). The value is named by a `gstack` term of the operand's, which records
/// e, d and A with the axes that split d; no reference computes it.
bool permutingGather(RuleContext &c, State &s, int64_t e, const std::vector<int> &axes) {
  if (axes.empty() || e < 0 || e >= (int64_t)s.split.size() || !s.split[e].empty() ||
      !s.split[e].windows.empty() || intersects(axes, s.partial) || !s.partialMax.empty())
    return false;
  for (int64_t d = 0; d < (int64_t)s.split.size(); ++d) {
    DimSplit &ds = s.split[d];
    std::vector<int> splitting;
    for (int a : axes)
      if (std::find(ds.begin(), ds.end(), a) != ds.end())
        splitting.push_back(a);
    if (d == e || splitting.empty() || !ds.windows.empty() ||
        !std::equal(splitting.begin(), splitting.end(), ds.end() - splitting.size()))
      continue;
    // Every other axis of A replicates the value.
    for (int a : axes)
      if (std::find(splitting.begin(), splitting.end(), a) == splitting.end() &&
          (intersects({a}, s.splitAxes()) || !s.rankCoeff.empty()))
        return false;
    std::string head = "gstack{" + std::to_string(e) + ";" + std::to_string(d) + ";";
    for (int a : axes)
      head += std::to_string(a) +
              (std::find(splitting.begin(), splitting.end(), a) != splitting.end() ? "s," : "r,");
    ds.resize(ds.size() - splitting.size());
    s.global[d] /= c.size(splitting);
    s.global[e] *= c.size(axes);
    nameStack(c, s, head);
    return true;
  }
  return false;
}

/// shard_slice along e over axes B of a `gstack` over A (permutingGather), B a
/// permutation of A with the same size at each position: the rank at coordinates c picks
/// piece k = c's coordinates on B in B's order, whose digits in A's order are the same
/// numbers -- A's i-th coordinate of the piece's ranks is c's on B's i-th axis. So the
/// rank holds the block of d of the ranks whose coordinate on each splitting axis A_i is
/// its own on B_i: d split over its major axes, then B_i for each A_i that split it.
bool permutedPick(RuleContext &c, State &s, int64_t e, const std::vector<int> &b) {
  const TermPool::HeadData &h = c.terms.headData(s.term);
  if (h.kind != TermPool::HeadData::GatherStack || h.params[0] != e)
    return false;
  int64_t d = h.params[1];
  std::vector<int> a;
  std::vector<bool> splits;
  for (size_t i = 2; i < h.params.size(); ++i) {
    a.push_back((int)(h.params[i] / 2));
    splits.push_back(h.params[i] % 2 == 1);
  }
  std::vector<int> sortedA = a, sortedB = b;
  std::sort(sortedA.begin(), sortedA.end());
  std::sort(sortedB.begin(), sortedB.end());
  if (a.size() != b.size() || sortedA != sortedB || d < 0 || d >= (int64_t)s.split.size() ||
      intersects(b, s.partial))
    return false;
  std::vector<int> mapped;
  for (size_t i = 0; i < a.size(); ++i) {
    if (c.mesh.shape[a[i]] != c.mesh.shape[b[i]])
      return false;
    if (splits[i])
      mapped.push_back(b[i]);
  }
  DimSplit ds = s.split[d];
  for (int x : mapped)
    if (intersects({x}, s.splitAxes()))
      return false;
  ds.insert(ds.end(), mapped.begin(), mapped.end());
  s.split[d] = ds;
  s.global[d] *= c.size(mapped);
  s.global[e] /= c.size(a);
  s.term = c.terms.operands(s.term)[0];
  return true;
}

/// The converse, after a split of dimension e over `axes` alone (reduce_scatter,
/// shard_slice): where the term is the concatenation along e of a term y's blocks of
/// another dimension d in group order, rank k holds y's block k of d -- the state of y
/// split along d.
void unstack(RuleContext &c, State &s, int64_t e, const std::vector<int> &axes) {
  if (static_cast<const std::vector<int> &>(s.split[e]) != axes || !s.split[e].windows.empty())
    return;
  TermId y = 0;
  int64_t d = -1;
  Shape whole;
  if (!blocksStacked(c.terms, s.term, e, c.size(axes), y, d, whole) ||
      whole.size() != s.global.size() || whole[e] * c.size(axes) != s.global[e] ||
      !s.split[d].empty() || !s.split[d].windows.empty())
    return;
  s.term = y;
  s.global = whole;
  s.split[d].assign(axes.begin(), axes.end());
  s.split[e].clear();
}

/// After a split (reduce_scatter, shard_slice): a reshape of y whose blocks are those
/// of a split of y itself (placedAs, each rank's block of local shape `local`) is
/// described as y so split. A stack of a batch's single rows concatenated along it
/// (concatOfUnitSlices) is the reshape of the value; split over the pieces' axes, it is
/// the value split along the pieces' dimension, as the reference holds it.
void unreshape(RuleContext &c, Operation &op, State &s, const Shape &local) {
  if (!s.known || !c.terms.isOp<ref::ReshapeOp>(s.term))
    return;
  State moved;
  if (placedAs(c, op, s, c.terms.shapeOf(c.terms.operands(s.term)[0]), moved, &local))
    s = std::move(moved);
}

} // namespace

State stackSlice(RuleContext &c, Operation &op, const State &in) {
  // stack{e;d;A}(x): along e, the group's n pieces; piece k on the rank at coordinates b
  // of d's other axes B is x's rows [(b n + k) L, + L) of d, L its local rows. A slice of
  // piece k is x with d laid out as that window: base k L, coefficient n L times b's
  // place in B's blocks.
  const TermPool::HeadData &h = c.terms.headData(in.term);
  if (h.kind != TermPool::HeadData::Stack)
    return State::unknown(&op, "no layout rule for this slice of a stacked gather");
  int64_t e = h.params[0], d = h.params[1];
  std::vector<int> axes(h.params.begin() + 2, h.params.end());
  auto slice = cast<ref::SliceOp>(op);
  auto inType = cast<RankedTensorType>(slice.getInput().getType());
  ArrayRef<int64_t> off = slice.getOffsets(), size = slice.getSizes(), local = inType.getShape();
  int64_t n = c.size(axes), rank = (int64_t)local.size();
  if (e < 0 || d < 0 || e >= rank || d >= rank || n <= 0 || local[e] % n != 0 ||
      (int64_t)off.size() != rank || (int64_t)size.size() != rank)
    return State::unknown(&op, "no layout rule for this slice of a stacked gather");
  int64_t piece = local[e] / n, k = off[e] / piece;
  bool onePiece = off[e] % piece == 0 && size[e] == piece;
  for (int64_t x = 0; x < rank; ++x)
    onePiece &= x == e || (off[x] == 0 && size[x] == local[x]);
  if (!onePiece)
    return State::unknown(&op, "a slice of a stacked gather that is not one rank's piece");
  State out = in;
  out.term = c.terms.operands(in.term)[0];
  int64_t rows = local[d];
  out.global[e] = piece;
  out.global[d] = in.global[d] * n;
  Window w;
  w.length = rows;
  w.base = k * rows;
  int64_t stride = n * rows;
  const DimSplit &major = in.split[d];
  for (size_t j = major.size(); j-- > 0;) {
    w.coeff.push_back({major[j], stride});
    stride *= c.mesh.shape[major[j]];
  }
  std::sort(w.coeff.begin(), w.coeff.end());
  out.split[d].windows = {w};
  normalizeWindows(c.mesh, out.split[d], out.global[d]);
  Shape result;
  std::string why;
  if (!resultShape(op, result) || !consistent(c, out, result, why))
    return State::unknown(&op, why.empty() ? "the slice's result type" : why);
  return out;
}

static State selectOnRule(RuleContext &c, dist::SelectOnOp op, const std::vector<const State *> &in) {
  // `when` on the ranks at the given coordinates, zeros elsewhere: in each group of the
  // named axes exactly one rank holds `when`, so the sum over the group is `when` -- a
  // partial sum over those axes (a bias added once before a sum all_reduce).
  const State &when = *in[0], &otherwise = *in[1];
  if (!isa<RankedTensorType>(op.getType()) || !when.rankCoeff.empty())
    return State::unknown(op, "no layout rule for `dist.select_on` of this type");
  if (!otherwise.factor.isZero() || !otherwise.partialMax.empty())
    return State::unknown(op, "`dist.select_on` of a value and another that is not zero");
  std::vector<int> axes;
  for (NamedAttribute a : op.getOn()) {
    int axis = c.mesh.axisIndex(a.getName().str());
    auto coord = dyn_cast<IntegerAttr>(a.getValue());
    if (axis < 0 || !coord || coord.getInt() < 0 || coord.getInt() >= c.mesh.shape[axis])
      return State::unknown(op, "a coordinate the mesh does not have");
    if (c.mesh.shape[axis] > 1)
      axes.push_back(axis);
  }
  std::sort(axes.begin(), axes.end());
  if (intersects(axes, when.splitAxes()) || intersects(axes, when.partial) ||
      !when.partialMax.empty())
    return State::unknown(op, "`dist.select_on` over axes its value is split or partial over (" +
                                  c.show(when) + ")");
  State out = when;
  out.partial = sortedUnion(out.partial, axes);
  out.broadcast = false;
  out.sourceDims.clear();
  return out;
}

/// all_to_all with split_dim = concat_dim = d: the rank at position q of the group
/// receives block q (of n) of every member p's block, concatenated in group order.
/// Where the group's axes are the minor axes splitting d in plain blocks of L rows,
/// member p's block starts p x L after its outer axes' offset, so rank q holds n
/// windows: window p is L/n rows from p x L + q x L/n (+ the outer axes' offset, as
/// before). (XLA re-lays a data-parallel batch's ids out as microbatches this way.)
static bool exchangeOneDim(RuleContext &c, State &s, int64_t d, const std::vector<int> &axes,
                           std::string &why) {
  DimSplit &ds = s.split[d];
  if (!ds.windows.empty() || intersects(axes, s.partial) || s.broadcast ||
      ds.size() < axes.size() || !std::equal(axes.begin(), axes.end(), ds.end() - axes.size())) {
    why = "it exchanges blocks of dim " + std::to_string(d) + " over " + axesText(c.mesh, axes) +
          ", which are not the minor axes splitting it in plain blocks (" + c.show(s) + ")";
    return false;
  }
  std::vector<Window> plain = plainWindows(c.mesh, ds, s.global[d]);
  int64_t n = c.mesh.groupSize(axes);
  if (plain.size() != 1 || n < 1 || plain[0].length % n != 0) {
    why = "the blocks of dim " + std::to_string(d) + " do not divide by the group's " +
          std::to_string(n) + " ranks";
    return false;
  }
  int64_t L = plain[0].length, piece = L / n;
  Window w;
  w.length = piece;
  int64_t post = 1;  // the axis's stride in group positions
  for (size_t k = axes.size(); k-- > 0;) {
    w.coeff.push_back({axes[k], piece * post});
    post *= c.mesh.shape[axes[k]];
  }
  for (auto [a, cf] : plain[0].coeff)
    if (std::find(axes.begin(), axes.end(), a) == axes.end())
      w.coeff.push_back({a, cf});
  std::sort(w.coeff.begin(), w.coeff.end());
  std::vector<Window> ws;
  for (int64_t p = 0; p < n; ++p) {
    w.base = p * L;
    ws.push_back(w);
  }
  ds.windows = ws;
  normalizeWindows(c.mesh, ds, s.global[d]);
  return true;
}

static State collectiveRuleOnce(RuleContext &c, Operation &op, const std::vector<const State *> &in);

State collectiveRule(RuleContext &c, Operation &op, const std::vector<const State *> &in) {
  State out = collectiveRuleOnce(c, op, in);
  // An operand whose windows are the blocks of a run (a microbatch of an exchanged
  // batch) may meet the rule as the blocks of the term's slice.
  if (out.known || in.size() != 1)
    return out;
  State conv = *in[0];
  if (!runsAsSlices(c, op, conv))
    return out;
  State again = collectiveRuleOnce(c, op, {&conv});
  return again.known ? again : out;
}

static State collectiveRuleOnce(RuleContext &c, Operation &op, const std::vector<const State *> &in) {
  if (auto sel = dyn_cast<dist::SelectOnOp>(op))
    return selectOnRule(c, sel, in);
  auto coll = dyn_cast<dist::CollectiveOp>(&op);
  Shape local;
  if (!coll || in.size() != 1 || !resultShape(op, local))
    return State::unknown(&op, "no layout rule for `" + opName(op) + "`");
  std::vector<int> axes;
  if (!c.axesOf(coll.getAxesAttr(), axes))
    return State::unknown(&op, "an axis the mesh does not have");
  // zigzag: the group's last axis's rank p holds chunks p and 2n-1-p of the block (a
  // zigzag over one rank is the plain block).
  bool zigzag = false;
  if (op.hasAttr("zigzag") && !coll.getAxesAttr().empty())
    if (auto last = dyn_cast<StringAttr>(coll.getAxesAttr()[coll.getAxesAttr().size() - 1]))
      zigzag = c.mesh.shape[c.mesh.axisIndex(last.str())] > 1;
  State s = *in[0];
  std::string why;
  if (!s.partialMax.empty()) {
    // Only all_reduce "max" over the partial max's axes (at least) completes it.
    auto r = dyn_cast<dist::AllReduceOp>(op);
    if (!r || r.getKind() != "max" || intersects(axes, s.splitAxes()))
      return State::unknown(&op, "its operand is each rank's maximum of its block over " +
                                     axesText(c.mesh, s.partialMax) +
                                     ": only all_reduce \"max\" over those axes completes it");
    std::vector<int> rest;
    for (int a : s.partialMax)
      if (std::find(axes.begin(), axes.end(), a) == axes.end())
        rest.push_back(a);
    s.partialMax = rest;
  }
  auto dimOf = [&](int64_t d) { return d >= 0 && d < (int64_t)s.split.size(); };
  auto scatter = [&](DimSplit &d, int64_t global, std::string &why) {
    return scatterDim(c, s, d, global, axes, zigzag, why);
  };
  auto unsplit = [&](int64_t dim, const char *verb, std::string &why) {
    return dimOf(dim) ? unsplitDim(c, s, dim, axes, zigzag, verb, why)
                      : (why = "dimension out of range", false);
  };
  if (auto g = dyn_cast<dist::AllGatherOp>(op)) {
    if (!unsplit(g.getDim(), "gathers", why) &&
        (zigzag || !stackGather(c, op.getContext(), s, g.getDim(), axes, why)) &&
        (zigzag || !permutingGather(c, s, g.getDim(), axes)))
      return State::unknown(&op, why);
  } else if (auto p = dyn_cast<dist::ShardPadOp>(op)) {
    // Each rank's block in zeros of the whole: summed over the group of `axes` the
    // blocks fill the whole once (they tile it) -- a partial sum of the whole value.
    if (intersects(axes, s.partial))
      return State::unknown(&op, "it pads over axes its operand is already partial over (" +
                                     c.show(s) + ")");
    if (!unsplit(p.getDim(), "pads", why))
      return State::unknown(&op, why);
    s.partial = sortedUnion(s.partial, axes);
  } else if (auto r = dyn_cast<dist::AllReduceOp>(op)) {
    if (!reduceOver(c, s, axes, r.getKind(), why))
      return State::unknown(&op, why);
  } else if (auto r = dyn_cast<dist::ReduceScatterOp>(op)) {
    if (!dimOf(r.getDim()) || r.getKind() == "max")
      return State::unknown(&op, "no layout rule for this reduce_scatter");
    if (!reduceOver(c, s, axes, r.getKind(), why))
      return State::unknown(&op, why);
    if (!scatter(s.split[r.getDim()], s.global[r.getDim()], why))
      return State::unknown(&op, why);
    if (!unstackWindows(c, s, r.getDim(), axes))
      unstack(c, s, r.getDim(), axes);
    unreshape(c, op, s, local);
  } else if (auto sl = dyn_cast<dist::ShardSliceOp>(op);
             sl && !zigzag && c.terms.kindIs(s.term, TermPool::HeadData::GatherStack)) {
    if (!permutedPick(c, s, sl.getDim(), axes)) // a device permutation
      return State::unknown(&op, "a pick of a gather that is not a permutation of its axes");
  } else if (auto sl = dyn_cast<dist::ShardSliceOp>(op)) {
    if (!dimOf(sl.getDim()) || intersects(axes, s.splitAxes()) || intersects(axes, s.partial))
      return State::unknown(&op, "it slices over axes its operand is already split or partial "
                                 "over (" + c.show(s) + ")");
    if (!scatter(s.split[sl.getDim()], s.global[sl.getDim()], why))
      return State::unknown(&op, why);
    if (!unstackWindows(c, s, sl.getDim(), axes))
      unstack(c, s, sl.getDim(), axes);
    unreshape(c, op, s, local);
  } else if (auto a = dyn_cast<dist::AllToAllOp>(op)) {
    // Rank i of a group sends block j of dim s to rank j, which concatenates what it
    // receives along dim c in group order. Where the group's axes are the minor axes
    // splitting dim c, rank j then holds the group's blocks of c side by side -- dim c
    // without those axes -- and block j of its former range of s: dim s gains them.
    int64_t sd = a.getSplitDim(), cd = a.getConcatDim();
    if (!dimOf(sd) || !dimOf(cd))
      return State::unknown(&op, "no layout rule for this all_to_all");
    if (sd == cd) {
      if (!exchangeOneDim(c, s, sd, axes, why))
        return State::unknown(&op, why);
      if (!consistent(c, s, local, why))
        return State::unknown(&op, why);
      return s;
    }
    auto &cs = s.split[cd];
    if (intersects(axes, s.partial) || cs.size() < axes.size() ||
        !std::equal(axes.begin(), axes.end(), cs.end() - axes.size()))
      return State::unknown(&op, "it exchanges over " + axesText(c.mesh, axes) +
                                     ", which are not the minor axes splitting its concatenated "
                                     "dim " + std::to_string(cd) + " (" + c.show(s) + ")");
    cs.resize(cs.size() - axes.size());
    auto &ss = s.split[sd];
    ss.insert(ss.end(), axes.begin(), axes.end());
  } else {
    return State::unknown(&op, "no layout rule for `" + opName(op) + "` yet");
  }
  if (!consistent(c, s, local, why))
    return State::unknown(&op, why);
  return s;
}

} // namespace planproof::layouts
