//===- Relations.cpp - how a plan value relates to reference values -*- C++ -*-===//
#include "Engine/Relations.h"
#include "Dist/DistDialect.h"

#include "Semantics/OpSemantics.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>

using namespace planproof;

bool planproof::isGroupLeader(const Mesh &mesh, const Layout &layout, int64_t rank) {
  return !layout.isPartial() || mesh.positionInGroup(rank, layout.partialAxes()) == 0;
}

bool planproof::gatherElement(ExprPool &pool, const Mesh &mesh, const Layout &layout,
                              const std::vector<SymTensor> &perRank, int64_t rank, int64_t l,
                              PolyId &out) {
  SymbolicDomain d{pool};
  return gatherPartial(d, mesh, layout, perRank, rank, l, out);
}

namespace {
/// Where element `l` of rank `r`'s plan value sits in the reference value.
std::vector<int64_t> placeOf(const Mesh &mesh, const Layout &layout, int64_t r,
                             const SymTensor &local, int64_t l, const Shape &block,
                             const std::vector<int64_t> &offset) {
  std::vector<int64_t> idx = local.unravel(l);
  for (size_t k = 0; k < offset.size(); ++k)
    idx[k] += offset[k];
  return layout.globalIndex(mesh, r, block.empty() ? local.shape : block, idx);
}
} // namespace

bool RelationFinder::matches(const std::vector<SymTensor> &perRank, const SymTensor &ref,
                             const Layout &layout, Rational &scale, const Shape &block,
                             const std::vector<int64_t> &offset) {
  bool haveScale = false;
  scale = Rational(1);
  for (int64_t r = 0; r < (int64_t)perRank.size(); ++r) {
    if (!isGroupLeader(mesh, layout, r))
      continue;
    for (int64_t l = 0; l < (int64_t)perRank[r].data.size(); ++l) {
      PolyId got;
      if (!gatherElement(pool, mesh, layout, perRank, r, l, got))
        return false;
      std::vector<int64_t> at = placeOf(mesh, layout, r, perRank[r], l, block, offset);
      if (!Layout::inBounds(at, ref.shape))
        continue;
      PolyId want = ref.at(at);
      if (got == pool.zero() && want == pool.zero())
        continue;
      if (got == pool.zero() || want == pool.zero())
        return false;
      Rational c(1);
      if (got != want && !pool.proportional(got, want, c)) {
        if (!numericRatios && !pool.hasProductTerm(got) && !pool.hasProductTerm(want))
          return false;
        // Canonical forms with unexpanded products need not be proportional even when
        // the values are: accept a ratio that two independent evaluations agree on and
        // that is a small fraction. (Diagnostics only: verdicts never use relations.)
        double a1 = fingerprint(got), b1 = fingerprint(want);
        double a2 = fingerprint2(got), b2 = fingerprint2(want);
        if (!(std::isfinite(a1) && std::isfinite(b1) && std::isfinite(a2) && std::isfinite(b2)) ||
            b1 == 0 || b2 == 0)
          return false;
        double r1 = a1 / b1, r2 = a2 / b2;
        if (std::fabs(r1 - r2) > 1e-9 * std::max(1.0, std::fabs(r1)))
          return false;
        c = Rational::approximate(r1, 1e-12, 1024);
        if (c.isZero() || !c.isSmall() || c.denominator() > 1024 || c.numerator() > 1024 ||
            c.numerator() < -1024 || std::fabs(c.toDouble() - r1) > 1e-12 * std::fabs(r1))
          return false;
      }
      if (haveScale && c != scale)
        return false;
      haveScale = true;
      scale = c;
    }
  }
  return true;
}

/// One random assignment of the pool's inputs for fingerprints: reals in [0.5, 1.5];
/// an integer input with more than two values (a token id, bound N) an integer in
/// [0, N), as a lookup needs -- a real there would select no row, and every value
/// computed from the lookup would fingerprint as if the table were zero, so unrelated
/// values would look alike. (A 0/1 input, a mask, multiplies: a real keeps every
/// token's contribution, where 0 would erase it and 1 make it a constant.)
static void fingerprintInputs(const ExprPool &pool, uint64_t seed, std::vector<double> &out) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(0.5, 1.5);
  out.resize(pool.numInputs());
  for (uint32_t i = 0; i < out.size(); ++i) {
    int64_t bound = pool.input(i).bound;
    out[i] = bound > 2 ? (double)std::uniform_int_distribution<int64_t>(0, bound - 1)(rng)
                       : dist(rng);
  }
}

