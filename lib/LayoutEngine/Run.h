//===- Run.h - one run of the layout engine (internal) ----------*- C++ -*-===//
//
// Internal to lib/LayoutEngine: the reference run over terms, the plan run over
// states, the outputs' comparison (LayoutEngine.cpp), kept calls (Calls.h) and
// checkpoints (Checkpoints.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef PLANPROOF_LAYOUTENGINE_RUN_H
#define PLANPROOF_LAYOUTENGINE_RUN_H

#include "LayoutEngine/Calls.h"
#include "LayoutEngine/LayoutEngine.h"
#include "LayoutEngine/LayoutState.h"

#include "llvm/ADT/DenseSet.h"

#include <map>
#include <set>

namespace planproof::layouts {

using mlir::Operation;
using mlir::Value;

class Run {
public:
  Run(const Spec &spec, const VerifyOptions &options, TermPool &terms)
      : spec(spec), options(options), terms(terms), ctx{spec.mesh, terms},
        calls(ctx, options.deadline) {
    terms.setContext(spec.reference->getContext());
    ctx.pipelineAxis = spec.pipelineAxis;
    for (const DrawBinding &d : spec.draws) // (one that draws otherwise: RngCheck's)
      if (d.mismatch.empty())
        draws[d.op] = &d;
  }

  void reference(VerifyStats &stats);
  /// The reference's states from `cache`, if it holds this reference's; else runs it
  /// and fills the cache.
  void reference(VerifyStats &stats, LayoutCache::Impl &cache);
  /// The plan, reusing and filling `cache->plan` where given, and re-deriving only
  /// what edits reach where `cache->last` holds a run of this spec.
  void plan(VerifyStats &stats, LayoutCache::Impl *cache);
  /// Keeps this run's plan states in `cache.last` (after a run that completed).
  void keep(LayoutCache::Impl &cache);
  void plan(VerifyStats &stats);
  /// Compares every output (and every extra check); false with the reasons where one
  /// is not shown equal.
  bool outputs(std::vector<std::pair<SourceLoc, std::string>> &reasons, int64_t &checked,
               std::vector<VerifyResult::Departure> &found);

  // Checkpoints (Checkpoints.cpp, docs/checkpoint.md).
  /// A plan value compared like an output: with the reference output `b.refName`
  /// under `b.layout` (a saved piece: its entry's layout read off its offsets).
  struct Check {
    Binding b;
    mlir::Value value;
    std::string label; // "output `x`", "checkpoint entry `m`"
  };
  std::vector<Check> extraChecks;
  /// The reference run as the second step: inputs named in `secondInputs` hold those
  /// states (the first step's outputs for the state it updates); every other input is
  /// a fresh leaf `NAME@2` (the next batch).
  std::map<std::string, State> secondInputs;
  bool secondStep = false;
  /// The resuming plan's loads: each entry's state (the second step's input it
  /// restores), read by dist.load under the layout its offsets give.
  const std::map<std::string, State> *entries = nullptr;
  /// The saving plan's dist.save ops checked: each piece's layout off its offsets,
  /// its value compared with the reference output that updates its entry's input
  /// (extraChecks); `saved` gets each entry's key. False with reasons where a save is
  /// not modelled.
  bool saves(std::set<std::string> &saved, std::vector<std::pair<SourceLoc, std::string>> &reasons);
  const std::vector<State> &outputStates() const { return refOutputs; }
  /// Filled by outputs() when options.proofTrace: each output shown equal, with the
  /// rules of the plan ops on its way and what its comparison used.
  std::vector<VerifyResult::Proof> proof;
  State refInputState(size_t i) { return ref[spec.reference.getArgument(i)]; }

private:
  State bindingState(const Binding &b);
  /// A dist.load's state (entries).
  State loadState(mlir::Operation &op);
  /// The layout of a checkpoint piece of local shape `local` at `offsets` of an entry
  /// of shape `shape`: each dimension's axes read off its offset's rank coefficients.
  bool pieceLayout(mlir::Operation &op, Layout &l, std::string &why);
  /// recv and stage_select (pipelines).
  State route(Operation &op);
  /// Whether `s` is split or summed over the pipeline axis.
  bool overPipeline(const State &s) const;
  std::string describe(const State &s) const {
    return (s.factor.isOne() ? "" : s.factor.str() + " x ") + terms.str(s.term) + " " +
           ctx.show(s);
  }

