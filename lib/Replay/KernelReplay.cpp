//===- KernelReplay.cpp - the replay on device primitives (CUDA or host) ---===//
//
// Lowers each op of the reference and of the plan to the primitives of Device.h and
// runs them on a CUDA GPU (virtual ranks on one device, or one GPU per rank with NCCL)
// or on the host device. The error model, the output comparison and the first-
// divergence localization are the CPU replay's (ReplayInternal.h); only where the
// numbers are computed differs.
//
//===----------------------------------------------------------------------===//
#include "Replay/Device.h"
#include "Replay/Kernels.h"
#include "Replay/ReplayInternal.h"
#include "Semantics/OpSemantics.h"

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
static_assert((int)Fn::Sqrt == body::kFnSqrt && (int)Fn::Silu == body::kFnSilu &&
                  (int)Fn::Gelu == body::kFnGelu && (int)Fn::Exp == body::kFnExp &&
                  (int)Fn::Tanh == body::kFnTanh && (int)Fn::Logistic == body::kFnLogistic &&
                  (int)Fn::Step == body::kFnStep,
              "Fn and the kernel function codes agree");

namespace {

struct DevTensor {
  Shape shape;
  Buffer buf;
};

/// Row-major strides of `shape`.
std::vector<int64_t> stridesOf(const Shape &shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;)
    s[d - 1] = s[d] * shape[d];
  return s;
}

Strided contiguous(const Shape &shape, int64_t offset = 0) {
  Strided v;
  v.offset = offset;
  auto s = stridesOf(shape);
  for (size_t d = 0; d < s.size(); ++d)
    v.strides[d] = s[d];
  return v;
}

struct Unsupported {
  std::string why;
};

/// Exact double arithmetic, for the routing ops computed on the host: their results
/// are 0/1 masks, the same in every storage precision.
struct HostDomain {
  using Value = double;
  Value constant(const Rational &c) { return c.toDouble(); }
  Value add(Value x, Value y) { return x + y; }
  Value sub(Value x, Value y) { return x - y; }
  Value mul(Value x, Value y) { return x * y; }
  Value sum(const std::vector<Value> &v) {
    double t = 0;
    for (double x : v)
      t += x;
    return t;
  }
  Value scale(Value x, const Rational &c) { return x * c.toDouble(); }
  Value apply(Fn f, std::vector<Value> args) { return evalFn(f, args); }
  bool integer(const Value &v, int64_t &out) {
    out = (int64_t)v;
    return (double)out == v;
  }
};

/// One run (the reference in one arithmetic, or the plan's ranks) on one device.
struct Lowering {
  Device &dev;
  Arith a;

  DevTensor make(const Shape &shape) { return {shape, dev.alloc(numElements(shape), a.wide())}; }
  void mapInto(DevTensor &out, MapKind k, const DevTensor *x, const DevTensor *y = nullptr,
               double p0 = 0, double p1 = 0, double p2 = 0, Fn fn = Fn::Exp) {
    MapArgs m;
    m.kind = k;
    m.fn = fn;
    m.p0 = p0;
    m.p1 = p1;
    m.p2 = p2;
    dev.map(a, m, out.buf, x ? x->buf : Buffer{}, y ? y->buf : Buffer{});
  }
  DevTensor mapNew(const Shape &shape, MapKind k, const DevTensor *x, const DevTensor *y = nullptr,
                   double p0 = 0, double p1 = 0, double p2 = 0, Fn fn = Fn::Exp) {
    DevTensor out = make(shape);
    mapInto(out, k, x, y, p0, p1, p2, fn);
    return out;
  }
  void checkRank(const Shape &s) {
    if (s.size() > (size_t)kMaxDims)
      throw Unsupported{"tensors of more than 8 dimensions are not supported by the kernel backend"};
  }
  /// out = in viewed through `src` over `out.shape` (transpose, broadcast, slice).
  DevTensor gather(const DevTensor &in, const Shape &shape, const Strided &src) {
    checkRank(shape);
    DevTensor out = make(shape);
    if (numElements(shape) > 0)
      dev.copy(a, out.buf, contiguous(shape), in.buf, src, shape);
    return out;
  }
  /// The block `position` of `parts` along `dim`.
  DevTensor block(const DevTensor &t, int64_t dim, int64_t position, int64_t parts,
                  int64_t inner = 0) {
    Shape shape = t.shape;
    shape[dim] /= parts;
    auto st = stridesOf(t.shape);
    if (!inner) {
      Strided src = contiguous(t.shape, position * shape[dim] * st[dim]);
      return gather(t, shape, src);
    }
    // Two zigzag chunks (Layout.h's blockToWhole).
    DevTensor out = make(shape);
    Shape half = shape;
    half[dim] /= 2;
    auto ost = stridesOf(shape);
    for (int64_t c = 0; c < 2; ++c) {
      int64_t at = blockToWhole(c * half[dim], t.shape[dim], position, parts, inner);
      dev.copy(a, out.buf, contiguous(shape, c * half[dim] * ost[dim]), t.buf,
               contiguous(t.shape, at * st[dim]), half);
    }
    return out;
  }
  /// The inverse of block(): `t` at block `position` of a zero tensor `parts` times as
  /// long along `dim` (dist.shard_pad).
  DevTensor unblock(const DevTensor &t, int64_t dim, int64_t position, int64_t parts,
                    int64_t inner = 0) {
    Shape whole = t.shape;
    whole[dim] *= parts;
    DevTensor out = make(whole);
    dev.fill(a, out.buf, 0.0);
    auto wst = stridesOf(whole), tst = stridesOf(t.shape);
    int64_t chunks = inner ? 2 : 1;
    Shape piece = t.shape;
    piece[dim] /= chunks;
    for (int64_t c = 0; c < chunks; ++c) {
      int64_t at = blockToWhole(c * piece[dim], whole[dim], position, parts, inner);
      dev.copy(a, out.buf, contiguous(whole, at * wst[dim]), t.buf,
               contiguous(t.shape, c * piece[dim] * tst[dim]), piece);
    }
    return out;
  }
  void release(DevTensor &t) { dev.release(t.buf); }

