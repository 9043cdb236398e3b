//===- Engine.h - the element engine's verifier, inside ---------*- C++ -*-===//
//
// The class behind verifySpec (Verifier.h), shared by the files that implement it, one
// responsibility each:
//   Verifier.cpp     orchestration: symbolic execution, the phases of a run, the verdict
//   Obligations.cpp  one equality per plan output element; coverage of reference outputs
//   Localize.cpp     from a failed obligation to the culprit op (relations, the walk)
//   Explain.cpp      what is wrong at the culprit: kind, message, notes
//   Fixes.cpp        fix hints, each confirmed by re-verifying the edited plan
//   GradNorm.cpp     gradient-norm violations attributed to their terms
//   Checkpoint.cpp   checkpoint specs: reshard identity, completeness, resume
// Not a public header: only lib/Engine includes it.
//
//===----------------------------------------------------------------------===//
#ifndef PLANPROOF_ENGINE_ENGINE_H
#define PLANPROOF_ENGINE_ENGINE_H

#include "Engine/Verifier.h"
#include "Engine/Decide.h"
#include "Engine/ExactEval.h"
#include "Engine/PlanEdit.h"
#include "Engine/Relations.h"
#include "Engine/RngCheck.h"
#include "Engine/Schedule.h"
#include "Engine/SymbolicExec.h"
#include "Ref/RefDialect.h"
#include "Semantics/OpSemantics.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/StringExtras.h"

#include <atomic>
#include <chrono>
#include <cmath>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace planproof::engine {
using namespace mlir;

inline std::string axesStr(const Mesh &mesh, const std::vector<int> &axes) {
  std::string s = "[";
  for (size_t i = 0; i < axes.size(); ++i)
    s += (i ? ", " : "") + mesh.axes[axes[i]];
  return s + "]";
}

/// Thrown to end a run whose verdict is settled (VerifyOptions::verdictOnly).
struct VerdictKnown {};

/// A failed obligation: one output element whose gathered plan value is wrong.
struct FailedObligation {
  const Binding *output;
  int64_t rank;                 // group leader
  std::vector<int64_t> global;  // element index in the reference value
  int64_t local;
  PolyId plan, reference;
  Decision decision;
};

class Engine {
public:
  Engine(const Spec &spec, const VerifyOptions &options, ExprPool *shared = nullptr)
      : spec(spec), options(options), mesh(spec.mesh), pool(shared ? *shared : ownPool) {}

  /// For a resumed step: the reference inputs it continues from (the others are fresh,
  /// named with `suffix`), and the checkpoint its dist.load ops read.
  /// `restart`: what the resuming plan's arguments bound to state inputs hold -- the
  /// values the job was started with, not the state the first step left.
  void resumeFrom(const std::map<std::string, SymTensor> *inputs, std::string suffix,
                  const Checkpoint *ckpt, const std::map<std::string, SymTensor> *restart) {
    stepInputs = inputs;
    stepSuffix = std::move(suffix);
    loadFrom = ckpt;
    restartArguments = restart;
  }

  /// Takes the reference's run from `cache` when it holds this reference, else fills it
  /// (ElementCache, Verifier.h); the engine must use the cache's pool.
  void reuse(ElementCache::Impl *cache) { elementCache = cache; }

