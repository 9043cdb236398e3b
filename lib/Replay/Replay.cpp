//===- Replay.cpp - numeric replay of a spec on the CPU ---------*- C++ -*-===//
#include "Replay/Replay.h"
#include "Replay/ReplayInternal.h"
#include "Interp/Checkpoint.h"
#include "Interp/PlanWalk.h"

#include "Engine/Decide.h"
#include "Engine/Schedule.h"
#include "Engine/Verifier.h"
#include "Semantics/OpSemantics.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

#include <atomic>
#include <chrono>
#include <thread>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>
#include <random>
#include <sstream>

using namespace mlir;
using namespace planproof;
using namespace planproof::replay;

const char *planproof::dtypeName(ReplayDtype d) {
  return d == ReplayDtype::F64 ? "fp64" : d == ReplayDtype::F32 ? "fp32" : "bf16";
}
const char *planproof::backendName(ReplayBackend b) {
  return b == ReplayBackend::Cpu ? "cpu" : b == ReplayBackend::Cuda ? "cuda" : "emulated";
}
const char *planproof::orderName(ReduceOrder o) {
  return o == ReduceOrder::Rank ? "rank" : o == ReduceOrder::Ring ? "ring" : "tree";
}

namespace {

using scalar::roundBf16;

/// A progress line on stderr, shown once a replay has run for two seconds.
struct Progress {
  bool enabled = false;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now(), last;
  std::string phase;
  size_t done = 0, total = 0;
  bool shown = false;
  void begin(std::string p, size_t n) {
    phase = std::move(p);
    done = 0;
    total = n;
  }
  void tick() {
    ++done;
    if (!enabled)
      return;
    auto now = std::chrono::steady_clock::now();
    if (now - start < std::chrono::seconds(2) || now - last < std::chrono::milliseconds(250))
      return;
    last = now;
    shown = true;
    std::fprintf(stderr, "\rreplay: %-28s op %zu/%zu", phase.c_str(), done, total);
    std::fflush(stderr);
  }
  ~Progress() {
    if (shown)
      std::fprintf(stderr, "\n");
  }
};
thread_local Progress *progress = nullptr;
/// The run's time limit (ReplayOptions::deadline), checked at every op.
const Deadline *replayDeadline = nullptr;

void tick() {
  if (progress)
    progress->tick();
  if (replayDeadline)
    replayDeadline->check("the numeric replay");
}
} // namespace
void replay::progressBegin(const std::string &p, size_t ops) {
  if (progress)
    progress->begin(p, ops);
}
void replay::progressTick() { tick(); }
namespace {
void phase(const std::string &p, func::FuncOp f) {
  if (progress)
    progress->begin(p, f.getBody().front().getOperations().size());
}


} // namespace

/// Whether `v` is a constant whose every element is positive (a constant, a literal, or
/// a layout op of one).
static bool positiveConstant(Value v) {
  Operation *def = v.getDefiningOp();
  if (!def)
    return false;
  if (auto c = dyn_cast<ref::ConstantOp>(def))
    return c.getValueAttr().getValueAsDouble() > 0;
  if (auto l = dyn_cast<ref::LiteralOp>(def))
    return !l.getValues().empty() &&
           llvm::all_of(l.getValues(), [](double x) { return x > 0; });
  if (isa<ref::BroadcastOp, ref::ReshapeOp, ref::TransposeOp>(def))
    return positiveConstant(def->getOperand(0));
  return false;
}

