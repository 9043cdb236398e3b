//===- Rational.h - exact rationals with overflow detection -----*- C++ -*-===//
//
// The coefficients of canonical forms. Reduced shapes keep numbers small; when they
// are not, arithmetic throws NumericLimit and the verifier answers *inconclusive*
// instead of rounding.
//
//===----------------------------------------------------------------------===//
#ifndef PLANPROOF_ENGINE_RATIONAL_H
#define PLANPROOF_ENGINE_RATIONAL_H

#include <cstdint>
#include <stdexcept>
#include <string>

namespace planproof {

/// Thrown when an exact computation leaves the range the engine supports.
struct NumericLimit : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Rational {
public:
  Rational(int64_t n = 0) : num(n), den(1) {}
  Rational(int64_t n, int64_t d);

  /// The simplest fraction within a relative 1e-12 of `x` (so 0.1 reads as 1/10).
  static Rational fromDouble(double x);

  int64_t numerator() const { return num; }
  int64_t denominator() const { return den; }
  bool isZero() const { return num == 0; }
  bool isOne() const { return num == 1 && den == 1; }
  double toDouble() const { return double(num) / double(den); }
  std::string str() const;

  Rational operator+(const Rational &o) const;
  Rational operator-(const Rational &o) const;
  Rational operator*(const Rational &o) const;
  Rational operator/(const Rational &o) const;
  Rational operator-() const { return Rational(-num, den); }
  bool operator==(const Rational &o) const { return num == o.num && den == o.den; }
  bool operator!=(const Rational &o) const { return !(*this == o); }

private:
  static Rational make(__int128 n, __int128 d);
  int64_t num, den; // den > 0, gcd(num, den) == 1
};

} // namespace planproof

#endif
