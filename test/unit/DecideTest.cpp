//===- DecideTest.cpp - element equality decisions --------------------------===//
#include "Engine/Decide.h"
#include "Engine/Verifier.h"

#include <catch2/catch.hpp>

#include <limits>

using namespace planproof;

TEST_CASE("equal canonical forms are decided without the solver", "[decide]") {
  ExprPool pool;
  PolyId a = pool.inputPoly(pool.addInput({"a", {}}));
  PolyId b = pool.inputPoly(pool.addInput({"b", {}}));
  Decision d = decideEqual(pool, pool.add(a, b), pool.add(b, a), SolverBudget{kDefaultSolverBudget});
  CHECK(d.result == Equality::Equal);
  CHECK(d.byCanonicalForm);
  CHECK_FALSE(d.usedSolver);
}

TEST_CASE("unequal polynomials get a minimized concrete counterexample", "[decide]") {
  ExprPool pool;
  std::vector<PolyId> x;
  for (int i = 0; i < 6; ++i)
    x.push_back(pool.inputPoly(pool.addInput({"x", {i}})));
  PolyId sum = pool.zero();
  for (PolyId v : x)
    sum = pool.add(sum, v);
  // The plan sums twice (a classic double reduction).
  Decision d = decideEqual(pool, pool.scale(sum, Rational(2)), sum, SolverBudget{kDefaultSolverBudget});
  REQUIRE(d.result == Equality::Unequal);
  REQUIRE(d.assignment.size() == 6);
  int nonzero = 0;
  for (double v : d.assignment)
    nonzero += v != 0;
  CHECK(nonzero == 1); // one input suffices to show 2s != s
  PolyId twice = pool.scale(sum, Rational(2));
  Evaluator eval(pool);
  eval.reset(d.assignment);
  CHECK(numericallyDifferent(eval.poly(twice), eval.poly(sum)));
}

TEST_CASE("a difference under real GeLU is concrete", "[decide]") {
  ExprPool pool;
  PolyId a = pool.inputPoly(pool.addInput({"a", {}}));
  PolyId b = pool.inputPoly(pool.addInput({"b", {}}));
  // gelu(a) + gelu(b) vs gelu(a + b): gelu is not additive.
  Decision d = decideEqual(pool, pool.add(pool.apply(Fn::Gelu, {a}), pool.apply(Fn::Gelu, {b})),
                           pool.apply(Fn::Gelu, {pool.add(a, b)}), SolverBudget{kDefaultSolverBudget});
  CHECK(d.result == Equality::Unequal);
  CHECK_FALSE(d.assignmentFromSolver);
}

TEST_CASE("max identities beyond canonical form go to Z3", "[decide][z3]") {
  ExprPool pool;
  PolyId a = pool.inputPoly(pool.addInput({"a", {}}));
  PolyId b = pool.inputPoly(pool.addInput({"b", {}}));
  // max(a, b) - a == max(0, b - a): different canonical forms, equal functions.
  PolyId lhs = pool.sub(pool.apply(Fn::Max, {a, b}), a);
  PolyId rhs = pool.apply(Fn::Max, {pool.zero(), pool.sub(b, a)});
  REQUIRE(lhs != rhs);
  Decision eq = decideEqual(pool, lhs, rhs, SolverBudget{kDefaultSolverBudget});
  CHECK(eq.result == Equality::Equal);
  CHECK(eq.usedSolver);
  // max(a, b) != a: a concrete counterexample needs b > a.
  Decision ne = decideEqual(pool, pool.apply(Fn::Max, {a, b}), a, SolverBudget{kDefaultSolverBudget});
  REQUIRE(ne.result == Equality::Unequal);
  CHECK(ne.assignment[1] > ne.assignment[0]);
}

TEST_CASE("the solver is bounded by counted work, the same on every run", "[decide][z3]") {
  ExprPool pool;
  PolyId a = pool.inputPoly(pool.addInput({"a", {}}));
  PolyId b = pool.inputPoly(pool.addInput({"b", {}}));
  PolyId c = pool.inputPoly(pool.addInput({"c", {}}));
  // max(a, b) - a + max(c, b) - c == max(0, b - a) + max(0, b - c): only Z3 decides it.
  PolyId lhs = pool.add(pool.sub(pool.apply(Fn::Max, {a, b}), a),
                        pool.sub(pool.apply(Fn::Max, {c, b}), c));
  PolyId rhs = pool.add(pool.apply(Fn::Max, {pool.zero(), pool.sub(b, a)}),
                        pool.apply(Fn::Max, {pool.zero(), pool.sub(b, c)}));
  REQUIRE(lhs != rhs);
  Decision first = decideEqual(pool, lhs, rhs, SolverBudget{kDefaultSolverBudget});
  Decision second = decideEqual(pool, lhs, rhs, SolverBudget{kDefaultSolverBudget});
  REQUIRE(first.result == Equality::Equal);
  // The work is a count: the same query spends the same, whatever the machine does.
  CHECK(first.solverWork > 0);
  CHECK(first.solverWork == second.solverWork);
  // Below what it needs, the answer is unknown -- never equal -- and says which option
  // raises the budget; a wall-clock deadline far away changes nothing.
  Deadline far(3600);
  Decision starved = decideEqual(pool, lhs, rhs, SolverBudget{first.solverWork / 4, &far});
  CHECK(starved.result == Equality::Unknown);
  CHECK(starved.reason.find("--solver-budget") != std::string::npos);
  CHECK(starved.solverWork <= first.solverWork / 4 + first.solverWork / 8);
}

TEST_CASE("a deadline that ends a query ends the run, not the obligation", "[decide][z3]") {
  ExprPool pool;
  PolyId a = pool.inputPoly(pool.addInput({"a", {}}));
  PolyId b = pool.inputPoly(pool.addInput({"b", {}}));
  PolyId lhs = pool.sub(pool.apply(Fn::Max, {a, b}), a);
  PolyId rhs = pool.apply(Fn::Max, {pool.zero(), pool.sub(b, a)});
  Deadline spent(1e-9);
  while (!spent.expired()) {
  }
  CHECK_THROWS_AS(decideEqual(pool, lhs, rhs, SolverBudget{kDefaultSolverBudget, &spent}),
                  TimeLimit);
}

TEST_CASE("an infinite time limit is no limit", "[decide]") {
  Deadline forever(std::numeric_limits<double>::infinity());
  CHECK_FALSE(forever.isLimited());
  CHECK_FALSE(forever.expired());
  Deadline huge(1e300);
  CHECK_FALSE(huge.expired());
}
