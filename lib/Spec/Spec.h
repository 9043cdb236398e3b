//===- Spec.h - a verification problem: reference, plan, bindings -*- C++ -*-===//
//
// A *spec* is what the verifier checks: a reference step function, a plan function on
// a mesh, the bindings of the plan's arguments and results to reference values with
// their layouts, and optionally the verdict the spec's author expects (used by
// `planproof check-specs` for the bundled catalogue of correct and seeded-bug plans).
//
// Specs are loaded from MLIR text (one file, or a reference file plus a plan file) or
// from the JSON interchange format (lib/Import). Loading validates everything the
// engines rely on and reports bad input as located diagnostics.
//
//===----------------------------------------------------------------------===//
#ifndef PLANPROOF_SPEC_SPEC_H
#define PLANPROOF_SPEC_SPEC_H

#include "Dist/DistDialect.h"
#include "Semantics/Layout.h"
#include "Support/Diagnostic.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace llvm {
class SourceMgr;
}

namespace planproof {

/// A source position, as reported to users.
SourceLoc toSourceLoc(mlir::Location loc);

/// An op's attribute as a message shows it (integer arrays as [a, b]).
std::string attrText(mlir::Attribute a);

/// For a plan op each of whose operands holds the reference value `held` names: the
/// reference op of its kind and attributes that takes those values at every position
/// but one (`operand`) -- the op it stands for, in an iteration where the plan passes
/// another iteration's value (Counterparts.cpp). Only one that comes after every held
/// value, where the odd value has that role in the reference too and the value it takes
/// there has the odd value's type; of two, the one whose
/// wanted value the plan never computes (`planHolds`). False where there is none, more
/// than one, or the reference pairs `held` itself.
bool referenceCounterpart(mlir::Operation *op, llvm::ArrayRef<mlir::Value> held,
                          llvm::function_ref<bool(mlir::Value)> planHolds,
                          mlir::Operation *&partner, unsigned &operand);
/// Where plan op P (computing what `held` says it holds) and reference op Q of the same
/// kind part: an operand of P holding a reference value other than Q's operand there,
/// one whose wanted value the plan never computes first (where several differ, they
/// come from one cause); -1 where none does.
int partingOperand(mlir::Operation *P, mlir::Operation *Q,
                   llvm::function_ref<mlir::Value(mlir::Value)> held,
                   llvm::function_ref<bool(mlir::Value)> planHolds);

/// One plan argument or result: the reference value it holds a piece of, and how.
struct Binding {
  unsigned index;          // argument or result number in the plan function
  std::string refName;     // the reference value
  Layout layout;
  Shape localShape;
  mlir::Location loc;
  /// In a pipelined plan: the stage whose ranks hold it (`dist.stage`), or -1 for
  /// every stage.
  int64_t stage = -1;
};

/// A defect of a pipelined plan's structure, found before any value is computed
/// (an unmatched send, a value used on a stage that never received it); the verifier
/// reports each as a `schedule` violation.
struct ScheduleProblem {
  mlir::Operation *op;
  std::string message, hint;
};

/// What the spec's author says the verifier must answer.
struct Expectation {
  bool present = false;
  std::string verdict; // verified | violated | inconclusive
  std::string kind;    // for violations: the violation kind
  std::string at;      // for violations: SSA name of the plan op the report points at
  /// The engine the expectation is stated for ("": the one run), and, for an
  /// inconclusive verdict, the line of its first place (0: any); a generated spec's
  /// (`.plan`, Plan/PlanGen.h).
  std::string engine;
  int atLine = 0;
};

/// A dimension symbol of a parametric spec: its full size and the size verified.
struct ReducedDim {
  std::string name;
  int64_t full, used;
};

/// Integer (`index`) inputs of the step -- random seeds and counters, step counts --
/// are symbols ranging over [0, kIndexBound).
constexpr int64_t kIndexBound = int64_t(1) << 30;

/// A plan's ref.dropout_mask in *independent* RNG mode: which piece of which
/// reference mask it stands for. Element `l` of the op's result on rank `r` is element
/// `layout.globalIndex(r, blockShape, l + blockOffset)` of the reference mask.
struct DrawBinding {
  mlir::Operation *op;
  mlir::Value refMask;
  std::string refName;
  Layout layout;
  Shape blockShape;                 // the rank's block of the reference mask
  std::vector<int64_t> blockOffset; // where this op's piece starts inside the block
  /// Why the draw cannot stand for the reference's (an attribute that changes what is
  /// drawn differs: the drop probability), or "". The element engine substitutes the
  /// reference's draws only when it is empty; the RNG check reports it otherwise.
  std::string mismatch;
};

struct Spec {
  std::string path;
  std::vector<mlir::OwningOpRef<mlir::ModuleOp>> modules;
  /// The modules as written, before the derived backward passes were expanded, and the
  /// map from the ops and values of `modules` that were written to their copies there:
  /// a checked fix edits the plan as written (Engine/PlanEdit.h).
  std::vector<mlir::OwningOpRef<mlir::ModuleOp>> written;
  std::shared_ptr<mlir::IRMapping> writtenMap;
  // Op handles are non-const in MLIR; a const Spec still lets engines read its IR.
  mutable mlir::func::FuncOp reference, plan;
  Mesh mesh;
  std::vector<std::string> refInputs, refOutputs; // names by argument / result number
  std::vector<int64_t> refInputBounds; // per argument: 0 (real) or N (integer in [0, N))
  /// Per argument: a real input declared nonnegative (`ref.nonnegative`: second moments,
  /// variances). The replay draws such inputs from |N(0, 1)| so that the reference is
  /// defined where the step's state can be; the canonical forms' sqrt(s)^2 = s and
  /// recip(t) t = 1 take the declaration as given (docs/semantics.md).
  std::vector<bool> refInputNonnegative;
  std::vector<Binding> planInputs, planOutputs;
  /// The losses the plan differentiates with ref.grad (its backward passes' seeds).
  std::vector<mlir::Value> planGradSeeds;
  /// A checkpoint spec: the plan saves its state (dist.save) and a second plan function
  /// marked `dist.resume`, on a mesh of its own, loads it (dist.load) and runs the next
  /// step (docs/checkpoint.md).
  mutable mlir::func::FuncOp resume;
  Mesh resumeMesh;
  std::vector<Binding> resumeInputs, resumeOutputs;
  /// Pipeline parallelism (docs/pipeline.md): the mesh axis of the stages
  /// (`dist.pipeline`), or -1. Every plan op's stage (-1: executed by every stage),
  /// each recv's matching send, the plan's ops in an order where every value is
  /// computed before it is used and every send before its recv (the textual order
  /// for plans without a pipeline), and the structural defects found.
  int pipelineAxis = -1;
  llvm::DenseMap<mlir::Operation *, int64_t> opStage;
  llvm::DenseMap<mlir::Operation *, mlir::Operation *> recvFrom;
  std::vector<mlir::Operation *> planOrder;
  std::vector<ScheduleProblem> scheduleProblems;
  /// This spec among every spec analyzed in the process (analyzeSpec; never 0 once
  /// analyzed): an engine's cache of a run on this spec's plan is keyed by it, never by
  /// addresses, which a later spec may reuse.
  uint64_t serial = 0;
  /// Edits of the plan in place (lib/Spec/Edit.h): how many were applied, and each
  /// edited op with the generation its edit made. A cache of a run at generation g
  /// re-derives what the ops edited after g reach.
  uint64_t generation = 0;
  std::vector<std::pair<uint64_t, mlir::Operation *>> edited;
  /// The source lines of edited ops as written, and per attribute its value as written
  /// and now: `sources` shows such a line with "  // edited: kind = \"avg\"" appended
  /// while a value differs from the written one, so that a report's snippet shows the
  /// plan that was verified.
  struct EditedLine {
    std::string written;
    std::map<std::string, std::pair<std::string, std::string>> values;
  };
  std::map<std::pair<std::string, unsigned>, EditedLine> editedLines;
  /// What the derivation of backward passes read (expandGradOps' `ruled`): the ops
  /// whose derivative rule ran, and each collective's adjoint collectives. An edit of
  /// an op no rule read leaves the derived ops what a fresh derivation would make; an
  /// edit of a collective's attribute is made on its adjoints too (Edit.h).
  llvm::DenseSet<mlir::Operation *> ruled;
  llvm::DenseMap<mlir::Operation *, llvm::SmallVector<mlir::Operation *, 1>> adjoints;
  /// What edits look up, made by the first one (edits change attributes only, so it
  /// stays true): the plan's ops by result name, and whether the plan derives a
  /// backward pass.
  struct EditIndex {
    std::map<std::string, mlir::Operation *> byName;
    bool derived = false;
  };
  std::shared_ptr<EditIndex> editIndex;
  /// The reference's structure, exactly, for the engines' caches (a planner's
  /// candidates share their reference): its context; the function's attributes (its
  /// type and argument attributes); per op its name, attribute dictionary and result
  /// types -- uniqued in the context, so equal exactly when their pointers are -- and
  /// its operands by position. Two references with the same key and the same input
  /// names, bounds and signs run to the same values. Empty (never equal to a cached
  /// key) when an op has regions, which the key does not describe.
  std::vector<uintptr_t> referenceKey() const;
  /// referenceKey, computed once (the reference is never edited after analyzeSpec).
  const std::vector<uintptr_t> &referenceKeyOnce() const {
    if (!referenceKeyMemo)
      referenceKeyMemo = std::make_shared<std::vector<uintptr_t>>(referenceKey());
    return *referenceKeyMemo;
  }
  mutable std::shared_ptr<std::vector<uintptr_t>> referenceKeyMemo;
  /// The plan's ops in execution order (planOrder, or the order written).
  std::vector<mlir::Operation *> planOps() const {
    if (!planOrder.empty())
      return planOrder;
    std::vector<mlir::Operation *> ops;
    for (mlir::Operation &op : plan.getBody().front())
      ops.push_back(&op);
    return ops;
  }
  /// The stage of `op` (-1: every stage).
  int64_t stageOf(mlir::Operation *op) const {
    auto it = opStage.find(op);
    return it == opStage.end() ? -1 : it->second;
  }
  /// The rank of stage `stage` with `rank`'s other coordinates.
  int64_t rankOnStage(int64_t rank, int64_t stage) const {
    std::vector<int64_t> c = mesh.coords(rank);
    c[pipelineAxis] = stage;
    return mesh.rankOf(c);
  }
  /// Whether `rank` belongs to `stage` (-1: every stage).
  bool onStage(int64_t rank, int64_t stage) const {
    return stage < 0 || pipelineAxis < 0 || mesh.coords(rank)[pipelineAxis] == stage;
  }

