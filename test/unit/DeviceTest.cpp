//===- DeviceTest.cpp - the host device's primitives, alone ----------------===//
//
// lib/Device without the kernel lowering on top: each primitive of Device.h on the
// host device, against values worked out by hand -- storage precision and bfloat16
// rounding, cyclic broadcast, strided copies, the three summation orders, the matrix
// product's stored layouts, causal softmax, norms, cross-entropy, embedding and the
// reductions of collectives. (KernelTest checks the lowering of every ref op against
// OpSemantics.h on top of these.)
//
//===----------------------------------------------------------------------===//
#include "Device/Device.h"

#include <catch2/catch.hpp>

#include <cmath>

using namespace planproof;
using namespace planproof::kernels;

namespace {
struct Host {
  std::unique_ptr<Device> dev = makeHostDevice();
  std::vector<Buffer> owned;
  ~Host() {
    for (Buffer &b : owned)
      dev->release(b);
  }
  Buffer buf(const std::vector<double> &v, bool wide) {
    Buffer b = dev->alloc((int64_t)v.size(), wide);
    dev->upload(b, v);
    owned.push_back(b);
    return b;
  }
  Buffer zeros(int64_t n, bool wide) { return buf(std::vector<double>(n, 0.0), wide); }
  std::vector<double> get(Buffer b) { return dev->download(b); }
};

Arith arith(ReplayDtype d, SumOrder o = SumOrder::Forward) { return Arith{d, o}; }
} // namespace

TEST_CASE("host device: storage precision and bfloat16 rounding", "[device]") {
  Host h;
  CHECK(h.dev->isHost());
  Buffer wide = h.buf({0.1}, true), narrow = h.buf({0.1}, false);
  CHECK(h.get(wide)[0] == 0.1);
  CHECK(h.get(narrow)[0] == (double)0.1f);
  // bfloat16 keeps 8 significant bits: 1 + 2^-10 rounds to 1 at the end of a primitive,
  // 1 + 2^-7 survives; fp32 keeps both.
  Buffer x = h.buf({1 + std::ldexp(1.0, -10), 1 + std::ldexp(1.0, -7)}, false);
  Buffer bf = h.zeros(2, false), f32 = h.zeros(2, false);
  h.dev->map(arith(ReplayDtype::BF16), MapArgs{MapKind::Copy}, bf, x, Buffer{});
  h.dev->map(arith(ReplayDtype::F32), MapArgs{MapKind::Copy}, f32, x, Buffer{});
  CHECK(h.get(bf) == std::vector<double>{1.0, 1 + std::ldexp(1.0, -7)});
  CHECK(h.get(f32) == h.get(x));
}

TEST_CASE("host device: maps broadcast their operands cyclically", "[device]") {
  Host h;
  Arith a = arith(ReplayDtype::F64);
  Buffer x = h.buf({1, 2, 3, 4, 5, 6}, true), bias = h.buf({10, 20, 30}, true);
  Buffer out = h.zeros(6, true);
  h.dev->map(a, MapArgs{MapKind::Add}, out, x, bias);
  CHECK(h.get(out) == std::vector<double>{11, 22, 33, 14, 25, 36});
  h.dev->map(a, MapArgs{MapKind::Scale, Fn::Exp, 0.5}, out, x, Buffer{});
  CHECK(h.get(out) == std::vector<double>{0.5, 1, 1.5, 2, 2.5, 3});
  h.dev->map(a, MapArgs{MapKind::SgdUpdate, Fn::Exp, 0.25}, out, x, bias);
  CHECK(h.get(out) == std::vector<double>{1 - 2.5, 2 - 5, 3 - 7.5, 4 - 2.5, 5 - 5, 6 - 7.5});
  h.dev->map(a, MapArgs{MapKind::Function, Fn::Exp}, out, x, Buffer{});
  CHECK(h.get(out)[1] == Approx(std::exp(2.0)));
  h.dev->map(a, MapArgs{MapKind::Max}, out, x, h.buf({3}, true));
  CHECK(h.get(out) == std::vector<double>{3, 3, 3, 4, 5, 6});
  h.dev->fill(a, out, -1.5);
  CHECK(h.get(out) == std::vector<double>(6, -1.5));
}