/// The reference inputs the replay draws from |N(0, 1)|: those declared nonnegative
/// (`ref.nonnegative`), and those the reference takes a root or a logarithm of through
/// sums, positive scalings and layout ops only -- an optimizer's second moments as a
/// capture writes them, sqrt(b2 v + (1 - b2) g g), undefined at a negative draw. This
/// chooses inputs only; no proof assumes it.
std::vector<bool> replay::drawnNonnegative(const Spec &spec) {
  std::vector<bool> out = spec.refInputNonnegative;
  out.resize(spec.reference.getNumArguments(), false);
  std::vector<Value> work;
  spec.reference.walk([&](Operation *op) {
    if (isa<ref::SqrtOp, ref::RsqrtOp, ref::LogOp>(op))
      work.push_back(op->getOperand(0));
  });
  llvm::DenseSet<Value> seen;
  while (!work.empty()) {
    Value v = work.back();
    work.pop_back();
    if (!seen.insert(v).second)
      continue;
    if (auto arg = dyn_cast<BlockArgument>(v)) {
      if (arg.getOwner()->getParentOp() == spec.reference.getOperation() &&
          arg.getArgNumber() < out.size())
        out[arg.getArgNumber()] = true;
      continue;
    }
    Operation *def = v.getDefiningOp();
    if (isa<ref::AddOp, ref::BroadcastOp, ref::ReshapeOp, ref::TransposeOp, ref::SliceOp>(def)) {
      for (Value o : def->getOperands())
        work.push_back(o);
    } else if (auto s = dyn_cast<ref::ScaleOp>(def)) {
      if (s.getFactorAttr().getValueAsDouble() > 0)
        work.push_back(s->getOperand(0));
    } else if (isa<ref::MulOp>(def) && def->getOperand(0) != def->getOperand(1)) {
      for (unsigned i = 0; i < 2; ++i)
        if (positiveConstant(def->getOperand(1 - i)))
          work.push_back(def->getOperand(i));
    } else if (isa<ref::DivOp>(def) && positiveConstant(def->getOperand(1))) {
      work.push_back(def->getOperand(0));
    }
  }
  return out;
}

namespace {

/// The reference inputs, drawn once from the seed (rounded to the storage precision,
/// since that is what the data is).
std::map<std::string, NumTensor> drawInputs(const Spec &spec, const ReplayOptions &o,
                                            const NumericDomain &d, uint64_t streamBase = 0) {
  std::map<std::string, NumTensor> in;
  std::vector<bool> nonnegative = drawnNonnegative(spec);
  for (unsigned i = 0; i < spec.reference.getNumArguments(); ++i) {
    Type t = spec.reference.getArgument(i).getType();
    Shape shape;
    if (auto r = dyn_cast<RankedTensorType>(t))
      shape.assign(r.getShape().begin(), r.getShape().end());
    NumTensor v(shape, 0.0);
    int64_t bound = t.isIndex() ? 1000 : nonnegative[i] ? -1 : spec.refInputBounds[i];
    auto given = o.given.find(spec.refInputs[i]);
    if (given != o.given.end() && streamBase == 0) {
      for (size_t l = 0; l < v.data.size(); ++l)
        v.data[l] = bound > 0 ? given->second[l] : d.round(given->second[l]);
      in[spec.refInputs[i]] = std::move(v);
      continue;
    }
    // Integer inputs (ids, masks, counters) are exact in any storage.
    parallelChunks((int64_t)v.data.size(), 1 << 16, [&](int64_t begin, int64_t end) {
      for (int64_t l = begin; l < end; ++l)
        v.data[l] = bound > 0 ? scalar::inputValue(o.seed, streamBase + i, l, bound)
                              : d.round(scalar::inputValue(o.seed, streamBase + i, l, bound));
    });
    in[spec.refInputs[i]] = std::move(v);
  }
  return in;
}

} // namespace

/// The checkpoint a saving plan writes and a resuming plan reads, on numbers
/// (Interp/Checkpoint.h; its events are reported as a divergence).
struct replay::NumCheckpoint : CheckpointOf<double> {};

