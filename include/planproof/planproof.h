//===- planproof/planproof.h - planproof's public C++ API -------*- C++ -*-===//
//
// What a program that is not planproof's CLI uses: load a spec (a reference step and
// its parallel plan) from a file or from text -- MLIR, or the JSON format of
// docs/json-format.md, which a program can build in code -- then verify it or replay
// it on numbers. No MLIR, LLVM or Z3 type appears here; installed with the library
// (`cmake --install`, then `find_package(planproof)`: examples/verify-in-code).
//
//   planproof::api::Session session;
//   auto spec = session.loadText("mlp.json", jsonText);
//   if (!spec) { std::cerr << spec.error().diagnostics; return 2; }
//   planproof::api::Result r = session.verify(*spec);
//   if (r.verdict == planproof::api::Verdict::Violated) ... r.violations[0].message ...
//
// Verdicts are the CLI's: *verified* only for what was proven; unsupported ops and
// budgets reached give *inconclusive* with the reason. Budgets count work, so the
// same spec gets the same verdict on any machine, load and thread count.
//
//===----------------------------------------------------------------------===//
#ifndef PLANPROOF_PLANPROOF_H
#define PLANPROOF_PLANPROOF_H

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace planproof {
struct Spec; // the library's own (internal)
class Diagnostics;
namespace api {

/// A place in an input: file, 1-based line and column (0 where unknown).
struct Location {
  std::string file;
  unsigned line = 0, column = 0;
  /// "file:line:col", or fewer parts where unknown.
  std::string str() const;
};

/// Why an input could not be used: the first diagnostic's message and place, and every
/// diagnostic as the CLI prints them ("file:line:col: error: ...", one a line).
struct Error {
  std::string message;
  Location at;
  std::string diagnostics;
};

/// A value, or the Error that says why there is none.
template <class T> class Expected {
public:
  Expected(T value) : v(std::move(value)) {}
  Expected(Error error) : v(std::move(error)) {}
  explicit operator bool() const { return v.index() == 0; }
  T &operator*() { return std::get<0>(v); }
  const T &operator*() const { return std::get<0>(v); }
  T *operator->() { return &std::get<0>(v); }
  const T *operator->() const { return &std::get<0>(v); }
  /// The error; only when there is no value.
  const Error &error() const { return std::get<1>(v); }

private:
  std::variant<T, Error> v;
};

enum class Verdict { Verified, Violated, Inconclusive };
/// "verified", "violated", "inconclusive".
const char *verdictName(Verdict verdict);

/// Concrete inputs that show a violation: the nonzero inputs (every other input 0), the
/// reference's value of one output element, the plan's, and the plan's values on the
/// ranks involved.
struct Counterexample {
  std::string element; // e.g. "w2_next[0,1]"
  std::vector<std::pair<std::string, double>> inputs;
  double reference = 0, plan = 0;
  std::vector<std::pair<std::string, double>> rankValues; // "(dp=0, tp=1)" -> local value
};

/// A violation (or a warning): its kind ("sharding", "reduction", "rng", ...), the
/// message, the plan op it points at and where, the reference value concerned, the
/// ranks, notes, a checked fix hint, and a counterexample where one was found.
struct Finding {
  std::string kind, message, hint;
  Location at;
  std::string op, value;
  std::vector<std::string> ranks, notes;
  std::optional<Counterexample> counterexample;
};

struct Stats {
  int64_t obligations = 0, decidedCanonical = 0, solverQueries = 0;
  int64_t ranks = 0, referenceOps = 0, planOps = 0;
  double milliseconds = 0;
  /// The layout engine's reuse within a Session: plan ops whose states came from an
  /// earlier verification (the same op on the same operand states), and whether the
  /// reference's run did.
  int64_t reusedStates = 0;
  bool reusedReference = false;
};

/// One rule of a proof (Options::explainProof): the layout engine's rule and the number
/// of plan ops on the output's way it derived (0: used by the output's comparison), or
/// the element engine's kind of decision and its number of element equalities.
struct ProofRule {
  std::string rule;
  int64_t count = 0;
};

/// How one output was proved: "layout" or "element", and the rules.
struct Proof {
  std::string output; // "output `w1_next`" ("every output" for the element engine)
  std::string engine;
  std::vector<ProofRule> rules;
};

struct Result {
  Verdict verdict = Verdict::Inconclusive;
  std::vector<Finding> violations, warnings;
  /// Why the verdict is inconclusive (where, why).
  std::vector<std::pair<Location, std::string>> inconclusive;
  /// What the spec's importer took for granted about the inputs (the spec's
  /// "assumptions"): the verdict holds under them.
  std::vector<std::string> assumptions;
  Stats stats;
  /// With Options::explainProof and a verified verdict: how each output was proved.
  std::vector<Proof> proof;
  /// The CLI's reports of this result: text, JSON (docs/json-format.md's report), and
  /// the self-contained HTML page of `--format html`.
  std::string text, json, html;
};

/// Z3's resource limit per query by default (counted work units), and what one
/// millisecond of the older `solverTimeoutMs`-style options is worth in them.
constexpr uint64_t kDefaultSolverBudget = 5'000'000;
constexpr uint64_t kSolverUnitsPerMs = 500;

struct Options {
  /// Wall-clock budget of one call: the outer safety bound; spent, the verdict is
  /// inconclusive and says so. It never decides a verdict the budgets below would not.
  double timeLimitSeconds = 600;
  unsigned threads = 2;
  /// Z3's resource limit per query (counted work: the same verdict on any machine, load
  /// and thread count); reached, the obligation is inconclusive.
  uint64_t solverBudget = kDefaultSolverBudget;
  /// When set, another thread may store true to stop the call soon after (the Python
  /// binding's Ctrl-C): the verdict is then inconclusive, "the run was interrupted".
  const std::atomic<bool> *interrupt = nullptr;
  /// Re-verify each suggested fix before showing it (costs a verification per hint).
  bool checkFixes = true;
  /// Verify at the shapes written, not reduced ones (JSON specs with "dims").
  bool fullShapes = false;
  /// Record the rules that prove each output (Result::proof; `--explain-proof`).
  bool explainProof = false;
  /// Which engine decides (docs/layout-engine.md): the element engine; the layout
  /// engine alone (verified or inconclusive, never violated; its cost does not grow
  /// with ranks or sizes); or, by default, the layout engine, then the element engine
  /// where it does not prove the plan. The same policy as `planproof verify`: a spec
  /// with calls, loaded from a file or text and not edited, is first proved function by
  /// function (docs/calls.md).
  enum class Engine { Element, Layout, Auto };
  Engine engine = Engine::Auto;
};

/// One plan output of a replay against the fp64 reference.
struct ReplayOutput {
  std::string name;
  bool within = true;
  double maxAbsError = 0, maxRelError = 0;
};

struct ReplayOptions {
  std::string dtype = "fp32"; // fp64, fp32, bf16
  std::string order = "ring"; // collective reduction order: rank, ring, tree
  uint64_t seed = 1;
  double timeLimitSeconds = 600;
  /// On a divergence, search for the first plan op that leaves the reference.
  bool localize = true;
  /// As Options::interrupt: true stops the replay soon after.
  const std::atomic<bool> *interrupt = nullptr;
};

struct ReplayResult {
  /// False when the spec could not be run (an unsupported op, a run too large): why.
  bool ran = false;
  std::string failure;
  bool diverged = false;
  std::vector<ReplayOutput> outputs;
  /// The first plan op whose value leaves its tolerance (empty op where none was found).
  std::string firstOp;
  Location firstAt;
  std::string firstNote;
  /// The seed the inputs were drawn from: the one asked for, or a later one where an
  /// output's reference was not finite at any element at the earlier ones.
  uint64_t seed = 0;
};

class Session;

/// One change of a loaded plan (Session::edit): attribute `attribute` of the plan op
/// that defines `value` (a result's SSA name as the plan writes it, "%g1") becomes `to`,
/// in MLIR's attribute syntax ("\"avg\"", `["dp", "tp"]`, `1 : i64`); an empty `to`
/// removes an optional attribute.
struct PlanEdit {
  std::string value;
  std::string attribute;
  std::string to;
};

/// A loaded spec. Lives in the Session that loaded it and must not outlive it.
class Spec {
public:
  Spec(Spec &&) noexcept;
  Spec &operator=(Spec &&) noexcept;
  ~Spec();
  /// The name it was loaded under (a file path, or the name given with the text).
  const std::string &name() const;
  int64_t ranks() const;

private:
  friend class Session;
  struct Impl;
  explicit Spec(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl;
};

/// Where specs are loaded, verified and replayed: it holds the MLIR context with
/// planproof's dialects. Not for concurrent use; make one per thread.
class Session {
public:
  Session();
  ~Session();
  Session(const Session &) = delete;
  Session &operator=(const Session &) = delete;

  /// Loads a spec file: .json (docs/json-format.md) or MLIR.
  Expected<Spec> load(const std::string &path, const Options &options = {});
  /// Loads a spec from text: JSON when `name` ends in ".json" or the text starts with
  /// '{', else MLIR. `name` is what diagnostics call it; nothing is read from disk.
  Expected<Spec> loadText(const std::string &name, const std::string &text,
                          const Options &options = {});
  /// Loads a candidate plan against the reference of `base` (a spec this session
  /// loaded): `planText` is MLIR holding the mesh and the plan function only. The
  /// reference is not parsed nor derived again, and verify() with the layout engine
  /// reuses the reference's run and every plan state whose op and operand states it
  /// has seen: a planner's loop pays for what its candidate changes
  /// (docs/layout-engine.md, "Reuse").
  Expected<Spec> loadPlan(const Spec &base, const std::string &name, const std::string &planText,
                          const Options &options = {});
  /// Changes the plan of `spec` in place, a planner's move: each edit sets one attribute
  /// of one plan op (a collective's reduction or axes, the dimension it gathers, a
  /// shard's axes), all or none. The edited ops are checked as loading checks them (the
  /// op's verifier, sizes and constants, a pipelined plan's analysis); what fails is
  /// an Error and leaves the plan as it was. Returns the edits that undo these. The
  /// next verify() with the layout engine re-derives only the states the edited ops
  /// reach (docs/layout-engine.md, "Reuse"). In a plan that derives its backward pass
  /// (ref.grad), a collective's change is made on the adjoint collectives derived from
  /// it too; what else a derivative rule read (a matmul's dimensions) cannot change in
  /// place, nor a spec loaded at reduced sizes: load the changed text with loadPlan.
  Expected<std::vector<PlanEdit>> edit(Spec &spec, const std::vector<PlanEdit> &edits);
  /// Decides the spec. Never throws. With the layout engine (Options::engine Layout or
  /// Auto), what it derived is kept for later specs of this session that share the
  /// reference; the verdict is the same as without it.
  Result verify(const Spec &spec, const Options &options = {});
  /// Runs reference and plan on numbers (the CPU backend) and compares them.
  Expected<ReplayResult> replay(const Spec &spec, const ReplayOptions &options = {});

private:
  struct Impl;
  std::unique_ptr<Impl> impl;
  Expected<Spec> loadWith(const std::string &name, const std::string &diagnosed,
                          const Options &options,
                          const std::function<bool(planproof::Spec &, planproof::Diagnostics &)> &load);
};

/// `planproof plan`: the spec (reference step and SPMD plan, MLIR text) of a model
/// configuration file (docs/plan.md) under a parallel configuration such as
/// "dp=2,tp=2,sp,microbatches=2". An Error names the file and JSON path, or the
/// option, or the configuration the generator cannot write.
Expected<std::string> generatePlan(const std::string &modelPath, const std::string &parallel);

} // namespace api
} // namespace planproof

#endif
