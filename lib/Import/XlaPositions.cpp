//===- XlaPositions.cpp - integer values affine in the positions ---*- C++ -*-===//
//
// The part of the Translator (XlaTranslator.h) that keeps symbolic what a real
// sequence length makes too large to write out: `iota` and what broadcasts, sums,
// differences and constant multiples make of it are affine in the element's position
// (`Val::Affine`: per partition a constant, plus a coefficient per dimension); a
// comparison of two such values is a predicate on positions (`Val::PosPred`: a
// conjunction of half-planes `coeff . x + base >= 0`), kept through and, not,
// selects of true and false, broadcasts and reshapes. A select of float data on such a
// predicate that is a causal mask over a query and a key dimension -- keys at or
// before each query, optionally within a window -- is `position_mask` with the query
// offset (per partition, an index value fitted to the mesh coordinates) broadcast to
// the select's shape: `m * a + (1 - m) * b`, as the literal masks of XlaData.cpp.
// Small values are still evaluated element by element (XlaData.cpp); these forms take
// over where that would pass its limit, and a mask written out that differs between
// ranks is read back as such a predicate where it is one (maskAsPositions). Anything
// else on them is unsupported.
//
//===----------------------------------------------------------------------===//
#include "Import/XlaTranslator.h"

#include "Support/Limits.h"

#include <algorithm>

