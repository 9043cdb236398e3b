//===- Verifier.cpp - deciding a spec: the phases of a run -----*- C++ -*-===//
//
// Orchestrates the element engine (Engine.h): symbolic execution of both programs, then
// the phases of a run -- obligations, coverage, localization, gradient norm, random
// streams, checkpoints, fix hints -- each in a file of its own, and the verdict.
//
//===----------------------------------------------------------------------===//
#include "Engine/Engine.h"

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

namespace planproof::engine {

bool Engine::execute() {
  RunFailure failure{"", spec.plan.getLoc()};
  bool referenceRan = elementCache && !stepInputs
                          ? runReferenceCached(failure)
                          : runReference(spec, pool, refTrace, failure, stepInputs, stepSuffix,
                                         options.deadline);
  if (!referenceRan ||
      !runPlan(spec, pool, refTrace, planTrace, failure, &saved, loadFrom, options.deadline,
               restartArguments)) {
    result.inconclusiveReasons.push_back({toSourceLoc(failure.loc), failure.why});
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
    auto r = roleOf.find(v);
    refValues.push_back({name, &refTrace.values[v], r != roleOf.end() && !r->second.empty()});
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
  // Microbatches of a whole (replicated) batch: pipelined plans, and plans that cut
  // gathered token ids (ids have no other dimension to cut: a slice of them is a
  // microbatch).
  finder->replicatedTiles = spec.pipelineAxis >= 0;
  spec.plan.walk([&](ref::SliceOp op) {
    finder->replicatedTiles |= cast<RankedTensorType>(op.getInput().getType()).getElementType().isInteger(64);
  });
  // Load-balanced context parallelism: a zigzag layout or collective anywhere.
  for (const Binding &b : spec.planInputs)
    finder->zigzagCandidates |= b.layout.anyZigzag();
  for (const Binding &b : spec.planOutputs)
    finder->zigzagCandidates |= b.layout.anyZigzag();
  spec.plan.walk([&](Operation *op) { finder->zigzagCandidates |= op->hasAttr("zigzag"); });
  // Exchanges along one dimension: their results are interleaved layouts.
  spec.plan.walk([&](dist::AllToAllOp op) {
    std::vector<int> axes = collectiveAxes(op, mesh);
    int64_t n = mesh.groupSize(axes);
    if (op.getSplitDim() == op.getConcatDim() && n > 1 &&
        !llvm::is_contained(finder->segmentCandidates, n))
      finder->segmentCandidates.push_back(n);
  });
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

VerifyResult Engine::run() {
  auto start = std::chrono::steady_clock::now();
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
      std::vector<FailedObligation> failures;
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
        checkRandomStreams(spec, SolverBudget{options.solverBudget, &options.deadline}, result);
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
         kNothingToCheck});
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

} // namespace planproof::engine

std::vector<PlanValueRelation> planproof::relatePlanValues(const Spec &spec, std::string &why) {
  return engine::Engine(spec, VerifyOptions()).relateAll(why);
}

VerifyResult planproof::verifySpec(const Spec &spec, const VerifyOptions &options) {
  return engine::Engine(spec, options).run();
}
