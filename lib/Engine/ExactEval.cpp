//===- ExactEval.cpp - confirming counterexamples exactly --------*- C++ -*-===//
#include "Engine/ExactEval.h"

#include <gmpxx.h>

#include <algorithm>
#include <cfenv>
#include <cmath>
#include <limits>
#include <memory>
#include <unordered_map>

using namespace planproof;

namespace {

/// Doubles with outward rounding. An operation whose result is exact (its rounding
/// error, from TwoSum or fma, is 0) keeps its value; otherwise the bound moves one ulp
/// outwards, which contains the exact result of a correctly rounded operation.
struct DoubleArith {
  using Num = double;
  static Num fromDouble(double x) { return x; }
  static Num down(double x) { return std::nextafter(x, -HUGE_VAL); }
  static Num up(double x) { return std::nextafter(x, HUGE_VAL); }
  static bool exactSum(double a, double b, double s) {
    double bb = s - a;
    return (a - (s - bb)) + (b - bb) == 0;
  }
  static Num add(Num a, Num b, bool upward) {
    double s = a + b;
    if (!std::isfinite(s) || exactSum(a, b, s))
      return s;
    return upward ? up(s) : down(s);
  }
  static Num mul(Num a, Num b, bool upward) {
    double p = a * b;
    if (!std::isfinite(p) || std::fma(a, b, -p) == 0)
      return p;
    return upward ? up(p) : down(p);
  }
  static Num coefficient(const Rational &c, bool upward) {
    // A fraction of two integers below 2^53 (nearly every coefficient): both are exact
    // doubles, so n / d is correctly rounded, and the sign of the exact residual
    // q * d - n (one fma; a nonzero residual is a multiple of ulp(q), never rounded to 0)
    // says on which side of n / d the quotient q lies. No GMP.
    if (c.isSmall()) {
      constexpr int64_t kExact = int64_t(1) << 53;
      int64_t n = c.numerator(), den = c.denominator(); // den > 0
      if (n > -kExact && n < kExact && den < kExact) {
        double q = double(n) / double(den);
        double residual = std::fma(q, double(den), -double(n));
        if (residual == 0)
          return q;
        bool above = residual > 0;
        return upward ? (above ? q : up(q)) : (above ? down(q) : q);
      }
    }
    double d = c.toDouble();
    // Beyond the doubles (|c| > DBL_MAX rounds to infinity): the bound on the side of
    // zero is the largest finite double, the other side infinite (mpq_class of an
    // infinity is an invalid operation, a SIGFPE in GMP).
    if (!std::isfinite(d))
      return (d > 0) == upward ? d : std::copysign(std::numeric_limits<double>::max(), d);
    mpq_class q, e(d);
    c.toMpq(q.get_mpq_t());
    if (e == q)
      return d;
    return upward ? (e < q ? up(d) : d) : (e > q ? down(d) : d);
  }
  static Num reciprocal(const Rational &one_minus_p, bool upward) { // 1 / x for x > 0
    mpq_class q;
    one_minus_p.toMpq(q.get_mpq_t());
    mpq_class r = 1 / q;
    double d = r.get_d();
    if (!std::isfinite(d) || std::fabs(d) > std::numeric_limits<double>::max())
      return upward ? std::numeric_limits<double>::infinity() : std::numeric_limits<double>::max();
    return upward ? (mpq_class(d) < r ? up(d) : d) : (mpq_class(d) > r ? down(d) : d);
  }
  static double toDouble(Num x) { return x; }
  static bool finite(Num x) { return std::isfinite(x); }
  static double lowDouble(Num x) { return x; }
  static double highDouble(Num x) { return x; }
  static void bound(Num &, bool) {}
};

/// GMP rationals: exact; a bound past kMaxBits is rounded outwards to kKeepBits.
struct RationalArith {
  using Num = mpq_class;
  static constexpr size_t kMaxBits = 2048;
  static constexpr long kKeepBits = 256;
  static Num fromDouble(double x) { return mpq_class(x); }
  static Num add(const Num &a, const Num &b, bool upward) {
    Num r = a + b;
    bound(r, upward);
    return r;
  }
  static Num mul(const Num &a, const Num &b, bool upward) {
    Num r = a * b;
    bound(r, upward);
    return r;
  }
  static Num coefficient(const Rational &c, bool) {
    Num q;
    c.toMpq(q.get_mpq_t());
    return q;
  }
  static Num reciprocal(const Rational &x, bool) {
    Num q;
    x.toMpq(q.get_mpq_t());
    return 1 / q;
  }
  static double toDouble(const Num &x) { return x.get_d(); }
  static bool finite(const Num &) { return true; }
  /// The double just below (above) x.
  static double lowDouble(const Num &x) {
    double d = x.get_d();
    if (!std::isfinite(d)) // beyond the doubles: mpq_class(inf) would raise SIGFPE
      return d > 0 ? std::numeric_limits<double>::max() : -HUGE_VAL;
    return mpq_class(d) > x ? std::nextafter(d, -HUGE_VAL) : d;
  }
  static double highDouble(const Num &x) {
    double d = x.get_d();
    if (!std::isfinite(d))
      return d > 0 ? HUGE_VAL : -std::numeric_limits<double>::max();
    return mpq_class(d) < x ? std::nextafter(d, HUGE_VAL) : d;
  }
  static void bound(Num &q, bool upward) {
    size_t bits = std::max(mpz_sizeinbase(q.get_num_mpz_t(), 2), mpz_sizeinbase(q.get_den_mpz_t(), 2));
    if (bits <= kMaxBits)
      return;
    long mag = (long)mpz_sizeinbase(q.get_num_mpz_t(), 2) - (long)mpz_sizeinbase(q.get_den_mpz_t(), 2);
    long k = kKeepBits - mag; // round to a multiple of 2^-k
    mpz_class n = q.get_num(), d = q.get_den(), r;
    if (k >= 0)
      n <<= k;
    else
      d <<= -k;
    if (upward)
      mpz_cdiv_q(r.get_mpz_t(), n.get_mpz_t(), d.get_mpz_t());
    else
      mpz_fdiv_q(r.get_mpz_t(), n.get_mpz_t(), d.get_mpz_t());
    q = mpq_class(r);
    if (k >= 0)
      q /= mpq_class(mpz_class(1) << k);
    else
      q *= mpq_class(mpz_class(1) << -k);
    q.canonicalize();
  }
};

template <class A> class EnclosureEvaluator {
public:
  using Num = typename A::Num;
  struct Iv {
    Num lo, hi;
    bool defined = true;
    /// Not defined, and certainly so (a function applied wholly outside its domain),
    /// rather than possibly (an interval straddling the domain's edge).
    bool nowhere = false;
    bool point() const { return defined && lo == hi; }
  };

  EnclosureEvaluator(const ExprPool &pool, const std::vector<double> &inputs)
      : pool(pool), inputs(inputs) {}

  Iv poly(PolyId p) {
    auto it = polyMemo.find(p);
    if (it != polyMemo.end())
      return it->second;
    Iv sum = point(A::fromDouble(0));
    for (auto &[m, c] : pool.poly(p).terms) {
      Iv prod{A::coefficient(c, false), A::coefficient(c, true), true};
      for (auto &[a, e] : pool.mono(m).factors) {
        Iv v = atom(a);
        if (e % 2 == 0 && v.defined && !v.point()) {
          // An even power of an interval holding 0 is >= 0: take it as |v|^e.
          Num zero = A::fromDouble(0);
          Num a0 = v.lo < zero ? Num(-v.lo) : v.lo, a1 = v.hi < zero ? Num(-v.hi) : v.hi;
          Iv mag{(v.lo <= zero && v.hi >= zero) ? zero : std::min(a0, a1), std::max(a0, a1), true};
          Iv pw = point(A::fromDouble(1));
          for (uint32_t k = 0; k < e; ++k)
            pw = mul(pw, mag);
          prod = mul(prod, pw);
        } else {
          for (uint32_t k = 0; k < e; ++k)
            prod = mul(prod, v);
        }
      }
      sum = add(sum, prod);
    }
    polyMemo[p] = sum;
    return sum;
  }

private:
  static Iv point(const Num &x) { return {x, x, true}; }
  static Iv undefined(bool certainly = false) {
    Iv r{A::fromDouble(0), A::fromDouble(0), false, certainly};
    return r;
  }
  static Iv undefinedFrom(const Iv &a, const Iv &b) { return undefined(a.nowhere || b.nowhere); }
  static Iv add(const Iv &a, const Iv &b) {
    if (!a.defined || !b.defined)
      return undefinedFrom(a, b);
    Iv r{A::add(a.lo, b.lo, false), A::add(a.hi, b.hi, true), true};
    return finite(r) ? r : undefined();
  }
  static Iv mul(const Iv &a, const Iv &b) {
    if (!a.defined || !b.defined)
      return undefinedFrom(a, b);
    Num lo[4] = {A::mul(a.lo, b.lo, false), A::mul(a.lo, b.hi, false), A::mul(a.hi, b.lo, false),
                 A::mul(a.hi, b.hi, false)};
    Num hi[4] = {A::mul(a.lo, b.lo, true), A::mul(a.lo, b.hi, true), A::mul(a.hi, b.lo, true),
                 A::mul(a.hi, b.hi, true)};
    Iv r{*std::min_element(lo, lo + 4), *std::max_element(hi, hi + 4), true};
    return finite(r) ? r : undefined();
  }
  static bool finite(const Iv &r) { return A::finite(r.lo) && A::finite(r.hi); }
  static bool integerPoint(const Iv &e, int64_t &out) {
    if (!e.point())
      return false;
    double d = A::toDouble(e.lo);
    if (!(std::fabs(d) < 9e15) || A::fromDouble(std::floor(d)) != e.lo)
      return false;
    out = (int64_t)d;
    return true;
  }
  static Iv fromDoubles(double lo, double hi) { return {A::fromDouble(lo), A::fromDouble(hi), true}; }

  Iv atom(AtomId a) {
    auto it = atomMemo.find(a);
    if (it != atomMemo.end())
      return it->second;
    Iv r = computeAtom(a);
    atomMemo[a] = r;
    return r;
  }

  Iv computeAtom(AtomId a) {
    const Atom &at = pool.atom(a);
    if (at.isInput) {
      double v = at.input < inputs.size() ? inputs[at.input] : 0.0;
      return std::isfinite(v) ? point(A::fromDouble(v)) : undefined();
    }
    std::vector<Iv> args;
    for (PolyId q : at.args) {
      args.push_back(poly(q));
      if (!args.back().defined)
        return undefined(args.back().nowhere);
    }
    switch (at.fn) {
    case Fn::Product: {
      Iv r = point(A::fromDouble(1));
      for (const Iv &x : args)
        r = mul(r, x);
      return r;
    }
    case Fn::Max: {
      Iv r = args[0];
      for (const Iv &x : args) {
        r.lo = std::max(r.lo, x.lo);
        r.hi = std::max(r.hi, x.hi);
      }
      return r;
    }
    case Fn::Eq:
      if (args[0].point() && args[1].point())
        return point(A::fromDouble(args[0].lo == args[1].lo ? 1 : 0));
      if (args[0].hi < args[1].lo || args[1].hi < args[0].lo)
        return point(A::fromDouble(0));
      return fromDoubles(0, 1);
    case Fn::TopK: {
      // Exact when every score is a point; else anything in [0, 1].
      size_t n = args.size() - 2;
      int64_t e = 0, k = 0;
      bool points = std::all_of(args.begin(), args.end(), [](const Iv &x) { return x.point(); });
      if (!points || !integerPoint(args[n], e) || !integerPoint(args[n + 1], k) || e < 0 ||
          (size_t)e >= n)
        return fromDoubles(0, 1);
      int64_t beaten = 0;
      for (size_t j = 0; j < n; ++j)
        if (args[j].lo > args[e].lo || (args[j].lo == args[e].lo && (int64_t)j < e))
          ++beaten;
      return point(A::fromDouble(beaten < k ? 1 : 0));
    }
    case Fn::DropMask: {
      // dropmask(key, counter, p): the generator's draw u for integer (key, counter),
      // kept iff u >= p (as the numeric definition compares), then 1/(1-p), else 0.
      int64_t key, counter;
      Rational p;
      if (!integerPoint(args[0], key) || !integerPoint(args[1], counter) ||
          !pool.isConstant(at.args[2], &p))
        return undefined();
      double u = counterUniform((uint64_t)key, (uint64_t)counter);
      if (!(u >= p.toDouble()))
        return point(A::fromDouble(0));
      Rational keep = Rational(1) - p;
      return {A::reciprocal(keep, false), A::reciprocal(keep, true), true};
    }
    case Fn::Pow: {
      // pow(base, n) for an integer step n >= 0: repeated products for small n, else the
      // C library's values at the ends of a positive base's interval (pow is monotone
      // in the base), widened.
      int64_t n;
      if (!integerPoint(args[1], n) || n < 0)
        return undefined();
      if (n <= 256) {
        Iv r = point(A::fromDouble(1));
        for (int64_t k = 0; k < n; ++k)
          r = mul(r, args[0]);
        return r;
      }
      double b0 = A::lowDouble(args[0].lo), b1 = A::highDouble(args[0].hi);
      if (!(b0 > 0))
        return undefined();
      double v0 = std::pow(b0, (double)n), v1 = std::pow(b1, (double)n);
      double m = 0x1p-40 * std::max(v0, v1) + 0x1p-1070;
      return std::isfinite(v0) && std::isfinite(v1)
                 ? fromDoubles(std::max(0.0, std::min(v0, v1) - m), std::max(v0, v1) + m)
                 : undefined();
    }
    default: {
      double lo, hi, a0 = A::lowDouble(args[0].lo), a1 = A::highDouble(args[0].hi);
      if (args.size() != 1)
        return undefined();
      if (fnOutsideDomain(at.fn, a0, a1))
        return undefined(true);
      if (!fnEnclosure(at.fn, a0, a1, lo, hi))
        return undefined();
      return fromDoubles(lo, hi);
    }
    }
  }

  const ExprPool &pool;
  const std::vector<double> &inputs;
  std::unordered_map<PolyId, Iv> polyMemo;
  std::unordered_map<AtomId, Iv> atomMemo;
};

/// Disjoint (1), certainly equal points (0), or undecided (-1, also where a function is
/// applied outside its domain: the exact evaluation may still decide). A plan value that
/// certainly does not exist where the reference's does differs from it (the plan's
/// NaN where the reference is finite); where the reference does not exist, nothing is
/// claimed.
template <class Iv> int compare(const Iv &p, const Iv &q) {
  if (q.defined && p.nowhere)
    return 1;
  if (!q.defined)
    return q.nowhere ? 0 : -1;
  if (!p.defined)
    return -1;
  if (p.hi < q.lo || q.hi < p.lo)
    return 1;
  if (p.point() && q.point())
    return 0;
  return -1;
}

template <class Iv, class A> double midpoint(const Iv &e) {
  if (!e.defined)
    return std::nan("");
  return (A::toDouble(e.lo) + A::toDouble(e.hi)) / 2;
}
} // namespace