double RelationFinder::fingerprint(PolyId p) {
  if (fpInputs.size() != pool.numInputs()) {
    fingerprintInputs(pool, 0x9e3779b97f4a7c15ull, fpInputs);
    fpEval = std::make_unique<Evaluator>(pool);
    fpEval->reset(fpInputs);
  }
  return fpEval->poly(p);
}

double RelationFinder::fingerprint2(PolyId p) {
  if (fpInputs2.size() != pool.numInputs()) {
    fingerprintInputs(pool, 0x2545f4914f6cdd1dull, fpInputs2);
    fpEval2 = std::make_unique<Evaluator>(pool);
    fpEval2->reset(fpInputs2);
  }
  return fpEval2->poly(p);
}

bool RelationFinder::numericallyZero(const std::vector<SymTensor> &perRank) {
  for (const SymTensor &t : perRank)
    for (PolyId p : t.data)
      if (p != pool.zero() &&
          (std::fabs(fingerprint(p)) > 1e-12 || std::fabs(fingerprint2(p)) > 1e-12))
        return false;
  return true;
}

bool RelationFinder::matchesNumerically(const std::vector<SymTensor> &perRank,
                                        const SymTensor &ref, const Layout &layout,
                                        const Shape &block, const std::vector<int64_t> &offset) {
  bool haveScale = false;
  size_t maxAxes = 0;
  double scale = 1, avg = 1;
  for (auto &[axis, kind] : layout.partial) {
    maxAxes += kind == ReduceKind::Max;
    if (kind == ReduceKind::Avg)
      avg /= mesh.shape[axis];
  }
  bool allMax = maxAxes > 0 && maxAxes == layout.partial.size();
  if (maxAxes > 0 && !allMax)
    return false;
  auto close = [](double a, double b) {
    return std::fabs(a - b) <= 1e-9 * std::max({1.0, std::fabs(a), std::fabs(b)});
  };
  std::vector<int> partialAxes = layout.partialAxes();
  for (int64_t r = 0; r < (int64_t)perRank.size(); ++r) {
    if (!isGroupLeader(mesh, layout, r))
      continue;
    std::vector<int64_t> group = layout.isPartial() ? mesh.group(r, partialAxes)
                                                    : std::vector<int64_t>{r};
    for (int64_t l = 0; l < (int64_t)perRank[r].data.size(); ++l) {
      double got = allMax ? -INFINITY : 0;
      for (int64_t m : group) {
        double v = fingerprint(perRank[m].data[l]);
        got = allMax ? std::max(got, v) : got + v;
      }
      if (!allMax)
        got *= avg;
      std::vector<int64_t> at = placeOf(mesh, layout, r, perRank[r], l, block, offset);
      if (!Layout::inBounds(at, ref.shape))
        continue;
      double want = fingerprint(ref.at(at));
      if (!std::isfinite(got) || !std::isfinite(want))
        return false;
      if (close(got, 0) && close(want, 0))
        continue;
      if (close(got, 0) || close(want, 0))
        return false;
      double c = got / want;
      if (haveScale && !close(c, scale))
        return false;
      haveScale = true;
      scale = c;
    }
  }
  return true;
}

