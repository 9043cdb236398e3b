//===- Verifier.h - deciding a spec: obligations, verdict, violations -*- C++ -*-===//
//
// The entry point of the library: given a loaded Spec, decide whether every plan
// output, gathered through its layout, equals the reference value it claims to be, for
// every input; whether every reference output is produced; and, when not, where the
// plan goes wrong, of what kind, on which ranks, with a concrete counterexample.
//
//===----------------------------------------------------------------------===//
#ifndef PLANPROOF_ENGINE_VERIFIER_H
#define PLANPROOF_ENGINE_VERIFIER_H

#include "Spec/Spec.h"
#include "Support/Deadline.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace planproof {

struct PlanEdit;

enum class Verdict { Verified, Violated, Inconclusive };
const char *verdictName(Verdict v);

/// Concrete values that show a violation: the inputs (all others are 0), the
/// reference value of one output element, and the plan's values on the ranks involved.
struct Counterexample {
  std::string element;                                 // e.g. "w2_next[0,1]"
  std::vector<std::pair<std::string, double>> inputs;  // nonzero inputs only
  double reference = 0, plan = 0;                      // plan: gathered value
  std::vector<std::pair<std::string, double>> rankValues; // "(dp=0, tp=1)" -> local value
  bool fromSolver = false; // values from a Z3 model with functions left uninterpreted
};

struct Violation {
  std::string kind;     // sharding, reduction, rng, grad-norm, loss-normalization, ...
  std::string message;
  /// A suggested fix, shown only once checked: `fix` applied to a copy of the plan makes
  /// this violation go away (Verifier.cpp, checkFixes). "" when there is none.
  std::string hint;
  std::shared_ptr<const PlanEdit> fix;
  /// A report whose claim is its fix (a reduction missing further on, Unreduced.cpp):
  /// what is reported instead when re-verifying the fix refutes it (checkFixes); its
  /// kind, message, place and notes replace these. Null for every other report.
  std::shared_ptr<const Violation> fallback;
  SourceLoc location;
  std::string at;       // SSA name of the plan op the violation points at ("" if none)
  std::string value;    // the reference value(s) concerned
  std::vector<std::string> ranks;
  std::vector<std::string> notes;
  std::vector<std::pair<SourceLoc, std::string>> locatedNotes;
  bool hasCounterexample = false;
  Counterexample counterexample;
  /// The layouts a picture of the violation shows (the HTML report): a value as the
  /// plan holds it, and as the reference needs it, over the reference value's shape.
  struct LayoutPicture {
    std::string title;
    Layout layout;
    Shape shape;
  };
  std::vector<LayoutPicture> pictures;
  /// A pipeline deadlock's time-line (the HTML report): each stage's sends, receives
  /// and pipeline-wide collectives in program order, how far each got (`done` events
  /// matched; the next is where it waits, -1 when it finished), whom it waits for, and
  /// the stages of the wait cycle in order.
  struct Timeline {
    std::vector<std::vector<std::string>> events;
    std::vector<int64_t> done, waitsFor, cycle;
  };
  std::optional<Timeline> timeline;
};

/// Z3's resource limit per query by default (`rlimit` units, counted work). Z3 counts
/// its steps at very different rates by theory: on this project's 2-core machine the
/// queries the element engine asks (max, exp, log, products) spend 25-5,600 units a
/// millisecond, median 640, purely linear ones about 11,000; the hardest of the test
/// suite's 284 queries needs 270,226 (bench/results-trust.md, "Deterministic
/// budgets"). The default is about the older 10 s timeout for the slowest kind, 18
/// times what the suite needs.
constexpr uint64_t kDefaultSolverBudget = 5'000'000;
/// What one millisecond of `--timeout-ms` (the option's older, wall-clock form) is
/// worth in Z3 resource units: a fixed rate, so that the option stays deterministic.
constexpr uint64_t kSolverUnitsPerMs = 500;

struct VerifyOptions {
  /// Z3's resource limit per query (planproof --solver-budget). Every budget that can
  /// change a verdict counts work, never wall-clock time: the same spec gives the same
  /// verdict on any machine, load and thread count.
  uint64_t solverBudget = kDefaultSolverBudget;
  /// Total Z3 work for a run's obligations, in full queries' worth (this many times
  /// `solverBudget`); past it, each further query gets a hundredth of `solverBudget`,
  /// so that many hard obligations cannot add up to minutes (they end inconclusive
  /// instead). Counted in the order obligations are decided, which does not depend on
  /// the thread count.
  uint64_t decisionQueries = 4;
  uint64_t decisionBudget() const { return decisionQueries * solverBudget; }
  /// Threads deciding obligations whose canonical forms differ (concrete search, Z3).
  unsigned threads = 2;
  /// The wall-clock budget of the whole run (planproof --time-limit): the outer safety
  /// bound, never a verdict's budget. Every phase checks it, and a spent time limit
  /// makes the verdict inconclusive with that reason (Support/Deadline.h).
  Deadline deadline;
  /// Check every fix hint by re-verifying the edited plan (else hints are dropped).
  bool checkFixes = true;
  /// When not empty: decide only the plan outputs holding these reference values (a
  /// fix's re-verification), without the coverage, RNG and checkpoint checks.
  std::set<std::string> onlyOutputs;
  /// Only the verdict is wanted (a fix's re-verification): deciding stops at the first
  /// confirmed difference, its counterexample is not minimized, and the difference is
  /// reported at its output instead of being localized and explained.
  bool verdictOnly = false;
  /// Only a proof is wanted (a fix's re-verification, which keeps its hint only if the
  /// edited plan is verified): deciding also stops at the first obligation that stays
  /// undecided, since the verdict can then no longer be "verified".
  bool proofOnly = false;
  /// The process ends after this run (the planproof tool's verify, which then exits
  /// without tearing anything down): an engine may leave its working memory to the
  /// process's exit instead of freeing it (as clang's -disable-free does; freeing a
  /// production plan's terms and states was a twentieth of its run).
  bool keepMemory = false;
  /// Record which rules prove each output (VerifyResult::proof; --explain-proof).
  bool proofTrace = false;
};

