//===- PlanTest.cpp - lib/Plan: `planproof plan`'s generator ---------------===//
#include "Engine/Verifier.h"
#include "LayoutEngine/LayoutEngine.h"
#include "Import/LoadSpec.h"
#include "Plan/PlanGen.h"
#include "Spec/Spec.h"

#include <catch2/catch.hpp>

#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <unistd.h>

using namespace planproof;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

namespace {
std::string modelPath(const char *name) {
  return std::string(PLANPROOF_SOURCE_DIR "/verify-specs/models/") + name;
}

/// `text` in a file of its own, removed when the test ends.
struct TempFile {
  std::string path;
  TempFile(const std::string &text, const char *suffix) {
    path = "/tmp/planproof-unittest-" + std::to_string(getpid()) + suffix;
    std::ofstream(path) << text;
  }
  ~TempFile() { std::remove(path.c_str()); }
};

/// `planproof plan --model MODEL.json --parallel PARALLEL`, in process.
bool generateFor(const char *model, const char *parallel, std::string &mlir, std::string &err) {
  plangen::Model m;
  Diagnostics errors;
  REQUIRE(plangen::readModel(modelPath(model), m, errors));
  plangen::Parallel p;
  REQUIRE(plangen::parseParallel(parallel, p, err));
  return plangen::generate(m, p, mlir, err);
}
/// Loads a generated spec through the library, as planners do; false (with the
/// loader's errors shown) when it does not load.
bool loadGenerated(mlir::MLIRContext &ctx, const std::string &mlir, Spec &spec) {
  registerDialects(ctx);
  Diagnostics errors;
  bool loaded = loadSpecText(ctx, "generated.mlir", mlir, spec, errors);
  INFO(errors.str());
  CHECK(errors.empty());
  return loaded;
}
} // namespace

TEST_CASE("--parallel is read item by item, and a bad item is named", "[plan]") {
  plangen::Parallel p;
  std::string err;
  REQUIRE(plangen::parseParallel("dp=2,tp=4,sp,pp=2,schedule=gpipe,microbatches=4,layers=3", p,
                                 err));
  CHECK(p.dp == 2);
  CHECK(p.tp == 4);
  CHECK(p.sp);
  CHECK(p.pp == 2);
  CHECK(p.schedule == "gpipe");
  CHECK(p.microbatches == 4);
  CHECK(p.layers == 3);
  CHECK(p.ep == 1); // what is not given keeps its default
  const std::pair<const char *, const char *> bad[] = {
      {"dp=2,dp=2", "'dp' is given twice"},
      {"sp=2", "sp takes no value"},
      {"schedule=zigzag", "unknown schedule 'zigzag'"},
      {"tp=x", "tp needs an integer"},
      {"tp=4096", "tp needs an integer in [0, 1024]"},
      {"foo=1", "unknown item"},
  };
  for (auto [text, why] : bad) {
    INFO(text);
    plangen::Parallel q;
    std::string e;
    CHECK_FALSE(plangen::parseParallel(text, q, e));
    CHECK_THAT(e, Contains(why));
  }
}

TEST_CASE("a model configuration's errors name the file and the field", "[plan]") {
  plangen::Model m;
  Diagnostics errors;
  REQUIRE(plangen::readModel(modelPath("llama3-8b.json"), m, errors));
  CHECK(errors.empty());
  CHECK(m.layers == 32);
  CHECK(m.hidden == 4096);
  CHECK(m.kvHeads == 8);
  CHECK(m.vocab == 128256);
  CHECK(m.experts == 0);

  TempFile missing(R"({"layers": 2, "heads": 4, "kv_heads": 2, "head_dim": 8, "ffn": 64, "vocab": 32})",
                   ".json");
  CHECK_FALSE(plangen::readModel(missing.path, m, errors));
  REQUIRE(errors.size() == 1);
  CHECK(errors.list()[0].at.file == missing.path);
  CHECK_THAT(errors.list()[0].message, StartsWith("hidden: missing"));
  // A missing field is placed at its object; a wrong one at its value.
  CHECK_THAT(errors.str(), Contains(missing.path + ":1:1: error: hidden: missing"));
  TempFile negative(R"({"layers": 2, "hidden": -8, "heads": 4, "kv_heads": 2, "head_dim": 8,
                        "ffn": 64, "vocab": 32})",
                    ".json");
  errors = Diagnostics();
  CHECK_FALSE(plangen::readModel(negative.path, m, errors));
  CHECK_THAT(errors.str(), Contains(negative.path + ":1:25: error: hidden: must be an integer"));
  TempFile groups(R"({"layers": 2, "hidden": 32, "heads": 6, "kv_heads": 4, "head_dim": 8,
                      "ffn": 64, "vocab": 32})",
                  ".json");
  errors = Diagnostics();
  CHECK_FALSE(plangen::readModel(groups.path, m, errors));
  CHECK_THAT(errors.str(), Contains("kv_heads: must be positive and divide heads (6)"));
}

