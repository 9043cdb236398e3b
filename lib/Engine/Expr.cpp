//===- Expr.cpp - hash-consed canonical polynomial expressions --*- C++ -*-===//
#include "Engine/Expr.h"

#include <algorithm>
#include <cassert>
#include <map>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

using namespace planproof;

std::string InputSymbol::str() const {
  std::string s = tensor;
  if (index.empty())
    return s;
  s += "[";
  for (size_t i = 0; i < index.size(); ++i) {
    if (i)
      s += ",";
    s += std::to_string(index[i]);
  }
  return s + "]";
}

ExprPool::ExprPool(size_t maxTerms, size_t maxTotalTerms)
    : maxTerms(maxTerms), maxTotalTerms(maxTotalTerms) {
  unitMono = internMono(Monomial{});
  assert(unitMono == 0 && "monoProducts' keys are nonzero because the unit monomial is 0");
  zeroId = internPoly(Poly{});
}

uint32_t ExprPool::addInput(InputSymbol sym) {
  inputs.push_back(std::move(sym));
  return inputs.size() - 1;
}

namespace {
/// The hash of a sequence of 64-bit words: each word mixed (splitmix64's finalizer) into
/// the running value, so that the index's low bits depend on every word.
struct Hasher {
  uint64_t h = 0x9e3779b97f4a7c15ull;
  void add(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull + h;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    h = x ^ (x >> 31);
  }
};

uint64_t atomHash(bool isInput, Fn fn, uint32_t input, const std::vector<PolyId> &args) {
  Hasher h;
  h.add(isInput ? 0 : 1 + (uint64_t)fn);
  if (isInput)
    h.add(input);
  for (PolyId p : args)
    h.add(p);
  return h.h;
}
} // namespace

PolyId ExprPool::internPoly(Poly &&p) {
  if (p.terms.size() > maxTerms)
    throw NumericLimit("an expression grew past " + std::to_string(maxTerms) +
                       " terms at this shape");
  Hasher h;
  for (auto &[m, c] : p.terms) {
    h.add(m);
    h.add(c.key().first);
    h.add(c.key().second);
  }
  auto [id, inserted] = polyIds.findOrInsert(h.h, (uint32_t)polys.size(), [&](uint32_t other) {
    return polys[other].terms == p.terms;
  });
  if (inserted) {
    totalTerms += p.terms.size();
    if (totalTerms > maxTotalTerms)
      throw NumericLimit("the symbolic execution outgrew its memory budget (" +
                         std::to_string(maxTotalTerms) + " terms) at this shape");
    uint32_t depth = 0;
    for (auto &[m, c] : p.terms)
      for (auto &[a, e] : monos[m].factors)
        depth = std::max(depth, atomDepth[a]);
    polyDepth.push_back(depth);
    polys.push_back(std::move(p));
  }
  return id;
}

MonoId ExprPool::internMono(Monomial &&m) {
  Hasher h;
  for (auto &[a, e] : m.factors)
    h.add(((uint64_t)a << 32) | e);
  auto [id, inserted] = monoIds.findOrInsert(h.h, (uint32_t)monos.size(), [&](uint32_t other) {
    return monos[other].factors == m.factors;
  });
  if (inserted)
    monos.push_back(std::move(m));
  return id;
}

AtomId ExprPool::internAtom(Atom &&a) {
  uint32_t depth = 0;
  for (PolyId p : a.args)
    depth = std::max(depth, polyDepth[p] + 1);
  if (depth > kMaxDepth)
    throw NumericLimit("an expression nests more than " + std::to_string(kMaxDepth) +
                       " function applications");
  auto equal = [&](uint32_t other) {
    const Atom &o = atoms[other];
    if (o.isInput != a.isInput)
      return false;
    return a.isInput ? o.input == a.input : o.fn == a.fn && o.args == a.args;
  };
  uint64_t h = atomHash(a.isInput, a.fn, a.input, a.isInput ? std::vector<PolyId>() : a.args);
  auto [id, inserted] = atomIds.findOrInsert(h, (uint32_t)atoms.size(), equal);
  if (inserted) {
    atoms.push_back(std::move(a));
    atomDepth.push_back(depth);
  }
  return id;
}

