//===- Rational.cpp - exact rationals with overflow detection ---*- C++ -*-===//
#include "Engine/Rational.h"

#include <cmath>
#include <limits>

using namespace planproof;

static __int128 gcd128(__int128 a, __int128 b) {
  if (a < 0) a = -a;
  if (b < 0) b = -b;
  while (b) {
    __int128 t = a % b;
    a = b;
    b = t;
  }
  return a;
}

Rational Rational::make(__int128 n, __int128 d) {
  if (d == 0)
    throw NumericLimit("division by zero in an exact constant");
  if (d < 0) {
    n = -n;
    d = -d;
  }
  __int128 g = gcd128(n, d);
  if (g > 1) {
    n /= g;
    d /= g;
  }
  const __int128 lim = std::numeric_limits<int64_t>::max();
  if (n > lim || n < -lim || d > lim)
    throw NumericLimit("an exact coefficient outgrew 64 bits");
  Rational r;
  r.num = (int64_t)n;
  r.den = (int64_t)d;
  return r;
}

Rational::Rational(int64_t n, int64_t d) { *this = make(n, d); }

Rational Rational::operator+(const Rational &o) const {
  return make((__int128)num * o.den + (__int128)o.num * den, (__int128)den * o.den);
}
Rational Rational::operator-(const Rational &o) const { return *this + (-o); }
Rational Rational::operator*(const Rational &o) const {
  return make((__int128)num * o.num, (__int128)den * o.den);
}
Rational Rational::operator/(const Rational &o) const {
  return make((__int128)num * o.den, (__int128)den * o.num);
}

std::string Rational::str() const {
  if (den == 1)
    return std::to_string(num);
  return std::to_string(num) + "/" + std::to_string(den);
}

Rational Rational::fromDouble(double x) {
  if (!std::isfinite(x))
    throw NumericLimit("a constant is not a finite number");
  if (x == std::floor(x) && std::fabs(x) < 1e15)
    return Rational((int64_t)x);
  // Continued-fraction expansion; stop at the first convergent within 1e-12 relative.
  bool neg = x < 0;
  double v = std::fabs(x), rest = v;
  __int128 h0 = 1, h1 = 0, k0 = 0, k1 = 1; // convergents h/k
  for (int i = 0; i < 64; ++i) {
    double a = std::floor(rest);
    if (a > 1e15)
      break;
    __int128 h2 = (__int128)a * h0 + h1, k2 = (__int128)a * k0 + k1;
    h1 = h0; h0 = h2; k1 = k0; k0 = k2;
    if (k0 > 0 && std::fabs((double)h0 / (double)k0 - v) <= 1e-12 * std::max(v, 1e-300))
      break;
    double frac = rest - a;
    if (frac <= 0)
      break;
    rest = 1.0 / frac;
  }
  return make(neg ? -h0 : h0, k0);
}