namespace {

/// The replay's elements of a checkpoint: offsets are the index values' numbers;
/// padding and elements never saved are NaN (never compared: an unsaved read is
/// reported from the checkpoint's events).
struct NumericCheckpointElements {
  bool offset(const NumTensor &v, int64_t &out) {
    out = (int64_t)std::llround(v.data[0]);
    return true;
  }
  double fill() { return NAN; }
  double padding(const std::string &, int64_t, int64_t) { return NAN; }
  double unsaved(const std::string &, const std::vector<int64_t> &) { return NAN; }
};

/// The first thing that went wrong saving or loading the checkpoint, in words, and where.
std::optional<std::pair<std::string, Location>> checkpointProblem(const Mesh &mesh,
                                                                  const NumCheckpoint &ckpt) {
  if (ckpt.events.empty())
    return std::nullopt;
  const CheckpointEvent &e = ckpt.events.front();
  std::string what;
  switch (e.kind) {
  case CheckpointEvent::DroppedReplica:
    what = "rank " + mesh.rankStr(e.rank) + " does not save its '" + e.key + "', relying on " +
           mesh.rankStr(e.otherRank) + ", which holds different numbers: this rank's state is lost";
    break;
  case CheckpointEvent::Conflict:
    what = "ranks " + mesh.rankStr(e.otherRank) + " and " + mesh.rankStr(e.rank) +
           " write different numbers to checkpoint element " + e.key + indexStr(e.index);
    break;
  case CheckpointEvent::OutOfRange:
    what = "rank " + mesh.rankStr(e.rank) + " writes a piece of '" + e.key +
           "' outside the entry (offsets " + indexStr(e.index) + ")";
    break;
  case CheckpointEvent::Unsaved:
    what = "rank " + mesh.rankStr(e.rank) + " reads checkpoint element " + e.key +
           indexStr(e.index) + ", which the saving plan never wrote";
    break;
  }
  return std::make_pair(what, e.op->getLoc());
}

} // namespace

/// Independent-mode random streams on numbers: the (key, counter) pairs the plan's
/// masks draw, by the reference element each stands for, checked for properties
/// (1)-(3) of RngCheck.h at this seed, and the reference's mask values to substitute
/// (so the step is compared like any other once its streams are sound).
struct replay::RngRecord {
  const llvm::DenseMap<Value, NumTensor> *reference = nullptr; // null: collect pairs only
  int step = 1;
  struct Draw {
    std::string refName;
    int64_t element;
    int64_t rank;
    int step;
  };
  std::map<std::pair<int64_t, int64_t>, Draw> pairs;
  std::map<std::pair<std::string, int64_t>, std::pair<int64_t, int64_t>> pairOf; // step 1
  std::vector<std::pair<std::string, Location>> problems;
};

namespace {

/// A plan mask op of independent mode on every rank: records its pairs and yields the
/// reference's values.
void independentDraw(const Spec &spec, const DrawBinding &db, Operation &op,
                     llvm::DenseMap<Value, std::vector<NumTensor>> &vals, RngRecord &rng,
                     NumericDomain &d, std::vector<NumTensor> &results) {
  const Mesh &mesh = spec.mesh;
  Shape shape = resultShape(&op);
  auto problem = [&](const std::string &what) {
    if (rng.problems.size() < 8)
      rng.problems.push_back({what, op.getLoc()});
  };
  Shape refShape = cast<RankedTensorType>(db.refMask.getType()).getShape().vec();
  // The reference's values stand for this draw only when it draws the same thing.
  if (!db.mismatch.empty())
    problem("`" + spec.nameOf(op.getResult(0)) + "` " + db.mismatch);
  for (int64_t r = 0; r < mesh.numRanks(); ++r) {
    int64_t key = std::llround(vals[op.getOperand(0)][r].data[0]);
    int64_t counter = std::llround(vals[op.getOperand(1)][r].data[0]);
    NumTensor t(shape, 0.0);
    for (int64_t l = 0; l < numElements(shape); ++l) {
      std::vector<int64_t> local = unravelIndex(shape, l);
      for (size_t k = 0; k < local.size() && k < db.blockOffset.size(); ++k)
        local[k] += db.blockOffset[k];
      std::vector<int64_t> g = db.layout.globalIndex(mesh, r, db.blockShape, local);
      int64_t at = linearIndex(refShape, g);
      std::pair<int64_t, int64_t> pair{key, counter + l};
      std::string elem = db.refName + indexStr(g);
      auto it = rng.pairs.find(pair);
      if (it != rng.pairs.end()) {
        const RngRecord::Draw &o = it->second;
        bool same = o.refName == db.refName && o.element == at;
        if (o.step != rng.step)
          problem("step " + std::to_string(rng.step) + " draws (key " + std::to_string(key) +
                  ", counter " + std::to_string(counter + l) + ") for " + elem + " on rank " +
                  mesh.rankStr(r) + ", already drawn in step " + std::to_string(o.step) +
                  ": the next step repeats this step's random numbers");
        else if (!same)
          problem((o.rank == r ? "rank " + mesh.rankStr(r) + " draws"
                               : "ranks " + mesh.rankStr(o.rank) + " and " + mesh.rankStr(r) + " draw") +
                  " the same (key " +
                  std::to_string(key) + ", counter " + std::to_string(counter + l) + ") for " +
                  o.refName + indexStr(unravelIndex(refShape, o.element)) + " and " + elem +
                  ": distinct elements get identical random numbers");
      } else {
        rng.pairs[pair] = {db.refName, at, r, rng.step};
      }
      if (rng.step == 1) {
        auto mine = rng.pairOf.find({db.refName, at});
        if (mine == rng.pairOf.end())
          rng.pairOf[{db.refName, at}] = pair;
        else if (mine->second != pair)
          problem("replicas of " + elem + " draw different (key, counter) pairs (rank " +
                  mesh.rankStr(r) + " draws (" + std::to_string(key) + ", " +
                  std::to_string(counter + l) + ")): replicated activations diverge");
      }
      if (rng.reference && db.mismatch.empty())
        t.data[l] = rng.reference->lookup(db.refMask).data[at];
      else
        t.data[l] = d.round(evalFn(Fn::DropMask, {(double)key, (double)(counter + l),
                                                  attrRational(cast<ref::DropoutMaskOp>(op).getPAttr()).toDouble()}));
    }
    results[r] = std::move(t);
  }
}

/// The CPU replay as a backend of walkPlan (Interp/PlanWalk.h).
struct NumericWalk : DomainBackend<NumericWalk, NumericDomain> {
  NumericDomain &d;
  uint64_t seed;
  NumCheckpoint *ckpt;
  RngRecord *rng;
  std::map<Operation *, const DrawBinding *> draws;

