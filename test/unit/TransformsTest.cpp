//===- TransformsTest.cpp - lib/Transforms: deriving ref.grad --------------===//
#include "Engine/Verifier.h"
#include "Spec/Spec.h"
#include "Transforms/Autodiff.h"
#include "planproof/planproof.h"

#include "Dist/DistDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"

#include <catch2/catch.hpp>

#include <string>

using namespace planproof;
using Catch::Matchers::Contains;

namespace {
// d/dx and d/dw of sum(gelu(x * w)).
const char *kGrad = R"(
func.func @f(%x: tensor<4xf32>, %w: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %y = ref.mul %x, %w : tensor<4xf32>
  %a = ref.gelu %y : tensor<4xf32>
  %l = ref.reduce_sum %a dims [0] : tensor<4xf32>
  %dx, %dw = ref.grad %l wrt %x, %w : tensor<f32>, tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>, tensor<4xf32>
  return %dx, %dw : tensor<4xf32>, tensor<4xf32>
}
)";

int countOps(mlir::Operation *root, llvm::StringRef name) {
  int n = 0;
  root->walk([&](mlir::Operation *op) { n += op->getName().getStringRef() == name; });
  return n;
}

/// A spec whose reference derives the gradients with ref.grad and whose plan (two
/// ranks, everything replicated) computes them by hand as `dx` and `dw`.
std::string gradSpec(const std::string &dx, const std::string &dw) {
  return R"(
module {
  func.func @reference(%x: tensor<4xf32> {ref.name = "x"}, %w: tensor<4xf32> {ref.name = "w"})
      -> (tensor<4xf32> {ref.name = "dx"}, tensor<4xf32> {ref.name = "dw"})
      attributes {ref.reference} {
    %y = ref.mul %x, %w : tensor<4xf32>
    %a = ref.gelu %y : tensor<4xf32>
    %l = ref.reduce_sum %a dims [0] : tensor<4xf32>
    %dx, %dw = ref.grad %l wrt %x, %w : tensor<f32>, tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>, tensor<4xf32>
    return %dx, %dw : tensor<4xf32>, tensor<4xf32>
  }
  dist.mesh @mesh axes = ["tp"] shape = [2]
  func.func @plan(%x: tensor<4xf32> {dist.value = "x", dist.layout = #dist.layout<[_]>},
                  %w: tensor<4xf32> {dist.value = "w", dist.layout = #dist.layout<[_]>})
      -> (tensor<4xf32> {dist.value = "dx", dist.layout = #dist.layout<[_]>},
          tensor<4xf32> {dist.value = "dw", dist.layout = #dist.layout<[_]>})
      attributes {dist.mesh = @mesh} {
    %y = ref.mul %x, %w : tensor<4xf32>
    %one = ref.constant 1.0 : tensor<f32>
    %ones = ref.broadcast %one dims [] : tensor<f32> -> tensor<4xf32>
    %g = ref.gelu_grad %y, %ones : tensor<4xf32>
    %gx = ref.mul %g, )" + dx + R"( : tensor<4xf32>
    %gw = ref.mul %g, )" + dw + R"( : tensor<4xf32>
    return %gx, %gw : tensor<4xf32>, tensor<4xf32>
  }
}
)";
}

Verdict verifyText(const std::string &text) {
  mlir::MLIRContext ctx;
  registerDialects(ctx);
  Spec spec;
  Diagnostics errors;
  INFO(errors.str());
  REQUIRE(parseMlirSpecText(ctx, "grad.mlir", text, spec, errors));
  REQUIRE(analyzeSpec(spec, errors));
  VerifyOptions options;
  options.checkFixes = false;
  return verifySpec(spec, options).verdict;
}
} // namespace

TEST_CASE("ref.grad is replaced by ref ops, and the module stays valid", "[transforms]") {
  mlir::MLIRContext ctx;
  registerDialects(ctx);
  mlir::OwningOpRef<mlir::ModuleOp> m = mlir::parseSourceString<mlir::ModuleOp>(kGrad, &ctx);
  REQUIRE(m);
  REQUIRE(countOps(*m, "ref.grad") == 1);
  std::string why;
  mlir::Location where = mlir::UnknownLoc::get(&ctx);
  REQUIRE(mlir::succeeded(expandGradOps(*m, why, where)));
  CHECK(why.empty());
  CHECK(countOps(*m, "ref.grad") == 0);
  // gelu's derivative appears once, shared by both gradients (chain rule through mul).
  CHECK(countOps(*m, "ref.gelu_grad") == 1);
  CHECK(mlir::succeeded(mlir::verify(*m)));
}

TEST_CASE("derived gradients mean what the hand-written ones do", "[transforms]") {
  // d/dx sum(gelu(x w)) = gelu'(x w) * w, and d/dw = gelu'(x w) * x: the verifier
  // proves the plan's hand-written gradients equal to the derived ones...
  CHECK(verifyText(gradSpec("%w", "%x")) == Verdict::Verified);
  // ...and not with the factors swapped.
  CHECK(verifyText(gradSpec("%x", "%w")) == Verdict::Violated);
}

TEST_CASE("an op without a derivative rule is refused at that op", "[transforms]") {
  std::string text = kGrad;
  std::string mul = "%y = ref.mul %x, %w : tensor<4xf32>";
  text.replace(text.find(mul), mul.size(), "%y = ref.sgd_update %w, %x lr 0.1 : tensor<4xf32>");
  mlir::MLIRContext ctx;
  registerDialects(ctx);
  mlir::OwningOpRef<mlir::ModuleOp> m = mlir::parseSourceString<mlir::ModuleOp>(text, &ctx);
  REQUIRE(m);
  std::string why;
  mlir::Location where = mlir::UnknownLoc::get(&ctx);
  CHECK(mlir::failed(expandGradOps(*m, why, where)));
  CHECK_THAT(why, Contains("no derivative rule for 'ref.sgd_update'"));
  auto file = mlir::dyn_cast<mlir::FileLineColLoc>(where);
  REQUIRE(file);
  CHECK(file.getLine() == 3); // the line of ref.sgd_update in `text`
}

namespace {
/// The step of `text` (with calls) derived as the loader derives it -- calls expanded,
/// then ref.grad -- or, `throughCalls`, ref.grad first (each call's backward a call of
/// its callee's vjp function) and the calls expanded after.
mlir::OwningOpRef<mlir::ModuleOp> derived(mlir::MLIRContext &ctx, const std::string &text,
                                          bool throughCalls) {
  mlir::OwningOpRef<mlir::ModuleOp> m = mlir::parseSourceString<mlir::ModuleOp>(text, &ctx);
  REQUIRE(m);
  Spec spec;
  Diagnostics errors;
  std::string why;
  mlir::Location where = mlir::UnknownLoc::get(&ctx);
  if (!throughCalls)
    REQUIRE(inlineCalls(*m, spec, errors));
  INFO(why);
  REQUIRE(mlir::succeeded(expandGradOps(*m, why, where, nullptr, nullptr, nullptr, throughCalls)));
  if (throughCalls) {
    CHECK(countOps(*m, "func.call") > 0); // (vjp calls among them)
    REQUIRE(inlineCalls(*m, spec, errors));
  }
  CHECK(countOps(*m, "func.call") == 0);
  return m;
}

/// A spec of `ref`'s reference and `plan`'s plan (and mesh).
std::string hybrid(mlir::ModuleOp ref, mlir::ModuleOp plan) {
  mlir::OpBuilder b(ref.getContext());
  mlir::OwningOpRef<mlir::ModuleOp> out = mlir::ModuleOp::create(b.getUnknownLoc());
  b.setInsertionPointToEnd(out->getBody());
  ref.walk([&](mlir::func::FuncOp f) {
    if (f->hasAttr("ref.reference"))
      b.clone(*f);
  });
  plan.walk([&](mlir::Operation *op) {
    if (mlir::isa<dist::MeshOp>(op) || (mlir::isa<mlir::func::FuncOp>(op) && op->hasAttr("dist.mesh")))
      b.clone(*op);
  });
  std::string text;
  llvm::raw_string_ostream os(text);
  out->print(os);
  return text;
}
} // namespace

TEST_CASE("backward passes through calls compute what the expanded step's do", "[transforms]") {
  // Each compact plan's step derived both ways: the reference derived through its
  // calls' vjp functions against the plan derived expanded, and the other way round,
  // proved equal by the element engine (a vjp function that dropped, doubled or
  // misplaced a contribution would differ from the expanded derivation).
  for (const char *parallel : {"tp=2,layers=2,compact", "pp=2,microbatches=2,layers=2,compact"}) {
    INFO(parallel);
    auto text = api::generatePlan(PLANPROOF_SOURCE_DIR "/verify-specs/models/llama3-8b.json", parallel);
    REQUIRE(text);
    mlir::MLIRContext ctx;
    registerDialects(ctx);
    auto expanded = derived(ctx, *text, false);
    auto through = derived(ctx, *text, true);
    CHECK(verifyText(hybrid(*through, *expanded)) == Verdict::Verified);
    CHECK(verifyText(hybrid(*expanded, *through)) == Verdict::Verified);
  }
}

TEST_CASE("a vjp function per callee and differentiated arguments", "[transforms]") {
  // Two calls of one layer: the second's input depends on the first layer's weight,
  // the first's does not -- two vjp functions, each returning only the gradients its
  // call site needs, callees' bodies computed again before their backward pass.
  const char *text = R"(
module {
  func.func private @layer(%x: tensor<2x4xf32>, %w: tensor<4x4xf32>) -> tensor<2x4xf32> {
    %h = ref.matmul %x, %w contract(1, 0) : tensor<2x4xf32>, tensor<4x4xf32>
    %a = ref.gelu %h : tensor<2x4xf32>
    return %a : tensor<2x4xf32>
  }
  func.func @f(%x: tensor<2x4xf32>, %w: tensor<4x4xf32>, %v: tensor<4x4xf32>)
      -> (tensor<4x4xf32>, tensor<4x4xf32>) {
    %l0 = func.call @layer(%x, %w) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %l1 = func.call @layer(%l0, %v) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %s = ref.reduce_sum %l1 dims [0, 1] : tensor<2x4xf32>
    %dw, %dv = ref.grad %s wrt %w, %v : tensor<f32>, tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>, tensor<4x4xf32>
    return %dw, %dv : tensor<4x4xf32>, tensor<4x4xf32>
  }
}
)";
  mlir::MLIRContext ctx;
  registerDialects(ctx);
  mlir::OwningOpRef<mlir::ModuleOp> m = mlir::parseSourceString<mlir::ModuleOp>(text, &ctx);
  REQUIRE(m);
  std::string why;
  mlir::Location where = mlir::UnknownLoc::get(&ctx);
  REQUIRE(mlir::succeeded(expandGradOps(*m, why, where, nullptr, nullptr, nullptr, true)));
  CHECK(mlir::succeeded(mlir::verify(*m)));
  auto first = m->lookupSymbol<mlir::func::FuncOp>("layer.vjp.01"); // d/dw only
  auto second = m->lookupSymbol<mlir::func::FuncOp>("layer.vjp");   // d/dx and d/dv
  REQUIRE(first);
  REQUIRE(second);
  CHECK(first.getNumArguments() == 3); // x, w and the result's cotangent
  CHECK(first.getNumResults() == 1);
  CHECK(second.getNumResults() == 2);
  CHECK(countOps(first, "ref.gelu") == 1);      // the forward, again
  CHECK(countOps(first, "ref.gelu_grad") == 1); // and its backward
  CHECK(countOps(*m, "ref.grad") == 0);
  // Without the option, a call on the differentiated path has no rule.
  mlir::OwningOpRef<mlir::ModuleOp> again = mlir::parseSourceString<mlir::ModuleOp>(text, &ctx);
  CHECK(mlir::failed(expandGradOps(*again, why, where)));
  CHECK_THAT(why, Contains("no derivative rule for 'func.call'"));
}

TEST_CASE("a function with effects is not differentiated through its call", "[transforms]") {
  const char *text = R"(
module {
  dist.mesh @mesh axes = ["pp"] shape = [2]
  func.func private @layer(%x: tensor<4xf32>) -> tensor<4xf32>
      attributes {dist.mesh = @mesh, dist.pipeline = "pp"} {
    %y = ref.gelu %x : tensor<4xf32>
    dist.send %y from 0 to 1 tag "a" : tensor<4xf32>
    return %y : tensor<4xf32>
  }
  func.func @f(%x: tensor<4xf32>) -> tensor<4xf32>
      attributes {dist.mesh = @mesh, dist.pipeline = "pp"} {
    %y = func.call @layer(%x) : (tensor<4xf32>) -> tensor<4xf32>
    %s = ref.reduce_sum %y dims [0] : tensor<4xf32>
    %dx = ref.grad %s wrt %x : tensor<f32>, tensor<4xf32> -> tensor<4xf32>
    return %dx : tensor<4xf32>
  }
}
)";
  mlir::MLIRContext ctx;
  registerDialects(ctx);
  mlir::OwningOpRef<mlir::ModuleOp> m = mlir::parseSourceString<mlir::ModuleOp>(text, &ctx);
  REQUIRE(m);
  std::string why;
  mlir::Location where = mlir::UnknownLoc::get(&ctx);
  CHECK(mlir::failed(expandGradOps(*m, why, where, nullptr, nullptr, nullptr, true)));
  CHECK_THAT(why, Contains("'dist.send' cannot be computed again"));
}
