//===- OpFactsTest.cpp - op facts from ODS and ScalarFunctions.def --------===//
//
// The facts the engines take from the ops' definitions rather than from hand lists:
// each elementwise function op's scalar function (ScalarFunctionOpInterface) and the
// facts ScalarFunctions.def states about it (domain, sign, monotony, Lipschitz bound,
// enclosures), checked numerically here so that a new function with a wrong fact fails;
// the collective interface; the non-linearity interface.
//
//===----------------------------------------------------------------------===//
#include "Dist/DistDialect.h"
#include "Ref/RefDialect.h"
#include "Semantics/Functions.h"
#include "Semantics/OpSemantics.h"
#include "Spec/Spec.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/OperationSupport.h"

#include <catch2/catch.hpp>

#include <cfloat>
#include <cmath>
#include <set>
#include <vector>

using namespace planproof;

namespace {
/// Sample points: a grid over [-12, 12] and values near 0 and the grid's ends.
std::vector<double> samples() {
  std::vector<double> xs;
  for (int i = -480; i <= 480; ++i)
    xs.push_back(i / 40.0);
  for (double t : {1e-300, 1e-12, 1e-6, 0.1, 0.5, 30.0, 80.0})
    xs.insert(xs.end(), {t, -t});
  std::sort(xs.begin(), xs.end());
  xs.erase(std::unique(xs.begin(), xs.end()), xs.end());
  return xs;
}

bool inDomain(fn_facts::Domain d, double x) { return fn_facts::insideDomain(d, x, x); }

struct Facts {
  fn_facts::Monotony shape;
  double bound;
  fn_facts::Domain domain, sign;
};

Facts factsOf(Fn f) {
  using namespace fn_facts;
  switch (f) {
#define PLANPROOF_SCALAR_FUNCTION(Name, label, value, shape, bound, domain, sign, solver) \
  case Fn::Name:                                                                        \
    return {shape, bound, domain, sign};
#include "Ref/ScalarFunctions.def"
  default:
    FAIL("not a function of one argument");
  }
  return {};
}
} // namespace

TEST_CASE("every elementwise function op names a function of ScalarFunctions.def",
          "[opfacts]") {
  mlir::MLIRContext ctx;
  registerDialects(ctx);
  int ops = 0;
  for (mlir::RegisteredOperationName op : ctx.getRegisteredOperations()) {
    if (!op.hasInterface<ref::ScalarFunctionOp>())
      continue;
    ++ops;
    INFO(op.getStringRef().str());
    // Build one instance to ask its function.
    mlir::OpBuilder b(&ctx);
    mlir::OperationState state(b.getUnknownLoc(), op);
    auto t = mlir::RankedTensorType::get({2}, b.getF32Type());
    mlir::Value x = mlir::tensor::EmptyOp::create(b, b.getUnknownLoc(), t.getShape(),
                                                   t.getElementType());
    state.addOperands(x);
    state.addTypes(t);
    mlir::Operation *instance = b.create(state);
    std::optional<Fn> fn = unaryFunction(instance);
    REQUIRE(fn);
    CHECK(isUnary(*fn));
    // The op's mnemonic is the function's name.
    CHECK(std::string(fnInfo(*fn).name) == op.getStringRef().drop_front(4).str());
    instance->erase();
    x.getDefiningOp()->erase();
  }
  CHECK(ops >= 10); // gelu, exp, log, rsqrt, recip, silu, sqrt, tanh, logistic, step
}

