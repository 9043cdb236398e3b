//===- KernelReplay.cpp - the replay on device primitives (CUDA or host) ---===//
//
// Lowers each op of the reference and of the plan to the primitives of Device.h and
// runs them on a CUDA GPU (virtual ranks on one device, or one GPU per rank with NCCL)
// or on the host device. The error model, the output comparison and the first-
// divergence localization are the CPU replay's (ReplayInternal.h); only where the
// numbers are computed differs.
//
//===----------------------------------------------------------------------===//
#include "Device/Device.h"
#include "Replay/KernelLowering.h"
#include "Device/Kernels.h"
#include "Replay/ReplayInternal.h"
#include "Semantics/OpSemantics.h"
#include "Interp/PlanWalk.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <chrono>
#include <set>

using namespace mlir;
using namespace planproof;
using namespace planproof::kernels;
using namespace planproof::replay;

static_assert((int)MapKind::DropMask == body::kDropMask, "MapKind and the kernel codes agree");
static_assert((int)RowKind::Mean == body::kRowMean, "RowKind and the kernel codes agree");
static_assert((int)Fn::Step == scalar::kStep && (int)scalar::kUnaryCount == kUnaryFunctions,
              "Fn and the device function codes number ScalarFunctions.def alike");

namespace {


double bytesOf(func::FuncOp f, int64_t ranks, int width) {
  double total = 0;
  auto add = [&](Type t) {
    if (auto r = dyn_cast<RankedTensorType>(t))
      total += (double)numElements(Shape(r.getShape().begin(), r.getShape().end())) * width * ranks;
  };
  for (BlockArgument b : f.getArguments())
    add(b.getType());
  f.walk([&](Operation *op) {
    for (Type t : op->getResultTypes())
      add(t);
  });
  return total;
}


/// One collective op being run: its operands and results on every rank, and its
/// parameters (the group's axes and size, zigzag blocks, reduction, dimension).
struct CollectiveCall {
  Operation &op;
  const std::vector<DevTensor> &in;
  std::vector<DevTensor> &results;
  std::vector<int> axes;
  int64_t n = 0, zigzag = 0, dim = 0;
  ReduceKind kind = ReduceKind::Sum;
};

/// The kernel-backend replay of one spec.
class KernelRun {
public:
  KernelRun(const Spec &spec, const ReplayOptions &o, std::vector<Device *> rankDevices,
            Collectives *nccl)
      : spec(spec), o(o), rankDev(std::move(rankDevices)), nccl(nccl) {}

  const Spec &spec;
  const ReplayOptions &o;
  std::vector<Device *> rankDev; // device of each plan rank; rankDev[0] runs the reference
  Collectives *nccl;
  bool keepAll = true;
  RunFailure failure{"", UnknownLoc()};

  /// Values of each reference run and of the plan, while kept.
  llvm::DenseMap<Value, KVal> refVals[4];
  std::map<std::string, NumTensor> refOut[4];
  PlanValues<KVal> planVals;
  std::vector<std::vector<NumTensor>> planOut;
  std::vector<bool> nonnegative; // drawnNonnegative, on first use

  Arith storage(SumOrder order = SumOrder::Forward) const { return {o.dtype, order}; }
  double roundStorage(double x) const {
    if (o.dtype == ReplayDtype::F64)
      return x;
    return (double)body::store<float>(x, o.dtype == ReplayDtype::BF16);
  }

