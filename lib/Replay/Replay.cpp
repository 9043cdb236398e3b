//===- Replay.cpp - numeric replay of a spec on the CPU ---------*- C++ -*-===//
#include "Replay/Replay.h"
#include "Replay/ReplayInternal.h"

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


/// The reference inputs, drawn once from the seed (rounded to the storage precision,
/// since that is what the data is).
std::map<std::string, NumTensor> drawInputs(const Spec &spec, const ReplayOptions &o,
                                            const NumericDomain &d, uint64_t streamBase = 0) {
  std::map<std::string, NumTensor> in;
  for (unsigned i = 0; i < spec.reference.getNumArguments(); ++i) {
    Type t = spec.reference.getArgument(i).getType();
    Shape shape;
    if (auto r = dyn_cast<RankedTensorType>(t))
      shape.assign(r.getShape().begin(), r.getShape().end());
    NumTensor v(shape, 0.0);
    int64_t bound = t.isIndex() ? 1000 : spec.refInputNonnegative[i] ? -1 : spec.refInputBounds[i];
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

bool runReference(const Spec &spec, NumericDomain &d, const std::map<std::string, NumTensor> &in,
                  std::map<std::string, NumTensor> &outputs, Failure &f,
                  llvm::DenseMap<Value, NumTensor> &vals) {
  for (unsigned i = 0; i < spec.reference.getNumArguments(); ++i)
    vals[spec.reference.getArgument(i)] = in.at(spec.refInputs[i]);
  for (Operation &op : spec.reference.getBody().front()) {
    tick();
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      for (auto [i, v] : llvm::enumerate(ret.getOperands()))
        outputs[spec.refOutputs[i]] = vals[v];
      continue;
    }
    if (op.getNumResults() == 1 && op.getResult(0).getType().isIndex()) {
      std::vector<double> args;
      for (Value v : op.getOperands())
        args.push_back(vals[v].data[0]);
      double r;
      if (!indexOp(op, args, r)) {
        f = {"'" + op.getName().getStringRef().str() + "' is not supported by the replay", op.getLoc()};
        return false;
      }
      vals[op.getResult(0)] = NumTensor({}, r);
      continue;
    }
    std::vector<const NumTensor *> ins;
    std::vector<double> idx;
    for (Value v : op.getOperands()) {
      if (v.getType().isIndex())
        idx.push_back(vals[v].data[0]);
      else
        ins.push_back(&vals[v]);
    }
    NumTensor out;
    std::string err = isa<ref::RefDialect>(op.getDialect())
                          ? evalRefOp(d, &op, ins, out, idx)
                          : "'" + op.getName().getStringRef().str() + "' in the reference";
    if (!err.empty()) {
      f = {err, op.getLoc()};
      return false;
    }
    vals[op.getResult(0)] = std::move(out);
  }
  return true;
}

/// The checkpoint a saving plan writes and a resuming plan reads, on numbers.
struct NumCheckpoint {
  struct Entry {
    Shape shape;
    std::vector<double> values;
    std::vector<int64_t> writer; // rank, or -1 when never written
  };
  std::map<std::string, Entry> entries;
  /// What went wrong while saving or loading (conflicting writes, dropped replicas,
  /// reads of unsaved elements), with where: reported as a divergence.
  std::vector<std::pair<std::string, Location>> problems;
};

/// dist.save / dist.load on every rank (the symbolic engine's checkpointOp, on numbers).
bool checkpointOp(Operation &op, const Mesh &mesh, llvm::DenseMap<Value, std::vector<NumTensor>> &vals,
                  NumCheckpoint *ckpt, std::vector<NumTensor> &results, Failure &f) {
  int64_t ranks = mesh.numRanks();
  CheckpointAccess access = checkpointAccess(op);
  bool saving = access.saving;
  const Shape &shape = access.shape, &local = access.local;
  const std::string &key = access.key;
  ValueRange offsets = access.offsets;
  Type type = access.type;
  if (!ckpt) {
    f = {"dist.load outside a resumed step", op.getLoc()};
    return false;
  }
  auto problem = [&](const std::string &what) {
    if (ckpt->problems.size() < 16)
      ckpt->problems.push_back({what, op.getLoc()});
  };
  for (int64_t r = 0; r < ranks; ++r) {
    std::vector<int64_t> off;
    for (Value o : offsets)
      off.push_back((int64_t)std::llround(vals[o][r].data[0]));
    if (saving) {
      auto s = cast<dist::SaveOp>(op);
      const NumTensor &mine = vals[s.getValue()][r];
      {
        int64_t saver = checkpointSaver(mesh, r, s);
        if (saver != r) {
          if (mine.data != vals[s.getValue()][saver].data)
            problem("rank " + mesh.rankStr(r) + " does not save its '" + key + "', relying on " +
                    mesh.rankStr(saver) + ", which holds different numbers: this rank's state is lost");
          continue;
        }
      }
      NumCheckpoint::Entry &e = ckpt->entries[key];
      if (e.values.empty()) {
        e.shape = shape;
        e.values.assign(numElements(shape), NAN);
        e.writer.assign(e.values.size(), -1);
      }
      for (int64_t l = 0; l < numElements(local); ++l) {
        std::vector<int64_t> g = unravelIndex(local, l);
        for (size_t k = 0; k < g.size(); ++k)
          g[k] += off[k];
        if (!Layout::inBounds(g, shape) || std::any_of(g.begin(), g.end(), [](int64_t x) { return x < 0; }))
          continue; // padding past the end
        int64_t at = linearIndex(shape, g);
        double v = mine.data[type.isIndex() ? 0 : l];
        if (e.writer[at] >= 0 && e.values[at] != v)
          problem("ranks " + mesh.rankStr(e.writer[at]) + " and " + mesh.rankStr(r) +
                  " write different numbers to checkpoint element " + key + indexStr(g));
        if (e.writer[at] < 0) {
          e.values[at] = v;
          e.writer[at] = r;
        }
      }
    } else {
      auto it = ckpt->entries.find(key);
      NumTensor t(type.isIndex() ? Shape{} : local, NAN);
      for (int64_t l = 0; l < numElements(local); ++l) {
        std::vector<int64_t> g = unravelIndex(local, l);
        for (size_t k = 0; k < g.size(); ++k)
          g[k] += off[k];
        if (!Layout::inBounds(g, shape) || std::any_of(g.begin(), g.end(), [](int64_t x) { return x < 0; }))
          continue; // padding: whatever the buffer holds (NaN here, never compared)
        int64_t at = linearIndex(shape, g);
        if (it == ckpt->entries.end() || it->second.shape != shape || it->second.writer[at] < 0) {
          problem("rank " + mesh.rankStr(r) + " reads checkpoint element " + key + indexStr(g) +
                  ", which the saving plan never wrote");
          continue;
        }
        t.data[type.isIndex() ? 0 : l] = it->second.values[at];
      }
      results[r] = std::move(t);
    }
  }
  return true;
}

/// Independent-mode random streams on numbers: the (key, counter) pairs the plan's
/// masks draw, by the reference element each stands for, checked for properties
/// (1)-(3) of RngCheck.h at this seed, and the reference's mask values to substitute
/// (so the step is compared like any other once its streams are sound).
struct RngRecord {
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

bool runPlan(const Spec &spec, NumericDomain &d, const std::map<std::string, NumTensor> &in,
             uint64_t seed, std::vector<std::vector<NumTensor>> &outputs, Failure &f,
             llvm::DenseMap<Value, std::vector<NumTensor>> &vals, NumCheckpoint *ckpt = nullptr,
             RngRecord *rng = nullptr) {
  const Mesh &mesh = spec.mesh;
  int64_t ranks = mesh.numRanks();
  for (const Binding &b : spec.planInputs) {
    const NumTensor &global = in.at(b.refName);
    uint64_t stream = 0x9add000 + b.index;
    std::vector<NumTensor> per(ranks);
    for (int64_t r = 0; r < ranks; ++r) {
      NumTensor t(b.localShape, 0.0);
      b.layout.forEachElement(mesh, r, b.localShape, global.shape, [&](int64_t l, int64_t at) {
        // Padding holds whatever the buffer held.
        t.data[l] = at >= 0 ? global.data[at]
                            : d.round(0.5 * scalar::inputValue(seed, stream, r * t.data.size() + l, 0));
      });
      per[r] = std::move(t);
    }
    vals[spec.plan.getArgument(b.index)] = std::move(per);
  }
  std::map<Operation *, const DrawBinding *> draws;
  for (const DrawBinding &db : spec.draws)
    draws[db.op] = &db;
  for (Operation *opp : spec.planOps()) {
    Operation &op = *opp;
    tick();
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      for (const Binding &b : spec.planOutputs)
        outputs.push_back(vals[ret.getOperand(b.index)]);
      continue;
    }
    std::vector<NumTensor> results(ranks);
    if (isa<dist::SendOp>(op))
      continue;
    if (auto sel = dyn_cast<dist::SelectOnOp>(op)) {
      for (int64_t r = 0; r < ranks; ++r)
        results[r] = vals[selectOnTaken(sel, mesh, r) ? sel.getWhen() : sel.getOtherwise()][r];
      vals[op.getResult(0)] = std::move(results);
      continue;
    }
    if (isa<dist::RecvOp, dist::StageSelectOp>(op)) {
      // Pipeline messages: as in the element engine, every rank runs every stage's ops
      // on the same data; a recv takes the value of the sending stage's rank.
      auto match = spec.recvFrom.find(&op);
      if (isa<dist::RecvOp>(op) && match == spec.recvFrom.end()) {
        f = {"this dist.recv has no matching dist.send", op.getLoc()};
        return false;
      }
      for (int64_t r = 0; r < ranks; ++r) {
        if (auto sel = dyn_cast<dist::StageSelectOp>(op))
          results[r] = vals[sel.getValues()[mesh.coords(r)[spec.pipelineAxis]]][r];
        else
          results[r] = vals[match->second->getOperand(0)]
                           [spec.rankOnStage(r, cast<dist::RecvOp>(op).getFrom())];
      }
      vals[op.getResult(0)] = std::move(results);
      continue;
    }
    if (draws.count(&op)) {
      if (!rng) {
        f = {"independent-mode random draws need the reference's masks", op.getLoc()};
        return false;
      }
      independentDraw(spec, *draws[&op], op, vals, *rng, d, results);
      vals[op.getResult(0)] = std::move(results);
      continue;
    }
    if (isa<dist::SaveOp, dist::LoadOp>(op)) {
      if (!checkpointOp(op, mesh, vals, ckpt, results, f))
        return false;
      if (isa<dist::LoadOp>(op))
        vals[op.getResult(0)] = std::move(results);
      continue;
    }
    if (auto ax = dyn_cast<dist::AxisIndexOp>(op)) {
      int axis = mesh.axisIndex(ax.getAxis().str());
      for (int64_t r = 0; r < ranks; ++r)
        results[r] = NumTensor({}, (double)mesh.coords(r)[axis]);
    } else if (op.getNumResults() == 1 && op.getResult(0).getType().isIndex()) {
      for (int64_t r = 0; r < ranks; ++r) {
        std::vector<double> args;
        for (Value v : op.getOperands())
          args.push_back(vals[v][r].data[0]);
        double x;
        if (!indexOp(op, args, x)) {
          f = {"'" + op.getName().getStringRef().str() + "' is not supported by the replay", op.getLoc()};
          return false;
        }
        results[r] = NumTensor({}, x);
      }
    } else if (isa<ref::RefDialect>(op.getDialect())) {
      // Ranks are independent here: a pool of threads over them (the domain is
      // stateless and the ops are only read).
      std::vector<std::vector<const NumTensor *>> ins(ranks);
      std::vector<std::vector<double>> idx(ranks);
      for (int64_t r = 0; r < ranks; ++r)
        for (Value v : op.getOperands()) {
          auto &per = vals[v];
          if (v.getType().isIndex())
            idx[r].push_back(per[r].data[0]);
          else
            ins[r].push_back(&per[r]);
        }
      std::vector<std::string> errs(ranks);
      std::atomic<int64_t> next{0};
      auto work = [&] {
        for (int64_t r; (r = next++) < ranks;)
          errs[r] = evalRefOp(d, &op, ins[r], results[r], idx[r]);
      };
      unsigned threads = std::min<int64_t>(ranks, std::max(1u, std::thread::hardware_concurrency()));
      std::vector<std::thread> pool;
      if (results.size() > 1 && numElements(resultShape(&op)) >= 4096)
        for (unsigned t = 1; t < threads; ++t)
          pool.emplace_back(work);
      work();
      for (std::thread &t : pool)
        t.join();
      for (int64_t r = 0; r < ranks; ++r)
        if (!errs[r].empty()) {
          f = {errs[r], op.getLoc()};
          return false;
        }
    } else if (isa<dist::DistDialect>(op.getDialect())) {
      std::vector<const NumTensor *> ins;
      for (int64_t r = 0; r < ranks; ++r)
        ins.push_back(&vals[op.getOperand(0)][r]);
      std::string err = evalCollective(d, &op, mesh, ins, results);
      if (!err.empty()) {
        f = {err, op.getLoc()};
        return false;
      }
    } else {
      f = {"'" + op.getName().getStringRef().str() + "' is not supported by the replay", op.getLoc()};
      return false;
    }
    vals[op.getResult(0)] = std::move(results);
  }
  return true;
}

/// The tolerance of one reference element (see replaySpec).
double elementTolerance(double w, double a, double c, double e, double u, double scale) {
  double noise = std::max({std::fabs(a - w), std::fabs(c - w), std::fabs(e - w)});
  return 16 * noise + 32 * u * std::fabs(w) + 4 * u * scale + 1e-300;
}

} // namespace

