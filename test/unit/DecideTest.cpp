//===- DecideTest.cpp - element equality decisions --------------------------===//
#include "Engine/Decide.h"

#include <catch2/catch.hpp>

using namespace planproof;

TEST_CASE("equal canonical forms are decided without the solver", "[decide]") {
  ExprPool pool;
  PolyId a = pool.inputPoly(pool.addInput({"a", {}}));
  PolyId b = pool.inputPoly(pool.addInput({"b", {}}));
  Decision d = decideEqual(pool, pool.add(a, b), pool.add(b, a), 1000);
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
  Decision d = decideEqual(pool, pool.scale(sum, Rational(2)), sum, 1000);
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
                           pool.apply(Fn::Gelu, {pool.add(a, b)}), 1000);
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
  Decision eq = decideEqual(pool, lhs, rhs, 5000);
  CHECK(eq.result == Equality::Equal);
  CHECK(eq.usedSolver);
  // max(a, b) != a: a concrete counterexample needs b > a.
  Decision ne = decideEqual(pool, pool.apply(Fn::Max, {a, b}), a, 5000);
  REQUIRE(ne.result == Equality::Unequal);
  CHECK(ne.assignment[1] > ne.assignment[0]);
}
