//===- Decide.h - deciding one element equality ----------------*- C++ -*-===//
//
// Decides `plan == reference` for one pair of canonical polynomials:
//   1. equal canonical forms: equal (no solver);
//   2. different canonical forms without max: unequal as polynomials over their atoms;
//      a concrete counterexample with every function at its real definition is
//      searched for and minimized, and only a concrete one yields *unequal* when
//      non-polynomial functions are involved (they are uninterpreted symbolically);
//   3. with max (piecewise linear), Z3 decides under a resource limit (counted work,
//      the same on every machine and load); a limit reached is *unknown*.
//
//===----------------------------------------------------------------------===//
#ifndef PLANPROOF_ENGINE_DECIDE_H
#define PLANPROOF_ENGINE_DECIDE_H

#include "Engine/Expr.h"
#include "Support/Deadline.h"

#include <cstdint>
#include <string>
#include <vector>

namespace planproof {

enum class Equality { Equal, Unequal, Unknown };

struct Decision {
  Equality result = Equality::Unknown;
  bool byCanonicalForm = false;
  bool usedSolver = false;
  /// For Unequal: a value for every input symbol of the pool (most are 0).
  std::vector<double> assignment;
  bool assignmentFromSolver = false;
  std::string reason; // for Unknown
  /// Z3's resource count spent on this decision (0 without the solver): the work that
  /// `solverRlimit` bounds, reported in a run's stats.
  uint64_t solverWork = 0;
};

/// What a decision may spend. Counted work only: a verdict must not depend on how busy
/// the machine is. `deadline` is the run's outer wall-clock bound (--time-limit); when
/// it ends a query, the run ends with its reason instead (Support/Deadline.h).
struct SolverBudget {
  /// Z3's resource limit per query (`rlimit`: a count of its basic steps, the same on
  /// every machine for the same query and Z3 version).
  uint64_t rlimit;
  const Deadline *deadline = nullptr;
};

/// `minimize`: shrink a concrete counterexample (inputs set to 0, else 1, while the
/// difference survives) so that reports stay readable -- up to 150 evaluations of both
/// expressions; off when only the verdict is wanted.
Decision decideEqual(ExprPool &pool, PolyId plan, PolyId reference, const SolverBudget &budget,
                     bool minimize = true);


/// Whether two numbers differ beyond double rounding.
bool numericallyDifferent(double a, double b);

} // namespace planproof

#endif