AtomId ExprPool::findAtom(Fn fn, const std::vector<PolyId> &args) const {
  return atomIds.find(atomHash(false, fn, 0, args), [&](uint32_t other) {
    const Atom &o = atoms[other];
    return !o.isInput && o.fn == fn && o.args == args;
  });
}

PolyId ExprPool::constant(const Rational &c) {
  if (c.isZero())
    return zeroId;
  Poly p;
  p.terms.push_back({unitMono, c});
  return internPoly(std::move(p));
}

PolyId ExprPool::atomPoly(Atom &&a) {
  AtomId at = internAtom(std::move(a));
  Monomial m;
  m.factors.push_back({at, 1});
  Poly p;
  p.terms.push_back({internMono(std::move(m)), Rational(1)});
  return internPoly(std::move(p));
}

PolyId ExprPool::inputPoly(uint32_t inputId) {
  Atom a;
  a.isInput = true;
  a.input = inputId;
  return atomPoly(std::move(a));
}

PolyId ExprPool::add(PolyId a, PolyId b) {
  if (a == zeroId)
    return b;
  if (b == zeroId)
    return a;
  PolyId r = addTerms(a, b);
  if ((knownNonnegative(a) && nonnegativePart(b)) || (knownNonnegative(b) && nonnegativePart(a)))
    markNonnegative(r);
  return r;
}

PolyId ExprPool::addTerms(PolyId a, PolyId b) {
  const auto &ta = polys[a].terms, &tb = polys[b].terms;
  Poly r;
  r.terms.reserve(ta.size() + tb.size());
  size_t i = 0, j = 0;
  while (i < ta.size() || j < tb.size()) {
    if (j == tb.size() || (i < ta.size() && ta[i].first < tb[j].first)) {
      r.terms.push_back(ta[i++]);
    } else if (i == ta.size() || tb[j].first < ta[i].first) {
      r.terms.push_back(tb[j++]);
    } else {
      Rational c = ta[i].second + tb[j].second;
      if (!c.isZero())
        r.terms.push_back({ta[i].first, c});
      ++i;
      ++j;
    }
  }
  return internPoly(std::move(r));
}

PolyId ExprPool::sum(const std::vector<PolyId> &parts) {
  PolyId r = sumTerms(parts);
  // A sum of squares (a reduction of squared gradients) is >= 0.
  bool known = false, all = true;
  for (PolyId p : parts)
    known |= knownNonnegative(p);
  for (size_t i = 0; known && all && i < parts.size(); ++i)
    all = nonnegativePart(parts[i]);
  if (known && all)
    markNonnegative(r);
  return r;
}

PolyId ExprPool::sumTerms(const std::vector<PolyId> &parts) {
  std::vector<std::pair<MonoId, Rational>> all;
  for (PolyId p : parts) {
    const auto &t = polys[p].terms;
    all.insert(all.end(), t.begin(), t.end());
    if (all.size() > maxTerms * 4)
      throw NumericLimit("a sum grew past " + std::to_string(maxTerms) + " terms at this shape");
  }
  std::stable_sort(all.begin(), all.end(),
                   [](const auto &x, const auto &y) { return x.first < y.first; });
  Poly r;
  for (size_t i = 0; i < all.size();) {
    Rational c = all[i].second;
    size_t j = i + 1;
    for (; j < all.size() && all[j].first == all[i].first; ++j)
      c = c + all[j].second;
    if (!c.isZero())
      r.terms.push_back({all[i].first, c});
    i = j;
  }
  return internPoly(std::move(r));
}

PolyId ExprPool::scale(PolyId a, const Rational &c) {
  if (c.isZero())
    return zeroId;
  if (c.isOne())
    return a;
  Poly r = polys[a];
  for (auto &t : r.terms)
    t.second = t.second * c;
  PolyId out = internPoly(std::move(r));
  if (c.sign() > 0 && knownNonnegative(a))
    markNonnegative(out);
  return out;
}

