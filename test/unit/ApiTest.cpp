//===- ApiTest.cpp - the public C++ API (include/planproof/planproof.h) ------===//
//
// What a program linking the library sees: errors as values with their place, verdicts
// and findings as plain structs, the same reports as the CLI. (examples/verify-in-code
// checks the installed library from another project; ctest's install-example.)
//
//===----------------------------------------------------------------------===//
#include "planproof/planproof.h"

#include <catch2/catch.hpp>

#include <algorithm>
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
  CHECK(autoEngine.engine == Options::Engine::Auto); // the default, as the CLI's
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

TEST_CASE("a planner's loop: candidate plans against one reference reuse what they share",
          "[api]") {
  // The catalogue's Llama block under tp = 2, split into its reference and its plan.
  std::string whole = readFile(kSpecs + "transformer/llama_tp2.mlir");
  size_t mesh = whole.find("  dist.mesh");
  REQUIRE(mesh != std::string::npos);
  std::string planText = "module {\n" + whole.substr(mesh);
  std::string mlpAvg = planText;
  std::string sum = "%mlp_out_p over [\"tp\"] \"sum\"";
  REQUIRE(mlpAvg.find(sum) != std::string::npos);
  mlpAvg.replace(mlpAvg.find(sum), sum.size(), "%mlp_out_p over [\"tp\"] \"avg\"");

  Options layout;
  layout.engine = Options::Engine::Layout;
  Session session;
  auto base = session.load(kSpecs + "transformer/llama_tp2.mlir", layout);
  REQUIRE(base);
  Result first = session.verify(*base, layout);
  CHECK(first.verdict == Verdict::Verified);
  CHECK_FALSE(first.stats.reusedReference);
  CHECK(first.stats.reusedStates == 0);

  // The same plan again: the reference's run and every plan state are reused.
  auto same = session.loadPlan(*base, "same.mlir", planText, layout);
  REQUIRE(same);
  Result again = session.verify(*same, layout);
  CHECK(again.verdict == Verdict::Verified);
  CHECK(again.stats.reusedReference);
  CHECK(again.stats.reusedStates > 0);
  CHECK(again.stats.reusedStates == first.stats.planOps);

  // One collective changed: the ops before it are reused, the ones it reaches are not,
  // and the verdict is what a fresh session finds for the whole file.
  auto changed = session.loadPlan(*base, "avg.mlir", mlpAvg, layout);
  REQUIRE(changed);
  Result cand = session.verify(*changed, layout);
  CHECK(cand.verdict == Verdict::Inconclusive);
  CHECK(cand.stats.reusedStates > 0);
  CHECK(cand.stats.reusedStates < cand.stats.planOps);
  Session fresh;
  auto alone = fresh.loadText("avg.mlir", whole.substr(0, mesh) + mlpAvg.substr(9));
  REQUIRE(alone);
  Result byItself = fresh.verify(*alone, layout);
  CHECK(byItself.verdict == cand.verdict);
  REQUIRE(byItself.inconclusive.size() == cand.inconclusive.size());
  for (size_t i = 0; i < cand.inconclusive.size(); ++i)
    CHECK(byItself.inconclusive[i].second == cand.inconclusive[i].second);
  // The first place, in both, is the op that is wrong: where the plan departs from the
  // reference (from the reused reference's terms as from a fresh run's).
  REQUIRE(!cand.inconclusive.empty());
  size_t avgAt = mlpAvg.find("over [\"tp\"] \"avg\"");
  unsigned avgLine = 1 + (unsigned)std::count(mlpAvg.begin(), mlpAvg.begin() + avgAt, '\n');
  CHECK(cand.inconclusive[0].first.line == avgLine);
  CHECK(cand.inconclusive[0].second.find("the plan departs from the reference here: its value "
                                         "is 1/2 times") != std::string::npos);
  // The element engine decides the candidate too (its reference copied from base).
  CHECK(session.verify(*changed).verdict == Verdict::Violated);

  // Bad candidates are errors with their place.
  auto noPlan = session.loadPlan(*base, "empty.mlir", "module {\n}\n", layout);
  REQUIRE_FALSE(noPlan);
  CHECK(noPlan.error().at.file == "empty.mlir");
  auto broken = session.loadPlan(*base, "broken.mlir", "module {\n  func.func @plan(\n", layout);
  REQUIRE_FALSE(broken);
  CHECK(broken.error().at.file == "broken.mlir");
  CHECK(broken.error().at.line >= 2);
  auto json = session.loadPlan(*base, "plan.json", "{}", layout);
  REQUIRE_FALSE(json);
}

