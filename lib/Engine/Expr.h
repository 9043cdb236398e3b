//===- Expr.h - hash-consed canonical polynomial expressions ----*- C++ -*-===//
//
// The element engine's expression graph. Every scalar the symbolic executor computes
// is a *canonical polynomial*: a sorted sum of (monomial, rational coefficient) terms,
// where a monomial is a sorted product of atoms with exponents, and an atom is either
// a symbolic input element (`x[1,0]`) or a function application whose arguments are
// themselves canonical polynomials (`gelu(p)`). Polynomials, monomials and atoms are
// hash-consed in an ExprPool, so two expressions are equal as polynomials over their
// atoms exactly when their ids are equal: most equalities are decided in O(1) after
// construction, without a solver.
//
//===----------------------------------------------------------------------===//
#ifndef PLANPROOF_ENGINE_EXPR_H
#define PLANPROOF_ENGINE_EXPR_H

#include "Support/Rational.h"
#include "Semantics/Functions.h"

#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace planproof {

using PolyId = uint32_t;
using MonoId = uint32_t;
using AtomId = uint32_t;

/// A symbolic input element: element `index` of the input tensor `tensor`.
struct InputSymbol {
  std::string tensor;
  std::vector<int64_t> index;
  /// 0 for a real value; N > 0 for an integer in [0, N) (a token id).
  int64_t bound = 0;
  /// A real input declared nonnegative (ref.nonnegative: second moments, variances).
  bool nonnegative = false;
  std::string str() const;
};

struct Atom {
  bool isInput;
  uint32_t input = 0;        // InputSymbol id, when isInput
  Fn fn = Fn::Gelu;          // otherwise, the function applied...
  std::vector<PolyId> args;  // ...to these canonical arguments
};

struct Monomial {
  std::vector<std::pair<AtomId, uint32_t>> factors; // sorted by atom, exponent >= 1
};

struct Poly {
  std::vector<std::pair<MonoId, Rational>> terms; // sorted by monomial, no zero coeffs
};

/// An open-addressing hash index of the ids of a pool's structures (polynomials,
/// monomials, atoms). It keeps no copy of a key: a slot holds the key's hash and the id,
/// and the caller's `equal(id)` compares the candidate with the structure already stored
/// under that id. Ids are only ever added.
class IdIndex {
public:
  /// The id equal to the candidate of hash `h`, or `fresh` (inserted) when none is.
  template <class Equal>
  std::pair<uint32_t, bool> findOrInsert(uint64_t h, uint32_t fresh, Equal equal) {
    if ((count + 1) * 2 > slots.size())
      grow();
    size_t mask = slots.size() - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
      Slot &s = slots[i];
      if (s.id == kEmpty) {
        s = {h, fresh};
        ++count;
        return {fresh, true};
      }
      if (s.hash == h && equal(s.id))
        return {s.id, false};
    }
  }
  /// The id equal to the candidate of hash `h`, or kEmpty.
  template <class Equal> uint32_t find(uint64_t h, Equal equal) const {
    if (slots.empty())
      return kEmpty;
    size_t mask = slots.size() - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
      const Slot &s = slots[i];
      if (s.id == kEmpty)
        return kEmpty;
      if (s.hash == h && equal(s.id))
        return s.id;
    }
  }
  static constexpr uint32_t kEmpty = ~uint32_t(0);

private:
  struct Slot {
    uint64_t hash;
    uint32_t id = kEmpty;
  };
  void grow() {
    std::vector<Slot> old = std::move(slots);
    slots.assign(old.empty() ? 1024 : old.size() * 2, Slot{0, kEmpty});
    size_t mask = slots.size() - 1;
    for (const Slot &s : old)
      if (s.id != kEmpty) {
        size_t i = s.hash & mask;
        while (slots[i].id != kEmpty)
          i = (i + 1) & mask;
        slots[i] = s;
      }
  }
  std::vector<Slot> slots; // a power of two, at most half full
  size_t count = 0;
};

/// The products of monomial pairs already computed: an open-addressing map from a
/// nonzero 64-bit key to a 32-bit value (key 0 marks an empty slot).
class ProductCache {
public:
  const uint32_t *find(uint64_t key) const {
    if (slots.empty())
      return nullptr;
    size_t mask = slots.size() - 1;
    for (size_t i = mix(key) & mask;; i = (i + 1) & mask) {
      if (slots[i].key == key)
        return &slots[i].value;
      if (slots[i].key == 0)
        return nullptr;
    }
  }
  void insert(uint64_t key, uint32_t value) {
    if ((count + 1) * 2 > slots.size())
      grow();
    place(key, value);
    ++count;
  }

private:
  static uint64_t mix(uint64_t x) {
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
  }
  void place(uint64_t key, uint32_t value) {
    size_t mask = slots.size() - 1;
    size_t i = mix(key) & mask;
    while (slots[i].key != 0 && slots[i].key != key)
      i = (i + 1) & mask;
    slots[i] = {key, value};
  }
  void grow() {
    std::vector<Slot> old = std::move(slots);
    slots.assign(old.empty() ? 1024 : old.size() * 2, Slot{});
    for (const Slot &s : old)
      if (s.key)
        place(s.key, s.value);
  }
  struct Slot {
    uint64_t key = 0;
    uint32_t value = 0;
  };
  std::vector<Slot> slots; // a power of two, at most half full
  size_t count = 0;
};