  /// Computes ref op `op` (OpSemantics.h's evalRefOp, on primitives).
  DevTensor evalRef(Operation *op, const std::vector<const DevTensor *> &in,
                    const std::vector<double> &idx) {
    using namespace planproof::ref;
    Shape rs = op->getNumResults() && isa<RankedTensorType>(op->getResult(0).getType())
                   ? resultShape(op)
                   : Shape{};
    checkRank(rs);
    auto same = [&](MapKind k, double p0 = 0) { return mapNew(in[0]->shape, k, in[0], in.size() > 1 ? in[1] : nullptr, p0); };
    if (isa<AddOp>(op)) return same(MapKind::Add);
    if (isa<SubOp>(op)) return same(MapKind::Sub);
    if (isa<MulOp>(op)) return same(MapKind::Mul);
    if (isa<DivOp>(op)) return same(MapKind::Div);
    if (isa<MaximumOp>(op)) return same(MapKind::Max);
    if (isa<MinimumOp>(op)) return same(MapKind::Min);
    if (isa<GeluGradOp>(op)) return same(MapKind::GeluGrad);
    if (isa<SiluGradOp>(op)) return same(MapKind::SiluGrad);
    if (isa<BiasAddOp>(op)) return same(MapKind::Add);
    if (auto s = dyn_cast<ScaleOp>(op)) return same(MapKind::Scale, attrRational(s.getFactorAttr()).toDouble());
    if (auto s = dyn_cast<SgdUpdateOp>(op)) return same(MapKind::SgdUpdate, attrRational(s.getLrAttr()).toDouble());
    if (isa<MseLossGradOp>(op)) return same(MapKind::MseGrad, 2.0 / (double)numElements(in[0]->shape));
    if (isa<GeluOp>(op)) return mapNew(rs, MapKind::Function, in[0], nullptr, 0, 0, 0, Fn::Gelu);
    if (auto fn = unaryFunction(op)) return mapNew(rs, MapKind::Function, in[0], nullptr, 0, 0, 0, *fn);
    if (isa<DetachOp, ReshapeOp>(op)) return mapNew(rs, MapKind::Copy, in[0]);
    if (auto c = dyn_cast<ConstantOp>(op)) {
      DevTensor out = make(rs);
      dev.fill(a, out.buf, attrRational(c.getValueAttr()).toDouble());
      return out;
    }
    if (auto lit = dyn_cast<LiteralOp>(op)) {
      DevTensor out = make(rs);
      std::vector<double> v;
      for (double x : lit.getValues())
        v.push_back(attrRationalOf(x).toDouble());
      dev.upload(out.buf, v);
      return out;
    }
    if (auto pw = dyn_cast<PowerOp>(op)) {
      DevTensor out = make(rs);
      dev.fill(a, out.buf, evalFn(Fn::Pow, {attrRational(pw.getBaseAttr()).toDouble(), idx[0]}));
      return out;
    }
    if (auto dm = dyn_cast<DropoutMaskOp>(op))
      return mapNew(rs, MapKind::DropMask, nullptr, nullptr, idx[0], idx[1],
                    attrRational(dm.getPAttr()).toDouble());
    if (isa<MseLossOp>(op)) {
      DevTensor diff = same(MapKind::Sub);
      DevTensor sq = mapNew(diff.shape, MapKind::Mul, &diff, &diff);
      DevTensor sum = make({});
      dev.reduceRows(a, RowKind::Sum, sum.buf, sq.buf, 1, numElements(sq.shape));
      DevTensor out = mapNew({}, MapKind::Scale, &sum, nullptr, 1.0 / (double)numElements(in[0]->shape));
      release(diff), release(sq), release(sum);
      return out;
    }
    if (auto m = dyn_cast<MatmulOp>(op)) {
      int64_t ld = m.getLhsDim(), rd = m.getRhsDim();
      int64_t I = in[0]->shape[1 - ld], J = in[1]->shape[1 - rd], K = in[0]->shape[ld];
      DevTensor out = make({I, J});
      dev.gemm(a, out.buf, in[0]->buf, in[1]->buf, 1, I, J, K, ld == 1, rd == 0);
      return out;
    }
    if (auto bm = dyn_cast<BatchMatmulOp>(op)) {
      int64_t ld = bm.getLhsDim(), rd = bm.getRhsDim();
      int64_t N = in[0]->shape[0], I = in[0]->shape[3 - ld], J = in[1]->shape[3 - rd],
              K = in[0]->shape[ld];
      DevTensor out = make({N, I, J});
      dev.gemm(a, out.buf, in[0]->buf, in[1]->buf, N, I, J, K, ld == 2, rd == 1);
      return out;
    }
    if (isa<ReduceSumOp, ReduceMaxOp, ReduceMeanOp>(op)) {
      auto dims = op->getAttrOfType<DenseI64ArrayAttr>("dims").asArrayRef();
      const Shape &s = in[0]->shape;
      // Kept dimensions first, reduced ones last (each group in row-major order, as
      // evalRefOp groups them).
      std::vector<int64_t> perm;
      int64_t rows = 1, len = 1;
      for (int64_t k = 0; k < (int64_t)s.size(); ++k)
        if (!llvm::is_contained(dims, k))
          perm.push_back(k), rows *= s[k];
      for (int64_t k = 0; k < (int64_t)s.size(); ++k)
        if (llvm::is_contained(dims, k))
          perm.push_back(k), len *= s[k];
      bool identity = true;
      for (size_t k = 0; k < perm.size(); ++k)
        identity &= perm[k] == (int64_t)k;
      DevTensor moved;
      const DevTensor *src = in[0];
      if (!identity) {
        Shape ps;
        Strided view;
        auto st = stridesOf(s);
        for (size_t k = 0; k < perm.size(); ++k)
          ps.push_back(s[perm[k]]), view.strides[k] = st[perm[k]];
        moved = gather(*in[0], ps, view);
        src = &moved;
      }
      DevTensor out = make(rs);
      RowKind k = isa<ReduceMaxOp>(op) ? RowKind::Max : isa<ReduceSumOp>(op) ? RowKind::Sum : RowKind::Mean;
      dev.reduceRows(a, k, out.buf, src->buf, rows, len);
      if (!identity)
        release(moved);
      return out;
    }
    if (isa<EmbeddingOp, EmbeddingGradOp>(op)) {
      bool lookup = isa<EmbeddingOp>(op);
      int64_t T = in[1]->shape[0], W = in[0]->shape[1];
      int64_t rows = lookup ? in[0]->shape[0] : rs[0];
      DevTensor out = make(rs);
      dev.embedding(a, lookup, out.buf, in[0]->buf, in[1]->buf, T, rows, W,
                    idx.empty() ? 0 : (int64_t)idx[0]);
      return out;
    }
    if (auto t = dyn_cast<TransposeOp>(op)) {
      auto perm = t.getPerm();
      auto st = stridesOf(in[0]->shape);
      Strided view;
      for (size_t k = 0; k < perm.size(); ++k)
        view.strides[k] = st[perm[k]];
      return gather(*in[0], rs, view);
    }
    if (auto b = dyn_cast<BroadcastOp>(op)) {
      auto dims = b.getDims();
      auto st = stridesOf(in[0]->shape);
      Strided view;
      for (size_t k = 0; k < dims.size(); ++k)
        view.strides[dims[k]] = st[k];
      return gather(*in[0], rs, view);
    }
    if (auto sl = dyn_cast<SliceOp>(op)) {
      auto off = sl.getOffsets();
      auto st = stridesOf(in[0]->shape);
      Strided view = contiguous(in[0]->shape);
      for (size_t k = 0; k < off.size(); ++k)
        view.offset += off[k] * st[k];
      return gather(*in[0], rs, view);
    }
    if (auto c = dyn_cast<ConcatOp>(op)) {
      int64_t dim = c.getDim();
      DevTensor out = make(rs);
      auto st = stridesOf(rs);
      int64_t base = 0;
      for (const DevTensor *part : in) {
        if (numElements(part->shape) > 0)
          dev.copy(a, out.buf, contiguous(rs, base * st[dim]), part->buf, contiguous(part->shape),
                   part->shape);
        base += part->shape[dim];
      }
      return out;
    }
    if (isa<TopkMaskOp, CapacityDispatchOp, PositionMaskOp, DocumentMaskOp, MaskedSoftmaxOp>(op)) {
      // Routing bookkeeping (a [tokens, experts] mask) and attention masks: computed on
      // the host with the shared semantics, then uploaded. (masked_softmax too, for
      // now: it has no device kernel of its own yet.)
      std::vector<Tensor<double>> xs(in.size());
      std::vector<const Tensor<double> *> ptrs;
      for (size_t k = 0; k < in.size(); ++k) {
        xs[k].shape = in[k]->shape;
        xs[k].data = dev.download(in[k]->buf);
        ptrs.push_back(&xs[k]);
      }
      Tensor<double> r;
      HostDomain hd;
      std::string err = evalRefOp(hd, op, ptrs, r, idx);
      if (!err.empty())
        throw Unsupported{err};
      DevTensor out = make(r.shape);
      dev.upload(out.buf, r.data);
      return out;
    }
    if (isa<SoftmaxOp, CausalSoftmaxOp>(op)) {
      const Shape &s = in[0]->shape;
      int64_t cols = s.back(), rows = numElements(s) / std::max<int64_t>(cols, 1);
      int64_t sq = s.size() >= 2 ? s[s.size() - 2] : 1;
      DevTensor out = make(s);
      int64_t offset = idx.empty() ? cols - sq : (int64_t)idx[0];
      dev.softmaxRows(a, out.buf, in[0]->buf, rows, cols, sq, isa<CausalSoftmaxOp>(op), offset);
      return out;
    }
    if (isa<RmsNormOp, LayerNormOp>(op)) {
      const Shape &s = in[0]->shape;
      int64_t width = s.back(), rows = numElements(s) / std::max<int64_t>(width, 1);
      DevTensor out = make(s);
      double eps = attrRational(op->getAttrOfType<FloatAttr>("eps")).toDouble();
      bool layer = isa<LayerNormOp>(op);
      dev.normRows(a, out.buf, in[0]->buf, in[1]->buf, layer ? in[2]->buf : Buffer{}, rows, width,
                   eps, layer);
      return out;
    }
    if (isa<RotaryOp>(op)) {
      const Shape &s = in[0]->shape;
      DevTensor out = make(s);
      dev.rotary(a, out.buf, in[0]->buf, in[1]->buf, in[2]->buf, s[s.size() - 2], s.back());
      return out;
    }
    if (isa<CrossEntropyOp, CrossEntropySumOp>(op)) {
      int64_t T = in[0]->shape[0], V = in[0]->shape[1];
      DevTensor losses = make({T}), sum = make({});
      dev.crossEntropyRows(a, losses.buf, in[0]->buf, in[1]->buf, in[2]->buf, T, V);
      dev.reduceRows(a, RowKind::Sum, sum.buf, losses.buf, 1, T);
      release(losses);
      if (isa<CrossEntropySumOp>(op))
        return sum;
      DevTensor count = make({});
      dev.reduceRows(a, RowKind::Sum, count.buf, in[2]->buf, 1, T);
      DevTensor out = mapNew({}, MapKind::Div, &sum, &count);
      release(sum), release(count);
      return out;
    }
    throw Unsupported{"op '" + op->getName().getStringRef().str() +
                      "' has no lowering in the kernel backend yet"};
  }
};