TEST_CASE("a planner's loop with the element engine reuses the reference's run", "[api]") {
  // The Llama block under tp = 2 and candidates one collective apart, decided by the
  // element engine in one session (the reference executed once) and each in a fresh
  // session: the same verdicts, the same violations at the same ops, the same
  // counterexample values.
  std::string whole = readFile(kSpecs + "transformer/llama_tp2.mlir");
  size_t mesh = whole.find("  dist.mesh");
  REQUIRE(mesh != std::string::npos);
  std::string planText = "module {\n" + whole.substr(mesh);
  auto flip = [&](const std::string &from, const std::string &to) {
    std::string out = planText;
    size_t at = out.find(from);
    REQUIRE(at != std::string::npos);
    out.replace(at, from.size(), to);
    return out;
  };
  std::vector<std::string> candidates = {
      flip("%mlp_out_p over [\"tp\"] \"sum\"", "%mlp_out_p over [\"tp\"] \"avg\""), planText,
      flip("%mlp_out_p over [\"tp\"] \"sum\"", "%mlp_out_p over [\"tp\"] \"max\""), planText};

  Options element;
  element.engine = Options::Engine::Element;
  Session session;
  auto base = session.load(kSpecs + "transformer/llama_tp2.mlir");
  REQUIRE(base);
  Result first = session.verify(*base, element);
  CHECK(first.verdict == Verdict::Verified);
  CHECK_FALSE(first.stats.reusedReference);
  for (size_t i = 0; i < candidates.size(); ++i) {
    CAPTURE(i);
    auto cand = session.loadPlan(*base, "cand.mlir", candidates[i]);
    REQUIRE(cand);
    Result r = session.verify(*cand, element);
    CHECK(r.stats.reusedReference);
    Session fresh;
    auto alone = fresh.loadText("cand.mlir", whole.substr(0, mesh) + candidates[i].substr(9));
    REQUIRE(alone);
    Result f = fresh.verify(*alone, element);
    CHECK_FALSE(f.stats.reusedReference);
    CHECK(r.verdict == f.verdict);
    CHECK(r.verdict == (i % 2 ? Verdict::Verified : Verdict::Violated));
    REQUIRE(r.violations.size() == f.violations.size());
    for (size_t k = 0; k < r.violations.size(); ++k) {
      CHECK(r.violations[k].op == f.violations[k].op);
      CHECK(r.violations[k].kind == f.violations[k].kind);
      CHECK(r.violations[k].message == f.violations[k].message);
      CHECK(r.violations[k].hint == f.violations[k].hint);
      REQUIRE(r.violations[k].counterexample.has_value() ==
              f.violations[k].counterexample.has_value());
      if (r.violations[k].counterexample) {
        CHECK(r.violations[k].counterexample->reference == f.violations[k].counterexample->reference);
        CHECK(r.violations[k].counterexample->plan == f.violations[k].counterexample->plan);
      }
    }
  }
  // Another reference in the same session: nothing of the first is taken for it.
  auto other = session.load(kSpecs + "mlp/mlp_tp2.mlir");
  REQUIRE(other);
  Result o = session.verify(*other, element);
  CHECK(o.verdict == Verdict::Verified);
  CHECK_FALSE(o.stats.reusedReference);
}

TEST_CASE("a planner's loop tells layouts apart by the rows each rank holds", "[api]") {
  // A candidate whose only change makes an op's operand hold plain blocks instead of
  // zigzag chunks must not reuse the state computed for the zigzag one.
  const std::string ref = R"(module {
  func.func @reference(%x: tensor<2x8xf32> {ref.name = "x"}) -> (tensor<2x8xf32> {ref.name = "y"}) attributes {ref.reference} {
    %y = ref.scale %x by 2.0 : tensor<2x8xf32>
    return %y : tensor<2x8xf32>
  }
)";
  auto plan = [](const char *zig) {
    return std::string(R"(module {
  dist.mesh @mesh axes = ["cp"] shape = [2]
  func.func @plan(%x: tensor<2x8xf32> {dist.value = "x", dist.layout = #dist.layout<[_, _]>}) -> (tensor<2x4xf32> {dist.value = "y", dist.layout = #dist.layout<[_, cp zigzag]>}) attributes {dist.mesh = @mesh} {
    %s = dist.shard_slice %x over ["cp"] dim 1)") +
           zig + R"( : tensor<2x8xf32> -> tensor<2x4xf32>
    %y = ref.scale %s by 2.0 : tensor<2x4xf32>
    return %y : tensor<2x4xf32>
  }
}
)";
  };
  Options layout;
  layout.engine = Options::Engine::Layout;
  Session session;
  std::string whole = plan(" zigzag");
  auto base = session.loadText("zigzag.mlir", ref + whole.substr(9));
  REQUIRE(base);
  CHECK(session.verify(*base, layout).verdict == Verdict::Verified);
  auto plain = session.loadPlan(*base, "plain.mlir", plan(""), layout);
  REQUIRE(plain);
  Result cand = session.verify(*plain, layout);
  CHECK(cand.verdict != Verdict::Verified);
  CHECK(cand.stats.reusedReference);
  CHECK(session.verify(*plain).verdict == Verdict::Violated);
}
