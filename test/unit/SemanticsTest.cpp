//===- SemanticsTest.cpp - the shared op semantics on numbers ---------------===//
//
// The op semantics are generic over a scalar domain; the element engine uses
// polynomials. Instantiating them with doubles (as the numeric replay will) checks the
// definitions against hand-computed values.
//
//===----------------------------------------------------------------------===//
#include <cmath>
#include "Semantics/OpSemantics.h"
#include "Spec/Spec.h"

#include "mlir/Parser/Parser.h"

#include <catch2/catch.hpp>
#include <set>

using namespace planproof;

namespace {
struct DoubleDomain {
  using Value = double;
  Value constant(const Rational &c) { return c.toDouble(); }
  bool integer(const Value &v, int64_t &out) {
    out = (int64_t)std::llround(v);
    return (double)out == v;
  }
  Value add(Value a, Value b) { return a + b; }
  Value sum(const std::vector<Value> &v) {
    double s = 0;
    for (double x : v)
      s += x;
    return s;
  }
  Value sub(Value a, Value b) { return a - b; }
  Value mul(Value a, Value b) { return a * b; }
  Value scale(Value a, const Rational &c) { return a * c.toDouble(); }
  Value apply(Fn f, std::vector<Value> args) { return evalFn(f, args); }
};

const char *kModule = R"mlir(
  dist.mesh @mesh axes = ["dp", "tp"] shape = [2, 2]
  func.func @f(%a: tensor<2x3xf32>, %b: tensor<2x2xf32>, %p: tensor<2x2xf32>)
      attributes {dist.mesh = @mesh} {
    %0 = ref.matmul %a, %b contract(0, 0) : tensor<2x3xf32>, tensor<2x2xf32>
    %1 = ref.reduce_sum %a dims [0] : tensor<2x3xf32>
    %2 = ref.mse_loss %b, %p : tensor<2x2xf32>
    %3 = dist.all_reduce %p over ["tp"] "sum" : tensor<2x2xf32> -> tensor<2x2xf32>
    %4 = dist.all_gather %p over ["dp"] dim 0 : tensor<2x2xf32> -> tensor<4x2xf32>
    %5 = dist.reduce_scatter %p over ["tp"] dim 1 "avg" : tensor<2x2xf32> -> tensor<2x1xf32>
    return
  }
)mlir";

Tensor<double> tensor(Shape s, std::vector<double> v) {
  Tensor<double> t;
  t.shape = std::move(s);
  t.data = std::move(v);
  return t;
}
} // namespace

TEST_CASE("ref ops compute their documented values", "[semantics]") {
  mlir::MLIRContext ctx;
  registerDialects(ctx);
  auto module = mlir::parseSourceString<mlir::ModuleOp>(kModule, &ctx);
  REQUIRE(module);
  std::vector<mlir::Operation *> ops;
  module->walk([&](mlir::Operation *op) {
    if (op->getDialect() && op->getDialect()->getNamespace() != "func" &&
        op->getDialect()->getNamespace() != "builtin" && !mlir::isa<dist::MeshOp>(op))
      ops.push_back(op);
  });
  REQUIRE(ops.size() == 6);
  DoubleDomain d;
  auto a = tensor({2, 3}, {1, 2, 3, 4, 5, 6});
  auto b = tensor({2, 2}, {1, 0, 0, 2});
  Tensor<double> out;
  // matmul contracting dim 0 with dim 0: a^T b.
  REQUIRE(evalRefOp(d, ops[0], {&a, &b}, out).empty());
  CHECK(out.shape == Shape{3, 2});
  CHECK(out.data == std::vector<double>{1, 8, 2, 10, 3, 12});
  REQUIRE(evalRefOp(d, ops[1], {&a}, out).empty());
  CHECK(out.data == std::vector<double>{5, 7, 9});
  auto p = tensor({2, 2}, {1, 1, 1, 1});
  REQUIRE(evalRefOp(d, ops[2], {&b, &p}, out).empty());
  CHECK(out.shape.empty());
  CHECK(out.data[0] == Approx((0 + 1 + 1 + 1) / 4.0));
}

