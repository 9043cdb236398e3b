//===- Solver.h - Z3 under counted limits -----------------------*- C++ -*-===//
//
// Every Z3 query of planproof is bounded the same way: by Z3's resource limit (counted
// work, so the same query gets the same answer on any machine and load), with the
// run's wall-clock deadline only as the outer safety bound. When the deadline is what
// stopped a query, the run ends for its time limit (said as such in the report);
// otherwise an unknown is a budget reached, and says which option raises it.
//
//===----------------------------------------------------------------------===//
#ifndef PLANPROOF_ENGINE_SOLVER_H
#define PLANPROOF_ENGINE_SOLVER_H

#include "Engine/Decide.h"

#include <z3++.h>

#include <cstdint>
#include <string>

namespace planproof {

/// Sets Z3's limits on `solver`: `budget.rlimit`, and the wall-clock rest of the run's
/// deadline as its outer bound. Every Z3 query of planproof goes through it.
void limitSolver(z3::context &ctx, z3::solver &solver, const SolverBudget &budget);
/// The resource count `solver`'s last check spent (its statistics' "rlimit count").
uint64_t solverWorkOf(z3::solver &solver);
/// When the run's deadline ended a query Z3 left undecided, throws TimeLimit (the run
/// is then inconclusive for its time limit, said as such); otherwise returns.
void throwIfDeadlineEnded(const SolverBudget &budget, const char *phase);
/// "Z3 reached its resource limit of N (--solver-budget)": the reason of an unknown.
std::string solverLimitReason(const SolverBudget &budget, const std::string &z3Reason);

} // namespace planproof

#endif
