//===- Checkpoint.cpp - checkpoint specs ------------------------*- C++ -*-===//
//
// Engine (Engine.h): checkpoint specs (docs/checkpoint.md): reshard identity, completeness,
// and the resumed step against a second reference step.
//
//===----------------------------------------------------------------------===//
#include "Engine/Engine.h"

using namespace planproof;

namespace planproof::engine {

namespace {
/// A checkpoint entry's element, as written in messages: `key[i, j]`.
std::string checkpointElem(const std::string &key, const std::vector<int64_t> &idx) {
  return key + (idx.empty() ? "" : indexStr(idx));
}
} // namespace

/// A checkpoint spec (docs/checkpoint.md): what the plan saved is the state the
/// reference step returns (reshard identity), every element of every state is saved
/// (completeness), and the resuming plan, on its own mesh, reading the checkpoint and
/// the next batch, computes what a second reference step computes (resume equivalence).
void Engine::checkCheckpoint() {
  checkSavedPieces();
  std::map<std::string, SymTensor> next = checkSavedState();
  if (spec.resume)
    checkResume(next);
}

Violation *Engine::checkpointViolation(Operation *at, const std::string &message,
                                       const std::string &hint) {
  Violation v;
  v.kind = "checkpoint";
  v.location = toSourceLoc(at->getLoc());
  v.at = at->getNumResults() ? opName(at) : "";
  v.message = message;
  v.hint = hint;
  result.violations.push_back(std::move(v));
  return &result.violations.back();
}

/// What the saving plan's ranks wrote: conflicting pieces, replicas that differ but are
/// saved once, pieces outside their entry.
void Engine::checkSavedPieces() {
  std::set<std::pair<Operation *, int>> reported;
  for (const CheckpointEvent &e : saved.events) {
    if (!reported.insert({e.op, (int)e.kind}).second)
      continue;
    if (e.kind == CheckpointEvent::Conflict)
      checkpointViolation(e.op, "ranks " + mesh.rankStr(e.otherRank) + " and " + mesh.rankStr(e.rank) +
                          " write different values to checkpoint element " + checkpointElem(e.key, e.index),
                "each element must be saved by the rank that owns it, at its global offset");
    else if (e.kind == CheckpointEvent::DroppedReplica)
      checkpointViolation(e.op, "rank " + mesh.rankStr(e.rank) + " does not save its '" + e.key +
                          "', relying on " + mesh.rankStr(e.otherRank) +
                          ", which holds a different value: this rank's state is lost",
                "state that differs between ranks (per-rank random streams, data positions) "
                "must be saved by every rank, at its own place in the entry");
    else
      checkpointViolation(e.op, "rank " + mesh.rankStr(e.rank) + " writes a piece of '" + e.key +
                          "' outside the entry (offsets " + indexStr(e.index) + ")",
                "compute the offsets from the rank's position in the unpadded global buffer");
  }
}

/// Reshard identity and completeness: the checkpoint holds the state the reference step
/// returns, every element of it. Returns that state (the next step's inputs).
std::map<std::string, SymTensor> Engine::checkSavedState() {
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
      checkpointViolation(spec.plan, "the checkpoint does not contain '" + in + "' (the step's `" + out +
                               "`), which the next step reads",
                "save '" + in + "' with dist.save from every rank that owns a piece of it");
      continue;
    }
    CheckpointEntry &e = it->second;
    if (e.shape != value.shape) {
      checkpointViolation(e.writerOp[0] ? e.writerOp[0] : spec.plan.getOperation(),
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
                                   SolverBudget{options.solverBudget, &options.deadline});
        result.stats.noteSolverWork(dec.solverWork);
        if (dec.result == Equality::Unequal)
          firstWrong = l;
        else if (dec.result == Equality::Unknown)
          result.inconclusiveReasons.push_back(
              {toSourceLoc(e.writerOp[l]->getLoc()),
               "checkpoint element " + checkpointElem(in, unravelIndex(e.shape, l)) + ": " + dec.reason});
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
      Violation *v = checkpointViolation(at, "checkpoint incomplete: " + std::to_string(missing.size()) +
                                       " of " + std::to_string(e.values.size()) +
                                       " elements of '" + in + "' are never saved, first " +
                                       checkpointElem(in, unravelIndex(e.shape, missing[0])) +
                                       (holders.empty() ? "" : " (held by " + holders + ")"),
                               "every rank that owns a piece of '" + in + "' must save it "
                               "(no rank-0-only saves of sharded state)");
      if (!holders.empty())
        v->ranks.push_back(holders);
    }
    if (firstWrong >= 0)
      checkpointViolation(e.writerOp[firstWrong],
                "checkpoint element " + checkpointElem(in, unravelIndex(e.shape, firstWrong)) +
                    " is not the step's `" + out + "`" +
                    indexStr(unravelIndex(e.shape, firstWrong)) + " (saved by " +
                    mesh.rankStr(e.writer[firstWrong]) + ")",
                "save each rank's piece at the global offset of its first element");
  }
  return next;
}

/// Resume equivalence: the resuming plan on its mesh, from the checkpoint, against a
/// second reference step from the first step's state and a fresh batch.
void Engine::checkResume(const std::map<std::string, SymTensor> &next) {
  std::map<std::string, std::string> updaterOf; // state input -> the output updating it
  for (auto &[out, in] : spec.stateUpdates)
    updaterOf[in] = out;
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
    Violation *v = checkpointViolation(
        spec.resume.getOperation(),
        "the resuming plan takes `" + b.refName + "` (state the step updates, `" +
            updaterOf[b.refName] + "`) as argument #" + std::to_string(b.index) +
            ": after a restart that is the value the job was started with, not the state "
            "the checkpoint saved",
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
    checkpointViolation(at, unread == written
                      ? "checkpoint entry '" + key + "' is saved but the resuming plan never "
                        "reads it back: the resumed job does not continue from it"
                      : std::to_string(unread) + " of " + std::to_string(written) +
                            " elements of checkpoint entry '" + key +
                            "' are never read back by the resuming plan, first " +
                            checkpointElem(key, unravelIndex(e.shape, first)) + ": that state is lost",
              "load '" + key + "' with dist.load in the resuming plan, every piece of it on "
              "the rank that needs it");
  }
  std::set<Operation *> unsavedReported;
  for (const CheckpointEvent &e : saved.events)
    if (e.kind == CheckpointEvent::Unsaved && unsavedReported.insert(e.op).second) {
      Violation *v = checkpointViolation(e.op, "rank " + spec.resumeMesh.rankStr(e.rank) + " of the "
                                     "resuming plan reads " + checkpointElem(e.key, e.index) +
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

} // namespace planproof::engine