PolyId ExprPool::sub(PolyId a, PolyId b) { return add(a, scale(b, Rational(-1))); }

MonoId ExprPool::mulMono(MonoId a, MonoId b) {
  if (a == unitMono)
    return b;
  if (b == unitMono)
    return a;
  if (a > b)
    std::swap(a, b);
  uint64_t key = ((uint64_t)a << 32) | b;
  if (const uint32_t *known = monoProducts.find(key))
    return *known;
  const auto &fa = monos[a].factors, &fb = monos[b].factors;
  Monomial m;
  size_t i = 0, j = 0;
  while (i < fa.size() || j < fb.size()) {
    if (j == fb.size() || (i < fa.size() && fa[i].first < fb[j].first))
      m.factors.push_back(fa[i++]);
    else if (i == fa.size() || fb[j].first < fa[i].first)
      m.factors.push_back(fb[j++]);
    else {
      m.factors.push_back({fa[i].first, fa[i].second + fb[j].second});
      ++i;
      ++j;
    }
  }
  MonoId r = indicatorLaws(m) ? internMono(std::move(m)) : kZeroMono;
  monoProducts.insert(key, r);
  return r;
}

/// The laws of indicators [x == c] (Fn::Eq, valued 0 or 1 at every point): a power of
/// one is itself, and a product of two with the same x and different constants is 0
/// (x equals at most one of them). Applies them to `m` in place; false when `m` is 0.
/// An embedding's row selectors multiply this way (a lookup of a lookup, a norm of an
/// embedding): without these laws their products grow with the square of the rows.
bool ExprPool::indicatorLaws(Monomial &m) const {
  std::vector<std::pair<PolyId, Rational>> seen;
  for (auto &[a, e] : m.factors) {
    const Atom &at = atoms[a];
    if (at.isInput || at.fn != Fn::Eq || at.args.size() != 2)
      continue;
    e = 1;
    Rational c;
    PolyId x;
    if (isConstant(at.args[1], &c))
      x = at.args[0];
    else if (isConstant(at.args[0], &c))
      x = at.args[1];
    else
      continue;
    for (auto &[y, d] : seen)
      if (y == x && d != c)
        return false;
    seen.push_back({x, c});
  }
  return true;
}

PolyId ExprPool::mul(PolyId a, PolyId b) {
  PolyId r = mulTerms(a, b);
  // A square is >= 0 whatever the signs of its expanded terms; so is a product of two
  // values known to be. Remembered for sqrt(s)^2 = s (simplifyRoots).
  if (a == b || (knownNonnegative(a) && nonnegativePart(b)) ||
      (knownNonnegative(b) && nonnegativePart(a)))
    markNonnegative(r);
  return r;
}