void replay::findFirstDivergence(
    const Spec &spec, const ReplayOptions &options,
    const std::function<const NumTensor *(int, Value)> &ref,
    const std::function<const std::vector<NumTensor> *(Value)> &plan, ReplayDivergence &out) {
  // Walks the plan in program order and compares every op result that holds a reference
  // value exactly (the verifier's relations) with that value, element by element.
  std::string why;
  std::vector<PlanValueRelation> rels = relatePlanValues(spec, why);
  if (rels.empty()) {
    out.note = why.empty() ? "no plan intermediate holds a reference value exactly" : why;
    return;
  }
  NumericDomain d{options.dtype, options.order};
  double u = unitRoundoff(options.dtype);
  const Mesh &mesh = spec.mesh;
  for (const PlanValueRelation &rel : rels) {
    const NumTensor *tw = ref(Truth, rel.refValue), *ta = ref(Forward, rel.refValue),
                    *tc = ref(Reverse, rel.refValue), *te = ref(Pairwise, rel.refValue);
    const std::vector<NumTensor> *pv = plan(rel.planValue);
    if (!tw || !ta || !tc || !te || !pv)
      continue;
    const NumTensor &w = *tw, &a = *ta, &c = *tc, &e = *te;
    double scale = 0;
    for (double x : w.data)
      scale = std::max(scale, std::isfinite(x) ? std::fabs(x) : 0.0);
    const std::vector<NumTensor> &per = *pv;
    for (int64_t r = 0; r < mesh.numRanks(); ++r) {
      if (rel.layout.isPartial() && mesh.positionInGroup(r, rel.layout.partialAxes()) != 0)
        continue;
      for (int64_t l = 0; l < (int64_t)per[r].data.size(); ++l) {
        std::vector<int64_t> idx = per[r].unravel(l);
        for (size_t k = 0; k < rel.offset.size(); ++k)
          idx[k] += rel.offset[k];
        auto g = rel.layout.globalIndex(mesh, r, rel.block.empty() ? per[r].shape : rel.block, idx);
        if (!Layout::inBounds(g, w.shape))
          continue;
        int64_t at = w.linear(g);
        if (!std::isfinite(w.data[at]) || !std::isfinite(a.data[at]) ||
            !std::isfinite(c.data[at]) || !std::isfinite(e.data[at]))
          continue;
        double got;
        if (!gatherPartial(d, mesh, rel.layout, per, r, l, got))
          continue; // max mixed with sum: not a layout values are gathered through
        double tol = elementTolerance(w.data[at], a.data[at], c.data[at], e.data[at], u, scale);
        double err = std::isfinite(got) ? std::fabs(got - w.data[at]) : INFINITY;
        if (err <= tol)
          continue;
        Operation *op = rel.planValue.getDefiningOp();
        out.found = true;
        out.location = toSourceLoc(op->getLoc());
        out.op = spec.nameOf(rel.planValue) + " = " + op->getName().getStringRef().str();
        out.value = spec.nameOf(rel.refValue);
        out.rank = mesh.rankStr(r);
        out.local = per[r].unravel(l);
        out.global = g;
        out.plan = got;
        out.reference = w.data[at];
        out.tolerance = tol;
        return;
      }
    }
  }
  // Every intermediate that holds a reference value is within tolerance: the numbers
  // leave the reference where the plan computes something else. The verifier's first
  // wrong op (operands that hold reference values, a result that holds none) is that
  // point. (Its fix hints are not shown here: not checked, which saves re-verifying.)
  VerifyOptions vo;
  vo.deadline = options.deadline;
  vo.checkFixes = false;
  VerifyResult v = verifySpec(spec, vo);
  for (const Violation &viol : v.violations)
    if (!viol.at.empty()) {
      out.found = true;
      out.location = viol.location;
      out.op = viol.at;
      out.value = "";
      out.note = "[" + viol.kind + "] " + viol.message;
      return;
    }
  out.note = "every plan intermediate that holds a reference value is within tolerance, "
             "and the verifier names no wrong op";
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

double replay::unitRoundoff(ReplayDtype d) {
  return d == ReplayDtype::F64 ? std::ldexp(1.0, -53)
         : d == ReplayDtype::F32 ? std::ldexp(1.0, -24)
                                 : std::ldexp(1.0, -8);
}

namespace {
/// "x[1,0]" -> ("x", {1, 0}); "seed" -> ("seed", {}).
bool parseElement(const std::string &s, std::string &name, std::vector<int64_t> &idx) {
  auto open = s.find('[');
  name = s.substr(0, open);
  idx.clear();
  if (open == std::string::npos)
    return true;
  if (s.back() != ']')
    return false;
  std::string inner = s.substr(open + 1, s.size() - open - 2);
  size_t pos = 0;
  while (pos <= inner.size() && !inner.empty()) {
    size_t comma = inner.find(',', pos);
    std::string part = inner.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    char *end = nullptr;
    long long v = std::strtoll(part.c_str(), &end, 10);
    if (part.empty() || *end)
      return false;
    idx.push_back(v);
    if (comma == std::string::npos)
      break;
    pos = comma + 1;
  }
  return true;
}
} // namespace

CounterexampleCheck planproof::checkCounterexample(const Spec &spec, const Counterexample &cx) {
  if (spec.resume)
    return {"not replayable", "checkpoint specs run two steps"};
  NumericDomain exact{ReplayDtype::F64, ReduceOrder::Rank};
  std::map<std::string, NumTensor> inputs;
  for (unsigned i = 0; i < spec.reference.getNumArguments(); ++i) {
    Shape shape;
    if (auto r = dyn_cast<RankedTensorType>(spec.reference.getArgument(i).getType()))
      shape.assign(r.getShape().begin(), r.getShape().end());
    inputs[spec.refInputs[i]] = NumTensor(shape, 0.0);
  }
  for (auto &[elem, value] : cx.inputs) {
    std::string name;
    std::vector<int64_t> idx;
    if (!parseElement(elem, name, idx))
      return {"not replayable", "input '" + elem + "' is not an element name"};
    auto it = inputs.find(name);
    if (it == inputs.end() || idx.size() != it->second.shape.size())
      return {"not replayable", "input '" + elem + "' is not a reference input element "
                                "(padding or other state the replay draws itself)"};
    for (size_t d = 0; d < idx.size(); ++d)
      if (idx[d] < 0 || idx[d] >= it->second.shape[d])
        return {"refuted", "input element '" + elem + "' is out of range"};
    it->second.at(idx) = value;
  }
  std::map<std::string, NumTensor> truth;
  std::vector<std::vector<NumTensor>> plan;
  llvm::DenseMap<Value, NumTensor> refVals;
  llvm::DenseMap<Value, std::vector<NumTensor>> planVals;
  Failure f{"", spec.plan.getLoc()};
  if (!runReference(spec, exact, inputs, truth, f, refVals) ||
      !runPlan(spec, exact, inputs, 0, plan, f, planVals))
    return {"not replayable", f.why};
  std::string name;
  std::vector<int64_t> at;
  if (!parseElement(cx.element, name, at))
    return {"not replayable", "element '" + cx.element + "'"};
  auto want = truth.find(name);
  if (want == truth.end())
    return {"not replayable", "'" + name + "' is not a reference output"};
  const Mesh &mesh = spec.mesh;
  std::string refutation;
  for (size_t o = 0; o < spec.planOutputs.size(); ++o) {
    const Binding &b = spec.planOutputs[o];
    if (b.refName != name)
      continue;
    for (int64_t r = 0; r < mesh.numRanks(); ++r) {
      if ((b.layout.isPartial() && mesh.positionInGroup(r, b.layout.partialAxes()) != 0) ||
          !spec.onStage(r, b.stage))
        continue;
      for (int64_t l = 0; l < (int64_t)plan[o][r].data.size(); ++l) {
        if (b.layout.globalIndex(mesh, r, b.localShape, plan[o][r].unravel(l)) != at)
          continue;
        double got;
        if (!gatherPartial(exact, mesh, b.layout, plan[o], r, l, got))
          continue; // max mixed with sum: not a layout values are gathered through
        double w = want->second.at(at);
        auto close = [](double x, double y) {
          // A value that does not exist: the report says nan (the verifier does not tell
          // 0/0 from 1/0); the float replay gives NaN or an infinity.
          if (!std::isfinite(x) || !std::isfinite(y))
            return !std::isfinite(x) && !std::isfinite(y);
          return std::fabs(x - y) <= 1e-12 * std::max({1.0, std::fabs(x), std::fabs(y)});
        };
        std::ostringstream why;
        why.precision(9);
        why << "at these inputs " << cx.element << " is " << w << " in the reference and " << got
            << " in the plan (rank " << mesh.rankStr(r) << "); the report says " << cx.reference
            << " and " << cx.plan;
        // The verifier's own criterion: values that differ, or a plan value that does
        // not exist where the reference's does.
        bool differs = numericallyDifferent(w, got) || (std::isfinite(w) && !std::isfinite(got));
        bool same = close(w, cx.reference) && close(got, cx.plan);
        if (differs && same)
          return {"confirmed", why.str()};
        // Another output may hold the same reference value (a tied weight's copy on
        // another stage): the counterexample may be about that one.
        refutation = why.str();
      }
    }
  }
  if (!refutation.empty())
    return {"refuted", refutation};
  return {"not replayable", "no plan output holds " + cx.element};
}

namespace {
/// One plan output against the reference (see compareOutputs).
ReplayOutput compareOutput(const Spec &spec, NumericDomain fwd, double u,
                           const std::map<std::string, NumTensor> *refs[4],
                           const std::vector<std::vector<NumTensor>> &plan, size_t o) {
  const Mesh &mesh = spec.mesh;
  const Binding &b = spec.planOutputs[o];
  const NumTensor &want = refs[Truth]->at(b.refName);
  const NumTensor &a = refs[Forward]->at(b.refName), &c = refs[Reverse]->at(b.refName),
                  &e = refs[Pairwise]->at(b.refName);
  double scale = 0;
  for (double x : want.data)
    scale = std::max(scale, std::fabs(x));
  ReplayOutput out;
  out.name = b.refName;
  out.elements = (int64_t)want.data.size();
  double worstRatio = -1;
  for (int64_t r = 0; r < mesh.numRanks(); ++r) {
    bool leader = !b.layout.isPartial() || mesh.positionInGroup(r, b.layout.partialAxes()) == 0;
    if (!leader || !spec.onStage(r, b.stage))
      continue;
    b.layout.forEachElement(mesh, r, plan[o][r].shape, want.shape, [&](int64_t l, int64_t at) {
      if (at < 0)
        return;
      double got;
      if (!gatherPartial(fwd, mesh, b.layout, plan[o], r, l, got))
        return; // max mixed with sum: not a layout values are gathered through
      double w = want.data[at];
      // Where the reference itself leaves a function's domain at these inputs (the
      // square root of a negative random moment), in fp64 or in the storage
      // precision, there is nothing to compare.
      if (!std::isfinite(w) || !std::isfinite(a.data[at]) || !std::isfinite(c.data[at]) ||
          !std::isfinite(e.data[at])) {
        ++out.undefined;
        return;
      }
      // The tolerance of this element: the rounding noise the reference itself shows
      // when summed in two orders, with a margin, plus a few units of roundoff of
      // the element and of the output's scale.
      double tol = elementTolerance(w, a.data[at], c.data[at], e.data[at], u, scale);
      double err = std::isfinite(got) ? std::fabs(got - w) : INFINITY;
      out.maxAbsError = std::max(out.maxAbsError, err);
      out.maxRelError = std::max(out.maxRelError, err / std::max(std::fabs(w), 1e-300));
      double ratio = err / tol;
      if (ratio > worstRatio) {
        worstRatio = ratio;
        out.worst = unravelIndex(want.shape, at);
        out.worstRank = mesh.rankStr(r);
        out.worstError = err;
        out.worstTolerance = tol;
        out.worstReference = w;
        out.worstPlan = got;
      }
      if (!(err <= tol))
        out.within = false;
    });
  }
  return out;
}
} // namespace

void replay::compareOutputs(const Spec &spec, const ReplayOptions &options,
                            const std::map<std::string, NumTensor> *refs[4],
                            const std::vector<std::vector<NumTensor>> &plan, ReplayResult &result) {
  NumericDomain fwd{options.dtype, options.order};
  double u = unitRoundoff(options.dtype);
  const Mesh &mesh = spec.mesh;
  // Outputs are compared independently, each on a core.
  std::vector<ReplayOutput> outs(spec.planOutputs.size());
  parallelChunks((int64_t)outs.size(), 1, [&](int64_t begin, int64_t end) {
    for (int64_t o = begin; o < end; ++o)
      outs[o] = compareOutput(spec, fwd, u, refs, plan, o);
  });
  for (ReplayOutput &o : outs)
    result.outputs.push_back(std::move(o));
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
             StepRun &run, Failure &f, ReplayResult &result, RngRecord *rng = nullptr) {
  try {
    // The four reference runs are independent of each other and of the plan: they run
    // on their own threads while this one runs the plan (with the progress line).
    Failure fs[4] = {f, f, f, f};
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

ReplayResult planproof::replaySpec(const Spec &spec, const ReplayOptions &options) {
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
  if (spec.pipelineAxis >= 0) {
    // A schedule that deadlocks, or messages that do not match, cannot run at all.
    VerifyResult schedule;
    checkSchedule(spec, schedule);
    if (!schedule.violations.empty()) {
      result.failure = "the plan cannot run: [schedule] " + schedule.violations[0].message;
      result.failureAt = schedule.violations[0].location;
      return result;
    }
  }
  for (auto &[name, v] : options.given)
    result.loadedInputs.push_back(name);
  if (!spec.undecidable.empty()) {
    result.failure = spec.undecidable;
    result.failureAt = spec.undecidableAt;
    return result;
  }
  double work = 4 * workOf(spec.reference, 1) + workOf(spec.plan, spec.mesh.numRanks());
  if (work > options.maxWork) {
    result.failure = "the replay would take about " + std::to_string((long long)work) +
                     " scalar operations at these shapes (limit " +
                     std::to_string((long long)options.maxWork) +
                     "); replay at smaller shapes (--shape reduced, or NAME=SIZE)";
    result.failureAt = toSourceLoc(spec.plan.getLoc());
    return result;
  }
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
  Failure f{"", spec.plan.getLoc()};
  RngRecord rng;
  if (!runStep(spec, domains, inputs, options.seed, spec.resume ? &ckpt : nullptr, one, f, result,
               spec.draws.empty() ? nullptr : &rng))
    return result;
  if (!spec.draws.empty()) {
    // Property (3): the plan's next step, from the state the reference returns, must
    // draw pairs this step did not. Its draws are collected, not compared.
    if (spec.resume) {
      result.failure = "a checkpoint spec with independent-mode random draws";
      result.failureAt = toSourceLoc(spec.plan.getLoc());
      return result;
    }
    if (spec.stateUpdates.empty()) {
      result.failure = "independent-mode draws whose next step is unknown: the reference declares "
                       "no state update (ref.updates), so stream reuse across steps cannot be "
                       "checked";
      result.failureAt = toSourceLoc(spec.plan.getLoc());
      return result;
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
      return result;
    }
    rng.problems.insert(rng.problems.end(), collect.problems.begin(), collect.problems.end());
  }
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
  if (!ckpt.problems.empty()) {
    return reportProblem(result, "checkpoint", "checkpoint", ckpt.problems[0]);
  }
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
    return result;
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
  if (!ckpt.problems.empty()) {
    return reportProblem(result, "checkpoint", "checkpoint", ckpt.problems[0]);
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
  return result;
}
