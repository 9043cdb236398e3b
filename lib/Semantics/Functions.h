//===- Functions.h - the non-polynomial scalar functions --------*- C++ -*-===//
//
// The scalar functions that are not polynomials (GeLU, its derivative, max). Each is
// defined here once: its name, its arity, its numeric value, and the algebraic facts
// the symbolic engine may use. The symbolic engine treats them as uninterpreted
// functions (congruence only), except max, which is commutative, associative and
// idempotent, and which the solver encodes exactly.
//
//===----------------------------------------------------------------------===//
#ifndef PLANPROOF_SEMANTICS_FUNCTIONS_H
#define PLANPROOF_SEMANTICS_FUNCTIONS_H

#include "Semantics/Scalar.h"

#include <cmath>
#include <cstdint>
#include <vector>

namespace planproof {

enum class Fn : uint8_t {
  Gelu, GeluDeriv, Max, Exp, Log, Rsqrt, Recip, Silu, SiluDeriv,
  /// An unexpanded product of two large polynomials (see ExprPool::mul): exact, not a
  /// function of its own; kept as an atom so that expressions stay small.
  Product,
  /// The indicator [a == b] of integer values (token ids against table rows).
  Eq,
  Sqrt,
  /// A dropout mask element drawn from a counter-based generator: dropmask(key,
  /// counter, p) is 1/(1-p) with probability 1-p and 0 otherwise. Uninterpreted for
  /// proofs (only which (key, counter) pair is drawn matters); numerically the
  /// generator below.
  DropMask,
  /// pow(base, exponent) for an integer exponent (a step counter).
  Pow,
  /// topk(x_0, ..., x_{n-1}, e, k): 1 when x_e is among the k largest of the x's (ties
  /// to the lower index), else 0 -- a router's expert selection. Piecewise constant:
  /// the solver encodes it exactly by counting the x's that beat x_e.
  TopK,
  /// The hyperbolic tangent and the logistic sigmoid 1 / (1 + exp(-x)).
  Tanh, Logistic,
  /// The Heaviside step [x > 0]: piecewise constant, encoded exactly by the solver.
  Step
};

struct FnInfo {
  const char *name;
  /// Commutative, associative and idempotent: arguments may be flattened, sorted
  /// and deduplicated (max).
  bool lattice;
  /// Piecewise-polynomial: the solver encodes it exactly (max, indicators), so Z3 can
  /// decide what canonical forms leave open.
  bool solverExact;
};

inline const FnInfo &fnInfo(Fn f) {
  static const FnInfo infos[] = {
      {"gelu", false, false},
      {"gelu'", false, false},
      {"max", true, true},
      {"exp", false, false},
      {"log", false, false},
      {"rsqrt", false, false},
      {"recip", false, false},
      {"silu", false, false},
      {"silu'", false, false},
      {"product", false, false},
      {"eq", false, true},
      {"sqrt", false, false},
      {"dropmask", false, false},
      {"pow", false, false},
      {"topk", false, true},
      {"tanh", false, false},
      {"logistic", false, false},
      {"step", false, true},
  };
  return infos[(int)f];
}

/// The uniform number in [0, 1) a counter-based generator draws for (key, counter)
/// (Scalar.h). The proofs never depend on it -- they only use which pairs are drawn --
/// but the numeric engines (counterexamples, replay) need one fixed definition.
inline double counterUniform(uint64_t key, uint64_t counter) {
  return scalar::counterUniform(key, counter);
}

/// The numeric value of `f` at `args` (the scalar definitions live in Scalar.h, shared
/// with device code).
inline double evalFn(Fn f, const std::vector<double> &args) {
  // Missing arguments read as 0 (every caller passes the function's arity).
  double a0 = args.size() > 0 ? args[0] : 0, a1 = args.size() > 1 ? args[1] : 0,
         a2 = args.size() > 2 ? args[2] : 0;
  switch (f) {
  case Fn::Gelu: return scalar::gelu(a0);
  case Fn::GeluDeriv: return scalar::geluDeriv(a0);
  case Fn::Exp: return std::exp(a0);
  case Fn::Log: return std::log(a0);
  case Fn::Rsqrt: return scalar::rsqrt(a0);
  case Fn::Recip: return scalar::recip(a0);
  case Fn::Silu: return scalar::silu(a0);
  case Fn::SiluDeriv: return scalar::siluDeriv(a0);
  case Fn::Sqrt: return std::sqrt(a0);
  case Fn::Tanh: return std::tanh(a0);
  case Fn::Logistic: return scalar::logistic(a0);
  case Fn::Step: return a0 > 0 ? 1.0 : 0.0;
  case Fn::Eq: return a0 == a1 ? 1.0 : 0.0;
  case Fn::Pow: return std::pow(a0, a1);
  case Fn::DropMask: return scalar::dropMask(a0, a1, a2);
  case Fn::TopK: return scalar::topkSelected(args.data(), (int64_t)args.size() - 2,
                                              (int64_t)args[args.size() - 2],
                                              (int64_t)args.back());
  case Fn::Product: {
    double p = 1;
    for (double a : args)
      p *= a;
    return p;
  }
  case Fn::Max: {
    double m = a0;
    for (double a : args)
      m = a > m ? a : m;
    return m;
  }
  }
  return 0;
}

/// Whether `f` is undefined on the whole interval [lo, hi] (a logarithm or root of
/// certainly negative values, the reciprocal of exactly 0): a value computed from it
/// certainly does not exist.
inline bool fnOutsideDomain(Fn f, double lo, double hi) {
  switch (f) {
  case Fn::Log:
  case Fn::Rsqrt:
    return hi <= 0;
  case Fn::Sqrt:
    return hi < 0;
  case Fn::Recip:
    return lo == 0 && hi == 0;
  default:
    return false;
  }
}

/// An enclosure of a unary function over an interval: [outLo, outHi] contains f(t)
/// for every t in [lo, hi] (inputs are finite doubles, lo <= hi), with a margin for
/// the C library's rounding (at most a few ulps; 2^-44 relative is allowed). Returns
/// false where f is undefined on part of the interval or the bounds are not finite.
/// Used to confirm counterexamples exactly (Engine/ExactEval): a difference is only
/// reported when the enclosures of the two sides are disjoint.
inline bool fnEnclosure(Fn f, double lo, double hi, double &outLo, double &outHi) {
  auto widen = [&](double a, double b) {
    double m = 0x1p-44 * std::max(std::fabs(a), std::fabs(b)) + 0x1p-1000;
    outLo = a - m;
    outHi = b + m;
    return std::isfinite(outLo) && std::isfinite(outHi);
  };
  // Lipschitz functions: f(mid) +- L * radius. The constants bound |f'| over the reals:
  // gelu' in [-0.17, 1.13], silu' in [-0.1, 1.1], gelu'' in [-0.18, 0.8],
  // silu'' in [-0.1, 0.5].
  auto lipschitz = [&](double L) {
    double mid = lo + (hi - lo) / 2;
    double r = std::max(hi - mid, mid - lo) * (1 + 0x1p-40);
    double v = evalFn(f, {mid});
    return widen(v - L * r, v + L * r);
  };
  switch (f) {
  case Fn::Exp:
    return widen(std::exp(lo), std::exp(hi));
  case Fn::Log:
    return lo > 0 && widen(std::log(lo), std::log(hi));
  case Fn::Sqrt:
    return lo >= 0 && widen(std::sqrt(lo), std::sqrt(hi));
  case Fn::Tanh: // increasing
    return widen(std::tanh(lo), std::tanh(hi));
  case Fn::Logistic: // increasing
    return widen(scalar::logistic(lo), scalar::logistic(hi));
  case Fn::Step: // nondecreasing, exact values
    outLo = lo > 0 ? 1.0 : 0.0;
    outHi = hi > 0 ? 1.0 : 0.0;
    return true;
  case Fn::Rsqrt:
    return lo > 0 && widen(scalar::rsqrt(hi), scalar::rsqrt(lo));
  case Fn::Recip:
    return (lo > 0 || hi < 0) && widen(1.0 / hi, 1.0 / lo);
  case Fn::Gelu:
    return lipschitz(1.13);
  case Fn::Silu:
    return lipschitz(1.1);
  case Fn::GeluDeriv:
    return lipschitz(0.8);
  case Fn::SiluDeriv:
    return lipschitz(0.5);
  default:
    return false; // not unary: handled exactly by the evaluator
  }
}

} // namespace planproof

#endif
