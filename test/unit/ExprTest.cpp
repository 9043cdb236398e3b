//===- ExprTest.cpp - canonical polynomials and exact rationals -------------===//
#include "Engine/Expr.h"

#include <catch2/catch.hpp>

#include <cmath>

using namespace planproof;

TEST_CASE("rationals read decimal constants exactly", "[rational]") {
  auto exact = [](double x) {
    Rational r;
    std::string why;
    REQUIRE(exactConstant(x, r, why));
    return r;
  };
  CHECK(exact(0.1) == Rational(1, 10));
  CHECK(exact(-0.25) == Rational(-1, 4));
  CHECK(exact(3.0) == Rational(3));
  CHECK((Rational(1, 3) + Rational(1, 6)) == Rational(1, 2));
  CHECK((Rational(2, 3) * Rational(3, 4)) == Rational(1, 2));
}

TEST_CASE("constants are exact whatever their magnitude", "[rational]") {
  auto exact = [](double x, Rational &r) {
    std::string why;
    return exactConstant(x, r, why);
  };
  Rational r, s;
  // Decimals as written, however small: 1e-16 is not 0, and not -1e-16.
  REQUIRE(exact(1e-16, r));
  CHECK(r == Rational(1, 10000000000000000));
  REQUIRE(exact(-1e-16, s));
  CHECK(s == -r);
  REQUIRE(exact(5e-19, r));
  CHECK(r == Rational(1, 2000000000000000000));
  REQUIRE(exact(3e-4, r));
  CHECK(r == Rational(3, 10000));
  // A computed float (1/3 printed in 16 digits) is the simplest fraction rounding to it.
  REQUIRE(exact(1.0 / 3.0, r));
  CHECK(r == Rational(1, 3));
  REQUIRE(exact(2.0 / 7.0, r));
  CHECK(r == Rational(2, 7));
  // Neighbouring doubles never share a rational.
  double third = 1.0 / 3.0;
  REQUIRE(exact(std::nextafter(third, 1.0), s));
  CHECK(s != Rational(1, 3));
  REQUIRE(exact(0.09999999999999998, s));
  CHECK(s != Rational(1, 10));
  CHECK(std::fabs(s.toDouble() - 0.09999999999999998) == 0);
  // At a power of two the interval below is half as wide.
  REQUIRE(exact(std::nextafter(0.5, 0.0), s));
  CHECK(s.toDouble() == std::nextafter(0.5, 0.0));
  // Any magnitude, exactly: 1e308 and 1e-300 are big rationals, distinct from their
  // neighbours and from each other's inverses.
  REQUIRE(exact(1e308, r));
  CHECK(!r.isSmall());
  CHECK(r.str() == "1" + std::string(308, '0'));
  REQUIRE(exact(1e-300, s));
  CHECK(r * s == Rational(100000000));
  REQUIRE(exact(std::nextafter(1e-300, 1.0), s));
  CHECK(r * s != Rational(100000000));
  // Only what is not a number is rejected.
  std::string why;
  CHECK_FALSE(exactConstant(std::nan(""), r, why));
  CHECK_FALSE(exactConstant(HUGE_VAL, r, why));
}

TEST_CASE("decimal text is read exactly", "[rational]") {
  Rational r;
  std::string why;
  REQUIRE(Rational::fromDecimal("0.1", r, why));
  CHECK(r == Rational(1, 10));
  REQUIRE(Rational::fromDecimal("-2.50e-3", r, why));
  CHECK(r == Rational(-1, 400));
  REQUIRE(Rational::fromDecimal("1200", r, why));
  CHECK(r == Rational(1200));
  CHECK_FALSE(Rational::fromDecimal("1e999", r, why));
  CHECK_FALSE(Rational::fromDecimal("1..2", r, why));
  CHECK_FALSE(Rational::fromDecimal("", r, why));
}