TEST_CASE("generated plans load, and verify", "[plan]") {
  // The generator is the reference implementation of correct plans: what it writes
  // must be a spec that the loader accepts and the verifier proves. (This is the
  // tensor- and sequence-parallel point of test/CLI/plan_grid.test's grid.)
  std::string err, mlir;
  REQUIRE(generateFor("llama3-8b.json", "tp=2,sp,layers=1", mlir, err));
  CHECK_THAT(mlir, Contains("func.func @reference"));
  CHECK_THAT(mlir, Contains("dist.mesh"));

  mlir::MLIRContext ctx;
  Spec spec;
  REQUIRE(loadGenerated(ctx, mlir, spec));
  CHECK(spec.mesh.numRanks() == 2);
  VerifyOptions options;
  options.checkFixes = false;
  VerifyResult r = verifySpec(spec, options);
  CHECK(r.verdict == Verdict::Verified);
  CHECK(r.violations.empty());
  CHECK(r.stats.obligations > 0);
}

TEST_CASE("configurations the generator cannot write are refused with the reason", "[plan]") {
  std::string err, mlir;
  // Llama3-8B's 8 KV heads cannot be split over tp = 64.
  CHECK_FALSE(generateFor("llama3-8b.json", "tp=64", mlir, err));
  CHECK_THAT(err, Contains("tp = 64 does not divide the 8 KV heads"));
  CHECK(mlir.empty());
}

TEST_CASE("layers that pp does not divide: the first and last chunks take fewer",
          "[plan]") {
  std::string err, mlir;
  // 6 layers over 4 stages: 1, 2, 2, 1 (6 + 2 = 8 divides).
  REQUIRE(generateFor("llama3-8b.json", "pp=4,microbatches=2,layers=6", mlir, err));
  auto stageOf = [&](const std::string &w) {
    size_t at = mlir.find("dist.value = \"" + w + "\"");
    REQUIRE(at != std::string::npos);
    size_t st = mlir.rfind("dist.stage = ", at);
    return mlir.substr(st + 13, 1);
  };
  CHECK(stageOf("l0_wq") == "0");
  CHECK(stageOf("l1_wq") == "1");
  CHECK(stageOf("l2_wq") == "1");
  CHECK(stageOf("l3_wq") == "2");
  CHECK(stageOf("l4_wq") == "2");
  CHECK(stageOf("l5_wq") == "3");
  mlir::MLIRContext ctx;
  Spec spec;
  REQUIRE(loadGenerated(ctx, mlir, spec));
  CHECK(verifyByLayouts(spec).verdict == Verdict::Verified);
  // 7 layers over 4 stages: 2 in each middle chunk, the rest 3 split 2, 1.
  REQUIRE(generateFor("llama3-8b.json", "pp=4,microbatches=2,layers=7", mlir, err));
  CHECK(stageOf("l0_wq") == "0");
  CHECK(stageOf("l1_wq") == "0");
  CHECK(stageOf("l2_wq") == "1");
  CHECK(stageOf("l4_wq") == "2");
  CHECK(stageOf("l5_wq") == "2");
  CHECK(stageOf("l6_wq") == "3");
  Spec spec7;
  REQUIRE(loadGenerated(ctx, mlir, spec7));
  CHECK(verifyByLayouts(spec7).verdict == Verdict::Verified);
  // 5 layers over 4 stages: 2 in each middle chunk leaves 1 for the first and last.
  CHECK_FALSE(generateFor("llama3-8b.json", "pp=4,layers=5", mlir, err));
  CHECK_THAT(err, Contains("layers = 5 are too few for the 4 model chunks"));
}

