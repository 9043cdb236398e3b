//===- ExactEval.h - exact evaluation of canonical polynomials ---*- C++ -*-===//
//
// A counterexample is only reported once it is *confirmed exactly*: the plan's and the
// reference's values at the witness are evaluated in exact rational arithmetic
// (GMP), and must differ. Double evaluation, which the search uses to find witnesses
// quickly, can report a difference that is only floating-point cancellation (a sum of
// x^65 terms split in two halves); exact evaluation cannot.
//
// Polynomials, unexpanded products, max, indicators, top-k and dropout masks are
// evaluated exactly at the witness (every double input is an exact dyadic rational).
// The transcendental functions (exp, log, gelu, ...) cannot be: each is enclosed in an
// interval (Semantics/Functions.h, fnEnclosure) and the enclosures are carried through
// the rest of the expression in exact interval arithmetic. Two values *certainly
// differ* when their enclosures are disjoint.
//
//===----------------------------------------------------------------------===//
#ifndef PLANPROOF_ENGINE_EXACTEVAL_H
#define PLANPROOF_ENGINE_EXACTEVAL_H

#include "Engine/Expr.h"

#include <gmpxx.h>

#include <unordered_map>
#include <vector>

namespace planproof {

/// A closed interval of rationals [lo, hi]; a point when lo == hi. Not `defined`
/// where a function is applied outside its domain (recip of an interval holding 0).
struct Enclosure {
  mpq_class lo, hi;
  bool defined = true;
  bool point() const { return defined && lo == hi; }
};

class ExactEvaluator {
public:
  explicit ExactEvaluator(const ExprPool &pool) : pool(pool) {}
  /// Starts a new assignment: input i takes the exact value of values[i].
  void reset(const std::vector<double> &values);
  Enclosure poly(PolyId p);

private:
  Enclosure atom(AtomId a);
  const ExprPool &pool;
  const std::vector<double> *inputs = nullptr;
  std::unordered_map<PolyId, Enclosure> polyMemo;
  std::unordered_map<AtomId, Enclosure> atomMemo;
};

/// Whether `plan` and `reference` certainly differ at `values` (disjoint exact
/// enclosures). `planValue` and `refValue` receive the enclosures' midpoints.
bool certainlyDifferent(const ExprPool &pool, PolyId plan, PolyId reference,
                        const std::vector<double> &values, double *planValue = nullptr,
                        double *refValue = nullptr);

} // namespace planproof

#endif
