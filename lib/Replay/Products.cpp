//===- Products.cpp - the numeric replay's matrix products at machine speed -===//
//
// See Products.h for what is computed. The exact kernels pack both operands into
// contiguous rows (A as I x K, B as K x J), then for a block of output rows and a
// block of output columns accumulate over k in the run's order: the vector lanes are
// output columns, so each output element still sees its products one at a time, in
// order, with the same roundings as the element-wise definition. This file is compiled
// with -ffp-contract=off: a fused multiply-add would skip the product's rounding.
//
//===----------------------------------------------------------------------===//
#include "Replay/Products.h"
#include "Semantics/Scalar.h"

#include <cblas.h>

#include <algorithm>
#include <cstring>
#include <vector>

using namespace planproof;
using namespace planproof::replay;

namespace {

// The kernels are inlined into each instruction-set copy of `dispatch` below, so that
// each copy vectorizes them for its instruction set.
#define Inline inline __attribute__((always_inline))

/// Round to bf16 (to nearest, ties to even), as scalar::roundBf16, written without a
/// branch so that the loops around it vectorize.
Inline float bf16(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  uint32_t r = (bits + 0x7fffu + ((bits >> 16) & 1u)) & 0xffff0000u;
  float y;
  std::memcpy(&y, &r, 4);
  return x != x ? x : y;
}

/// One storage precision: T is the accumulation type, `round` the rounding of a
/// product and of the final sum to storage.
template <ReplayDtype S> struct Prec;
template <> struct Prec<ReplayDtype::F64> {
  using T = double;
  static Inline T round(T x) { return x; }
};
template <> struct Prec<ReplayDtype::F32> {
  using T = float;
  static Inline T round(T x) { return x; }
};
template <> struct Prec<ReplayDtype::BF16> {
  using T = float;
  static Inline T round(T x) { return bf16(x); }
};

constexpr int64_t kRows = 4;   // output rows sharing one pass over B's column block
constexpr int64_t kCols = 256; // output columns per block (kRows x kCols accumulators)

/// Forward or reversed sums of one batch: out (I x J) from packed A (I x K), B (K x J).
template <ReplayDtype S>
Inline void sequential(bool reverse, int64_t I, int64_t J, int64_t K, const typename Prec<S>::T *A,
                const typename Prec<S>::T *B, double *out) {
  using T = typename Prec<S>::T;
  alignas(64) T acc[kRows][kCols];
  for (int64_t j0 = 0; j0 < J; j0 += kCols) {
    int64_t jw = std::min(kCols, J - j0);
    for (int64_t i0 = 0; i0 < I; i0 += kRows) {
      int64_t rw = std::min(kRows, I - i0);
      for (int64_t r = 0; r < rw; ++r)
        for (int64_t j = 0; j < jw; ++j)
          acc[r][j] = T(0);
      for (int64_t kk = 0; kk < K; ++kk) {
        int64_t k = reverse ? K - 1 - kk : kk;
        const T *brow = B + k * J + j0;
        for (int64_t r = 0; r < rw; ++r) {
          T av = A[(i0 + r) * K + k];
          T *ac = acc[r];
          for (int64_t j = 0; j < jw; ++j)
            ac[j] += Prec<S>::round(av * brow[j]);
        }
      }
      for (int64_t r = 0; r < rw; ++r)
        for (int64_t j = 0; j < jw; ++j)
          out[(i0 + r) * J + j0 + j] = (double)Prec<S>::round(acc[r][j]);
    }
  }
}

/// Pairwise sums of one batch: the binary tree over k that sums pairs (0,1), (2,3), ...
/// level by level, an odd last element carried up a level. Built as the products
/// stream in, like a binary counter: after c products, level l holds the sum of a
/// complete block of 2^l products where bit l of c is set; a new product merges with
/// the occupied levels below the first free one. At the end the levels are combined
/// from the smallest up. This gives the same tree as the level-by-level definition for
/// every K (checked against it in the unit tests), holding log2(K) partial sums instead
/// of K products.
template <ReplayDtype S>
Inline void pairwise(int64_t I, int64_t J, int64_t K, const typename Prec<S>::T *A,
                     const typename Prec<S>::T *B, double *out) {
  using T = typename Prec<S>::T;
  constexpr int kLevels = 64;
  std::vector<T> levels((size_t)kLevels * kRows * kCols);
  auto level = [&](int l, int64_t r) { return &levels[((size_t)l * kRows + r) * kCols]; };
  alignas(64) T t[kRows][kCols];
  for (int64_t j0 = 0; j0 < J; j0 += kCols) {
    int64_t jw = std::min(kCols, J - j0);
    for (int64_t i0 = 0; i0 < I; i0 += kRows) {
      int64_t rw = std::min(kRows, I - i0);
      for (uint64_t c = 0; c < (uint64_t)K; ++c) {
        const T *brow = B + c * J + j0;
        // Levels 0 .. top-1 are occupied (the trailing ones of c): the new product
        // merges with each of them, in one pass per level, into level `top`.
        int top = 0;
        while ((c >> top) & 1)
          ++top;
        for (int64_t r = 0; r < rw; ++r) {
          T av = A[(i0 + r) * K + c];
          T *dst = level(top, r);
          if (top == 0) {
            for (int64_t j = 0; j < jw; ++j)
              dst[j] = Prec<S>::round(av * brow[j]);
            continue;
          }
          const T *l0 = level(0, r);
          for (int64_t j = 0; j < jw; ++j)
            dst[j] = l0[j] + Prec<S>::round(av * brow[j]);
          for (int l = 1; l < top; ++l) {
            const T *src = level(l, r);
            for (int64_t j = 0; j < jw; ++j)
              dst[j] = src[j] + dst[j];
          }
        }
      }
      bool any = false;
      for (int l = 0; l < kLevels; ++l) {
        if (!(((uint64_t)K >> l) & 1))
          continue;
        for (int64_t r = 0; r < rw; ++r) {
          const T *s = level(l, r);
          for (int64_t j = 0; j < jw; ++j)
            t[r][j] = any ? s[j] + t[r][j] : s[j];
        }
        any = true;
      }
      for (int64_t r = 0; r < rw; ++r)
        for (int64_t j = 0; j < jw; ++j)
          out[(i0 + r) * J + j0 + j] = any ? (double)Prec<S>::round(t[r][j]) : 0.0;
    }
  }
}

/// Packs A[n] as I x K and B[n] as K x J rows in T; false if a value does not convert
/// exactly.
template <class T>
Inline bool pack(const ProductDims &p, int64_t n, const double *a, const double *b, std::vector<T> &A,
          std::vector<T> &B) {
  A.resize(p.I * p.K);
  B.resize(p.K * p.J);
  bool exact = true;
  for (int64_t i = 0; i < p.I; ++i)
    for (int64_t k = 0; k < p.K; ++k) {
      double x = a[n * p.aN + i * p.aI + k * p.aK];
      T t = (T)x;
      exact &= (double)t == x || x != x;
      A[i * p.K + k] = t;
    }
  for (int64_t k = 0; k < p.K; ++k)
    for (int64_t j = 0; j < p.J; ++j) {
      double x = b[n * p.bN + k * p.bK + j * p.bJ];
      T t = (T)x;
      exact &= (double)t == x || x != x;
      B[k * p.J + j] = t;
    }
  return exact;
}

template <ReplayDtype S>
Inline bool run(kernels::SumOrder order, const ProductDims &p, const double *a, const double *b, double *out) {
  using T = typename Prec<S>::T;
  std::vector<T> A, B;
  for (int64_t n = 0; n < p.N; ++n)
    if (!pack<T>(p, n, a, b, A, B))
      return false;
  for (int64_t n = 0; n < p.N; ++n) {
    pack<T>(p, n, a, b, A, B);
    double *o = out + n * p.I * p.J;
    if (order == kernels::SumOrder::Pairwise)
      pairwise<S>(p.I, p.J, p.K, A.data(), B.data(), o);
    else
      sequential<S>(order == kernels::SumOrder::Reverse, p.I, p.J, p.K, A.data(), B.data(), o);
  }
  return true;
}

// One copy of the kernels per instruction set; the loader picks the widest the
// processor has.
__attribute__((target_clones("avx512f", "avx2", "default"))) bool
dispatch(ReplayDtype storage, kernels::SumOrder order, const ProductDims &p, const double *a, const double *b,
         double *out) {
  switch (storage) {
  case ReplayDtype::F64:
    return run<ReplayDtype::F64>(order, p, a, b, out);
  case ReplayDtype::F32:
    return run<ReplayDtype::F32>(order, p, a, b, out);
  case ReplayDtype::BF16:
    return run<ReplayDtype::BF16>(order, p, a, b, out);
  }
  return false;
}

} // namespace