TEST_CASE("size=full writes the model's own sizes, which the layout engine proves", "[plan]") {
  std::string err, mlir;
  REQUIRE(generateFor("llama3-8b.json", "dp=2,tp=4,layers=1,size=full,seq=64", mlir, err));
  // Hidden 4096, FFN 14336 split over tp = 4, vocabulary 128256, 2 x 64 tokens.
  CHECK_THAT(mlir, Contains("tensor<4096x3584xf32>"));
  CHECK_THAT(mlir, Contains("tensor<128x128256xf32>"));
  mlir::MLIRContext ctx;
  Spec spec;
  REQUIRE(loadGenerated(ctx, mlir, spec));
  VerifyResult r = verifyByLayouts(spec);
  for (auto &[at, why] : r.inconclusiveReasons)
    UNSCOPED_INFO(at.str() << ": " << why);
  CHECK(r.verdict == Verdict::Verified);
  CHECK(r.stats.ranks == 8);

  // What size=full cannot write is refused with the reason.
  CHECK_FALSE(generateFor("llama3-8b.json", "dp=2,seq=64", mlir, err));
  CHECK_THAT(err, Contains("seq applies to size=full"));
  CHECK_FALSE(generateFor("llama3-8b.json", "tp=2,cp=2,size=full,seq=6", mlir, err));
  CHECK_THAT(err, Contains("is not a multiple of 4"));
  CHECK_FALSE(generateFor("llama3-405b.json", "dp=1024,size=full", mlir, err));
  CHECK_THAT(err, Contains("more than 2^40 elements"));
}

TEST_CASE("MoE layers on two pipeline stages: the loss's stage terms are summed over pp",
          "[plan]") {
  // DeepSeek-MoE's layers 1-3 are MoE layers: stage 0's load-balancing term and stage
  // 1's joined by stage_select, then all_reduce over pp (a partial sum over the
  // pipeline axis in the layout engine). Both engines prove it; an avg there is
  // refuted by the element engine and not proved by the layout engine.
  std::string err, mlir;
  REQUIRE(generateFor("deepseek-moe-16b.json", "pp=2,layers=4", mlir, err));
  std::string sum = "%loss = dist.all_reduce %loss_stages over [\"pp\"] \"sum\"";
  size_t at = mlir.find(sum);
  REQUIRE(at != std::string::npos);
  std::string avg = mlir;
  avg.replace(avg.find("\"sum\"", at), 5, "\"avg\"");
  VerifyOptions options;
  options.checkFixes = false;
  for (bool right : {true, false}) {
    mlir::MLIRContext ctx;
    Spec spec;
    REQUIRE(loadGenerated(ctx, right ? mlir : avg, spec));
    Verdict byLayouts = verifyByLayouts(spec, options).verdict;
    Verdict byElements = verifySpec(spec, options).verdict;
    CHECK(byElements == (right ? Verdict::Verified : Verdict::Violated));
    CHECK((byLayouts == Verdict::Verified) == right);
  }
}