PolyId ExprPool::mulTerms(PolyId a, PolyId b) {
  if (a == zeroId || b == zeroId)
    return zeroId;
  Rational c;
  if (isConstant(a, &c))
    return scale(b, c);
  if (isConstant(b, &c))
    return scale(a, c);
  // recip(t) * t = 1 for t != 0: a sum whose every term holds recip(b) (or recip(a)),
  // times b (a), loses one power of the reciprocal instead of being expanded.
  for (int side = 0; side < 2; ++side) {
    PolyId t = side ? a : b, s = side ? b : a;
    AtomId r = findAtom(Fn::Recip, {t});
    if (r == IdIndex::kEmpty || !provablyNonnegative(t, true))
      continue;
    bool everyTerm = !polys[s].terms.empty();
    for (auto &[m, cf] : polys[s].terms)
      everyTerm &= std::any_of(monos[m].factors.begin(), monos[m].factors.end(), [&](const auto &f) { return f.first == r; });
    if (!everyTerm)
      continue;
    Poly out;
    for (auto &[m, cf] : polys[s].terms) {
      Monomial mm = monos[m];
      for (auto it = mm.factors.begin(); it != mm.factors.end(); ++it)
        if (it->first == r) {
          if (--it->second == 0)
            mm.factors.erase(it);
          break;
        }
      out.terms.push_back({internMono(std::move(mm)), cf});
    }
    // Removing a factor keeps the monomials distinct, but not sorted.
    std::sort(out.terms.begin(), out.terms.end(),
              [](const auto &x, const auto &y) { return x.first < y.first; });
    return internPoly(std::move(out));
  }
  const auto &ta = polys[a].terms, &tb = polys[b].terms;
  bool bothSums = ta.size() > 1 && tb.size() > 1 && ta.size() * tb.size() > kExpandLimit;
  bool hugeTimesTerm = std::max(ta.size(), tb.size()) > kHugePoly;
  if (bothSums || hugeTimesTerm) {
    // Keep the product of two large sums unexpanded, as an atom over monic factors
    // (leading coefficients pulled out), so c*a times b and a times c*b agree. Equal
    // atoms are equal products; unequal ones are decided concretely, never assumed
    // different.
    Rational ca = ta[0].second, cb = tb[0].second;
    PolyId ma = scale(a, Rational(1) / ca), mb = scale(b, Rational(1) / cb);
    if (ma > mb)
      std::swap(ma, mb);
    return scale(apply(Fn::Product, {ma, mb}), ca * cb);
  }
  // Every pair's product, then like monomials combined in the order of the pairs (the
  // order a map accumulating them would add in).
  std::vector<std::pair<MonoId, Rational>> acc;
  acc.reserve(ta.size() * tb.size());
  for (auto &[ma, ca] : ta)
    for (auto &[mb, cb] : tb) {
      MonoId m = mulMono(ma, mb);
      if (m != kZeroMono)
        acc.push_back({m, ca * cb});
    }
  std::stable_sort(acc.begin(), acc.end(),
                   [](const auto &x, const auto &y) { return x.first < y.first; });
  Poly r;
  bool roots = false;
  for (size_t i = 0; i < acc.size();) {
    MonoId m = acc[i].first;
    Rational cf = acc[i].second;
    size_t j = i + 1;
    for (; j < acc.size() && acc[j].first == m; ++j)
      cf = cf + acc[j].second;
    i = j;
    if (!cf.isZero()) {
      r.terms.push_back({m, cf});
      for (auto &[at, e] : monos[m].factors)
        roots |= e >= 2 && !atoms[at].isInput && atoms[at].fn == Fn::Sqrt;
    }
  }
  PolyId out = internPoly(std::move(r));
  return roots ? simplifyRoots(out) : out;
}

PolyId ExprPool::simplifyRoots(PolyId p) {
  // Every term c * M * sqrt(s)^e with s >= 0 becomes c * M * s^(e/2) * sqrt(s)^(e%2).
  std::vector<PolyId> parts;
  bool changed = false;
  Poly rest;
  for (auto &[m, cf] : polys[p].terms) {
    const Monomial &mono = monos[m];
    Monomial kept;
    std::vector<PolyId> squares;
    for (auto &[at, e] : mono.factors) {
      const Atom &atom = atoms[at];
      if (e >= 2 && !atom.isInput && atom.fn == Fn::Sqrt && provablyNonnegative(atom.args[0])) {
        for (uint32_t k = 0; k < e / 2; ++k)
          squares.push_back(atom.args[0]);
        if (e % 2)
          kept.factors.push_back({at, 1});
        continue;
      }
      kept.factors.push_back({at, e});
    }
    if (squares.empty()) {
      rest.terms.push_back({m, cf});
      continue;
    }
    changed = true;
    Poly one;
    one.terms.push_back({internMono(std::move(kept)), cf});
    PolyId term = internPoly(std::move(one));
    for (PolyId s : squares)
      term = mul(term, s);
    parts.push_back(term);
  }
  if (!changed)
    return p;
  parts.push_back(internPoly(std::move(rest)));
  return sum(parts);
}