bool planproof::certainlyDifferent(const ExprPool &pool, PolyId plan, PolyId reference,
                                   const std::vector<double> &values, double *planValue,
                                   double *refValue) {
  using Fast = EnclosureEvaluator<DoubleArith>;
  Fast fast(pool, values);
  Fast::Iv p = fast.poly(plan), q = fast.poly(reference);
  if (planValue)
    *planValue = midpoint<Fast::Iv, DoubleArith>(p);
  if (refValue)
    *refValue = midpoint<Fast::Iv, DoubleArith>(q);
  int c = compare(p, q);
  if (c >= 0)
    return c == 1;
  // The doubles' enclosures overlap: decide exactly.
  using Exact = EnclosureEvaluator<RationalArith>;
  Exact exact(pool, values);
  Exact::Iv ep = exact.poly(plan), eq = exact.poly(reference);
  if (planValue)
    *planValue = midpoint<Exact::Iv, RationalArith>(ep);
  if (refValue)
    *refValue = midpoint<Exact::Iv, RationalArith>(eq);
  return compare(ep, eq) == 1;
}

std::vector<double> planproof::enclosedValues(const ExprPool &pool,
                                              const std::vector<PolyId> &polys,
                                              const std::vector<double> &values) {
  using Fast = EnclosureEvaluator<DoubleArith>;
  using Exact = EnclosureEvaluator<RationalArith>;
  Fast fast(pool, values);
  std::unique_ptr<Exact> exact;
  std::vector<double> out;
  for (PolyId p : polys) {
    Fast::Iv e = fast.poly(p);
    double width = e.defined ? e.hi - e.lo : 0;
    if (e.defined && width > 1e-9 * std::max(1.0, std::fabs(e.lo) + std::fabs(e.hi))) {
      if (!exact)
        exact = std::make_unique<Exact>(pool, values);
      out.push_back(midpoint<Exact::Iv, RationalArith>(exact->poly(p)));
    } else {
      out.push_back(midpoint<Fast::Iv, DoubleArith>(e));
    }
  }
  return out;
}
