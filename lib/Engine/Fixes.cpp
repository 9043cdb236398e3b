//===- Fixes.cpp - fix hints, each re-verified ------------------*- C++ -*-===//
//
// Engine (Engine.h): fix hints (lib/Engine/PlanEdit.h), each shown only once re-verifying the
// edited plan removes the violation; discarded collectives.
//
//===----------------------------------------------------------------------===//
#include "Engine/Engine.h"
#include "Support/Progress.h"

using namespace planproof;
using mlir::Operation;
using mlir::Value;
using llvm::dyn_cast;

namespace planproof::engine {

void Engine::checkDiscardedCollectives() {
  std::vector<Violation> found = discardedCollectives(spec);
  result.warnings.insert(result.warnings.end(), found.begin(), found.end());
}

} // namespace planproof::engine

/// A collective whose result is never used: the communication happens and its result is
/// dropped, which is almost always a plan that reads the unreduced operand where it
/// meant the result. Reported as a warning by both engines (a structural fact of the
/// plan); where a violation's culprit reads that operand, the violation says so.
std::vector<Violation> planproof::discardedCollectives(const Spec &spec) {
  std::vector<Violation> out;
  auto nameOf = [&](Operation *op) {
    return op->getNumResults() ? spec.nameOf(op->getResult(0)) : std::string();
  };
  for (Operation *op : spec.planOps()) {
    auto collective = dyn_cast<dist::CollectiveOp>(op);
    if (!collective || !collective.communicates() || !op->getResult(0).use_empty())
      continue;
    Value operand = op->getOperand(0);
    std::string readers;
    for (Operation *user : operand.getUsers())
      if (user != op && user->getNumResults() && readers.size() < 200)
        readers += (readers.empty() ? "" : ", ") + std::string("`") + nameOf(user) + "`";
    Violation w;
    w.kind = collective.getReduction() ? "reduction" : "sharding";
    w.location = toSourceLoc(op->getLoc());
    w.at = nameOf(op);
    w.message = "the result of `" + nameOf(op) + "` = " + op->getName().getStringRef().str() +
                " of `" + spec.nameOf(operand) + "` is never used: a collective whose result "
                "is discarded is almost always a bug" +
                (readers.empty() ? "" : " (" + readers + " read" + (readers.find(',') == std::string::npos ? "s" : "") +
                                            " the operand `" + spec.nameOf(operand) + "` instead)");
    out.push_back(std::move(w));
  }
  return out;
}

namespace planproof::engine {

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
/// which is verified again on the outputs the violation is about and on every output
/// this run proved; the hint stays only if they are all then right (a fix that mends
/// one output by breaking another -- rescaling a loss that other gradients also read --
/// is no fix). Hints without an edit, or past the checks' counted budget, are dropped.
void Engine::checkFixes() {
  Progress::Context context("checking fix hints");
  int checked = 0;
  // Counted, like every budget that shapes a report: a hint's re-verification is a
  // symbolic execution of the edited plan, whose size is its expression terms.
  fixTermsLeft = 3 * (int64_t)pool.numTerms() + 1'000'000;
  fixSolverLeft = options.decisionBudget();
  for (Violation &v : result.violations) {
    if (v.hint.empty())
      continue;
    bool keep = false, refuted = false;
    if (v.fix && options.checkFixes && checked < kMaxFixChecks && !fixesStoppedByTime) {
      ++checked;
      fixUndecided = false;
      try {
        keep = checkFix(v);
        refuted = !keep && !fixUndecided;
      } catch (const TimeLimit &) {
        keep = false;
        fixesStoppedByTime = true;
        v.notes.push_back("its fix hint was not checked: the run's time limit (--time-limit) "
                          "was reached while checking it");
      }
    }
    if (!keep) {
      v.hint.clear();
      v.fix.reset();
      // A claim that rested on its fix, which re-verifying refuted (the edited plan is
      // violated, not merely undecided): the walk's own culprit instead.
      if (v.fallback && refuted) {
        const Violation &alt = *v.fallback;
        v.kind = alt.kind;
        v.message = alt.message;
        v.location = alt.location;
        v.at = alt.at;
        v.notes = alt.notes;
        v.pictures = alt.pictures;
      }
    }
    v.fallback.reset();
  }
}

/// Whether applying `v.fix` to a copy of the spec makes the outputs `v` is about right
/// and keeps every output this run proved right.
bool Engine::fixRemoves(const Violation &v) {
  // Every way out but a verdict leaves the fix undecided (sticky over checkFix's tries).
  bool undecidedBefore = fixUndecided;
  fixUndecided = true;
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
  // Then every output this run proved (below, once the violation's outputs are right).
  std::set<std::string> proven;
  for (const Binding &b : spec.planOutputs)
    if (!unsettledOutputs.count(b.refName) && !outputs.count(b.refName))
      proven.insert(b.refName);
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
  std::string why;
  Diagnostics errors;
  if (edited.modules.empty() || !v.fix->apply(PlanEdit::Where{*spec.writtenMap, map}, mesh, why))
    return false;
  // The copy is checked like any spec; its errors (an edit that does not fit) are not
  // shown, they only mean the hint is not confirmed.
  ScopedDiagnosticHandler quiet(spec.plan->getContext(), [](mlir::Diagnostic &) { return success(); });
  for (auto &m : edited.modules)
    if (failed(mlir::verify(*m)))
      return false;
  if (!analyzeSpec(edited, errors))
    return false;
  // Two passes: the violation's outputs (where most candidate edits already fail,
  // cheaply), then the outputs the edit must not break.
  for (const std::set<std::string> *only : {&outputs, &proven}) {
    if (only->empty())
      continue;
    VerifyOptions o = options;
    o.checkFixes = false;
    o.onlyOutputs = *only;
    o.verdictOnly = true;
    o.proofOnly = true;
    if (fixTermsLeft <= 0 || fixSolverLeft == 0)
      return false;
    o.decisionQueries = (fixSolverLeft + o.solverBudget - 1) / o.solverBudget;
    // The run's own deadline stays the outer bound; a TimeLimit ends the checks.
    VerifyResult again = verifySpec(edited, o);
    ++result.stats.fixChecks;
    fixTermsLeft -= again.stats.expressionTerms;
    fixSolverLeft -= std::min(fixSolverLeft, again.stats.solverWork);
    Verdict verdict = again.verdict;
    if (verdict == Verdict::Inconclusive && options.deadline.expired())
      throw TimeLimit("checking fix hints", options.deadline.limitSeconds(),
                      options.deadline.interrupted());
    if (verdict != Verdict::Verified) {
      if (verdict == Verdict::Violated)
        fixUndecided = undecidedBefore;
      return false;
    }
  }
  fixUndecided = undecidedBefore;
  return true;
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
      // Like ops expanded from this op of a called function are the one op written
      // there: one edit fixes them all.
      std::string here = toSourceLoc(v.fix->op->getLoc()).str(), others;
      auto function = spec.functionAt.find(here);
      int copies = 1;
      for (Operation *o : wider->alike) {
        if (!spec.writtenMap->lookupOrNull(o))
          continue;
        if (function != spec.functionAt.end() && toSourceLoc(o->getLoc()).str() == here)
          ++copies;
        else
          others += (others.empty() ? "`" : ", `") + opName(o) + "`";
      }
      if (copies > 1)
        v.hint += " of " + function->second + " (one edit: each of its " +
                  std::to_string(copies) + " calls runs it)";
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

} // namespace planproof::engine