  /// Reference input `i` in `a`'s buffers: the storage-precision values (drawn or given)
  /// for every run, the truth included.
  DevTensor input(Device &dev, const Arith &a, unsigned i) {
    if (nonnegative.empty())
      nonnegative = drawnNonnegative(spec);
    Type t = spec.reference.getArgument(i).getType();
    Shape shape;
    if (auto r = dyn_cast<RankedTensorType>(t))
      shape.assign(r.getShape().begin(), r.getShape().end());
    DevTensor out{shape, dev.alloc(numElements(shape), a.wide())};
    auto given = o.given.find(spec.refInputs[i]);
    if (given != o.given.end()) {
      std::vector<double> v(given->second.size());
      bool integral = t.isIndex() || spec.refInputBounds[i] > 0;
      for (size_t l = 0; l < v.size(); ++l)
        v[l] = integral ? given->second[l] : roundStorage(given->second[l]);
      dev.upload(out.buf, v);
    } else {
      int64_t bound = t.isIndex() ? 1000 : nonnegative[i] ? -1 : spec.refInputBounds[i];
      // Integer inputs (ids, masks, counters) are exact in any storage.
      Arith ar = storage();
      if (bound > 0 && ar.dtype == ReplayDtype::BF16)
        ar.dtype = ReplayDtype::F32;
      dev.random(ar, out.buf, o.seed, i, 0, bound, 1.0);
    }
    return out;
  }

  void free(Device &dev, DevTensor &t) { dev.release(t.buf); }

  /// Reference run `run` (Truth, Forward, Reverse, Pairwise) on rankDev[0], through
  /// walkReference (Interp/PlanWalk.h); its outputs downloaded into refOut[run].
  bool runReference(int run);

  /// Rank r's block of a global input under `b`'s layout (padding: garbage).
  DevTensor bindInput(const Binding &b, int64_t r, const DevTensor &global) {
    Device &dev = *rankDev[r];
    const Mesh &mesh = spec.mesh;
    Arith a = storage();
    DevTensor t{b.localShape, dev.alloc(numElements(b.localShape), a.wide())};
    int64_t n = numElements(b.localShape);
    // Per dimension, the runs of the block (Layout::runs); padding is in none.
    bool padded = false;
    std::vector<std::vector<Layout::Run>> pieces(b.localShape.size());
    for (size_t d = 0; d < b.localShape.size(); ++d) {
      pieces[d] = b.layout.runs(mesh, r, b.localShape, d, global.shape[d]);
      int64_t covered = 0;
      for (const Layout::Run &p : pieces[d])
        covered += p.len;
      padded |= covered < b.localShape[d];
    }
    if (padded)
      dev.random(a, t.buf, o.seed, 0x9add000 + b.index, (uint64_t)(r * n), 0, 0.5);
    if (b.localShape.empty()) {
      dev.copy(a, t.buf, Strided{}, global.buf, Strided{}, {});
      return t;
    }
    auto lst = stridesOf(b.localShape), gst = stridesOf(global.shape);
    std::vector<size_t> choice(pieces.size(), 0);
    for (auto &ps : pieces)
      if (ps.empty())
        return t; // all padding
    while (true) {
      Strided dst, src;
      Shape extent;
      for (size_t d = 0; d < pieces.size(); ++d) {
        const Layout::Run &p = pieces[d][choice[d]];
        dst.offset += p.local * lst[d];
        src.offset += p.global * gst[d];
        dst.strides[d] = lst[d];
        src.strides[d] = gst[d];
        extent.push_back(p.len);
      }
      dev.copy(a, t.buf, dst, global.buf, src, extent);
      size_t d = pieces.size();
      while (d-- > 0) {
        if (++choice[d] < pieces[d].size())
          break;
        choice[d] = 0;
      }
      if (d == SIZE_MAX)
        break;
    }
    return t;
  }

