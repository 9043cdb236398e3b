//===- Obligations.cpp - equality obligations and coverage ------*- C++ -*-===//
//
// Engine (Engine.h): one equality obligation per plan output element (gathered through its
// layout), decided in parallel waves; the coverage of reference outputs.
//
//===----------------------------------------------------------------------===//
#include "Engine/Engine.h"
#include "Support/Progress.h"

#include <mutex>
#include <optional>

using namespace planproof;

namespace planproof::engine {

/// Every output element's obligation that canonical forms do not settle, per output in
/// element order (padding and equal canonical forms counted, not kept).
std::vector<std::vector<Engine::Obligation>> Engine::openObligations() {
  auto ret = cast<func::ReturnOp>(spec.plan.getBody().front().getTerminator());
  std::vector<std::vector<Obligation>> pending; // per output, in element order
  for (const Binding &b : spec.planOutputs) {
    if (!options.onlyOutputs.empty() && !options.onlyOutputs.count(b.refName))
      continue;
    const std::vector<SymTensor> &perRank = planTrace.values[ret.getOperand(b.index)];
    const SymTensor &ref = refTrace.byName.at(b.refName);
    std::vector<Obligation> todo;
    bool supported = true;
    for (int64_t r = 0; r < mesh.numRanks() && supported; ++r) {
      if (!isGroupLeader(mesh, b.layout, r) || !spec.onStage(r, b.stage))
        continue;
      for (int64_t l = 0; l < (int64_t)perRank[r].data.size(); ++l) {
        PolyId got;
        if (!gatherElement(pool, mesh, b.layout, perRank, r, l, got)) {
          unsettledOutputs.insert(b.refName);
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
  return pending;
}

/// Gathers every output element and compares it with the reference. Equal canonical
/// forms are settled at once; the rest are decided in waves -- the next undecided
/// element of every output at a time -- with the decisions of one wave running in
/// parallel threads (they only read the expression pool).
void Engine::checkOutputs(std::vector<FailedObligation> &failures) {
  using Pending = Obligation;
  std::vector<std::vector<Pending>> pending = openObligations();
  std::vector<size_t> next(pending.size(), 0);
  std::vector<bool> done(pending.size(), false);
  unsigned threads = std::max(1u, options.threads);
  // Z3's work on this run's obligations so far, summed wave by wave in obligation order
  // (a wave's budget depends on the waves before it only, never on the threads).
  uint64_t spentWork = 0;
  // The progress line's count: every obligation, those settled by canonical forms done.
  int64_t decided = result.stats.obligations;
  for (const std::vector<Pending> &p : pending)
    decided -= (int64_t)p.size();
  while (true) {
    // Outputs with an element to decide now: every output's next one, or, when only
    // the verdict is wanted, as many as there are threads -- the first difference ends
    // the run, and on a deep model each decision can take seconds.
    std::vector<size_t> wave;
    for (size_t o = 0; o < pending.size(); ++o)
      if (!done[o] && next[o] < pending[o].size() &&
          (!options.verdictOnly || wave.size() < threads))
        wave.push_back(o);
    if (wave.empty())
      break;
    options.deadline.check("deciding obligations");
    Progress::count("deciding obligations", decided, result.stats.obligations);
    decided += (int64_t)wave.size();
    // The memoized expression flags are filled here, so the threads only read.
    for (size_t o : wave) {
      const Pending &p = pending[o][next[o]];
      pool.hasLatticeAtoms(p.got);
      pool.hasLatticeAtoms(p.want);
    }
    std::vector<Decision> decisions(wave.size());
    std::atomic<size_t> cursor{0};
    SolverBudget budget{spentWork > options.decisionBudget()
                            ? std::max<uint64_t>(1, options.solverBudget / 100)
                            : options.solverBudget,
                        &options.deadline};
    result.stats.solverBudget = std::max(result.stats.solverBudget, budget.rlimit);
    // The run's time limit reached inside a worker: rethrown here, after the join.
    std::optional<TimeLimit> stopped;
    std::mutex stoppedLock;
    auto work = [&] {
      for (size_t i; (i = cursor++) < wave.size();) {
        const Pending &p = pending[wave[i]][next[wave[i]]];
        // Nothing may escape a worker thread: a failure is an undecided obligation.
        try {
          decisions[i] = decideEqual(pool, p.got, p.want, budget, !options.verdictOnly);
        } catch (const TimeLimit &e) {
          std::lock_guard<std::mutex> lock(stoppedLock);
          stopped.emplace(e);
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
    if (stopped)
      throw *stopped;
    for (size_t i = 0; i < wave.size(); ++i) {
      size_t o = wave[i];
      Pending &p = pending[o][next[o]++];
      Decision &d = decisions[i];
      spentWork += d.solverWork;
      result.stats.noteSolverWork(d.solverWork);
      if (d.usedSolver)
        ++result.stats.solverQueries;
      if (d.result == Equality::Unknown && d.solverWork >= budget.rlimit)
        ++result.stats.solverLimited;
      if (d.byCanonicalForm)
        ++result.stats.decidedCanonical;
      if (d.result == Equality::Equal)
        continue;
      unsettledOutputs.insert(p.b->refName);
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
    if (options.proofOnly && !result.inconclusiveReasons.empty())
      break;
  }
}

void Engine::checkCoverage() {
  if (!options.onlyOutputs.empty())
    return;
  std::vector<Violation> missing = missingOutputs(spec);
  result.violations.insert(result.violations.end(), missing.begin(), missing.end());
}

} // namespace planproof::engine

/// Every reference output must be returned by the plan: a structural fact both engines
/// check (a `dataflow` violation, located at the plan).
std::vector<Violation> planproof::missingOutputs(const Spec &spec) {
  std::vector<Violation> out;
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
    out.push_back(std::move(v));
  }
  return out;
}
