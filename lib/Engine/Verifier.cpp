//===- Verifier.cpp - deciding a spec: obligations, verdict, violations -*- C++ -*-===//
//
// Orchestrates the element engine: symbolic execution of both programs, one equality
// obligation per plan output element (gathered through its layout), the coverage of
// reference outputs, and -- for violations -- the localization of the first plan op
// whose result stops matching any reference value, with a concrete counterexample.
//
//===----------------------------------------------------------------------===//
#include "Engine/Verifier.h"
#include "Engine/RngCheck.h"
#include "Engine/Schedule.h"

#include "Engine/Decide.h"
#include "Engine/ExactEval.h"
#include "Engine/PlanEdit.h"
#include "Engine/Relations.h"
#include "Engine/SymbolicExec.h"
#include "Ref/RefDialect.h"
#include "Semantics/OpSemantics.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/StringExtras.h"

#include <atomic>
#include <deque>
#include <cmath>
#include <random>
#include <chrono>
#include <thread>
#include <map>
#include <set>
#include <sstream>

using namespace mlir;
using namespace planproof;

const char *planproof::verdictName(Verdict v) {
  switch (v) {
  case Verdict::Verified: return "verified";
  case Verdict::Violated: return "violated";
  case Verdict::Inconclusive: return "inconclusive";
  }
  return "?";
}

namespace {

std::string axesStr(const Mesh &mesh, const std::vector<int> &axes) {
  std::string s = "[";
  for (size_t i = 0; i < axes.size(); ++i)
    s += (i ? ", " : "") + mesh.axes[axes[i]];
  return s + "]";
}

/// Thrown to end a run whose verdict is settled (VerifyOptions::verdictOnly).
struct VerdictKnown {};

/// A failed obligation: one output element whose gathered plan value is wrong.
struct Failure {
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

