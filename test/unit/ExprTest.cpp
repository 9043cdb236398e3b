//===- ExprTest.cpp - canonical polynomials and exact rationals -------------===//
#include "Engine/Expr.h"

#include <catch2/catch.hpp>

using namespace planproof;

TEST_CASE("rationals read decimal constants exactly", "[rational]") {
  CHECK(Rational::fromDouble(0.1) == Rational(1, 10));
  CHECK(Rational::fromDouble(-0.25) == Rational(-1, 4));
  CHECK(Rational::fromDouble(3.0) == Rational(3));
  CHECK((Rational(1, 3) + Rational(1, 6)) == Rational(1, 2));
  CHECK((Rational(2, 3) * Rational(3, 4)) == Rational(1, 2));
}

TEST_CASE("rational overflow is reported, not wrapped", "[rational]") {
  Rational big(int64_t(1) << 62);
  CHECK_THROWS_AS(big * big, NumericLimit);
  CHECK_THROWS_AS(Rational(1, 0), NumericLimit);
}

TEST_CASE("canonical forms decide ring identities", "[expr]") {
  ExprPool pool;
  PolyId a = pool.inputPoly(pool.addInput({"a", {0}}));
  PolyId b = pool.inputPoly(pool.addInput({"b", {0}}));
  // Commutativity and associativity of + and *.
  CHECK(pool.add(a, b) == pool.add(b, a));
  CHECK(pool.mul(a, b) == pool.mul(b, a));
  // (a + b)(a - b) == a^2 - b^2
  CHECK(pool.mul(pool.add(a, b), pool.sub(a, b)) == pool.sub(pool.mul(a, a), pool.mul(b, b)));
  // Distinct polynomials get distinct ids.
  CHECK(pool.add(a, a) != pool.mul(a, a));
  CHECK(pool.sub(a, a) == pool.zero());
  // Scaling by exact rationals: (a/2) * 2 == a.
  CHECK(pool.scale(pool.scale(a, Rational(1, 2)), Rational(2)) == a);
}

TEST_CASE("function applications are congruent on canonical arguments", "[expr]") {
  ExprPool pool;
  PolyId a = pool.inputPoly(pool.addInput({"a", {}}));
  PolyId b = pool.inputPoly(pool.addInput({"b", {}}));
  CHECK(pool.apply(Fn::Gelu, {pool.add(a, b)}) == pool.apply(Fn::Gelu, {pool.add(b, a)}));
  CHECK(pool.apply(Fn::Gelu, {a}) != pool.apply(Fn::Gelu, {b}));
  CHECK(pool.hasApplications(pool.apply(Fn::Gelu, {a})));
  CHECK_FALSE(pool.hasApplications(pool.add(a, b)));
}

TEST_CASE("max is flattened, sorted and deduplicated", "[expr]") {
  ExprPool pool;
  PolyId a = pool.inputPoly(pool.addInput({"a", {}}));
  PolyId b = pool.inputPoly(pool.addInput({"b", {}}));
  CHECK(pool.apply(Fn::Max, {a, a}) == a);
  CHECK(pool.apply(Fn::Max, {a, b}) == pool.apply(Fn::Max, {b, a}));
  CHECK(pool.apply(Fn::Max, {a, pool.apply(Fn::Max, {b, a})}) == pool.apply(Fn::Max, {a, b}));
  CHECK(pool.apply(Fn::Max, {pool.constant(Rational(2)), pool.constant(Rational(5))}) ==
        pool.constant(Rational(5)));
  CHECK(pool.hasLatticeAtoms(pool.add(pool.apply(Fn::Max, {a, b}), a)));
}

TEST_CASE("proportionality and evaluation", "[expr]") {
  ExprPool pool;
  uint32_t ia = pool.addInput({"a", {}}), ib = pool.addInput({"b", {}});
  PolyId a = pool.inputPoly(ia), b = pool.inputPoly(ib);
  PolyId p = pool.add(pool.mul(a, b), b);
  Rational c;
  REQUIRE(pool.proportional(pool.scale(p, Rational(3, 2)), p, c));
  CHECK(c == Rational(3, 2));
  CHECK_FALSE(pool.proportional(pool.add(p, a), p, c));
  std::vector<double> vals = {2.0, 5.0};
  Evaluator eval(pool);
  eval.reset(vals);
  CHECK(eval.poly(p) == Approx(15.0));
  CHECK(pool.support(p) == std::vector<uint32_t>{ia, ib});
}

TEST_CASE("expressions past the term budget are refused", "[expr]") {
  ExprPool pool(/*maxTerms=*/8);
  PolyId sum = pool.zero();
  CHECK_THROWS_AS(
      [&] {
        for (int i = 0; i < 20; ++i)
          sum = pool.add(sum, pool.inputPoly(pool.addInput({"x", {i}})));
      }(),
      NumericLimit);
}