  NumericWalk(const Spec &spec, NumericDomain &d, uint64_t seed, NumCheckpoint *ckpt,
              RngRecord *rng)
      : DomainBackend(spec), d(d), seed(seed), ckpt(ckpt), rng(rng) {}

  NumericDomain &domain() { return d; }
  const char *who() { return "by the replay"; }
  void beforeOp(Operation &) { tick(); }
  /// Ranks are independent: large ops run their ranks on a pool of threads (the domain
  /// is stateless and the ops are only read).
  bool parallelRanks(Operation &op) { return numElements(resultShape(&op)) >= 4096; }
  NumTensor coordinate(int64_t c) { return NumTensor({}, (double)c); }
  /// Padding holds whatever the buffer held.
  double padding(const Binding &b, int64_t r, int64_t l) {
    return d.round(0.5 * scalar::inputValue(seed, 0x9add000 + b.index,
                                            r * numElements(b.localShape) + l, 0));
  }
  bool unmatchedRecv(Operation &, int64_t, NumTensor &, std::string &why) {
    why = "this dist.recv has no matching dist.send";
    return false;
  }
  bool indexOp(Operation &op, const std::vector<double> &args, double &out) {
    return replay::indexOp(op, args, out);
  }
  void afterRef(Operation &, int64_t, NumTensor &) {}
  /// Independent-mode random draws and checkpoint ops.
  bool special(Operation &op, RankValues<double> &vals, std::string &why) {
    std::vector<NumTensor> results(spec.mesh.numRanks());
    if (auto db = draws.find(&op); db != draws.end()) {
      if (!rng) {
        why = "independent-mode random draws need the reference's masks";
        return true;
      }
      independentDraw(spec, *db->second, op, vals, *rng, d, results);
      vals[op.getResult(0)] = std::move(results);
      return true;
    }
    if (!isa<dist::CheckpointOp>(op))
      return false;
    NumericCheckpointElements elems;
    why = checkpointOp(op, spec.mesh, vals, static_cast<CheckpointOf<double> *>(ckpt),
                       static_cast<const CheckpointOf<double> *>(ckpt), elems);
    return true;
  }
};

} // namespace

bool replay::runReference(const Spec &spec, NumericDomain &d,
                          const std::map<std::string, NumTensor> &in,
                          std::map<std::string, NumTensor> &outputs, RunFailure &f,
                          llvm::DenseMap<Value, NumTensor> &vals) {
  for (unsigned i = 0; i < spec.reference.getNumArguments(); ++i)
    vals[spec.reference.getArgument(i)] = in.at(spec.refInputs[i]);
  NumericWalk walk(spec, d, 0, nullptr, nullptr);
  return walkReference(spec, walk, vals, outputs, f);
}

