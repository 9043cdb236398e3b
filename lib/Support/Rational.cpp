//===- Rational.cpp - exact rationals with overflow detection ---*- C++ -*-===//
#include "Support/Rational.h"

#include <gmpxx.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

using namespace planproof;

namespace {
using i128 = __int128;
using u128 = unsigned __int128;

i128 gcd128(i128 a, i128 b) {
  if (a < 0) a = -a;
  if (b < 0) b = -b;
  while (b) {
    i128 t = a % b;
    a = b;
    b = t;
  }
  return a;
}

/// The simplest fraction p/q strictly between a/b and c/d (0 <= a/b < c/d, b, d > 0;
/// b == 0 stands for +infinity as the upper end), by continued fractions: the integer
/// part first, then the simplest fraction between the reciprocals of the remainders.
/// Returns false when a term leaves 128 bits.
bool simplestBetween(u128 a, u128 b, u128 c, u128 d, u128 &p, u128 &q, int depth = 0) {
  if (depth > 200)
    return false;
  u128 k = a / b; // floor of the lower end
  // The integer k + 1 is above a/b; it is the answer when it is below c/d.
  if (d == 0 || k + 1 < c / d || (k + 1 == c / d && c % d != 0)) {
    p = k + 1;
    q = 1;
    return true;
  }
  // Both ends lie in [k, k + 1]: p/q = k + 1/(simplest between d/(c-kd) and b/(a-kb)).
  u128 a2 = a - k * b, c2 = c - k * d;
  u128 p2, q2;
  if (a2 == 0) {
    // The lower end is k itself: the reciprocal's upper end is infinite.
    if (!simplestBetween(d, c2, 1, 0, p2, q2, depth + 1))
      return false;
  } else if (!simplestBetween(d, c2, b, a2, p2, q2, depth + 1)) {
    return false;
  }
  // k + q2/p2 = (k p2 + q2) / p2
  if (p2 != 0 && k > (~u128(0) - q2) / p2)
    return false;
  p = k * p2 + q2;
  q = p2;
  return true;
}
} // namespace

namespace {
/// The big values, interned: equal values get one index. Guarded by a mutex: the
/// verifier's decision threads read coefficients concurrently.
struct BigTable {
  std::mutex m;
  std::vector<std::unique_ptr<mpq_class>> values;
  std::unordered_map<std::string, int64_t> index;
};
BigTable &bigTable() {
  static BigTable *t = new BigTable; // never destroyed: values outlive static teardown
  return *t;
}
mpq_class bigValue(int64_t i) {
  BigTable &t = bigTable();
  std::lock_guard<std::mutex> lock(t.m);
  return *t.values[i];
}
} // namespace

static mpq_class toMpqClass(int64_t num, int64_t den) {
  if (den == 0)
    return bigValue(num);
  mpq_class q(mpz_class((long)num), mpz_class((long)den));
  q.canonicalize();
  return q;
}

static Rational fromMpqClass(const mpq_class &q) { return Rational::fromMpq(q.get_mpq_t()); }

Rational Rational::fromMpq(const void *p) {
  mpq_class q((mpq_srcptr)p);
  q.canonicalize();
  const mpz_class &n = q.get_num(), &d = q.get_den();
  if (n.fits_slong_p() && d.fits_slong_p() && n.get_si() != INT64_MIN) {
    Rational r;
    r.num = n.get_si();
    r.den = d.get_si();
    return r;
  }
  BigTable &t = bigTable();
  std::string key = q.get_str(16);
  std::lock_guard<std::mutex> lock(t.m);
  auto [it, inserted] = t.index.emplace(key, (int64_t)t.values.size());
  if (inserted)
    t.values.push_back(std::make_unique<mpq_class>(q));
  Rational r;
  r.num = it->second;
  r.den = 0;
  return r;
}

void Rational::toMpq(void *out) const {
  mpq_class q = toMpqClass(num, den);
  mpq_set((mpq_ptr)out, q.get_mpq_t());
}

