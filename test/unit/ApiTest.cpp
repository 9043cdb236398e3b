//===- ApiTest.cpp - the public C++ API (include/planproof/planproof.h) ------===//
//
// What a program linking the library sees: errors as values with their place, verdicts
// and findings as plain structs, the same reports as the CLI. (examples/verify-in-code
// checks the installed library from another project; ctest's install-example.)
//
//===----------------------------------------------------------------------===//
#include "planproof/planproof.h"

#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>

using namespace planproof::api;

namespace {
std::string readFile(const std::string &path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}
const std::string kSpecs = PLANPROOF_SOURCE_DIR "/verify-specs/";
} // namespace

TEST_CASE("the API loads, verifies and reports like the CLI", "[api]") {
  Session session;
  auto good = session.load(kSpecs + "json/mlp_tp2.json");
  REQUIRE(good);
  CHECK(good->ranks() == 2);
  Result r = session.verify(*good);
  CHECK(r.verdict == Verdict::Verified);
  CHECK(r.violations.empty());
  CHECK(r.json.find("\"verdict\": \"verified\"") != std::string::npos);

  // The same spec as text under another name, then its seeded bug.
  auto text = session.loadText("candidate", readFile(kSpecs + "json/mlp_tp2.json"));
  REQUIRE(text);
  CHECK(session.verify(*text).verdict == Verdict::Verified);
  auto bug = session.load(kSpecs + "json/mlp_tp2_bias_before_allreduce.json");
  REQUIRE(bug);
  Result v = session.verify(*bug);
  REQUIRE(v.verdict == Verdict::Violated);
  REQUIRE(!v.violations.empty());
  CHECK(!v.violations[0].kind.empty());
  CHECK(!v.violations[0].op.empty());
  CHECK(v.violations[0].at.line > 0);
  CHECK(std::string(verdictName(v.verdict)) == "violated");
}

TEST_CASE("the engine is an option: layout proves or abstains, auto falls back", "[api]") {
  Session session;
  auto good = session.load(kSpecs + "mlp/mlp_dp2_tp2.mlir");
  REQUIRE(good);
  Options layout;
  layout.engine = Options::Engine::Layout;
  CHECK(session.verify(*good, layout).verdict == Verdict::Verified);
  auto bug = session.load(kSpecs + "json/mlp_tp2_bias_before_allreduce.json");
  REQUIRE(bug);
  Result abstains = session.verify(*bug, layout);
  CHECK(abstains.verdict == Verdict::Inconclusive);
  CHECK(abstains.violations.empty());
  CHECK(!abstains.inconclusive.empty());
  Options autoEngine;
  autoEngine.engine = Options::Engine::Auto;
  Result found = session.verify(*bug, autoEngine);
  CHECK(found.verdict == Verdict::Violated);
  CHECK(!found.violations.empty());
}

TEST_CASE("bad input is an Error value with its place", "[api]") {
  Session session;
  auto json = session.loadText("bad.json", "{\"planproof\": 1,\n \"reference\": 3}");
  REQUIRE(!json);
  CHECK(json.error().at.file == "bad.json");
  CHECK(json.error().at.line == 2);
  CHECK(json.error().message.find("reference") != std::string::npos);
  CHECK(json.error().diagnostics.find("bad.json:2:") != std::string::npos);

  auto mlir = session.loadText("bad.mlir", "func.func @f(\n  %x: tensor<2xf32>) {\n  bogus\n}\n");
  REQUIRE(!mlir);
  CHECK(mlir.error().at.file == "bad.mlir");
  CHECK(mlir.error().at.line >= 1);

  auto missing = session.load("/nonexistent/spec.mlir");
  REQUIRE(!missing);
  CHECK(!missing.error().message.empty());

  auto spec = session.load(kSpecs + "json/mlp_tp2.json");
  REQUIRE(spec);
  ReplayOptions o;
  o.dtype = "fp16";
  auto replay = session.replay(*spec, o);
  REQUIRE(!replay);
  CHECK(replay.error().message.find("fp16") != std::string::npos);
  auto ok = session.replay(*spec);
  REQUIRE(ok);
  CHECK(ok->ran);
  CHECK(!ok->diverged);
}
