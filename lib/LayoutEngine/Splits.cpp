//===- Splits.cpp - how each ref op family splits its result ---------------===//
//
// The split half of the transfer rules (Rules.cpp has the terms and partial sums): for
// each op family, from its operands' splits, the result's split and global shape, the
// axes it contracts over and its factor, or the side condition that fails
// (docs/layout-engine.md, "Transfer rules").
//
//===----------------------------------------------------------------------===//
#include "LayoutEngine/LayoutState.h"

#include "Dist/DistDialect.h"
#include "Ref/RefDialect.h"
#include "Support/Limits.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/BuiltinTypes.h"

#include <algorithm>
#include <map>

using namespace mlir;

namespace planproof::layouts {

namespace {

SplitResult fail(std::string why) {
  SplitResult r;
  r.why = std::move(why);
  return r;
}

/// A row-major reshape: the dimensions fall into groups whose sizes multiply alike on
/// both sides; a group's leading input dimension may be split (its blocks are then
/// consecutive ranges of the group, which are the blocks of the group's leading output
/// dimension), its other dimensions not.
/// The axes splitting input dimensions [i0, i) of a reshape's group, major to minor
/// (`lastSplit`: the last split one, i if none). The rank's elements are one
/// consecutive range of the group when every dimension before the last split one holds
/// one index per rank; returns the first that does not, or -1.
int64_t groupSplit(const State &x, const Shape &inLocal, size_t i0, size_t i,
                   std::vector<int> &axes, size_t &lastSplit) {
  lastSplit = i;
  for (size_t k = i0; k < i; ++k)
    if (!x.split[k].empty()) {
      axes.insert(axes.end(), x.split[k].begin(), x.split[k].end());
      lastSplit = k;
    }
  for (size_t k = i0; lastSplit < i && k < lastSplit; ++k)
    if (inLocal[k] != 1)
      return (int64_t)k;
  return -1;
}

/// The most windows a merged dimension is described by (one per index of the
/// dimensions before its last split one).
constexpr int64_t kMaxMergedWindows = 4096;

/// The windows of a merge of input dimensions [i0, i1) of x (local sizes `local`) into
/// one, when a split dimension t follows dimensions that hold several indices per
/// rank (a batch of rows and a split head merged into the batch of a product): for
/// each index of the dimensions before t, a run of local[t] x (the whole dimensions
/// after t) positions, starting at that index's offset plus the rank's blocks'.
/// Dimension k's block position over its axes (major to minor) moves the run by
/// local[k] x its stride per block. False where a dimension is windowed already, one
/// after t is not whole, or the windows would be too many.
bool mergedWindows(const Mesh &mesh, const std::vector<DimSplit> &split, const Shape &global,
                   const Shape &local, size_t i0, size_t i1, DimSplit &out) {
  size_t t = i1;
  for (size_t k = i0; k < i1; ++k) {
    if (!split[k].windows.empty())
      return false;
    if (!split[k].empty())
      t = k;
  }
  if (t == i1)
    return false;
  std::vector<int64_t> stride(i1 - i0, 1);
  for (size_t k = i1 - 1; k > i0; --k)
    if (!checkedMul(stride[k - i0], global[k], stride[k - 1 - i0]))
      return false;
  for (size_t k = t + 1; k < i1; ++k)
    if (local[k] != global[k])
      return false;
  int64_t count = 1, total = 1;
  for (size_t k = i0; k < t; ++k)
    if (!checkedMul(count, local[k], count) || count > kMaxMergedWindows)
      return false;
  for (size_t k = i0; k < i1; ++k)
    if (!checkedMul(total, global[k], total))
      return false;
  Window proto;
  if (!checkedMul(local[t], stride[t - i0], proto.length))
    return false;
  std::vector<int> axes;
  for (size_t k = i0; k <= t; ++k) {
    int64_t inner = 1;
    for (size_t m = split[k].size(); m-- > 0;) {
      int a = split[k][m];
      int64_t cf;
      if (!checkedMul(local[k], stride[k - i0], cf) || !checkedMul(cf, inner, cf) ||
          !checkedMul(inner, mesh.shape[a], inner))
        return false;
      proto.coeff.push_back({a, cf});
    }
    axes.insert(axes.end(), split[k].begin(), split[k].end());
  }
  std::sort(proto.coeff.begin(), proto.coeff.end());
  out = DimSplit(axes);
  std::vector<int64_t> j(t - i0, 0); // the local index of each dimension before t
  for (int64_t w = 0; w < count; ++w) {
    Window win = proto;
    for (size_t k = i0; k < t; ++k)
      win.base += j[k - i0] * stride[k - i0];
    out.windows.push_back(win);
    for (size_t k = t; k-- > i0;) // the next index, row-major
      if (++j[k - i0] < local[k])
        break;
      else
        j[k - i0] = 0;
  }
  normalizeWindows(mesh, out, total);
  return true;
}

/// The plain splits of output dimensions [j0, j1) (global sizes `global`, local sizes
/// `local`) that a merged dimension `merged` holds as windows (mergedWindows's): each
/// axis goes to the output dimension whose block its coefficient moves by, then the
/// guess is merged again and must give exactly `merged`'s windows.
bool unmergedSplits(const Mesh &mesh, const DimSplit &merged, const Shape &global,
                    const Shape &local, size_t j0, size_t j1, std::vector<DimSplit> &out) {
  if (merged.windows.empty())
    return false;
  for (const Window &w : merged.windows)
    if (w.zero || w.coeff != merged.windows[0].coeff)
      return false;
  std::vector<int64_t> stride(j1 - j0, 1);
  for (size_t k = j1 - 1; k > j0; --k)
    if (!checkedMul(stride[k - j0], global[k], stride[k - 1 - j0]))
      return false;
  std::vector<std::vector<std::pair<int64_t, int>>> byDim(j1 - j0); // (coefficient, axis)
  for (auto [a, cf] : merged.windows[0].coeff) {
    size_t to = j1;
    for (size_t k = j0; k < j1 && to == j1; ++k) { // the outermost dimension it moves
      int64_t unit;
      if (local[k] > 0 && checkedMul(local[k], stride[k - j0], unit) && cf > 0 && cf % unit == 0 &&
          cf / unit < global[k])
        to = k;
    }
    if (to == j1)
      return false;
    byDim[to - j0].push_back({cf, a});
  }
  out.assign(j1 - j0, DimSplit());
  for (size_t k = 0; k < byDim.size(); ++k) {
    std::sort(byDim[k].rbegin(), byDim[k].rend()); // major (largest step) first
    for (auto [cf, a] : byDim[k])
      out[k].push_back(a);
  }
  DimSplit again;
  std::vector<DimSplit> full(j1);
  Shape g(j1), l(j1);
  for (size_t k = j0; k < j1; ++k) {
    full[k] = out[k - j0];
    g[k] = global[k];
    l[k] = local[k];
  }
  return mergedWindows(mesh, full, g, l, j0, j1, again) && again == merged;
}

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
  bool merged = false, unmerged = false; // (for the proof trace)
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
    // A dimension laid out in windows of a merge (a batch and a split head as the
    // batch of a product), split again into the merged dimensions, or kept.
    bool windowed = false;
    for (size_t k = i0; k < i; ++k)
      windowed |= !x.split[k].windows.empty();
    if (windowed) {
      if (i != i0 + 1)
        return false;
      if (j == j0 + 1 && outGlobal[j0] == x.global[i0] && outLocal[j0] == inLocal[i0]) {
        r.split[j0] = x.split[i0];
        continue;
      }
      std::vector<DimSplit> parts;
      if (!unmergedSplits(c.mesh, x.split[i0], outGlobal, outLocal, j0, j, parts))
        return false;
      for (size_t k = j0; k < j; ++k)
        r.split[k] = parts[k - j0];
      unmerged = true;
      continue;
    }
    std::vector<int> axes;
    size_t lastSplit;
    if (groupSplit(x, inLocal, i0, i, axes, lastSplit) >= 0) {
      // A split dimension after dimensions holding several indices per rank, merged
      // into one: each rank holds runs of it (windows).
      if (j != j0 + 1 || !mergedWindows(c.mesh, x.split, x.global, inLocal, i0, i, r.split[j0]))
        return false;
      int64_t held = 0;
      for (const Window &w : windowsOf(c.mesh, r.split[j0], outGlobal[j0]))
        held += w.length;
      if (held != outLocal[j0])
        return false;
      merged = true;
      continue;
    }
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
  if (merged)
    c.fire("windows: a split dimension merged after ones of several indices, held as runs");
  if (unmerged)
    c.fire("windows: runs of a merged dimension split into its dimensions again");
  return true;
}

using Placement = std::vector<std::pair<size_t, std::vector<int>>>;

/// The ways `axes`, major to minor, go to the output dimensions `places` in order:
/// each of them but the last holds one index per rank, so the blocks compose row-major
/// as in the input.
std::vector<Placement> placements(const std::vector<size_t> &places,
                                  const std::vector<int> &axes) {
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
  return options;
}

SplitResult reshapeSplitIn(RuleContext &c, const State &x, const Shape &inLocal,
                           const Shape &outLocal);

/// The shape `shape` reshapes to when its dimensions are grouped as the reshape of
/// `from` to `to` groups them (groups of equal products): a group of equal sizes
/// takes `to`'s sizes, several dimensions merged into one their product, one split
/// into several `to`'s sizes with the first scaled. False where the ranks differ, a
/// group is none of these, or a size does not divide.
bool reshapeAlike(const Shape &from, const Shape &to, const Shape &shape, Shape &out) {
  std::vector<DimGroup> groups;
  if (from.size() != shape.size() || !dimGroups(from, to, groups))
    return false;
  out.clear();
  for (const DimGroup &g : groups) {
    if (std::equal(from.begin() + g.i0, from.begin() + g.i1, shape.begin() + g.i0)) {
      out.insert(out.end(), to.begin() + g.j0, to.begin() + g.j1);
    } else if (g.j1 == g.j0 + 1) {
      int64_t n = 1;
      for (size_t k = g.i0; k < g.i1; ++k)
        n *= shape[k];
      out.push_back(n);
    } else if (g.i1 == g.i0 + 1 && g.j1 > g.j0 && (to[g.j0] * shape[g.i0]) % from[g.i0] == 0) {
      out.push_back(to[g.j0] * shape[g.i0] / from[g.i0]);
      out.insert(out.end(), to.begin() + g.j0 + 1, to.begin() + g.j1);
    } else {
      return false;
    }
  }
  return true;
}

SplitResult reshapeSplit(RuleContext &c, Operation &op, const State &x, const Shape &outLocal) {
  auto inType = cast<RankedTensorType>(op.getOperand(0).getType());
  return reshapeSplitIn(c, x, Shape(inType.getShape().begin(), inType.getShape().end()),
                        outLocal);
}

SplitResult reshapeSplitIn(RuleContext &c, const State &x, const Shape &inLocal,
                           const Shape &outLocal) {
  SplitResult r;
  // The global shapes the reference reshapes x's own value to, then those it reshapes
  // x's global shape to, then the shape x's
  // takes when grouped as a reshape of the reference groups its own, then a reshape
  // back to the shape x's term was reshaped from (the two then compose to that term),
  // where the split can take them.
  if (auto it = c.shapes.reshapesOf.find(x.term); it != c.shapes.reshapesOf.end())
    for (const Shape &target : it->second)
      if (reshapeByGlobal(c, x, inLocal, outLocal, target, r))
        return r;
  if (auto it = c.shapes.reshapes.find(x.global); it != c.shapes.reshapes.end())
    for (const Shape &target : it->second)
      if (reshapeByGlobal(c, x, inLocal, outLocal, target, r))
        return r;
  // (A microbatch's rows, or heads, merged or split as the reference merges or splits
  // the whole batch's; first those of sources with the most dimensions equal to x's.)
  std::multimap<int, Shape, std::greater<int>> alike;
  for (auto &[from, tos] : c.shapes.reshapes)
    for (const Shape &to : tos) {
      Shape target;
      if (from != x.global && reshapeAlike(from, to, x.global, target)) {
        int same = 0;
        for (size_t d = 0; d < from.size(); ++d)
          same += from[d] == x.global[d];
        alike.emplace(same, target);
      }
    }
  for (auto &[same, target] : alike)
    if (reshapeByGlobal(c, x, inLocal, outLocal, target, r))
      return r;
  if (c.terms.isOp<ref::ReshapeOp>(x.term) &&
      reshapeByGlobal(c, x, inLocal, outLocal, c.terms.shapeOf(c.terms.operands(x.term)[0]), r))
    return r;
  if (x.windowed())
    return fail("a reshape of rows chosen per rank (" + c.show(x) + ") into a shape the "
                "reference does not reshape them to");
  r.split.assign(outLocal.size(), {});
  // Per split group, the ways its axes may be placed on the group's output dimensions.
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
    size_t lastSplit;
    if (int64_t k = groupSplit(x, inLocal, i0, i, axes, lastSplit); k >= 0)
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
      choices.push_back(placements(places, axes));
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
  auto it = c.shapes.reshapes.find(x.global);
  for (int tries = 0; it != c.shapes.reshapes.end() && tries < 256; ++tries) {
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

/// broadcast: operand dimension k becomes result dimension dims[k]; the new dimensions
/// are copies, whole on every rank.
SplitResult broadcastSplit(RuleContext &c, ref::BroadcastOp b, const State &x,
                           const Shape &local) {
  SplitResult r;
  r.split.assign(local.size(), {});
  r.global = local;
  auto dims = b.getDims();
  for (size_t k = 0; k < dims.size() && k < x.split.size(); ++k) {
    r.split[dims[k]] = x.split[k];
    r.global[dims[k]] = x.global[k];
  }
  // Copied dimensions may be taken as split over axes the value does not use (a
  // block of copies is copies), to reach a global shape the reference broadcasts the
  // same source to.
  // (Not copies of a scalar: elementwise ops give those the other operands' split.)
  auto it = c.shapes.broadcasts.find(x.global);
  if (x.global.empty() || it == c.shapes.broadcasts.end() || it->second.count(r.global))
    return r;
  std::vector<int> used = x.splitAxes();
  used.insert(used.end(), x.partial.begin(), x.partial.end());
  used.push_back(c.pipelineAxis);
  for (const Shape &target : it->second) {
    if (target.size() != r.global.size())
      continue;
    SplitResult t = r;
    std::vector<int> taken = used;
    bool ok = true;
    for (size_t d = 0; ok && d < target.size(); ++d) {
      if (target[d] == t.global[d])
        continue;
      bool copied = std::find(dims.begin(), dims.end(), (int64_t)d) == dims.end();
      if (!copied || t.global[d] <= 0 || target[d] % t.global[d] != 0) {
        ok = false;
        break;
      }
      int64_t need = target[d] / t.global[d];
      int axis = -1; // the first axis of that size the value leaves free
      for (size_t a = 0; a < c.mesh.shape.size() && axis < 0; ++a)
        if (c.mesh.shape[a] == need && std::find(taken.begin(), taken.end(), (int)a) == taken.end())
          axis = (int)a;
      if (axis < 0) {
        ok = false;
        break;
      }
      taken.push_back(axis);
      t.split[d] = {axis};
      t.global[d] = target[d];
    }
    if (ok)
      return t;
  }
  return r;
}

/// concat along a dimension no operand splits, of operands split alike elsewhere: each
/// rank concatenates its blocks, which are the blocks of the concatenation. Along a
/// dimension every operand splits over the same axes S, each rank holds its block of
/// each operand, one after the other: the concatenation laid out in windows -- each
/// operand's S-block (or its windows), moved by the operand's offset (PyTorch stacks a
/// value's chunks so before a reduce_scatter along a batch split over S; XLA exchanges
/// a rank's token ids one microbatch group at a time).
SplitResult concatSplit(RuleContext &c, ref::ConcatOp cat, const std::vector<const State *> &in) {
  int64_t dim = cat.getDim();
  const State &x = *in[0];
  if (dim < 0 || dim >= (int64_t)x.split.size())
    return fail("dimension out of range");
  SplitResult r;
  r.split = x.split;
  r.global = x.global;
  if (in.size() == 1) // a concatenation of one value is that value
    return r;
  r.global[dim] = 0;
  const std::vector<int> along = x.split[dim];  // (the axes; operands' windows may differ)
  std::vector<Window> windows;
  for (const State *s : in) {
    if (static_cast<const std::vector<int> &>(s->split[dim]) != along)
      return fail("it concatenates along dimension " + std::to_string(dim) + ", which an "
                  "operand splits (" + c.show(*s) + ")");
    bool alike = s->split.size() == x.split.size() && s->global.size() == x.global.size();
    for (size_t d = 0; alike && d < x.global.size(); ++d)
      alike = (int64_t)d == dim || (s->global[d] == x.global[d] && s->split[d] == x.split[d]);
    if (!alike)
      return fail("its operands are split differently (" + c.show(x) + " and " + c.show(*s) + ")");
    if (!along.empty()) {
      // Each rank's block of the operand -- its one plain block, or its windows (ids
      // exchanged run by run) -- moved by the operand's offset in the concatenation.
      std::vector<Window> blocks = s->split[dim].windows;
      if (blocks.empty())
        blocks = plainWindows(c.mesh, s->split[dim], s->global[dim]);
      if (blocks.empty() || (s->split[dim].windows.empty() && blocks.size() != 1))
        return fail("it concatenates along dimension " + std::to_string(dim) +
                    ", whose blocks do not divide an operand's rows (" + c.show(*s) + ")");
      for (Window &w : blocks) {
        if (!w.zero && !checkedAdd(w.base, r.global[dim], w.base))
          return fail("a concatenation of more rows than fit 64 bits");
        windows.push_back(w);
      }
    }
    if (!checkedAdd(r.global[dim], s->global[dim], r.global[dim]))
      return fail("a concatenation of more rows than fit 64 bits");
  }
  if (!along.empty()) {
    r.split[dim].windows = windows;
    normalizeWindows(c.mesh, r.split[dim], r.global[dim]);
  }
  return r;
}

/// The one propagation over an op's factors (Ref/LayoutFactors.h): every operand
/// dimension indexing a factor must be laid out alike (the same axes, windows and
/// global size: the ranks hold matching blocks of it); a factor read whole must not be
/// split; an axis may split one factor only (else a rank holds blocks of two factors
/// that do not meet, such as a product's rows and columns). Pass-through factors carry
/// their split to the result; a split summed, averaged or maximized over becomes a
/// partial sum (times the number of blocks for a mean) or a partial maximum; a counted
/// factor multiplies by its number of blocks.
SplitResult factorSplit(RuleContext &c, Operation &op, ref::LayoutFactors rule,
                        const std::vector<const State *> &in, const Shape &local) {
  using ref::FactorKind;
  // An rhs whose batch dimension is one entry on every rank (a weight reshaped to a
  // batch of 1) is the same matrix for each of the lhs's batch entries, wherever those
  // are split (Views.cpp, batchOfOne): its batch dimension indexes no factor.
  if (auto m = dyn_cast<ref::BatchMatmulOp>(op);
      m && in.size() >= 2 && batchOfOne(*in[0], *in[1], m.getLhsDim())) {
    rule.operands[1][0] = -1;
    c.fire("batch of one: one matrix for every batch entry");
  }
  size_t nf = rule.kinds.size();
  std::vector<const DimSplit *> split(nf, nullptr);
  std::vector<int64_t> size(nf, -1);
  std::vector<std::pair<size_t, size_t>> first(nf); // (operand, dimension) that set it
  auto where = [&](size_t i, size_t d) {
    return "dimension " + std::to_string(d) + " of operand #" + std::to_string(i) + " (" +
           c.show(*in[i]) + ")";
  };
  if (rule.operands.size() > in.size())
    return fail("`" + opName(op) + "` has fewer operands than its layout rule");
  for (size_t i = 0; i < rule.operands.size(); ++i) {
    const State &s = *in[i];
    if (s.split.size() != rule.operands[i].size() || s.global.size() != s.split.size())
      return fail("operand #" + std::to_string(i) + " of `" + opName(op) +
                  "` does not have the rank of its layout rule");
    for (size_t d = 0; d < s.split.size(); ++d) {
      int f = rule.operands[i][d];
      if (f < 0) {
        if (!s.split[d].empty() || !s.split[d].windows.empty())
          return fail("`" + opName(op) + "` broadcasts " + where(i, d) + ", which is split");
        continue;
      }
      if (f >= (int)nf)
        return fail("`" + opName(op) + "` has a malformed layout rule");
      if (!split[f]) {
        split[f] = &s.split[d];
        size[f] = s.global[d];
        first[f] = {i, d};
        continue;
      }
      if (*split[f] != s.split[d] || size[f] != s.global[d]) {
        bool summed = rule.kinds[f] == FactorKind::Sum || rule.kinds[f] == FactorKind::Mean ||
                      rule.kinds[f] == FactorKind::Max;
        return fail("it " + std::string(summed ? "contracts " : "matches ") +
                    where(first[f].first, first[f].second) + " with " + where(i, d) +
                    ", laid out differently: the ranks do not hold matching blocks of them");
      }
    }
  }
  std::vector<int> owner(c.mesh.shape.size(), -1); // the factor each axis splits
  SplitResult r;
  for (size_t f = 0; f < nf; ++f) {
    if (!split[f])
      continue;
    const DimSplit &ds = *split[f];
    if (rule.kinds[f] == FactorKind::Whole && (!ds.empty() || !ds.windows.empty()))
      return fail("`" + opName(op) + "` reads " + where(first[f].first, first[f].second) +
                  " whole, and it is split");
    for (int a : ds) {
      if (a < 0 || a >= (int)owner.size())
        return fail("a split over an axis the mesh does not have");
      if (owner[a] >= 0 && owner[a] != (int)f)
        return fail("mesh axis `" + c.mesh.axes[a] + "` splits " +
                    where(first[owner[a]].first, first[owner[a]].second) + " and " +
                    where(first[f].first, first[f].second) +
                    ", which index different positions: no rank holds matching blocks");
      owner[a] = (int)f;
    }
    switch (rule.kinds[f]) {
    case FactorKind::Sum:
    case FactorKind::Mean:
    case FactorKind::Max:
      r.contracted.insert(r.contracted.end(), ds.begin(), ds.end());
      if (rule.kinds[f] == FactorKind::Max)
        r.maxOver.insert(r.maxOver.end(), ds.begin(), ds.end());
      if (rule.kinds[f] == FactorKind::Mean)
        r.factor = r.factor * Rational(c.size(ds));
      break;
    case FactorKind::Counted:
      r.factor = r.factor * Rational(c.size(ds));
      break;
    case FactorKind::PassThrough:
    case FactorKind::Whole:
      break;
    }
  }
  if (rule.result.size() != local.size())
    return fail("`" + opName(op) + "`'s result does not have the rank of its layout rule");
  for (size_t d = 0; d < rule.result.size(); ++d) {
    int f = rule.result[d];
    if (f >= (int)nf)
      return fail("`" + opName(op) + "` has a malformed layout rule");
    if (f >= 0 && (rule.kinds[f] == FactorKind::Sum || rule.kinds[f] == FactorKind::Mean ||
                   rule.kinds[f] == FactorKind::Max))
      return fail("`" + opName(op) + "` has a malformed layout rule");
    if (f >= 0 && split[f]) {
      r.split.push_back(*split[f]);
      r.global.push_back(size[f]);
    } else { // a dimension of the op's own, or of a factor no operand has: whole
      r.split.push_back({});
      r.global.push_back(local[d]);
    }
  }
  return r;
}

} // namespace

SplitResult reshapeSplitOf(RuleContext &c, const State &x, const Shape &inLocal,
                           const Shape &outLocal) {
  return reshapeSplitIn(c, x, inLocal, outLocal);
}

bool localShape(RuleContext &c, const State &x, Shape &local) {
  local.clear();
  for (size_t d = 0; d < x.global.size() && d < x.split.size(); ++d) {
    int64_t k = c.size(x.split[d]);
    if (k <= 0 || x.global[d] % k)
      return false;
    local.push_back(x.global[d] / k);
  }
  return local.size() == x.global.size();
}

bool placedAs(RuleContext &c, Operation &op, const State &x, const Shape &target, State &out,
              const Shape *targetLocal) {
  Shape local;
  if (!x.known || x.windowed() || x.global == target || !x.partialMax.empty() ||
      !localShape(c, x, local))
    return false;
  SplitResult r;
  if (!reshapeByGlobal(c, x, local, targetLocal ? *targetLocal : local, target, r) ||
      !r.why.empty())
    return false;
  out = x;
  out.global = target;
  out.split = r.split;
  out.term = reshapeTerm(c.terms, op, x.term, target);
  out.broadcast = false;
  out.sourceDims.clear();
  out.rowSums.reset();
  return true;
}

SplitResult splitRule(RuleContext &c, Operation &op, const std::vector<const State *> &in,
                      const Shape &local) {
  if (auto b = dyn_cast<ref::BroadcastOp>(op)) // (its copies may take a split)
    return broadcastSplit(c, b, *in[0], local);
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
  if (auto f = dyn_cast<ref::LayoutFactorsOp>(op))
    if (std::optional<ref::LayoutFactors> rule = f.getLayoutFactors())
      return factorSplit(c, op, *rule, in, local);
  if (isa<ref::ReshapeOp>(op))
    return reshapeSplit(c, op, *in[0], local);
  if (auto cat = dyn_cast<ref::ConcatOp>(op))
    return concatSplit(c, cat, in);
  for (size_t i = 0; i < in.size(); ++i)
    if (in[i]->isSplit())
      return fail("no layout rule for `" + opName(op) + "` on a split operand (operand #" +
                  std::to_string(i) + " is " + c.show(*in[i]) + ")");
  return fail("no layout rule for `" + opName(op) + "`");
}

} // namespace planproof::layouts