TEST_CASE("context parallelism: zigzag chunks, causal offsets, chunk gradients", "[plan]") {
  // Generated CP plans (zigzag sequence, K/V gathered in chunk order, each query
  // chunk's causal offset from its global start, the chunks' gradients padded and
  // added, K/V gradients reduce-scattered back): both engines prove them at cp 2 and
  // 4, with dp, tp, microbatches and pipeline stages.
  VerifyOptions options;
  options.checkFixes = false;
  auto verdicts = [&](const std::string &mlir) {
    mlir::MLIRContext ctx;
    Spec spec;
    REQUIRE(loadGenerated(ctx, mlir, spec));
    VerifyResult byLayouts = verifyByLayouts(spec, options);
    for (auto &[at, why] : byLayouts.inconclusiveReasons)
      UNSCOPED_INFO("layout engine: " << at.str() << ": " << why);
    return std::make_pair(byLayouts.verdict, verifySpec(spec, options).verdict);
  };
  for (const char *parallel : {"cp=2,layers=1", "cp=4,layers=1", "dp=2,cp=2,tp=2,layers=1",
                               "dp=2,cp=2,microbatches=2,layers=1",
                               "cp=2,pp=2,microbatches=2,layers=2"}) {
    INFO(parallel);
    std::string err, mlir;
    REQUIRE(generateFor("llama3-8b.json", parallel, mlir, err));
    auto [byLayouts, byElements] = verdicts(mlir);
    CHECK(byElements == Verdict::Verified);
    CHECK(byLayouts == Verdict::Verified);
  }
  // Near misses, each the bug a rule's side condition is there for: the element
  // engine refutes them, the layout engine never proves them.
  std::string err, mlir;
  REQUIRE(generateFor("llama3-8b.json", "cp=2,layers=1", mlir, err));
  const std::pair<const char *, const char *> misses[] = {
      // K gathered in rank order from zigzag chunks.
      {"dist.all_gather %l0_k_h over [\"cp\"] dim 2 zigzag",
       "dist.all_gather %l0_k_h over [\"cp\"] dim 2"},
      // The second chunk's offset from the rank's own position, not its mirror's.
      {"%l0_start1 = arith.muli %l0_mirror, %l0_chunk",
       "%l0_start1 = arith.muli %l0_cp_rank, %l0_chunk"},
      // The first chunk given the second one's offset.
      {"ref.causal_softmax %l0_s_c0 offset %l0_start0",
       "ref.causal_softmax %l0_s_c0 offset %l0_start1"},
      // The chunks' outputs concatenated in the other order.
      {"ref.concat %l0_o_c0, %l0_o_c1 dim 1", "ref.concat %l0_o_c1, %l0_o_c0 dim 1"},
      // The mirror counted from the wrong last chunk.
      {"%l0_last = arith.constant 3 : index", "%l0_last = arith.constant 2 : index"},
      // Both query chunks the first one.
      {"ref.slice %l0_q_3 offsets [0, 1, 0]", "ref.slice %l0_q_3 offsets [0, 0, 0]"},
  };
  for (auto [from, to] : misses) {
    INFO(to);
    std::string bad = mlir;
    size_t at = bad.find(from);
    REQUIRE(at != std::string::npos);
    bad.replace(at, std::string(from).size(), to);
    auto [byLayouts, byElements] = verdicts(bad);
    CHECK(byElements == Verdict::Violated);
    CHECK(byLayouts != Verdict::Verified);
  }
}

// Shrinking a recipe (lib/Plan/PlanShrink.cpp): the edits carried over to the plan of
// a smaller configuration, and the configurations tried, smallest first.