TEST_CASE("collectives follow the mesh groups", "[semantics]") {
  mlir::MLIRContext ctx;
  registerDialects(ctx);
  auto module = mlir::parseSourceString<mlir::ModuleOp>(kModule, &ctx);
  REQUIRE(module);
  std::vector<mlir::Operation *> colls;
  module->walk([&](mlir::Operation *op) {
    if (mlir::isa<dist::AllReduceOp, dist::AllGatherOp, dist::ReduceScatterOp>(op))
      colls.push_back(op);
  });
  REQUIRE(colls.size() == 3);
  Mesh mesh{"mesh", {"dp", "tp"}, {2, 2}};
  DoubleDomain d;
  std::vector<Tensor<double>> in;
  for (int r = 0; r < 4; ++r)
    in.push_back(tensor({2, 2}, {double(r), double(10 * r), 1, 1}));
  std::vector<const Tensor<double> *> ptrs;
  for (auto &t : in)
    ptrs.push_back(&t);
  std::vector<Tensor<double>> out;
  // all_reduce over tp: ranks {0,1} and {2,3}.
  REQUIRE(evalCollective(d, colls[0], mesh, ptrs, out).empty());
  CHECK(out[0].data == std::vector<double>{1, 10, 2, 2});
  CHECK(out[3].data == std::vector<double>{5, 50, 2, 2});
  // all_gather over dp along dim 0: rank 1 gets [rank 1; rank 3].
  REQUIRE(evalCollective(d, colls[1], mesh, ptrs, out).empty());
  CHECK(out[1].shape == Shape{4, 2});
  CHECK(out[1].data == std::vector<double>{1, 10, 1, 1, 3, 30, 1, 1});
  // reduce_scatter avg over tp along dim 1: rank 1 keeps column 1 of the average.
  REQUIRE(evalCollective(d, colls[2], mesh, ptrs, out).empty());
  CHECK(out[1].shape == Shape{2, 1});
  CHECK(out[1].data == std::vector<double>{5, 1});
}

namespace {
const char *kTransformerOps = R"mlir(
  func.func @f(%x: tensor<2x3xf32>, %v: tensor<3xf32>, %s: tensor<2x2xf32>,
               %q: tensor<1x2x4xf32>, %cs: tensor<2x4xf32>, %sn: tensor<2x4xf32>,
               %lab: tensor<2x3xf32>, %m: tensor<2xf32>) {
    %0 = ref.transpose %x perm [1, 0] : tensor<2x3xf32>
    %1 = ref.broadcast %v dims [1] : tensor<3xf32> -> tensor<2x3xf32>
    %2 = ref.slice %x offsets [1, 1] sizes [1, 2] : tensor<2x3xf32>
    %3 = ref.concat %x, %x dim 0 : tensor<2x3xf32>, tensor<2x3xf32>
    %4 = ref.softmax %x : tensor<2x3xf32>
    %5 = ref.causal_softmax %s : tensor<2x2xf32>
    %6 = ref.rms_norm %x, %v eps 0.0 : tensor<2x3xf32>, tensor<3xf32>
    %7 = ref.rotary %q, %cs, %sn : tensor<1x2x4xf32>, tensor<2x4xf32>
    %8 = ref.cross_entropy %x, %lab, %m : tensor<2x3xf32>, tensor<2xf32>
    %9 = ref.reduce_max %x dims [1] : tensor<2x3xf32>
    %10 = ref.reshape %x : tensor<2x3xf32> -> tensor<3x2xf32>
    %11 = ref.batch_matmul %q, %q contract(2, 2) : tensor<1x2x4xf32>, tensor<1x2x4xf32>
    %12 = ref.layer_norm %x, %v, %v eps 0.0 : tensor<2x3xf32>, tensor<3xf32>, tensor<3xf32>
    return
  }
)mlir";
} // namespace