Rational Rational::make(__int128 n, __int128 d) {
  if (d == 0)
    throw NumericLimit("division by zero in an exact constant");
  if (d < 0) {
    n = -n;
    d = -d;
  }
  i128 g = gcd128(n, d);
  if (g > 1) {
    n /= g;
    d /= g;
  }
  const i128 lim = std::numeric_limits<int64_t>::max();
  if (n > lim || n < -lim || d > lim) {
    // Past 64 bits: exactly, through GMP (128-bit values are split in two halves).
    auto toMpz = [](i128 v) {
      bool neg = v < 0;
      u128 a = neg ? (u128)(-(v + 1)) + 1 : (u128)v;
      mpz_class hi((unsigned long)(uint64_t)(a >> 64)), lo((unsigned long)(uint64_t)a);
      mpz_class z = (hi << 64) + lo;
      return neg ? mpz_class(-z) : z;
    };
    mpq_class q(toMpz(n), toMpz(d));
    q.canonicalize();
    return fromMpqClass(q);
  }
  Rational r;
  r.num = (int64_t)n;
  r.den = (int64_t)d;
  return r;
}

Rational::Rational(int64_t n, int64_t d) { *this = make(n, d); }

int64_t Rational::numerator() const {
  if (den == 0)
    throw NumericLimit("an exact value does not fit 64 bits here");
  return num;
}
int64_t Rational::denominator() const {
  if (den == 0)
    throw NumericLimit("an exact value does not fit 64 bits here");
  return den;
}
bool Rational::asInt64(int64_t &out) const {
  if (den != 1)
    return false;
  out = num;
  return true;
}
bool Rational::isInteger() const {
  return den == 1 || (den == 0 && bigValue(num).get_den() == 1);
}
int Rational::sign() const {
  if (den != 0)
    return num > 0 ? 1 : num < 0 ? -1 : 0;
  return sgn(bigValue(num));
}
double Rational::toDouble() const {
  if (den != 0)
    return double(num) / double(den);
  return bigValue(num).get_d();
}

Rational Rational::operator+(const Rational &o) const {
  if (den && o.den)
    return make((i128)num * o.den + (i128)o.num * den, (i128)den * o.den);
  return fromMpqClass(toMpqClass(num, den) + toMpqClass(o.num, o.den));
}
Rational Rational::operator-(const Rational &o) const { return *this + (-o); }
Rational Rational::operator-() const {
  if (den)
    return make(-(i128)num, den);
  return fromMpqClass(-toMpqClass(num, den));
}
Rational Rational::operator*(const Rational &o) const {
  if (den && o.den)
    return make((i128)num * o.num, (i128)den * o.den);
  return fromMpqClass(toMpqClass(num, den) * toMpqClass(o.num, o.den));
}
Rational Rational::operator/(const Rational &o) const {
  if (o.isZero())
    throw NumericLimit("division by zero in an exact constant");
  if (den && o.den)
    return make((i128)num * o.den, (i128)den * o.num);
  return fromMpqClass(toMpqClass(num, den) / toMpqClass(o.num, o.den));
}
bool Rational::operator<(const Rational &o) const {
  if (den && o.den)
    return (i128)num * o.den < (i128)o.num * den;
  return toMpqClass(num, den) < toMpqClass(o.num, o.den);
}

std::string Rational::str() const {
  if (den == 0)
    return bigValue(num).get_str();
  if (den == 1)
    return std::to_string(num);
  return std::to_string(num) + "/" + std::to_string(den);
}
std::string Rational::numeratorStr() const {
  return den ? std::to_string(num) : bigValue(num).get_num().get_str();
}
std::string Rational::denominatorStr() const {
  return den ? std::to_string(den) : bigValue(num).get_den().get_str();
}

Rational Rational::approximate(double x, double tolerance, int64_t maxTerm) {
  if (!std::isfinite(x))
    throw NumericLimit("not a finite number");
  bool neg = x < 0;
  double v = std::fabs(x), rest = v;
  i128 h0 = 1, h1 = 0, k0 = 0, k1 = 1; // convergents h/k
  i128 bestH = (i128)std::llround(std::min(v, 9e18)), bestK = 1;
  for (int i = 0; i < 64; ++i) {
    double a = std::floor(rest);
    if (a > (double)maxTerm)
      break;
    i128 h2 = (i128)a * h0 + h1, k2 = (i128)a * k0 + k1;
    if (h2 > maxTerm || k2 > maxTerm)
      break;
    h1 = h0; h0 = h2; k1 = k0; k0 = k2;
    bestH = h0;
    bestK = k0;
    if (std::fabs((double)h0 / (double)k0 - v) <= tolerance * v)
      break;
    double frac = rest - a;
    if (frac <= 0)
      break;
    rest = 1.0 / frac;
  }
  return make(neg ? -bestH : bestH, bestK);
}

