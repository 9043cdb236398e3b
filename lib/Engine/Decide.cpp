//===- Decide.cpp - deciding one element equality --------------*- C++ -*-===//
#include "Engine/Decide.h"
#include "Engine/ExactEval.h"
#include "Engine/Solver.h"

#include <z3++.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <unordered_map>

using namespace planproof;

bool planproof::numericallyDifferent(double a, double b) {
  if (!std::isfinite(a) || !std::isfinite(b))
    return false; // outside a function's domain (recip(0), log(-1)): no evidence
  return std::fabs(a - b) > 1e-9 * std::max({1.0, std::fabs(a), std::fabs(b)});
}

namespace {
/// A candidate difference: the values differ beyond rounding, or the plan's does not
/// exist (NaN, infinite) where the reference's does. Confirmed before it counts.
bool differsAt(Tape &tape, const std::vector<double> &values) {
  tape.run(values);
  double a = tape.root(0), b = tape.root(1);
  if (std::isfinite(b) && !std::isfinite(a))
    return true;
  return numericallyDifferent(a, b);
}

/// The inputs `p` or `q` depend on, sorted, without repeats.
std::vector<uint32_t> jointSupport(ExprPool &pool, PolyId p, PolyId q) {
  std::vector<uint32_t> support = pool.support(p);
  for (uint32_t s : pool.support(q))
    support.push_back(s);
  std::sort(support.begin(), support.end());
  support.erase(std::unique(support.begin(), support.end()), support.end());
  return support;
}

/// Random small integers on the support, then a minimization that sets inputs to 0
/// (else 1) while the difference survives, so counterexamples stay readable. The
/// minimization zeroes halves, then quarters, ... of the remaining inputs (delta
/// debugging), within a budget of evaluations: every evaluation walks the whole
/// expression graph, which is large for deep models.
struct ConcreteSearch {
  ExprPool &pool;
  PolyId p, q;
  bool minimizeFound;
  std::vector<uint32_t> support;
  Tape tape;
  std::mt19937 rng{12345};
  std::uniform_int_distribution<int> dist{-3, 3};
  // Integer inputs (token ids, 0/1 masks, seeds) stay in their domain [0, bound). In
  // the later trials they are mostly 1 (or 0 for a domain {0}), with a few exceptions: sparse
  // masks, so that counts differ without any group of them vanishing (a division by a
  // count of zero is no evidence either way).
  std::bernoulli_distribution sparse{0.15};

  ConcreteSearch(ExprPool &pool, PolyId p, PolyId q, bool minimizeFound)
      : pool(pool), p(p), q(q), minimizeFound(minimizeFound),
        support(jointSupport(pool, p, q)), tape(pool, {p, q}) {}

