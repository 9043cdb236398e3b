//===- VerifierTest.cpp - the verifier's options, through its library API --------===//
#include "Engine/Verifier.h"
#include "Import/LoadSpec.h"
#include "Spec/Spec.h"

#include <catch2/catch.hpp>

#include <string>

using namespace planproof;

namespace {
VerifyResult verifyFile(const std::string &relative, const VerifyOptions &options) {
  mlir::MLIRContext ctx;
  registerDialects(ctx);
  Spec spec;
  Diagnostics errors;
  std::string path = std::string(PLANPROOF_SOURCE_DIR "/verify-specs/") + relative;
  INFO(path << ": " << errors.str());
  REQUIRE(loadSpec(ctx, path, spec, errors));
  return verifySpec(spec, options);
}
} // namespace

TEST_CASE("a verdict-only run reaches the full run's verdict", "[verifier]") {
  // VerifyOptions::verdictOnly (what a fix hint's re-verification uses) skips the
  // minimization, localization and explanation: the verdict must not change.
  for (const char *f : {"mlp/mlp_tp2.mlir", "mlp/mlp_dp2_tp2_allreduce_wrong_group.mlir",
                        "transformer/llama_tp2_fused_qkv_even_split.mlir",
                        "mlp/mlp_tp2_grad_clip_sum_of_local_norms.mlir",
                        "moe/ep2_router_grad_not_reduced.mlir"}) {
    INFO(f);
    VerifyOptions full, quick;
    full.checkFixes = false;
    quick.checkFixes = false;
    quick.verdictOnly = true;
    VerifyResult a = verifyFile(f, full), b = verifyFile(f, quick);
    CHECK(b.verdict == a.verdict);
    if (a.verdict == Verdict::Violated) {
      // One unlocalized difference, reported at an output, with no counterexample.
      REQUIRE(b.violations.size() == 1);
      CHECK(b.violations[0].at.empty());
      CHECK_FALSE(b.violations[0].hasCounterexample);
      CHECK(b.violations[0].message.find("not localized") != std::string::npos);
    }
  }
}

TEST_CASE("a full run localizes the violation at the op that is wrong", "[verifier]") {
  VerifyOptions o;
  VerifyResult r = verifyFile("mlp/mlp_dp2_tp2_allreduce_wrong_group.mlir", o);
  REQUIRE(r.verdict == Verdict::Violated);
  REQUIRE_FALSE(r.violations.empty());
  CHECK(r.violations[0].kind == "reduction");
  CHECK(r.violations[0].at == "%y_pre");
  CHECK(r.violations[0].hasCounterexample);
}
