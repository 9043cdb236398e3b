//===- KernelLowering.cpp - ref ops on the kernel backend's primitives ----===//
//
// Lowering::evalRef: each ref op as elementwise maps, strided copies, row reductions,
// fused row kernels and batched products (Device.h), with the arithmetic of
// OpSemantics.h (test/unit/KernelTest.cpp compares them op by op).
//
//===----------------------------------------------------------------------===//
#include "Replay/KernelLowering.h"
#include "Device/Kernels.h"
#include "Semantics/OpSemantics.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

using namespace mlir;
using namespace planproof;
using namespace planproof::kernels;
using namespace planproof::replay;

namespace {

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


} // namespace

/// Elementwise ops, functions, constants, literals, masks and the MSE loss.
bool Lowering::elementwise(Operation *op, const std::vector<const DevTensor *> &in,
                        const std::vector<double> &idx, const Shape &rs, DevTensor &result) {
  using namespace planproof::ref;
  auto same = [&](MapKind k, double p0 = 0) { return mapNew(in[0]->shape, k, in[0], in.size() > 1 ? in[1] : nullptr, p0); };
  if (isa<AddOp>(op)) return result = same(MapKind::Add), true;
  if (isa<SubOp>(op)) return result = same(MapKind::Sub), true;
  if (isa<MulOp>(op)) return result = same(MapKind::Mul), true;
  if (isa<DivOp>(op)) return result = same(MapKind::Div), true;
  if (isa<MaximumOp>(op)) return result = same(MapKind::Max), true;
  if (isa<MinimumOp>(op)) return result = same(MapKind::Min), true;
  if (isa<GeluGradOp>(op)) return result = same(MapKind::GeluGrad), true;
  if (isa<SiluGradOp>(op)) return result = same(MapKind::SiluGrad), true;
  if (isa<BiasAddOp>(op)) return result = same(MapKind::Add), true;
  if (auto s = dyn_cast<ScaleOp>(op)) return result = same(MapKind::Scale, attrRational(s.getFactorAttr()).toDouble()), true;
  if (auto s = dyn_cast<SgdUpdateOp>(op)) return result = same(MapKind::SgdUpdate, attrRational(s.getLrAttr()).toDouble()), true;
  if (isa<MseLossGradOp>(op)) return result = same(MapKind::MseGrad, 2.0 / (double)numElements(in[0]->shape)), true;
  if (auto fn = unaryFunction(op)) return result = mapNew(rs, MapKind::Function, in[0], nullptr, 0, 0, 0, *fn), true;
  if (isa<DetachOp, ReshapeOp>(op)) return result = mapNew(rs, MapKind::Copy, in[0]), true;
  if (auto c = dyn_cast<ConstantOp>(op)) {
    DevTensor out = make(rs);
    dev.fill(a, out.buf, attrRational(c.getValueAttr()).toDouble());
    return result = out, true;
  }
  if (auto lit = dyn_cast<LiteralOp>(op)) {
    DevTensor out = make(rs);
    std::vector<double> v;
    for (double x : lit.getValues())
      v.push_back(attrRationalOf(x).toDouble());
    dev.upload(out.buf, v);
    return result = out, true;
  }
  if (auto pw = dyn_cast<PowerOp>(op)) {
    DevTensor out = make(rs);
    dev.fill(a, out.buf, evalFn(Fn::Pow, {attrRational(pw.getBaseAttr()).toDouble(), idx[0]}));
    return result = out, true;
  }
  if (auto dm = dyn_cast<DropoutMaskOp>(op))
    return result = mapNew(rs, MapKind::DropMask, nullptr, nullptr, idx[0], idx[1],
                  attrRational(dm.getPAttr()).toDouble()), true;
  if (isa<MseLossOp>(op)) {
    DevTensor diff = same(MapKind::Sub);
    DevTensor sq = mapNew(diff.shape, MapKind::Mul, &diff, &diff);
    DevTensor sum = make({});
    dev.reduceRows(a, RowKind::Sum, sum.buf, sq.buf, 1, numElements(sq.shape));
    DevTensor out = mapNew({}, MapKind::Scale, &sum, nullptr, 1.0 / (double)numElements(in[0]->shape));
    release(diff), release(sq), release(sum);
    return result = out, true;
  }
  return false;
}