  double draw(uint32_t s, int trial);
  void minimize(std::vector<double> &point);
  bool run(std::vector<double> &values, bool &unconfirmed);
};

double ConcreteSearch::draw(uint32_t s, int trial) {
  // Integer step inputs (seeds, counters, step counts, bound 2^30) are drawn where
  // the step's arithmetic means something: small counts, not 2^30, where 0.9^t
  // underflows and every bias correction looks alike.
  int64_t bound = pool.input(s).bound;
  if (bound >= (int64_t(1) << 20))
    bound = 17;
  if (bound > 0) {
    if (trial == 0)
      return std::min<int64_t>(1, bound - 1);
    if (trial >= 12 && !sparse(rng))
      return (double)std::min<int64_t>(bound - 1, 1);
    return (double)std::uniform_int_distribution<int64_t>(0, bound - 1)(rng);
  }
  // The last trials use small values (halves, then eighths), where saturating functions (a clip
  // coefficient min(1, c / norm)) and small constants (an epsilon) are visible.
  if (trial >= 18)
    return dist(rng) / 8.0;
  if (trial >= 12)
    return dist(rng) / 2.0;
  return trial == 0 ? 1.0 : (double)dist(rng);
}

// Delta debugging in doubles: zero halves, quarters, ... of the inputs while the
// difference survives, then turn the remaining values into ones (within budget).
void ConcreteSearch::minimize(std::vector<double> &point) {
  // Minimizing is also what makes the exact confirmation that follows affordable: on a
  // deep model's tape (10^7-10^8 terms) an exact evaluation of a dense point (every
  // term nonzero, in rationals) costs minutes, of a minimized one seconds. So even
  // when only the verdict is wanted, the point is minimized where the tape is large.
  constexpr size_t kLargeTape = size_t(4) << 20;
  int budget = minimizeFound || tape.work() > kLargeTape ? 150 : 0;
  for (double target : {0.0, 1.0}) {
    for (size_t chunk = std::max<size_t>(1, support.size() / 2);; chunk /= 2) {
      for (size_t start = 0; start < support.size() && budget > 0; start += chunk) {
        size_t end = std::min(support.size(), start + chunk);
        std::vector<std::pair<uint32_t, double>> saved;
        for (size_t i = start; i < end; ++i) {
          uint32_t s = support[i];
          // Pass two only turns the remaining nonzero values into ones (in domain).
          int64_t bound = pool.input(s).bound;
          if (point[s] != target && point[s] != 0.0 && (bound == 0 || target < bound))
            saved.push_back({s, point[s]});
        }
        if (saved.empty())
          continue;
        for (auto &[s, v] : saved)
          point[s] = target;
        --budget;
        if (!differsAt(tape, point))
          for (auto &[s, v] : saved)
            point[s] = v;
      }
      if (chunk == 1 || budget <= 0)
        break;
    }
  }
}

bool ConcreteSearch::run(std::vector<double> &values, bool &unconfirmed) {
  values.assign(pool.numInputs(), 0.0);
  // A point counts only once its difference is confirmed (Engine/ExactEval.h): in
  // doubles, cancellation can make equal values look different. The minimized point is
  // confirmed first -- mostly zeros and ones, it is cheap to evaluate exactly -- then
  // the point it came from; a few candidates are tried before giving up.
  int attempts = 0;
  for (int trial = 0; trial < 24 && attempts < 3; ++trial) {
    for (uint32_t s : support)
      values[s] = draw(s, trial);
    if (!differsAt(tape, values))
      continue;
    ++attempts;
    std::vector<double> raw = values;
    minimize(values);
    if (certainlyDifferent(pool, p, q, values))
      return true;
    if (raw != values && certainlyDifferent(pool, p, q, raw)) {
      values = raw;
      return true;
    }
    unconfirmed = true;
  }
  // Rounding can also hide a difference between two polynomials (no function atoms,
  // no unexpanded products, where canonical forms are complete): a few points
  // evaluated exactly, when the expressions are small enough for that to be cheap.
  bool polynomial = !pool.hasApplications(p) && !pool.hasApplications(q) &&
                    pool.dagTerms(p, 20000) + pool.dagTerms(q, 20000) <= 20000;
  for (int trial = 0; trial < 4 && polynomial; ++trial) {
    for (uint32_t s : support)
      values[s] = draw(s, 1 + trial);
    if (certainlyDifferent(pool, p, q, values))
      return true;
  }
  return false;
}

bool concreteSearch(ExprPool &pool, PolyId p, PolyId q, std::vector<double> &values,
                    bool &unconfirmed, bool minimizeFound) {
  ConcreteSearch search(pool, p, q, minimizeFound);
  return search.run(values, unconfirmed);
}

double numeralToDouble(const z3::expr &e) {
  std::string s = Z3_get_numeral_string(e.ctx(), e);
  auto slash = s.find('/');
  if (slash == std::string::npos)
    return std::strtod(s.c_str(), nullptr);
  return std::strtod(s.substr(0, slash).c_str(), nullptr) /
         std::strtod(s.substr(slash + 1).c_str(), nullptr);
}

struct Z3Encoder {
  ExprPool &pool;
  z3::context &ctx;
  std::unordered_map<PolyId, z3::expr> memo;
  std::unordered_map<uint32_t, z3::expr> inputs;

  std::vector<z3::expr> domain; // integrality and range of integer inputs