void RelationFinder::candidates(const Shape &local, const Shape &global,
                                const std::vector<int> &notPartial, std::vector<Layout> &out,
                                std::vector<std::pair<Layout, Shape>> &sub) {
  size_t rank = global.size();
  int axes = (int)mesh.axes.size();
  // Each mesh axis: replicate (-1), split dim d (0..rank-1), or partial (rank).
  std::vector<int> role(axes, -1);
  for (ReduceKind kind : {ReduceKind::Sum, ReduceKind::Avg, ReduceKind::Max}) {
    std::function<void(int)> rec = [&](int a) {
      if (a == axes) {
        Layout l;
        l.dims.assign(rank, {});
        for (int i = 0; i < axes; ++i) {
          if (role[i] >= 0 && role[i] < (int)rank)
            l.dims[role[i]].push_back(i);
          else if (role[i] == (int)rank)
            l.partial.push_back({i, kind});
        }
        if (kind != ReduceKind::Sum && !l.isPartial())
          return; // the non-partial layouts are enumerated once, with Sum
        Shape s;
        if (!l.localShape(mesh, global, s)) {
          // A split that does not divide: the padded layout (ZeRO flat buffers).
          l.padded = true;
          if (l.localShape(mesh, global, s) && s == local)
            out.push_back(std::move(l));
          return;
        }
        // The zigzag orders of the layout's splits (load-balanced context parallelism).
        std::vector<Layout> zigzags;
        if (zigzagCandidates)
          for (size_t d = 0; d < rank; ++d) {
            int64_t n = mesh.groupSize(l.dims[d]);
            if (l.dims[d].empty() || n < 2 || global[d] % (2 * n) != 0)
              continue;
            Layout z = l;
            z.segments.assign(rank, 1);
            z.segments[d] = dist::kZigzagSegments;
            zigzags.push_back(std::move(z));
          }
        for (int64_t k : segmentCandidates)
          for (size_t d = 0; d < rank; ++d) {
            int64_t n = mesh.groupSize(l.dims[d]);
            if (l.dims[d].empty() || n < 2 || k < 2 || global[d] % (k * n) != 0)
              continue;
            Layout z = l;
            z.segments.assign(rank, 1);
            z.segments[d] = k;
            zigzags.push_back(std::move(z));
          }
        if (s == local) {
          for (Layout &z : zigzags)
            out.push_back(std::move(z));
          out.push_back(std::move(l));
          return;
        }
        // Tiles only along a dimension the layout splits (the microbatches of a
        // rank's share of the batch): a tile of a replicated dimension is too often
        // just the wrong piece (a wrong head, the first rows on every rank).
        int differ = 0;
        bool tiles = true;
        for (size_t d = 0; d < rank; ++d)
          if (s[d] != local[d]) {
            ++differ;
            tiles &= local[d] > 0 && s[d] % local[d] == 0 && (!l.dims[d].empty() || replicatedTiles);
          }
        if (differ == 1 && tiles) {
          for (Layout &z : zigzags)
            sub.push_back({std::move(z), s});
          sub.push_back({std::move(l), s});
        }
        return;
      }
      bool mayBePartial = std::find(notPartial.begin(), notPartial.end(), a) == notPartial.end();
      for (int r = -1; r <= (int)rank - (mayBePartial ? 0 : 1); ++r) {
        role[a] = r;
        rec(a + 1);
      }
    };
    rec(0);
  }
}