bool replay::exactProducts(ReplayDtype storage, kernels::SumOrder order, const ProductDims &dims,
                           const double *a, const double *b, double *out) {
  return dispatch(storage, order, dims, a, b, out);
}

void replay::blasProducts(const ProductDims &p, const double *a, const double *b, double *out) {
  std::vector<double> A(p.I * p.K), B(p.K * p.J);
  for (int64_t n = 0; n < p.N; ++n) {
    for (int64_t i = 0; i < p.I; ++i)
      for (int64_t k = 0; k < p.K; ++k)
        A[i * p.K + k] = a[n * p.aN + i * p.aI + k * p.aK];
    for (int64_t k = 0; k < p.K; ++k)
      for (int64_t j = 0; j < p.J; ++j)
        B[k * p.J + j] = b[n * p.bN + k * p.bK + j * p.bJ];
    double *o = out + n * p.I * p.J;
    if (p.K == 0) {
      std::fill(o, o + p.I * p.J, 0.0);
      continue;
    }
    if (p.I == 0 || p.J == 0)
      continue;
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)p.I, (int)p.J, (int)p.K, 1.0,
                A.data(), (int)p.K, B.data(), (int)p.J, 0.0, o, (int)p.J);
  }
}

std::string replay::blasName() { return std::string("OpenBLAS ") + openblas_get_config(); }
