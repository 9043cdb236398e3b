//===- TransformsTest.cpp - lib/Transforms: deriving ref.grad --------------===//
#include "Engine/Verifier.h"
#include "Spec/Spec.h"
#include "Transforms/Autodiff.h"

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
