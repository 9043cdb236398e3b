//===- Layout.h - meshes, layouts and the rank <-> element maps -*- C++ -*-===//
//
// The meaning of a layout, defined once: which block of a global tensor a rank holds,
// which ranks form the group of a collective, and how partial values combine. Used by
// the collectives' semantics, by scatter/gather in the engines, and by the verifier's
// relation inference.
//
//===----------------------------------------------------------------------===//
#ifndef PLANPROOF_SEMANTICS_LAYOUT_H
#define PLANPROOF_SEMANTICS_LAYOUT_H

#include "Semantics/Tensor.h"

#include <string>
#include <utility>
#include <vector>

namespace planproof {

enum class ReduceKind { Sum, Avg, Max };

inline const char *reduceKindName(ReduceKind k) {
  switch (k) {
  case ReduceKind::Sum: return "sum";
  case ReduceKind::Avg: return "avg";
  case ReduceKind::Max: return "max";
  }
  return "?";
}

inline bool parseReduceKind(const std::string &s, ReduceKind &k) {
  if (s == "sum") k = ReduceKind::Sum;
  else if (s == "avg") k = ReduceKind::Avg;
  else if (s == "max") k = ReduceKind::Max;
  else return false;
  return true;
}

/// Where element `i` of the block at `position` (of `parts`) of a dimension of `len`
/// elements lies in the whole. Blocks are consecutive; with a zigzag split whose last
/// (minor) axis has `inner` ranks, the dimension is first cut into parts/inner outer
/// blocks (by the other axes), each of them into 2*inner chunks, and the inner rank p
/// holds chunks p and 2*inner-1-p of its outer block.
inline int64_t blockToWhole(int64_t i, int64_t len, int64_t position, int64_t parts,
                            int64_t inner = 0) {
  if (inner <= 0)
    return position * (len / parts) + i;
  int64_t outer = position / inner, p = position % inner;
  int64_t blockLen = len / (parts / inner), chunk = blockLen / (2 * inner);
  int64_t which = i < chunk ? p : 2 * inner - 1 - p;
  return outer * blockLen + which * chunk + i % chunk;
}

struct Mesh {
  std::string name;
  std::vector<std::string> axes;
  std::vector<int64_t> shape;

  int64_t numRanks() const { return numElements(shape); }
  int axisIndex(const std::string &a) const {
    for (size_t i = 0; i < axes.size(); ++i)
      if (axes[i] == a)
        return (int)i;
    return -1;
  }
  std::vector<int64_t> coords(int64_t rank) const { return unravelIndex(shape, rank); }
  int64_t rankOf(const std::vector<int64_t> &c) const { return linearIndex(shape, c); }
  /// "(dp=1, tp=0)"
  std::string rankStr(int64_t rank) const {
    auto c = coords(rank);
    std::string s = "(";
    for (size_t i = 0; i < axes.size(); ++i)
      s += (i ? ", " : "") + axes[i] + "=" + std::to_string(c[i]);
    return s + ")";
  }
  int64_t groupSize(const std::vector<int> &groupAxes) const {
    int64_t n = 1;
    for (int a : groupAxes)
      n *= shape[a];
    return n;
  }
  /// Row-major position of `rank` among the ranks that differ from it only along
  /// `groupAxes` (ordered major to minor as listed).
  int64_t positionInGroup(int64_t rank, const std::vector<int> &groupAxes) const {
    auto c = coords(rank);
    int64_t p = 0;
    for (int a : groupAxes)
      p = p * shape[a] + c[a];
    return p;
  }
  /// The ranks that differ from `rank` only along `groupAxes`, in group order.
  std::vector<int64_t> group(int64_t rank, const std::vector<int> &groupAxes) const {
    auto c = coords(rank);
    int64_t n = groupSize(groupAxes);
    std::vector<int64_t> out(n);
    for (int64_t p = 0; p < n; ++p) {
      int64_t rest = p;
      for (size_t k = groupAxes.size(); k-- > 0;) {
        c[groupAxes[k]] = rest % shape[groupAxes[k]];
        rest /= shape[groupAxes[k]];
      }
      out[p] = rankOf(c);
    }
    return out;
  }
};

struct Layout {
  /// Per tensor dimension, the mesh axes (indices) splitting it, major to minor.
  std::vector<std::vector<int>> dims;
  /// Mesh axes holding partial values, with their kind.
  std::vector<std::pair<int, ReduceKind>> partial;
  /// Per dimension, the number of interleaved segments each split within (empty: 1).
  std::vector<int64_t> segments;
  /// Split dimensions that do not divide are padded (ZeRO/FSDP flat buffers): every
  /// rank's block has ceil(n / k) elements, and the last blocks end in padding, whose
  /// global index is past the end (see inBounds). Not with segments.
  bool padded = false;