namespace planproof::xla {

namespace {

constexpr int64_t kEnumerated = 1 << 16;  // XlaData.cpp's limit per value

void overflow() {
  unsupported("integer overflow in position arithmetic");
}

int64_t add(int64_t a, int64_t b) {
  int64_t z;
  if (!checkedAdd(a, b, z))
    overflow();
  return z;
}

int64_t mul(int64_t a, int64_t b) {
  int64_t z;
  if (!checkedMul(a, b, z))
    overflow();
  return z;
}

/// The non-unit dimensions of `dims`, in order.
std::vector<size_t> nonUnit(const std::vector<int64_t> &dims) {
  std::vector<size_t> out;
  for (size_t d = 0; d < dims.size(); ++d)
    if (dims[d] != 1)
      out.push_back(d);
  return out;
}

/// Coefficients per dimension of `from` moved to `to`, a reshape that only adds or
/// removes dimensions of size 1; unsupported (naming `what`) for any other reshape.
std::vector<int64_t> reshaped(const std::vector<int64_t> &coeff, const std::vector<int64_t> &from,
                              const std::vector<int64_t> &to, const char *what) {
  std::vector<size_t> a = nonUnit(from), b = nonUnit(to);
  bool same = a.size() == b.size();
  for (size_t k = 0; same && k < a.size(); ++k)
    same = from[a[k]] == to[b[k]];
  if (!same)
    unsupported(std::string("a reshape of ") + what + " other than adding or removing "
                "dimensions of size 1");
  std::vector<int64_t> out(to.size(), 0);
  for (size_t k = 0; k < a.size(); ++k)
    out[b[k]] = coeff[a[k]];
  return out;
}

} // namespace

/// `x` (an Index value, enumerated or one number per partition, or Affine) as an Affine
/// value: each partition's constant and one coefficient per dimension, fitted at the
/// elements one step along each dimension and checked on every element; false when it
/// is not affine.
bool Translator::affineOf(const Val &x, Val &out) {
  if (x.kind == Val::Affine) {
    out = x;
    return true;
  }
  if (x.kind != Val::Index || product(x.dims) == 0)
    return false;
  for (const auto &row : x.idx)
    if (row.empty())
      return false;
  out = x;
  out.kind = Val::Affine;
  out.coeff.assign(x.dims.size(), 0);
  out.idx.assign(ranks, std::vector<int64_t>(1, 0));
  for (int64_t r = 0; r < ranks; ++r)
    out.idx[r][0] = x.idx[r][0];
  if (isSplat(x))
    return true;
  int64_t n = product(x.dims);
  std::vector<int64_t> stride(x.dims.size(), 1);
  for (int k = (int)x.dims.size() - 2; k >= 0; --k)
    stride[k] = stride[k + 1] * x.dims[k + 1];
  for (size_t d = 0; d < x.dims.size(); ++d)
    if (x.dims[d] > 1 && __builtin_sub_overflow(x.idx[0][stride[d]], x.idx[0][0], &out.coeff[d]))
      return false;
  for (int64_t r = 0; r < ranks; ++r)
    for (int64_t e = 0; e < n; ++e) {
      int64_t v = x.idx[r][0], t;
      for (size_t d = 0; d < x.dims.size(); ++d)
        if (!checkedMul(out.coeff[d], (e / stride[d]) % x.dims[d], t) || !checkedAdd(v, t, v))
          return false;
      if (v != x.idx[r][e])
        return false;
    }
  return true;
}

/// Integer ops whose result is too large to write out, or with an Affine or PosPred
/// operand; none for every other op (XlaData.cpp evaluates it).
std::optional<Val> Translator::positionsOp(const hlo::Instruction &inst,
                                           const std::vector<const Val *> &in) {
  const std::string &op = inst.opcode;
  std::vector<int64_t> dims = inst.shape.dims;
  bool symbolic = false, varying = op == "iota";
  for (auto *v : in) {
    symbolic |= v->kind == Val::Affine || v->kind == Val::PosPred;
    varying |= v->kind == Val::Index && !isSplat(*v);
  }
  // (Values one number per partition stay such: XlaData.cpp.)
  if (!symbolic && (product(dims) <= kEnumerated || !varying))
    return std::nullopt;
  for (auto *v : in)
    if (v->kind == Val::PosPred)
      return posPredOp(inst, in);
  Val v;
  v.kind = Val::Affine;
  v.type = inst.shape.type;
  v.dims = dims;
  v.coeff.assign(dims.size(), 0);
  v.idx.assign(ranks, std::vector<int64_t>(1, 0));
  auto affine = [&](size_t i) {
    Val a;
    if (i >= in.size() || !affineOf(*in[i], a))
      unsupported("'" + op + "' of an integer tensor of more than 2^16 elements that is not "
                  "affine in the positions");
    return a;
  };
  if (op == "iota" && in.empty()) {
    int64_t id = ints(attr("iota_dimension"), "iota_dimension").at(0);
    if (id < 0 || id >= (int64_t)dims.size())
      malformed("iota_dimension out of range");
    v.coeff[id] = 1;
    return v;
  }
  if (op == "broadcast" && in.size() == 1) {
    Val x = affine(0);
    std::vector<int64_t> bd = ints(attr("dimensions"), "broadcast dimensions");
    if (bd.size() != x.dims.size())
      malformed("broadcast dimensions do not match the operand's rank");
    for (size_t k = 0; k < bd.size(); ++k) {
      if (bd[k] < 0 || bd[k] >= (int64_t)dims.size() || dims[bd[k]] != x.dims[k])
        malformed("broadcast dimension " + std::to_string(k) + " out of range");
      v.coeff[bd[k]] = x.coeff[k];
    }
    v.idx = x.idx;
    return v;
  }
  if ((op == "reshape" || op == "bitcast" || op == "copy" || op == "convert") && in.size() == 1) {
    Val x = affine(0);
    v.coeff = reshaped(x.coeff, x.dims, dims, "an integer tensor affine in the positions");
    v.idx = x.idx;
    return v;
  }
  if ((op == "add" || op == "subtract" || op == "multiply") && in.size() == 2) {
    Val a = affine(0), b = affine(1);
    if (a.dims != dims || b.dims != dims)
      malformed("'" + op + "' operand shapes disagree");
    if (op == "multiply") {  // by a value constant over the positions
      bool aConst = std::all_of(a.coeff.begin(), a.coeff.end(), [](int64_t c) { return !c; });
      bool bConst = std::all_of(b.coeff.begin(), b.coeff.end(), [](int64_t c) { return !c; });
      if (!aConst && !bConst)
        unsupported("a product of two integer tensors that vary with the positions");
      const Val &k = aConst ? a : b, &x = aConst ? b : a;
      for (int64_t r = 0; r < ranks; ++r)
        if (k.idx[r][0] != k.idx[0][0] && std::any_of(x.coeff.begin(), x.coeff.end(), [](int64_t c) { return c; }))
          unsupported("positions scaled by a value that differs between partitions");
      for (size_t d = 0; d < dims.size(); ++d)
        v.coeff[d] = mul(x.coeff[d], k.idx[0][0]);
      for (int64_t r = 0; r < ranks; ++r)
        v.idx[r][0] = mul(x.idx[r][0], k.idx[r][0]);
      return v;
    }
    int64_t s = op == "add" ? 1 : -1;
    for (size_t d = 0; d < dims.size(); ++d)
      v.coeff[d] = add(a.coeff[d], mul(s, b.coeff[d]));
    for (int64_t r = 0; r < ranks; ++r)
      v.idx[r][0] = add(a.idx[r][0], mul(s, b.idx[r][0]));
    return v;
  }
  if (op == "compare" && in.size() == 2) {
    Val a = affine(0), b = affine(1);
    if (a.dims != dims || b.dims != dims)
      malformed("'compare' operand shapes disagree");
    // d = a - b; each plane `coeff . x + base >= 0`.
    Val::Plane p;
    p.coeff.resize(dims.size());
    for (size_t d = 0; d < dims.size(); ++d)
      p.coeff[d] = add(a.coeff[d], mul(-1, b.coeff[d]));
    p.base.resize(ranks);
    for (int64_t r = 0; r < ranks; ++r)
      p.base[r] = add(a.idx[r][0], mul(-1, b.idx[r][0]));
    auto negated = [&](Val::Plane q, int64_t minus) {  // -q - minus >= 0
      for (auto &c : q.coeff)
        c = mul(-1, c);
      for (auto &c : q.base)
        c = add(mul(-1, c), -minus);
      return q;
    };
    auto shifted = [&](Val::Plane q, int64_t by) {
      for (auto &c : q.base)
        c = add(c, by);
      return q;
    };
    Val out;
    out.kind = Val::PosPred;
    out.type = inst.shape.type;
    out.dims = dims;
    std::string dir = attr("direction");
    if (dir == "GE") out.planes = {p};
    else if (dir == "GT") out.planes = {shifted(p, -1)};
    else if (dir == "LE") out.planes = {negated(p, 0)};
    else if (dir == "LT") out.planes = {negated(p, 1)};
    else if (dir == "EQ") out.planes = {p, negated(p, 0)};
    else unsupported("a comparison of positions by '" + dir + "'");
    return out;
  }
  unsupported("'" + op + "' on an integer tensor of more than 2^16 elements (positions and "
              "masks: iota, broadcasts, sums, constant multiples, comparisons)");
}

/// Ops on predicates on positions: and, not, select of true and false, broadcasts and
/// reshapes.
Val Translator::posPredOp(const hlo::Instruction &inst, const std::vector<const Val *> &in) {
  const std::string &op = inst.opcode;
  std::vector<int64_t> dims = inst.shape.dims;
  auto pred = [&](size_t i) -> const Val & {
    if (i >= in.size() || in[i]->kind != Val::PosPred)
      unsupported("'" + op + "' mixing a predicate on positions with other values");
    return *in[i];
  };
  auto constant = [&](size_t i, int64_t &c) {
    if (i >= in.size() || in[i]->kind != Val::Index || !isSplat(*in[i]))
      return false;
    c = in[i]->idx[0][0];
    for (auto &row : in[i]->idx)
      if (row[0] != c)
        return false;
    return true;
  };
  auto notOf = [&](const Val &p) {
    if (p.planes.size() != 1)
      unsupported("the negation of a predicate on positions of more than one half-plane");
    Val v = p;
    for (auto &c : v.planes[0].coeff)
      c = mul(-1, c);
    for (auto &c : v.planes[0].base)
      c = add(mul(-1, c), -1);
    return v;
  };
  Val v;
  if (op == "not" && in.size() == 1) {
    v = notOf(pred(0));
  } else if (op == "and" && in.size() == 2) {
    v = pred(0);
    const Val &q = pred(1);
    v.planes.insert(v.planes.end(), q.planes.begin(), q.planes.end());
  } else if (op == "select" && in.size() == 3) {
    int64_t t, f;
    if (!constant(1, t) || !constant(2, f) || (t != 0) == (f != 0))
      unsupported("a select on a predicate on positions other than of true and false");
    v = t ? pred(0) : notOf(pred(0));
  } else if (op == "broadcast" && in.size() == 1) {
    const Val &p = pred(0);
    std::vector<int64_t> bd = ints(attr("dimensions"), "broadcast dimensions");
    if (bd.size() != p.dims.size())
      malformed("broadcast dimensions do not match the operand's rank");
    v = p;
    for (auto &plane : v.planes) {
      std::vector<int64_t> c(dims.size(), 0);
      for (size_t k = 0; k < bd.size(); ++k) {
        if (bd[k] < 0 || bd[k] >= (int64_t)dims.size() || dims[bd[k]] != p.dims[k])
          malformed("broadcast dimension " + std::to_string(k) + " out of range");
        c[bd[k]] = plane.coeff[k];
      }
      plane.coeff = c;
    }
  } else if ((op == "reshape" || op == "bitcast" || op == "copy" || op == "convert") &&
             in.size() == 1 && inst.shape.type == "pred") {
    const Val &p = pred(0);
    v = p;
    for (auto &plane : v.planes)
      plane.coeff = reshaped(plane.coeff, p.dims, dims, "a predicate on positions");
  } else {
    unsupported("'" + op + "' on a predicate on positions");
  }
  v.dims = dims;
  v.type = inst.shape.type;
  return v;
}

/// A mask known element by element on each rank (`idx`, over `dims`) that is, on every
/// rank r, the causal predicate `x_k - x_q <= c_r` over two dimensions q and k --
/// perhaps within a window, `c_r - w < x_k - x_q` -- and constant along the others:
/// that predicate on positions (XlaPositions.cpp), checked at every element; none
/// where no pair of dimensions fits.
std::optional<Val> Translator::maskAsPositions(const Val &p, const std::vector<int64_t> &dims) {
  int64_t n = product(dims);
  if (p.dims != dims || n > (int64_t(1) << 20))
    return std::nullopt;
  for (const auto &row : p.idx)
    if ((int64_t)row.size() != n)
      return std::nullopt;
  std::vector<int64_t> stride(dims.size(), 1);
  for (size_t d = dims.size(); d-- > 1;)
    stride[d - 1] = stride[d] * dims[d];
  // The query dimension: one of several rows first; else one row (a rank's one query
  // of a split sequence), the last such dimension first (heads and batch come before).
  std::vector<size_t> queries;
  for (size_t d = 0; d < dims.size(); ++d)
    if (dims[d] > 1)
      queries.push_back(d);
  for (size_t d = dims.size(); d-- > 0;)
    if (dims[d] == 1)
      queries.push_back(d);
  for (size_t q : queries)
    for (size_t k = 0; k < dims.size(); ++k) {
      if (q == k || dims[k] < 2)
        continue;
      std::vector<int64_t> c(ranks), w(ranks);
      bool fits = true, windowed = false;
      for (int64_t r = 0; r < ranks && fits; ++r) {
        int64_t hi = INT64_MIN, lo = INT64_MAX;
        for (int64_t e = 0; e < n; ++e)
          if (p.idx[r][e]) {
            int64_t delta = (e / stride[k]) % dims[k] - (e / stride[q]) % dims[q];
            hi = std::max(hi, delta), lo = std::min(lo, delta);
          }
        if (hi == INT64_MIN)
          fits = false;
        c[r] = hi, w[r] = hi - lo + 1;
        for (int64_t e = 0; e < n && fits; ++e) {
          int64_t delta = (e / stride[k]) % dims[k] - (e / stride[q]) % dims[q];
          fits = (p.idx[r][e] != 0) == (delta <= hi && delta >= lo);
        }
        // (A window only where some key before the lowest is cut off.)
        windowed |= lo > -(dims[q] - 1);
      }
      if (!fits)
        continue;
      Val v;
      v.kind = Val::PosPred;
      v.type = p.type;
      v.dims = dims;
      Val::Plane causal, window;
      causal.coeff.assign(dims.size(), 0);
      causal.coeff[q] = 1, causal.coeff[k] = -1;  // x_q - x_k + c >= 0
      causal.base = c;
      v.planes = {causal};
      if (windowed) {
        window.coeff.assign(dims.size(), 0);
        window.coeff[k] = 1, window.coeff[q] = -1;  // x_k - x_q + (w - 1 - c) >= 0
        for (int64_t r = 0; r < ranks; ++r)
          window.base.push_back(w[r] - 1 - c[r]);
        v.planes.push_back(window);
      }
      return v;
    }
  return std::nullopt;
}

/// select(p, a, b) of float data, p a causal mask over a query dimension i and a key
/// dimension j > i: one half-plane `x_i - x_j + c >= 0` (keys at most c after the query),
/// and perhaps `x_j - x_i + w >= 0` (at most w before it): position_mask with query
/// offset c (per partition), key offset 0 and window c + w + 1, broadcast to the
/// select's shape; then m * a + (1 - m) * b.
Val Translator::positionSelect(const std::vector<const Val *> &in) {
  const Val &p = *in[0];
  std::vector<int64_t> dims = dimsOf();
  if (p.dims != dims)
    unsupported("a select on a predicate on positions of another shape");
  int64_t qi = -1, kj = -1;
  const Val::Plane *causal = nullptr, *window = nullptr;
  for (const Val::Plane &plane : p.planes) {
    std::vector<size_t> used;
    for (size_t d = 0; d < plane.coeff.size(); ++d)
      if (plane.coeff[d])
        used.push_back(d);
    if (used.size() != 2 || plane.coeff[used[0]] != -plane.coeff[used[1]] ||
        std::abs(plane.coeff[used[0]]) != 1 || (qi >= 0 && (qi != (int64_t)used[0] || kj != (int64_t)used[1])))
      unsupported("a select on a mask of positions other than a causal mask (keys at or "
                  "before each query, within a window) over two dimensions");
    qi = used[0];
    kj = used[1];
    const Val::Plane *&slot = plane.coeff[qi] == 1 ? causal : window;
    if (slot)
      unsupported("a select on a mask of positions with two bounds on one side");
    slot = &plane;
  }
  if (!causal)
    unsupported("a select on a mask of positions that is not causal");
  int64_t w = 0;
  if (window) {
    for (int64_t r = 0; r < ranks; ++r) {
      int64_t width = add(add(causal->base[r], window->base[r]), 1);
      if (r > 0 && width != w)
        unsupported("a window of positions whose width differs between partitions");
      w = width;
    }
    if (w <= 0)
      unsupported("a mask of positions that no key satisfies");
  }
  checkTensor(*in[1]);
  checkTensor(*in[2]);
  std::vector<int64_t> zeros(ranks, 0);
  std::string q = rankValue(causal->base, cur->name + "_q"), k = rankValue(zeros, cur->name + "_k");
  json attrs = {{"causal", true}};
  if (w > 0)
    attrs["window"] = w;
  std::vector<int64_t> shape = {dims[qi], dims[kj]};
  std::string m = emit("position_mask", {q, k}, attrs, &shape, cur->name + "_mask");
  // (1 - m likewise in [Sq, Sk], then broadcast: a broadcast of the mask's complement,
  // whose copies take any split.)
  auto spread = [&](const std::string &x) {
    return dims.size() > 2 ? emit("broadcast", {x}, {{"dims", {qi, kj}}}, &dims, cur->name + "_b") : x;
  };
  std::string on = emit("mul", {spread(m), in[1]->name}, nullptr, nullptr, cur->name + "_on");
  if (!in[2]->scalarConst.empty() && floatLiteral(in[2]->scalarConst) == 0.0)
    return tensor(on, cur->shape.type, dims);
  std::string off = emit("mul", {spread(oneMinus(m, shape)), in[2]->name}, nullptr, nullptr,
                         cur->name + "_off");
  return tensor(emit("add", {on, off}, nullptr, nullptr, cur->name), cur->shape.type, dims);
}

} // namespace planproof::xla