/// Hash-consing store and constructors of canonical polynomials.
class ExprPool {
public:
  /// Products of two sums with more than this many term pairs stay unexpanded.
  static constexpr size_t kExpandLimit = 512;
  /// A polynomial this large is not distributed over even a single-term factor: the
  /// product stays an atom, so that deep networks do not multiply their sizes per layer.
  static constexpr size_t kHugePoly = 4096;
  /// Deepest nesting of function applications: every walk over an expression (the
  /// evaluators, the solver encoding, rendering) recurses once per level, so deeper
  /// expressions end in NumericLimit (inconclusive), never in a stack overflow.
  static constexpr uint32_t kMaxDepth = 2000;

  /// `maxTerms` bounds the size of any one polynomial; past it, NumericLimit is thrown
  /// (the verifier turns that into *inconclusive*).
  explicit ExprPool(size_t maxTerms = 200000, size_t maxTotalTerms = 40000000);

  uint32_t addInput(InputSymbol sym);
  const InputSymbol &input(uint32_t id) const { return inputs[id]; }
  size_t numInputs() const { return inputs.size(); }

  PolyId zero() const { return zeroId; }
  PolyId constant(const Rational &c);
  PolyId inputPoly(uint32_t inputId);
  PolyId add(PolyId a, PolyId b);
  /// The sum of many polynomials in one pass (dot products, reductions): linear in
  /// the total number of terms instead of quadratic like repeated add().
  PolyId sum(const std::vector<PolyId> &parts);
  PolyId sub(PolyId a, PolyId b);
  PolyId scale(PolyId a, const Rational &c);
  PolyId mul(PolyId a, PolyId b);
  PolyId apply(Fn f, std::vector<PolyId> args);

  const Poly &poly(PolyId id) const { return polys[id]; }
  size_t numPolys() const { return polys.size(); }
  size_t numTerms() const { return totalTerms; }
  /// The budget of numTerms() (past it, interning throws NumericLimit). A pool reused
  /// across runs (ElementCache) raises it by what earlier runs left, so that each run
  /// has the allowance a fresh pool gives.
  size_t termBudget() const { return maxTotalTerms; }
  void setTermBudget(size_t n) { maxTotalTerms = n; }
  size_t numAtoms() const { return atoms.size(); }
  const Monomial &mono(MonoId id) const { return monos[id]; }
  const Atom &atom(AtomId id) const { return atoms[id]; }

  /// The constant value of `p`, when it is a constant.
  bool isConstant(PolyId p, Rational *value = nullptr) const;
  /// Whether `a == c * b` for some rational c (both zero counts, with c = 1).
  bool proportional(PolyId a, PolyId b, Rational &c) const;
  /// Whether `p` (transitively) contains a function the solver encodes exactly (max,
  /// indicators), which canonical forms do not decide completely.
  bool hasLatticeAtoms(PolyId p);
  /// Whether a term of `p` has an unexpanded product (Fn::Product) as a factor.
  bool hasProductTerm(PolyId p) const;
  /// Whether `p` contains any function application (gelu, ...).
  bool hasApplications(PolyId p);
  /// The input symbols `p` depends on, sorted.
  std::vector<uint32_t> support(PolyId p);
  /// Whether `p` is >= 0 (or > 0, with `strict`) for every value of the inputs where it
  /// is defined, by its terms: positive coefficients times monomials of even powers
  /// and of atoms that are never negative (integer inputs in [0, N), exp, sqrt, rsqrt,
  /// indicators, dropout masks), plus, for `strict`, a positive constant term or a term
  /// of atoms that are never zero (exp, rsqrt).
  /// Also true of every polynomial built as a square (mul(a, a)), or as a sum or
  /// product of such values and termwise-nonnegative ones, with nonnegative weights:
  /// (a - b)^2 is >= 0 although its expanded term -2ab is not.
  bool provablyNonnegative(PolyId p, bool strict = false) const;
  /// The nesting depth of function applications in `p`.
  uint32_t depth(PolyId p) const { return polyDepth[p]; }
  /// The number of terms in the expression DAG of `p` (shared subexpressions once),
  /// counting up to `limit`: the size of what a solver would be given.
  size_t dagTerms(PolyId p, size_t limit) const;

