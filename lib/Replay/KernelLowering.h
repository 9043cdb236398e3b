//===- KernelLowering.h - ref ops on the kernel backend's primitives -*- C++ -*-===//
//
// The kernel replay's values (device tensors) and the lowering of one ref op to the
// primitives of Device.h (KernelLowering.cpp), shared by KernelReplay.cpp and the unit
// tests that compare every op's lowering with OpSemantics.h.
//
//===----------------------------------------------------------------------===//
#ifndef PLANPROOF_REPLAY_KERNELLOWERING_H
#define PLANPROOF_REPLAY_KERNELLOWERING_H

#include "Device/Device.h"
#include "Semantics/Layout.h"
#include "Semantics/Tensor.h"

#include "mlir/IR/Operation.h"

#include <string>
#include <vector>

namespace planproof {
namespace replay {

using kernels::Arith;
using kernels::Buffer;
using kernels::Device;
using kernels::MapArgs;
using kernels::MapKind;
using kernels::Strided;
using kernels::kMaxDims;

struct DevTensor {
  Shape shape;
  Buffer buf;
};

/// A plan value on one rank: a device tensor, or an `index` value (no buffer).
struct KVal {
  DevTensor t;
  double index = 0;
};

/// Row-major strides of `shape`.
inline std::vector<int64_t> stridesOf(const Shape &shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;)
    s[d - 1] = s[d] * shape[d];
  return s;
}

inline Strided contiguous(const Shape &shape, int64_t offset = 0) {
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

  /// Computes ref op `op` (OpSemantics.h's evalRefOp, on primitives); throws
  /// Unsupported for an op without a lowering.
  DevTensor evalRef(mlir::Operation *op, const std::vector<const DevTensor *> &in,
                    const std::vector<double> &idx);

private:
  // The families of evalRef: each computes `result` for the ops it knows (true), or
  // leaves the op to the next (false). `rs` is the result shape.
#define PLANPROOF_LOWERING_FAMILY(name)                                                    \
  bool name(mlir::Operation *op, const std::vector<const DevTensor *> &in,                 \
            const std::vector<double> &idx, const Shape &rs, DevTensor &result);
  PLANPROOF_LOWERING_FAMILY(elementwise)
  PLANPROOF_LOWERING_FAMILY(products)
  PLANPROOF_LOWERING_FAMILY(reductions)
  PLANPROOF_LOWERING_FAMILY(layoutOps)
  PLANPROOF_LOWERING_FAMILY(routing)
  PLANPROOF_LOWERING_FAMILY(fusedRows)
#undef PLANPROOF_LOWERING_FAMILY
};

} // namespace replay
} // namespace planproof

#endif