/// matmul and batch_matmul (batched products).
bool Lowering::products(Operation *op, const std::vector<const DevTensor *> &in,
                        const std::vector<double> &idx, const Shape &rs, DevTensor &result) {
  using namespace planproof::ref;
  if (auto m = dyn_cast<MatmulOp>(op)) {
    int64_t ld = m.getLhsDim(), rd = m.getRhsDim();
    int64_t I = in[0]->shape[1 - ld], J = in[1]->shape[1 - rd], K = in[0]->shape[ld];
    DevTensor out = make({I, J});
    dev.gemm(a, out.buf, in[0]->buf, in[1]->buf, 1, I, J, K, ld == 1, rd == 0);
    return result = out, true;
  }
  if (isa<DotOp>(op)) { // [1, K] by [K, 1]
    DevTensor out = make({});
    dev.gemm(a, out.buf, in[0]->buf, in[1]->buf, 1, 1, 1, in[0]->shape[0], true, true);
    return result = out, true;
  }
  if (auto bm = dyn_cast<BatchMatmulOp>(op)) {
    int64_t ld = bm.getLhsDim(), rd = bm.getRhsDim();
    int64_t N = in[0]->shape[0], I = in[0]->shape[3 - ld], J = in[1]->shape[3 - rd],
            K = in[0]->shape[ld];
    DevTensor out = make({N, I, J});
    dev.gemm(a, out.buf, in[0]->buf, in[1]->buf, N, I, J, K, ld == 2, rd == 1);
    return result = out, true;
  }
  return false;
}

/// Reductions over dims, and embedding lookup and its gradient.
bool Lowering::reductions(Operation *op, const std::vector<const DevTensor *> &in,
                        const std::vector<double> &idx, const Shape &rs, DevTensor &result) {
  using namespace planproof::ref;
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
    return result = out, true;
  }
  if (isa<EmbeddingOp, EmbeddingGradOp>(op)) {
    bool lookup = isa<EmbeddingOp>(op);
    int64_t T = in[1]->shape[0], W = in[0]->shape[1];
    int64_t rows = lookup ? in[0]->shape[0] : rs[0];
    DevTensor out = make(rs);
    dev.embedding(a, lookup, out.buf, in[0]->buf, in[1]->buf, T, rows, W,
                  idx.empty() ? 0 : (int64_t)idx[0]);
    return result = out, true;
  }
  return false;
}

/// transpose, broadcast, slice, concat (strided copies).
bool Lowering::layoutOps(Operation *op, const std::vector<const DevTensor *> &in,
                        const std::vector<double> &idx, const Shape &rs, DevTensor &result) {
  using namespace planproof::ref;
  if (auto t = dyn_cast<TransposeOp>(op)) {
    auto perm = t.getPerm();
    auto st = stridesOf(in[0]->shape);
    Strided view;
    for (size_t k = 0; k < perm.size(); ++k)
      view.strides[k] = st[perm[k]];
    return result = gather(*in[0], rs, view), true;
  }
  if (auto b = dyn_cast<BroadcastOp>(op)) {
    auto dims = b.getDims();
    auto st = stridesOf(in[0]->shape);
    Strided view;
    for (size_t k = 0; k < dims.size(); ++k)
      view.strides[dims[k]] = st[k];
    return result = gather(*in[0], rs, view), true;
  }
  if (auto sl = dyn_cast<SliceOp>(op)) {
    auto off = sl.getOffsets();
    auto st = stridesOf(in[0]->shape);
    Strided view = contiguous(in[0]->shape);
    for (size_t k = 0; k < off.size(); ++k)
      view.offset += off[k] * st[k];
    return result = gather(*in[0], rs, view), true;
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
    return result = out, true;
  }
  return false;
}