  /// Runs collective `op` on every rank: `results[r]` from the operands `in[r]`.
  bool collective(Operation &op, const std::vector<DevTensor> &in,
                  std::vector<DevTensor> &results) {
    const Mesh &mesh = spec.mesh;
    int64_t ranks = mesh.numRanks();
    CollectiveCall call{op, in, results, collectiveAxes(&op, mesh)};
    call.n = mesh.groupSize(call.axes);
    call.zigzag = op.hasAttr("zigzag") && !call.axes.empty() ? mesh.shape[call.axes.back()] : 0;
    if (auto k = op.getAttrOfType<StringAttr>("kind"))
      parseReduceKind(k.getValue().str(), call.kind);
    if (auto d = op.getAttrOfType<IntegerAttr>("dim"))
      call.dim = d.getInt();
    if (o.order == ReduceOrder::Tree && call.n > 64 && !nccl) {
      failure = {"tree-order reductions over more than 64 ranks are not supported", op.getLoc()};
      return false;
    }
    if (auto a2a = dyn_cast<dist::AllToAllOp>(op))
      return allToAll(call, a2a);
    Arith a = storage();
    for (int64_t r = 0; r < ranks; ++r) {
      Lowering low{*rankDev[r], a};
      if (isa<dist::ShardSliceOp>(op)) {
        results[r] = low.block(in[r], call.dim, mesh.positionInGroup(r, call.axes), call.n,
                               call.zigzag);
        continue;
      }
      if (isa<dist::ShardPadOp>(op)) {
        results[r] = low.unblock(in[r], call.dim, mesh.positionInGroup(r, call.axes), call.n,
                                 call.zigzag);
        continue;
      }
      std::vector<int64_t> group = mesh.group(r, call.axes);
      if (group[0] != r)
        continue;
      std::vector<Buffer> bufs;
      for (int64_t m : group)
        bufs.push_back(in[m].buf);
      bool ok = isa<dist::AllGatherOp>(op) ? allGather(call, group, bufs)
                                           : allReduce(call, group, bufs);
      if (!ok)
        return false;
    }
    return true;
  }

  /// dist.all_to_all on every rank.
  bool allToAll(const CollectiveCall &call, dist::AllToAllOp a2a) {
    const Mesh &mesh = spec.mesh;
    int64_t ranks = mesh.numRanks(), n = call.n;
    Arith a = storage();
    const std::vector<DevTensor> &in = call.in;
    std::vector<DevTensor> &results = call.results;
    if (nccl) {
      failure = {"dist.all_to_all is not supported with --ranks nccl yet (use --ranks virtual)",
                 call.op.getLoc()};
      return false;
    }
    // Rank q receives block q of split_dim from every member p, at block p of
    // concat_dim (OpSemantics.h's evalCollective).
    int64_t sd = a2a.getSplitDim(), cdim = a2a.getConcatDim();
    for (int64_t r = 0; r < ranks; ++r) {
      std::vector<int64_t> group = mesh.group(r, call.axes);
      int64_t q = mesh.positionInGroup(r, call.axes);
      Shape rs = in[r].shape;
      rs[sd] /= n;
      rs[cdim] *= n;
      Lowering low{*rankDev[r], a};
      results[r] = low.make(rs);
      auto ost = stridesOf(rs);
      for (int64_t p = 0; p < n; ++p) {
        const DevTensor &src = in[group[p]];
        Shape piece = src.shape;
        piece[sd] /= n;
        auto sst = stridesOf(src.shape);
        int64_t at = p * (sd == cdim ? piece[sd] : src.shape[cdim]);
        rankDev[r]->copy(a, results[r].buf, contiguous(rs, at * ost[cdim]), src.buf,
                         contiguous(src.shape, q * piece[sd] * sst[sd]), piece);
      }
    }
    return true;
  }