  z3::expr input(uint32_t id) {
    auto it = inputs.find(id);
    if (it != inputs.end())
      return it->second;
    z3::expr e = ctx.real_const(pool.input(id).str().c_str());
    if (int64_t bound = pool.input(id).bound) {
      domain.push_back(z3::is_int(e));
      domain.push_back(e >= ctx.real_val(0));
      domain.push_back(e < ctx.real_val(std::to_string(bound).c_str()));
    }
    inputs.emplace(id, e);
    return e;
  }

  z3::expr poly(PolyId p) {
    auto it = memo.find(p);
    if (it != memo.end())
      return it->second;
    z3::expr sum = ctx.real_val(0);
    for (auto &[m, c] : pool.poly(p).terms) {
      z3::expr prod = ctx.real_val(c.numeratorStr().c_str()) /
                      ctx.real_val(c.denominatorStr().c_str());
      for (auto &[a, e] : pool.mono(m).factors) {
        z3::expr base = atom(a);
        for (uint32_t k = 0; k < e; ++k)
          prod = prod * base;
      }
      sum = sum + prod;
    }
    memo.emplace(p, sum);
    return sum;
  }

  z3::expr atom(AtomId a) {
    const Atom &at = pool.atom(a);
    if (at.isInput)
      return input(at.input);
    std::vector<z3::expr> args;
    for (PolyId q : at.args)
      args.push_back(poly(q));
    if (at.fn == Fn::Max) {
      z3::expr m = args[0];
      for (size_t i = 1; i < args.size(); ++i)
        m = z3::ite(args[i] > m, args[i], m);
      return m;
    }
    if (at.fn == Fn::Eq)
      return z3::ite(args[0] == args[1], ctx.real_val(1), ctx.real_val(0));
    if (at.fn == Fn::Step)
      return z3::ite(args[0] > ctx.real_val(0), ctx.real_val(1), ctx.real_val(0));
    if (at.fn == Fn::TopK) {
      // Selected when fewer than k entries beat x_e (greater, or equal at a lower index).
      size_t n = args.size() - 2;
      Rational e, k;
      pool.isConstant(at.args[n], &e);
      pool.isConstant(at.args[n + 1], &k);
      z3::expr beaten = ctx.int_val(0);
      for (size_t j = 0; j < n; ++j) {
        z3::expr beats = (int64_t)j < e.numerator() ? args[j] >= args[e.numerator()]
                                                    : args[j] > args[e.numerator()];
        beaten = beaten + z3::ite(beats, ctx.int_val(1), ctx.int_val(0));
      }
      return z3::ite(beaten < ctx.int_val((int)k.numerator()), ctx.real_val(1), ctx.real_val(0));
    }
    // An unexpanded product stays opaque for the solver (an uninterpreted function of
    // its factors, below): multiplying large sums out is what makes Z3's nonlinear
    // preprocessing run away, past its timeout. Equalities it proves still hold for
    // the product (a model of the function); a difference it finds is confirmed
    // numerically before it is reported.
    z3::sort real = ctx.real_sort();
    z3::sort_vector domain(ctx);
    z3::expr_vector actuals(ctx);
    for (const z3::expr &a : args) {
      domain.push_back(real);
      actuals.push_back(a);
    }
    z3::func_decl f = ctx.function(fnInfo(at.fn).name, domain, real);
    return f(actuals);
  }
};
} // namespace

void planproof::limitSolver(z3::context &ctx, z3::solver &solver, const SolverBudget &budget) {
  z3::params params(ctx);
  // Z3 reads 0 as "no limit": a budget is at least one unit.
  params.set("rlimit", (unsigned)std::clamp<uint64_t>(budget.rlimit, 1, UINT32_MAX));
  // The outer bound only: what is left of the run's --time-limit (never the reason a
  // query is undecided while the run goes on; throwIfDeadlineEnded).
  if (budget.deadline && budget.deadline->isLimited())
    params.set("timeout", budget.deadline->cap(UINT32_MAX >> 2));
  solver.set(params);
}

uint64_t planproof::solverWorkOf(z3::solver &solver) {
  z3::stats st = solver.statistics();
  for (unsigned i = 0; i < st.size(); ++i)
    if (st.key(i) == "rlimit count")
      return st.is_uint(i) ? st.uint_value(i) : (uint64_t)st.double_value(i);
  return 0;
}