  VerifyResult run();

private:
  bool execute();
  void buildRefValues();
  void checkOutputs(std::vector<Failure> &failures);
  void checkCoverage();
  void localize(const std::vector<Failure> &failures);
  void reportUnlocalized(const Failure &f);
  Relation relationOf(Value v);
  Relation exactRelationOf(Value v);
  llvm::DenseMap<Value, Relation> exactRelations;
  Operation *walkToCulprit(Value v, std::set<Operation *> &seen);
  Operation *undefinedCulprit(const Failure &f, Violation &viol);
  Value culpritOperand(Operation *op);
  bool isMicrobatchPartial(Value v);
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
  void explainOp(Operation *op, Violation &viol);
  void explainCounter(Operation *op, const Binding &b, const Failure &f, Violation &viol);
  bool fixedByReducing(Operation *op, unsigned operand, const Relation &in);
  void explainOutput(const Binding &b, Value v, const Relation &actual, Violation &viol);
  void addCounterexample(const Failure &f, Violation &viol);
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
  /// Checking hints costs at most about three times the run before it (or 3 s): past
  /// this point, unchecked hints are dropped. A verified run checks none.
  std::chrono::steady_clock::time_point started, fixesUntil;
  /// The other plan ops of `op`'s kind for which `same` holds (the same defect).
  std::vector<Operation *> alikeOps(Operation *op, llvm::function_ref<bool(Operation *)> same) {
    std::vector<Operation *> out;
    for (Operation *o : spec.planOps())
      if (o != op && o->getName() == op->getName() && same(o))
        out.push_back(o);
    return out;
  }
  bool fixRemoves(const Violation &v);
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
  ReferenceTrace refTrace;
  PlanTrace planTrace;
  std::vector<RefValue> refValues;
  std::deque<SymTensor> transposedRefs; // stable addresses for transposeFinder
  std::vector<Value> refValueOf; // the reference Value of each refValues entry (or null)
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

bool Engine::execute() {
  ExecFailure failure{"", spec.plan.getLoc()};
  if (!runReference(spec, pool, refTrace, failure, stepInputs, stepSuffix, options.deadline) ||
      !runPlan(spec, pool, refTrace, planTrace, failure, &saved, loadFrom, options.deadline,
               restartArguments)) {
    result.inconclusiveReasons.push_back({toSourceLoc(failure.loc), failure.reason});
    return false;
  }
  return true;
}

void Engine::buildRefValues() {
  llvm::DenseMap<Value, std::string> outputName;
  auto ret = cast<func::ReturnOp>(spec.reference.getBody().front().getTerminator());
  for (auto [i, v] : llvm::enumerate(ret.getOperands()))
    if (!outputName.count(v))
      outputName[v] = spec.refOutputs[i];
  // The grad-norm role (`ref.role = "grad-norm"`) reaches every op that computes part of
  // the norm: an op all of whose users compute for the norm does too -- the squares and
  // partial sums under its `sqrt`. (Other roles name one step of the computation -- a
  // loss's normalization, the optimizer's update -- and stay where they are written.)
  llvm::DenseMap<Value, std::string> roleOf;
  std::vector<Operation *> refOps;
  for (Operation &op : spec.reference.getBody().front()) {
    refOps.push_back(&op);
    if (auto r = op.getAttrOfType<StringAttr>("ref.role"))
      for (Value v : op.getResults())
        roleOf[v] = r.getValue().str();
  }
  for (Operation *op : llvm::reverse(refOps)) {
    if (op->getNumResults() != 1 || roleOf.count(op->getResult(0)) || op->getResult(0).use_empty())
      continue;
    std::string common;
    bool all = true;
    for (Operation *user : op->getResult(0).getUsers()) {
      auto it = user->getNumResults() == 1 ? roleOf.find(user->getResult(0)) : roleOf.end();
      if (it == roleOf.end() || (!common.empty() && it->second != common)) {
        all = false;
        break;
      }
      common = it->second;
    }
    if (all && common == "grad-norm")
      roleOf[op->getResult(0)] = common;
  }
  auto add = [&](Value v, std::string name) {
    refIndexByName[name] = refValues.size();
    refValueOf.push_back(v);
    refValues.push_back({name, &refTrace.values[v]});
    auto r = roleOf.find(v);
    refRoles.push_back(r == roleOf.end() ? "" : r->second);
  };
  for (unsigned i = 0; i < spec.reference.getNumArguments(); ++i)
    add(spec.reference.getArgument(i), spec.refInputs[i]);
  for (Operation &op : spec.reference.getBody().front())
    for (Value r : op.getResults()) {
      auto it = outputName.find(r);
      add(r, it != outputName.end() ? it->second : spec.nameOf(r));
    }
  // Outputs that merely forward an input or another output keep their own name too.
  for (auto [i, v] : llvm::enumerate(ret.getOperands()))
    if (!refIndexByName.count(spec.refOutputs[i])) {
      refIndexByName[spec.refOutputs[i]] = refValues.size();
      refValueOf.push_back(Value());
      refValues.push_back({spec.refOutputs[i], &refTrace.byName[spec.refOutputs[i]]});
      refRoles.push_back("");
    }
  // Transposes of the reference values (their last two dimensions), searched only for
  // the results of contractions: a plan may compute a gradient transposed (dW^T from a
  // matmul with the other contraction) and transpose it back later; that intermediate
  // is correct, not a culprit. (Any other op producing a transpose just moved elements,
  // and stays suspect.)
  std::vector<RefValue> transposes;
  for (size_t i = 0; i < refValues.size(); ++i) {
    const SymTensor &t = *refValues[i].tensor;
    size_t rank = t.shape.size();
    if (rank < 2 || t.shape[rank - 1] == 1 || t.shape[rank - 2] == 1)
      continue;
    SymTensor &tt = transposedRefs.emplace_back();
    tt.shape = t.shape;
    std::swap(tt.shape[rank - 1], tt.shape[rank - 2]);
    tt.data.resize(t.data.size());
    for (int64_t l = 0; l < (int64_t)t.data.size(); ++l) {
      auto idx = tt.unravel(l);
      std::swap(idx[rank - 1], idx[rank - 2]);
      tt.data[l] = t.at(idx);
    }
    transposes.push_back({"transpose(" + refValues[i].name + ")", &tt});
  }
  finder = std::make_unique<RelationFinder>(pool, mesh, refValues);
  transposeFinder = std::make_unique<RelationFinder>(pool, mesh, transposes);
  finder->replicatedTiles = spec.pipelineAxis >= 0;
  // Load-balanced context parallelism: a zigzag layout or collective anywhere.
  for (const Binding &b : spec.planInputs)
    finder->zigzagCandidates |= b.layout.anyZigzag();
  for (const Binding &b : spec.planOutputs)
    finder->zigzagCandidates |= b.layout.anyZigzag();
  spec.plan.walk([&](Operation *op) { finder->zigzagCandidates |= op->hasAttr("zigzag"); });
}

/// Gathers every output element and compares it with the reference. Equal canonical
/// forms are settled at once; the rest are decided in waves -- the next undecided
/// element of every output at a time -- with the decisions of one wave running in
/// parallel threads (they only read the expression pool).
void Engine::checkOutputs(std::vector<Failure> &failures) {
  auto ret = cast<func::ReturnOp>(spec.plan.getBody().front().getTerminator());
  struct Pending {
    const Binding *b;
    int64_t rank, local;
    std::vector<int64_t> global;
    PolyId got, want;
  };
  std::vector<std::vector<Pending>> pending; // per output, in element order
  for (const Binding &b : spec.planOutputs) {
    if (!options.onlyOutputs.empty() && !options.onlyOutputs.count(b.refName))
      continue;
    const std::vector<SymTensor> &perRank = planTrace.values[ret.getOperand(b.index)];
    const SymTensor &ref = refTrace.byName.at(b.refName);
    std::vector<Pending> todo;
    bool supported = true;
    for (int64_t r = 0; r < mesh.numRanks() && supported; ++r) {
      if (!isGroupLeader(mesh, b.layout, r) || !spec.onStage(r, b.stage))
        continue;
      for (int64_t l = 0; l < (int64_t)perRank[r].data.size(); ++l) {
        PolyId got;
        if (!gatherElement(pool, mesh, b.layout, perRank, r, l, got)) {
          result.inconclusiveReasons.push_back(
              {toSourceLoc(b.loc), "output '" + b.refName +
                                       "' has a layout mixing max with sum/avg partial axes, "
                                       "which the element engine does not support"});
          supported = false;
          break;
        }
        auto g = b.layout.globalIndex(mesh, r, b.localShape, perRank[r].unravel(l));
        if (!Layout::inBounds(g, ref.shape))
          continue; // padding: anything goes
        PolyId want = ref.at(g);
        ++result.stats.obligations;
        if (got == want) {
          ++result.stats.decidedCanonical;
          continue;
        }
        todo.push_back({&b, r, l, g, got, want});
      }
    }
    pending.push_back(std::move(todo));
  }
  std::vector<size_t> next(pending.size(), 0);
  std::vector<bool> done(pending.size(), false);
  unsigned threads = std::max(1u, options.threads);
  auto started = std::chrono::steady_clock::now();
  while (true) {
    std::vector<size_t> wave; // outputs with an element to decide now
    for (size_t o = 0; o < pending.size(); ++o)
      if (!done[o] && next[o] < pending[o].size())
        wave.push_back(o);
    if (wave.empty())
      break;
    options.deadline.check("deciding obligations");
    // The memoized expression flags are filled here, so the threads only read.
    for (size_t o : wave) {
      const Pending &p = pending[o][next[o]];
      pool.hasLatticeAtoms(p.got);
      pool.hasLatticeAtoms(p.want);
    }
    std::vector<Decision> decisions(wave.size());
    std::atomic<size_t> cursor{0};
    double spent = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() -
                                                             started).count();
    unsigned timeout = options.deadline.cap(
        spent > options.decisionBudgetMs ? std::min(50u, options.solverTimeoutMs)
                                         : options.solverTimeoutMs);
    auto work = [&] {
      for (size_t i; (i = cursor++) < wave.size();) {
        const Pending &p = pending[wave[i]][next[wave[i]]];
        // Nothing may escape a worker thread: a failure is an undecided obligation.
        try {
          decisions[i] = decideEqual(pool, p.got, p.want, timeout, !options.verdictOnly);
        } catch (const std::exception &e) {
          decisions[i] = Decision();
          decisions[i].reason = std::string("could not decide: ") + e.what();
        }
      }
    };
    std::vector<std::thread> pool_threads;
    for (unsigned t = 1; t < std::min<size_t>(threads, wave.size()); ++t)
      pool_threads.emplace_back(work);
    work();
    for (std::thread &t : pool_threads)
      t.join();
    for (size_t i = 0; i < wave.size(); ++i) {
      size_t o = wave[i];
      Pending &p = pending[o][next[o]++];
      Decision &d = decisions[i];
      if (d.usedSolver)
        ++result.stats.solverQueries;
      if (d.byCanonicalForm)
        ++result.stats.decidedCanonical;
      if (d.result == Equality::Equal)
        continue;
      if (d.result == Equality::Unknown) {
        result.inconclusiveReasons.push_back(
            {toSourceLoc(p.b->loc), "output '" + p.b->refName + indexStr(p.global) + "': " + d.reason});
        continue;
      }
      confirmedWrong.push_back(p.b->refName + indexStr(p.global));
      failures.push_back({p.b, p.rank, p.global, p.local, p.got, p.want, std::move(d)});
      // One counterexample per output is enough for the verdict and the report.
      done[o] = true;
    }
    if (options.verdictOnly && !failures.empty())
      break;
  }
}

void Engine::checkCoverage() {
  if (!options.onlyOutputs.empty())
    return;
  std::set<std::string> produced;
  for (const Binding &b : spec.planOutputs)
    produced.insert(b.refName);
  for (const std::string &name : spec.refOutputs) {
    if (produced.count(name))
      continue;
    Violation v;
    v.kind = "dataflow";
    v.value = name;
    v.location = toSourceLoc(spec.plan.getLoc());
    v.message = "the plan does not produce reference output `" + name +
                "`: no plan result carries dist.value = \"" + name + "\"";
    v.notes.push_back("every value the reference step returns (loss, gradients, updated "
                      "parameters and state) must be returned by the plan with its layout");
    v.hint = "return `" + name + "` from the plan function with dist.value = \"" + name + "\"";
    result.violations.push_back(std::move(v));
  }
}

/// The relation of `v` when it is exact (factor 1), else none: what the walk to a
/// culprit needs ("is this value correct?"), found among the few reference values
/// whose elements' fingerprints it shares, not among all of them.
Relation Engine::exactRelationOf(Value v) {
  auto it = exactRelations.find(v);
  if (it != exactRelations.end())
    return it->second;
  Relation r;
  auto pt = planTrace.values.find(v);
  if (pt != planTrace.values.end()) {
    std::vector<int> complete;
    if (Operation *def = v.getDefiningOp())
      if (isa<dist::AllReduceOp, dist::ReduceScatterOp>(def))
        complete = collectiveAxes(def, mesh);
    std::vector<int> only = finder->exactCandidates(pt->second);
    if (!only.empty())
      r = finder->find(pt->second, complete, &only);
    if (!r.exact())
      r = Relation();
    // A contraction may compute the transpose of a reference value (dW^T) for a later
    // transpose: correct (buildRefValues).
    if (!r.exact() && isa_and_nonnull<ref::MatmulOp, ref::BatchMatmulOp>(v.getDefiningOp())) {
      std::vector<int> t = transposeFinder->exactCandidates(pt->second);
      Relation tr = t.empty() ? Relation() : transposeFinder->find(pt->second, complete, &t);
      if (tr.exact()) {
        r = tr;
        r.transposed = true;
      }
    }
  }
  exactRelations[v] = r;
  return r;
}

Relation Engine::relationOf(Value v) {
  auto it = relations.find(v);
  if (it != relations.end())
    return it->second;
  if (Relation e = exactRelationOf(v); e.exact() && !e.transposed)
    return relations[v] = e;
  Relation r;
  auto pt = planTrace.values.find(v);
  std::vector<int> complete;
  if (Operation *def = v.getDefiningOp())
    if (isa<dist::AllReduceOp, dist::ReduceScatterOp>(def))
      complete = collectiveAxes(def, mesh);
  if (pt != planTrace.values.end())
    r = finder->find(pt->second, complete);
  relations[v] = r;
  return r;
}

/// Follows wrong values backwards: the culprit is the first op (in dataflow order)
/// whose tensor operands are all correct (an exact relation) but whose result is not.
/// Operands matching no reference value at all are followed before merely rescaled ones.
/// Whether `v` is computed from constants only (masks, padding): the plan's own data.
bool Engine::constantDerived(Value v) {
  // Computed once for every plan value, in program order (operands come first), so
  // that long chains cost linear time and no recursion.
  if (constantDerivedMemo.empty()) {
    for (Operation *op : spec.planOps()) {
      bool c = isa<ref::RefDialect>(op->getDialect()) &&
               (isa<ref::ConstantOp>(op) ||
                (op->getNumOperands() > 0 && llvm::all_of(op->getOperands(), [&](Value x) {
                   auto it = constantDerivedMemo.find(x);
                   return it != constantDerivedMemo.end() && it->second;
                 })));
      for (Value r : op->getResults())
        constantDerivedMemo[r] = c;
    }
    if (constantDerivedMemo.empty())
      constantDerivedMemo[Value()] = false;
  }
  auto it = constantDerivedMemo.find(v);
  return it != constantDerivedMemo.end() && it->second;
}

/// A sum over the tokens of one microbatch (of tiles that are all correct): a legitimate
/// intermediate that no single reference value describes (the reference sums over the
/// whole batch at once), so it is not where a plan goes wrong.
/// A plan's ref.capacity_dispatch computes its rank's group only: the reference's
/// mask restricted to the rank's tokens and its group's slots. (No layout expresses
/// that block: one mesh axis splits both the tokens and the slots.) True when every
/// rank's mask equals that block of a reference dispatch mask.
bool Engine::dispatchMatchesReference(Value v) {
  auto cd = v.getDefiningOp<ref::CapacityDispatchOp>();
  if (!cd)
    return false;
  Relation in = exactRelationOf(cd.getInput());
  if (!in.exact() || !in.block.empty() || in.layout.isPartial())
    return false;
  const auto &plan = planTrace.values[v];
  const auto &chosen = planTrace.values[cd.getInput()];
  int64_t C = cd.getCapacity();
  bool found = false;
  spec.reference.walk([&](ref::CapacityDispatchOp rd) {
    if (found || (int64_t)rd.getCapacity() != C || cd.getGroups() != 1)
      return;
    const SymTensor &R = refTrace.values[rd.getResult()];
    int64_t T = R.shape[0], E = R.shape[1], G = rd.getGroups(), per = T / G;
    bool all = true;
    for (int64_t r = 0; r < mesh.numRanks() && all; ++r) {
      const SymTensor &P = plan[r];
      int64_t Tl = P.shape[0];
      int64_t first = in.layout.globalIndex(mesh, r, chosen[r].shape, {0, 0})[0];
      for (int64_t i = 0; i < Tl && all; ++i) {
        int64_t t = in.layout.globalIndex(mesh, r, chosen[r].shape, {i, 0})[0];
        // The rank's tokens must be one whole group, in order.
        if (t != first + i || first % per != 0 || Tl != per) {
          all = false;
          break;
        }
        int64_t g = t / per;
        for (int64_t e = 0; e < E && all; ++e)
          for (int64_t c = 0; c < C; ++c)
            if (P.at({i, e, c}) != R.at({t, e, g * C + c})) {
              all = false;
              break;
            }
      }
    }
    found = all;
  });
  return found;
}

/// A rank-local value of the routing path that no layout relates to the reference: a
/// dispatch mask that matches the reference's block (above), or a ref op computed
/// only from such values and correct ones (the gate-weighted combine mask).
bool Engine::routedLocal(Value v, int depth) {
  auto it = routedLocalMemo.find(v);
  if (it != routedLocalMemo.end())
    return it->second;
  if (depth > kMaxWalkDepth)
    return false;
  routedLocalMemo[v] = false; // cycles cannot occur; this only guards re-entry
  bool ok = dispatchMatchesReference(v);
  Operation *def = v.getDefiningOp();
  if (!ok && def && isa<ref::MulOp, ref::ReshapeOp, ref::ScaleOp>(def)) {
    bool anyRouted = false;
    ok = true;
    for (Value o : def->getOperands()) {
      if (!isa<RankedTensorType>(o.getType()))
        continue;
      Relation r = exactRelationOf(o);
      if (routedLocal(o, depth + 1))
        anyRouted = true;
      else if (!r.exact() || !r.block.empty())
        ok = false;
    }
    ok = ok && anyRouted;
  }
  routedLocalMemo[v] = ok;
  return ok;
}

bool Engine::isMicrobatchPartial(Value v) {
  // Some microbatches, all with one weight (the same scaling for each, as a loss
  // scaled by 1/M): an accumulator on its way to the whole sum. A sum that already
  // holds every microbatch ("*") plus more over-counts.
  auto terms = microbatchTerms(v);
  if (!terms || terms->count("*"))
    return false;
  return llvm::all_of(*terms, [&](auto &t) { return t.second == terms->begin()->second; });
}

std::optional<std::map<std::string, Rational>> Engine::microbatchTerms(Value v, int depth) {
  Operation *def = v.getDefiningOp();
  if (depth > kMaxWalkDepth)
    return std::nullopt;
  if (!def || !isa<RankedTensorType>(v.getType()) || exactRelationOf(v).exact())
    return std::nullopt;
  if (isa<ref::ReduceSumOp, ref::CrossEntropySumOp, ref::MseLossOp, ref::MatmulOp,
          ref::BatchMatmulOp>(def)) {
    std::string tile;
    for (Value operand : def->getOperands()) {
      if (!isa<RankedTensorType>(operand.getType()))
        continue;
      Relation r = exactRelationOf(operand);
      if (!r.exact())
        return std::nullopt;
      if (!r.block.empty() && tile.empty())
        tile = indexStr(r.offset);
    }
    if (tile.empty())
      return std::nullopt;
    return std::map<std::string, Rational>{{tile, Rational(1)}};
  }
  if (auto s = dyn_cast<ref::ScaleOp>(def)) {
    auto in = microbatchTerms(s.getOperand(), depth + 1);
    if (!in)
      return std::nullopt;
    for (auto &[k, c] : *in)
      c = c * attrRational(s.getFactorAttr());
    return in;
  }
  if (isa<ref::AddOp>(def)) {
    std::map<std::string, Rational> sum;
    bool partial = false;
    for (Value operand : def->getOperands()) {
      auto in = microbatchTerms(operand, depth + 1);
      if (!in) {
        // A complete value (an exact reference value: every microbatch already) is
        // "*"; adding microbatches to it over-counts them.
        if (!exactRelationOf(operand).exact())
          return std::nullopt;
        sum["*"] = Rational(1);
        continue;
      }
      partial = true;
      for (auto &[k, c] : *in)
        sum[k] = sum.count(k) ? sum[k] + c : c;
    }
    if (!partial)
      return std::nullopt;
    return sum;
  }
  return std::nullopt;
}

Operation *Engine::walkToCulprit(Value v, std::set<Operation *> &seen) {
  // Iterative: each step moves to a wrong operand; chains of 10^5 ops cannot overflow.
  while (true) {
    options.deadline.check("localizing violations");
    Operation *op = v.getDefiningOp();
    if (!op || !seen.insert(op).second)
      return op;
    Value next = culpritOperand(op);
    if (!next)
      return op;
    v = next;
  }
}

/// The operand of `op` along which a wrong value arrives, or null when every operand
/// is correct (then `op` is the culprit).
Value Engine::culpritOperand(Operation *op) {
  // A tile of a reference value (one microbatch of a rank's block) is only taken as
  // correct next to other tiles: combined with a whole block, the tile is more likely
  // the wrong piece (e.g. every rank drawing the first rows of a mask).
  // A tile cut by a ref.slice is likewise suspect unless some other operand is a tile
  // computed from tiles (the op then sits inside a microbatch's computation).
  bool anyWhole = false, anyComputedTile = false;
  for (Value operand : op->getOperands())
    if (isa<RankedTensorType>(operand.getType())) {
      Relation r = exactRelationOf(operand);
      anyWhole |= r.exact() && r.block.empty() && !r.layout.dims.empty() &&
                  llvm::any_of(r.layout.dims, [](auto &axes) { return !axes.empty(); });
      anyComputedTile |= r.exact() && !r.block.empty() &&
                         !isa_and_nonnull<ref::SliceOp>(operand.getDefiningOp());
    }
  auto trusted = [&](Value operand, const Relation &r) {
    if (!r.exact())
      return isMicrobatchPartial(operand) || routedLocal(operand);
    if (r.block.empty())
      return true;
    if (anyWhole)
      return false;
    return anyComputedTile || !isa_and_nonnull<ref::SliceOp>(operand.getDefiningOp());
  };
  std::vector<Value> wrong;
  for (Value operand : op->getOperands()) {
    // Arguments are the scattered inputs and constants are the plan's own data:
    // neither is a path along which a wrong value can arrive.
    if (!isa<RankedTensorType>(operand.getType()) || isa<BlockArgument>(operand) ||
        constantDerived(operand))
      continue;
    if (!trusted(operand, exactRelationOf(operand)))
      wrong.push_back(operand);
  }
  if (wrong.empty()) {
    // Every operand that carries data is correct. The plan's own constants are not a
    // path along which a wrong value arrives -- except one cut or computed from a
    // constant that does hold a reference value (a 0/1 mask literal) into something
    // that holds none: every rank taking the wrong block of a mask, say.
    for (Value operand : op->getOperands()) {
      if (!isa<RankedTensorType>(operand.getType()) || !constantDerived(operand) ||
          exactRelationOf(operand).exact())
        continue;
      // (A source of zeros matches too much by accident to count.)
      Operation *def = operand.getDefiningOp();
      if (def && llvm::any_of(def->getOperands(), [&](Value x) {
            auto pt = planTrace.values.find(x);
            bool nonzero = pt != planTrace.values.end() &&
                           llvm::any_of(pt->second, [&](const SymTensor &t) {
                             return llvm::any_of(t.data, [&](PolyId p) { return p != pool.zero(); });
                           });
            return isa<RankedTensorType>(x.getType()) && nonzero && exactRelationOf(x).exact();
          }))
        return operand;
    }
    return Value();
  }
  if (wrong.size() == 1)
    return wrong[0];
  // Operands matching no reference value at all are followed before rescaled ones
  // (the full relation search runs only here, where there is a choice).
  for (Value operand : wrong)
    if (!relationOf(operand).related())
      return operand;
  return wrong[0];
}

/// Would `op` compute a correct value (an exact relation to some reference value) if
/// its partial operand `operand` were reduced first?
bool Engine::fixedByReducing(Operation *op, unsigned operand, const Relation &in) {
  if (!isa<ref::RefDialect>(op->getDialect()))
    return false;
  try {
    const std::vector<SymTensor> &partial = planTrace.values[op->getOperand(operand)];
    std::vector<SymTensor> complete = partial;
    for (int64_t r = 0; r < (int64_t)partial.size(); ++r)
      for (int64_t l = 0; l < (int64_t)partial[r].data.size(); ++l)
        if (!gatherElement(pool, mesh, in.layout, partial, r, l, complete[r].data[l]))
          return false;
    SymbolicDomain d{pool};
    std::vector<SymTensor> results(partial.size());
    for (int64_t r = 0; r < (int64_t)partial.size(); ++r) {
      std::vector<const SymTensor *> ins;
      std::vector<PolyId> idx;
      for (unsigned j = 0; j < op->getNumOperands(); ++j) {
        if (op->getOperand(j).getType().isIndex())
          idx.push_back(planTrace.values[op->getOperand(j)][r].data[0]);
        else
          ins.push_back(j == operand ? &complete[r] : &planTrace.values[op->getOperand(j)][r]);
      }
      if (!evalRefOp(d, op, ins, results[r], idx).empty())
        return false;
    }
    Relation fixed = finder->find(results);
    if (fixed.exact())
      lastFixedRef = fixed.ref;
    return fixed.exact();
  } catch (const NumericLimit &) {
    return false;
  }
}

/// The role of the reference values around a culprit: what its result would hold once
/// fixed, what it holds, or what its operands hold.
std::string Engine::roleFor(Operation *op) {
  auto role = [&](int ref) { return ref >= 0 && ref < (int)refRoles.size() ? refRoles[ref] : ""; };
  if (!role(lastFixedRef).empty())
    return role(lastFixedRef);
  if (op->getNumResults() && !role(relationOf(op->getResult(0)).ref).empty())
    return role(relationOf(op->getResult(0)).ref);
  for (Value v : op->getOperands())
    if (isa<RankedTensorType>(v.getType()) && !role(relationOf(v).ref).empty())
      return role(relationOf(v).ref);
  return "";
}

/// A wrong integer state (a step count, a random counter): what the plan computes, what
/// the reference returns, and which kind of state it is, from what the reference uses
/// the input it updates for.
void Engine::explainCounter(Operation *op, const Binding &b, const Failure &f, Violation &viol) {
  std::string found = pool.str(planTrace.values[op->getResult(0)][f.rank].data[0], 80);
  std::string want = pool.str(f.reference, 80);
  viol.kind = "dataflow";
  auto upd = spec.stateUpdates.find(b.refName);
  if (upd != spec.stateUpdates.end())
    for (unsigned i = 0; i < spec.reference.getNumArguments(); ++i)
      if (spec.refInputs[i] == upd->second)
        for (Operation *user : spec.reference.getArgument(i).getUsers()) {
          std::set<Operation *> seen{user};
          std::vector<Operation *> work{user};
          while (!work.empty()) {
            Operation *u = work.back();
            work.pop_back();
            if (isa<ref::PowerOp>(u))
              viol.kind = "optimizer";
            else if (isa<ref::DropoutMaskOp>(u) && viol.kind == "dataflow")
              viol.kind = "rng";
            else if (u->getNumResults() == 1 && u->getResult(0).getType().isIndex())
              for (Operation *next : u->getResult(0).getUsers())
                if (seen.insert(next).second)
                  work.push_back(next);
          }
        }
  viol.message = "first wrong value is `" + opName(op) + "`: the plan's next `" +
                 (upd != spec.stateUpdates.end() ? upd->second : b.refName) + "` is " + found +
                 ", the reference's is " + want;
  viol.hint = viol.kind == "optimizer"
                  ? "advance the optimizer's step counter once per step, not per microbatch"
                  : "advance the counter exactly as the reference does";
}

void Engine::explainOp(Operation *op, Violation &viol) {
  std::string name = op->getName().getStringRef().str();
  Relation res = relationOf(op->getResult(0));
  for (unsigned i = 0; i < op->getNumOperands(); ++i)
    viol.notes.push_back(describeOperand(op, i));
  viol.notes.push_back("its result `" + opName(op) + "` " + (res.related() ? "holds " : "matches ") +
                       finder->describe(res));
  std::string head = "first wrong value is `" + opName(op) + "` = " + name + ": ";
  if (isa<dist::AllReduceOp, dist::ReduceScatterOp>(op)) {
    std::vector<int> axes = collectiveAxes(op, mesh);
    std::string kind = op->getAttrOfType<StringAttr>("kind").getValue().str();
    Relation in = relationOf(op->getOperand(0));
    if (in.exact() && in.layout.isPartial()) {
      std::vector<int> pa = in.layout.partialAxes();
      std::string pk = reduceKindName(in.layout.partial[0].second);
      std::set<int> a1(axes.begin(), axes.end()), a2(pa.begin(), pa.end());
      viol.kind = "reduction";
      if (a1 != a2) {
        viol.message = head + "reduces over " + axesStr(mesh, axes) +
                       ", but its operand is partial over " + axesStr(mesh, pa);
        viol.hint = "reduce over " + axesStr(mesh, pa) + " instead of " + axesStr(mesh, axes);
        auto fix = PlanEdit::setAttr(op, "axes", axesAttr(op->getContext(), pa));
        fix->alike = alikeOps(op, [&](Operation *o) {
          Relation r = relationOf(o->getOperand(0));
          return o->getAttr("axes") == op->getAttr("axes") && r.exact() && r.layout.isPartial() &&
                 r.layout.partialAxes() == pa;
        });
        viol.fix = fix;
      } else if (kind != pk) {
        viol.message = head + "expected reduction \"" + pk + "\" over " + axesStr(mesh, pa) +
                       " (the operand is partial-" + pk + "), found \"" + kind + "\"";
        viol.hint = "use \"" + pk + "\" instead of \"" + kind + "\" in this " + name;
        auto fix = PlanEdit::setAttr(op, "kind", StringAttr::get(op->getContext(), pk));
        fix->alike = alikeOps(op, [&](Operation *o) {
          Relation r = relationOf(o->getOperand(0));
          return o->getAttr("kind") == op->getAttr("kind") && r.exact() && r.layout.isPartial() &&
                 reduceKindName(r.layout.partial[0].second) == pk;
        });
        viol.fix = fix;
      } else {
        viol.kind = "sharding";
        viol.message = head + "the reduction matches the operand, but the result's block of "
                              "the scattered dimension is not the reference's";
        viol.hint = "scatter the dimension that the consumers (and the result's layout) "
                    "expect to be split";
      }
      return;
    }
    if (in.exact()) {
      viol.kind = "reduction";
      viol.message = head + "its operand is already complete (" + in.layout.str(mesh) +
                     "); reducing it with \"" + kind + "\" over " + axesStr(mesh, axes) +
                     (kind == "sum" ? " multiplies it by " + std::to_string(mesh.groupSize(axes))
                                    : " changes it");
      viol.hint = "remove this " + name + ": its operand is already complete";
      viol.fix = PlanEdit::forward(op);
      return;
    }
    viol.kind = "reduction";
    viol.message = head + "its result matches no reference value";
    return;
  }
  if (isa<dist::AllGatherOp, dist::ShardSliceOp>(op)) {
    Relation in = relationOf(op->getOperand(0));
    int64_t dim = op->getAttrOfType<IntegerAttr>("dim").getInt();
    bool zig = op->hasAttr("zigzag");
    if (in.exact() && in.layout.isPartial() && isa<dist::ShardSliceOp>(op)) {
      std::vector<int> pa = in.layout.partialAxes();
      viol.kind = "reduction";
      viol.message = head + "its operand is still partial-" +
                     std::string(reduceKindName(in.layout.partial[0].second)) + " over " +
                     axesStr(mesh, pa) + ": keeping this rank's block drops the other ranks' "
                     "contributions to it";
      viol.hint = "use dist.reduce_scatter over " + axesStr(mesh, pa) + " instead of " + name;
      return;
    }
    if (in.exact() && in.block.empty() && dim < (int64_t)in.layout.dims.size() &&
        !in.layout.dims[dim].empty() && in.layout.zigzagAt(dim) != zig) {
      viol.kind = "sharding";
      viol.message = head + "its operand is split on dim " + std::to_string(dim) + " in " +
                     (in.layout.zigzagAt(dim) ? "zigzag chunk order" : "consecutive blocks") +
                     ", but this op " + (zig ? "assumes zigzag chunks" : "places consecutive blocks") +
                     ": the result's elements are permuted";
      viol.hint = in.layout.zigzagAt(dim) ? "add `zigzag` to this " + name
                                          : "remove `zigzag` from this " + name;
      auto fix = in.layout.zigzagAt(dim)
                     ? PlanEdit::setAttr(op, "zigzag", UnitAttr::get(op->getContext()))
                     : PlanEdit::removeAttr(op, "zigzag");
      fix->alike = alikeOps(op, [&](Operation *o) {
        Relation r = relationOf(o->getOperand(0));
        int64_t d = o->getAttrOfType<IntegerAttr>("dim").getInt();
        return r.exact() && r.block.empty() && d < (int64_t)r.layout.dims.size() &&
               !r.layout.dims[d].empty() && r.layout.zigzagAt(d) != o->hasAttr("zigzag");
      });
      viol.fix = fix;
      return;
    }
    viol.kind = "sharding";
    viol.message = head + "its result matches no reference value under any layout: the " +
                   "operand is not split the way this op assumes";
    viol.hint = "check which dimension and mesh axes the operand is split on";
    return;
  }
  // A rank-local compute op. A partial operand is the fault when reducing it first
  // would have made this op's result right (a counterfactual evaluation): gelu of a
  // partial sum, a bias added on every rank, a max shift taken before the max
  // all-reduce. Partial values that flow through linear or layout ops are fine.
  for (unsigned i = 0; i < op->getNumOperands(); ++i) {
    Relation in = relationOf(op->getOperand(i));
    if (!in.exact() || !in.layout.isPartial() || !fixedByReducing(op, i, in))
      continue;
    std::vector<int> pa = in.layout.partialAxes();
    ReduceKind kind = in.layout.partial[0].second;
    std::string pk = reduceKindName(kind);
    bool additive = isa<ref::BiasAddOp, ref::AddOp, ref::SubOp>(op) && kind == ReduceKind::Sum;
    viol.kind = "reduction";
    viol.message = head + "operand #" + std::to_string(i) + " `" + spec.nameOf(op->getOperand(i)) +
                   "` is still partial-" + pk + " over " + axesStr(mesh, pa) +
                   (additive ? ", and adding a complete operand to it on every rank counts "
                               "that operand " + std::to_string(mesh.groupSize(pa)) + " times"
                             : ", but " + name + " needs its complete value") +
                   "; reduce it first (dist.all_reduce \"" + pk + "\" over " +
                   axesStr(mesh, pa) + ")";
    viol.hint = "insert dist.all_reduce \"" + pk + "\" over " + axesStr(mesh, pa) +
                " on `" + spec.nameOf(op->getOperand(i)) + "` before this op";
    viol.fix = PlanEdit::insertAllReduce(op, i, pk, axisNames(pa));
    return;
  }
  // A partial operand reaching an op that is not linear in it, even where reducing it
  // alone would not make the result a reference value (a microbatch's share).
  if (isa<ref::DivOp>(op) || unaryFunction(op) ||
      isa<ref::GeluOp, ref::SoftmaxOp, ref::CausalSoftmaxOp, ref::RmsNormOp, ref::LayerNormOp,
          ref::CrossEntropyOp, ref::CrossEntropySumOp>(op)) {
    for (unsigned i = 0; i < op->getNumOperands(); ++i) {
      if (!isa<RankedTensorType>(op->getOperand(i).getType()))
        continue;
      Relation in = relationOf(op->getOperand(i));
      if (!in.exact() || !in.layout.isPartial())
        continue;
      std::vector<int> pa = in.layout.partialAxes();
      std::string pk = reduceKindName(in.layout.partial[0].second);
      viol.kind = "reduction";
      viol.message = head + "operand #" + std::to_string(i) + " `" +
                     spec.nameOf(op->getOperand(i)) + "` is still partial-" + pk + " over " +
                     axesStr(mesh, pa) + " (it holds reference `" + refValues[in.ref].name +
                     "` only once reduced), but " + name + " is not linear in it and needs "
                     "its complete value";
      viol.hint = "reduce `" + spec.nameOf(op->getOperand(i)) + "` over " + axesStr(mesh, pa) +
                  " as well before this op";
      viol.fix = PlanEdit::insertAllReduce(op, i, pk, axisNames(pa));
      lastFixedRef = in.ref;
      return;
    }
  }
  if (isa<ref::CrossEntropyOp, ref::CrossEntropySumOp>(op) && !res.related()) {
    viol.kind = "loss-normalization";
    viol.message = head + "from correct operands (logits, labels and mask of its tokens) it "
                          "computes a loss that is no reference value: the loss is normalized "
                          "over the wrong set of tokens";
    viol.hint = "sum the token losses here (ref.cross_entropy_sum) and divide once by the "
                "count of non-ignored tokens of the whole global batch";
    return;
  }
  if (isa<ref::AddOp, ref::ScaleOp>(op) && !res.related()) {
    // Gradient accumulation over microbatches: each must be counted exactly once.
    auto terms = microbatchTerms(op->getResult(0));
    if (terms && !isMicrobatchPartial(op->getResult(0))) {
      std::string wrong;
      for (auto &[tile, c] : *terms)
        wrong += (wrong.empty() ? "" : ", ") +
                 (tile == "*" ? std::string("a sum over every microbatch")
                              : "the microbatch at " + tile + " with weight " + c.str());
      {
        viol.kind = "reduction";
        viol.message = head + "it accumulates the microbatches' contributions with unequal "
                              "weights: " + wrong + " (each microbatch must count once, "
                              "all with one weight)";
        viol.hint = "add each microbatch's gradient to the accumulator exactly once, and scale "
                    "the loss (not the accumulator) by the number of microbatches";
        return;
      }
    }
  }
  for (unsigned i = 0; i < op->getNumOperands(); ++i) {
    Value operand = op->getOperand(i);
    if (isa<ref::AddOp, ref::ScaleOp>(op) || !isa<RankedTensorType>(operand.getType()) ||
        relationOf(operand).exact() || !isMicrobatchPartial(operand))
      continue;
    std::string tiles;
    auto terms = microbatchTerms(operand);
    for (auto &[tile, c] : *terms)
      tiles += (tiles.empty() ? "" : ", ") + tile;
    viol.kind = "reduction";
    viol.message = head + "operand #" + std::to_string(i) + " `" + spec.nameOf(operand) +
                   "` sums the contributions of the microbatches at " + tiles +
                   " only: a microbatch is missing from the accumulation";
    viol.hint = "accumulate every microbatch's gradient before the optimizer step";
    return;
  }
  // An operand holding one summand of what the reference's same op takes: the other
  // summand never arrived (the gradient of a weight used twice -- tied embeddings on
  // two stages -- is the sum of both uses' gradients).
  for (unsigned i = 0; i < op->getNumOperands(); ++i) {
    Value operand = op->getOperand(i);
    if (!isa<RankedTensorType>(operand.getType()))
      continue;
    Relation in = relationOf(operand);
    if (!in.exact() || !in.block.empty())
      continue;
    const std::string &held = refValues[in.ref].name;
    std::string whole, other;
    spec.reference.walk([&](Operation *r) {
      if (!whole.empty() || r->getName() != op->getName() || r->getNumOperands() <= i)
        return;
      auto add = r->getOperand(i).getDefiningOp<ref::AddOp>();
      if (!add)
        return;
      for (unsigned k = 0; k < 2; ++k)
        if (spec.nameOf(add->getOperand(k)) == held) {
          whole = spec.nameOf(add.getResult());
          other = spec.nameOf(add->getOperand(1 - k));
        }
    });
    if (whole.empty())
      continue;
    viol.kind = "reduction";
    viol.message = head + "operand #" + std::to_string(i) + " `" + spec.nameOf(operand) +
                   "` holds reference `" + held + "`, but the reference's " + name + " takes `" +
                   whole + "` = `" + held + "` + `" + other + "`: the other summand never "
                   "reaches this op";
    viol.hint = "a weight used in two places (tied embedding and LM head on the first and last "
                "stage) needs the sum of both uses' gradients on every copy: reduce them between "
                "the stages that hold it";
    return;
  }
  if (isa<dist::LoadOp>(op)) {
    viol.kind = "checkpoint";
    viol.message = head + "the values it reads are not the state the reference resumes "
                          "from, for the elements this rank needs";
    viol.hint = "check the entry and the offsets this rank reads, against where the saving "
                "plan wrote them";
    return;
  }
  if (auto pw = dyn_cast<ref::PowerOp>(op)) {
    viol.kind = "optimizer";
    viol.message = head + "it raises " + std::to_string(pw.getBase().convertToDouble()) +
                   " to a step count that no reference power uses: the optimizer's step "
                   "counter (bias correction) is wrong";
    viol.hint = "advance the step counter once per optimizer step (not per microbatch) and "
                "use the advanced count in the bias corrections";
    return;
  }
  if (isa<ref::DropoutMaskOp>(op)) {
    viol.kind = "rng";
    viol.message = head + "its elements draw (key, counter) pairs that no reference dropout "
                          "mask draws for the same elements under any layout (RNG mode "
                          "'exact': every element must draw the reference's pair)";
    viol.hint = "derive the key from the reference's key and the counter from the reference's "
                "counter plus the element's global linear index; or, if statistically "
                "independent masks are intended, set dist.rng = \"independent\" on the plan";
    return;
  }
  if (auto cd = dyn_cast<ref::CapacityDispatchOp>(op)) {
    // Compare with the reference's capacity: slots per expert in each token group.
    Relation in = relationOf(cd.getInput());
    std::string ref;
    spec.reference.walk([&](ref::CapacityDispatchOp rd) {
      int64_t T = cast<RankedTensorType>(rd.getInput().getType()).getDimSize(0);
      ref = std::to_string(rd.getCapacity()) + " per expert in each of " +
            std::to_string(rd.getGroups()) + " groups of " +
            std::to_string(T / rd.getGroups()) + " tokens";
    });
    if (in.exact() && !ref.empty()) {
      int64_t Tl = cast<RankedTensorType>(cd.getInput().getType()).getDimSize(0);
      viol.kind = "routing";
      viol.message = head + "it keeps " + std::to_string(cd.getCapacity()) +
                     " slots per expert for this rank's " + std::to_string(Tl) + " tokens (in " +
                     std::to_string(cd.getGroups()) + " group(s)), but the reference's capacity is " +
                     ref + ": tokens the reference drops are computed, or kept ones dropped";
      viol.hint = "compute the capacity from the tokens of this rank's group, as the reference "
                  "does (capacity factor x group tokens x k / experts)";
      return;
    }
  }
  if (auto a2a = dyn_cast<dist::AllToAllOp>(op)) {
    Relation in = relationOf(a2a.getInput());
    std::vector<int> axes = collectiveAxes(op, mesh);
    int64_t cdim = a2a.getConcatDim();
    auto splitting = cdim < (int64_t)in.layout.dims.size() ? in.layout.dims[cdim] : std::vector<int>{};
    bool within = llvm::all_of(axes, [&](int a) { return llvm::is_contained(splitting, a); });
    if (in.exact() && !splitting.empty() && !within) {
      viol.kind = "sharding";
      viol.message = head + "it exchanges blocks over " + axesStr(mesh, axes) +
                     ", but its operand's dim " + std::to_string(cdim) + " is split over " +
                     axesStr(mesh, in.layout.dims[cdim]) +
                     ": blocks go to ranks that do not hold their part (experts' slots to the "
                     "wrong ranks)";
      viol.hint = "run this all_to_all over " + axesStr(mesh, in.layout.dims[cdim]);
      auto fix = PlanEdit::setAttr(op, "axes", axesAttr(op->getContext(), in.layout.dims[cdim]));
      fix->alike = alikeOps(op, [&](Operation *o) { return o->getAttr("axes") == op->getAttr("axes"); });
      viol.fix = fix;
      return;
    }
  }
  if (auto pm = dyn_cast<ref::PositionMaskOp>(op)) {
    // A position mask matching no block of any reference mask: its offsets are not the
    // global positions of the rank's queries and keys.
    std::string offsets;
    for (int64_t r = 0; r < mesh.numRanks() && r < 8; ++r) {
      Rational q, k;
      if (pool.isConstant(planTrace.values[pm.getQOffset()][r].data[0], &q) &&
          pool.isConstant(planTrace.values[pm.getKOffset()][r].data[0], &k))
        offsets += (offsets.empty() ? "" : ", ") + mesh.rankStr(r) + " queries from " + q.str() +
                   ", keys from " + k.str();
    }
    viol.kind = "masking";
    viol.message = head + "its query and key positions (" + offsets + ") give a mask that is "
                   "no block of the reference's under any layout: each rank's offsets must be "
                   "the global positions of its first query and its first key";
    viol.hint = "compute the offsets from dist.axis_index: the global position of this rank's "
                "first query (and first key) in the reference's sequence";
    return;
  }
  if (auto cs = dyn_cast<ref::CausalSoftmaxOp>(op)) {
    // The mask is right when each query sees the keys up to its own global position:
    // offset = (global position of the first query) - (global position of the first key).
    Relation in = relationOf(cs.getInput());
    const SymTensor &x = planTrace.values[cs.getInput()][0];
    size_t rank = x.shape.size();
    if (in.exact() && rank >= 2) {
      for (int64_t r = 0; r < mesh.numRanks(); ++r) {
        std::vector<int64_t> at(rank, 0);
        for (size_t k = 0; k < in.offset.size(); ++k)
          at[k] += in.offset[k];
        std::vector<int64_t> g =
            in.layout.globalIndex(mesh, r, in.block.empty() ? x.shape : in.block, at);
        int64_t want = g[rank - 2] - g[rank - 1];
        int64_t have = x.shape[rank - 1] - x.shape[rank - 2];
        if (cs.getOffset()) {
          Rational c;
          if (!pool.isConstant(planTrace.values[cs.getOffset()][r].data[0], &c) ||
              !c.asInt64(have))
            continue;
        }
        if (have == want)
          continue;
        viol.kind = "masking";
        viol.message = head + "on rank " + mesh.rankStr(r) + " its causal offset is " +
                       std::to_string(have) + ", but its first query is at global position " +
                       std::to_string(g[rank - 2]) + " and its first key at " +
                       std::to_string(g[rank - 1]) + " (" + finder->describe(in) +
                       "): the mask must compare global positions, so the offset must be " +
                       std::to_string(want);
        viol.hint = "pass the global position of this block's first query (from "
                    "dist.axis_index and the chunk order) as the offset";
        return;
      }
    }
  }
  if (res.exact() && !res.block.empty()) {
    viol.kind = "sharding";
    viol.message = head + "its result is a piece of `" + refValues[res.ref].name + "` (" +
                   finder->describe(res) + ") that does not line up with how its users "
                   "hold their other operands";
    viol.hint = "check which rows/columns of the reference value each rank (and each "
                "microbatch) must hold here";
    return;
  }
  if (res.related()) {
    viol.kind = isa<ref::MseLossOp, ref::MseLossGradOp>(op) ? "loss-normalization" : "reduction";
    viol.message = head + "its result is " + res.scale.str() + " times `" +
                   refValues[res.ref].name + "` (" + res.layout.str(mesh) +
                   "): the scaling is wrong";
    viol.hint = "remove the extra factor " + res.scale.str() + " (multiply by " +
                (Rational(1) / res.scale).str() + ")";
    viol.fix = PlanEdit::scaleResult(op, Rational(1) / res.scale);
    return;
  }
  viol.kind = "sharding";
  viol.message = head + "from correct operands it computes a value that matches no reference "
                        "value under any layout";
  viol.hint = "check which dimension each operand is split on, and the op's attributes";
  if (isa<ref::SliceOp, ref::ConcatOp>(op)) {
    // A shift or a slice along a split dimension works on this rank's block only.
    auto sl = dyn_cast<ref::SliceOp>(op);
    int64_t dim = -1;
    if (auto cc = dyn_cast<ref::ConcatOp>(op))
      dim = cc.getDim();
    Relation in = relationOf(op->getOperand(0));
    for (size_t d = 0; d < in.layout.dims.size(); ++d) {
      bool touched = sl ? (sl.getOffsets()[d] != 0 ||
                           sl.getSizes()[d] != planTrace.values[op->getOperand(0)][0].shape[d])
                        : (int64_t)d == dim;
      if (!in.exact() || in.layout.dims[d].empty() || !touched)
        continue;
      viol.notes.push_back("it " + std::string(sl ? "slices" : "concatenates along") + " dim " +
                           std::to_string(d) + ", which is split over " +
                           axesStr(mesh, in.layout.dims[d]) +
                           (in.layout.zigzagAt(d) ? " in zigzag chunks" : "") +
                           ": positions here are positions in this rank's block, not in the "
                           "global tensor");
      viol.hint = "do this shift or slice on the whole dimension before it is split over " +
                  axesStr(mesh, in.layout.dims[d]) + " (or exchange the boundary elements)";
      break;
    }
  }
  if (auto mm = dyn_cast<ref::MatmulOp>(op)) {
    Relation a = relationOf(mm.getLhs()), b = relationOf(mm.getRhs());
    auto dimAxes = [&](const Relation &r, int64_t d) -> std::string {
      if (!r.exact() || d >= (int64_t)r.layout.dims.size() || r.layout.dims[d].empty())
        return "not split";
      return "split over " + axesStr(mesh, r.layout.dims[d]);
    };
    viol.notes.push_back("it contracts dim " + std::to_string(mm.getLhsDim()) + " of `" +
                         spec.nameOf(mm.getLhs()) + "` (" +
                         dimAxes(a, mm.getLhsDim()) + ") with dim " +
                         std::to_string(mm.getRhsDim()) + " of `" + spec.nameOf(mm.getRhs()) +
                         "` (" + dimAxes(b, mm.getRhsDim()) + "); check which dimension each operand is sharded on");
  }
}

void Engine::explainOutput(const Binding &b, Value v, const Relation &actual, Violation &viol) {
  std::string declared = "`" + b.refName + "` (" + b.layout.str(mesh) + ")";
  std::string holds = finder->describe(actual);
  std::string head = "plan result #" + std::to_string(b.index) + " `" + spec.nameOf(v) +
                     "` is returned as " + declared + ", but it holds " + holds;
  const std::string &actualName = refValues[actual.ref].name;
  if (actualName != b.refName) {
    viol.kind = "dataflow";
    viol.message = head + ": the wrong value is returned";
    viol.hint = "return the value that holds `" + b.refName + "`";
  } else if (actual.layout.isPartial() && !b.layout.isPartial()) {
    std::vector<int> pa = actual.layout.partialAxes();
    std::string pk = reduceKindName(actual.layout.partial[0].second);
    viol.kind = "reduction";
    viol.message = head + ": a reduction is missing (dist.all_reduce \"" + pk + "\" over " +
                   axesStr(mesh, pa) + ")";
    viol.hint = "insert dist.all_reduce \"" + pk + "\" over " + axesStr(mesh, pa) + " on `" +
                spec.nameOf(v) + "` before returning it";
    viol.fix = PlanEdit::insertAllReduce(spec.plan.getBody().front().getTerminator(), b.index, pk,
                                         axisNames(pa));
  } else if (b.layout.isPartial() && !actual.layout.isPartial()) {
    viol.kind = "reduction";
    viol.message = head + ": gathering it as partial would reduce a complete value";
    viol.hint = "declare the result with layout '" + actual.layout.str(mesh) + "'";
    viol.fix = PlanEdit::resultLayout(spec.plan, b.index, actual.layout);
  } else if (actual.scale.isOne() && actual.layout.str(mesh) == b.layout.str(mesh)) {
    // The relation says the declared value (it is found by numeric fingerprints, which
    // can match where the values differ elsewhere): say only that the value is wrong.
    viol.kind = "dataflow";
    viol.message = "plan result #" + std::to_string(b.index) + " `" + spec.nameOf(v) +
                   "`, returned as " + declared + ", differs from the reference's value; "
                   "no single op that computes it was found wrong";
    viol.hint = "compare how the plan computes `" + b.refName + "` with the reference";
  } else {
    viol.kind = actual.layout.partial != b.layout.partial ? "reduction" : "sharding";
    viol.message = head;
    viol.hint = "declare the result with layout '" + actual.layout.str(mesh) +
                "', or re-lay the value out before returning it";
    viol.fix = PlanEdit::resultLayout(spec.plan, b.index, actual.layout);
  }
}

void Engine::addCounterexample(const Failure &f, Violation &viol) {
  Counterexample &cx = viol.counterexample;
  const std::vector<double> &vals = f.decision.assignment;
  if (vals.empty())
    return;
  viol.hasCounterexample = true;
  cx.fromSolver = f.decision.assignmentFromSolver;
  cx.element = f.output->refName + (f.global.empty() ? "" : indexStr(f.global));
  for (size_t i = 0; i < vals.size(); ++i)
    if (vals[i] != 0)
      cx.inputs.push_back({pool.input(i).str(), vals[i]});
  // The values shown are enclosed ones (exact where doubles would cancel).
  auto ret = cast<func::ReturnOp>(spec.plan.getBody().front().getTerminator());
  const auto &perRank = planTrace.values[ret.getOperand(f.output->index)];
  std::vector<int64_t> members{f.rank};
  if (f.output->layout.isPartial())
    members = mesh.group(f.rank, f.output->layout.partialAxes());
  std::vector<PolyId> shown{f.reference, f.plan};
  for (int64_t m : members)
    shown.push_back(perRank[m].data[f.local]);
  std::vector<double> values = enclosedValues(pool, shown, vals);
  cx.reference = values[0];
  cx.plan = values[1];
  for (size_t k = 0; k < members.size(); ++k) {
    cx.rankValues.push_back({mesh.rankStr(members[k]), values[2 + k]});
    viol.ranks.push_back(mesh.rankStr(members[k]));
  }
}

/// VerifyOptions::verdictOnly: the difference at its output, neither localized nor
/// explained.
void Engine::reportUnlocalized(const Failure &f) {
  Violation v;
  v.kind = "dataflow";
  v.value = f.output->refName;
  v.location = toSourceLoc(f.output->loc);
  v.message = "output '" + f.output->refName + indexStr(f.global) +
              "' differs from the reference (not localized: only the verdict was asked for)";
  result.violations.push_back(std::move(v));
}

void Engine::localize(const std::vector<Failure> &failures) {
  auto ret = cast<func::ReturnOp>(spec.plan.getBody().front().getTerminator());
  std::map<Operation *, size_t> byCulprit;
  for (const Failure &f : failures) {
    options.deadline.check("localizing violations");
    const Binding &b = *f.output;
    Value v = ret.getOperand(b.index);
    Relation actual = relationOf(v);
    Operation *culprit;
    Violation viol;
    // Where the plan has no value at the counterexample (a division by a count that is
    // 0 there), the first undefined op is the culprit unless a wrong value comes before
    // it: the data-flow walk below decides first, the undefined op is its fallback.
    Violation undefinedViol;
    Operation *undefinedAt = undefinedCulprit(f, undefinedViol);
    if (actual.exact() && actual.block.empty()) {
      culprit = v.getDefiningOp() ? v.getDefiningOp() : ret.getOperation();
      explainOutput(b, v, actual, viol);
    } else {
      std::set<Operation *> seen;
      culprit = walkToCulprit(v, seen);
      if (!culprit)
        culprit = ret.getOperation();
      // A culprit inside a derived backward pass whose seed (the loss a plan ref.grad
      // differentiates) is itself off by a factor: the seed's own culprit is the cause.
      if (culprit != ret.getOperation() && opName(culprit).rfind("%d(", 0) == 0)
        for (Value seed : spec.planGradSeeds) {
          Relation sr = relationOf(seed);
          if (!sr.related() || sr.exact())
            continue;
          std::set<Operation *> seenSeed;
          Operation *c = walkToCulprit(seed, seenSeed);
          if (c && c != ret.getOperation() && opName(c).rfind("%d(", 0) != 0) {
            culprit = c;
            break;
          }
        }
      if (culprit == ret.getOperation() && undefinedAt) {
        culprit = undefinedAt;
        viol = undefinedViol;
      } else if (culprit == ret.getOperation()) {
        viol.kind = "dataflow";
        viol.message = "plan result #" + std::to_string(b.index) + " returns argument `" +
                       spec.nameOf(v) + "` as `" + b.refName + "`, which it is not";
      } else {
        lastFixedRef = -1;
        explainOp(culprit, viol);
        std::string role = roleFor(culprit);
        if (!role.empty())
          viol.kind = role;
        // A norm taken of one part of the reference's sum of squares (one stage's, one
        // rank's parameters): say which part.
        if (role == "grad-norm" && isa<ref::SqrtOp>(culprit)) {
          Relation in = relationOf(culprit->getOperand(0));
          if (in.exact() && in.scale.isOne() && !in.layout.isPartial())
            viol.message = "first wrong value is `" + opName(culprit) + "` = ref.sqrt: it takes "
                           "the norm of `" + refValues[in.ref].name + "` alone, one term of the "
                           "reference's sum of squares: the norm must sum the squares of every "
                           "parameter's gradient, over every stage and shard that holds one";
        }
        // A constant factor on values of a step whose reference normalizes its loss
        // (ref.role = "loss-normalization") is a normalization error: an average on top
        // of a global token count, gradients rescaled per microbatch.
        Relation res = culprit->getNumResults() ? relationOf(culprit->getResult(0)) : Relation();
        if (viol.kind == "reduction" && res.related() && !res.scale.isOne() &&
            llvm::is_contained(refRoles, "loss-normalization"))
          viol.kind = "loss-normalization";
        // Wrong values first seen in an updated parameter or optimizer state (the
        // reference marks its update with ref.role = "optimizer") come from the update.
        auto out = refIndexByName.find(b.refName);
        if (role.empty() && (viol.kind == "sharding" || viol.kind == "reduction") &&
            out != refIndexByName.end() && refRoles[out->second] == "optimizer") {
          viol.kind = "optimizer";
          viol.hint = "check the optimizer update here: which elements it applies to (decay "
                      "masks, padding of the flat shard) and its coefficients";
        }
        if (culprit->getNumResults() == 1 && culprit->getResult(0).getType().isIndex())
          explainCounter(culprit, b, f, viol);
        if (culprit == undefinedAt)
          viol.notes.push_back(undefinedViol.notes.front());
        else if (undefinedAt)
          viol.locatedNotes.push_back({toSourceLoc(undefinedAt->getLoc()),
                                       "`" + opName(undefinedAt) + "`, computed from it: " +
                                           undefinedViol.notes.front()});
      }
    }
    auto it = byCulprit.find(culprit);
    if (it != byCulprit.end()) {
      Violation &existing = result.violations[it->second];
      existing.value += ", " + b.refName;
      continue;
    }
    viol.location = toSourceLoc(culprit->getLoc());
    viol.at = culprit == ret.getOperation() ? "" : opName(culprit);
    viol.value = b.refName;
    addCounterexample(f, viol);
    viol.locatedNotes.push_back({toSourceLoc(ret.getLoc()),
                                 "output `" + b.refName + "` (" + b.layout.str(mesh) +
                                     ") differs from the reference; it is returned here"});
    byCulprit[culprit] = result.violations.size();
    result.violations.push_back(std::move(viol));
  }
  // A culprit inside a backward pass the plan derives with ref.grad (ops named
  // `d(%x).k`) follows from a wrong forward value when another violation points into the
  // forward computation: report that one, and the gradients as its consequence.
  auto derived = [](const Violation &v) { return v.at.rfind("%d(", 0) == 0; };
  auto forward = std::find_if(result.violations.begin(), result.violations.end(),
                              [&](const Violation &v) { return !derived(v) && !v.at.empty(); });
  if (forward == result.violations.end())
    return;
  std::vector<Violation> kept;
  std::string consequences;
  for (Violation &v : result.violations)
    if (derived(v))
      consequences += (consequences.empty() ? "" : ", ") + v.value;
  for (Violation &v : result.violations) {
    if (derived(v))
      continue;
    if (&v == &*forward && !consequences.empty()) {
      v.value += ", " + consequences;
      v.notes.push_back("the gradients the plan derives from this value (ref.grad) differ as a "
                        "consequence: " + consequences);
    }
    kept.push_back(std::move(v));
  }
  result.violations = std::move(kept);
}

/// A collective whose result is never used: the communication happens and its result is
/// dropped, which is almost always a plan that reads the unreduced operand where it
/// meant the result. Reported as a warning; where a violation's culprit reads that
/// operand, the violation says so.
void Engine::checkDiscardedCollectives() {
  for (Operation *op : spec.planOps()) {
    if (!isa<dist::AllReduceOp, dist::AllGatherOp, dist::ReduceScatterOp, dist::AllToAllOp>(op) ||
        !op->getResult(0).use_empty())
      continue;
    Value operand = op->getOperand(0);
    std::string readers;
    for (Operation *user : operand.getUsers())
      if (user != op && user->getNumResults() && readers.size() < 200)
        readers += (readers.empty() ? "" : ", ") + std::string("`") + opName(user) + "`";
    Violation w;
    w.kind = isa<dist::AllGatherOp, dist::AllToAllOp>(op) ? "sharding" : "reduction";
    w.location = toSourceLoc(op->getLoc());
    w.at = opName(op);
    w.message = "the result of `" + opName(op) + "` = " + op->getName().getStringRef().str() +
                " of `" + spec.nameOf(operand) + "` is never used: a collective whose result "
                "is discarded is almost always a bug" +
                (readers.empty() ? "" : " (" + readers + " read" + (readers.find(',') == std::string::npos ? "s" : "") +
                                            " the operand `" + spec.nameOf(operand) + "` instead)");
    result.warnings.push_back(std::move(w));
  }
}

/// The fix of a violation whose culprit reads the operand of a discarded collective:
/// read the collective's result instead.
void Engine::discardedFix(Violation &v, const Violation &w) {
  Operation *culprit = nullptr, *collective = nullptr;
  for (Operation *op : spec.planOps()) {
    if (!op->getNumResults())
      continue;
    if (opName(op) == v.at)
      culprit = op;
    if (opName(op) == w.at)
      collective = op;
  }
  if (!culprit || !collective)
    return;
  for (unsigned i = 0; i < culprit->getNumOperands(); ++i)
    if (culprit->getOperand(i) == collective->getOperand(0)) {
      v.hint = "read `" + w.at + "` (the result of the discarded collective) instead of `" +
               spec.nameOf(collective->getOperand(0)) + "` here";
      v.fix = PlanEdit::replaceOperand(culprit, i, collective->getResult(0));
      return;
    }
}

/// Every hint is checked before it is shown: its edit is applied to a copy of the spec,
/// which is verified again on the outputs the violation is about; the hint stays only
/// if they are then right. Hints without an edit, or past the time budget, are dropped.
void Engine::checkFixes() {
  int checked = 0;
  auto now = std::chrono::steady_clock::now();
  fixesUntil = now + std::max<std::chrono::steady_clock::duration>(3 * (now - started),
                                                                   std::chrono::seconds(3));
  for (Violation &v : result.violations) {
    if (v.hint.empty())
      continue;
    bool keep = false;
    if (v.fix && options.checkFixes && checked < 4 && options.deadline.remainingMs() > 2000) {
      ++checked;
      try {
        keep = checkFix(v);
      } catch (const TimeLimit &) {
        keep = false;
      }
    }
    if (!keep) {
      v.hint.clear();
      v.fix.reset();
    }
  }
}

/// Whether applying `v.fix` to a copy of the spec makes the outputs `v` is about right.
bool Engine::fixRemoves(const Violation &v) {
  if (v.value.empty())
    return false;
  std::set<std::string> outputs;
  for (size_t start = 0; start <= v.value.size();) {
    size_t comma = v.value.find(", ", start);
    outputs.insert(v.value.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos)
      break;
    start = comma + 2;
  }
  Spec edited;
  edited.path = spec.path;
  edited.reduceShapes = spec.reduceShapes;
  edited.sources = spec.sources;
  // The edit is made on the plan as written, and the copy is loaded again: derived
  // backward passes follow the edited forward ops.
  if (!spec.writtenMap)
    return false;
  IRMapping map;
  for (auto &m : spec.written)
    edited.modules.push_back(
        OwningOpRef<ModuleOp>(cast<ModuleOp>(m.get().getOperation()->clone(map))));
  std::string why, errors;
  if (edited.modules.empty() || !v.fix->apply(PlanEdit::Where{*spec.writtenMap, map}, mesh, why))
    return false;
  // The copy is checked like any spec; its errors (an edit that does not fit) are not
  // shown, they only mean the hint is not confirmed.
  ScopedDiagnosticHandler quiet(spec.plan->getContext(), [](Diagnostic &) { return success(); });
  for (auto &m : edited.modules)
    if (failed(mlir::verify(*m)))
      return false;
  if (!analyzeSpec(edited, errors))
    return false;
  VerifyOptions o = options;
  o.checkFixes = false;
  o.onlyOutputs = outputs;
  o.verdictOnly = true;
  double leftMs = std::chrono::duration<double, std::milli>(fixesUntil -
                                                            std::chrono::steady_clock::now()).count();
  leftMs = std::min(leftMs, (double)options.deadline.remainingMs());
  if (leftMs < 50)
    return false;
  o.deadline = Deadline(leftMs / 1000);
  VerifyResult r = verifySpec(edited, o);
  return r.verdict == Verdict::Verified;
}

/// The first dist.all_reduce of kind `kind` over exactly `axes` that the result of `op`
/// reaches through the plan's later ops (a few steps at most), or null.
Operation *Engine::laterAllReduce(Operation *op, const std::string &kind,
                                  const std::vector<std::string> &axes) {
  std::deque<std::pair<Operation *, int>> work{{op, 0}};
  std::set<Operation *> seen{op};
  while (!work.empty()) {
    auto [o, depth] = work.front();
    work.pop_front();
    if (o != op)
      if (auto ar = dyn_cast<dist::AllReduceOp>(o)) {
        std::vector<std::string> names;
        for (Attribute a : ar.getAxes())
          names.push_back(cast<StringAttr>(a).str());
        if (ar.getKind() == kind && names == axes)
          return o;
        continue;
      }
    if (depth >= 4)
      continue;
    for (Value r : o->getResults())
      for (Operation *user : r.getUsers())
        if (seen.insert(user).second)
          work.push_back({user, depth + 1});
  }
  return nullptr;
}

/// The fix of `v`, checked; a value that must be reduced before one op is often needed
/// reduced by its other consumers too (every microbatch's division by a token count):
/// then reducing it once, for every use, is the fix.
bool Engine::checkFix(Violation &v) {
  if (fixRemoves(v))
    return true;
  if ((v.fix->kind == PlanEdit::SetAttr || v.fix->kind == PlanEdit::RemoveAttr) &&
      !v.fix->everyLike && !v.fix->alike.empty()) {
    auto wider = std::make_shared<PlanEdit>(*v.fix);
    wider->everyLike = true;
    std::shared_ptr<const PlanEdit> narrow = v.fix;
    v.fix = wider;
    if (fixRemoves(v)) {
      std::string others;
      for (Operation *o : wider->alike)
        if (spec.writtenMap->lookupOrNull(o))
          others += (others.empty() ? "`" : ", `") + opName(o) + "`";
      if (!others.empty())
        v.hint += ", and likewise in " + others;
      return true;
    }
    v.fix = narrow;
    return false;
  }
  if (v.fix->kind != PlanEdit::InsertAllReduce || v.fix->everyUse ||
      isa<func::ReturnOp>(v.fix->op))
    return false;
  std::shared_ptr<const PlanEdit> narrow = v.fix;
  Value value = v.fix->op->getOperand(v.fix->operand);
  // The reduction exists, but too late (a bias added before it): move it, reducing
  // here and dropping the later all-reduce over the same axes.
  if (Operation *later = laterAllReduce(v.fix->op, narrow->reduceKind, narrow->axes)) {
    auto moved = std::make_shared<PlanEdit>(*narrow);
    moved->also.push_back(PlanEdit::forward(later));
    v.fix = moved;
    if (fixRemoves(v)) {
      v.hint = "move the dist.all_reduce of `" + opName(later) + "` here: insert it on `" +
               spec.nameOf(value) + "` before this op, and remove it where `" + opName(later) +
               "` is computed";
      return true;
    }
    v.fix = narrow;
  }
  auto wider = std::make_shared<PlanEdit>(*narrow);
  wider->everyUse = true;
  v.fix = wider;
  if (fixRemoves(v)) {
    v.hint = "insert dist.all_reduce \"" + wider->reduceKind + "\" over [" +
             llvm::join(wider->axes, ", ") + "] on `" + spec.nameOf(value) +
             "` where it is computed, for every op that uses it";
    return true;
  }
  v.fix = narrow;
  return false;
}

/// When the plan's value does not exist at the counterexample (NaN: a division by 0, a
/// root of a negative number) where the reference's does: the first plan op, in
/// execution order, whose value is undefined on some rank while its operands are not.
Operation *Engine::undefinedCulprit(const Failure &f, Violation &viol) {
  const std::vector<double> &vals = f.decision.assignment;
  if (vals.empty())
    return nullptr;
  Evaluator eval(pool);
  eval.reset(vals);
  if (std::isfinite(eval.poly(f.plan)) || !std::isfinite(eval.poly(f.reference)))
    return nullptr;
  auto finiteOn = [&](Value x, int64_t r) {
    auto it = planTrace.values.find(x);
    if (it == planTrace.values.end() || r >= (int64_t)it->second.size())
      return true;
    for (PolyId p : it->second[r].data)
      if (!std::isfinite(eval.poly(p)))
        return false;
    return true;
  };
  for (Operation *op : spec.planOps()) {
    if (op->getNumResults() != 1 || !planTrace.values.count(op->getResult(0)))
      continue;
    for (int64_t r = 0; r < mesh.numRanks(); ++r) {
      if (finiteOn(op->getResult(0), r) ||
          !llvm::all_of(op->getOperands(), [&](Value x) { return finiteOn(x, r); }))
        continue;
      std::string why = "an operation in it is undefined there";
      if (isa<ref::DivOp, ref::RecipOp, ref::RsqrtOp, ref::LogOp, ref::SqrtOp>(op)) {
        std::string x = "`" + spec.nameOf(op->getOperand(op->getNumOperands() - 1)) + "`";
        why = isa<ref::DivOp>(op)     ? "it divides by " + x + ", which is 0 there"
              : isa<ref::RecipOp>(op) ? "it takes the reciprocal of " + x + ", which is 0 there"
              : isa<ref::SqrtOp>(op)  ? "it takes the square root of " + x + ", which is negative there"
                                      : "its operand " + x + " is not positive there";
      }
      viol.kind = "dataflow";
      std::string role = roleFor(op);
      if (!role.empty())
        viol.kind = role;
      viol.message = "first wrong value is `" + opName(op) + "` = " +
                     op->getName().getStringRef().str() + ": on rank " + mesh.rankStr(r) +
                     " it has no value at the counterexample (" + why +
                     "), where the reference's outputs do: the plan divides or takes a root "
                     "where the reference does not";
      viol.notes.push_back("on rank " + mesh.rankStr(r) + " it has no value at the "
                           "counterexample (" + why + ")");
      viol.notes.push_back("the plan must stay defined wherever the reference is: guard the "
                           "division (a count of at least 1), or compute it as the reference "
                           "does");
      return op;
    }
  }
  return nullptr;
}

/// A draw that does not draw what the reference draws (RngCheck, violations from
/// `firstRng` on) is also where the outputs it feeds go wrong: one violation at the
/// op, with the RNG check's explanation and the outputs' counterexample.
void Engine::mergeDrawViolations(size_t firstRng) {
  std::vector<Violation> &vs = result.violations;
  for (size_t i = firstRng; i < vs.size(); ++i)
    for (size_t j = 0; j < firstRng && j < vs.size(); ++j) {
      if (vs[j].at != vs[i].at || vs[j].at.empty() || vs[j].location.str() != vs[i].location.str())
        continue;
      Violation &rng = vs[i];
      rng.value = vs[j].value;
      rng.ranks = vs[j].ranks;
      rng.hasCounterexample = vs[j].hasCounterexample;
      rng.counterexample = vs[j].counterexample;
      rng.locatedNotes.insert(rng.locatedNotes.end(), vs[j].locatedNotes.begin(),
                              vs[j].locatedNotes.end());
      vs.erase(vs.begin() + j);
      --firstRng;
      --i;
      break;
    }
}

/// For a grad-norm violation: how many times the plan's squared norm counts each
/// parameter's sum of squares. The reference's norm is sqrt(S_1 + ... + S_n), one S_p
/// per parameter; the plan's squared norm (the operand of its sqrt) is fitted as
/// sum_p c_p S_p on random evaluations, and parameters with c_p != 1 are named.
void Engine::attributeGradNorm() {
  Violation *target = nullptr;
  for (Violation &v : result.violations)
    if (v.kind == "grad-norm")
      target = &v;
  if (!target)
    return;
  Value refTotal, planTotal;
  spec.reference.walk([&](ref::SqrtOp op) {
    if (!refTotal)
      refTotal = op.getInput();
  });
  spec.plan.walk([&](ref::SqrtOp op) {
    if (!planTotal)
      planTotal = op.getInput();
  });
  if (!refTotal || !planTotal || !refTrace.values.count(refTotal) || !planTrace.values.count(planTotal))
    return;
  // The terms of the reference's sum: the leaves of its tree of ref.add.
  std::vector<Value> terms, stack{refTotal};
  while (!stack.empty()) {
    Value v = stack.back();
    stack.pop_back();
    if (auto add = v.getDefiningOp<ref::AddOp>()) {
      stack.push_back(add.getRhs());
      stack.push_back(add.getLhs());
    } else {
      terms.push_back(v);
    }
  }
  auto paramName = [&](Value term) {
    // sum(g * g) names the gradient g; a derived gradient d(%w).k names parameter %w.
    std::string n = spec.nameOf(term);
    if (auto r = term.getDefiningOp<ref::ReduceSumOp>())
      if (auto m = r.getInput().getDefiningOp<ref::MulOp>())
        if (m.getLhs() == m.getRhs()) {
          auto g = spec.gradientOf.find(m.getLhs());
          if (g != spec.gradientOf.end())
            return g->second;
          n = spec.nameOf(m.getLhs());
        }
    if (n.rfind("%d(", 0) == 0 && n.find(')') != std::string::npos)
      return n.substr(3, n.find(')') - 3);
    return n;
  };
  size_t n = terms.size(), samples = n + 4;
  if (n == 0 || n > 64)
    return;
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> dist(0.5, 1.5);
  Evaluator eval(pool);
  std::vector<std::string> perRank;
  std::string first;
  bool uniform = true;
  for (int64_t r = 0; r < mesh.numRanks(); ++r) {
    std::vector<std::vector<double>> A(samples, std::vector<double>(n));
    std::vector<double> y(samples);
    std::vector<double> point(pool.numInputs());
    for (size_t k = 0; k < samples; ++k) {
      for (double &x : point)
        x = dist(rng);
      eval.reset(point);
      for (size_t p = 0; p < n; ++p)
        A[k][p] = eval.poly(refTrace.values[terms[p]].data[0]);
      y[k] = eval.poly(planTrace.values[planTotal][r].data[0]);
    }
    // Least squares through the normal equations (n is small).
    std::vector<std::vector<double>> M(n, std::vector<double>(n + 1, 0));
    for (size_t k = 0; k < samples; ++k)
      for (size_t i = 0; i < n; ++i) {
        for (size_t j = 0; j < n; ++j)
          M[i][j] += A[k][i] * A[k][j];
        M[i][n] += A[k][i] * y[k];
      }
    bool ok = true;
    for (size_t i = 0; i < n && ok; ++i) {
      size_t piv = i;
      for (size_t j = i + 1; j < n; ++j)
        if (std::fabs(M[j][i]) > std::fabs(M[piv][i]))
          piv = j;
      std::swap(M[i], M[piv]);
      if (std::fabs(M[i][i]) < 1e-12) {
        ok = false;
        break;
      }
      for (size_t j = 0; j < n; ++j)
        if (j != i) {
          double f = M[j][i] / M[i][i];
          for (size_t c = i; c <= n; ++c)
            M[j][c] -= f * M[i][c];
        }
    }
    std::vector<double> c(n);
    for (size_t i = 0; ok && i < n; ++i)
      c[i] = M[i][n] / M[i][i];
    double worst = 0;
    for (size_t k = 0; ok && k < samples; ++k) {
      double fit = 0;
      for (size_t p = 0; p < n; ++p)
        fit += c[p] * A[k][p];
      worst = std::max(worst, std::fabs(fit - y[k]) / std::max(1.0, std::fabs(y[k])));
    }
    std::string line;
    if (!ok || worst > 1e-6) {
      line = "is not a whole-parameter sum of squares (a rank-local or partial norm)";
    } else {
      for (size_t p = 0; p < n; ++p) {
        double rounded = std::round(c[p] * 1000) / 1000;
        if (std::fabs(rounded - 1) > 1e-6) {
          std::ostringstream os;
          os << rounded;
          line += (line.empty() ? "counts " : ", ") + std::string("`") + paramName(terms[p]) +
                  "` " + os.str() + " times";
        }
      }
      if (line.empty())
        line = "counts every parameter once";
    }
    if (r == 0)
      first = line;
    uniform = uniform && line == first;
    perRank.push_back(mesh.rankStr(r) + " " + line);
  }
  if (uniform)
    target->notes.push_back("gradient norm: the plan's squared norm " + first +
                            " (each parameter must count exactly once)");
  else
    for (const std::string &l : perRank)
      target->notes.push_back("gradient norm on rank " + l);
}

VerifyResult Engine::run() {
  auto start = std::chrono::steady_clock::now();
  started = start;
  result.stats.ranks = mesh.numRanks();
  for (Operation &op : spec.reference.getBody().front())
    result.stats.referenceOps += !isa<func::ReturnOp>(op);
  for (Operation &op : spec.plan.getBody().front())
    result.stats.planOps += !isa<func::ReturnOp>(op);
  if (!spec.undecidable.empty()) {
    result.inconclusiveReasons.push_back({spec.undecidableAt, spec.undecidable});
    result.verdict = Verdict::Inconclusive;
    return std::move(result);
  }
  checkDiscardedCollectives();
  try {
    checkSchedule(spec, result);
    if (!spec.scheduleProblems.empty()) {
      // Messages that do not match leave values undefined: the step's values are
      // checked once the plan's structure is sound.
      result.violations.front().notes.push_back(
          "the step's values are not checked until every message is matched and every value "
          "is used only where it is computed or received");
    } else if (execute()) {
      buildRefValues();
      std::vector<Failure> failures;
      checkOutputs(failures);
      if (options.verdictOnly && !failures.empty()) {
        reportUnlocalized(failures.front());
        throw VerdictKnown();
      }
      checkCoverage();
      localize(failures);
      attributeGradNorm();
      // A culprit that reads the operand of a discarded collective: say where its
      // result went.
      for (Violation &v : result.violations)
        for (const Violation &w : result.warnings) {
          if (v.at.empty() || w.message.find("`" + v.at + "`") == std::string::npos ||
              w.message.find("read") == std::string::npos)
            continue;
          v.notes.push_back("the collective `" + w.at + "` (" + w.location.str() +
                            ") computes what this op needs, and its result is never used: " +
                            "read `" + w.at + "` here");
          discardedFix(v, w);
        }
      if (spec.rngIndependent && options.onlyOutputs.empty()) {
        size_t before = result.violations.size();
        options.deadline.check("checking random streams");
        checkRandomStreams(spec, options.deadline.cap(options.solverTimeoutMs), result);
        mergeDrawViolations(before);
      }
      if ((spec.resume || !saved.entries.empty()) && options.onlyOutputs.empty())
        checkCheckpoint();
      checkFixes();
    }
  } catch (const VerdictKnown &) {
  } catch (const NumericLimit &e) {
    result.inconclusiveReasons.push_back({toSourceLoc(spec.plan.getLoc()), e.what()});
  } catch (const TimeLimit &e) {
    std::string wrong;
    if (result.violations.empty())
      for (size_t i = 0; i < confirmedWrong.size() && i < 4; ++i)
        wrong += (wrong.empty() ? "" : ", ") + confirmedWrong[i];
    result.inconclusiveReasons.push_back(
        {toSourceLoc(spec.plan.getLoc()),
         std::string(e.what()) +
             (wrong.empty() ? "" : "; the plan already differs from the reference at " + wrong +
                                       " (confirmed exactly), but the culprit was not located "
                                       "in time")});
  } catch (const std::exception &e) {
    result.inconclusiveReasons.push_back(
        {toSourceLoc(spec.plan.getLoc()), std::string("internal error: ") + e.what()});
  }
  result.stats.expressions = pool.numPolys();
  result.stats.expressionTerms = pool.numTerms();
  // No vacuous proofs: a spec whose plan returns nothing to compare proves nothing.
  if (result.violations.empty() && result.inconclusiveReasons.empty() &&
      result.stats.obligations == 0)
    result.inconclusiveReasons.push_back(
        {toSourceLoc(spec.plan.getLoc()),
         "nothing to check: the plan returns no value that holds an element of a reference "
         "output, so there is no equality to prove"});
  if (!result.violations.empty())
    result.verdict = Verdict::Violated;
  else if (!result.inconclusiveReasons.empty())
    result.verdict = Verdict::Inconclusive;
  else
    result.verdict = Verdict::Verified;
  result.stats.milliseconds =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return std::move(result);
}

} // namespace

