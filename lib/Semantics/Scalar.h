//===- Scalar.h - scalar numerics shared by host and device code -*- C++ -*-===//
//
// The numeric value of every non-polynomial scalar function (Functions.h names them),
// the counter-based generator behind dropout masks and replay inputs, and bfloat16
// rounding -- written once, callable from host C++ and from CUDA kernels
// (PLANPROOF_HD), so that the CPU replay, the kernel backend and the verifier's
// counterexample evaluation compute the same numbers.
//
// Only C math functions of the global namespace are used: they exist in host code and
// in CUDA device code alike.
//
//===----------------------------------------------------------------------===//
#ifndef PLANPROOF_SEMANTICS_SCALAR_H
#define PLANPROOF_SEMANTICS_SCALAR_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define PLANPROOF_HD __host__ __device__
#else
#define PLANPROOF_HD
#endif

namespace planproof {

/// The scalar functions, in the order of Fn (Functions.h).
namespace scalar {

PLANPROOF_HD inline uint64_t mix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/// The uniform number in [0, 1) a counter-based generator draws for (key, counter):
/// a stand-in for Philox (two rounds of the splitmix64 finalizer over the pair).
PLANPROOF_HD inline double counterUniform(uint64_t key, uint64_t counter) {
  uint64_t h = mix64(mix64(key) ^ counter);
  return double(h >> 11) * (1.0 / 9007199254740992.0);
}

/// Element `i` of replay input number `stream` drawn from `seed`: a standard normal
/// (Box-Muller over two counter draws), for `bound > 0` a uniform integer in [0, bound),
/// and for `bound < 0` the magnitude of a standard normal (nonnegative inputs). Counter-based, so any element can be drawn on its own, on any device.
PLANPROOF_HD inline double inputValue(uint64_t seed, uint64_t stream, uint64_t i, int64_t bound) {
  uint64_t key = mix64(seed * 0x100000001b3ull + stream);
  double u1 = counterUniform(key, 2 * i), u2 = counterUniform(key, 2 * i + 1);
  if (bound > 0) {
    int64_t v = (int64_t)(u1 * (double)bound);
    return (double)(v < bound ? v : bound - 1);
  }
  double r = sqrt(-2.0 * log(1.0 - u1)); // 1 - u1 is in (0, 1]
  double z = r * cos(6.283185307179586 * u2);
  return bound < 0 ? fabs(z) : z;
}

/// Rounds a float to bfloat16 (round to nearest even), kept as a float.
PLANPROOF_HD inline float roundBf16(float x) {
  if (x != x)
    return x;
  uint32_t bits;
  memcpy(&bits, &x, 4);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  bits &= 0xffff0000u;
  float y;
  memcpy(&y, &bits, 4);
  return y;
}

/// How many leading key columns causal query row `i` sees when the first query sits at
/// key position `offset`, among `cols` keys (ref.causal_softmax): j <= offset + i.
PLANPROOF_HD inline int64_t causalAllowed(int64_t i, int64_t offset, int64_t cols) {
  int64_t n = i + offset + 1;
  return n < 0 ? 0 : n > cols ? cols : n;
}

/// Whether a key at position `kp` is visible to a query at `qp` (ref.position_mask):
/// causal: kp <= qp; a window w > 0: qp - kp < w (and kp - qp < w when not causal).
PLANPROOF_HD inline bool positionVisible(int64_t qp, int64_t kp, bool causal, int64_t window) {
  if (causal && kp > qp)
    return false;
  if (window > 0 && (qp - kp >= window || kp - qp >= window))
    return false;
  return true;
}

/// 1 when x[e] is among the k largest of x[0..n) (ties go to the lower index), else 0:
/// a router's top-k expert selection (ref.topk_mask).
PLANPROOF_HD inline double topkSelected(const double *x, int64_t n, int64_t e, int64_t k) {
  int64_t beaten = 0;
  for (int64_t j = 0; j < n; ++j)
    if (x[j] > x[e] || (x[j] == x[e] && j < e))
      ++beaten;
  return beaten < k ? 1.0 : 0.0;
}

PLANPROOF_HD inline double gelu(double x) { return 0.5 * x * (1.0 + erf(x / sqrt(2.0))); }
PLANPROOF_HD inline double geluDeriv(double x) {
  double cdf = 0.5 * (1.0 + erf(x / sqrt(2.0)));
  double pdf = exp(-0.5 * x * x) / sqrt(2.0 * 3.14159265358979323846);
  return cdf + x * pdf;
}
PLANPROOF_HD inline double logistic(double x) { return 1.0 / (1.0 + exp(-x)); }
PLANPROOF_HD inline double silu(double x) { return x / (1.0 + exp(-x)); }
PLANPROOF_HD inline double siluDeriv(double x) {
  double sig = 1.0 / (1.0 + exp(-x));
  return sig * (1.0 + x * (1.0 - sig));
}
PLANPROOF_HD inline double rsqrt(double x) { return 1.0 / sqrt(x); }
PLANPROOF_HD inline double recip(double x) { return 1.0 / x; }
/// A dropout mask element: 1/(1-p) with probability 1-p, else 0.
PLANPROOF_HD inline double dropMask(double key, double counter, double p) {
  double u = counterUniform((uint64_t)(int64_t)llround(key), (uint64_t)(int64_t)llround(counter));
  return u >= p ? 1.0 / (1.0 - p) : 0.0;
}

/// Codes of the functions of one argument, in the order of ScalarFunctions.def (the
/// values of Fn and ref::ScalarFunction; device code sees no host enums).
enum UnaryCode : int {
#define PLANPROOF_SCALAR_FUNCTION(Name, ...) k##Name,
#include "Ref/ScalarFunctions.def"
  kUnaryCount
};

/// The value of function `fn` (a UnaryCode) at `x`; NaN for an unknown code.
PLANPROOF_HD inline double unary(int fn, double x) {
  switch (fn) {
#define PLANPROOF_SCALAR_FUNCTION(Name, label, value, ...)                                \
  case k##Name:                                                                          \
    return value;
#include "Ref/ScalarFunctions.def"
  }
  return NAN;
}

} // namespace scalar
} // namespace planproof

#endif