  /// dist.all_gather over one group (its members' buffers `bufs`): each member gets the
  /// pieces of all, in place along `dim`.
  bool allGather(const CollectiveCall &call, const std::vector<int64_t> &group,
                 const std::vector<Buffer> &bufs) {
    int64_t r = group[0], n = call.n, dim = call.dim, zigzag = call.zigzag;
    Arith a = storage();
    const std::vector<DevTensor> &in = call.in;
    Shape piece = in[r].shape, whole = piece;
    whole[dim] *= n;
    std::vector<DevTensor> outs;
    for (int64_t m : group)
      outs.push_back(Lowering{*rankDev[m], a}.make(whole));
    if (nccl) {
      // NCCL gathers flat buffers: gather, then place each piece along `dim`.
      std::vector<Buffer> flat;
      for (int64_t m : group)
        flat.push_back(rankDev[m]->alloc(numElements(piece) * n, a.wide()));
      std::vector<int> gpus;
      for (int64_t m : group)
        gpus.push_back((int)m);
      std::string err = nccl->allGather(gpus, bufs, flat);
      if (!err.empty()) {
        failure = {"NCCL: " + err, call.op.getLoc()};
        return false;
      }
      auto wst = stridesOf(whole);
      auto pst = stridesOf(piece);
      Shape half = piece;
      half[dim] /= zigzag ? 2 : 1;
      for (size_t q = 0; q < group.size(); ++q) {
        for (int64_t p = 0; p < n; ++p)
          for (int64_t c = 0; c < (zigzag ? 2 : 1); ++c) {
            int64_t at = blockToWhole(c * half[dim], whole[dim], p, n, zigzag);
            rankDev[group[q]]->copy(
                a, outs[q].buf, contiguous(whole, at * wst[dim]), flat[q],
                contiguous(piece, p * numElements(piece) + c * half[dim] * pst[dim]), half);
          }
        rankDev[group[q]]->release(flat[q]);
      }
    } else {
      auto wst = stridesOf(whole);
      auto pst = stridesOf(piece);
      Shape half = piece;
      half[dim] /= zigzag ? 2 : 1;
      for (size_t q = 0; q < group.size(); ++q)
        for (int64_t p = 0; p < n; ++p)
          for (int64_t c = 0; c < (zigzag ? 2 : 1); ++c) {
            // Chunk c of member p's piece lands at its place in the whole.
            int64_t at = blockToWhole(c * half[dim], whole[dim], p, n, zigzag);
            rankDev[group[q]]->copy(a, outs[q].buf, contiguous(whole, at * wst[dim]),
                                    in[group[p]].buf, contiguous(piece, c * half[dim] * pst[dim]),
                                    half);
          }
    }
    for (size_t q = 0; q < group.size(); ++q)
      call.results[group[q]] = outs[q];
    return true;
  }

  /// dist.all_reduce or dist.reduce_scatter over one group (its members' buffers
  /// `bufs`).
  bool allReduce(const CollectiveCall &call, const std::vector<int64_t> &group,
                 const std::vector<Buffer> &bufs) {
    int64_t r = group[0];
    Arith a = storage();
    // all_reduce and reduce_scatter: the group's reduction, then (reduce_scatter)
    // each member's block.
    std::vector<DevTensor> full;
    for (int64_t m : group)
      full.push_back(Lowering{*rankDev[m], a}.make(call.in[m].shape));
    if (nccl) {
      std::vector<Buffer> outs;
      for (auto &t : full)
        outs.push_back(t.buf);
      std::vector<int> gpus(group.begin(), group.end());
      std::string err =
          nccl->allReduce(gpus, call.kind, a.dtype == ReplayDtype::BF16, bufs, outs);
      if (!err.empty()) {
        failure = {"NCCL: " + err, call.op.getLoc()};
        return false;
      }
    } else {
      rankDev[r]->reduceGroup(a, call.kind, o.order, full[0].buf, bufs);
      for (size_t q = 1; q < group.size(); ++q)
        Lowering{*rankDev[group[q]], a}.mapInto(full[q], MapKind::Copy, &full[0]);
    }
    for (size_t q = 0; q < group.size(); ++q) {
      if (isa<dist::ReduceScatterOp>(call.op)) {
        Lowering lq{*rankDev[group[q]], a};
        call.results[group[q]] = lq.block(full[q], call.dim, (int64_t)q, call.n, call.zigzag);
        lq.release(full[q]);
      } else {
        call.results[group[q]] = full[q];
      }
    }
    return true;
  }

  /// Runs the plan (Interp/PlanWalk.h) and downloads its outputs into planOut.
  bool runPlan();
  /// Rank r's argument for input `b` (a global on rankDev[0] in `globals`).
  KVal bindArgument(const Binding &b, int64_t r, const std::map<std::string, DevTensor> &globals);