  /// Segments of dimension d; a zigzag split (segment count -2 in `segments`) has 2,
  /// the second of them mirrored.
  int64_t segmentsOf(size_t d) const {
    int64_t k = d < segments.size() ? segments[d] : 1;
    return k < 0 ? -k : k;
  }
  bool zigzagAt(size_t d) const { return d < segments.size() && segments[d] < 0; }
  bool anyZigzag() const {
    for (int64_t k : segments)
      if (k < 0)
        return true;
    return false;
  }
  bool isPartial() const { return !partial.empty(); }
  bool operator==(const Layout &o) const {
    if (dims != o.dims || partial != o.partial || padded != o.padded)
      return false;
    for (size_t d = 0; d < dims.size(); ++d)
      if (segmentsOf(d) != o.segmentsOf(d) || zigzagAt(d) != o.zigzagAt(d))
        return false;
    return true;
  }

  std::vector<int> partialAxes() const {
    std::vector<int> a;
    for (auto &[ax, k] : partial)
      a.push_back(ax);
    return a;
  }

  /// The local shape of a global `shape` under this layout, or false when a split
  /// dimension does not divide by its axes.
  bool localShape(const Mesh &mesh, const Shape &global, Shape &local) const {
    local = global;
    for (size_t d = 0; d < dims.size() && d < global.size(); ++d) {
      int64_t n = mesh.groupSize(dims[d]) * segmentsOf(d);
      if (padded && segmentsOf(d) == 1) {
        local[d] = (global[d] + n - 1) / n;
        continue;
      }
      if (global[d] % n != 0)
        return false;
      local[d] = global[d] / mesh.groupSize(dims[d]);
    }
    return true;
  }

  /// Whether a global index (from globalIndex) is an element rather than padding.
  static bool inBounds(const std::vector<int64_t> &g, const Shape &global) {
    for (size_t d = 0; d < g.size(); ++d)
      if (g[d] < 0 || g[d] >= global[d])
        return false;
    return true;
  }

  /// The global coordinate in dimension `d` of local coordinate `x` of `rank`'s block
  /// (a layout's map is separable by dimension).
  int64_t globalCoord(const Mesh &mesh, int64_t rank, const Shape &localShape, size_t d,
                      int64_t x) const {
    if (d >= dims.size() || dims[d].empty())
      return x;
    // Segment k of the local block is block `position` of global segment k.
    int64_t G = mesh.groupSize(dims[d]);
    if (zigzagAt(d))
      return blockToWhole(x, localShape[d] * G, mesh.positionInGroup(rank, dims[d]), G,
                          zigzagInner(mesh, d));
    int64_t k = segmentsOf(d), piece = localShape[d] / k;
    int64_t segment = x / piece, within = x % piece;
    return segment * piece * G + mesh.positionInGroup(rank, dims[d]) * piece + within;
  }