bool replay::runPlan(const Spec &spec, NumericDomain &d, const std::map<std::string, NumTensor> &in,
                     uint64_t seed, std::vector<std::vector<NumTensor>> &outputs, RunFailure &f,
                     llvm::DenseMap<Value, std::vector<NumTensor>> &vals, NumCheckpoint *ckpt,
                     RngRecord *rng) {
  NumericWalk walk(spec, d, seed, ckpt, rng);
  walk.globals = &in;
  for (const DrawBinding &db : spec.draws)
    walk.draws[db.op] = &db;
  if (!walkPlan(spec, walk, vals, f))
    return false;
  auto ret = cast<func::ReturnOp>(spec.plan.getBody().front().getTerminator());
  for (const Binding &b : spec.planOutputs)
    outputs.push_back(vals[ret.getOperand(b.index)]);
  return true;
}

bool replay::indexOp(Operation &op, const std::vector<double> &args, double &out) {
  if (auto c = dyn_cast<arith::ConstantOp>(op)) {
    auto v = dyn_cast<IntegerAttr>(c.getValue());
    if (!v)
      return false;
    out = (double)v.getInt();
    return true;
  }
  if (args.size() != 2)
    return false;
  if (isa<arith::AddIOp>(op))
    out = args[0] + args[1];
  else if (isa<arith::SubIOp>(op))
    out = args[0] - args[1];
  else if (isa<arith::MulIOp>(op))
    out = args[0] * args[1];
  else
    return false;
  return true;
}

double replay::workOf(func::FuncOp f, int64_t ranks) {
  auto elems = [](Type t) {
    auto r = dyn_cast<RankedTensorType>(t);
    return r ? (double)numElements(Shape(r.getShape().begin(), r.getShape().end())) : 1.0;
  };
  double total = 0;
  f.walk([&](Operation *op) {
    double w = 0;
    if (auto mm = dyn_cast<ref::MatmulOp>(op))
      w = elems(mm.getType()) * cast<RankedTensorType>(mm.getLhs().getType()).getDimSize(mm.getLhsDim());
    else if (auto bm = dyn_cast<ref::BatchMatmulOp>(op))
      w = elems(bm.getType()) * cast<RankedTensorType>(bm.getLhs().getType()).getDimSize(bm.getLhsDim());
    else
      for (Type t : op->getResultTypes())
        w += elems(t);
    total += w * ranks;
  });
  return total;
}

