//===- ExactEval.cpp - exact evaluation of canonical polynomials -*- C++ -*-===//
#include "Engine/ExactEval.h"

#include <algorithm>
#include <cmath>

using namespace planproof;

namespace {
/// Numbers are kept exact up to this many bits of numerator or denominator; past it an
/// enclosure is rounded outwards to a dyadic rational of kKeepBits significant bits, so
/// that deep expressions cannot make the evaluation arbitrarily slow.
constexpr size_t kMaxBits = 4096;
constexpr long kKeepBits = 512;

size_t bits(const mpq_class &q) {
  return std::max(mpz_sizeinbase(q.get_num_mpz_t(), 2), mpz_sizeinbase(q.get_den_mpz_t(), 2));
}

/// q rounded down (up) to a multiple of 2^-k, with k giving about kKeepBits bits.
mpq_class roundOut(const mpq_class &q, bool up) {
  long mag = (long)mpz_sizeinbase(q.get_num_mpz_t(), 2) -
             (long)mpz_sizeinbase(q.get_den_mpz_t(), 2);
  long k = kKeepBits - mag; // scale 2^k
  mpz_class scaled_num = q.get_num(), scaled_den = q.get_den();
  if (k >= 0)
    scaled_num <<= k;
  else
    scaled_den <<= -k;
  mpz_class r;
  if (up)
    mpz_cdiv_q(r.get_mpz_t(), scaled_num.get_mpz_t(), scaled_den.get_mpz_t());
  else
    mpz_fdiv_q(r.get_mpz_t(), scaled_num.get_mpz_t(), scaled_den.get_mpz_t());
  mpq_class out(r);
  if (k >= 0)
    out /= mpq_class(mpz_class(1) << k);
  else
    out *= mpq_class(mpz_class(1) << -k);
  out.canonicalize();
  return out;
}

void bound(Enclosure &e) {
  if (!e.defined)
    return;
  bool wasPoint = e.lo == e.hi;
  if (bits(e.lo) > kMaxBits)
    e.lo = roundOut(e.lo, false);
  if (bits(e.hi) > kMaxBits)
    e.hi = roundOut(e.hi, true);
  (void)wasPoint;
}

Enclosure point(const mpq_class &q) { return {q, q, true}; }
Enclosure undefinedEnclosure() {
  Enclosure e;
  e.defined = false;
  return e;
}

Enclosure add(const Enclosure &a, const Enclosure &b) {
  if (!a.defined || !b.defined)
    return undefinedEnclosure();
  Enclosure r{a.lo + b.lo, a.hi + b.hi, true};
  bound(r);
  return r;
}

Enclosure mul(const Enclosure &a, const Enclosure &b) {
  if (!a.defined || !b.defined)
    return undefinedEnclosure();
  if (a.point() && b.point()) {
    Enclosure r = point(a.lo * b.lo);
    bound(r);
    return r;
  }
  mpq_class c[4] = {a.lo * b.lo, a.lo * b.hi, a.hi * b.lo, a.hi * b.hi};
  Enclosure r{*std::min_element(c, c + 4), *std::max_element(c, c + 4), true};
  bound(r);
  return r;
}

/// The double just below (above) q: an outward-rounded double bound of an enclosure.
double downDouble(const mpq_class &q) {
  double d = q.get_d(); // truncates towards zero
  if (mpq_class(d) > q)
    d = std::nextafter(d, -HUGE_VAL);
  return d;
}
double upDouble(const mpq_class &q) {
  double d = q.get_d();
  if (mpq_class(d) < q)
    d = std::nextafter(d, HUGE_VAL);
  return d;
}

/// The integer value of a point enclosure, when it is one that fits in int64.
bool integerPoint(const Enclosure &e, int64_t &out) {
  if (!e.point() || e.lo.get_den() != 1 || !e.lo.get_num().fits_slong_p())
    return false;
  out = e.lo.get_num().get_si();
  return true;
}
} // namespace

void ExactEvaluator::reset(const std::vector<double> &values) {
  inputs = &values;
  polyMemo.clear();
  atomMemo.clear();
}