void planproof::throwIfDeadlineEnded(const SolverBudget &budget, const char *phase) {
  if (budget.deadline)
    budget.deadline->check(phase);
}

std::string planproof::solverLimitReason(const SolverBudget &budget, const std::string &z3Reason) {
  return "Z3 reached its resource limit of " + std::to_string(budget.rlimit) +
         " units without an answer (" + z3Reason +
         "); --solver-budget raises it (counted work: the same on any machine)";
}

Decision planproof::decideEqual(ExprPool &pool, PolyId plan, PolyId reference,
                                const SolverBudget &budget, bool minimize) {
  Decision d;
  if (plan == reference) {
    d.result = Equality::Equal;
    d.byCanonicalForm = true;
    return d;
  }
  bool lattice = pool.hasLatticeAtoms(plan) || pool.hasLatticeAtoms(reference);
  bool functions = pool.hasApplications(plan) || pool.hasApplications(reference);
  // A concrete difference with every function at its real definition settles it.
  bool unconfirmed = false;
  if (concreteSearch(pool, plan, reference, d.assignment, unconfirmed, minimize)) {
    d.result = Equality::Unequal;
    d.byCanonicalForm = !lattice;
    return d;
  }
  if (!lattice) {
    // Different canonical polynomials over free atoms differ somewhere; without
    // functions the solver only has to produce the witness.
    if (functions) {
      d.result = Equality::Unknown;
      d.reason = unconfirmed
                     ? "the canonical forms differ (through uninterpreted functions or "
                       "unexpanded products); floating-point evaluation showed differences "
                       "that exact evaluation does not confirm (rounding, not a witness)"
                     : "the canonical forms differ (through uninterpreted functions or "
                       "unexpanded products), but no concrete counterexample was found with "
                       "the functions' real definitions";
      return d;
    }
  }
  // Max (or a polynomial difference the search could not witness): ask Z3, unless the
  // terms are so large that Z3 could run past its timeout in preprocessing (it does not
  // always check for cancellation there); that is inconclusive, never a hang.
  constexpr size_t kSolverTermLimit = 20000;
  size_t terms = pool.dagTerms(plan, kSolverTermLimit) + pool.dagTerms(reference, kSolverTermLimit);
  if (terms > kSolverTermLimit) {
    d.result = Equality::Unknown;
    d.reason = "no concrete counterexample was found, and the expressions (more than " +
               std::to_string(kSolverTermLimit) + " terms) are too large to hand to Z3";
    return d;
  }
  throwIfDeadlineEnded(budget, "deciding obligations");
  d.usedSolver = true;
  try {
    z3::context ctx;
    z3::solver solver(ctx);
    limitSolver(ctx, solver, budget);
    Z3Encoder enc{pool, ctx, {}, {}, {}};
    solver.add(enc.poly(plan) != enc.poly(reference));
    for (const z3::expr &c : enc.domain)
      solver.add(c);
    z3::check_result answer = solver.check();
    d.solverWork = solverWorkOf(solver);
    switch (answer) {
    case z3::unsat:
      d.result = Equality::Equal;
      return d;
    case z3::sat: {
      z3::model model = solver.get_model();
      d.assignment.assign(pool.numInputs(), 0.0);
      for (auto &[id, e] : enc.inputs)
        d.assignment[id] = numeralToDouble(model.eval(e, true));
      if (certainlyDifferent(pool, plan, reference, d.assignment)) {
        d.result = Equality::Unequal;
        d.assignmentFromSolver = true;
        return d;
      }
      d.result = Equality::Unknown;
      d.reason = functions ? "Z3 found a difference only for uninterpreted functions, and it "
                             "does not hold for their real definitions"
                           : "Z3 found a difference, but not at a point that exact evaluation "
                             "at double precision confirms";
      return d;
    }
    case z3::unknown:
      throwIfDeadlineEnded(budget, "deciding obligations");
      d.result = Equality::Unknown;
      d.reason = solverLimitReason(budget, solver.reason_unknown());
      return d;
    }
  } catch (const z3::exception &e) {
    throwIfDeadlineEnded(budget, "deciding obligations");
    d.result = Equality::Unknown;
    d.reason = std::string("Z3 error: ") + e.msg();
  }
  return d;
}