namespace {
/// One step's runs: the reference in the four arithmetics of the error model, and the
/// plan on its ranks.
struct StepRun {
  std::map<std::string, NumTensor> out[4];
  llvm::DenseMap<Value, NumTensor> vals[4];
  std::vector<std::vector<NumTensor>> plan;
  llvm::DenseMap<Value, std::vector<NumTensor>> planVals;
};

bool runStep(const Spec &spec, NumericDomain *domains[4],
             const std::map<std::string, NumTensor> *inputs[4], uint64_t seed, NumCheckpoint *ckpt,
             StepRun &run, RunFailure &f, ReplayResult &result, RngRecord *rng = nullptr) {
  try {
    // The four reference runs are independent of each other and of the plan: they run
    // on their own threads while this one runs the plan (with the progress line).
    RunFailure fs[4] = {f, f, f, f};
    bool oks[4] = {false, false, false, false};
    std::vector<std::thread> refs;
    // Joined on every path: the plan's run may end in an exception (the time limit)
    // while the reference runs are still going.
    struct Joiner {
      std::vector<std::thread> &threads;
      ~Joiner() {
        for (std::thread &t : threads)
          if (t.joinable())
            t.join();
      }
    } joiner{refs};
    for (int k = 0; k < 4; ++k)
      refs.emplace_back([&, k] {
        try {
          oks[k] = runReference(spec, *domains[k], *inputs[k], run.out[k], fs[k], run.vals[k]);
        } catch (const TimeLimit &e) {
          fs[k].why = e.what();
        } catch (const std::exception &e) {
          fs[k].why = std::string("internal error: ") + e.what();
        }
      });
    if (rng) {
      // Independent draws take the reference's mask values: the plan waits for the
      // reference run in its own precision.
      refs[Forward].join();
      rng->reference = &run.vals[Forward];
    }
    phase(std::string("plan on ") + std::to_string(spec.mesh.numRanks()) + " ranks", spec.plan);
    auto t0 = std::chrono::steady_clock::now();
    bool ok = runPlan(spec, *domains[Forward], *inputs[Forward], seed, run.plan, f, run.planVals, ckpt,
                      rng);
    auto t1 = std::chrono::steady_clock::now();
    for (std::thread &t : refs)
      if (t.joinable())
        t.join();
    // The reference runs overlap the plan: their time is the wall time until the last
    // of them ends.
    result.planSeconds = std::chrono::duration<double>(t1 - t0).count();
    result.referenceSeconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (int k = 0; k < 4 && ok; ++k)
      if (!oks[k]) {
        ok = false;
        f = fs[k];
      }
    if (!ok) {
      result.failure = f.why;
      result.failureAt = toSourceLoc(f.loc);
      return false;
    }
  } catch (const TimeLimit &e) {
    result.failure = e.what();
    return false;
  } catch (const std::exception &e) {
    result.failure = std::string("internal error: ") + e.what();
    return false;
  }
  return true;
}

/// A problem of a two-step spec (an inconsistent checkpoint, unsound random streams) as
/// a divergence: a pseudo-output that says what is wrong, and the first divergence at
/// the op where it was found.
ReplayResult &reportProblem(ReplayResult &result, const std::string &what, const std::string &kind,
                            const std::pair<std::string, Location> &problem) {
  ReplayOutput bad;
  bad.name = what;
  bad.within = false;
  bad.note = problem.first;
  result.outputs.push_back(bad);
  result.first.found = true;
  result.first.location = toSourceLoc(problem.second);
  result.first.note = "[" + kind + "] " + problem.first;
  return result;
}

void localize(const Spec &spec, const ReplayOptions &options, StepRun &run, ReplayDivergence &out) {
  if (!options.localize) {
    out.note = "the first divergence was not looked for (--no-localize)";
    return;
  }
  findFirstDivergence(
      spec, options,
      [&](int k, Value v) -> const NumTensor * {
        auto it = run.vals[k].find(v);
        return it == run.vals[k].end() ? nullptr : &it->second;
      },
      [&](Value v) -> const std::vector<NumTensor> * {
        auto it = run.planVals.find(v);
        return it == run.planVals.end() ? nullptr : &it->second;
      },
      out);
}
} // namespace