TEST_CASE("transformer-block ops compute their documented values", "[semantics]") {
  mlir::MLIRContext ctx;
  registerDialects(ctx);
  auto module = mlir::parseSourceString<mlir::ModuleOp>(kTransformerOps, &ctx);
  REQUIRE(module);
  std::vector<mlir::Operation *> ops;
  module->walk([&](mlir::Operation *op) {
    if (op->getDialect() && op->getDialect()->getNamespace() == "ref")
      ops.push_back(op);
  });
  REQUIRE(ops.size() == 13);
  DoubleDomain d;
  auto x = tensor({2, 3}, {1, 2, 3, 4, 5, 6});
  auto v = tensor({3}, {1, 1, 2});
  Tensor<double> out;
  REQUIRE(evalRefOp(d, ops[0], {&x}, out).empty());
  CHECK(out.shape == Shape{3, 2});
  CHECK(out.data == std::vector<double>{1, 4, 2, 5, 3, 6});
  REQUIRE(evalRefOp(d, ops[1], {&v}, out).empty());
  CHECK(out.data == std::vector<double>{1, 1, 2, 1, 1, 2});
  REQUIRE(evalRefOp(d, ops[2], {&x}, out).empty());
  CHECK(out.data == std::vector<double>{5, 6});
  REQUIRE(evalRefOp(d, ops[3], {&x, &x}, out).empty());
  CHECK(out.shape == Shape{4, 3});
  CHECK(out.data[9] == 4);
  REQUIRE(evalRefOp(d, ops[4], {&x}, out).empty());
  double z = std::exp(1) + std::exp(2) + std::exp(3);
  CHECK(out.data[0] == Approx(std::exp(1) / z));
  CHECK(out.data[0] + out.data[1] + out.data[2] == Approx(1.0));
  auto s = tensor({2, 2}, {7, 9, 1, 1});
  REQUIRE(evalRefOp(d, ops[5], {&s}, out).empty());
  CHECK(out.data == std::vector<double>{1, 0, 0.5, 0.5}); // row 0 sees only key 0
  REQUIRE(evalRefOp(d, ops[6], {&x, &v}, out).empty());
  CHECK(out.data[2] == Approx(3 / std::sqrt(14.0 / 3) * 2));
  auto q = tensor({1, 2, 4}, {1, 2, 3, 4, 5, 6, 7, 8});
  auto cs = tensor({2, 4}, {1, 1, 1, 1, 0, 0, 0, 0});
  auto sn = tensor({2, 4}, {0, 0, 0, 0, 1, 1, 1, 1});
  REQUIRE(evalRefOp(d, ops[7], {&q, &cs, &sn}, out).empty());
  // Position 0: identity; position 1: rotate_half(x) = [-x2, -x3, x0, x1].
  CHECK(out.data == std::vector<double>{1, 2, 3, 4, -7, -8, 5, 6});
  auto lab = tensor({2, 3}, {0, 0, 1, 1, 0, 0});
  auto mask = tensor({2}, {1, 0});
  REQUIRE(evalRefOp(d, ops[8], {&x, &lab, &mask}, out).empty());
  CHECK(out.data[0] == Approx(std::log(z) - 3)); // token 1 is ignored
  REQUIRE(evalRefOp(d, ops[9], {&x}, out).empty());
  CHECK(out.data == std::vector<double>{3, 6});
  REQUIRE(evalRefOp(d, ops[10], {&x}, out).empty());
  CHECK(out.shape == Shape{3, 2});
  CHECK(out.data == x.data);
  REQUIRE(evalRefOp(d, ops[11], {&q, &q}, out).empty());
  CHECK(out.data == std::vector<double>{30, 70, 70, 174});
  REQUIRE(evalRefOp(d, ops[12], {&x, &v, &v}, out).empty());
  CHECK(out.data[0] == Approx(-1 / std::sqrt(2.0 / 3) + 1));
}

TEST_CASE("dropout masks: values, drop rate and determinism of the counter-based draw") {
  for (double p : {0.0, 0.1, 0.5}) {
    int dropped = 0;
    const int n = 20000;
    for (int c = 0; c < n; ++c) {
      double v = evalFn(Fn::DropMask, {7.0, double(c), p});
      REQUIRE((v == 0.0 || v == 1.0 / (1.0 - p)));
      dropped += v == 0.0;
      // The same (key, counter) always gives the same value.
      REQUIRE(v == evalFn(Fn::DropMask, {7.0, double(c), p}));
    }
    CHECK(std::fabs(double(dropped) / n - p) < 0.02);
  }
  // Different keys give different streams.
  int differ = 0;
  for (int c = 0; c < 1000; ++c)
    differ += counterUniform(1, c) != counterUniform(2, c);
  CHECK(differ == 1000);
  for (int c = 0; c < 1000; ++c) {
    double u = counterUniform(c, 3 * c);
    REQUIRE((u >= 0.0 && u < 1.0));
  }
  CHECK(evalFn(Fn::Pow, {0.9, 3.0}) == Approx(0.729));
}