TEST_CASE("rationals past 64 bits stay exact, never wrap", "[rational]") {
  Rational big(int64_t(1) << 62);
  Rational sq = big * big; // 2^124
  CHECK(!sq.isSmall());
  CHECK(sq.str() == "21267647932558653966460912964485513216");
  CHECK(sq / big == big);
  CHECK((sq / big).isSmall());
  CHECK(sq - sq == Rational(0));
  CHECK(sq == big * big); // interned: equal values, equal representations
  CHECK(Rational(1) / sq * sq == Rational(1));
  CHECK(big < sq);
  CHECK((-sq).sign() == -1);
  CHECK_THROWS_AS(sq.numerator(), NumericLimit);
  CHECK_THROWS_AS(Rational(1, 0), NumericLimit);
  CHECK_THROWS_AS(sq / Rational(0), NumericLimit);
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

TEST_CASE("sqrt(s)^2 = s where s is a sum of squares, however it expands", "[expr]") {
  ExprPool pool;
  PolyId a = pool.inputPoly(pool.addInput({"a", {}}));
  PolyId b = pool.inputPoly(pool.addInput({"b", {}}));
  PolyId d = pool.sub(a, b);
  // (a - b)^2 + b^2 has the term -2ab: not nonnegative term by term, but built as a sum
  // of squares (a gradient norm's sum of squared partial values).
  PolyId s = pool.sum({pool.mul(d, d), pool.mul(b, b)});
  CHECK(pool.provablyNonnegative(s));
  PolyId root = pool.apply(Fn::Sqrt, {s});
  CHECK(pool.mul(root, root) == s);
  // Scaled by a positive constant and added to another square: still known.
  PolyId t = pool.add(pool.scale(s, Rational(3)), pool.mul(a, a));
  CHECK(pool.provablyNonnegative(t));
  // The same expanded polynomial built otherwise is not known: a^2 - 2ab + 2b^2 from its
  // terms stays as it is under the root (the law needs s >= 0, and its terms alone do not
  // show it).
  ExprPool fresh;
  PolyId x = fresh.inputPoly(fresh.addInput({"a", {}}));
  PolyId y = fresh.inputPoly(fresh.addInput({"b", {}}));
  PolyId xy = fresh.scale(fresh.mul(x, y), Rational(-2));
  PolyId yy2 = fresh.scale(fresh.mul(y, y), Rational(2));
  PolyId u = fresh.add(fresh.add(fresh.mul(x, x), xy), yy2);
  CHECK_FALSE(fresh.provablyNonnegative(u));
  PolyId r2 = fresh.apply(Fn::Sqrt, {u});
  CHECK(fresh.mul(r2, r2) != u);
  // A difference of squares is never taken for nonnegative.
  PolyId diff = pool.sub(pool.mul(a, a), pool.mul(b, b));
  CHECK_FALSE(pool.provablyNonnegative(diff));
  PolyId r3 = pool.apply(Fn::Sqrt, {diff});
  CHECK(pool.mul(r3, r3) != diff);
}

TEST_CASE("indicators are idempotent and a value equals one constant at most", "[expr]") {
  ExprPool pool;
  InputSymbol idSym{"ids", {0}};
  idSym.bound = 4;
  PolyId id = pool.inputPoly(pool.addInput(idSym));
  PolyId x = pool.inputPoly(pool.addInput({"x", {}}));
  PolyId y = pool.inputPoly(pool.addInput({"y", {}}));
  auto eq = [&](PolyId v, int64_t c) { return pool.apply(Fn::Eq, {v, pool.constant(Rational(c))}); };
  // [id == 2]^2 == [id == 2]; [id == 1][id == 2] == 0 (either argument order).
  CHECK(pool.mul(eq(id, 2), eq(id, 2)) == eq(id, 2));
  CHECK(pool.mul(eq(id, 1), eq(id, 2)) == pool.zero());
  CHECK(pool.mul(pool.apply(Fn::Eq, {pool.constant(Rational(1)), id}), eq(id, 2)) == pool.zero());
  // A lookup times the indicator of its own row keeps only that row:
  // ([id==0] x + [id==1] y) [id==1] == [id==1] y.
  PolyId lookup = pool.add(pool.mul(eq(id, 0), x), pool.mul(eq(id, 1), y));
  CHECK(pool.mul(lookup, eq(id, 1)) == pool.mul(eq(id, 1), y));
  // The square of a lookup is the lookup of the squares (no cross terms).
  CHECK(pool.mul(lookup, lookup) ==
        pool.add(pool.mul(eq(id, 0), pool.mul(x, x)), pool.mul(eq(id, 1), pool.mul(y, y))));
  // Indicators of different values, or of a value against a non-constant, stay products.
  InputSymbol otherSym{"ids", {1}};
  otherSym.bound = 4;
  PolyId other = pool.inputPoly(pool.addInput(otherSym));
  CHECK(pool.mul(eq(id, 1), eq(other, 2)) != pool.zero());
  PolyId eqXY = pool.apply(Fn::Eq, {x, y});
  CHECK(pool.mul(eqXY, eq(x, 2)) != pool.zero());
  CHECK(pool.mul(eqXY, eqXY) == eqXY);
}

TEST_CASE("the reciprocal of a nonzero constant is its exact inverse", "[expr]") {
  ExprPool pool;
  PolyId a = pool.inputPoly(pool.addInput({"a", {}}));
  auto div = [&](PolyId x, int64_t n) {
    return pool.mul(x, pool.apply(Fn::Recip, {pool.constant(Rational(n))}));
  };
  // A mean of two equal shards' means is the global mean: (a / 4) / 2 == a / 8.
  CHECK(div(div(a, 4), 2) == div(a, 8));
  CHECK(div(a, 8) == pool.scale(a, Rational(1, 8)));
  CHECK(pool.apply(Fn::Recip, {pool.constant(Rational(-3, 7))}) == pool.constant(Rational(-7, 3)));
  // recip(0) has no value: it stays an application (no number stands for it).
  PolyId r0 = pool.apply(Fn::Recip, {pool.zero()});
  CHECK(pool.hasApplications(r0));
  CHECK_FALSE(pool.isConstant(r0));
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

TEST_CASE("a tape evaluates exactly like the evaluator", "[expr]") {
  // Random expressions over a few inputs, with shared subexpressions, nested functions
  // (including ones undefined at some points), powers and rational coefficients: the
  // tape's values are bit-identical to Evaluator's at every point (NaN where it is NaN).
  ExprPool pool;
  std::vector<PolyId> parts;
  for (uint32_t i = 0; i < 4; ++i)
    parts.push_back(pool.inputPoly(pool.addInput({"x", {(int64_t)i}})));
  uint64_t state = 12345;
  auto next = [&](uint64_t n) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return (state >> 33) % n;
  };
  for (int k = 0; k < 60; ++k) {
    PolyId a = parts[next(parts.size())], b = parts[next(parts.size())];
    switch (next(6)) {
    case 0: parts.push_back(pool.add(a, b)); break;
    case 1: parts.push_back(pool.mul(a, b)); break;
    case 2: parts.push_back(pool.scale(a, Rational(-3, 7))); break;
    case 3: parts.push_back(pool.apply(Fn::Exp, {pool.scale(a, Rational(1, 8))})); break;
    case 4: parts.push_back(pool.apply(Fn::Log, {a})); break; // NaN for a < 0
    default: parts.push_back(pool.apply(Fn::Max, {a, b})); break;
    }
  }
  std::vector<PolyId> roots(parts.end() - 5, parts.end());
  Tape tape(pool, roots);
  Evaluator eval(pool);
  for (int point = 0; point < 20; ++point) {
    std::vector<double> x(pool.numInputs());
    for (double &v : x)
      v = (double)next(7) - 3 + next(4) / 4.0;
    tape.run(x);
    eval.reset(x);
    for (size_t r = 0; r < roots.size(); ++r) {
      double want = eval.poly(roots[r]), got = tape.root(r);
      if (std::isnan(want))
        CHECK(std::isnan(got));
      else
        CHECK(got == want);
    }
  }
}
