//===- Rational.h - exact rationals with overflow detection -----*- C++ -*-===//
//
// The coefficients of canonical forms and the meaning of every constant of a spec:
// exact rationals of any size (small ones inline, large ones through GMP), never
// rounded. NumericLimit remains for what has no exact value (division by zero) and for
// the engines' own budgets.
//
//===----------------------------------------------------------------------===//
#ifndef PLANPROOF_SUPPORT_RATIONAL_H
#define PLANPROOF_SUPPORT_RATIONAL_H

#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>

namespace planproof {

/// Thrown when an exact computation leaves the range the engine supports.
struct NumericLimit : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// An exact rational number. Small values (numerator and denominator within 64 bits,
/// almost all of them) are stored inline and computed with 128-bit intermediates;
/// larger ones are kept exactly too, as arbitrary-precision rationals (GMP) interned
/// in a process-wide table, so that two equal values always compare equal by their
/// representation. Nothing is ever rounded.
class Rational {
public:
  Rational(int64_t n = 0) : num(n), den(1) {}
  Rational(int64_t n, int64_t d);

  /// The simplest fraction within a relative `tolerance` of `x`, with numerator and
  /// denominator at most `maxTerm`: an *estimate* (a ratio of two numeric evaluations),
  /// never the meaning of a constant -- that is exactConstant's.
  static Rational approximate(double x, double tolerance, int64_t maxTerm);

  /// Exact decimal text: "0.1", "-2.5e-16", "3". False (with `why`) for malformed
  /// text or an exponent beyond +-100000.
  static bool fromDecimal(const std::string &text, Rational &out, std::string &why);

  /// Whether the value is stored inline (numerator and denominator fit 64 bits).
  bool isSmall() const { return den != 0; }
  /// Numerator and denominator of a small value; NumericLimit for a big one.
  int64_t numerator() const;
  int64_t denominator() const;
  /// The value as an int64, when it is an integer that fits.
  bool asInt64(int64_t &out) const;
  bool isInteger() const;
  int sign() const;
  bool isZero() const { return den != 0 && num == 0; }
  bool isOne() const { return num == 1 && den == 1; }
  double toDouble() const;
  std::string str() const;
  /// Numerator and denominator as decimal strings (any size).
  std::string numeratorStr() const;
  std::string denominatorStr() const;
  /// A key that identifies the value (equal keys exactly for equal values).
  std::pair<uint64_t, uint64_t> key() const { return {(uint64_t)num, (uint64_t)den}; }

  Rational operator+(const Rational &o) const;
  Rational operator-(const Rational &o) const;
  Rational operator*(const Rational &o) const;
  Rational operator/(const Rational &o) const;
  Rational operator-() const;
  bool operator==(const Rational &o) const { return num == o.num && den == o.den; }
  bool operator!=(const Rational &o) const { return !(*this == o); }
  bool operator<(const Rational &o) const;

  /// For the exact evaluators (Engine/ExactEval): the value as a GMP rational, and back.
  void toMpq(void *mpqOut) const;          // mpq_t (initialized by the caller)
  static Rational fromMpq(const void *mpq); // mpq_t, canonical

private:
  static Rational make(__int128 n, __int128 d);
  /// Small: den > 0, gcd(num, den) == 1. Big: den == 0 and num indexes the table.
  int64_t num, den;
};

/// The exact rational a floating-point constant of a spec denotes (docs/semantics.md,
/// "Constants"): with its shortest round-tripping decimal written in at most 15
/// significant digits -- any decimal a person or a planner writes -- that decimal
/// exactly (1e-16 is 1/10^16, never 0); an integer-valued double, that integer; else (a
/// computed float such as 1/3 printed in 16-17 digits) the simplest fraction that
/// rounds to the same double (the double's own binary value where that fraction is out
/// of reach). Distinct doubles always denote distinct rationals. False, with `why`,
/// only for NaN and infinities.
bool exactConstant(double x, Rational &out, std::string &why);

} // namespace planproof

#endif