bool Rational::fromDecimal(const std::string &text, Rational &out, std::string &why) {
  // [-+]digits[.digits][e[-+]digits]
  size_t i = 0;
  bool neg = false;
  if (i < text.size() && (text[i] == '-' || text[i] == '+'))
    neg = text[i++] == '-';
  std::string digits;
  int scale = 0; // value = digits * 10^(exponent - scale)
  bool any = false, dot = false;
  for (; i < text.size(); ++i) {
    char c = text[i];
    if (c >= '0' && c <= '9') {
      any = true;
      if (digits.empty() && c == '0') {
        if (dot)
          ++scale;
        continue; // leading zeros
      }
      digits += c;
      if (dot)
        ++scale;
    } else if (c == '.' && !dot) {
      dot = true;
    } else {
      break;
    }
  }
  long exponent = 0;
  if (any && i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    char *end = nullptr;
    std::string rest = text.substr(i + 1);
    exponent = std::strtol(rest.c_str(), &end, 10);
    if (rest.empty() || *end || exponent > 100000 || exponent < -100000) {
      why = "malformed number '" + text + "'";
      return false;
    }
    i = text.size();
  }
  if (!any || i != text.size()) {
    why = "malformed number '" + text + "'";
    return false;
  }
  // Trailing zeros of the digits move into the exponent.
  while (!digits.empty() && digits.back() == '0') {
    digits.pop_back();
    --scale;
  }
  if (digits.empty()) {
    out = Rational(0);
    return true;
  }
  long e = exponent - scale;
  if (e > 400 || e < -400 || digits.size() > 400) {
    why = "the constant " + text + " is beyond 10^400; such constants are not supported";
    return false;
  }
  mpz_class m(digits, 10), p;
  mpz_ui_pow_ui(p.get_mpz_t(), 10, (unsigned long)(e < 0 ? -e : e));
  mpq_class q = e >= 0 ? mpq_class(m * p) : mpq_class(m, p);
  q.canonicalize();
  if (neg)
    q = -q;
  out = fromMpqClass(q);
  return true;
}

bool planproof::exactConstant(double x, Rational &out, std::string &why) {
  if (!std::isfinite(x)) {
    why = "the constant is not a finite number";
    return false;
  }
  if (x == 0) {
    out = Rational(0);
    return true;
  }
  // The shortest decimal that reads back as x.
  char buf[64];
  int digits = 1;
  for (; digits <= 17; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*e", digits - 1, x);
    if (std::strtod(buf, nullptr) == x)
      break;
  }
  if (digits <= 15)
    return Rational::fromDecimal(buf, out, why);
  // The double's own binary value, exactly: for integers, and where the simplest
  // fraction is out of reach of 128-bit arithmetic (magnitudes beyond 2^-73).
  auto binary = [&] {
    mpq_class q(x); // exact: every double is a dyadic rational
    out = fromMpqClass(q);
    return true;
  };
  if (x == std::floor(x))
    return binary();
  // A computed float: the simplest fraction inside the open interval of reals that
  // round to x, (x - ulp/2, x + ulp/2). x = m 2^e with m odd-or-even 53-bit integer.
  int e2;
  double frac = std::frexp(std::fabs(x), &e2); // |x| = frac 2^e2, frac in [0.5, 1)
  u128 m = (u128)std::ldexp(frac, 53);           // |x| = m 2^(e2 - 53), exactly
  int e = e2 - 53;                               // < 0: x is not an integer
  if (2 - e > 126)
    return binary();
  // Ends (2m -+ 1) / 2^(1-e), written over 2^(2-e); at a power of two the lower
  // neighbour is half as far, so the lower end is (4m - 1) / 2^(2-e).
  u128 den = u128(1) << (2 - e);
  bool binade = m == (u128(1) << 52);
  u128 p, q;
  if (!simplestBetween(binade ? 4 * m - 1 : 4 * m - 2, den, 4 * m + 2, den, p, q) ||
      p > (u128)INT64_MAX || q > (u128)INT64_MAX)
    return binary();
  out = Rational(x < 0 ? -(int64_t)p : (int64_t)p, (int64_t)q);
  return true;
}