std::vector<int> RelationFinder::exactCandidates(const std::vector<SymTensor> &perRank,
                                                 bool negated) {
  if (!indexed) {
    indexed = true;
    for (int i = 0; i < (int)refs.size(); ++i)
      for (PolyId p : refs[i].tensor->data) {
        double f = fingerprint(p);
        if (std::isfinite(f))
          fpIndex.push_back({f, i});
      }
    std::sort(fpIndex.begin(), fpIndex.end());
    fpIndex.erase(std::unique(fpIndex.begin(), fpIndex.end()), fpIndex.end());
  }
  std::vector<int> out;
  if (perRank.empty() || perRank[0].data.empty())
    return out;
  // The first element of rank 0 whose fingerprint is not 0 (zeros are everywhere).
  size_t l = 0;
  while (l + 1 < perRank[0].data.size() && fingerprint(perRank[0].data[l]) == 0)
    ++l;
  // It, and its sums over every group of mesh axes (the partial readings).
  size_t axes = std::min<size_t>(mesh.axes.size(), 6);
  for (uint32_t subset = 0; subset < (1u << axes); ++subset) {
    std::vector<int> group;
    for (size_t a = 0; a < axes; ++a)
      if (subset & (1u << a))
        group.push_back((int)a);
    // The element gathered over the group: its sum, its average, its maximum.
    double v = 0, mx = -INFINITY;
    for (int64_t m : mesh.group(0, group)) {
      double f = fingerprint(perRank[m].data[l]);
      v += f;
      mx = std::max(mx, f);
    }
    std::vector<double> readings{v};
    if (!group.empty()) {
      readings.push_back(v / (double)mesh.groupSize(group));
      readings.push_back(mx);
    }
    if (negated)
      for (size_t k = 0, n = readings.size(); k < n; ++k)
        readings.push_back(-readings[k]);
    for (double w : readings) {
      if (!std::isfinite(w))
        continue;
      double tol = 1e-9 * std::max(1.0, std::fabs(w));
      auto it = std::lower_bound(fpIndex.begin(), fpIndex.end(), std::make_pair(w - tol, -1));
      for (; it != fpIndex.end() && it->first <= w + tol; ++it)
        out.push_back(it->second);
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

Relation RelationFinder::find(const std::vector<SymTensor> &perRank,
                              const std::vector<int> &notPartial, const std::vector<int> *only) {
  Relation best, uniformPartial;
  std::vector<std::pair<int, std::vector<std::pair<Layout, Shape>>>> subCandidates;
  // Diagnostics only: on very large meshes stop searching rather than stall; the value
  // then reads as "no reference value", which only affects where a violation points.
  size_t budget = 200000;
  const Shape &local = perRank[0].shape;
  size_t count = only ? only->size() : refs.size();
  // The preferred values first (RefValue::preferred), for an exact relation only: a
  // scaled one reads best against the plainest value (its first).
  for (size_t k = 0; k < count && mesh.axes.size() <= 6; ++k) {
    int i = only ? (*only)[k] : (int)k;
    const SymTensor &ref = *refs[i].tensor;
    if (!refs[i].preferred || ref.shape.size() != local.size())
      continue;
    std::vector<Layout> layouts;
    std::vector<std::pair<Layout, Shape>> sub;
    candidates(local, ref.shape, notPartial, layouts, sub);
    for (const Layout &layout : layouts) {
      if (budget-- == 0)
        return best;
      Rational scale;
      if (matchesNumerically(perRank, ref, layout, {}, {}) && matches(perRank, ref, layout, scale) &&
          scale.isOne() && !uniformOverPartial(perRank, layout))
        return Relation{i, layout, scale, {}, {}};
    }
  }
  for (size_t k = 0; k < count; ++k) {
    int i = only ? (*only)[k] : (int)k;
    const SymTensor &ref = *refs[i].tensor;
    if (ref.shape.size() != local.size())
      continue;
    std::vector<Layout> layouts;
    std::vector<std::pair<Layout, Shape>> sub;
    if (mesh.axes.size() > 6)
      return best;
    candidates(local, ref.shape, notPartial, layouts, sub);
    for (const Layout &layout : layouts) {
      if (budget-- == 0)
        return best;
      Rational scale;
      if (!matchesNumerically(perRank, ref, layout, {}, {}) || !matches(perRank, ref, layout, scale))
        continue;
      if (scale.isOne() && uniformOverPartial(perRank, layout)) {
        // Every rank of the partial group holds the same value: "partial-sum over n
        // ranks" is then also "1/n of the replicated value"; a scaled replicated
        // reading (found later) explains a wrong factor better.
        if (!uniformPartial.related())
          uniformPartial = Relation{i, layout, scale, {}, {}};
        continue;
      }
      if (scale.isOne())
        return Relation{i, layout, scale, {}, {}};
      if (!best.related())
        best = Relation{i, layout, scale, {}, {}};
    }
    subCandidates.push_back({i, std::move(sub)});
  }
  // Then the microbatches: the plan value is one tile of the rank's block.
  for (auto &[i, sub] : subCandidates) {
    const SymTensor &ref = *refs[i].tensor;
    for (auto &[layout, block] : sub) {
      size_t d = 0;
      while (block[d] == local[d])
        ++d;
      for (int64_t k = 0; k < block[d] / local[d]; ++k) {
        if (budget-- == 0)
          return best;
        std::vector<int64_t> offset(local.size(), 0);
        offset[d] = k * local[d];
        Rational scale;
        if (!matchesNumerically(perRank, ref, layout, block, offset) ||
            !matches(perRank, ref, layout, scale, block, offset))
          continue;
        if (scale.isOne())
          return Relation{i, layout, scale, block, offset};
        if (!best.related())
          best = Relation{i, layout, scale, block, offset};
      }
    }
  }
  if (uniformPartial.related() && (!best.related() || best.layout.isPartial()))
    return uniformPartial;
  return best;
}

bool RelationFinder::uniformOverPartial(const std::vector<SymTensor> &perRank,
                                        const Layout &layout) const {
  if (!layout.isPartial())
    return false;
  std::vector<int> axes = layout.partialAxes();
  for (int64_t r = 0; r < (int64_t)perRank.size(); ++r)
    for (int64_t m : mesh.group(r, axes))
      if (perRank[m].data != perRank[r].data)
        return false;
  return true;
}

std::string RelationFinder::describe(const Relation &r) const {
  if (!r.related())
    return "no reference value under any layout";
  std::string s = r.scale.isOne() ? "" : r.scale.str() + " x ";
  std::string tile;
  for (size_t d = 0; d < r.offset.size(); ++d)
    if (!r.block.empty() && r.block[d] != 0)
      tile += (tile.empty() ? "" : ",") + std::to_string(r.offset[d]);
  if (!r.block.empty())
    tile = "; the tile at [" + tile + "] of each rank's block";
  return s + "reference `" + refs[r.ref].name + "` (" + r.layout.str(mesh) + tile + ")";
}