bool ExprPool::atomNonnegative(AtomId a, bool strict) const {
  const Atom &at = atoms[a];
  if (at.isInput)
    return !strict && (inputs[at.input].bound > 0 || inputs[at.input].nonnegative);
  if (isUnary(at.fn)) {
    switch (fnValues(at.fn)) { // ScalarFunctions.def: the values where defined
    case fn_facts::Positive:
      return true;
    case fn_facts::Nonnegative:
      return !strict;
    case fn_facts::SignOfArgument:
      return provablyNonnegative(at.args[0], true); // recip: positive for x > 0
    default:
      return false;
    }
  }
  switch (at.fn) {
  case Fn::Eq:
  case Fn::DropMask:
  case Fn::TopK:
    return !strict;
  default:
    return false;
  }
}

bool ExprPool::provablyNonnegative(PolyId p, bool strict) const {
  if (!strict && knownNonnegative(p))
    return true;
  const auto &t = polys[p].terms;
  if (t.empty())
    return !strict;
  bool positivePart = false;
  for (auto &[m, c] : t) {
    if (c.sign() <= 0)
      return false;
    bool termPositive = true;
    for (auto &[a, e] : monos[m].factors) {
      bool even = e % 2 == 0;
      if (!even && !atomNonnegative(a, false))
        return false;
      termPositive &= atomNonnegative(a, true);
    }
    positivePart |= termPositive;
  }
  return !strict || positivePart;
}

PolyId ExprPool::apply(Fn f, std::vector<PolyId> args) {
  if (fnInfo(f).lattice) {
    // Flatten nested applications of the same function, then sort and deduplicate:
    // max(a, max(b, a)) == max(a, b).
    std::vector<PolyId> flat;
    for (PolyId p : args) {
      const auto &t = polys[p].terms;
      if (t.size() == 1 && t[0].second.isOne() && monos[t[0].first].factors.size() == 1 &&
          monos[t[0].first].factors[0].second == 1) {
        const Atom &at = atoms[monos[t[0].first].factors[0].first];
        if (!at.isInput && at.fn == f) {
          flat.insert(flat.end(), at.args.begin(), at.args.end());
          continue;
        }
      }
      flat.push_back(p);
    }
    std::sort(flat.begin(), flat.end());
    flat.erase(std::unique(flat.begin(), flat.end()), flat.end());
    if (flat.size() == 1)
      return flat[0];
    // All constants: fold exactly.
    bool allConst = true;
    Rational best;
    for (size_t i = 0; i < flat.size() && allConst; ++i) {
      Rational v;
      allConst = isConstant(flat[i], &v);
      if (allConst && (i == 0 || best < v))
        best = v;
    }
    if (allConst && f == Fn::Max)
      return constant(best);
    args = std::move(flat);
  }
  if (f == Fn::Recip) {
    // recip(c) = 1/c, exactly, for a nonzero constant c (a mean's divisor, a loss
    // normalizer): x / 8 and (x / 4) / 2 are then one polynomial. recip(0) stays an
    // application: it has no value (Functions.h, fnOutsideDomain).
    Rational c;
    if (isConstant(args[0], &c) && c.sign() != 0)
      return constant(Rational(1) / c);
  }
  if (f == Fn::Eq) {
    Rational x, y;
    if (isConstant(args[0], &x) && isConstant(args[1], &y))
      return constant(Rational(x == y ? 1 : 0));
  }
  Atom a;
  a.isInput = false;
  a.fn = f;
  a.args = std::move(args);
  return atomPoly(std::move(a));
}

bool ExprPool::isConstant(PolyId p, Rational *value) const {
  const auto &t = polys[p].terms;
  if (t.empty()) {
    if (value)
      *value = Rational(0);
    return true;
  }
  if (t.size() == 1 && t[0].first == unitMono) {
    if (value)
      *value = t[0].second;
    return true;
  }
  return false;
}

bool ExprPool::proportional(PolyId a, PolyId b, Rational &c) const {
  const auto &ta = polys[a].terms, &tb = polys[b].terms;
  if (ta.size() != tb.size())
    return false;
  if (ta.empty()) {
    c = Rational(1);
    return true;
  }
  if (ta[0].first != tb[0].first)
    return false;
  c = ta[0].second / tb[0].second;
  for (size_t i = 1; i < ta.size(); ++i)
    if (ta[i].first != tb[i].first || ta[i].second != tb[i].second * c)
      return false;
  return true;
}

