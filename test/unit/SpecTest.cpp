//===- SpecTest.cpp - lib/Spec: a verification problem from MLIR -----------===//
#include "Spec/Spec.h"

#include <catch2/catch.hpp>

#include <string>

using namespace planproof;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

namespace {
// y = x * w with both inputs and the result split over tp on a dp x tp mesh.
const char *kSpec = R"(module {
  func.func @reference(%x: tensor<4xf32> {ref.name = "x"}, %w: tensor<4xf32> {ref.name = "w"})
      -> (tensor<4xf32> {ref.name = "y"}) attributes {ref.reference} {
    %y = ref.mul %x, %w : tensor<4xf32>
    return %y : tensor<4xf32>
  }
  dist.mesh @mesh axes = ["dp", "tp"] shape = [2, 2]
  func.func @plan(%x: tensor<2xf32> {dist.value = "x", dist.layout = #dist.layout<[tp]>},
                  %w: tensor<2xf32> {dist.value = "w", dist.layout = #dist.layout<[tp]>})
      -> (tensor<2xf32> {dist.value = "y", dist.layout = #dist.layout<[tp]>})
      attributes {dist.mesh = @mesh} {
    %y_local = ref.mul %x, %w : tensor<2xf32>
    return %y_local : tensor<2xf32>
  }
}
)";

/// Loads `text` as spec "s.mlir"; false with the loader's errors.
bool load(mlir::MLIRContext &ctx, const std::string &text, Spec &spec, Diagnostics &errors) {
  registerDialects(ctx);
  return parseMlirSpecText(ctx, "s.mlir", text, spec, errors) && analyzeSpec(spec, errors);
}

std::string replaced(std::string text, const std::string &from, const std::string &to) {
  size_t at = text.find(from);
  REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}
} // namespace

TEST_CASE("a spec's functions, mesh and bindings", "[spec]") {
  mlir::MLIRContext ctx;
  Spec spec;
  Diagnostics errors;
  INFO(errors.str());
  REQUIRE(load(ctx, kSpec, spec, errors));
  CHECK(spec.reference);
  CHECK(spec.plan);
  CHECK(spec.mesh.axes == std::vector<std::string>{"dp", "tp"});
  CHECK(spec.mesh.shape == std::vector<int64_t>{2, 2});
  CHECK(spec.mesh.numRanks() == 4);
  CHECK(spec.mesh.rankStr(3) == "(dp=1, tp=1)");
  CHECK(spec.refInputs == std::vector<std::string>{"x", "w"});
  CHECK(spec.refOutputs == std::vector<std::string>{"y"});
  REQUIRE(spec.planInputs.size() == 2);
  CHECK(spec.planInputs[1].refName == "w");
  REQUIRE(spec.planOutputs.size() == 1);
  const Binding &y = spec.planOutputs[0];
  CHECK(y.refName == "y");
  // Dimension 0 split over tp (axis 1); replicated over dp.
  REQUIRE(y.layout.dims.size() == 1);
  CHECK(y.layout.dims[0] == std::vector<int>{1});
  CHECK(y.layout.partial.empty());
  CHECK(y.localShape == Shape{2});
  // The names users wrote are the names diagnostics use.
  mlir::Value returned = spec.plan.getBody().front().getTerminator()->getOperand(0);
  CHECK(spec.nameOf(returned) == "%y_local");
}

TEST_CASE("a plan that does not fit its reference is refused at its line", "[spec]") {
  struct Case {
    const char *from, *to, *error;
  };
  const Case cases[] = {
      // A binding to a value the reference does not have.
      {"dist.value = \"w\"", "dist.value = \"v\"",
       "s.mlir:9:19: error: plan argument #1 holds 'v', which is not an input of the "
       "reference"},
      // A layout over an axis the mesh does not have.
      {"%w: tensor<2xf32> {dist.value = \"w\", dist.layout = #dist.layout<[tp]>}",
       "%w: tensor<2xf32> {dist.value = \"w\", dist.layout = #dist.layout<[pp]>}",
       "layout names mesh axis 'pp', which mesh @mesh does not have"},
  };
  for (const Case &c : cases) {
    INFO(c.to);
    mlir::MLIRContext ctx;
    Spec spec;
    Diagnostics errors;
    CHECK_FALSE(load(ctx, replaced(kSpec, c.from, c.to), spec, errors));
    CHECK_THAT(errors.str(), Contains(c.error));
  }
  // A local shape that is not the reference's shape split by the layout.
  std::string text = kSpec;
  size_t plan = text.find("func.func @plan");
  for (size_t at; (at = text.find("tensor<2xf32>", plan)) != std::string::npos;)
    text.replace(at, 13, "tensor<3xf32>");
  mlir::MLIRContext ctx;
  Spec spec;
  Diagnostics errors;
  CHECK_FALSE(load(ctx, text, spec, errors));
  // The error is a value with its place; the text is what the CLI prints.
  REQUIRE(errors.size() == 1);
  CHECK(errors.list()[0].at.str() == "s.mlir:8:19");
  CHECK_THAT(errors.list()[0].message,
             StartsWith("plan argument #0 ('x'): local shape [3] is not the shard [2] of "
                        "reference shape [4]"));
  CHECK_THAT(errors.str(), StartsWith("s.mlir:8:19: error: plan argument #0 ('x')"));
}