/// A checkpoint spec (docs/checkpoint.md): what the plan saved is the state the
/// reference step returns (reshard identity), every element of every state is saved
/// (completeness), and the resuming plan, on its own mesh, reading the checkpoint and
/// the next batch, computes what a second reference step computes (resume equivalence).
void Engine::checkCheckpoint() {
  auto violation = [&](Operation *at, const std::string &message, const std::string &hint) {
    Violation v;
    v.kind = "checkpoint";
    v.location = toSourceLoc(at->getLoc());
    v.at = at->getNumResults() ? opName(at) : "";
    v.message = message;
    v.hint = hint;
    result.violations.push_back(std::move(v));
    return &result.violations.back();
  };
  auto elem = [](const std::string &key, const std::vector<int64_t> &idx) {
    return key + (idx.empty() ? "" : indexStr(idx));
  };
  std::set<std::pair<Operation *, int>> reported;
  for (const CheckpointEvent &e : saved.events) {
    if (!reported.insert({e.op, (int)e.kind}).second)
      continue;
    if (e.kind == CheckpointEvent::Conflict)
      violation(e.op, "ranks " + mesh.rankStr(e.otherRank) + " and " + mesh.rankStr(e.rank) +
                          " write different values to checkpoint element " + elem(e.key, e.index),
                "each element must be saved by the rank that owns it, at its global offset");
    else if (e.kind == CheckpointEvent::DroppedReplica)
      violation(e.op, "rank " + mesh.rankStr(e.rank) + " does not save its '" + e.key +
                          "', relying on " + mesh.rankStr(e.otherRank) +
                          ", which holds a different value: this rank's state is lost",
                "state that differs between ranks (per-rank random streams, data positions) "
                "must be saved by every rank, at its own place in the entry");
    else
      violation(e.op, "rank " + mesh.rankStr(e.rank) + " writes a piece of '" + e.key +
                          "' outside the entry (offsets " + indexStr(e.index) + ")",
                "compute the offsets from the rank's position in the unpadded global buffer");
  }
  // The state: every reference input that an output updates, plus the inputs saved as is.
  std::map<std::string, std::string> updaterOf;
  for (auto &[out, in] : spec.stateUpdates)
    updaterOf[in] = out;
  std::map<std::string, SymTensor> next;
  for (const std::string &in : spec.refInputs) {
    auto u = updaterOf.find(in);
    if (u != updaterOf.end())
      next[in] = refTrace.byName.at(u->second);
  }
  for (auto &[in, value] : next) {
    auto it = saved.entries.find(in);
    const std::string &out = updaterOf[in];
    if (it == saved.entries.end()) {
      violation(spec.plan, "the checkpoint does not contain '" + in + "' (the step's `" + out +
                               "`), which the next step reads",
                "save '" + in + "' with dist.save from every rank that owns a piece of it");
      continue;
    }
    CheckpointEntry &e = it->second;
    if (e.shape != value.shape) {
      violation(e.writerOp[0] ? e.writerOp[0] : spec.plan.getOperation(),
                "checkpoint entry '" + in + "' has shape " + indexStr(e.shape) + " but `" + out +
                    "` has shape " + indexStr(value.shape),
                "save the unpadded global value");
      continue;
    }
    std::vector<int64_t> missing;
    int64_t firstWrong = -1;
    for (int64_t l = 0; l < (int64_t)e.values.size(); ++l) {
      if (e.writer[l] < 0)
        missing.push_back(l);
      else if (firstWrong < 0 && e.values[l] != value.data[l]) {
        options.deadline.check("checking the checkpoint");
        Decision dec = decideEqual(pool, e.values[l], value.data[l],
                                   options.deadline.cap(options.solverTimeoutMs));
        if (dec.result == Equality::Unequal)
          firstWrong = l;
        else if (dec.result == Equality::Unknown)
          result.inconclusiveReasons.push_back(
              {toSourceLoc(e.writerOp[l]->getLoc()),
               "checkpoint element " + elem(in, unravelIndex(e.shape, l)) + ": " + dec.reason});
      }
    }
    if (!missing.empty()) {
      // Which ranks hold the missing elements in the saving plan's own result.
      std::string holders;
      for (const Binding &b : spec.planOutputs)
        if (b.refName == out && !b.localShape.empty()) {
          std::set<int64_t> ranks;
          for (int64_t r = 0; r < mesh.numRanks(); ++r)
            for (int64_t l = 0; l < numElements(b.localShape); ++l) {
              auto g = b.layout.globalIndex(mesh, r, b.localShape, unravelIndex(b.localShape, l));
              if (Layout::inBounds(g, value.shape) &&
                  linearIndex(value.shape, g) == missing[0])
                ranks.insert(r);
            }
          for (int64_t r : ranks)
            holders += (holders.empty() ? "" : ", ") + mesh.rankStr(r);
        }
      Operation *at = spec.plan;
      for (Operation *w : e.writerOp)
        if (w) {
          at = w;
          break;
        }
      Violation *v = violation(at, "checkpoint incomplete: " + std::to_string(missing.size()) +
                                       " of " + std::to_string(e.values.size()) +
                                       " elements of '" + in + "' are never saved, first " +
                                       elem(in, unravelIndex(e.shape, missing[0])) +
                                       (holders.empty() ? "" : " (held by " + holders + ")"),
                               "every rank that owns a piece of '" + in + "' must save it "
                               "(no rank-0-only saves of sharded state)");
      if (!holders.empty())
        v->ranks.push_back(holders);
    }
    if (firstWrong >= 0)
      violation(e.writerOp[firstWrong],
                "checkpoint element " + elem(in, unravelIndex(e.shape, firstWrong)) +
                    " is not the step's `" + out + "`" +
                    indexStr(unravelIndex(e.shape, firstWrong)) + " (saved by " +
                    mesh.rankStr(e.writer[firstWrong]) + ")",
                "save each rank's piece at the global offset of its first element");
  }
  if (!spec.resume)
    return;
  // Resume equivalence: the resuming plan on its mesh, from the checkpoint, against a
  // second reference step from the first step's state and a fresh batch.
  Spec view = spec.resumeStep();
  // State handed to the resuming plan as an argument is what the job was started with:
  // after a restart, only the checkpoint carries the state on.
  std::map<std::string, SymTensor> restart;
  for (const Binding &b : spec.resumeInputs) {
    if (!updaterOf.count(b.refName))
      continue;
    restart[b.refName] = refTrace.byName.at(b.refName);
    if (spec.resume.getArgument(b.index).use_empty())
      continue;
    Violation *v = violation(spec.resume.getOperation(), "the resuming plan takes `" + b.refName + "` (state the step updates, `" +
                                 updaterOf[b.refName] + "`) as argument #" + std::to_string(b.index) +
                                 ": after a restart that is the value the job was started with, "
                                 "not the state the checkpoint saved",
                             "load '" + b.refName + "' from the checkpoint with dist.load");
    v->location = toSourceLoc(b.loc);
    v->value = b.refName;
  }
  Engine step2(view, options, &pool);
  step2.resumeFrom(&next, "@2", &saved, &restart);
  VerifyResult r2 = step2.run();
  // Saved state the resuming plan never reads back is lost across the restart (a data
  // loader position, a sampler epoch): the resumed job does not continue from it.
  for (auto &[key, e] : saved.entries) {
    int64_t unread = 0, written = 0, first = -1;
    for (int64_t l = 0; l < (int64_t)e.read.size(); ++l) {
      written += e.writer[l] >= 0;
      if (!e.read[l] && e.writer[l] >= 0) {
        ++unread;
        if (first < 0)
          first = l;
      }
    }
    if (first < 0)
      continue;
    Operation *at = e.writerOp[first] ? e.writerOp[first] : spec.plan.getOperation();
    violation(at, unread == written
                      ? "checkpoint entry '" + key + "' is saved but the resuming plan never "
                        "reads it back: the resumed job does not continue from it"
                      : std::to_string(unread) + " of " + std::to_string(written) +
                            " elements of checkpoint entry '" + key +
                            "' are never read back by the resuming plan, first " +
                            elem(key, unravelIndex(e.shape, first)) + ": that state is lost",
              "load '" + key + "' with dist.load in the resuming plan, every piece of it on "
              "the rank that needs it");
  }
  std::set<Operation *> unsavedReported;
  for (const CheckpointEvent &e : saved.events)
    if (e.kind == CheckpointEvent::Unsaved && unsavedReported.insert(e.op).second) {
      Violation *v = violation(e.op, "rank " + spec.resumeMesh.rankStr(e.rank) + " of the "
                                     "resuming plan reads " + elem(e.key, e.index) +
                                     ", which the checkpoint does not contain",
                               "save every piece the resuming plan reads");
      v->at = opName(e.op);
    }
  for (Violation &v : r2.violations) {
    v.notes.insert(v.notes.begin(), "in the resumed step (plan `@" + spec.resume.getName().str() +
                                        "` on mesh " + spec.resumeMesh.name + ")");
    result.violations.push_back(std::move(v));
  }
  for (auto &reason : r2.inconclusiveReasons)
    result.inconclusiveReasons.push_back(reason);
  result.stats.obligations += r2.stats.obligations;
  result.stats.decidedCanonical += r2.stats.decidedCanonical;
  result.stats.solverQueries += r2.stats.solverQueries;
}

std::vector<PlanValueRelation> planproof::relatePlanValues(const Spec &spec, std::string &why) {
  return Engine(spec, VerifyOptions()).relateAll(why);
}

VerifyResult planproof::verifySpec(const Spec &spec, const VerifyOptions &options) {
  return Engine(spec, options).run();
}
