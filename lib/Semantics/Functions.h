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

#include "Ref/ScalarFunctions.h"
#include "Semantics/Scalar.h"

#include <cmath>
#include <cstdint>
#include <vector>

namespace planproof {

/// The vocabulary of ScalarFunctions.def's columns.
namespace fn_facts {
enum Monotony { Increasing, Decreasing, StepUp, Lipschitz };
/// A set of reals: a function's domain, or the values it takes there (with Any for
/// the reals and SignOfArgument for "of the sign of its argument").
enum Domain { Reals, Positive, Nonnegative, Nonzero, SignOfArgument };
constexpr Domain Any = Reals;
enum Solver { Uninterpreted, Exact };

/// Whether the function is defined on all of [lo, hi].
inline bool insideDomain(Domain d, double lo, double hi) {
  switch (d) {
  case Reals: return true;
  case Positive: return lo > 0;
  case Nonnegative: return lo >= 0;
  case Nonzero: return lo > 0 || hi < 0;
  case SignOfArgument: break;
  }
  return false;
}
/// Whether the function is defined nowhere on [lo, hi].
inline bool outsideDomain(Domain d, double lo, double hi) {
  switch (d) {
  case Reals: return false;
  case Positive: return hi <= 0;
  case Nonnegative: return hi < 0;
  case Nonzero: return lo == 0 && hi == 0;
  case SignOfArgument: break;
  }
  return false;
}
} // namespace fn_facts

enum class Fn : uint8_t {
  /// The functions of one argument (dialects/Ref/ScalarFunctions.def), first and in
  /// that order, so that ref::ScalarFunction and the device codes convert by value.
#define PLANPROOF_SCALAR_FUNCTION(Name, ...) Name,
#include "Ref/ScalarFunctions.def"
  Max,
  /// An unexpanded product of two large polynomials (see ExprPool::mul): exact, not a
  /// function of its own; kept as an atom so that expressions stay small.
  Product,
  /// The indicator [a == b] of integer values (token ids against table rows).
  Eq,
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
};

/// The number of functions of one argument (the first values of Fn).
constexpr int kUnaryFunctions = 0
#define PLANPROOF_SCALAR_FUNCTION(Name, ...) +1
#include "Ref/ScalarFunctions.def"
    ;

inline bool isUnary(Fn f) { return (int)f < kUnaryFunctions; }

/// The engines' name of an elementwise function op's scalar function.
inline Fn toFn(ref::ScalarFunction f) { return Fn((int)f); }

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
#define PLANPROOF_SCALAR_FUNCTION(Name, label, value, shape, bound, domain, sign, solver) \
  {label, false, fn_facts::solver == fn_facts::Exact},
#include "Ref/ScalarFunctions.def"
      {"max", true, true},
      {"product", false, false},
      {"eq", false, true},
      {"dropmask", false, false},
      {"pow", false, false},
      {"topk", false, true},
  };
  static_assert(sizeof(infos) / sizeof(infos[0]) == (size_t)Fn::TopK + 1, "one entry per Fn");
  return infos[(int)f];
}

/// The values a function of one argument takes where it is defined (Any otherwise).
inline fn_facts::Domain fnValues(Fn f) {
  using namespace fn_facts;
  switch (f) {
#define PLANPROOF_SCALAR_FUNCTION(Name, label, value, shape, bound, domain, sign, solver) \
  case Fn::Name:                                                                        \
    return sign;
#include "Ref/ScalarFunctions.def"
  default:
    return Any;
  }
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
  if (isUnary(f))
    return scalar::unary((int)f, a0);
  switch (f) {
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
  default: // the functions of one argument, above
    break;
  }
  return 0;
}

/// Whether `f` is undefined on the whole interval [lo, hi] (a logarithm or root of
/// certainly negative values, the reciprocal of exactly 0): a value computed from it
/// certainly does not exist.
inline bool fnOutsideDomain(Fn f, double lo, double hi) {
  using namespace fn_facts;
  switch (f) {
#define PLANPROOF_SCALAR_FUNCTION(Name, label, value, shape, bound, domain, sign, solver) \
  case Fn::Name:                                                                        \
    return outsideDomain(domain, lo, hi);
#include "Ref/ScalarFunctions.def"
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
  using namespace fn_facts;
  auto enclose = [&](Monotony shape, double bound, Domain domain) {
    if (!insideDomain(domain, lo, hi))
      return false;
    switch (shape) {
    case Increasing:
      return widen(scalar::unary((int)f, lo), scalar::unary((int)f, hi));
    case Decreasing:
      return widen(scalar::unary((int)f, hi), scalar::unary((int)f, lo));
    case StepUp: // nondecreasing, exact values
      outLo = scalar::unary((int)f, lo);
      outHi = scalar::unary((int)f, hi);
      return true;
    case Lipschitz:
      return lipschitz(bound);
    }
    return false;
  };
  switch (f) {
#define PLANPROOF_SCALAR_FUNCTION(Name, label, value, shape, bound, domain, sign, solver) \
  case Fn::Name:                                                                        \
    return enclose(shape, bound, domain);
#include "Ref/ScalarFunctions.def"
  default:
    return false; // not unary: handled exactly by the evaluator
  }
}

} // namespace planproof

#endif
