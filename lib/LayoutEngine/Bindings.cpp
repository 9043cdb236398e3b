//===- Bindings.cpp - states of reference values under a layout ------------===//
//
// A plan input's state from its binding's layout (a reference input's block per
// rank: split, interleaved, zigzag, padded, partial), and an independent-mode random
// draw's from the reference mask it stands for (docs/layout-engine.md).
//
//===----------------------------------------------------------------------===//
#include "LayoutEngine/Bindings.h"

#include "Support/Limits.h"

#include <algorithm>
#include <map>

using namespace mlir;

namespace planproof::layouts {

std::string shapeText(const Shape &s) {
  std::string t;
  for (int64_t d : s)
    t += std::to_string(d) + "x";
  return t + "f32";
}

int64_t paddedSize(const Mesh &mesh, const Layout &l, const Shape &global, size_t d) {
  int64_t k = mesh.groupSize(l.dims[d]);
  return (global[d] + k - 1) / k * k;
}

int paddedDim(const Mesh &mesh, const Layout &l, const Shape &global) {
  int dim = -1;
  for (size_t d = 0; d < l.dims.size() && d < global.size(); ++d)
    if (paddedSize(mesh, l, global, d) != global[d]) {
      if (dim >= 0)
        return -2;
      dim = (int)d;
    }
  return dim;
}

namespace {

/// A dimension split over axes A within k interleaved segments (a fused [gate | up]
/// weight): rank b holds block b of each segment, side by side. That is the plain block
/// b of the concatenation, over b in rank order, of each segment's block b -- slices of
/// the value -- so the state is a plain split of that permuted term; its products and
/// slices meet the reference's by pieces (Pieces.cpp: the input is cut at the same
/// places).
bool interleave(RuleContext &c, MLIRContext *ctx, const Layout &l, int d, State &s) {
  DimSplit axes;
  for (int a : l.dims[d])
    if (c.mesh.shape[a] > 1)
      axes.push_back(a);
  int64_t k = l.segmentsOf(d), n = c.size(axes), global = s.global[d];
  if (axes.empty() || k <= 0 || global % k != 0 || (global / k) % n != 0)
    return false;
  int64_t seg = global / k, len = seg / n;
  std::vector<TermId> pieces;
  TermId whole = c.terms.scaled(s.term, s.factor);
  for (int64_t blk = 0; blk < n; ++blk)
    for (int64_t j = 0; j < k; ++j) {
      std::vector<int64_t> offsets(s.global.size(), 0), sizes(s.global.begin(), s.global.end());
      offsets[d] = j * seg + blk * len;
      sizes[d] = len;
      pieces.push_back(sliceTerm(c.terms, ctx, whole, s.global, offsets, sizes));
    }
  s.term = c.terms.concat(concatHead(ctx, d, s.global), pieces);
  s.factor = Rational(1);
  s.broadcast = false;
  s.split[d] = axes;
  return true;
}

} // namespace

State layoutOf(RuleContext &c, MLIRContext *ctx, const State &whole, const Layout &l,
               const std::string &name) {
  int interleaved = -1;
  for (size_t d = 0; d < l.dims.size(); ++d) {
    if (l.segmentsOf(d) != 1 && !l.zigzagAt(d)) {
      if (l.padded || interleaved >= 0)
        return State::unknown(nullptr, "padded interleaved layouts, or several interleaved "
                                       "dimensions, are not modelled by the layout engine yet");
      interleaved = (int)d;
    }
    if (l.zigzagAt(d) && l.padded)
      return State::unknown(nullptr, "padded zigzag layouts are not modelled by the layout "
                                     "engine yet");
  }
  if (!whole.known)
    return whole;
  State s = whole;
  if (l.padded) {
    // A padded flat buffer (ZeRO/FSDP): the value, then padding of arbitrary content
    // (a leaf of its own) up to the split's multiple.
    int d = paddedDim(c.mesh, l, whole.global);
    if (d == -2)
      return State::unknown(nullptr, "padding in more than one dimension is not modelled");
    if (d >= 0) {
      Shape pad = whole.global;
      pad[d] = paddedSize(c.mesh, l, whole.global, d) - whole.global[d];
      TermId padding = c.terms.leaf("padding of " + name, shapeText(pad));
      Shape global = whole.global;
      global[d] += pad[d];
      s.term = c.terms.concat(concatHead(ctx, d, global),
                              {c.terms.scaled(whole.term, whole.factor), padding});
      s.factor = Rational(1);
      s.global = global;
      s.broadcast = false;
    }
  }
  if (l.dims.size() != s.global.size())
    return State::unknown(nullptr, "the layout of `" + name + "` has the wrong rank");
  s.split.assign(l.dims.size(), {});
  for (size_t d = 0; d < l.dims.size(); ++d) {
    std::string why;
    if ((int)d != interleaved && !layoutDim(c.mesh, l, d, s.global[d], s.split[d], why))
      return State::unknown(nullptr, why);
  }
  if (interleaved >= 0 && !interleave(c, ctx, l, interleaved, s))
    return State::unknown(nullptr, "an interleaved layout whose segments do not divide into "
                                   "its blocks");
  // A partial average over an axis of n ranks: the ranks' values sum to n times the
  // value.
  for (auto [axis, kind] : l.partial) {
    if (kind == ReduceKind::Max)
      return State::unknown(nullptr, "partial maxima are not modelled in bindings");
    if (c.mesh.shape[axis] > 1) {
      s.partial.push_back(axis);
      if (kind == ReduceKind::Avg)
        s.factor = s.factor * Rational(c.mesh.shape[axis]);
    }
  }
  std::sort(s.partial.begin(), s.partial.end());
  return s;
}

State drawRule(RuleContext &c, Operation &op, const State &whole, const Layout &l,
               const Shape &block, ArrayRef<int64_t> off) {
  if (!whole.known)
    return State::unknown(&op, "the reference mask it draws for is not known: " + whole.reason());
  if (!whole.partial.empty() || !whole.partialMax.empty() || !whole.rankCoeff.empty() ||
      whole.isSplit())
    return State::unknown(&op, "the reference mask it draws for is not a whole value");
  Shape local;
  if (!resultShape(op, local) || local.size() != block.size() || off.size() != local.size())
    return State::unknown(&op, "its piece's rank is not its reference mask's");
  if (l.padded || l.isPartial())
    return State::unknown(&op, "a padded or partial layout of a random draw is not modelled");
  State s = layoutOf(c, op.getContext(), whole, l, "");
  std::string why;
  if (!s.known)
    return State::unknown(&op, s.reason());
  if (!consistent(c, s, block, why))
    return State::unknown(&op, why);
  if (local == block)
    return s;
  for (size_t d = 0; d < local.size(); ++d)
    if (!s.split[d].windows.empty() && local[d] != block[d])
      return State::unknown(&op, "a piece of a zigzag block of a random draw is not modelled");
  return sliceState(c, op, s, off, local, block, local);
}

bool windowsAsBlocks(RuleContext &c, MLIRContext *ctx, const State &s, size_t d,
                     const DimSplit &axes, State &out) {
  if (!s.known || !s.partialMax.empty() || d >= s.split.size() ||
      s.split[d].windows.empty() || !axes.windows.empty() || axes.empty())
    return false;
  for (size_t e = 0; e < s.split.size(); ++e)
    if (e != d && (!s.split[e].windows.empty() || intersects(s.split[e], axes)))
      return false;
  for (const Window &w : s.split[d].windows) {
    if (w.zero)
      return false;
    for (auto [a, k] : w.coeff)
      if (std::find(axes.begin(), axes.end(), a) == axes.end())
        return false; // (ranks of one block would hold different rows)
  }
  int64_t n = c.size(axes), rows = -1;
  std::vector<TermId> pieces;
  for (int64_t p = 0; p < n; ++p) {
    std::map<int, int64_t> coord; // block p's coordinates, major to minor
    for (size_t i = axes.size(), rest = (size_t)p; i-- > 0; rest /= c.mesh.shape[axes[i]])
      coord[axes[i]] = (int64_t)(rest % c.mesh.shape[axes[i]]);
    int64_t held = 0;
    for (const Window &w : s.split[d].windows) {
      int64_t start = w.base, k = 0;
      for (auto [a, coef] : w.coeff)
        if (!checkedMul(coef, coord[a], k) || !checkedAdd(start, k, start))
          return false;
      if (start < 0 || w.length > s.global[d] - start || !checkedAdd(held, w.length, held))
        return false;
      std::vector<int64_t> offsets(s.global.size(), 0), sizes(s.global.begin(), s.global.end());
      offsets[d] = start;
      sizes[d] = w.length;
      pieces.push_back(sliceTerm(c.terms, ctx, s.term, s.global, offsets, sizes));
    }
    if (rows >= 0 && held != rows)
      return false;
    rows = held;
  }
  State blocks = s; // (out may be s: assigned once it is complete)
  blocks.broadcast = false; // (a broadcast's rows rearranged: no longer its copies)
  blocks.sourceDims.clear();
  blocks.split[d] = axes;
  if (!checkedMul(rows, n, blocks.global[d]))
    return false;
  blocks.term = joinedConcat(c.terms, ctx, concatHead(ctx, d, blocks.global), pieces);
  out = std::move(blocks);
  return true;
}

bool windowsAsPartners(RuleContext &c, Operation &op, const std::vector<const State *> &in,
                       std::vector<State> &conv) {
  conv.clear();
  bool any = false;
  for (const State *s : in) {
    conv.push_back(*s);
    for (size_t d = 0; d < s->split.size(); ++d) {
      if (s->split[d].windows.empty())
        continue;
      for (const State *p : in) { // a partner with plain blocks of as many rows
        State blocks;
        if (p != s && d < p->split.size() && !p->split[d].empty() &&
            p->split[d].windows.empty() && d < p->global.size() &&
            windowsAsBlocks(c, op.getContext(), conv.back(), d, p->split[d], blocks) &&
            blocks.global[d] == p->global[d]) {
          conv.back() = std::move(blocks);
          any = true;
          break;
        }
      }
      // Or, with no partner, the blocks of the axes the windows name.
      if (!conv.back().split[d].windows.empty() &&
          windowsAsBlocks(c, op.getContext(), conv.back(), d,
                          DimSplit(static_cast<const std::vector<int> &>(s->split[d])), conv.back()))
        any = true;
    }
  }
  return any && llvm::none_of(conv, [](const State &s) { return s.windowed(); });
}

} // namespace planproof::layouts