TEST_CASE("ScalarFunctions.def's facts hold at sample points", "[opfacts]") {
  std::vector<double> xs = samples();
  for (int code = 0; code < kUnaryFunctions; ++code) {
    Fn f = Fn(code);
    Facts facts = factsOf(f);
    INFO(fnInfo(f).name);
    for (size_t i = 0; i < xs.size(); ++i) {
      double x = xs[i];
      INFO("x = " << x);
      double host = evalFn(f, {x}), device = scalar::unary(code, x); // one definition
      CHECK((host == device || (std::isnan(host) && std::isnan(device))));
      if (!inDomain(facts.domain, x)) {
        CHECK(fn_facts::outsideDomain(facts.domain, x, x));
        continue;
      }
      double v = scalar::unary(code, x);
      CHECK(!std::isnan(v));
      switch (facts.sign) {
      case fn_facts::Positive: CHECK(v > 0); break;
      case fn_facts::Nonnegative: CHECK(v >= 0); break;
      case fn_facts::SignOfArgument: CHECK((v > 0) == (x > 0)); break;
      default: break;
      }
      if (i + 1 == xs.size() || !inDomain(facts.domain, xs[i + 1]))
        continue;
      double y = xs[i + 1], w = scalar::unary(code, y);
      if (facts.domain == fn_facts::Nonzero && (x < 0) != (y < 0))
        continue; // monotone on each side of the pole
      switch (facts.shape) {
      case fn_facts::Increasing: CHECK(v <= w); break;
      case fn_facts::Decreasing: CHECK(v >= w); break;
      case fn_facts::StepUp: CHECK(((v == 0 || v == 1) && v <= w)); break;
      case fn_facts::Lipschitz:
        CHECK(std::fabs(w - v) <= facts.bound * (y - x) * (1 + 1e-12) +
                                     4 * DBL_EPSILON * std::max(std::fabs(v), std::fabs(w)));
        break;
      }
      // The enclosure of [x, y] holds the function at both ends and the middle.
      double lo, hi, m = x + (y - x) / 2;
      if (fnEnclosure(f, x, y, lo, hi))
        for (double t : {x, m, y})
          CHECK((lo <= scalar::unary(code, t) && scalar::unary(code, t) <= hi));
    }
  }
}

TEST_CASE("collectives state their axes, communication and reduction in ODS", "[opfacts]") {
  mlir::MLIRContext ctx;
  registerDialects(ctx);
  std::set<std::string> collectives, communicating, reducing;
  for (mlir::RegisteredOperationName op : ctx.getRegisteredOperations())
    if (op.hasInterface<dist::CollectiveOp>())
      collectives.insert(op.getStringRef().str());
  CHECK(collectives == std::set<std::string>{"dist.all_gather", "dist.all_reduce",
                                             "dist.all_to_all", "dist.reduce_scatter",
                                             "dist.shard_pad", "dist.shard_slice"});
  CHECK(dist::AllReduceOp::communicates());
  CHECK(dist::AllToAllOp::communicates());
  CHECK(!dist::ShardSliceOp::communicates());
  CHECK(!dist::ShardPadOp::communicates());
  // The checkpoint ops, and only they, have the checkpoint interface.
  std::set<std::string> checkpoint;
  for (mlir::RegisteredOperationName op : ctx.getRegisteredOperations())
    if (op.hasInterface<dist::CheckpointOp>())
      checkpoint.insert(op.getStringRef().str());
  CHECK(checkpoint == std::set<std::string>{"dist.load", "dist.save"});
  CHECK(dist::SaveOp::saves());
  CHECK(!dist::LoadOp::saves());
}

TEST_CASE("ops say in which operands they are not linear", "[opfacts]") {
  // div is linear in its numerator, gelu_grad and silu_grad in the incoming gradient:
  // a partial value there is fine; a partial denominator or forward input is not.
  CHECK(ref::DivOp::getNonlinearOperands() == 0b10);
  CHECK(ref::GeluGradOp::getNonlinearOperands() == 0b01);
  CHECK(ref::SiluGradOp::getNonlinearOperands() == 0b01);
  CHECK(ref::SoftmaxOp::getNonlinearOperands() == ~0u);
  // Lookups are linear in the table (the gradient), rotary in its input, not in the ids
  // or the tables; LayoutFactorsTest checks every such claim numerically.
  CHECK(ref::EmbeddingOp::getNonlinearOperands() == ~1u);
  CHECK(ref::EmbeddingGradOp::getNonlinearOperands() == ~1u);
  CHECK(ref::RotaryOp::getNonlinearOperands() == ~1u);
  mlir::MLIRContext ctx;
  registerDialects(ctx);
  for (mlir::RegisteredOperationName op : ctx.getRegisteredOperations()) {
    INFO(op.getStringRef().str());
    // Every elementwise function is nonlinear; linear ops never claim to be.
    if (op.hasInterface<ref::ScalarFunctionOp>())
      CHECK(op.hasInterface<ref::NonlinearOp>());
    for (const char *linear : {"ref.add", "ref.sub", "ref.mul", "ref.matmul", "ref.scale",
                               "ref.reduce_sum", "ref.transpose"})
      if (op.getStringRef() == linear)
        CHECK(!op.hasInterface<ref::NonlinearOp>());
  }
}