  /// A run of `rank`'s block in one dimension: local coordinates [local, local + len)
  /// hold global coordinates [global, global + len).
  struct Run {
    int64_t local, global, len;
    bool operator==(const Run &o) const {
      return local == o.local && global == o.global && len == o.len;
    }
  };
  /// `rank`'s block in dimension d as maximal runs, in local order, of consecutive
  /// elements (a kernel copies each run at once); local coordinates whose global one is
  /// past `globalLen` (padding) are in no run. Derived from globalCoord, element by
  /// element, so the two cannot disagree.
  std::vector<Run> runs(const Mesh &mesh, int64_t rank, const Shape &localShape, size_t d,
                        int64_t globalLen) const {
    std::vector<Run> out;
    for (int64_t x = 0; x < localShape[d]; ++x) {
      int64_t g = globalCoord(mesh, rank, localShape, d, x);
      if (g < 0 || g >= globalLen)
        continue;
      if (!out.empty() && out.back().local + out.back().len == x &&
          out.back().global + out.back().len == g)
        ++out.back().len;
      else
        out.push_back({x, g, 1});
    }
    return out;
  }

  /// The global index of element `local` of `rank`'s block.
  std::vector<int64_t> globalIndex(const Mesh &mesh, int64_t rank, const Shape &localShape,
                                   const std::vector<int64_t> &local) const {
    std::vector<int64_t> g = local;
    for (size_t d = 0; d < g.size(); ++d)
      g[d] = globalCoord(mesh, rank, localShape, d, local[d]);
    return g;
  }

  /// Calls fn(l, at) for every element l (row-major) of `rank`'s block, `at` the
  /// row-major position of its global index in `global`, or -1 where that index is
  /// padding (past the end): globalIndex and inBounds for a whole block, with each
  /// dimension's map computed once.
  template <class Fn>
  void forEachElement(const Mesh &mesh, int64_t rank, const Shape &localShape,
                      const Shape &global, Fn fn) const {
    size_t n = localShape.size();
    std::vector<std::vector<int64_t>> at(n); // per dimension: stride * coordinate, or -1
    int64_t stride = 1, count = 1;
    for (size_t d = n; d-- > 0;) {
      at[d].resize(localShape[d]);
      for (int64_t x = 0; x < localShape[d]; ++x) {
        int64_t g = globalCoord(mesh, rank, localShape, d, x);
        at[d][x] = g < global[d] ? g * stride : -1;
      }
      stride *= global[d];
      count *= localShape[d];
    }
    std::vector<int64_t> idx(n, 0);
    for (int64_t l = 0; l < count; ++l) {
      int64_t pos = 0;
      for (size_t d = 0; d < n && pos >= 0; ++d)
        pos = at[d][idx[d]] < 0 ? -1 : pos + at[d][idx[d]];
      fn(l, pos);
      for (size_t d = n; d-- > 0;) {
        if (++idx[d] < localShape[d])
          break;
        idx[d] = 0;
      }
    }
  }

  /// The ranks of the zigzag (minor) axis of dimension d's split.
  int64_t zigzagInner(const Mesh &mesh, size_t d) const {
    return zigzagAt(d) && !dims[d].empty() ? mesh.shape[dims[d].back()] : 0;
  }

  /// Readable form, e.g. "sharded on dim 1 over tp, partial-sum over dp" or "replicated".
  std::string str(const Mesh &mesh) const {
    std::string s;
    for (size_t d = 0; d < dims.size(); ++d) {
      if (dims[d].empty())
        continue;
      s += (s.empty() ? "" : ", ") + std::string("sharded on dim ") + std::to_string(d) +
           " over ";
      for (size_t k = 0; k < dims[d].size(); ++k)
        s += (k ? "*" : "") + mesh.axes[dims[d][k]];
      if (zigzagAt(d))
        s += " in zigzag chunk order";
      else if (segmentsOf(d) != 1)
        s += " in " + std::to_string(segmentsOf(d)) + " interleaved segments";
      if (padded)
        s += " (padded)";
    }
    for (auto &[ax, kind] : partial)
      s += (s.empty() ? "" : ", ") + std::string("partial-") + reduceKindName(kind) +
           " over " + mesh.axes[ax];
    return s.empty() ? "replicated" : s;
  }
};

} // namespace planproof

#endif