/// The routing and mask ops, computed on the host (0/1 results, exact in every precision).
bool Lowering::routing(Operation *op, const std::vector<const DevTensor *> &in,
                        const std::vector<double> &idx, const Shape &rs, DevTensor &result) {
  using namespace planproof::ref;
  if (isa<TopkMaskOp, CapacityDispatchOp, PositionMaskOp, DocumentMaskOp, MaskedSoftmaxOp,
          OneHotOp>(op)) {
    // Routing bookkeeping (a [tokens, experts] mask), attention masks and one-hot
    // labels: computed on the host with the shared semantics, then uploaded.
    // (masked_softmax too, for now: it has no device kernel of its own yet.)
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
    return result = out, true;
  }
  return false;
}

/// The fused row kernels: softmax, norms, rotary, cross-entropy.
bool Lowering::fusedRows(Operation *op, const std::vector<const DevTensor *> &in,
                        const std::vector<double> &idx, const Shape &rs, DevTensor &result) {
  using namespace planproof::ref;
  if (isa<SoftmaxOp, CausalSoftmaxOp>(op)) {
    const Shape &s = in[0]->shape;
    int64_t cols = s.back(), rows = numElements(s) / std::max<int64_t>(cols, 1);
    int64_t sq = s.size() >= 2 ? s[s.size() - 2] : 1;
    DevTensor out = make(s);
    int64_t offset = idx.empty() ? cols - sq : (int64_t)idx[0];
    dev.softmaxRows(a, out.buf, in[0]->buf, rows, cols, sq, isa<CausalSoftmaxOp>(op), offset);
    return result = out, true;
  }
  if (isa<RmsNormOp, LayerNormOp>(op)) {
    const Shape &s = in[0]->shape;
    int64_t width = s.back(), rows = numElements(s) / std::max<int64_t>(width, 1);
    DevTensor out = make(s);
    double eps = attrRational(op->getAttrOfType<FloatAttr>("eps")).toDouble();
    bool layer = isa<LayerNormOp>(op);
    dev.normRows(a, out.buf, in[0]->buf, in[1]->buf, layer ? in[2]->buf : Buffer{}, rows, width,
                 eps, layer);
    return result = out, true;
  }
  if (isa<RotaryOp>(op)) {
    const Shape &s = in[0]->shape;
    DevTensor out = make(s);
    dev.rotary(a, out.buf, in[0]->buf, in[1]->buf, in[2]->buf, s[s.size() - 2], s.back());
    return result = out, true;
  }
  if (isa<CrossEntropyOp, CrossEntropySumOp>(op)) {
    int64_t T = in[0]->shape[0], V = in[0]->shape[1];
    DevTensor losses = make({T}), sum = make({});
    dev.crossEntropyRows(a, losses.buf, in[0]->buf, in[1]->buf, in[2]->buf, T, V);
    dev.reduceRows(a, RowKind::Sum, sum.buf, losses.buf, 1, T);
    release(losses);
    if (isa<CrossEntropySumOp>(op))
      return result = sum, true;
    DevTensor count = make({});
    dev.reduceRows(a, RowKind::Sum, count.buf, in[2]->buf, 1, T);
    DevTensor out = mapNew({}, MapKind::Div, &sum, &count);
    release(sum), release(count);
    return result = out, true;
  }
  return false;
}

DevTensor Lowering::evalRef(Operation *op, const std::vector<const DevTensor *> &in,
                             const std::vector<double> &idx) {
  Shape rs = op->getNumResults() && isa<RankedTensorType>(op->getResult(0).getType())
                 ? resultShape(op)
                 : Shape{};
  checkRank(rs);
  DevTensor result;
  if (elementwise(op, in, idx, rs, result) || products(op, in, idx, rs, result) ||
      reductions(op, in, idx, rs, result) || layoutOps(op, in, idx, rs, result) ||
      routing(op, in, idx, rs, result) || fusedRows(op, in, idx, rs, result))
    return result;
  throw Unsupported{"op '" + op->getName().getStringRef().str() +
                    "' has no lowering in the kernel backend yet"};
}