namespace {
/// Whether the spec can be replayed at all: a pipelined plan's schedule runs, nothing in
/// it is undecidable, and its work is within the limit; otherwise `result` says why.
bool replayable(const Spec &spec, const ReplayOptions &options, ReplayResult &result) {
  if (spec.pipelineAxis >= 0) {
    // A schedule that deadlocks, or messages that do not match, cannot run at all.
    VerifyResult schedule;
    checkSchedule(spec, schedule);
    if (!schedule.violations.empty()) {
      result.failure = "the plan cannot run: [schedule] " + schedule.violations[0].message;
      result.failureAt = schedule.violations[0].location;
      return false;
    }
  }
  for (auto &[name, v] : options.given)
    result.loadedInputs.push_back(name);
  if (!spec.undecidable.empty()) {
    result.failure = spec.undecidable;
    result.failureAt = spec.undecidableAt;
    return false;
  }
  double work = 4 * workOf(spec.reference, 1) + workOf(spec.plan, spec.mesh.numRanks());
  if (work > options.maxWork) {
    result.failure = "the replay would take about " + std::to_string((long long)work) +
                     " scalar operations at these shapes (limit " +
                     std::to_string((long long)options.maxWork) +
                     "); replay at smaller shapes (--shape reduced, or NAME=SIZE)";
    result.failureAt = toSourceLoc(spec.plan.getLoc());
    return false;
  }
  return true;
}

/// Independent random streams, property (3): the plan's next step, from the state the
/// reference returns, must draw pairs this step did not. Its draws are collected into
/// `rng`, not compared; false (with `result` saying why) when that step cannot run.
bool collectNextStepDraws(const Spec &spec, const ReplayOptions &options, NumericDomain &fwd,
                          const std::map<std::string, NumTensor> &drawn, const StepRun &one,
                          RngRecord &rng, ReplayResult &result) {
  RunFailure f{"", spec.plan.getLoc()};
  if (spec.resume) {
    result.failure = "a checkpoint spec with independent-mode random draws";
    result.failureAt = toSourceLoc(spec.plan.getLoc());
    return false;
  }
  if (spec.stateUpdates.empty()) {
    result.failure = "independent-mode draws whose next step is unknown: the reference declares "
                     "no state update (ref.updates), so stream reuse across steps cannot be "
                     "checked";
    result.failureAt = toSourceLoc(spec.plan.getLoc());
    return false;
  }
  // Inputs the step does not update (the seed) stay as they are.
  std::map<std::string, NumTensor> nextIn = drawn;
  for (auto &[out, in] : spec.stateUpdates)
    nextIn[in] = one.out[Forward].at(out);
  RngRecord collect = rng;
  collect.reference = nullptr;
  collect.step = 2;
  std::vector<std::vector<NumTensor>> plan2;
  llvm::DenseMap<Value, std::vector<NumTensor>> vals2;
  if (!runPlan(spec, fwd, nextIn, options.seed + 1, plan2, f, vals2, nullptr, &collect)) {
    result.failure = f.why;
    result.failureAt = toSourceLoc(f.loc);
    return false;
  }
  rng.problems.insert(rng.problems.end(), collect.problems.begin(), collect.problems.end());
  return true;
}

/// A checkpoint spec's second step: the resuming plan, on its mesh, from the checkpoint,
/// must compute the reference's second step -- which continues from each reference
/// run's own state, with a fresh batch.
void replayResumedStep(const Spec &spec, const ReplayOptions &options, NumericDomain *domains[4],
                       const StepRun &one, NumCheckpoint &ckpt, ReplayResult &result) {
  RunFailure f{"", spec.plan.getLoc()};
  NumericDomain &fwd = *domains[1];
  const std::map<std::string, NumTensor> *inputs[4];
  Spec view = spec.resumeStep();
  std::map<std::string, std::string> updaterOf;
  for (auto &[out, in] : spec.stateUpdates)
    updaterOf[in] = out;
  std::map<std::string, NumTensor> fresh = drawInputs(spec, options, fwd, 0x2000), next[4];
  for (int k = 0; k < 4; ++k) {
    next[k] = fresh;
    for (auto &[in, out] : updaterOf)
      next[k][in] = one.out[k].at(out);
    inputs[k] = &next[k];
  }
  StepRun two;
  double firstRef = result.referenceSeconds, firstPlan = result.planSeconds;
  if (!runStep(view, domains, inputs, options.seed + 1, &ckpt, two, f, result)) {
    result.ran = false;
    return;
  }
  result.referenceSeconds += firstRef;
  result.planSeconds += firstPlan;
  ReplayResult second;
  const std::map<std::string, NumTensor> *refs2[4] = {&two.out[0], &two.out[1], &two.out[2], &two.out[3]};
  compareOutputs(view, options, refs2, two.plan, second);
  for (ReplayOutput &o : second.outputs) {
    o.name += "@2";
    result.outputs.push_back(o);
  }
  if (auto problem = checkpointProblem(spec.mesh, ckpt)) {
    reportProblem(result, "checkpoint", "checkpoint", *problem);
    return;
  }
  if (second.diverged()) {
    localize(view, options, two, result.first);
    if (!result.first.found && options.localize) {
      // The resumed step's values come from the checkpoint, which the relations of a
      // single step do not see: the verifier's first wrong op of the whole spec is
      // where the numbers leave the reference.
      VerifyOptions vo;
      vo.deadline = options.deadline;
      vo.checkFixes = false;
      VerifyResult v = verifySpec(spec, vo);
      for (const Violation &viol : v.violations)
        if (!viol.at.empty() || viol.location.known()) {
          result.first.found = true;
          result.first.location = viol.location;
          result.first.op = viol.at;
          result.first.note = "[" + viol.kind + "] " + viol.message;
          break;
        }
    }
  }
}

} // namespace

namespace {
ReplayResult replayOnce(const Spec &spec, const ReplayOptions &options);

/// An output the run compared at no element: the reference is not finite anywhere in
/// it at these inputs (a token count of 0 under an all-zero mask, ...).
const ReplayOutput *uncompared(const ReplayResult &r) {
  if (!r.ran || r.diverged())
    return nullptr;
  for (const ReplayOutput &o : r.outputs)
    if (o.elements > 0 && o.undefined >= o.elements)
      return &o;
  return nullptr;
}
} // namespace