Enclosure ExactEvaluator::poly(PolyId p) {
  auto it = polyMemo.find(p);
  if (it != polyMemo.end())
    return it->second;
  Enclosure sum = point(0);
  for (auto &[m, c] : pool.poly(p).terms) {
    mpq_class coeff;
    c.toMpq(coeff.get_mpq_t());
    Enclosure prod = point(coeff);
    for (auto &[a, e] : pool.mono(m).factors) {
      Enclosure v = atom(a);
      if (v.point()) {
        mpq_class pw = 1;
        for (uint32_t k = 0; k < e; ++k)
          pw *= v.lo;
        prod = mul(prod, point(pw));
      } else if (e % 2 == 0 && v.defined) {
        // An even power of an interval is >= 0: take it as |v|^e.
        mpq_class a0 = abs(v.lo), a1 = abs(v.hi);
        mpq_class lo = (v.lo <= 0 && v.hi >= 0) ? mpq_class(0) : std::min(a0, a1);
        mpq_class hi = std::max(a0, a1), pl = 1, ph = 1;
        for (uint32_t k = 0; k < e; ++k) {
          pl *= lo;
          ph *= hi;
        }
        Enclosure pw{pl, ph, true};
        bound(pw);
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

Enclosure ExactEvaluator::atom(AtomId a) {
  auto it = atomMemo.find(a);
  if (it != atomMemo.end())
    return it->second;
  const Atom &at = pool.atom(a);
  Enclosure r;
  if (at.isInput) {
    double v = at.input < inputs->size() ? (*inputs)[at.input] : 0.0;
    r = std::isfinite(v) ? point(mpq_class(v)) : undefinedEnclosure();
  } else {
    std::vector<Enclosure> args;
    bool defined = true;
    for (PolyId q : at.args) {
      args.push_back(poly(q));
      defined &= args.back().defined;
    }
    if (!defined) {
      r = undefinedEnclosure();
    } else if (at.fn == Fn::Product) {
      r = point(1);
      for (const Enclosure &x : args)
        r = mul(r, x);
    } else if (at.fn == Fn::Max) {
      r = args[0];
      for (const Enclosure &x : args) {
        r.lo = std::max(r.lo, x.lo);
        r.hi = std::max(r.hi, x.hi);
      }
    } else if (at.fn == Fn::Eq) {
      if (args[0].point() && args[1].point())
        r = point(args[0].lo == args[1].lo ? 1 : 0);
      else if (args[0].hi < args[1].lo || args[1].hi < args[0].lo)
        r = point(0);
      else
        r = {0, 1, true};
    } else if (at.fn == Fn::TopK) {
      // Exact when every score is a point; else anything in {0, 1}.
      size_t n = args.size() - 2;
      bool points = true;
      std::vector<double> x(n);
      for (size_t j = 0; j < args.size(); ++j)
        points &= args[j].point();
      int64_t e = 0, k = 0;
      if (points && integerPoint(args[n], e) && integerPoint(args[n + 1], k) && e >= 0 &&
          (size_t)e < n) {
        int64_t beaten = 0;
        for (size_t j = 0; j < n; ++j)
          if (args[j].lo > args[e].lo || (args[j].lo == args[e].lo && (int64_t)j < e))
            ++beaten;
        r = point(beaten < k ? 1 : 0);
      } else {
        r = {0, 1, true};
      }
    } else if (at.fn == Fn::DropMask) {
      // dropmask(key, counter, p): the generator's draw u for integer (key, counter),
      // kept iff u >= p (as the numeric definition compares), then 1/(1-p) or 0.
      int64_t key, counter;
      if (args[2].point() && integerPoint(args[0], key) && integerPoint(args[1], counter)) {
        double p = args[2].lo.get_d();
        double u = counterUniform((uint64_t)key, (uint64_t)counter);
        r = u >= p ? point(1 / (1 - args[2].lo)) : point(0);
      } else {
        r = undefinedEnclosure();
      }
    } else if (at.fn == Fn::Pow) {
      // pow(base, n) for an integer step n: exact for small n, else enclosed.
      int64_t n;
      if (args[0].point() && integerPoint(args[1], n) && n >= 0 && n <= 256) {
        mpq_class pw = 1;
        for (int64_t k = 0; k < n; ++k)
          pw *= args[0].lo;
        r = point(pw);
        bound(r);
      } else if (args[0].point() && integerPoint(args[1], n) && args[0].lo > 0) {
        double v = std::pow(args[0].lo.get_d(), (double)n);
        double m = 0x1p-40 * std::fabs(v) + 0x1p-1070;
        r = std::isfinite(v) ? Enclosure{mpq_class(std::max(0.0, v - m)), mpq_class(v + m), true}
                             : undefinedEnclosure();
      } else {
        r = undefinedEnclosure();
      }
    } else {
      double lo, hi;
      if (args.size() == 1 &&
          fnEnclosure(at.fn, downDouble(args[0].lo), upDouble(args[0].hi), lo, hi))
        r = {mpq_class(lo), mpq_class(hi), true};
      else
        r = undefinedEnclosure();
    }
  }
  atomMemo[a] = r;
  return r;
}

bool planproof::certainlyDifferent(const ExprPool &pool, PolyId plan, PolyId reference,
                                   const std::vector<double> &values, double *planValue,
                                   double *refValue) {
  ExactEvaluator ev(pool);
  ev.reset(values);
  Enclosure p = ev.poly(plan), q = ev.poly(reference);
  if (planValue && p.defined)
    *planValue = mpq_class((p.lo + p.hi) / 2).get_d();
  if (refValue && q.defined)
    *refValue = mpq_class((q.lo + q.hi) / 2).get_d();
  if (!p.defined || !q.defined)
    return false;
  return p.hi < q.lo || q.hi < p.lo;
}