  /// bindInput for a rank whose own device differs: computed on the reference's device.
  DevTensor bindInputFor(const Binding &b, int64_t r, const DevTensor &g) {
    std::vector<Device *> saved = rankDev;
    for (auto &d : rankDev)
      d = saved[0];
    DevTensor t = bindInput(b, r, g);
    rankDev = saved;
    return t;
  }

  void releaseAll() {
    for (int k = 0; k < 4; ++k) {
      for (auto &[v, x] : refVals[k])
        if (x.t.buf.ptr)
          rankDev[0]->release(x.t.buf);
      refVals[k].clear();
    }
    for (auto &[v, per] : planVals)
      for (size_t r = 0; r < per.size(); ++r)
        if (per[r].t.buf.ptr)
          rankDev[r]->release(per[r].t.buf);
    planVals.clear();
  }
};

/// What the kernel backend's plan and reference walks share: values (KVal), index
/// arithmetic on doubles, one op lowered onto a device, and the last user of each value
/// (a value is freed after it unless every intermediate is kept for localization).
struct KernelBackendBase {
  using Value = KVal;
  using Index = double;
  KernelRun &run;
  llvm::DenseMap<mlir::Value, Operation *> lastUser;

  explicit KernelBackendBase(KernelRun &run) : run(run) {}
  template <class Ops> void findLastUsers(const Ops &ops) {
    for (Operation *op : ops)
      for (mlir::Value v : op->getOperands())
        lastUser[v] = isa<func::ReturnOp>(op) ? nullptr : op;
  }
  /// Whether `v` is past its last use after `op` and may be freed.
  bool dead(mlir::Value v, Operation &op) const {
    return !run.keepAll && lastUser.lookup(v) == &op;
  }
  const char *who() { return "by the kernel backend"; }
  void beforeOp(Operation &) { progressTick(); }
  double indexOf(const KVal &v) { return v.index; }
  KVal fromIndex(double x) { return {{}, x}; }
  bool indexOp(Operation &op, const std::vector<double> &args, double &out) {
    return replay::indexOp(op, args, out);
  }
  static std::string lower(Device &dev, Arith a, Operation &op,
                           const std::vector<const KVal *> &in, const std::vector<double> &idx,
                           KVal &out) {
    std::vector<const DevTensor *> ins;
    for (const KVal *v : in)
      ins.push_back(&v->t);
    try {
      out.t = Lowering{dev, a}.evalRef(&op, ins, idx);
    } catch (const Unsupported &u) {
      return u.why;
    }
    return "";
  }
};

/// The kernel backend as a backend of walkPlan (Interp/PlanWalk.h): values on each
/// rank's device, freed after their last use unless every intermediate is kept.
struct KernelWalk : KernelBackendBase {
  const std::map<std::string, DevTensor> &globals;
  std::set<Operation *> draws;