  /// RNG checking mode (plan attribute dist.rng): exact (default) or independent.
  bool rngIndependent = false;
  std::vector<DrawBinding> draws;
  /// Reference outputs that are the next value of a step input (`ref.updates = "in"`
  /// on the result): output name -> input name. Random counters, step counts and
  /// optimizer state: the checks that span two steps use it.
  std::map<std::string, std::string> stateUpdates;
  /// Display names of SSA values as written in the source (`%h`, or JSON names).
  llvm::DenseMap<mlir::Value, std::string> names;
  /// Derived gradients (the values replacing ref.grad results): the name of the value
  /// each is the gradient of.
  llvm::DenseMap<mlir::Value, std::string> gradientOf;
  /// The function (`@name`) each op of a called function was written in, by the op's
  /// place ("file:line:col"): every expansion of the op has that place (Calls.cpp).
  std::map<std::string, std::string> functionAt;
  /// Source lines of each loaded file, for diagnostic snippets.
  std::map<std::string, std::vector<std::string>> sources;
  Expectation expect;
  /// What the spec's importer took for granted about the inputs beyond their types
  /// (module attribute `planproof.assumptions`, JSON "assumptions": a capture whose
  /// labels are classes only because its batch held no ignored token). Every verdict
  /// holds under them, and reports show them with it.
  std::vector<std::string> assumptions;
  /// Whether parametric specs are verified at reduced sizes (docs/shape-reduction.md).
  bool reduceShapes = true;
  std::vector<ReducedDim> reducedDims;
  /// 2 x (product of the mesh axis sizes and interleaving segments): every reduced
  /// dimension is a multiple of it, so every shard of it keeps >= 2 elements.
  int64_t reductionQuantum = 0;
  /// Set before loading: keep the calls of private functions (a repeated layer stated
  /// once) instead of expanding them, and derive backward passes through them (a
  /// vector-Jacobian function per callee, lib/Transforms/Vjp.cpp): the form in which
  /// the layout engine proves each function once per boundary state (docs/calls.md).
  /// No other engine reads such a spec.
  bool keepCalls = false;
  /// Set before loading: the most ops the expansion of calls may make (measured before
  /// anything is expanded; past it the spec is undecidable). `export`, which writes
  /// every op out, asks for fewer.
  uint64_t maxExpandedOps = 5'000'000;
  /// After loading with keepCalls: why the kept form is not for the layout engine's
  /// summaries ("" when it is): no calls, or calls of functions with effects (messages,
  /// checkpoints, random draws, stage selections, pipeline-wide collectives), which
  /// the spec must be expanded to read.
  std::string keptCallsRefused;
  /// Set when the spec is well-formed but cannot be decided as written (an op on a
  /// differentiated path has no derivative rule): the verdict is then *inconclusive*.
  std::string undecidable;
  SourceLoc undecidableAt;