TEST_CASE("a recipe's edits find their ops in another configuration's plan", "[plan][shrink]") {
  using plangen::Edit;
  std::string text = "  %l0_ar = dist.all_reduce %l0_y over [\"tp\"] \"sum\" : tensor<1x4xf32>\n"
                     "  %l1_ar = dist.all_reduce %l1_y over [\"tp\"] \"sum\" : tensor<1x4xf32>\n"
                     "  %acc_l1_w = ref.add %g_mb0, %g_mb1 : tensor<4xf32>\n"
                     "  %d_l1_w = dist.all_reduce %acc_l1_w over [\"dp\"] \"sum\"\n"
                     "  dist.send %l1_x from 0 to 1 tag \"act/c1/mb0\"\n"
                     "  dist.send %l1_x from 0 to 1 tag \"act/c1/mb1\"\n"
                     "  %mb1_dout = dist.recv from 1 to 0 tag \"grad/c1/mb1\"\n";
  plangen::Translation tr;
  std::string why;
  SECTION("a layer's index and the sizes are holes; the with-text takes what they matched") {
    std::vector<Edit> edits = {
        {Edit::Replace, "%l97_ar = dist.all_reduce %l97_y over [\"tp\"] \"sum\" : tensor<1x16384xf32>",
         "%l97_ar = dist.all_reduce %l97_y over [\"tp\"] \"avg\" : tensor<1x16384xf32>"}};
    REQUIRE(plangen::translateEdits(edits, "%l97_ar", text, tr, why));
    REQUIRE(tr.edits.size() == 1);
    // Neither layer agrees with 97: the first occurrence.
    CHECK(tr.edits[0].from == "%l0_ar = dist.all_reduce %l0_y over [\"tp\"] \"sum\" : tensor<1x4xf32>");
    CHECK(tr.edits[0].to == "%l0_ar = dist.all_reduce %l0_y over [\"tp\"] \"avg\" : tensor<1x4xf32>");
    CHECK(tr.at == "%l0_ar");
    CHECK_THAT(tr.text, Contains("%l0_y over [\"tp\"] \"avg\""));
    CHECK_THAT(tr.text, Contains("%l1_y over [\"tp\"] \"sum\""));
  }
  SECTION("the occurrence whose numbers agree with the edit's is taken") {
    std::vector<Edit> edits = {{Edit::Replace, "%l1_ar = dist.all_reduce", "%l1_ar = dist.all_gather"}};
    REQUIRE(plangen::translateEdits(edits, "", text, tr, why));
    CHECK(tr.edits[0].from == "%l1_ar = dist.all_reduce");
  }
  SECTION("a name's uniquing suffix may be absent in the smaller plan") {
    std::vector<Edit> edits = {{Edit::Replace, "%d_l1_w = dist.all_reduce %acc_l1_w_2 over",
                                "%d_l1_w = ref.scale %acc_l1_w_2 by 1.0 over"}};
    REQUIRE(plangen::translateEdits(edits, "%d_l1_w", text, tr, why));
    CHECK(tr.edits[0].from == "%d_l1_w = dist.all_reduce %acc_l1_w over");
    CHECK(tr.edits[0].to == "%d_l1_w = ref.scale %acc_l1_w by 1.0 over");
    // A suffix is optional only at a name's end: `%l1_x` is not `%l1_xs`.
    std::vector<Edit> other = {{Edit::Replace, "%acc_l1_ws_2 = ref.add", "x"}};
    CHECK_FALSE(plangen::translateEdits(other, "", text, tr, why));
    CHECK_THAT(why, Contains("edits[0]: no counterpart of '%acc_l1_ws_2 = ref.add'"));
  }
  SECTION("later edits agree with the numbers the earlier ones matched; move_line") {
    std::vector<Edit> edits = {
        {Edit::Replace, "dist.send %l29_x from 14 to 15 tag \"act/c15/mb1\"",
         "dist.send %l29_x from 14 to 15 tag \"act/c15/mb1\" {late}"},
        {Edit::MoveLine, "%mb1_dout = dist.recv from 15 to 14", "dist.send %l29_x from 14 to 15 tag \"act/c15/mb1\""}};
    REQUIRE(plangen::translateEdits(edits, "", text, tr, why));
    CHECK(tr.edits[0].from == "dist.send %l1_x from 0 to 1 tag \"act/c1/mb1\"");
    CHECK(tr.edits[1].from == "%mb1_dout = dist.recv from 1 to 0");
    CHECK(tr.edits[1].to == "dist.send %l1_x from 0 to 1 tag \"act/c1/mb1\"");
    CHECK(tr.text.find("%mb1_dout") < tr.text.find("tag \"act/c1/mb1\" {late}"));
  }
  SECTION("replace_all: every occurrence, each with its own numbers") {
    std::vector<Edit> edits = {{Edit::ReplaceAll, "%l7_y over [\"tp\"] \"sum\"", "%l7_y over [\"tp\"] \"max\""}};
    REQUIRE(plangen::translateEdits(edits, "", text, tr, why));
    CHECK(tr.edits.size() == 2);
    CHECK_THAT(tr.text, Contains("%l0_y over [\"tp\"] \"max\""));
    CHECK_THAT(tr.text, Contains("%l1_y over [\"tp\"] \"max\""));
  }
  SECTION("an edit without a counterpart, or an ambiguous one, is refused") {
    std::vector<Edit> none = {{Edit::Replace, "%l3_router = ref.softmax", "x"}};
    CHECK_FALSE(plangen::translateEdits(none, "", text, tr, why));
    CHECK_THAT(why, Contains("no counterpart"));
    std::vector<Edit> twice = {{Edit::Replace, "dist.send %l1_x from 0 to 1", "x"}};
    CHECK_FALSE(plangen::translateEdits(twice, "", text, tr, why));
    CHECK_THAT(why, Contains("occurs 2 times"));
  }
}