ReplayResult planproof::replaySpec(const Spec &spec, const ReplayOptions &options) {
  // "Within tolerance" must mean that every output was compared: where an output's
  // reference is not finite at any element at these inputs, other inputs are drawn
  // (seeds apart from the next step's, seed + 1) -- a few times, then the run says
  // that nothing was compared (could not run), never within tolerance.
  ReplayResult r = replayOnce(spec, options);
  r.seed = options.seed;
  for (int retry = 1; retry <= 3 && options.given.empty() && uncompared(r); ++retry) {
    ReplayOptions next = options;
    next.seed = options.seed + 1000 * (uint64_t)retry;
    r = replayOnce(spec, next);
    r.seed = next.seed;
  }
  if (const ReplayOutput *o = uncompared(r)) {
    std::string name = o->name;
    r.ran = false;
    r.failure = "output `" + name + "` was not compared: its reference value is not finite "
                "at any element at these inputs (seed " + std::to_string(r.seed) +
                (options.given.empty() ? ", the last of four seeds tried" : "") +
                "); replay with other inputs (--seed, --inputs)";
    r.failureAt = toSourceLoc(spec.plan.getLoc());
  }
  return r;
}

namespace {
ReplayResult replayOnce(const Spec &spec, const ReplayOptions &options) {
  replayDeadline = &options.deadline;
  struct ClearDeadline {
    ~ClearDeadline() { replayDeadline = nullptr; }
  } clearDeadline;
  if (options.backend != ReplayBackend::Cpu) {
    try {
      return replaySpecOnKernels(spec, options);
    } catch (const TimeLimit &e) {
      ReplayResult r;
      r.failure = e.what();
      return r;
    }
  }
  ReplayResult result;
  result.device = std::to_string(spec.mesh.numRanks()) + " ranks on the CPU";
  if (!replayable(spec, options, result))
    return result;
  NumericDomain exact{ReplayDtype::F64, ReduceOrder::Rank};
  exact.blas = true;
  NumericDomain fwd{options.dtype, options.order};
  NumericDomain rev{options.dtype, options.order, true};
  NumericDomain tree{options.dtype, options.order, false, true};
  NumericDomain *domains[4] = {&exact, &fwd, &rev, &tree};
  Progress bar;
  bar.enabled = options.progress;
  progress = &bar;
  struct Reset {
    ~Reset() { progress = nullptr; }
  } reset;
  std::map<std::string, NumTensor> drawn = drawInputs(spec, options, fwd);
  const std::map<std::string, NumTensor> *inputs[4] = {&drawn, &drawn, &drawn, &drawn};
  NumCheckpoint ckpt;
  StepRun one;
  RunFailure f{"", spec.plan.getLoc()};
  RngRecord rng;
  if (!runStep(spec, domains, inputs, options.seed, spec.resume ? &ckpt : nullptr, one, f, result,
               spec.draws.empty() ? nullptr : &rng))
    return result;
  if (!spec.draws.empty() && !collectNextStepDraws(spec, options, fwd, drawn, one, rng, result))
    return result;
  result.ran = true;
  const std::map<std::string, NumTensor> *refs[4] = {&one.out[0], &one.out[1], &one.out[2], &one.out[3]};
  compareOutputs(spec, options, refs, one.plan, result);
  if (!rng.problems.empty()) {
    return reportProblem(result, "random streams", "rng", rng.problems[0]);
  }
  if (result.diverged()) {
    localize(spec, options, one, result.first);
    return result;
  }
  if (!spec.resume)
    return result;
  // A checkpoint spec: the saving plan's checkpoint must be consistent, and the
  // resuming plan, on its mesh, from the checkpoint, must compute the reference's second
  // step -- which continues from each reference run's own state, with a fresh batch.
  if (auto problem = checkpointProblem(spec.mesh, ckpt))
    return reportProblem(result, "checkpoint", "checkpoint", *problem);
  replayResumedStep(spec, options, domains, one, ckpt, result);
  return result;
}
} // namespace
