//===- Kernels.h - per-element and per-row bodies of the device primitives -*- C++ -*-===//
//
// The arithmetic of each primitive of Device.h, written once as host/device functions:
// the host device calls them in loops, the CUDA device from one thread per element or
// per row. T is the storage type (double or float), Acc the accumulation type (double
// for fp64, float otherwise); `bf16` rounds every stored value to bfloat16.
//
//===----------------------------------------------------------------------===//
#ifndef PLANPROOF_REPLAY_KERNELS_H
#define PLANPROOF_REPLAY_KERNELS_H

#include "Semantics/Scalar.h"

namespace planproof {
namespace kernels {
namespace body {

/// Op codes as plain integers (shared with device code, which sees no enums of the
/// host headers).
enum : int { kForward = 0, kReverse = 1, kPairwise = 2 };
enum : int { kRowSum = 0, kRowMax = 1, kRowMean = 2 };
enum : int { kGroupSum = 0, kGroupAvg = 1, kGroupMax = 2 };
enum : int { kOrderRank = 0, kOrderRing = 1, kOrderTree = 2 };
enum : int {
  kCopy, kAdd, kSub, kMul, kScale, kFunction, kGeluGrad, kSiluGrad, kSgd, kMseGrad, kDiv,
  kMax, kMin, kDropMask
};
template <class T> PLANPROOF_HD inline T store(double x, bool bf16) {
  T v = (T)x;
  if (bf16)
    v = (T)scalar::roundBf16((float)v);
  return v;
}

/// A replay input element, rounded to the storage precision (fp32, or bf16 when `bf16`;
/// kept in fp64 when `wide`), whatever the width of the buffer it goes to.
PLANPROOF_HD inline double randomElement(double scale, uint64_t seed, uint64_t stream, uint64_t i,
                                         int64_t bound, bool wide, bool bf16) {
  double v = scale * scalar::inputValue(seed, stream, i, bound);
  return wide ? v : (double)store<float>(v, bf16);
}

/// Sum of get(0..n) in Acc, in order: forward, reverse, or pairwise (a binary tree of
/// adjacent pairs, kept as a stack of partial sums).
template <class Acc, class Get> PLANPROOF_HD inline Acc orderedSum(int64_t n, int order, Get get) {
  if (order == kPairwise) {
    Acc stack[64];
    int64_t count = 0;
    for (int64_t i = 0; i < n; ++i) {
      Acc s = get(i);
      int level = 0;
      for (; (count >> level) & 1; ++level)
        s = stack[level] + s;
      stack[level] = s;
      ++count;
    }
    Acc total = 0;
    bool any = false;
    for (int level = 0; level < 64; ++level)
      if ((count >> level) & 1) {
        total = any ? stack[level] + total : stack[level];
        any = true;
      }
    return total;
  }
  Acc s = 0;
  for (int64_t i = 0; i < n; ++i)
    s += get(order == kReverse ? n - 1 - i : i);
  return s;
}

/// One element of an elementwise map (math in double, stored rounded).
template <class T>
PLANPROOF_HD inline T mapElement(int kind, int fn, double p0, double p1, double p2, const T *x,
                                 int64_t nx, const T *y, int64_t ny, int64_t i, bool bf16) {
  double a = x ? (double)x[i % nx] : 0.0, b = y ? (double)y[i % ny] : 0.0;
  switch (kind) {
  case kCopy: return store<T>(a, bf16);
  case kAdd: return store<T>(a + b, bf16);
  case kSub: return store<T>(a - b, bf16);
  case kMul: return store<T>(a * b, bf16);
  case kScale: return store<T>(a * p0, bf16);
  case kFunction: return store<T>(scalar::unary(fn, a), bf16);
  case kGeluGrad: return store<T>((double)store<T>(scalar::geluDeriv(a), bf16) * b, bf16);
  case kSiluGrad: return store<T>((double)store<T>(scalar::siluDeriv(a), bf16) * b, bf16);
  case kSgd: return store<T>(a - (double)store<T>(b * p0, bf16), bf16);
  case kMseGrad: return store<T>((double)store<T>(a - b, bf16) * p0, bf16);
  case kDiv: return store<T>(a * (double)store<T>(1.0 / b, bf16), bf16);
  case kMax: return store<T>(a > b ? a : b, bf16);
  case kMin: return store<T>(a < b ? a : b, bf16);
  case kDropMask: return store<T>(scalar::dropMask(p0, p1 + (double)i, p2), bf16);
  }
  return 0;
}

/// Row reduction of in[0..len).
template <class T, class Acc>
PLANPROOF_HD inline T reduceRow(int kind, int order, const T *in, int64_t len, bool bf16) {
  if (kind == kRowMax) {
    double m = len ? (double)in[0] : 0.0;
    for (int64_t j = 1; j < len; ++j)
      m = (double)in[j] > m ? (double)in[j] : m;
    return store<T>(m, bf16);
  }
  Acc s = orderedSum<Acc>(len, order, [&](int64_t j) { return (Acc)in[j]; });
  T sum = store<T>((double)s, bf16);
  if (kind == kRowMean)
    return store<T>((double)sum / (double)len, bf16);
  return sum;
}

/// One element of a matrix product: sum_k A[i,k] B[k,j] of batch n, in Acc.
template <class T, class Acc>
PLANPROOF_HD inline T gemmElement(int order, const T *A, const T *B, int64_t n, int64_t i,
                                  int64_t j, int64_t I, int64_t J, int64_t K, bool lhsK, bool rhsK,
                                  bool bf16) {
  const T *a = A + n * I * K, *b = B + n * K * J;
  Acc s = orderedSum<Acc>(K, order, [&](int64_t k) {
    Acc x = (Acc)(lhsK ? a[i * K + k] : a[k * I + i]);
    Acc y = (Acc)(rhsK ? b[k * J + j] : b[j * K + k]);
    return x * y;
  });
  return store<T>((double)s, bf16);
}

/// Softmax of one row; causal rows see their first `allowed` columns.
template <class T, class Acc>
PLANPROOF_HD inline void softmaxRow(int order, const T *in, T *out, int64_t cols, int64_t allowed,
                                    bool bf16) {
  double m = allowed ? (double)in[0] : 0.0;
  for (int64_t j = 1; j < allowed; ++j)
    m = (double)in[j] > m ? (double)in[j] : m;
  Acc s = orderedSum<Acc>(allowed, order, [&](int64_t j) { return (Acc)exp((double)in[j] - m); });
  double inv = 1.0 / (double)s;
  for (int64_t j = 0; j < cols; ++j)
    out[j] = j < allowed ? store<T>(exp((double)in[j] - m) * inv, bf16) : (T)0;
}

/// RMSNorm or LayerNorm of one row.
template <class T, class Acc>
PLANPROOF_HD inline void normRow(int order, const T *x, const T *w, const T *b, T *out,
                                 int64_t width, double eps, bool layer, bool bf16) {
  double mu = 0;
  if (layer)
    mu = (double)orderedSum<Acc>(width, order, [&](int64_t j) { return (Acc)x[j]; }) / (double)width;
  Acc ss = orderedSum<Acc>(width, order, [&](int64_t j) {
    Acc c = (Acc)((double)x[j] - mu);
    return c * c;
  });
  double rs = scalar::rsqrt((double)ss / (double)width + eps);
  for (int64_t j = 0; j < width; ++j) {
    double y = ((double)x[j] - mu) * rs * (double)w[j];
    out[j] = store<T>(layer ? y + (double)b[j] : y, bf16);
  }
}

/// One element of the rotary embedding of x [.., S, width].
template <class T>
PLANPROOF_HD inline T rotaryElement(const T *x, const T *cs, const T *sn, int64_t l, int64_t S,
                                    int64_t width, bool bf16) {
  int64_t half = width / 2, dd = l % width, s = (l / width) % S;
  double rot = dd < half ? -(double)x[l + half] : (double)x[l - half];
  return store<T>((double)x[l] * (double)cs[s * width + dd] + rot * (double)sn[s * width + dd], bf16);
}

/// The masked cross-entropy of token t: mask * (logsumexp(row) - sum labels * row).
template <class T, class Acc>
PLANPROOF_HD inline T crossEntropyRow(int order, const T *x, const T *labels, const T *mask,
                                      int64_t t, int64_t V, bool bf16) {
  const T *row = x + t * V, *lab = labels + t * V;
  double m = V ? (double)row[0] : 0.0;
  for (int64_t v = 1; v < V; ++v)
    m = (double)row[v] > m ? (double)row[v] : m;
  Acc e = orderedSum<Acc>(V, order, [&](int64_t v) { return (Acc)exp((double)row[v] - m); });
  Acc picked = orderedSum<Acc>(V, order, [&](int64_t v) { return (Acc)lab[v] * (Acc)row[v]; });
  double lse = m + log((double)e);
  return store<T>((double)mask[t] * (lse - (double)picked), bf16);
}

/// Element (a, w) of an embedding lookup (a = token) or of its gradient (a = row).
template <class T, class Acc>
PLANPROOF_HD inline T embeddingElement(int order, bool lookup, const T *dense, const T *ids,
                                       int64_t a, int64_t w, int64_t T_, int64_t rows, int64_t W,
                                       int64_t offset, bool bf16) {
  if (lookup) {
    double v = (double)ids[a] - (double)offset;
    if (v >= 0 && v < (double)rows && v == floor(v))
      return store<T>((double)dense[(int64_t)v * W + w], bf16);
    return (T)0;
  }
  Acc s = orderedSum<Acc>(T_, order, [&](int64_t t) {
    return (double)ids[t] == (double)(offset + a) ? (Acc)dense[t * W + w] : (Acc)0;
  });
  return store<T>((double)s, bf16);
}

/// Element i of a collective's reduction over `n` group members (NumericDomain::groupSum
/// for sums: rank order, ring order starting at the next rank, or a binary tree).
template <class T, class Acc>
PLANPROOF_HD inline T groupElement(int kind, int order, const T *const *ins, int64_t n, int64_t i,
                                   bool bf16) {
  if (kind == kGroupMax) {
    double m = (double)ins[0][i];
    for (int64_t p = 1; p < n; ++p)
      m = (double)ins[p][i] > m ? (double)ins[p][i] : m;
    return store<T>(m, bf16);
  }
  T acc;
  if (order == kOrderTree) {
    // Adjacent pairs, each sum rounded to storage, the odd one carried.
    T w[64];
    int64_t m = n < 64 ? n : 64;
    for (int64_t p = 0; p < m; ++p)
      w[p] = ins[p][i];
    while (m > 1) {
      int64_t k = 0;
      for (int64_t p = 0; p + 1 < m; p += 2)
        w[k++] = store<T>((double)w[p] + (double)w[p + 1], bf16);
      if (m % 2)
        w[k++] = w[m - 1];
      m = k;
    }
    acc = w[0];
  } else {
    Acc s = 0;
    for (int64_t p = 0; p < n; ++p)
      s += (Acc)ins[order == kOrderRing ? (p + 1) % n : p][i];
    acc = store<T>((double)s, bf16);
  }
  if (kind == kGroupAvg)
    acc = store<T>((double)acc / (double)n, bf16);
  return acc;
}

} // namespace body
} // namespace kernels
} // namespace planproof

#endif