uint8_t ExprPool::atomFlags(PolyId p) {
  auto it = flagMemo.find(p);
  if (it != flagMemo.end())
    return it->second;
  uint8_t flags = 0;
  for (auto &[m, c] : polys[p].terms)
    for (auto &[a, e] : monos[m].factors) {
      const Atom &at = atoms[a];
      if (at.isInput)
        continue;
      flags |= fnInfo(at.fn).solverExact ? 3 : 1;
      for (PolyId q : at.args)
        flags |= atomFlags(q);
    }
  flagMemo[p] = flags;
  return flags;
}

bool ExprPool::hasLatticeAtoms(PolyId p) { return atomFlags(p) & 2; }

bool ExprPool::hasApplications(PolyId p) { return atomFlags(p) & 1; }

size_t ExprPool::dagTerms(PolyId p, size_t limit) const {
  size_t n = 0;
  std::vector<PolyId> stack{p};
  std::unordered_map<PolyId, bool> seen;
  while (!stack.empty() && n <= limit) {
    PolyId q = stack.back();
    stack.pop_back();
    if (!seen.emplace(q, true).second)
      continue;
    n += polys[q].terms.size();
    for (auto &[m, c] : polys[q].terms)
      for (auto &[a, e] : monos[m].factors)
        if (!atoms[a].isInput)
          stack.insert(stack.end(), atoms[a].args.begin(), atoms[a].args.end());
  }
  return n;
}

std::vector<uint32_t> ExprPool::support(PolyId p) {
  // Every poly and every atom of the DAG is visited once: a large sum's terms share
  // their atoms, and the same function application recurs across terms.
  std::vector<uint32_t> out;
  std::vector<PolyId> stack{p};
  std::unordered_set<PolyId> seenPolys;
  std::unordered_set<AtomId> seenAtoms;
  while (!stack.empty()) {
    PolyId q = stack.back();
    stack.pop_back();
    if (!seenPolys.insert(q).second)
      continue;
    for (auto &[m, c] : polys[q].terms)
      for (auto &[a, e] : monos[m].factors) {
        if (!seenAtoms.insert(a).second)
          continue;
        const Atom &at = atoms[a];
        if (at.isInput)
          out.push_back(at.input);
        else
          stack.insert(stack.end(), at.args.begin(), at.args.end());
      }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

void ExprPool::strPoly(PolyId p, std::string &out, size_t maxChars) const {
  const auto &t = polys[p].terms;
  if (t.empty()) {
    out += "0";
    return;
  }
  for (size_t i = 0; i < t.size(); ++i) {
    if (out.size() > maxChars) {
      out += " + ...";
      return;
    }
    const Rational &c = t[i].second;
    const auto &f = monos[t[i].first].factors;
    bool neg = c.sign() < 0;
    if (i)
      out += neg ? " - " : " + ";
    else if (neg)
      out += "-";
    Rational ac = neg ? -c : c;
    bool needCoeff = !ac.isOne() || f.empty();
    if (needCoeff)
      out += ac.str();
    for (size_t k = 0; k < f.size(); ++k) {
      if (needCoeff || k)
        out += "*";
      const Atom &at = atoms[f[k].first];
      if (at.isInput) {
        out += inputs[at.input].str();
      } else {
        out += fnInfo(at.fn).name;
        out += "(";
        for (size_t j = 0; j < at.args.size(); ++j) {
          if (j)
            out += ", ";
          strPoly(at.args[j], out, maxChars);
        }
        out += ")";
      }
      if (f[k].second > 1)
        out += "^" + std::to_string(f[k].second);
    }
  }
}

std::string ExprPool::str(PolyId p, size_t maxChars) const {
  std::string out;
  strPoly(p, out, maxChars);
  return out;
}

bool ExprPool::hasProductTerm(PolyId p) const {
  for (auto &[m, c] : polys[p].terms)
    for (auto &[a, e] : monos[m].factors)
      if (!atoms[a].isInput && atoms[a].fn == Fn::Product)
        return true;
  return false;
}