struct VerifyStats {
  int64_t obligations = 0;       // element equalities checked
  int64_t decidedCanonical = 0;  // decided by canonical forms alone
  int64_t solverQueries = 0;
  int64_t ranks = 0;
  int64_t referenceOps = 0, planOps = 0;
  int64_t expressions = 0, expressionTerms = 0; // hash-consed polynomials and their terms
  /// Layout engine with a cache (LayoutCache): plan states reused from earlier runs,
  /// and whether the reference's run was.
  int64_t reusedStates = 0;
  bool reusedReference = false;
  /// Layout engine on kept calls (Spec::keepCalls): function bodies run (summaries) and
  /// the plan calls they served.
  int64_t functionBodies = 0, summarizedCalls = 0;
  /// Z3's counted work (resource units): in all, the most one query spent, the budget
  /// per query it ran under, and the queries that reached their limit -- what a user
  /// reads to know whether raising --solver-budget could decide more.
  uint64_t solverWork = 0, solverWorkMax = 0, solverBudget = 0;
  int64_t solverLimited = 0;
  /// Runs of an edited plan that checked fix hints (Fixes.cpp).
  int64_t fixChecks = 0;
  double milliseconds = 0;
  void noteSolverWork(uint64_t work) {
    solverWork += work;
    solverWorkMax = std::max(solverWorkMax, work);
  }
};

struct VerifyResult {
  Verdict verdict = Verdict::Inconclusive;
  std::vector<Violation> violations;
  std::vector<std::pair<SourceLoc, std::string>> inconclusiveReasons;
  /// Findings that do not change the verdict but are almost always bugs (a collective
  /// whose result is never used), with a kind, location and message like violations.
  std::vector<Violation> warnings;
  /// Where the layout engine finds the plan departing from the reference on the way to
  /// outputs it does not show equal (DepartureFinder: a diagnostic, not a verdict), and
  /// where a partial sum reaches an op not linear in it; the same findings are among
  /// inconclusiveReasons. The element engine leaves it empty.
  struct Departure {
    SourceLoc location;
    std::string op;      // "%name = ref.div"
    std::string message; // as in inconclusiveReasons
    mlir::Operation *at = nullptr; // the plan op (of the spec verified)
  };
  std::vector<Departure> departures;
  /// The proof trace of a verified verdict (VerifyOptions::proofTrace): for each output,
  /// the engine that proved it and the rules that did -- the layout engine's rules, each
  /// with the number of plan ops on the output's way it derived (0: what the output's
  /// comparison used); the element engine's decisions by kind, with their numbers of
  /// element equalities.
  struct ProofRule {
    std::string rule;
    int64_t count = 0;
  };
  struct Proof {
    std::string output; // "output `w1_next`"
    std::string engine; // "layout" or "element"
    std::vector<ProofRule> rules;
  };
  std::vector<Proof> proof;
  VerifyStats stats;
};

/// Decides `spec`. Never throws.
VerifyResult verifySpec(const Spec &spec, const VerifyOptions &options = {});

/// Why a spec whose plan returns nothing to compare is inconclusive in every engine (no
/// vacuous proofs).
inline constexpr const char *kNothingToCheck =
    "nothing to check: the plan returns no value that holds an element of a reference "
    "output, so there is no equality to prove";

/// The reference outputs no plan output returns, as `dataflow` violations (both engines).
std::vector<Violation> missingOutputs(const Spec &spec);

/// The plan's collectives whose results are never used, as warnings (both engines
/// report them: almost always a plan that reads the unreduced operand instead).
std::vector<Violation> discardedCollectives(const Spec &spec);

/// What the element engine keeps between runs on specs that share their reference (a
/// planner's candidate plans, Session::loadPlan): the expression pool and the
/// reference's symbolic execution, so that a candidate pays for its plan only. The
/// reference is recognized by its exact structure (Verifier.cpp, referenceKey: the
/// context, every op's name, attributes, operands and result types, the function's
/// attributes, the inputs' names, bounds and signs); a spec of another reference
/// replaces what the cache holds, and a pool grown past a bound is dropped.
class ElementCache {
public:
  ElementCache();
  ~ElementCache();
  ElementCache(const ElementCache &) = delete;
  ElementCache &operator=(const ElementCache &) = delete;
  struct Impl;
  std::unique_ptr<Impl> impl;
};

/// verifySpec, reusing and filling `cache`: the same verdict, violations and reasons
/// as without it; stats.reusedReference says whether the reference's run was reused.
VerifyResult verifySpec(const Spec &spec, const VerifyOptions &options, ElementCache &cache);

/// A plan value (an op result) and the reference value it holds exactly, by the
/// localization's relations: element l of rank r's value is element
/// layout.globalIndex(r, block or its own shape, l + offset) of `refValue`.
struct PlanValueRelation {
  mlir::Value planValue, refValue;
  Layout layout;
  Shape block;
  std::vector<int64_t> offset;
};

/// The exact relations of every plan op result, in program order (values relating to
/// no reference value are left out). Runs the element engine; `why` says why not when
/// it cannot (then the result is empty).
std::vector<PlanValueRelation> relatePlanValues(const Spec &spec, std::string &why);

} // namespace planproof

#endif