TEST_CASE("zigzag: the layout, the collectives and the causal offset agree", "[semantics]") {
  // Layout: over (dp, cp) = (2, 2), 16 positions; dp splits into blocks of 8, and cp
  // rank p of each holds chunks p and 3-p (of 2 positions) of its block.
  Mesh mesh{"mesh", {"dp", "cp"}, {2, 2}};
  Layout l;
  l.dims = {{0, 1}};
  l.segments = {dist::kZigzagSegments};
  std::vector<int64_t> expect[4] = {{0, 1, 6, 7}, {2, 3, 4, 5}, {8, 9, 14, 15}, {10, 11, 12, 13}};
  std::set<int64_t> seen;
  for (int64_t r = 0; r < 4; ++r)
    for (int64_t i = 0; i < 4; ++i) {
      int64_t g = l.globalIndex(mesh, r, {4}, {i})[0];
      CHECK(g == expect[r][i]);
      seen.insert(g);
    }
  CHECK(seen.size() == 16); // a permutation: every position held exactly once
  CHECK(l.str(mesh) == "sharded on dim 0 over dp*cp in zigzag chunk order");

  // all_gather zigzag inverts shard_slice zigzag, and both agree with the layout.
  mlir::MLIRContext ctx;
  registerDialects(ctx);
  auto module = mlir::parseSourceString<mlir::ModuleOp>(R"mlir(
    dist.mesh @m axes = ["cp"] shape = [2]
    func.func @f(%x: tensor<8xf32>) attributes {dist.mesh = @m} {
      %s = dist.shard_slice %x over ["cp"] dim 0 zigzag : tensor<8xf32> -> tensor<4xf32>
      %g = dist.all_gather %s over ["cp"] dim 0 zigzag : tensor<4xf32> -> tensor<8xf32>
      %p = arith.constant 2 : index
      %c = ref.slice %g offsets [0] sizes [8] : tensor<8xf32>
      return
    })mlir", &ctx);
  REQUIRE(module);
  std::vector<mlir::Operation *> ops;
  module->walk([&](mlir::Operation *op) {
    if (mlir::isa<dist::ShardSliceOp, dist::AllGatherOp>(op))
      ops.push_back(op);
  });
  REQUIRE(ops.size() == 2);
  Mesh cp{"m", {"cp"}, {2}};
  DoubleDomain d;
  auto x = tensor({8}, {0, 1, 2, 3, 4, 5, 6, 7});
  std::vector<Tensor<double>> sliced, gathered;
  REQUIRE(evalCollective(d, ops[0], cp, {&x, &x}, sliced).empty());
  CHECK(sliced[0].data == std::vector<double>{0, 1, 6, 7});
  CHECK(sliced[1].data == std::vector<double>{2, 3, 4, 5});
  Layout one;
  one.dims = {{0}};
  one.segments = {dist::kZigzagSegments};
  for (int64_t r = 0; r < 2; ++r)
    for (int64_t i = 0; i < 4; ++i)
      CHECK(sliced[r].data[i] == double(one.globalIndex(cp, r, {4}, {i})[0]));
  REQUIRE(evalCollective(d, ops[1], cp, {&sliced[0], &sliced[1]}, gathered).empty());
  CHECK(gathered[0].data == x.data);
  CHECK(gathered[1].data == x.data);

  // A causal row sees the keys up to its own position; a row before every key sees none.
  CHECK(scalar::causalAllowed(0, 2, 8) == 3);
  CHECK(scalar::causalAllowed(1, 6, 8) == 8);
  CHECK(scalar::causalAllowed(0, -1, 8) == 0);
}