TEST_CASE("smaller configurations keep each parallelism kind, smallest first", "[plan][shrink]") {
  plangen::Model m;
  Diagnostics diags;
  REQUIRE(plangen::readModel(modelPath("llama3-8b.json"), m, diags));
  plangen::Parallel big;
  std::string err;
  REQUIRE(plangen::parseParallel("dp=8,tp=2,pp=4,microbatches=4,sp,zero=2,size=full,seq=256", big, err));
  auto configs = plangen::smallerConfigurations(m, big, 1000);
  REQUIRE(!configs.empty());
  CHECK(plangen::printParallel(configs.front()) == "dp=2,tp=2,pp=2,sp,zero=2,layers=2");
  auto cost = [](const plangen::Parallel &p) {
    return p.dp * p.tp * p.pp * p.layers * p.microbatches;
  };
  for (size_t i = 0; i < configs.size(); ++i) {
    const plangen::Parallel &p = configs[i];
    CHECK((p.dp > 1 && p.tp > 1 && p.pp > 1 && p.sp && p.zero == 2 && !p.fullSize && !p.seq));
    CHECK((p.dp <= 8 && p.tp <= 2 && p.pp <= 4 && p.microbatches <= 4));
    CHECK((8 % p.dp == 0 && 4 % p.pp == 0));
    if (i)
      CHECK(cost(configs[i - 1]) <= cost(p));
    plangen::Parallel back;
    REQUIRE(plangen::parseParallel(plangen::printParallel(p), back, err));
    CHECK(plangen::printParallel(back) == plangen::printParallel(p));
  }
  CHECK(plangen::smallerConfigurations(m, big, 3).size() == 3);
}

TEST_CASE("carrying over random pieces of a plan: no crash, identity stays identity",
          "[plan][shrink]") {
  using plangen::Edit;
  plangen::Model m;
  Diagnostics diags;
  REQUIRE(plangen::readModel(modelPath("llama3-8b.json"), m, diags));
  plangen::Parallel big, small;
  std::string err, bigText, smallText;
  REQUIRE(plangen::parseParallel("dp=4,tp=2,pp=2,microbatches=3,layers=3", big, err));
  REQUIRE(plangen::parseParallel("dp=2,tp=2,pp=2,microbatches=2,layers=2", small, err));
  REQUIRE(plangen::generate(m, big, bigText, err));
  REQUIRE(plangen::generate(m, small, smallText, err));
  std::mt19937 rng(7);
  int carried = 0;
  for (int i = 0; i < 300; ++i) {
    // A piece of one line of the larger plan, as a recipe's edit would quote it.
    size_t at = std::uniform_int_distribution<size_t>(0, bigText.size() - 2)(rng);
    size_t lineEnd = bigText.find('\n', at);
    size_t len = std::uniform_int_distribution<size_t>(1, 80)(rng);
    std::string piece = bigText.substr(at, std::min(len, lineEnd - at));
    if (piece.empty())
      continue;
    Edit::Kind kind = i % 3 == 0 ? Edit::ReplaceAll : Edit::Replace;
    plangen::Translation tr;
    std::string why;
    // The same text as its own replacement: whatever it carries over to is unchanged.
    if (plangen::translateEdits({{kind, piece, piece}}, "", smallText, tr, why)) {
      ++carried;
      CHECK(tr.text == smallText);
      for (const Edit &e : tr.edits)
        CHECK(e.from == e.to);
    } else {
      CHECK(!why.empty());
    }
  }
  CHECK(carried > 50); // most pieces of a plan have a counterpart in a smaller one
}