  std::string nameOf(mlir::Value v) const;
  std::string snippet(const SourceLoc &loc) const;
  /// A checkpoint spec's second step as a spec of its own: the same reference, the
  /// resuming plan on its mesh with its bindings (no modules owned).
  Spec resumeStep() const;
};

/// The context every spec is loaded into: planproof's dialects plus func.
void registerDialects(mlir::MLIRContext &ctx);

/// Parses MLIR text (named `path` in diagnostics; nothing is read from disk) into a new
/// module of `spec`, recording the SSA names users wrote and the source lines. Loading a
/// file of either format, and the analysis after it, is lib/Import/LoadSpec.h.
bool parseMlirSpecText(mlir::MLIRContext &ctx, const std::string &path,
                       const std::string &contents, Spec &spec, Diagnostics &diags);

/// Expands every func.call of `module` in place (lib/Spec/Calls.cpp): a repeated piece
/// of the step stated once as a private function. Names and places of the expanded ops
/// are recorded in `spec`; the private functions are erased. False with located errors
/// for malformed calls (undefined, public or bodiless callees, recursion); past the
/// expansion limit nothing is expanded and the spec is undecidable.
bool inlineCalls(mlir::ModuleOp module, Spec &spec, Diagnostics &diags);
/// The checks of inlineCalls (callees defined, private, with bodies, on their callers'
/// mesh; no recursion), nothing expanded: for a spec loaded with keepCalls.
bool checkCalls(mlir::ModuleOp module, Spec &spec, Diagnostics &diags);
/// keptCallsRefusal of a spec without calls (read the same kept or expanded).
inline constexpr const char *kNoCalls = "the spec has no calls";
/// Why the kept calls of a loaded spec (keepCalls) are not for the layout engine's
/// summaries, "" when they are (Spec::keptCallsRefused).
std::string keptCallsRefusal(const Spec &spec);

/// While alive, records every diagnostic MLIR emits in `ctx` (parser, verifiers, the
/// dialects' shape rules) in `diags`: errors with their place, notes and warnings as
/// notes of the error before them. With a source manager, each error and note gets
/// the source line and a caret under it.
class CollectMlirDiagnostics {
public:
  CollectMlirDiagnostics(mlir::MLIRContext &ctx, Diagnostics &diags,
                         llvm::SourceMgr *sources = nullptr);
  ~CollectMlirDiagnostics();

private:
  mlir::MLIRContext &ctx;
  mlir::DiagnosticEngine::HandlerID id;
};

/// Analyzes a plan's pipeline (stages, send/recv matching, the dataflow order): fills
/// the pipeline fields of `spec`, and for any plan the execution order. Returns false
/// with located errors for malformed input.
bool analyzePipeline(Spec &spec, Diagnostics &diags);

/// Every tensor type of `op` (results, block arguments, a function's results) has a
/// static shape inside the caps of Support/Limits.h, and every float attribute of a
/// `ref` op is an exact rational (lib/Spec/Validate.cpp); else a located error.
bool validateOpSizesAndConstants(mlir::Operation *op, const std::string &path,
                                 Diagnostics &diags);
/// validateOpSizesAndConstants for every op of the spec's modules.
bool validateSizesAndConstants(Spec &spec, Diagnostics &diags);

/// Checks the loaded module(s) and fills the spec's functions, mesh and bindings.
/// Exposed for the JSON importer, which builds the module itself.
bool analyzeSpec(Spec &spec, Diagnostics &diags);

} // namespace planproof

#endif