  /// Human-readable rendering (for notes and tests), truncated past `maxChars`.
  std::string str(PolyId p, size_t maxChars = 200) const;

private:
  PolyId internPoly(Poly &&p);
  /// The algebra canonical forms add to the ring's: sqrt(s)^2 = s for s >= 0, and
  /// recip(t) * t = 1 for t != 0 (docs/semantics.md). Applied to a product's terms.
  PolyId simplifyRoots(PolyId p);
  bool atomNonnegative(AtomId a, bool strict) const;
  /// The canonical terms of a product and of sums (mul(), add() and sum() add what
  /// they learn about the sign).
  PolyId mulTerms(PolyId a, PolyId b);
  PolyId addTerms(PolyId a, PolyId b);
  PolyId sumTerms(const std::vector<PolyId> &parts);
  /// Polynomials known to be >= 0 by how they were built (see provablyNonnegative).
  std::vector<bool> builtNonnegative;
  bool knownNonnegative(PolyId p) const {
    return p < builtNonnegative.size() && builtNonnegative[p];
  }
  /// Known, or nonnegative by its terms.
  bool nonnegativePart(PolyId p) const { return knownNonnegative(p) || provablyNonnegative(p); }
  void markNonnegative(PolyId p) {
    if (p >= builtNonnegative.size())
      builtNonnegative.resize(std::max<size_t>(polys.size(), p + 1));
    builtNonnegative[p] = true;
  }
  MonoId internMono(Monomial &&m);
  AtomId internAtom(Atom &&a);
  /// The polynomial 1 * a.
  PolyId atomPoly(Atom &&a);
  /// The product of two monomials; kZeroMono where the indicator laws make it 0.
  MonoId mulMono(MonoId a, MonoId b);
  static constexpr MonoId kZeroMono = ~MonoId(0);
  bool indicatorLaws(Monomial &m) const;
  void strPoly(PolyId p, std::string &out, size_t maxChars) const;

  std::vector<InputSymbol> inputs;
  std::vector<Poly> polys;
  std::vector<Monomial> monos;
  std::vector<Atom> atoms;
  std::vector<uint32_t> polyDepth, atomDepth;
  IdIndex polyIds, monoIds, atomIds;
  /// The atom `fn(args)`, if it exists (no atom is made).
  AtomId findAtom(Fn fn, const std::vector<PolyId> &args) const;
  ProductCache monoProducts; // key: (a << 32) | b, a <= b, neither the unit monomial (id 0)
  /// Bit 0: contains a function application; bit 1: contains a solver-exact function.
  uint8_t atomFlags(PolyId p);
  std::unordered_map<PolyId, uint8_t> flagMemo;
  size_t maxTerms, maxTotalTerms, totalTerms = 0;
  PolyId zeroId;
  MonoId unitMono;
};

/// Evaluates many polynomials of one pool at one assignment of the inputs, sharing the
/// values of common subexpressions (polynomials and atoms) through flat, generation-
/// stamped caches. `reset` starts a new assignment in O(1).
class Evaluator {
public:
  explicit Evaluator(const ExprPool &pool) : pool(pool) {}
  void reset(const std::vector<double> &values) {
    inputs = &values;
    ++generation;
  }
  double poly(PolyId p);

private:
  double atom(AtomId a);
  const ExprPool &pool;
  const std::vector<double> *inputs = nullptr;
  uint32_t generation = 0;
  std::vector<double> polyValue, atomValue;
  std::vector<uint32_t> polyGen, atomGen;
};

/// The expression DAG of a few roots flattened once into arrays in evaluation order, so
/// that evaluating it at many points -- a counterexample search and its minimization,
/// up to ~180 points -- is one linear pass over the nodes instead of a recursive walk
/// with a cache check per node. Each node is computed with the same operations in the
/// same order as Evaluator, so the values are bit-identical to it.
class Tape {
public:
  Tape(const ExprPool &pool, const std::vector<PolyId> &roots);
  /// Evaluates every node at `inputs` (a value per input symbol of the pool).
  void run(const std::vector<double> &inputs);
  /// The value of root `i` (in the order given) at the last run.
  double root(size_t i) const { return values[roots[i]]; }
  /// What one run costs: the nodes, terms and factors it walks.
  size_t work() const { return nodes.size() + terms.size() + factors.size(); }

private:
  uint32_t visitPoly(const ExprPool &pool, PolyId p);
  uint32_t visitAtom(const ExprPool &pool, AtomId a);
  enum Kind : uint8_t { Input, Function, Sum };
  struct Node {
    Kind kind;
    Fn fn;          // Function
    uint32_t input; // Input
    uint32_t begin, end; // Function: argument slots; Sum: terms
  };
  struct Term {
    double coefficient;
    uint32_t begin, end; // factors
  };
  std::vector<Node> nodes;
  std::vector<Term> terms;
  std::vector<std::pair<uint32_t, uint32_t>> factors; // (slot, exponent)
  std::vector<uint32_t> args;
  std::vector<uint32_t> roots;
  std::vector<double> values, scratch;
  std::vector<uint32_t> polySlot, atomSlot; // by id; ~0u: not on the tape
};

} // namespace planproof

#endif