  KernelWalk(KernelRun &run, const std::map<std::string, DevTensor> &globals)
      : KernelBackendBase(run), globals(globals) {}
  Arith storage() const { return run.storage(); }
  bool parallelRanks(Operation &) { return false; }
  KVal bind(const Binding &b, int64_t r) { return run.bindArgument(b, r, globals); }
  KVal coordinate(int64_t c) { return {{}, (double)c}; }
  /// A device copy of a tensor (each value is freed on its own).
  KVal copy(const KVal &v, int64_t r) {
    if (!v.t.buf.ptr)
      return v;
    return {Lowering{*run.rankDev[r], storage()}.mapNew(v.t.shape, MapKind::Copy, &v.t), 0};
  }
  bool unmatchedRecv(Operation &, int64_t, KVal &, std::string &why) {
    why = "this dist.recv has no matching dist.send";
    return false;
  }
  bool special(Operation &op, PlanValues<KVal> &, std::string &why) {
    if (!draws.count(&op) && !isa<dist::CheckpointOp>(op))
      return false;
    why = std::string(draws.count(&op) ? "independent-mode random draws" : "checkpoint ops") +
          " are not replayed by the kernel backend yet (use --backend cpu)";
    return true;
  }
  std::string ref(Operation &op, int64_t r, const std::vector<const KVal *> &in,
                  const std::vector<double> &idx, KVal &out) {
    return lower(*run.rankDev[r], storage(), op, in, idx, out);
  }
  std::string collective(Operation &op, const std::vector<const KVal *> &in,
                         std::vector<KVal> &out) {
    if (!isa<dist::CollectiveOp>(op))
      return "'" + op.getName().getStringRef().str() + "' is not supported by the replay";
    std::vector<DevTensor> ins, outs(in.size());
    for (const KVal *v : in)
      ins.push_back(v->t);
    if (!run.collective(op, ins, outs))
      return run.failure.why;
    for (size_t r = 0; r < outs.size(); ++r)
      out[r].t = outs[r];
    return "";
  }
  /// Frees what `op` used last (unless every intermediate is kept for localization).
  void afterOp(Operation &op, PlanValues<KVal> &vals) {
    for (mlir::Value v : op.getOperands()) {
      auto it = vals.find(v);
      if (it == vals.end() || !dead(v, op))
        continue;
      for (size_t r = 0; r < it->second.size(); ++r)
        if (it->second[r].t.buf.ptr)
          run.rankDev[r]->release(it->second[r].t.buf);
      vals.erase(it);
    }
  }
};

/// The kernel backend as a backend of walkReference: one reference run on one device
/// in one arithmetic, values freed after their last use unless every one is kept.
struct KernelRefWalk : KernelBackendBase {
  Device &dev;
  Arith a;

  KernelRefWalk(KernelRun &run, Device &dev, Arith a) : KernelBackendBase(run), dev(dev), a(a) {}
  std::string ref(Operation &op, int64_t, const std::vector<const KVal *> &in,
                  const std::vector<double> &idx, KVal &out) {
    return lower(dev, a, op, in, idx, out);
  }
  void afterReferenceOp(Operation &op, llvm::DenseMap<mlir::Value, KVal> &vals) {
    for (mlir::Value v : op.getOperands()) {
      auto it = vals.find(v);
      if (it == vals.end() || !dead(v, op))
        continue;
      if (it->second.t.buf.ptr)
        dev.release(it->second.t.buf);
      vals.erase(it);
    }
  }
};

bool KernelRun::runReference(int run) {
  Arith a = run == Truth ? Arith{ReplayDtype::F64, SumOrder::Forward}
                         : storage(run == Forward   ? SumOrder::Forward
                                   : run == Reverse ? SumOrder::Reverse
                                                    : SumOrder::Pairwise);
  Device &dev = *rankDev[0];
  auto &vals = refVals[run];
  for (unsigned i = 0; i < spec.reference.getNumArguments(); ++i) {
    Value arg = spec.reference.getArgument(i);
    DevTensor t = input(dev, a, i);
    if (arg.getType().isIndex()) {
      vals[arg] = {{}, dev.download(t.buf)[0]};
      free(dev, t);
    } else {
      vals[arg] = {t, 0};
    }
  }
  KernelRefWalk walk(*this, dev, a);
  std::vector<Operation *> ops;
  for (Operation &op : spec.reference.getBody().front())
    ops.push_back(&op);
  walk.findLastUsers(ops);
  progressBegin(std::string("reference (") + (run == Truth ? "fp64" : dtypeName(o.dtype)) + ")",
                spec.reference.getBody().front().getOperations().size());
  std::map<std::string, KVal> outputs;
  if (!walkReference(spec, walk, vals, outputs, failure))
    return false;
  auto ret = cast<func::ReturnOp>(spec.reference.getBody().front().getTerminator());
  for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
    const KVal &x = outputs[spec.refOutputs[i]];
    NumTensor t;
    if (v.getType().isIndex()) {
      t = NumTensor({}, x.index);
    } else {
      t.shape = x.t.shape;
      t.data = dev.download(x.t.buf);
    }
    refOut[run][spec.refOutputs[i]] = std::move(t);
  }
  dev.sync();
  return true;
}