  VerifyResult run();

private:
  bool execute();
  bool runReferenceCached(RunFailure &failure);
  ElementCache::Impl *elementCache = nullptr;
  void buildRefValues();
  /// One output element to decide: the plan's gathered value against the reference's.
  struct Obligation {
    const Binding *b;
    int64_t rank, local;
    std::vector<int64_t> global;
    PolyId got, want;
  };
  std::vector<std::vector<Obligation>> openObligations();
  void checkOutputs(std::vector<FailedObligation> &failures);
  void checkCoverage();
  void localize(const std::vector<FailedObligation> &failures);
  void reportUnlocalized(const FailedObligation &f);
  Operation *findCulprit(const FailedObligation &f, func::ReturnOp ret, Violation &viol);
  void explainCulprit(Operation *culprit, const FailedObligation &f, Operation *undefinedAt,
                      const Violation &undefinedViol, Violation &viol);
  void foldDerivedGradients();
  Relation relationOf(Value v);
  Relation exactRelationOf(Value v);
  llvm::DenseMap<Value, Relation> exactRelations;
  Operation *walkToCulprit(Value v, std::set<Operation *> &seen,
                           std::vector<Value> *path = nullptr);
  Operation *undefinedCulprit(const FailedObligation &f, Violation &viol);
  Value culpritOperand(Operation *op);
  std::optional<Relation> evenShare(Operation *op, Value operand);
  std::optional<Relation> evenShareOver(Value v, const std::vector<int> &axes);
  std::optional<Relation> gradientShare(Value v);
  bool isMicrobatchPartial(Value v);
  /// Counterparts.cpp: an op pairing values of different iterations, and where the
  /// plan's computation of the odd one parts from the reference's counterpart's.
  struct Counterpart {
    Operation *meet = nullptr, *partner = nullptr; // the op and its reference counterpart
    Operation *consumer = nullptr, *theirs = nullptr;
    unsigned partnerOperand = 0; // the operand of `meet` that differs from `partner`'s
    Value meetWant;      // what `partner` takes there
    Value got, want;     // reference values: the plan's, and the one the reference takes
    Value crossed;       // the operand passed where `want` belongs (set: a crossed operand)
    Value holder;        // a plan value that holds `want`
  };
  llvm::DenseMap<Operation *, Counterpart> counterparts;
  Value heldReference(Value v);
  Value planHolder(Value want);
  Operation *crossedCulprit(Operation *op);
  bool mixesTiles(Operation *op);
  ref::SliceOp earlierCut(Value v);
  bool fromRecutTile(Value v, int depth = 0);
  bool dispatchMatchesReference(Value v);
  /// Bounded by `depth` (the recursion follows chains of plan ops).
  bool routedLocal(Value v, int depth = 0);
  llvm::DenseMap<Value, bool> routedLocalMemo;
  /// A value that is a combination sum_m c_m * (microbatch m's contribution), where a
  /// contribution is a sum (a reduction, a loss, a contracting matmul) over one tile of
  /// a reference value: the coefficients, by tile, or nothing.
  std::optional<std::map<std::string, Rational>> microbatchTerms(Value v, int depth = 0);
  /// How deep the localization's recursive helpers follow chains of ops (longer
  /// chains are given up on: the diagnosis is then less specific, never unbounded).
  static constexpr int kMaxWalkDepth = 256;
  bool constantDerived(Value v);
  llvm::DenseMap<Value, bool> constantDerivedMemo;
  /// Outputs found wrong, with a confirmed counterexample (kept for the report when
  /// the time limit stops localization).
  std::vector<std::string> confirmedWrong;
  /// The outputs (reference names) with an element found different or left undecided:
  /// every other output was proven, and a fix hint must keep it so (fixRemoves).
  std::set<std::string> unsettledOutputs;
  void explainOp(Operation *op, Violation &viol);
  /// What every rule of explainOp reads: the culprit op, its name, the start of the
  /// message, and what its result holds.
  struct ExplainSite {
    Operation *op;
    std::string name, head;
    Relation res;
  };
  bool explainReduction(const ExplainSite &site, Violation &viol);
  bool explainGather(const ExplainSite &site, Violation &viol);
  bool explainPartialOperand(const ExplainSite &site, Violation &viol);
  bool explainNonlinearOfPartial(const ExplainSite &site, Violation &viol);
  bool explainLossTokens(const ExplainSite &site, Violation &viol);
  bool explainMicrobatchWeights(const ExplainSite &site, Violation &viol);
  bool explainMissingMicrobatch(const ExplainSite &site, Violation &viol);
  bool explainMissingSummand(const ExplainSite &site, Violation &viol);
  bool explainLoad(const ExplainSite &site, Violation &viol);
  bool explainPower(const ExplainSite &site, Violation &viol);
  bool explainDropoutMask(const ExplainSite &site, Violation &viol);
  bool explainCapacityDispatch(const ExplainSite &site, Violation &viol);
  bool explainAllToAll(const ExplainSite &site, Violation &viol);
  bool explainPositionMask(const ExplainSite &site, Violation &viol);
  bool explainCausalSoftmax(const ExplainSite &site, Violation &viol);
  bool explainTile(const ExplainSite &site, Violation &viol);
  bool explainMixedTiles(const ExplainSite &site, Violation &viol);
  bool explainCounterpart(const ExplainSite &site, Violation &viol);
  bool explainScaled(const ExplainSite &site, Violation &viol);
  void explainUnmatched(const ExplainSite &site, Violation &viol);
  void explainCounter(Operation *op, const Binding &b, const FailedObligation &f, Violation &viol);
  bool fixedByReducing(Operation *op, unsigned operand, const Relation &in);
  /// Unreduced.cpp: counterfactual evaluations of one op with an operand reduced first.
  bool reducedValue(Value v, const Layout &layout, std::vector<SymTensor> &out);
  bool evaluateWith(Operation *op, unsigned operand, const std::vector<SymTensor> &value,
                    std::vector<SymTensor> &results);
  bool numericallyZero(const std::vector<SymTensor> &perRank);
  void counterfactualFinders();
  Relation counterfactualRelation(const std::vector<SymTensor> &perRank);
  std::string describeRelation(const Relation &r) const;
  std::vector<SymTensor> flatRefs; // the reference's values read flat
  std::unique_ptr<RelationFinder> numericFinder, flatFinder; // counterfactualRelation
  std::vector<int> axesVaried(Value v);
  Operation *unreducedOnPath(const std::vector<Value> &path);
  bool explainUnreduced(const ExplainSite &site, Violation &viol);
  struct Unreduced {
    unsigned operand;
    ReduceKind kind;
    std::vector<int> axes;
    Relation fixed; // what `at` holds with the operand reduced
    Value at;       // the op's result, or a later value on the walk's way
  };
  std::map<Operation *, Unreduced> unreduced;
  int64_t counterfactualBudget = 4000; // ops evaluated by unreducedOnPath per run
  std::optional<Unreduced> reducedOnPath(const std::vector<Value> &path, size_t i,
                                         ReduceKind kind, const std::vector<int> &axes);
  void explainOutput(const Binding &b, Value v, const Relation &actual, Violation &viol);
  void addCounterexample(const FailedObligation &f, Violation &viol);
  std::vector<std::string> axisNames(const std::vector<int> &axes) const {
    std::vector<std::string> out;
    for (int a : axes)
      out.push_back(mesh.axes[a]);
    return out;
  }
  ArrayAttr axesAttr(MLIRContext *ctx, const std::vector<int> &axes) const {
    SmallVector<Attribute> out;
    for (int a : axes)
      out.push_back(StringAttr::get(ctx, mesh.axes[a]));
    return ArrayAttr::get(ctx, out);
  }
  void checkFixes();
  /// What checking hints may still spend, counted (never wall-clock time, so that the
  /// hints a report shows do not depend on the machine's load): the expression terms
  /// the re-verifications build (about three times the run before them) and Z3's work.
  /// Past either, unchecked hints are dropped. A verified run checks none.
  static constexpr int kMaxFixChecks = 4; // violations whose hint is checked
  int64_t fixTermsLeft = 0;
  uint64_t fixSolverLeft = 0;
  /// A hint dropped because the run's time limit (the outer bound) was reached.
  bool fixesStoppedByTime = false;
  /// The other plan ops of `op`'s kind for which `same` holds (the same defect).
  std::vector<Operation *> alikeOps(Operation *op, llvm::function_ref<bool(Operation *)> same) {
    std::vector<Operation *> out;
    for (Operation *o : spec.planOps())
      if (o != op && o->getName() == op->getName() && same(o))
        out.push_back(o);
    return out;
  }
  /// The other ops the author wrote exactly like `op` -- its name and attributes, and
  /// operands made by ops of the same name and attributes (a Megatron region's entry,
  /// an all_reduce "avg" of a replicated value, is not the attention output's): the
  /// same defect repeated, in every layer, where past the first wrong value relations
  /// no longer show it. A guess: a hint that uses it is re-verified first.
  std::vector<Operation *> writtenAlike(Operation *op) {
    auto sameMaker = [](Value a, Value b) {
      Operation *x = a.getDefiningOp(), *y = b.getDefiningOp();
      if (!x || !y)
        return !x && !y;
      return x->getName() == y->getName() && x->getAttrDictionary() == y->getAttrDictionary();
    };
    return alikeOps(op, [&](Operation *o) {
      if (o->getAttrDictionary() != op->getAttrDictionary() || !spec.writtenMap ||
          !spec.writtenMap->lookupOrNull(o) || o->getNumOperands() != op->getNumOperands())
        return false;
      for (unsigned i = 0; i < o->getNumOperands(); ++i)
        if (!sameMaker(o->getOperand(i), op->getOperand(i)))
          return false;
      return true;
    });
  }
  bool fixRemoves(const Violation &v);
  /// Set by fixRemoves: whether its last "no" was short of a violated verdict (the edit
  /// did not apply, the edited plan was inconclusive, time ran out).
  bool fixUndecided = false;
  bool checkFix(Violation &v);
  Operation *laterAllReduce(Operation *op, const std::string &kind,
                            const std::vector<std::string> &axes);
  std::string opName(Operation *op) {
    return op->getNumResults() ? spec.nameOf(op->getResult(0)) : "";
  }
  std::string describeOperand(Operation *op, unsigned i) {
    Value v = op->getOperand(i);
    auto idx = planTrace.values.find(v);
    if (v.getType().isIndex() && idx != planTrace.values.end()) {
      std::string vals;
      for (int64_t r = 0; r < (int64_t)idx->second.size() && r < 8; ++r)
        vals += (r ? ", " : "") + mesh.rankStr(r) + " " + pool.str(idx->second[r].data[0], 60);
      return "operand #" + std::to_string(i) + " `" + spec.nameOf(v) + "` is the index " + vals +
             (idx->second.size() > 8 ? ", ..." : "");
    }
    Relation r = relationOf(v);
    return "operand #" + std::to_string(i) + " `" + spec.nameOf(v) + "` " +
           (r.related() ? "holds " : "matches ") + finder->describe(r);
  }