  /// What an output holding the reference's term differs in: a partial sum never
  /// completed, a sum where none belongs, another split ("" when the terms differ too).
  std::string layoutHint(const State &got, const State &want) const {
    if (got.term != want.term || got.factor != want.factor || !got.partialMax.empty())
      return "";
    std::vector<int> missing, extra;
    for (int a : got.partial)
      if (std::find(want.partial.begin(), want.partial.end(), a) == want.partial.end())
        missing.push_back(a);
    for (int a : want.partial)
      if (std::find(got.partial.begin(), got.partial.end(), a) == got.partial.end())
        extra.push_back(a);
    if (!missing.empty())
      return ": it holds the reference's value but is still a partial sum over " +
             axesText(spec.mesh, missing) + " -- a reduction over " +
             axesText(spec.mesh, missing) + " is missing on its way";
    if (!extra.empty())
      return ": it holds the reference's value complete where the output declares a partial "
             "sum over " + axesText(spec.mesh, extra);
    if (got.split != want.split)
      return ": it holds the reference's value under another split than the output declares";
    return "";
  }

  /// For an op that cannot take a partial sum (operandPartials): where that operand
  /// became one -- back through ops whose result is a partial sum over the same axes
  /// because an input is, to the op that made it (a contraction over split blocks):
  /// the reduction is missing between there and here. "" when not found.
  std::string partialSince(const State &u) {
    Operation *op = u.origin;
    if (!op || u.partialOperand < 0 || u.partialOperand >= (int)op->getNumOperands())
      return "";
    Value v = op->getOperand(u.partialOperand);
    const std::vector<int> axes = planStates[v].partial;
    if (axes.empty())
      return "";
    for (int step = 0; step < 10000; ++step) {
      Operation *def = v.getDefiningOp();
      if (!def || def->getNumResults() != 1)
        return "";
      Value from;
      for (Value in : def->getOperands())
        if (auto it = planStates.find(in); it != planStates.end() && it->second.known &&
                                           it->second.partial == axes) {
          from = in;
          break;
        }
      if (!from)
        return "; it is a partial sum over " + axesText(spec.mesh, axes) + " since `" +
               spec.nameOf(v) + "` = " + opName(*def) + " (line " +
               std::to_string(toSourceLoc(def->getLoc()).line) +
               "), and no reduction over " + axesText(spec.mesh, axes) + " follows";
      v = from;
    }
    return "";
  }

  /// "; they first differ at ..." when the terms differ.
  std::string termDifference(const State &got, const State &want) const {
    std::string d = terms.difference(got.term, want.term);
    if (d.size() > 400)
      d = d.substr(0, 400) + "...";
    return d.empty() ? "" : "; the terms first differ at " + d;
  }

  /// The rules that derived the plan ops `v` depends on, each with its number of ops,
  /// in the order first met from the inputs; `also` added after them.
  std::vector<VerifyResult::ProofRule> rulesOnWay(Value v, const std::vector<std::string> &also);
  /// The rules `rules` holds for the ops `v` depends on, each op once, counted in
  /// `order`.
  static std::vector<VerifyResult::ProofRule>
  rulesOnWay(Value v, const llvm::DenseMap<Operation *, std::vector<std::string>> &rules,
             llvm::ArrayRef<Operation *> order);

  /// Continues `cache.last` where it holds a run of this spec: the ops edited since,
  /// into `dirty`, and the states into planStates. False for a fresh run.
  bool resume(LayoutCache::Impl &cache, llvm::DenseSet<Operation *> &dirty);

  const Spec &spec;
  const VerifyOptions &options;
  TermPool &terms;
  RuleContext ctx;
  /// Kept calls (Spec::keepCalls): applications in the reference, summaries in the plan.
  Calls calls;
  std::string meshKey;
  llvm::DenseMap<Value, State> ref, planStates;
  /// The rules that derived each plan op's states (the proof trace).
  llvm::DenseMap<Operation *, std::vector<std::string>> rulesOf;
  std::vector<Operation *> planOrder; // (rulesOnWay's, made once)
  std::map<Operation *, const DrawBinding *> draws; // independent-mode draws (drawRule)
  std::vector<State> refOutputs;
  /// The named identities of the terms' normal form (Picks.cpp's) each reference op's
  /// term was written with: a proof of an output lists those on the reference output's
  /// way too ("reference: ..."). Most references have none.
  llvm::DenseMap<Operation *, std::vector<std::string>> refIdentities;
  /// Every term the reference computes (for the departure of an output not shown
  /// equal): the run's own, made from `ref` when first needed, or the cache's.
  ReferenceTerms ownRefTerms;
  const ReferenceTerms *refTerms = nullptr;
  const ReferenceTerms &referenceTerms();
};

/// A checkpoint spec: the saving step, its pieces, the resumed step against two
/// reference steps (Checkpoints.cpp); `r.verdict` verified only where every check holds.
void verifyCheckpointByLayouts(const Spec &spec, const VerifyOptions &options, TermPool &terms,
                               VerifyResult &r);

} // namespace planproof::layouts

#endif
