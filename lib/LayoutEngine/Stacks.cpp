//===- Stacks.cpp - a value's pieces stacked along a split dimension -------===//
//
// PyTorch's DTensor moves a split between dimensions through dimension 0, the only one
// its collectives take: to reduce-scatter along dimension d it cuts the local value into
// n chunks along d, concatenates them along 0 and reduce-scatters along 0; to gather a
// dimension d it gathers along 0 and puts the n pieces side by side along d. Where
// dimension 0 is itself split (a batch over the data-parallel axes), each rank's block
// along 0 is then a list of runs -- its block of each piece -- which windows describe
// (State, DimSplit; Windows.cpp): the term is the concatenation of the pieces, and each
// window is a piece's block, moved by the piece's offset. The rules here move such
// windows through a reduce_scatter's split and read the pieces back
// (docs/layout-engine.md, "Stacked pieces").
//
//===----------------------------------------------------------------------===//
#include "LayoutEngine/LayoutState.h"

#include "Support/Limits.h"

#include <algorithm>

namespace planproof::layouts {

std::vector<Window> cutWindows(const std::vector<Window> &windows, int64_t lo, int64_t hi) {
  std::vector<Window> cut;
  int64_t at = 0;
  for (const Window &w : windows) {
    int64_t s = std::max(at, lo), e = std::min(at + w.length, hi);
    if (s < e) {
      Window p = w;
      p.length = e - s;
      if (!p.zero)
        p.base += s - at;
      cut.push_back(p);
    }
    at += w.length;
  }
  return cut;
}

/// The stride of each axis of `axes` (major to minor) in the group's block order.
static std::vector<int64_t> groupStrides(const Mesh &mesh, const std::vector<int> &axes) {
  std::vector<int64_t> stride(axes.size(), 1);
  for (size_t i = axes.size(); i-- > 1;)
    stride[i - 1] = stride[i] * mesh.shape[axes[i]];
  return stride;
}

bool scatterWindows(const Mesh &mesh, DimSplit &d, int64_t global, const std::vector<int> &axes,
                    std::string &why) {
  int64_t rows = 0, n = 1;
  for (const Window &w : d.windows)
    if (!checkedAdd(rows, w.length, rows))
      return why = "a window position that overflows", false;
  for (int a : axes)
    if (!checkedMul(n, mesh.shape[a], n))
      return why = "a group larger than fits 64 bits", false;
  if (n <= 1 || rows % n != 0) {
    why = "it splits a dimension laid out in windows into parts that are not whole rows";
    return false;
  }
  for (const Window &w : d.windows)
    for (auto [a, cf] : w.coeff)
      if (std::find(axes.begin(), axes.end(), a) != axes.end())
        return why = "it splits a dimension over an axis its windows already move with", false;
  // Part t of every rank's rows: part 0 moved by t x delta rows, window by window
  // (delta read off part 1's first window of data).
  auto notMoved = [&] {
    why = "the parts of its rows that the ranks keep are not one another moved";
    return false;
  };
  int64_t part = rows / n, delta = 0;
  bool moved = false;
  std::vector<Window> first = cutWindows(d.windows, 0, part);
  for (int64_t t = 1; t < n; ++t) {
    std::vector<Window> p = cutWindows(d.windows, t * part, (t + 1) * part);
    if (p.size() != first.size())
      return notMoved();
    for (size_t i = 0; i < p.size(); ++i) {
      const Window &a = first[i], &b = p[i];
      if (a.length != b.length || a.zero != b.zero || (!a.zero && a.coeff != b.coeff))
        return notMoved();
      if (a.zero)
        continue;
      if (!moved) {
        delta = b.base - a.base; // t == 1 here: every part has data where part 1 has
        moved = true;
      }
      int64_t want = 0;
      if (!checkedMul(delta, t, want) || !checkedAdd(a.base, want, want) || b.base != want)
        return notMoved();
    }
  }
  std::vector<int64_t> stride = groupStrides(mesh, axes);
  for (Window &w : first) {
    if (w.zero)
      continue;
    for (size_t i = 0; i < axes.size(); ++i) {
      int64_t cf = 0;
      if (!checkedMul(delta, stride[i], cf))
        return why = "a window position that overflows", false;
      if (cf != 0)
        w.coeff.push_back({axes[i], cf});
    }
    std::sort(w.coeff.begin(), w.coeff.end());
  }
  d.windows = first;
  d.insert(d.end(), axes.begin(), axes.end());
  normalizeWindows(mesh, d, global);
  return true;
}

bool blocksStacked(const TermPool &terms, TermId t, int64_t e, int64_t n, TermId &y,
                   int64_t &d, Shape &whole) {
  int64_t cd;
  if (n < 2 || !concatDim(terms, t, cd) || cd != e)
    return false;
  auto ops = terms.operands(t);
  if ((int64_t)ops.size() != n)
    return false;
  d = -1;
  for (int64_t k = 0; k < n; ++k) {
    TermId input;
    std::vector<int64_t> off, size;
    if (!sliceParts(terms, ops[k], input, off, size) || (k > 0 && input != y))
      return false;
    if (k == 0) {
      y = input;
      whole = terms.shapeOf(y);
      if (off.size() != whole.size() || e < 0 || e >= (int64_t)whole.size())
        return false;
      for (size_t x = 0; x < whole.size(); ++x)
        if (size[x] != whole[x])
          d = d < 0 ? (int64_t)x : -2;
      if (d < 0 || d == e || whole[d] % n != 0)
        return false;
    }
    for (size_t x = 0; x < whole.size(); ++x) {
      bool ok = (int64_t)x == d ? off[x] == k * (whole[d] / n) && size[x] == whole[d] / n
                                : off[x] == 0 && size[x] == whole[x];
      if (!ok)
        return false;
    }
  }
  return true;
}

bool unstackWindows(RuleContext &c, State &s, int64_t e, const std::vector<int> &axes) {
  if (e < 0 || e >= (int64_t)s.split.size() || s.split[e].windows.empty())
    return false;
  int64_t n = c.size(axes);
  TermId y = 0;
  int64_t d = -1;
  Shape whole;
  if (!blocksStacked(c.terms, s.term, e, n, y, d, whole) || whole.size() != s.global.size() ||
      whole[e] * n != s.global[e] || !s.split[d].empty() || !s.split[d].windows.empty())
    return false;
  // Each window moves by one whole piece per step of the group's position, and stays
  // within the piece: the rank at position k holds rows of piece k, y's block k of d.
  std::vector<int64_t> stride = groupStrides(c.mesh, axes);
  std::vector<Window> inner;
  for (const Window &w : s.split[e].windows) {
    if (w.zero)
      return false;
    Window v = w;
    v.coeff.clear();
    for (auto [a, cf] : w.coeff) {
      auto at = std::find(axes.begin(), axes.end(), a);
      if (at == axes.end()) {
        v.coeff.push_back({a, cf});
        continue;
      }
      int64_t want = 0;
      if (!checkedMul(whole[e], stride[at - axes.begin()], want) || cf != want)
        return false;
    }
    for (size_t i = 0; i < axes.size(); ++i) // every axis of the group moves it
      if (!std::any_of(w.coeff.begin(), w.coeff.end(),
                       [&](const auto &p) { return p.first == axes[i]; }))
        return false;
    int64_t lo = 0, hi = 0;
    if (!windowReach(c.mesh, v, lo, hi) || lo < 0 || hi > whole[e])
      return false;
    inner.push_back(v);
  }
  DimSplit rest;
  for (int a : s.split[e])
    if (std::find(axes.begin(), axes.end(), a) == axes.end())
      rest.push_back(a);
  rest.windows = inner;
  normalizeWindows(c.mesh, rest, whole[e]);
  s.term = y;
  s.global = whole;
  s.split[d].assign(axes.begin(), axes.end());
  s.split[e] = rest;
  return true;
}

void narrowToPiece(RuleContext &c, State &s, int64_t d) {
  int64_t cd;
  if (d < 0 || d >= (int64_t)s.split.size() || s.split[d].windows.empty() ||
      !concatDim(c.terms, s.term, cd) || cd != d)
    return;
  int64_t lo = INT64_MAX, hi = INT64_MIN;
  for (const Window &w : s.split[d].windows) {
    int64_t l = 0, h = 0;
    if (w.zero || !windowReach(c.mesh, w, l, h))
      return;
    lo = std::min(lo, l);
    hi = std::max(hi, h);
  }
  int64_t at = 0;
  for (TermId piece : c.terms.operands(s.term)) {
    int64_t rows = c.terms.shapeOf(piece)[d];
    if (lo >= at && hi <= at + rows) {
      for (Window &w : s.split[d].windows)
        w.base -= at;
      s.term = piece;
      s.global[d] = rows;
      normalizeWindows(c.mesh, s.split[d], rows);
      return;
    }
    at += rows;
  }
}

std::vector<Window> stackedWindows(const Mesh &mesh, const std::vector<int> &axes,
                                   int64_t rows, int64_t n) {
  std::vector<Window> block = plainWindows(mesh, axes, rows), out;
  if (block.size() != 1)
    return {};
  for (int64_t k = 0; k < n; ++k) {
    Window w = block[0];
    if (!checkedMul(k, rows, w.base))
      return {};
    out.push_back(w);
  }
  return out;
}

} // namespace planproof::layouts