TEST_CASE("host device: a strided copy transposes", "[device]") {
  Host h;
  // src [2, 3] row-major; dst [3, 2]: dst[j, i] = src[i, j].
  Buffer src = h.buf({1, 2, 3, 4, 5, 6}, true), dst = h.zeros(6, true);
  Strided s, d;
  s.strides[0] = 3, s.strides[1] = 1;
  d.strides[0] = 1, d.strides[1] = 2;
  h.dev->copy(arith(ReplayDtype::F64), dst, d, src, s, Shape{2, 3});
  CHECK(h.get(dst) == std::vector<double>{1, 4, 2, 5, 3, 6});
  // An offset view: the second row of src into the first three elements.
  Buffer row = h.zeros(3, true);
  Strided s2, d2;
  s2.offset = 3, s2.strides[0] = 1;
  d2.strides[0] = 1;
  h.dev->copy(arith(ReplayDtype::F64), row, d2, src, s2, Shape{3});
  CHECK(h.get(row) == std::vector<double>{4, 5, 6});
}

TEST_CASE("host device: row reductions sum in the order asked", "[device]") {
  Host h;
  Buffer in = h.buf({1, 1e8, -1e8}, false), out = h.zeros(1, false);
  // fp32: forward (1 + 1e8) - 1e8 loses the 1; reverse (-1e8 + 1e8) + 1 keeps it.
  h.dev->reduceRows(arith(ReplayDtype::F32, SumOrder::Forward), RowKind::Sum, out, in, 1, 3);
  CHECK(h.get(out)[0] == 0.0);
  h.dev->reduceRows(arith(ReplayDtype::F32, SumOrder::Reverse), RowKind::Sum, out, in, 1, 3);
  CHECK(h.get(out)[0] == 1.0);
  Buffer win = h.buf({1, 1e8, -1e8}, true), wout = h.zeros(1, true);
  h.dev->reduceRows(arith(ReplayDtype::F64), RowKind::Sum, wout, win, 1, 3);
  CHECK(h.get(wout)[0] == 1.0);
  Buffer rows = h.buf({1, 5, 3, -2, -4, 0}, true), two = h.zeros(2, true);
  h.dev->reduceRows(arith(ReplayDtype::F64), RowKind::Max, two, rows, 2, 3);
  CHECK(h.get(two) == std::vector<double>{5, 0});
  h.dev->reduceRows(arith(ReplayDtype::F64), RowKind::Mean, two, rows, 2, 3);
  CHECK(h.get(two) == std::vector<double>{3, -2});
}

TEST_CASE("host device: gemm reads both stored layouts of each operand", "[device]") {
  Host h;
  Arith a = arith(ReplayDtype::F64);
  // A = [[1, 2], [3, 4]] (I x K), B = [[5, 6], [7, 8]] (K x J): A B = [[19, 22], [43, 50]].
  Buffer A = h.buf({1, 2, 3, 4}, true), At = h.buf({1, 3, 2, 4}, true);
  Buffer B = h.buf({5, 6, 7, 8}, true), Bt = h.buf({5, 7, 6, 8}, true);
  std::vector<double> want{19, 22, 43, 50};
  Buffer out = h.zeros(4, true);
  h.dev->gemm(a, out, A, B, 1, 2, 2, 2, true, true);
  CHECK(h.get(out) == want);
  h.dev->gemm(a, out, At, B, 1, 2, 2, 2, false, true);
  CHECK(h.get(out) == want);
  h.dev->gemm(a, out, A, Bt, 1, 2, 2, 2, true, false);
  CHECK(h.get(out) == want);
  // A batch of two: the second product is the identity times B.
  Buffer A2 = h.buf({1, 2, 3, 4, 1, 0, 0, 1}, true), B2 = h.buf({5, 6, 7, 8, 5, 6, 7, 8}, true);
  Buffer out2 = h.zeros(8, true);
  h.dev->gemm(a, out2, A2, B2, 2, 2, 2, 2, true, true);
  CHECK(h.get(out2) == std::vector<double>{19, 22, 43, 50, 5, 6, 7, 8});
}