/// Per value, the position of the op that uses it last (values used by the return or
/// never: the end).
llvm::DenseMap<Value, size_t> lastUses(func::FuncOp f) {
  llvm::DenseMap<Value, size_t> last;
  size_t pos = 0;
  for (Operation &op : f.getBody().front()) {
    for (Value v : op.getOperands())
      last[v] = isa<func::ReturnOp>(op) ? SIZE_MAX : pos;
    ++pos;
  }
  return last;
}

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
  Failure failure{"", UnknownLoc()};

  /// Values of each reference run and of the plan, while kept.
  llvm::DenseMap<Value, DevTensor> refVals[4];
  llvm::DenseMap<Value, double> refIndex[4];
  std::map<std::string, NumTensor> refOut[4];
  llvm::DenseMap<Value, std::vector<DevTensor>> planVals;
  llvm::DenseMap<Value, std::vector<double>> planIndex;
  std::vector<std::vector<NumTensor>> planOut;

  Arith storage(SumOrder order = SumOrder::Forward) const { return {o.dtype, order}; }
  double roundStorage(double x) const {
    if (o.dtype == ReplayDtype::F64)
      return x;
    return (double)body::store<float>(x, o.dtype == ReplayDtype::BF16);
  }

  /// Reference input `i` in `a`'s buffers: the storage-precision values (drawn or given)
  /// for every run, the truth included.
  DevTensor input(Device &dev, const Arith &a, unsigned i) {
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
      int64_t bound = t.isIndex() ? 1000 : spec.refInputNonnegative[i] ? -1 : spec.refInputBounds[i];
      // Integer inputs (ids, masks, counters) are exact in any storage.
      Arith ar = storage();
      if (bound > 0 && ar.dtype == ReplayDtype::BF16)
        ar.dtype = ReplayDtype::F32;
      dev.random(ar, out.buf, o.seed, i, 0, bound, 1.0);
    }
    return out;
  }

  void free(Device &dev, DevTensor &t) { dev.release(t.buf); }

  bool runReference(int run) {
    Arith a = run == Truth ? Arith{ReplayDtype::F64, SumOrder::Forward}
                           : storage(run == Forward   ? SumOrder::Forward
                                     : run == Reverse ? SumOrder::Reverse
                                                      : SumOrder::Pairwise);
    Device &dev = *rankDev[0];
    Lowering low{dev, a};
    auto &vals = refVals[run];
    auto &index = refIndex[run];
    auto last = lastUses(spec.reference);
    for (unsigned i = 0; i < spec.reference.getNumArguments(); ++i) {
      Value arg = spec.reference.getArgument(i);
      DevTensor t = input(dev, a, i);
      if (arg.getType().isIndex()) {
        index[arg] = dev.download(t.buf)[0];
        free(dev, t);
      } else {
        vals[arg] = t;
      }
    }
    progressBegin(std::string("reference (") + (run == Truth ? "fp64" : dtypeName(o.dtype)) + ")",
                  spec.reference.getBody().front().getOperations().size());
    size_t pos = 0;
    for (Operation &op : spec.reference.getBody().front()) {
      progressTick();
      if (auto ret = dyn_cast<func::ReturnOp>(op)) {
        for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
          NumTensor t;
          if (v.getType().isIndex()) {
            t = NumTensor({}, index[v]);
          } else {
            t.shape = vals[v].shape;
            t.data = dev.download(vals[v].buf);
          }
          refOut[run][spec.refOutputs[i]] = std::move(t);
        }
        break;
      }
      if (op.getNumResults() == 1 && op.getResult(0).getType().isIndex()) {
        std::vector<double> args;
        for (Value v : op.getOperands())
          args.push_back(index[v]);
        double r;
        if (!indexOp(op, args, r)) {
          failure = {"'" + op.getName().getStringRef().str() + "' is not supported by the replay", op.getLoc()};
          return false;
        }
        index[op.getResult(0)] = r;
        ++pos;
        continue;
      }
      if (!isa<ref::RefDialect>(op.getDialect())) {
        failure = {"'" + op.getName().getStringRef().str() + "' in the reference", op.getLoc()};
        return false;
      }
      std::vector<const DevTensor *> ins;
      std::vector<double> idx;
      for (Value v : op.getOperands()) {
        if (v.getType().isIndex())
          idx.push_back(index[v]);
        else
          ins.push_back(&vals[v]);
      }
      try {
        vals[op.getResult(0)] = low.evalRef(&op, ins, idx);
      } catch (const Unsupported &u) {
        failure = {u.why, op.getLoc()};
        return false;
      }
      if (!keepAll)
        for (Value v : op.getOperands()) {
          auto it = vals.find(v);
          if (it != vals.end() && last[v] == pos) {
            free(dev, it->second);
            vals.erase(it);
          }
        }
      ++pos;
    }
    dev.sync();
    return true;
  }

  /// Rank r's block of a global input under `b`'s layout (padding: garbage).
  DevTensor bindInput(const Binding &b, int64_t r, const DevTensor &global) {
    Device &dev = *rankDev[r];
    const Mesh &mesh = spec.mesh;
    Arith a = storage();
    DevTensor t{b.localShape, dev.alloc(numElements(b.localShape), a.wide())};
    int64_t n = numElements(b.localShape);
    bool padded = false;
    // Per dimension, the pieces (local start, global start, length) of the block.
    struct Piece {
      int64_t local, global, len;
    };
    std::vector<std::vector<Piece>> pieces(b.localShape.size());
    for (size_t d = 0; d < b.localShape.size(); ++d) {
      int64_t L = b.localShape[d];
      if (d >= b.layout.dims.size() || b.layout.dims[d].empty()) {
        pieces[d].push_back({0, 0, L});
        continue;
      }
      int64_t k = b.layout.segmentsOf(d), piece = L / k, G = mesh.groupSize(b.layout.dims[d]);
      int64_t pos = mesh.positionInGroup(r, b.layout.dims[d]);
      for (int64_t s = 0; s < k; ++s) {
        Piece p{s * piece, s * piece * G + pos * piece, piece};
        if (b.layout.zigzagAt(d))
          p.global = blockToWhole(s * piece, L * G, pos, G, b.layout.zigzagInner(mesh, d));
        int64_t room = global.shape[d] - p.global;
        if (room < p.len) {
          padded = true;
          p.len = std::max<int64_t>(room, 0);
        }
        if (p.len > 0)
          pieces[d].push_back(p);
      }
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
        const Piece &p = pieces[d][choice[d]];
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

  bool collective(Operation &op, std::vector<DevTensor> &results) {
    const Mesh &mesh = spec.mesh;
    int64_t ranks = mesh.numRanks();
    Arith a = storage();
    std::vector<int> axes = collectiveAxes(&op, mesh);
    int64_t n = mesh.groupSize(axes);
    int64_t zigzag = op.hasAttr("zigzag") && !axes.empty() ? mesh.shape[axes.back()] : 0;
    ReduceKind kind = ReduceKind::Sum;
    if (auto k = op.getAttrOfType<StringAttr>("kind"))
      parseReduceKind(k.getValue().str(), kind);
    int64_t dim = 0;
    if (auto d = op.getAttrOfType<IntegerAttr>("dim"))
      dim = d.getInt();
    std::vector<DevTensor> &in = planVals[op.getOperand(0)];
    if (o.order == ReduceOrder::Tree && n > 64 && !nccl) {
      failure = {"tree-order reductions over more than 64 ranks are not supported", op.getLoc()};
      return false;
    }
    if (auto a2a = dyn_cast<dist::AllToAllOp>(op)) {
      if (nccl) {
        failure = {"dist.all_to_all is not supported with --ranks nccl yet (use --ranks virtual)",
                   op.getLoc()};
        return false;
      }
      // Rank q receives block q of split_dim from every member p, at block p of
      // concat_dim (OpSemantics.h's evalCollective).
      int64_t sd = a2a.getSplitDim(), cdim = a2a.getConcatDim();
      for (int64_t r = 0; r < ranks; ++r) {
        std::vector<int64_t> group = mesh.group(r, axes);
        int64_t q = mesh.positionInGroup(r, axes);
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
    for (int64_t r = 0; r < ranks; ++r) {
      Lowering low{*rankDev[r], a};
      if (isa<dist::ShardSliceOp>(op)) {
        results[r] = low.block(in[r], dim, mesh.positionInGroup(r, axes), n, zigzag);
        continue;
      }
      if (isa<dist::ShardPadOp>(op)) {
        results[r] = low.unblock(in[r], dim, mesh.positionInGroup(r, axes), n, zigzag);
        continue;
      }
      std::vector<int64_t> group = mesh.group(r, axes);
      if (group[0] != r)
        continue;
      std::vector<Buffer> bufs;
      for (int64_t m : group)
        bufs.push_back(in[m].buf);
      if (isa<dist::AllGatherOp>(op)) {
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
            failure = {"NCCL: " + err, op.getLoc()};
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
                rankDev[group[q]]->copy(a, outs[q].buf, contiguous(whole, at * wst[dim]), flat[q],
                                        contiguous(piece, p * numElements(piece) + c * half[dim] * pst[dim]),
                                        half);
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
          results[group[q]] = outs[q];
        continue;
      }
      // all_reduce and reduce_scatter: the group's reduction, then (reduce_scatter)
      // each member's block.
      std::vector<DevTensor> full;
      for (int64_t m : group)
        full.push_back(Lowering{*rankDev[m], a}.make(in[m].shape));
      if (nccl) {
        std::vector<Buffer> outs;
        for (auto &t : full)
          outs.push_back(t.buf);
        std::vector<int> gpus(group.begin(), group.end());
        std::string err = nccl->allReduce(gpus, kind, a.dtype == ReplayDtype::BF16, bufs, outs);
        if (!err.empty()) {
          failure = {"NCCL: " + err, op.getLoc()};
          return false;
        }
      } else {
        rankDev[r]->reduceGroup(a, kind, o.order, full[0].buf, bufs);
        for (size_t q = 1; q < group.size(); ++q)
          Lowering{*rankDev[group[q]], a}.mapInto(full[q], MapKind::Copy, &full[0]);
      }
      for (size_t q = 0; q < group.size(); ++q) {
        if (isa<dist::ReduceScatterOp>(op)) {
          Lowering lq{*rankDev[group[q]], a};
          results[group[q]] = lq.block(full[q], dim, (int64_t)q, n, zigzag);
          lq.release(full[q]);
        } else {
          results[group[q]] = full[q];
        }
      }
    }
    return true;
  }

  bool runPlan() {
    const Mesh &mesh = spec.mesh;
    int64_t ranks = mesh.numRanks();
    Arith a = storage();
    std::set<Operation *> draws;
    for (const DrawBinding &db : spec.draws)
      draws.insert(db.op);
    // Global inputs (storage precision, on the reference's device), then each rank's
    // block.
    std::map<std::string, DevTensor> globals;
    for (unsigned i = 0; i < spec.reference.getNumArguments(); ++i)
      globals[spec.refInputs[i]] = input(*rankDev[0], a, i);
    for (const Binding &b : spec.planInputs) {
      Value arg = spec.plan.getArgument(b.index);
      const DevTensor &g = globals.at(b.refName);
      if (arg.getType().isIndex()) {
        double v = rankDev[0]->download(g.buf)[0];
        planIndex[arg] = std::vector<double>(ranks, v);
        continue;
      }
      std::vector<DevTensor> per;
      for (int64_t r = 0; r < ranks; ++r) {
        if (rankDev[r] != rankDev[0]) {
          // A real rank on its own GPU: its block goes through the host.
          DevTensor onZero = bindInputFor(b, r, g);
          std::vector<double> host = rankDev[0]->download(onZero.buf);
          rankDev[0]->release(onZero.buf);
          DevTensor t{b.localShape, rankDev[r]->alloc(numElements(b.localShape), a.wide())};
          rankDev[r]->upload(t.buf, host);
          per.push_back(t);
        } else {
          per.push_back(bindInput(b, r, g));
        }
      }
      planVals[arg] = std::move(per);
    }
    for (auto &[name, t] : globals)
      rankDev[0]->release(t.buf);
    auto last = lastUses(spec.plan);
    progressBegin("plan on " + std::to_string(ranks) + " ranks",
                  spec.plan.getBody().front().getOperations().size());
    size_t pos = 0;
    for (Operation &op : spec.plan.getBody().front()) {
      progressTick();
      if (auto ret = dyn_cast<func::ReturnOp>(op)) {
        for (const Binding &b : spec.planOutputs) {
          Value v = ret.getOperand(b.index);
          std::vector<NumTensor> per(ranks);
          for (int64_t r = 0; r < ranks; ++r) {
            if (v.getType().isIndex()) {
              per[r] = NumTensor({}, planIndex[v][r]);
            } else {
              per[r].shape = planVals[v][r].shape;
              per[r].data = rankDev[r]->download(planVals[v][r].buf);
            }
          }
          planOut.push_back(std::move(per));
        }
        break;
      }
      if (draws.count(&op) || isa<dist::SaveOp, dist::LoadOp>(op)) {
        failure = {std::string(draws.count(&op) ? "independent-mode random draws"
                                                 : "checkpoint ops") +
                       " are not replayed by the kernel backend yet (use --backend cpu)",
                   op.getLoc()};
        return false;
      }
      if (auto ax = dyn_cast<dist::AxisIndexOp>(op)) {
        int axis = mesh.axisIndex(ax.getAxis().str());
        std::vector<double> v(ranks);
        for (int64_t r = 0; r < ranks; ++r)
          v[r] = (double)mesh.coords(r)[axis];
        planIndex[op.getResult(0)] = v;
        ++pos;
        continue;
      }
      if (op.getNumResults() == 1 && op.getResult(0).getType().isIndex()) {
        std::vector<double> v(ranks);
        for (int64_t r = 0; r < ranks; ++r) {
          std::vector<double> args;
          for (Value x : op.getOperands())
            args.push_back(planIndex[x][r]);
          if (!indexOp(op, args, v[r])) {
            failure = {"'" + op.getName().getStringRef().str() + "' is not supported by the replay", op.getLoc()};
            return false;
          }
        }
        planIndex[op.getResult(0)] = v;
        ++pos;
        continue;
      }
      std::vector<DevTensor> results(ranks);
      if (isa<ref::RefDialect>(op.getDialect())) {
        for (int64_t r = 0; r < ranks; ++r) {
          std::vector<const DevTensor *> ins;
          std::vector<double> idx;
          for (Value v : op.getOperands()) {
            if (v.getType().isIndex())
              idx.push_back(planIndex[v][r]);
            else
              ins.push_back(&planVals[v][r]);
          }
          try {
            results[r] = Lowering{*rankDev[r], a}.evalRef(&op, ins, idx);
          } catch (const Unsupported &u) {
            failure = {u.why, op.getLoc()};
            return false;
          }
        }
      } else if (auto sel = dyn_cast<dist::SelectOnOp>(op)) {
        if (sel.getType().isIndex()) {
          std::vector<double> v(ranks);
          for (int64_t r = 0; r < ranks; ++r)
            v[r] = planIndex[selectOnTaken(sel, mesh, r) ? sel.getWhen() : sel.getOtherwise()][r];
          planIndex[op.getResult(0)] = v;
          ++pos;
          continue;
        }
        for (int64_t r = 0; r < ranks; ++r) {
          const DevTensor &t =
              planVals[selectOnTaken(sel, mesh, r) ? sel.getWhen() : sel.getOtherwise()][r];
          results[r] = Lowering{*rankDev[r], a}.mapNew(t.shape, MapKind::Copy, &t);
        }
      } else if (isa<dist::AllReduceOp, dist::AllGatherOp, dist::ReduceScatterOp,
                     dist::ShardSliceOp, dist::ShardPadOp, dist::AllToAllOp>(op)) {
        if (!collective(op, results))
          return false;
      } else {
        failure = {"'" + op.getName().getStringRef().str() + "' is not supported by the replay", op.getLoc()};
        return false;
      }
      planVals[op.getResult(0)] = std::move(results);
      if (!keepAll)
        for (Value v : op.getOperands()) {
          auto it = planVals.find(v);
          if (it != planVals.end() && last[v] == pos) {
            for (int64_t r = 0; r < ranks; ++r)
              rankDev[r]->release(it->second[r].buf);
            planVals.erase(it);
          }
        }
      ++pos;
    }
    for (Device *d : rankDev)
      d->sync();
    return true;
  }

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
      for (auto &[v, t] : refVals[k])
        rankDev[0]->release(t.buf);
      refVals[k].clear();
    }
    for (auto &[v, per] : planVals)
      for (size_t r = 0; r < per.size(); ++r)
        rankDev[r]->release(per[r].buf);
    planVals.clear();
  }
};

} // namespace