  const Spec &spec;
  VerifyOptions options;
  const Mesh &mesh;
  VerifyResult result;
  ExprPool ownPool;
  ExprPool &pool;
  const std::map<std::string, SymTensor> *stepInputs = nullptr;
  std::string stepSuffix;
  const Checkpoint *loadFrom = nullptr;
  const std::map<std::string, SymTensor> *restartArguments = nullptr;
  Checkpoint saved;
  void checkCheckpoint();
  Violation *checkpointViolation(mlir::Operation *at, const std::string &message,
                                 const std::string &hint);
  void checkSavedPieces();
  std::map<std::string, SymTensor> checkSavedState();
  void checkResume(const std::map<std::string, SymTensor> &next);
  ReferenceTrace refTrace;
  PlanTrace planTrace;
  std::vector<RefValue> refValues;
  std::deque<SymTensor> transposedRefs; // stable addresses for transposeFinder
  std::vector<Value> refValueOf; // the reference Value of each refValues entry (or null)
  /// Whether reference value `ref` depends on the reference's loss normalization
  /// (an op with ref.role = "loss-normalization"; Localize.cpp).
  bool reachedByNormalization(int ref) const;
  std::set<int> dataAxes() const;
  llvm::DenseSet<Value> normalizationInputs() const;
  bool countsNormalizationInput(Value v);
  bool overModelAxesOnly(Operation *op) const;
public:
  /// relatePlanValues, on this engine.
  std::vector<PlanValueRelation> relateAll(std::string &why) {
    std::vector<PlanValueRelation> out;
    if (!spec.undecidable.empty()) {
      why = spec.undecidable;
      return out;
    }
    try {
      if (!execute()) {
        why = result.inconclusiveReasons.empty() ? "could not execute"
                                                 : result.inconclusiveReasons[0].second;
        return out;
      }
      buildRefValues();
      for (Operation &op : spec.plan.getBody().front())
        for (Value v : op.getResults()) {
          if (!isa<RankedTensorType>(v.getType()))
            continue;
          Relation r = relationOf(v);
          if (r.exact() && refValueOf[r.ref])
            out.push_back({v, refValueOf[r.ref], r.layout, r.block, r.offset});
        }
    } catch (const std::exception &e) {
      why = e.what();
      out.clear();
    }
    return out;
  }
private:
  /// The semantic role a reference value is annotated with (`ref.role = "grad-norm"` on
  /// its op): a violation around such a value is reported with that kind.
  std::vector<std::string> refRoles;
  int lastFixedRef = -1;
  std::string roleFor(Operation *op);
  void attributeGradNorm();
  void checkDiscardedCollectives();
  void discardedFix(Violation &v, const Violation &w);
  void mergeDrawViolations(size_t firstRng);
  std::map<std::string, int> refIndexByName;
  std::unique_ptr<RelationFinder> finder, transposeFinder;
  llvm::DenseMap<Value, Relation> relations;
};

} // namespace planproof::engine

#endif