TEST_CASE("host device: causal softmax, norms, cross-entropy", "[device]") {
  Host h;
  Arith a = arith(ReplayDtype::F64);
  // Causal, offset 0: query row r sees keys 0..r; the rest are 0.
  Buffer x = h.buf({0, 0, 0, 0}, true), sm = h.zeros(4, true);
  h.dev->softmaxRows(a, sm, x, 2, 2, 2, true, 0);
  CHECK(h.get(sm) == std::vector<double>{1, 0, 0.5, 0.5});
  // RMSNorm of [3, 4] with unit weights: x / sqrt(mean(x^2)) = x / sqrt(12.5).
  Buffer v = h.buf({3, 4}, true), w = h.buf({1, 1}, true), n = h.zeros(2, true);
  h.dev->normRows(a, n, v, w, Buffer{}, 1, 2, 0.0, false);
  CHECK(h.get(n)[0] == Approx(3 / std::sqrt(12.5)));
  CHECK(h.get(n)[1] == Approx(4 / std::sqrt(12.5)));
  // LayerNorm of [3, 5] (mean 4, variance 1), bias 1: [-1, 1] + 1.
  Buffer v2 = h.buf({3, 5}, true), b = h.buf({1, 1}, true);
  h.dev->normRows(a, n, v2, w, b, 1, 2, 0.0, true);
  CHECK(h.get(n)[0] == Approx(0.0).margin(1e-12));
  CHECK(h.get(n)[1] == Approx(2.0));
  // Two tokens over a vocabulary of 2, logits 0: log 2 each; the second is masked.
  Buffer logits = h.buf({0, 0, 0, 0}, true), labels = h.buf({1, 0, 0, 1}, true);
  Buffer mask = h.buf({1, 0}, true), ce = h.zeros(2, true);
  h.dev->crossEntropyRows(a, ce, logits, labels, mask, 2, 2);
  CHECK(h.get(ce)[0] == Approx(std::log(2.0)));
  CHECK(h.get(ce)[1] == 0.0);
}

TEST_CASE("host device: embedding rows with an offset, and its gradient", "[device]") {
  Host h;
  Arith a = arith(ReplayDtype::F64);
  // This shard holds global rows 2 and 3 of the table; token ids 3, 0 (not here), 2.
  Buffer table = h.buf({20, 21, 30, 31}, true), ids = h.buf({3, 0, 2}, true);
  Buffer out = h.zeros(6, true);
  h.dev->embedding(a, true, out, table, ids, 3, 2, 2, 2);
  CHECK(h.get(out) == std::vector<double>{30, 31, 0, 0, 20, 21});
  // The gradient adds each token's row into the table row it read.
  Buffer grad = h.buf({1, 2, 5, 5, 3, 4}, true), dtable = h.zeros(4, true);
  h.dev->embedding(a, false, dtable, grad, ids, 3, 2, 2, 2);
  CHECK(h.get(dtable) == std::vector<double>{3, 4, 1, 2});
}

TEST_CASE("host device: group reductions of collectives", "[device]") {
  Host h;
  Arith a = arith(ReplayDtype::F64);
  std::vector<Buffer> ins{h.buf({1, -2}, true), h.buf({3, 6}, true), h.buf({5, 2}, true)};
  Buffer out = h.zeros(2, true);
  h.dev->reduceGroup(a, ReduceKind::Sum, ReduceOrder::Rank, out, ins);
  CHECK(h.get(out) == std::vector<double>{9, 6});
  h.dev->reduceGroup(a, ReduceKind::Avg, ReduceOrder::Ring, out, ins);
  CHECK(h.get(out) == std::vector<double>{3, 2});
  h.dev->reduceGroup(a, ReduceKind::Max, ReduceOrder::Tree, out, ins);
  CHECK(h.get(out) == std::vector<double>{5, 6});
}

TEST_CASE("host device: random inputs are a function of seed, stream and index", "[device]") {
  Host h;
  Arith a = arith(ReplayDtype::F64);
  Buffer r1 = h.zeros(8, true), r2 = h.zeros(8, true), r3 = h.zeros(4, true);
  h.dev->random(a, r1, 7, 1, 0, 0, 1.0);
  h.dev->random(a, r2, 7, 1, 0, 0, 1.0);
  CHECK(h.get(r1) == h.get(r2));
  // Elements 4..7 of the stream, drawn on their own, are the same elements.
  h.dev->random(a, r3, 7, 1, 4, 0, 1.0);
  std::vector<double> all = h.get(r1), tail = h.get(r3);
  CHECK(std::vector<double>(all.begin() + 4, all.end()) == tail);
  h.dev->random(a, r2, 7, 2, 0, 0, 1.0);
  CHECK(h.get(r1) != h.get(r2));
}