std::string replay::evalRefOnDevice(Device &dev, ReplayDtype dtype, Operation *op,
                                    const std::vector<NumTensor> &ins,
                                    const std::vector<double> &idx, NumTensor &out) {
  Lowering low{dev, Arith{dtype, SumOrder::Forward}};
  std::vector<DevTensor> held;
  for (const NumTensor &t : ins) {
    DevTensor d = low.make(t.shape);
    dev.upload(d.buf, t.data);
    held.push_back(d);
  }
  std::vector<const DevTensor *> ptrs;
  for (const DevTensor &d : held)
    ptrs.push_back(&d);
  std::string err;
  try {
    DevTensor r = low.evalRef(op, ptrs, idx);
    out.shape = r.shape;
    out.data = dev.download(r.buf);
    low.release(r);
  } catch (const Unsupported &u) {
    err = u.why;
  }
  for (DevTensor &d : held)
    low.release(d);
  return err;
}

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
  if (options.backend == ReplayBackend::Emulated) {
    if (options.ranks == ReplayRanks::Nccl)
      return fail("--ranks nccl needs --backend cuda");
    // The host device is for correctness tests: refuse what would take minutes.
    double work = 4 * workOf(spec.reference, 1) + workOf(spec.plan, ranks);
    if (work > options.maxWork)
      return fail("the emulated kernel backend would take about " +
                  std::to_string((long long)work) + " scalar operations (limit " +
                  std::to_string((long long)options.maxWork) + ")");
    owned.push_back(makeHostDevice());
    rankDev.assign(ranks, owned[0].get());
  } else {
    std::string why;
    int gpus = cudaDeviceCount(why);
    if (gpus <= 0)
      return unavailable("the CUDA backend cannot run here: " + why);
    if (options.ranks == ReplayRanks::Nccl) {
      if (gpus < ranks)
        return unavailable("--ranks nccl runs one rank per GPU: the mesh has " + std::to_string(ranks) +
                    " ranks and this machine " + std::to_string(gpus) +
                    " GPU(s) (use --ranks virtual)");
      for (int64_t r = 0; r < ranks; ++r) {
        owned.push_back(makeCudaDevice((int)r, why));
        if (!owned.back())
          return unavailable("GPU " + std::to_string(r) + ": " + why);
        rankDev.push_back(owned.back().get());
      }
      nccl = makeNcclCollectives(why);
      if (!nccl)
        return unavailable("NCCL: " + why);
    } else {
      owned.push_back(makeCudaDevice(0, why));
      if (!owned[0])
        return unavailable(why);
      rankDev.assign(ranks, owned[0].get());
    }
  }
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
        for (auto &[v, t] : run.refVals[k])
          rankDev[0]->release(t.buf);
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
  if (result.diverged()) {
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
            if (it == run.refVals[k].end())
              return nullptr;
            auto key = std::make_pair(k, v.getAsOpaquePointer());
            auto c = refCache.find(key);
            if (c == refCache.end()) {
              NumTensor t;
              t.shape = it->second.shape;
              t.data = rankDev[0]->download(it->second.buf);
              c = refCache.emplace(key, std::move(t)).first;
            }
            return &c->second;
          },
          [&](Value v) -> const std::vector<NumTensor> * {
            auto it = run.planVals.find(v);
            if (it == run.planVals.end())
              return nullptr;
            auto c = planCache.find(v.getAsOpaquePointer());
            if (c == planCache.end()) {
              std::vector<NumTensor> per(ranks);
              for (int64_t r = 0; r < ranks; ++r) {
                per[r].shape = it->second[r].shape;
                per[r].data = rankDev[r]->download(it->second[r].buf);
              }
              c = planCache.emplace(v.getAsOpaquePointer(), std::move(per)).first;
            }
            return &c->second;
          },
          result.first);
    }
  }
  run.releaseAll();
  return result;
}