KVal KernelRun::bindArgument(const Binding &b, int64_t r,
                             const std::map<std::string, DevTensor> &globals) {
  const DevTensor &g = globals.at(b.refName);
  if (spec.plan.getArgument(b.index).getType().isIndex())
    return {{}, rankDev[0]->download(g.buf)[0]};
  if (rankDev[r] == rankDev[0])
    return {bindInput(b, r, g), 0};
  // A real rank on its own GPU: its block goes through the host.
  DevTensor onZero = bindInputFor(b, r, g);
  std::vector<double> host = rankDev[0]->download(onZero.buf);
  rankDev[0]->release(onZero.buf);
  DevTensor t{b.localShape, rankDev[r]->alloc(numElements(b.localShape), storage().wide())};
  rankDev[r]->upload(t.buf, host);
  return {t, 0};
}

bool KernelRun::runPlan() {
  int64_t ranks = spec.mesh.numRanks();
  Arith a = storage();
  // Global inputs (storage precision, on the reference's device), then each rank's
  // block; the globals are freed once bound.
  std::map<std::string, DevTensor> globals;
  for (unsigned i = 0; i < spec.reference.getNumArguments(); ++i)
    globals[spec.refInputs[i]] = input(*rankDev[0], a, i);
  KernelWalk walk(*this, globals);
  for (const DrawBinding &db : spec.draws)
    walk.draws.insert(db.op);
  walk.findLastUsers(spec.planOps());
  PlanWalker<KernelWalk> walker(spec, walk, planVals);
  walker.bind();
  for (auto &[name, t] : globals)
    rankDev[0]->release(t.buf);
  progressBegin("plan on " + std::to_string(ranks) + " ranks",
                spec.plan.getBody().front().getOperations().size());
  if (!walker.run(failure))
    return false;
  auto ret = cast<func::ReturnOp>(spec.plan.getBody().front().getTerminator());
  for (const Binding &b : spec.planOutputs) {
    Value v = ret.getOperand(b.index);
    std::vector<NumTensor> per(ranks);
    for (int64_t r = 0; r < ranks; ++r) {
      const KVal &x = planVals[v][r];
      if (v.getType().isIndex()) {
        per[r] = NumTensor({}, x.index);
      } else {
        per[r].shape = x.t.shape;
        per[r].data = rankDev[r]->download(x.t.buf);
      }
    }
    planOut.push_back(std::move(per));
  }
  for (Device *d : rankDev)
    d->sync();
  return true;
}

/// The first divergence of a diverged kernel replay, from the intermediates kept on the
/// devices (downloaded once each), when they were all kept.
void localizeOnDevice(const Spec &spec, const ReplayOptions &options, KernelRun &run,
                      ReplayResult &result) {
  int64_t ranks = spec.mesh.numRanks();
  const std::vector<Device *> &rankDev = run.rankDev;
  if (!options.localize) {
    result.first.note = "the first divergence was not looked for (--no-localize)";
  } else if (!run.keepAll) {
    result.first.note = "the intermediates did not fit in device memory together, so the "
                        "first divergence was not localized; replay at smaller shapes";
  } else {
    // Download the values the localization compares, once each.
    std::map<std::pair<int, void *>, NumTensor> refCache;
    std::map<void *, std::vector<NumTensor>> planCache;
    findFirstDivergence(
        spec, options,
        [&](int k, Value v) -> const NumTensor * {
          auto it = run.refVals[k].find(v);
          if (it == run.refVals[k].end() || v.getType().isIndex())
            return nullptr;
          auto key = std::make_pair(k, v.getAsOpaquePointer());
          auto c = refCache.find(key);
          if (c == refCache.end()) {
            NumTensor t;
            t.shape = it->second.t.shape;
            t.data = rankDev[0]->download(it->second.t.buf);
            c = refCache.emplace(key, std::move(t)).first;
          }
          return &c->second;
        },
        [&](Value v) -> const std::vector<NumTensor> * {
          auto it = run.planVals.find(v);
          if (it == run.planVals.end() || v.getType().isIndex())
            return nullptr;
          auto c = planCache.find(v.getAsOpaquePointer());
          if (c == planCache.end()) {
            std::vector<NumTensor> per(ranks);
            for (int64_t r = 0; r < ranks; ++r) {
              per[r].shape = it->second[r].t.shape;
              per[r].data = rankDev[r]->download(it->second[r].t.buf);
            }
            c = planCache.emplace(v.getAsOpaquePointer(), std::move(per)).first;
          }
          return &c->second;
        },
        result.first);
  }
}

} // namespace

