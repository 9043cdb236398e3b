//===- ExactEval.h - confirming counterexamples exactly ----------*- C++ -*-===//
//
// A counterexample is only reported once it is *confirmed exactly*: the plan's and the
// reference's values at the witness must certainly differ. Double evaluation, which
// the search uses to find witnesses quickly, can report a difference that is only
// floating-point cancellation (a sum of x^65 terms split in two halves); enclosures
// cannot.
//
// Each value is enclosed in an interval that certainly contains the exact real value
// of its expression at the witness (every double input is an exact rational).
// Polynomials, unexpanded products, max, indicators, top-k and dropout masks are
// evaluated by interval arithmetic; the transcendental functions (exp, log, gelu, ...)
// through enclosures of their own (Semantics/Functions.h, fnEnclosure). Two values
// *certainly differ* when their enclosures are disjoint.
//
// Two number types share one evaluator: doubles rounded outwards (cheap; exact
// operations stay points, so integers and dyadic values are exact), and GMP rationals
// (exact, bounded in size by rounding outwards past a few thousand bits). The
// rationals run only when the doubles cannot decide.
//
//===----------------------------------------------------------------------===//
#ifndef PLANPROOF_ENGINE_EXACTEVAL_H
#define PLANPROOF_ENGINE_EXACTEVAL_H

#include "Engine/Expr.h"

#include <vector>

namespace planproof {

/// Whether `plan` and `reference` certainly differ at `values` (disjoint enclosures).
/// `planValue` and `refValue` receive midpoints of their enclosures (NaN where a
/// function is applied outside its domain).
bool certainlyDifferent(const ExprPool &pool, PolyId plan, PolyId reference,
                        const std::vector<double> &values, double *planValue = nullptr,
                        double *refValue = nullptr);

/// The values of `polys` at `values`, as midpoints of enclosures narrow enough to be
/// shown (the exact rational evaluation where the doubles' enclosure is wide): the
/// numbers a counterexample reports. NaN where undefined.
std::vector<double> enclosedValues(const ExprPool &pool, const std::vector<PolyId> &polys,
                                   const std::vector<double> &values);

} // namespace planproof

#endif