ReplayResult planproof::replaySpecOnKernels(const Spec &spec, const ReplayOptions &options) {
  ReplayResult result;
  if (!spec.undecidable.empty()) {
    result.failure = spec.undecidable;
    result.failureAt = spec.undecidableAt;
    return result;
  }
  auto fail = [&](const std::string &why) {
    result.failure = why;
    result.failureAt = toSourceLoc(spec.plan.getLoc());
    return result;
  };
  // Where the machine, not the spec, is what is missing: no location.
  auto unavailable = [&](const std::string &why) {
    result.failure = why;
    return result;
  };
  if (spec.pipelineAxis >= 0)
    return fail("pipelined plans (dist.send, dist.recv) are not replayed by the kernel backend "
                "yet (use --backend cpu)");
  if (spec.resume)
    return fail("checkpoint specs (two steps) are not replayed by the kernel backend yet "
                "(use --backend cpu)");
  int64_t ranks = spec.mesh.numRanks();
  std::vector<std::unique_ptr<Device>> owned;
  std::vector<Device *> rankDev;
  std::unique_ptr<Collectives> nccl;
  bool located = true;
  if (std::string why = openDevices(spec, options, owned, rankDev, nccl, located); !why.empty())
    return located ? fail(why) : unavailable(why);
  result.device = rankDev[0]->name() + ", " + std::to_string(ranks) +
                  (options.ranks == ReplayRanks::Nccl ? " NCCL ranks" : " virtual ranks");
  for (auto &[name, v] : options.given)
    result.loadedInputs.push_back(name);
  KernelRun run(spec, options, rankDev, nccl.get());
  // Keep every intermediate (for first-divergence localization) when it fits in 60%
  // of the device's free memory; otherwise free each value after its last use.
  int width = options.dtype == ReplayDtype::F64 ? 8 : 4;
  double need = bytesOf(spec.reference, 1, 8) + 3 * bytesOf(spec.reference, 1, width) +
                bytesOf(spec.plan, ranks, width);
  run.keepAll = need < 0.6 * (double)rankDev[0]->freeBytes();
  auto t0 = std::chrono::steady_clock::now();
  try {
    for (int k = 0; k < 4; ++k) {
      if (!run.runReference(k)) {
        run.releaseAll();
        result.failure = run.failure.why;
        result.failureAt = toSourceLoc(run.failure.loc);
        return result;
      }
      if (!run.keepAll) {
        for (auto &[v, x] : run.refVals[k])
          if (x.t.buf.ptr)
            rankDev[0]->release(x.t.buf);
        run.refVals[k].clear();
      }
    }
    auto t1 = std::chrono::steady_clock::now();
    result.referenceSeconds = std::chrono::duration<double>(t1 - t0).count();
    if (!run.runPlan()) {
      run.releaseAll();
      result.failure = run.failure.why;
      result.failureAt = toSourceLoc(run.failure.loc);
      return result;
    }
    result.planSeconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
  } catch (const std::bad_alloc &) {
    run.releaseAll();
    return fail("out of device memory at these shapes");
  } catch (const std::exception &e) {
    run.releaseAll();
    return fail(std::string("device error: ") + e.what());
  }
  result.ran = true;
  const std::map<std::string, NumTensor> *refs[4] = {&run.refOut[0], &run.refOut[1],
                                                     &run.refOut[2], &run.refOut[3]};
  compareOutputs(spec, options, refs, run.planOut, result);
  if (result.diverged())
    localizeOnDevice(spec, options, run, result);
  run.releaseAll();
  return result;
}
