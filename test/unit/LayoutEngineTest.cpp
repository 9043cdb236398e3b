//===- LayoutEngineTest.cpp - the layout engine's rules, certified ---------===//
//
// Each transfer rule of lib/LayoutEngine (docs/layout-engine.md) on instances at
// several mesh degrees and tensor sizes: the layout engine must prove each instance,
// and the element engine (which executes every rank on every element) must prove it
// too; each rule's near misses -- the bug the rule's side condition is there for --
// must be refuted by the element engine and never verified by the layout engine.
//
//===----------------------------------------------------------------------===//
#include "Import/LoadSpec.h"
#include "LayoutEngine/LayoutEngine.h"

#include <catch2/catch.hpp>

#include <fstream>
#include <functional>
#include <sstream>
#include <map>

using namespace planproof;

namespace {

/// `text` with each {NAME} replaced by its value.
std::string fill(std::string text, const std::map<std::string, int64_t> &values) {
  for (auto &[name, v] : values) {
    std::string key = "{" + name + "}";
    for (size_t at; (at = text.find(key)) != std::string::npos;)
      text.replace(at, key.size(), std::to_string(v));
  }
  return text;
}

/// One spec: the reference, then the plan on mesh ["a"] or ["a", "b"] of {K} x {J}.
std::string spec(const std::string &refArgs, const std::string &refResults,
                 const std::string &refBody, const std::string &planArgs,
                 const std::string &planResults, const std::string &planBody) {
  return "module {\n  func.func @reference(" + refArgs + ") -> (" + refResults +
         ") attributes {ref.reference} {\n" + refBody +
         "  }\n  dist.mesh @mesh axes = [\"a\", \"b\"] shape = [{K}, {J}]\n  func.func @plan(" +
         planArgs + ") -> (" + planResults + ") attributes {dist.mesh = @mesh} {\n" + planBody +
         "  }\n}\n";
}

struct Verdicts {
  Verdict layout, element;
  /// The layout engine's proof trace (every output's rules), when it verified.
  std::vector<VerifyResult::Proof> proof;
};

Verdicts run(const std::string &text) {
  mlir::MLIRContext ctx;
  registerDialects(ctx);
  Spec s;
  Diagnostics errors;
  INFO(text);
  INFO(errors.str());
  bool loaded = loadSpecText(ctx, "rule.mlir", text, s, errors);
  INFO(errors.str());
  REQUIRE(loaded);
  VerifyOptions o;
  o.threads = 1;
  o.checkFixes = false;
  o.proofTrace = true;
  VerifyResult byLayouts = verifyByLayouts(s, o);
  VerifyResult byElements = verifySpec(s, o);
  for (auto &[at, why] : byLayouts.inconclusiveReasons)
    UNSCOPED_INFO("layout engine: " << at.str() << ": " << why);
  return {byLayouts.verdict, byElements.verdict, byLayouts.proof};
}

/// Whether a rule whose name starts with `rule` is in the proof of some output.
bool fired(const std::vector<VerifyResult::Proof> &proof, const std::string &rule) {
  for (const VerifyResult::Proof &p : proof)
    for (const VerifyResult::ProofRule &r : p.rules)
      if (r.rule.rfind(rule, 0) == 0)
        return true;
  return false;
}

std::string traceText(const std::vector<VerifyResult::Proof> &proof) {
  std::string t;
  for (const VerifyResult::Proof &p : proof) {
    t += p.output + ":";
    for (const VerifyResult::ProofRule &r : p.rules)
      t += " [" + r.rule + " x" + std::to_string(r.count) + "]";
    t += "\n";
  }
  return t;
}

/// Sizes at which every rule instance is checked: degrees 2 and 3 on axis a (b of
/// size 1 or 2), blocks of 1 and 2 elements per rank.
std::vector<std::map<std::string, int64_t>> instances() {
  std::vector<std::map<std::string, int64_t>> out;
  for (int64_t K : {2, 3})
    for (int64_t J : {1, 2})
      for (int64_t n : {1, 2})
        out.push_back({{"K", K}, {"J", J}, {"n", n}, {"KJn", K * J * n}, {"Kn", K * n},
                       {"Jn", J * n}, {"KJ", K * J}, {"B", 2}});
  return out;
}

/// One instance `t`: the element engine's verdict is `expect`, and the layout engine
/// verifies it exactly when that is Verified.
void expectVerdict(const std::string &t, Verdict expect) {
  Verdicts got = run(t);
  INFO(t);
  CHECK(got.element == expect);
  if (expect == Verdict::Verified)
    CHECK(got.layout == Verdict::Verified);
  else
    CHECK(got.layout != Verdict::Verified);
}

/// Like proves/refutes, for templates whose near miss is one only where b has size 2
/// (J = 2): `expect` is the element engine's verdict; the layout engine must verify
/// exactly the instances the element engine verifies among these.
void decides(const std::string &text, Verdict expect, bool onlyJ2 = false) {
  for (auto &v : instances()) {
    if (onlyJ2 && v["J"] != 2)
      continue;
    expectVerdict(fill(text, v), expect);
  }
}

/// Both engines prove every instance; with `rules`, the layout engine's proof trace
/// names each of them (by the start of its name): the rules under test fire.
void proves(const std::string &text, const std::vector<std::string> &rules = {}) {
  for (auto &v : instances()) {
    std::string t = fill(text, v);
    Verdicts got = run(t);
    INFO(t);
    CHECK(got.element == Verdict::Verified);
    CHECK(got.layout == Verdict::Verified);
    INFO("proof trace:\n" << traceText(got.proof));
    for (const std::string &rule : rules) {
      INFO("rule: " << rule);
      CHECK(fired(got.proof, rule));
    }
  }
}

void refutes(const std::string &text) {
  for (auto &v : instances()) {
    if (v["K"] * v["J"] == 1)
      continue;
    std::string t = fill(text, v);
    Verdicts got = run(t);
    INFO(t);
    CHECK(got.element == Verdict::Violated);
    CHECK(got.layout != Verdict::Verified);
  }
}

/// Like refutes, for near misses that are ones only where blocks have 2 elements (n > 1).
void refutesWithBlocks(const std::string &text) {
  for (auto &v : instances()) {
    if (v["n"] < 2)
      continue;
    Verdicts got = run(fill(text, v));
    CHECK(got.element == Verdict::Violated);
    CHECK(got.layout != Verdict::Verified);
  }
}
// Types, as the templates write them.
const char *kRefXW = R"(%x: tensor<{B}x{Kn}xf32> {ref.name = "x"}, %w: tensor<{Kn}x{KJn}xf32> {ref.name = "w"})";

} // namespace

TEST_CASE("matmul: a split contraction is a partial sum, completed by all_reduce", "[layouts]") {
  std::string refBody = R"(    %y = ref.matmul %x, %w contract(1, 0) : tensor<{B}x{Kn}xf32>, tensor<{Kn}x{KJn}xf32>
    return %y : tensor<{B}x{KJn}xf32>
)";
  std::string planArgs = R"(%x: tensor<{B}x{n}xf32> {dist.value = "x", dist.layout = #dist.layout<[_, a]>}, %w: tensor<{n}x{KJn}xf32> {dist.value = "w", dist.layout = #dist.layout<[a, _]>})";
  std::string planRes = R"(tensor<{B}x{KJn}xf32> {dist.value = "y", dist.layout = #dist.layout<[_, _]>})";
  auto plan = [&](const char *kind) {
    return std::string(R"(    %p = ref.matmul %x, %w contract(1, 0) : tensor<{B}x{n}xf32>, tensor<{n}x{KJn}xf32>
    %y = dist.all_reduce %p over ["a"] ")") + kind + R"(" : tensor<{B}x{KJn}xf32> -> tensor<{B}x{KJn}xf32>
    return %y : tensor<{B}x{KJn}xf32>
)";
  };
  std::string refRes = R"(tensor<{B}x{KJn}xf32> {ref.name = "y"})";
  proves(spec(kRefXW, refRes, refBody, planArgs, planRes, plan("sum")),
         {"contraction", "partial sum: contracted over split blocks", "collective `dist.all_reduce`"});
  refutes(spec(kRefXW, refRes, refBody, planArgs, planRes, plan("avg")));
}

TEST_CASE("matmul: a split free dimension, an elementwise op, all_gather", "[layouts]") {
  std::string refBody = R"(    %h = ref.matmul %x, %w contract(1, 0) : tensor<{B}x{Kn}xf32>, tensor<{Kn}x{KJn}xf32>
    %y = ref.gelu %h : tensor<{B}x{KJn}xf32>
    return %y : tensor<{B}x{KJn}xf32>
)";
  std::string refRes = R"(tensor<{B}x{KJn}xf32> {ref.name = "y"})";
  std::string planArgs = R"(%x: tensor<{B}x{Kn}xf32> {dist.value = "x", dist.layout = #dist.layout<[_, _]>}, %w: tensor<{Kn}x{Jn}xf32> {dist.value = "w", dist.layout = #dist.layout<[_, a]>})";
  std::string planRes = R"(tensor<{B}x{KJn}xf32> {dist.value = "y", dist.layout = #dist.layout<[_, _]>})";
  auto plan = [&](const char *dim) {
    return std::string(R"(    %h = ref.matmul %x, %w contract(1, 0) : tensor<{B}x{Kn}xf32>, tensor<{Kn}x{Jn}xf32>
    %g = ref.gelu %h : tensor<{B}x{Jn}xf32>
    %y = dist.all_gather %g over ["a"] dim )") + dim + R"( : tensor<{B}x{Jn}xf32> -> tensor<{B}x{KJn}xf32>
    return %y : tensor<{B}x{KJn}xf32>
)";
  };
  proves(spec(kRefXW, refRes, refBody, planArgs, planRes, plan("1")));
  // Gathering over the wrong axis concatenates copies of one block (b replicates it);
  // the shapes fit where both axes have one size.
  for (auto &v : instances()) {
    if (v["J"] < 2)
      continue;
    std::string t = fill(spec(kRefXW, refRes, refBody, planArgs, planRes,
                              R"(    %h = ref.matmul %x, %w contract(1, 0) : tensor<{B}x{Kn}xf32>, tensor<{Kn}x{Jn}xf32>
    %g = ref.gelu %h : tensor<{B}x{Jn}xf32>
    %y = dist.all_gather %g over ["b"] dim 1 : tensor<{B}x{Jn}xf32> -> tensor<{B}x{KJn}xf32>
    return %y : tensor<{B}x{KJn}xf32>
)"),
                         v);
    if (v["K"] != v["J"])
      continue; // the shapes only fit when the axes have one size
    Verdicts got = run(t);
    CHECK(got.element == Verdict::Violated);
    CHECK(got.layout != Verdict::Verified);
  }
}

TEST_CASE("a mean loss over a split batch: reduce_mean, then avg over the axis", "[layouts]") {
  std::string refArgs = R"(%x: tensor<{KJn}x{B}xf32> {ref.name = "x"})";
  std::string refRes = R"(tensor<{B}xf32> {ref.name = "m"})";
  std::string refBody = R"(    %m = ref.reduce_mean %x dims [0] : tensor<{KJn}x{B}xf32>
    return %m : tensor<{B}xf32>
)";
  std::string planArgs = R"(%x: tensor<{n}x{B}xf32> {dist.value = "x", dist.layout = #dist.layout<[(a, b), _]>})";
  std::string planRes = R"(tensor<{B}xf32> {dist.value = "m", dist.layout = #dist.layout<[_]>})";
  auto plan = [&](const char *kind) {
    return std::string(R"(    %l = ref.reduce_mean %x dims [0] : tensor<{n}x{B}xf32>
    %m = dist.all_reduce %l over ["a", "b"] ")") + kind + R"(" : tensor<{B}xf32> -> tensor<{B}xf32>
    return %m : tensor<{B}xf32>
)";
  };
  proves(spec(refArgs, refRes, refBody, planArgs, planRes, plan("avg")));
  refutes(spec(refArgs, refRes, refBody, planArgs, planRes, plan("sum")));
}

TEST_CASE("mse_loss and its gradient on a split batch", "[layouts]") {
  std::string refArgs = R"(%p: tensor<{Kn}x{B}xf32> {ref.name = "p"}, %t: tensor<{Kn}x{B}xf32> {ref.name = "t"})";
  std::string refRes = R"(tensor<f32> {ref.name = "loss"}, tensor<{Kn}x{B}xf32> {ref.name = "g"})";
  std::string refBody = R"(    %loss = ref.mse_loss %p, %t : tensor<{Kn}x{B}xf32>
    %g = ref.mse_loss_grad %p, %t : tensor<{Kn}x{B}xf32>
    return %loss, %g : tensor<f32>, tensor<{Kn}x{B}xf32>
)";
  std::string planArgs = R"(%p: tensor<{n}x{B}xf32> {dist.value = "p", dist.layout = #dist.layout<[a, _]>}, %t: tensor<{n}x{B}xf32> {dist.value = "t", dist.layout = #dist.layout<[a, _]>})";
  std::string planRes = R"(tensor<f32> {dist.value = "loss", dist.layout = #dist.layout<[]>}, tensor<{n}x{B}xf32> {dist.value = "g", dist.layout = #dist.layout<[a, _]>})";
  auto plan = [&](const char *scale) {
    return std::string(R"(    %l = ref.mse_loss %p, %t : tensor<{n}x{B}xf32>
    %loss = dist.all_reduce %l over ["a"] "avg" : tensor<f32> -> tensor<f32>
    %gl = ref.mse_loss_grad %p, %t : tensor<{n}x{B}xf32>
    %g = ref.scale %gl by )") + scale + R"( : tensor<{n}x{B}xf32>
    return %loss, %g : tensor<f32>, tensor<{n}x{B}xf32>
)";
  };
  for (int64_t K : {2, 4}) {
    std::string inv = K == 2 ? "0.5" : "0.25";
    std::map<std::string, int64_t> v{{"K", K}, {"J", 1}, {"n", 2}, {"Kn", 2 * K}, {"B", 3}};
    Verdicts good = run(fill(spec(refArgs, refRes, refBody, planArgs, planRes, plan(inv.c_str())), v));
    CHECK(good.element == Verdict::Verified);
    CHECK(good.layout == Verdict::Verified);
    // The local gradient's scale forgotten: K times too large.
    Verdicts bad = run(fill(spec(refArgs, refRes, refBody, planArgs, planRes, plan("1.0")), v));
    CHECK(bad.element == Verdict::Violated);
    CHECK(bad.layout != Verdict::Verified);
  }
}

TEST_CASE("a bias after the reduction, not before it", "[layouts]") {
  std::string refArgs = std::string(kRefXW) + R"(, %b: tensor<{KJn}xf32> {ref.name = "b"})";
  std::string refRes = R"(tensor<{B}x{KJn}xf32> {ref.name = "y"})";
  std::string refBody = R"(    %h = ref.matmul %x, %w contract(1, 0) : tensor<{B}x{Kn}xf32>, tensor<{Kn}x{KJn}xf32>
    %y = ref.bias_add %h, %b : tensor<{B}x{KJn}xf32>, tensor<{KJn}xf32>
    return %y : tensor<{B}x{KJn}xf32>
)";
  std::string planArgs = R"(%x: tensor<{B}x{n}xf32> {dist.value = "x", dist.layout = #dist.layout<[_, a]>}, %w: tensor<{n}x{KJn}xf32> {dist.value = "w", dist.layout = #dist.layout<[a, _]>}, %b: tensor<{KJn}xf32> {dist.value = "b", dist.layout = #dist.layout<[_]>})";
  std::string planRes = R"(tensor<{B}x{KJn}xf32> {dist.value = "y", dist.layout = #dist.layout<[_, _]>})";
  proves(spec(refArgs, refRes, refBody, planArgs, planRes,
              R"(    %p = ref.matmul %x, %w contract(1, 0) : tensor<{B}x{n}xf32>, tensor<{n}x{KJn}xf32>
    %r = dist.all_reduce %p over ["a"] "sum" : tensor<{B}x{KJn}xf32> -> tensor<{B}x{KJn}xf32>
    %y = ref.bias_add %r, %b : tensor<{B}x{KJn}xf32>, tensor<{KJn}xf32>
    return %y : tensor<{B}x{KJn}xf32>
)"));
  refutes(spec(refArgs, refRes, refBody, planArgs, planRes,
               R"(    %p = ref.matmul %x, %w contract(1, 0) : tensor<{B}x{n}xf32>, tensor<{n}x{KJn}xf32>
    %q = ref.bias_add %p, %b : tensor<{B}x{KJn}xf32>, tensor<{KJn}xf32>
    %y = dist.all_reduce %q over ["a"] "sum" : tensor<{B}x{KJn}xf32> -> tensor<{B}x{KJn}xf32>
    return %y : tensor<{B}x{KJn}xf32>
)"));
}

TEST_CASE("row-wise ops on split rows, reduce_scatter and all_gather", "[layouts]") {
  // Sequence parallelism: a row-parallel product's partial sum is reduce-scattered
  // over the rows, normalized row by row, and gathered back.
  std::string refArgs = std::string(kRefXW) + R"(, %g: tensor<{KJn}xf32> {ref.name = "g"})";
  std::string refRes = R"(tensor<{B}x{KJn}xf32> {ref.name = "y"})";
  std::string refBody = R"(    %h = ref.matmul %x, %w contract(1, 0) : tensor<{B}x{Kn}xf32>, tensor<{Kn}x{KJn}xf32>
    %y = ref.rms_norm %h, %g eps 1.0e-5 : tensor<{B}x{KJn}xf32>, tensor<{KJn}xf32>
    return %y : tensor<{B}x{KJn}xf32>
)";
  std::string planArgs = R"(%x: tensor<{B}x{n}xf32> {dist.value = "x", dist.layout = #dist.layout<[_, a]>}, %w: tensor<{n}x{KJn}xf32> {dist.value = "w", dist.layout = #dist.layout<[a, _]>}, %g: tensor<{KJn}xf32> {dist.value = "g", dist.layout = #dist.layout<[_]>})";
  std::string planRes = R"(tensor<{B}x{KJn}xf32> {dist.value = "y", dist.layout = #dist.layout<[_, _]>})";
  auto plan = [&](const char *dim, const char *part) {
    return std::string(R"(    %p = ref.matmul %x, %w contract(1, 0) : tensor<{B}x{n}xf32>, tensor<{n}x{KJn}xf32>
    %s = dist.reduce_scatter %p over ["a"] dim )") + dim + R"( "sum" : tensor<{B}x{KJn}xf32> -> )" + part + R"(
    %r = ref.rms_norm %s, %g eps 1.0e-5 : )" + part + R"(, tensor<{KJn}xf32>
    %y = dist.all_gather %r over ["a"] dim )" + dim + R"( : )" + part + R"( -> tensor<{B}x{KJn}xf32>
    return %y : tensor<{B}x{KJn}xf32>
)";
  };
  // Rows split over a: B = K rows, one per rank.
  for (auto &v : instances()) {
    std::map<std::string, int64_t> w = v;
    w["B"] = v["K"];
    Verdicts got = run(fill(spec(refArgs, refRes, refBody, planArgs, planRes,
                                 plan("0", "tensor<1x{KJn}xf32>")),
                            w));
    CHECK(got.element == Verdict::Verified);
    CHECK(got.layout == Verdict::Verified);
  }
  // Scattering the normalized dimension: each rank normalizes a piece of every row
  // (its weight is then the wrong size: the near miss slices it too).
  for (auto &v : instances()) {
    std::map<std::string, int64_t> w = v;
    std::string args = planArgs;
    args.replace(args.find("%g: tensor<{KJn}xf32>"), 21, "%g: tensor<{Jn}xf32>");
    args.replace(args.find("#dist.layout<[_]>"), 17, "#dist.layout<[a]>");
    std::string body = plan("1", "tensor<{B}x{Jn}xf32>");
    body.replace(body.find(", tensor<{KJn}xf32>"), 19, ", tensor<{Jn}xf32>");
    Verdicts got = run(fill(spec(refArgs, refRes, refBody, args, planRes, body), w));
    CHECK(got.element == Verdict::Violated);
    CHECK(got.layout != Verdict::Verified);
  }
}

TEST_CASE("a reshape keeps a split on the leading dimension of its group", "[layouts]") {
  std::string refArgs = R"(%x: tensor<{B}x{KJn}xf32> {ref.name = "x"})";
  std::string refRes = R"(tensor<{B}x{KJn}xf32> {ref.name = "y"})";
  std::string refBody = R"(    %r = ref.reshape %x : tensor<{B}x{KJn}xf32> -> tensor<{B}x{KJ}x{n}xf32>
    %e = ref.exp %r : tensor<{B}x{KJ}x{n}xf32>
    %y = ref.reshape %e : tensor<{B}x{KJ}x{n}xf32> -> tensor<{B}x{KJn}xf32>
    return %y : tensor<{B}x{KJn}xf32>
)";
  std::string planArgs = R"(%x: tensor<{B}x{n}xf32> {dist.value = "x", dist.layout = #dist.layout<[_, (a, b)]>})";
  std::string planRes = R"(tensor<{B}x{KJn}xf32> {dist.value = "y", dist.layout = #dist.layout<[_, _]>})";
  std::string planBody = R"(    %r = ref.reshape %x : tensor<{B}x{n}xf32> -> tensor<{B}x1x{n}xf32>
    %e = ref.exp %r : tensor<{B}x1x{n}xf32>
    %b = ref.reshape %e : tensor<{B}x1x{n}xf32> -> tensor<{B}x{n}xf32>
    %y = dist.all_gather %b over ["a", "b"] dim 1 : tensor<{B}x{n}xf32> -> tensor<{B}x{KJn}xf32>
    return %y : tensor<{B}x{KJn}xf32>
)";
  for (auto &v : instances()) {
    std::map<std::string, int64_t> w = v;
    w["KJ"] = v["K"] * v["J"];
    Verdicts got = run(fill(spec(refArgs, refRes, refBody, planArgs, planRes, planBody), w));
    CHECK(got.element == Verdict::Verified);
    CHECK(got.layout == Verdict::Verified);
  }
}

TEST_CASE("a uniform scale takes any split (gradient clipping)", "[layouts]") {
  std::string refArgs = R"(%g: tensor<{B}x{Kn}xf32> {ref.name = "g"})";
  std::string refRes = R"(tensor<{B}x{Kn}xf32> {ref.name = "y"})";
  std::string refBody = R"(    %q = ref.mul %g, %g : tensor<{B}x{Kn}xf32>
    %s = ref.reduce_sum %q dims [0, 1] : tensor<{B}x{Kn}xf32>
    %sb = ref.broadcast %s dims [] : tensor<f32> -> tensor<{B}x{Kn}xf32>
    %y = ref.mul %g, %sb : tensor<{B}x{Kn}xf32>
    return %y : tensor<{B}x{Kn}xf32>
)";
  std::string planArgs = R"(%g: tensor<{B}x{n}xf32> {dist.value = "g", dist.layout = #dist.layout<[_, a]>})";
  std::string planRes = R"(tensor<{B}x{n}xf32> {dist.value = "y", dist.layout = #dist.layout<[_, a]>})";
  auto plan = [&](bool reduced) {
    return std::string(R"(    %q = ref.mul %g, %g : tensor<{B}x{n}xf32>
    %l = ref.reduce_sum %q dims [0, 1] : tensor<{B}x{n}xf32>
)") + (reduced ? R"(    %s = dist.all_reduce %l over ["a"] "sum" : tensor<f32> -> tensor<f32>
)"
               : R"(    %s = ref.scale %l by 1.0 : tensor<f32>
)") + R"(    %sb = ref.broadcast %s dims [] : tensor<f32> -> tensor<{B}x{n}xf32>
    %y = ref.mul %g, %sb : tensor<{B}x{n}xf32>
    return %y : tensor<{B}x{n}xf32>
)";
  };
  proves(spec(refArgs, refRes, refBody, planArgs, planRes, plan(true)));
  // The rank-local sum of squares used as the whole one.
  refutes(spec(refArgs, refRes, refBody, planArgs, planRes, plan(false)));
}

TEST_CASE("a max over a split dimension is completed by all_reduce max only", "[layouts]") {
  std::string refArgs = R"(%x: tensor<{B}x{Kn}xf32> {ref.name = "x"})";
  std::string refRes = R"(tensor<{B}x{Kn}xf32> {ref.name = "y"})";
  std::string refBody = R"(    %m = ref.reduce_max %x dims [1] : tensor<{B}x{Kn}xf32>
    %mb = ref.broadcast %m dims [0] : tensor<{B}xf32> -> tensor<{B}x{Kn}xf32>
    %y = ref.sub %x, %mb : tensor<{B}x{Kn}xf32>
    return %y : tensor<{B}x{Kn}xf32>
)";
  std::string planArgs = R"(%x: tensor<{B}x{n}xf32> {dist.value = "x", dist.layout = #dist.layout<[_, a]>})";
  std::string planRes = R"(tensor<{B}x{n}xf32> {dist.value = "y", dist.layout = #dist.layout<[_, a]>})";
  auto plan = [&](const char *kind) {
    return std::string(R"(    %l = ref.reduce_max %x dims [1] : tensor<{B}x{n}xf32>
    %m = dist.all_reduce %l over ["a"] ")") + kind + R"(" : tensor<{B}xf32> -> tensor<{B}xf32>
    %mb = ref.broadcast %m dims [0] : tensor<{B}xf32> -> tensor<{B}x{n}xf32>
    %y = ref.sub %x, %mb : tensor<{B}x{n}xf32>
    return %y : tensor<{B}x{n}xf32>
)";
  };
  proves(spec(refArgs, refRes, refBody, planArgs, planRes, plan("max")),
         {"reduction", "partial maximum: each rank's maximum of its block", "collective `dist.all_reduce`"});
  refutes(spec(refArgs, refRes, refBody, planArgs, planRes, plan("sum")));
}

TEST_CASE("pipeline stages: a message carries its value's state; a broken schedule is a "
          "violation in both engines",
          "[layouts]") {
  auto text = [](const char *recvTag) {
    return std::string(R"(module {
  func.func @reference(%x: tensor<2x4xf32> {ref.name = "x"}, %w0: tensor<4x4xf32> {ref.name = "w0"},
                       %w1: tensor<4x4xf32> {ref.name = "w1"}) -> (tensor<2x4xf32> {ref.name = "y"})
      attributes {ref.reference} {
    %z = ref.matmul %x, %w0 contract(1, 0) : tensor<2x4xf32>, tensor<4x4xf32>
    %a = ref.gelu %z : tensor<2x4xf32>
    %y = ref.matmul %a, %w1 contract(1, 0) : tensor<2x4xf32>, tensor<4x4xf32>
    return %y : tensor<2x4xf32>
  }
  dist.mesh @mesh axes = ["pp", "tp"] shape = [2, 2]
  func.func @plan(%x: tensor<2x4xf32> {dist.value = "x", dist.layout = #dist.layout<[_, _]>, dist.stage = 0},
                  %w0: tensor<4x2xf32> {dist.value = "w0", dist.layout = #dist.layout<[_, tp]>, dist.stage = 0},
                  %w1: tensor<4x4xf32> {dist.value = "w1", dist.layout = #dist.layout<[_, _]>, dist.stage = 1})
      -> (tensor<2x4xf32> {dist.value = "y", dist.layout = #dist.layout<[_, _]>, dist.stage = 1})
      attributes {dist.mesh = @mesh, dist.pipeline = "pp"} {
    %z = ref.matmul %x, %w0 contract(1, 0) {dist.stage = 0} : tensor<2x4xf32>, tensor<4x2xf32>
    %a = ref.gelu %z {dist.stage = 0} : tensor<2x2xf32>
    %g = dist.all_gather %a over ["tp"] dim 1 {dist.stage = 0} : tensor<2x2xf32> -> tensor<2x4xf32>
    dist.send %g from 0 to 1 tag "act" : tensor<2x4xf32>
    %h = dist.recv from 0 to 1 tag ")") + recvTag + R"(" : tensor<2x4xf32>
    %y = ref.matmul %h, %w1 contract(1, 0) {dist.stage = 1} : tensor<2x4xf32>, tensor<4x4xf32>
    return %y : tensor<2x4xf32>
  }
}
)";
  };
  Verdicts good = run(text("act"));
  CHECK(good.element == Verdict::Verified);
  CHECK(good.layout == Verdict::Verified);
  // A receive that no send matches: a schedule violation, found by the exact check
  // both engines share.
  Verdicts bad = run(text("activations"));
  CHECK(bad.element == Verdict::Violated);
  CHECK(bad.layout == Verdict::Violated);
}

namespace {
/// Microbatches of a data-split batch: x [K * 2n, 2] is split over a (each rank 2n
/// rows); microbatch i is each rank's rows [i * n, (i + 1) * n). The reference writes
/// microbatch i as the concatenation of every rank's piece (`perRank`) or, the near
/// miss, as the batch's i-th contiguous half; the plan takes its window with local
/// offsets `planOffsets`. Each microbatch's output is the square of its sum, so which
/// rows it holds matters; the loss adds them in the reverse order of the plan.
std::string microbatchSpec(int64_t K, int64_t J, int64_t n, bool perRank,
                           std::vector<int64_t> planOffsets) {
  std::string rows = std::to_string(K * 2 * n), kn = std::to_string(K * n), N = std::to_string(n);
  std::string ref, plan;
  std::string tx = "tensor<" + rows + "x2xf32>", tm = "tensor<" + kn + "x2xf32>";
  for (int i = 0; i < 2; ++i) {
    std::string m = "%m" + std::to_string(i), I = std::to_string(i);
    if (perRank) {
      std::string cat;
      for (int64_t r = 0; r < K; ++r) {
        std::string piece = "%p" + I + "_" + std::to_string(r);
        ref += "    " + piece + " = ref.slice %x offsets [" + std::to_string(r * 2 * n + i * n) +
               ", 0] sizes [" + N + ", 2] : " + tx + "\n";
        if (r == 0) {
          cat = piece;
          continue;
        }
        std::string next = "%c" + I + "_" + std::to_string(r);
        ref += "    " + next + " = ref.concat " + cat + ", " + piece + " dim 0 : tensor<" +
               std::to_string(r * n) + "x2xf32>, tensor<" + N + "x2xf32>\n";
        cat = next;
      }
      ref += "    " + m + " = ref.scale " + cat + " by 1.0 : " + tm + "\n";
    } else {
      ref += "    " + m + " = ref.slice %x offsets [" + std::to_string(i * K * n) + ", 0] sizes [" +
             kn + ", 2] : " + tx + "\n";
    }
    ref += "    %h" + I + " = ref.matmul " + m + ", %w contract(1, 0) : " + tm +
           ", tensor<2x2xf32>\n    %s" + I + " = ref.reduce_sum %h" + I + " dims [0, 1] : " + tm +
           "\n    %t" + I + " = ref.mul %s" + I + ", %s" + I + " : tensor<f32>\n";
    std::string tl = "tensor<" + N + "x2xf32>";
    plan += "    %m" + I + " = ref.slice %x offsets [" + std::to_string(planOffsets[i]) +
            ", 0] sizes [" + N + ", 2] : tensor<" + std::to_string(2 * n) + "x2xf32>\n    %h" + I +
            " = ref.matmul %m" + I + ", %w contract(1, 0) : " + tl + ", tensor<2x2xf32>\n    %q" +
            I + " = ref.reduce_sum %h" + I + " dims [0, 1] : " + tl + "\n    %s" + I +
            " = dist.all_reduce %q" + I + " over [\"a\"] \"sum\" : tensor<f32> -> tensor<f32>\n    %t" +
            I + " = ref.mul %s" + I + ", %s" + I + " : tensor<f32>\n";
  }
  ref += "    %loss = ref.add %t1, %t0 : tensor<f32>\n    return %loss, %t0 : tensor<f32>, tensor<f32>\n";
  plan += "    %loss = ref.add %t0, %t1 : tensor<f32>\n    return %loss, %t0 : tensor<f32>, tensor<f32>\n";
  std::string refArgs = "%x: " + tx + " {ref.name = \"x\"}, %w: tensor<2x2xf32> {ref.name = \"w\"}";
  std::string planArgs = "%x: tensor<" + std::to_string(2 * n) +
                         "x2xf32> {dist.value = \"x\", dist.layout = #dist.layout<[a, _]>}, %w: "
                         "tensor<2x2xf32> {dist.value = \"w\", dist.layout = #dist.layout<[_, _]>}";
  std::string out = "tensor<f32> {dist.value = \"loss\", dist.layout = #dist.layout<[]>}, "
                    "tensor<f32> {dist.value = \"t0\", dist.layout = #dist.layout<[]>}";
  std::map<std::string, int64_t> sizes = {{"K", K}, {"J", J}};
  return fill(spec(refArgs, "tensor<f32> {ref.name = \"loss\"}, tensor<f32> {ref.name = \"t0\"}",
                   ref, planArgs, out, plan),
              sizes);
}
} // namespace

TEST_CASE("microbatch slices of a split batch are the reference's per-rank pieces",
          "[layouts]") {
  for (int64_t K : {2, 3})
    for (int64_t J : {1, 2})
      for (int64_t n : {1, 2}) {
        INFO("K=" << K << " J=" << J << " n=" << n);
        Verdicts right = run(microbatchSpec(K, J, n, true, {0, n}));
        CHECK(right.element == Verdict::Verified);
        CHECK(right.layout == Verdict::Verified);
        CHECK(fired(right.proof, "slices: a slice of a split value"));
        // Near misses: the microbatches swapped (the loss agrees, microbatch 0 does
        // not), and a reference whose microbatches are the batch's contiguous halves.
        Verdicts swapped = run(microbatchSpec(K, J, n, true, {n, 0}));
        CHECK(swapped.element == Verdict::Violated);
        CHECK(swapped.layout != Verdict::Verified);
        Verdicts halves = run(microbatchSpec(K, J, n, false, {0, n}));
        CHECK(halves.element == Verdict::Violated);
        CHECK(halves.layout != Verdict::Verified);
      }
}

TEST_CASE("all_to_all: the exchanged axes leave the concatenated dim, join the split one",
          "[layouts]") {
  // Rows split over (b, a); the all_to_all over a moves a's split to the columns.
  std::string refArgs = R"(%x: tensor<{KJn}x{Kn}xf32> {ref.name = "x"})";
  std::string refRes = R"(tensor<{KJn}x{Kn}xf32> {ref.name = "y"})";
  std::string refBody = R"(    %y = ref.gelu %x : tensor<{KJn}x{Kn}xf32>
    return %y : tensor<{KJn}x{Kn}xf32>
)";
  auto planArgs = [](const char *rows) {
    return std::string(R"(%x: tensor<{n}x{Kn}xf32> {dist.value = "x", dist.layout = #dist.layout<[)") +
           rows + R"(, _]>})";
  };
  std::string planRes = R"(tensor<{KJn}x{Kn}xf32> {dist.value = "y", dist.layout = #dist.layout<[_, _]>})";
  std::string planBody = R"(    %t = dist.all_to_all %x over ["a"] split_dim 1 concat_dim 0 : tensor<{n}x{Kn}xf32> -> tensor<{Kn}x{n}xf32>
    %g = ref.gelu %t : tensor<{Kn}x{n}xf32>
    %c = dist.all_gather %g over ["a"] dim 1 : tensor<{Kn}x{n}xf32> -> tensor<{Kn}x{Kn}xf32>
    %y = dist.all_gather %c over ["b"] dim 0 : tensor<{Kn}x{Kn}xf32> -> tensor<{KJn}x{Kn}xf32>
    return %y : tensor<{KJn}x{Kn}xf32>
)";
  decides(spec(refArgs, refRes, refBody, planArgs("(b, a)"), planRes, planBody),
          Verdict::Verified);
  // Near miss: a is the major axis of the rows, so a rank receives rows that are not
  // one block.
  decides(spec(refArgs, refRes, refBody, planArgs("(a, b)"), planRes, planBody),
          Verdict::Violated, /*onlyJ2=*/true);
}

TEST_CASE("capacity_dispatch: a split of its batch dimensions, not of its tokens",
          "[layouts]") {
  // Groups of {Kn} tokens routed top-1 among 3 experts, capacity 1 (drops happen).
  std::string refArgs = R"(%x: tensor<{Kn}x{Kn}x3xf32> {ref.name = "x"})";
  std::string refRes = R"(tensor<{Kn}x{Kn}x3x1xf32> {ref.name = "d"})";
  std::string refBody = R"(    %m = ref.topk_mask %x k 1 : tensor<{Kn}x{Kn}x3xf32>
    %d = ref.capacity_dispatch %m capacity 1 groups 1 : tensor<{Kn}x{Kn}x3xf32>
    return %d : tensor<{Kn}x{Kn}x3x1xf32>
)";
  auto plan = [](const char *local, const char *layout, const char *out) {
    std::string t = R"(%x: tensor<LOCALx3xf32> {dist.value = "x", dist.layout = #dist.layout<[LAYOUT, _]>})";
    std::string body = R"(    %m = ref.topk_mask %x k 1 : tensor<LOCALx3xf32>
    %p = ref.capacity_dispatch %m capacity 1 groups 1 : tensor<LOCALx3xf32>
    %d = dist.all_gather %p over ["a"] dim OUT : tensor<LOCALx3x1xf32> -> tensor<{Kn}x{Kn}x3x1xf32>
    return %d : tensor<{Kn}x{Kn}x3x1xf32>
)";
    for (std::string *s : {&t, &body}) {
      for (size_t at; (at = s->find("LOCAL")) != std::string::npos;)
        s->replace(at, 5, local);
      for (size_t at; (at = s->find("LAYOUT")) != std::string::npos;)
        s->replace(at, 6, layout);
      for (size_t at; (at = s->find("OUT")) != std::string::npos;)
        s->replace(at, 3, out);
    }
    return std::pair{t, body};
  };
  std::string planRes = R"(tensor<{Kn}x{Kn}x3x1xf32> {dist.value = "d", dist.layout = #dist.layout<[_, _, _, _]>})";
  auto [groupsArgs, groupsBody] = plan("{n}x{Kn}", "a, _", "0");
  decides(spec(refArgs, refRes, refBody, groupsArgs, planRes, groupsBody), Verdict::Verified);
  // Near miss: the tokens of each group split, so each rank counts capacity over its
  // own share of a group.
  auto [tokensArgs, tokensBody] = plan("{Kn}x{n}", "_, a", "1");
  decides(spec(refArgs, refRes, refBody, tokensArgs, planRes, tokensBody), Verdict::Violated);
}

TEST_CASE("a linear op of a partial sum and a replicated value counts the latter per rank",
          "[layouts]") {
  // x w over a split contraction (partial over a) plus z on every rank, then summed
  // over a: x w + K z.
  auto refBody = [](const char *zTimes) {
    return std::string(R"(    %h = ref.matmul %x, %w contract(1, 0) : tensor<{B}x{Kn}xf32>, tensor<{Kn}x{KJn}xf32>
    %zk = ref.scale %z by )") + zTimes + R"( : tensor<{B}x{KJn}xf32>
    %y = ref.add %h, %zk : tensor<{B}x{KJn}xf32>
    return %y : tensor<{B}x{KJn}xf32>
)";
  };
  std::string refArgs = std::string(kRefXW) + R"(, %z: tensor<{B}x{KJn}xf32> {ref.name = "z"})";
  std::string refRes = R"(tensor<{B}x{KJn}xf32> {ref.name = "y"})";
  std::string planArgs = R"(%x: tensor<{B}x{n}xf32> {dist.value = "x", dist.layout = #dist.layout<[_, a]>}, %w: tensor<{n}x{KJn}xf32> {dist.value = "w", dist.layout = #dist.layout<[a, _]>}, %z: tensor<{B}x{KJn}xf32> {dist.value = "z", dist.layout = #dist.layout<[_, _]>})";
  std::string planRes = R"(tensor<{B}x{KJn}xf32> {dist.value = "y", dist.layout = #dist.layout<[_, _]>})";
  std::string planBody = R"(    %p = ref.matmul %x, %w contract(1, 0) : tensor<{B}x{n}xf32>, tensor<{n}x{KJn}xf32>
    %s = ref.add %p, %z : tensor<{B}x{KJn}xf32>
    %y = dist.all_reduce %s over ["a"] "sum" : tensor<{B}x{KJn}xf32> -> tensor<{B}x{KJn}xf32>
    return %y : tensor<{B}x{KJn}xf32>
)";
  decides(spec(refArgs, refRes, refBody("{K}.0"), planArgs, planRes, planBody),
          Verdict::Verified);
  // Near miss: a reference that counts z once.
  decides(spec(refArgs, refRes, refBody("1.0"), planArgs, planRes, planBody),
          Verdict::Violated);
}

TEST_CASE("sums meet in any grouping, order and scaling of their summands", "[layouts]") {
  std::string refArgs = R"(%a: tensor<{B}x{Kn}xf32> {ref.name = "a"}, %b: tensor<{B}x{Kn}xf32> {ref.name = "b"})";
  std::string refRes = R"(tensor<{B}x{Kn}xf32> {ref.name = "y"})";
  std::string refBody = R"(    %ab = ref.add %a, %b : tensor<{B}x{Kn}xf32>
    %y = ref.add %ab, %a : tensor<{B}x{Kn}xf32>
    return %y : tensor<{B}x{Kn}xf32>
)";
  std::string planArgs = R"(%a: tensor<{B}x{n}xf32> {dist.value = "a", dist.layout = #dist.layout<[_, a]>}, %b: tensor<{B}x{n}xf32> {dist.value = "b", dist.layout = #dist.layout<[_, a]>})";
  std::string planRes = R"(tensor<{B}x{n}xf32> {dist.value = "y", dist.layout = #dist.layout<[_, a]>})";
  auto planBody = [](const char *aTimes) {
    return std::string(R"(    %a2 = ref.scale %a by )") + aTimes + R"( : tensor<{B}x{n}xf32>
    %h = ref.scale %b by 0.5 : tensor<{B}x{n}xf32>
    %s = ref.add %h, %a2 : tensor<{B}x{n}xf32>
    %y = ref.add %s, %h : tensor<{B}x{n}xf32>
    return %y : tensor<{B}x{n}xf32>
)";
  };
  decides(spec(refArgs, refRes, refBody, planArgs, planRes, planBody("2.0")), Verdict::Verified);
  decides(spec(refArgs, refRes, refBody, planArgs, planRes, planBody("1.0")), Verdict::Violated);
}

TEST_CASE("a reshape groups dimensions by their global sizes (local size-1 dimensions)",
          "[layouts]") {
  // [K, J, 2] -> [K J, 2] where each rank holds one index of the first two.
  std::string refArgs = R"(%x: tensor<{K}x{J}x2xf32> {ref.name = "x"})";
  std::string refRes = R"(tensor<{KJ}x2xf32> {ref.name = "y"})";
  std::string refBody = R"(    %r = ref.reshape %x : tensor<{K}x{J}x2xf32> -> tensor<{KJ}x2xf32>
    %y = ref.exp %r : tensor<{KJ}x2xf32>
    return %y : tensor<{KJ}x2xf32>
)";
  std::string planArgs = R"(%x: tensor<1x1x2xf32> {dist.value = "x", dist.layout = #dist.layout<[a, b, _]>})";
  auto planRes = [](const char *rows) {
    return std::string(R"(tensor<1x2xf32> {dist.value = "y", dist.layout = #dist.layout<[)") + rows +
           R"(, _]>})";
  };
  std::string planBody = R"(    %r = ref.reshape %x : tensor<1x1x2xf32> -> tensor<1x2xf32>
    %y = ref.exp %r : tensor<1x2xf32>
    return %y : tensor<1x2xf32>
)";
  decides(spec(refArgs, refRes, refBody, planArgs, planRes("(a, b)"), planBody),
          Verdict::Verified, /*onlyJ2=*/true);
  // Near miss: the rows declared in the other order.
  decides(spec(refArgs, refRes, refBody, planArgs, planRes("(b, a)"), planBody),
          Verdict::Violated, /*onlyJ2=*/true);
}

namespace {
/// A whole-batch reference (a two-layer MLP's mean squared error over N rows and the
/// second weight's gradient) against a plan that computes it by microbatches: rows[i]
/// rows from x's offset xOff[i] and t's offset tOff[i], weighted weights[i].
std::string wholeBatchSpec(const std::vector<int64_t> &rows, const std::vector<int64_t> &xOff,
                           const std::vector<int64_t> &tOff,
                           const std::vector<std::string> &weights) {
  int64_t N = 0;
  for (int64_t r : rows)
    N += r;
  auto T = [](int64_t r) { return "tensor<" + std::to_string(r) + "x2xf32>"; };
  std::string ref =
      "    %z0 = ref.matmul %x, %w0 contract(1, 0) : " + T(N) + ", tensor<2x2xf32>\n"
      "    %h = ref.gelu %z0 : " + T(N) + "\n"
      "    %z1 = ref.matmul %h, %w1 contract(1, 0) : " + T(N) + ", tensor<2x2xf32>\n"
      "    %loss = ref.mse_loss %z1, %t : " + T(N) + "\n"
      "    %g = ref.mse_loss_grad %z1, %t : " + T(N) + "\n"
      "    %dw1 = ref.matmul %h, %g contract(0, 0) : " + T(N) + ", " + T(N) + "\n"
      "    return %loss, %dw1 : tensor<f32>, tensor<2x2xf32>\n";
  std::string plan, loss, dw;
  for (size_t i = 0; i < rows.size(); ++i) {
    std::string k = std::to_string(i), r = T(rows[i]);
    plan += "    %x" + k + " = ref.slice %x offsets [" + std::to_string(xOff[i]) + ", 0] sizes [" +
            std::to_string(rows[i]) + ", 2] : " + T(N) + "\n" +
            "    %t" + k + " = ref.slice %t offsets [" + std::to_string(tOff[i]) + ", 0] sizes [" +
            std::to_string(rows[i]) + ", 2] : " + T(N) + "\n" +
            "    %za" + k + " = ref.matmul %x" + k + ", %w0 contract(1, 0) : " + r + ", tensor<2x2xf32>\n" +
            "    %h" + k + " = ref.gelu %za" + k + " : " + r + "\n" +
            "    %zb" + k + " = ref.matmul %h" + k + ", %w1 contract(1, 0) : " + r + ", tensor<2x2xf32>\n" +
            "    %l" + k + " = ref.mse_loss %zb" + k + ", %t" + k + " : " + r + "\n" +
            "    %lw" + k + " = ref.scale %l" + k + " by " + weights[i] + " : tensor<f32>\n" +
            "    %g" + k + " = ref.mse_loss_grad %zb" + k + ", %t" + k + " : " + r + "\n" +
            "    %gw" + k + " = ref.scale %g" + k + " by " + weights[i] + " : " + r + "\n" +
            "    %d" + k + " = ref.matmul %h" + k + ", %gw" + k + " contract(0, 0) : " + r + ", " + r + "\n";
    if (i == 0) {
      loss = "%lw0", dw = "%d0";
    } else {
      plan += "    %ls" + k + " = ref.add " + loss + ", %lw" + k + " : tensor<f32>\n" +
              "    %ds" + k + " = ref.add " + dw + ", %d" + k + " : tensor<2x2xf32>\n";
      loss = "%ls" + k, dw = "%ds" + k;
    }
  }
  plan += "    return " + loss + ", " + dw + " : tensor<f32>, tensor<2x2xf32>\n";
  std::string n = std::to_string(N);
  std::string refArgs = "%x: tensor<" + n + "x2xf32> {ref.name = \"x\"}, %w0: tensor<2x2xf32> {ref.name = \"w0\"}, "
                        "%w1: tensor<2x2xf32> {ref.name = \"w1\"}, %t: tensor<" + n + "x2xf32> {ref.name = \"t\"}";
  std::string planArgs;
  for (const char *v : {"x", "w0", "w1", "t"}) {
    std::string type = (v[0] == 'w') ? "tensor<2x2xf32>" : "tensor<" + n + "x2xf32>";
    planArgs += std::string(planArgs.empty() ? "" : ", ") + "%" + v + ": " + type +
                " {dist.value = \"" + v + "\", dist.layout = #dist.layout<[_, _]>}";
  }
  std::string refRes = "tensor<f32> {ref.name = \"loss\"}, tensor<2x2xf32> {ref.name = \"dw1\"}";
  std::string planRes = "tensor<f32> {dist.value = \"loss\", dist.layout = #dist.layout<[]>}, "
                        "tensor<2x2xf32> {dist.value = \"dw1\", dist.layout = #dist.layout<[_, _]>}";
  return fill(spec(refArgs, refRes, ref, planArgs, planRes, plan), {{"K", 2}, {"J", 1}});
}
} // namespace

TEST_CASE("a whole-batch reference meets microbatches piece by piece", "[layouts]") {
  struct Case {
    std::vector<int64_t> rows, xOff, tOff;
    std::vector<std::string> weights;
    bool right;
    const char *what;
  } cases[] = {
      {{2, 2}, {0, 2}, {0, 2}, {"0.5", "0.5"}, true, "two even microbatches"},
      {{1, 3}, {0, 1}, {0, 1}, {"0.25", "0.75"}, true, "uneven: each weighs its rows' share"},
      {{1, 1, 2}, {0, 1, 2}, {0, 1, 2}, {"0.25", "0.25", "0.5"}, true, "three microbatches"},
      {{2, 2}, {2, 0}, {2, 0}, {"0.5", "0.5"}, true, "microbatches in another order"},
      // Near misses: each rule's side condition broken in the way plans break it.
      {{2, 2}, {0, 2}, {0, 2}, {"1.0", "1.0"}, false, "summed, not averaged"},
      {{1, 3}, {0, 1}, {0, 1}, {"0.5", "0.5"}, false, "uneven microbatches weighed evenly"},
      {{2, 2}, {0, 0}, {0, 0}, {"0.5", "0.5"}, false, "the first microbatch twice"},
      {{2, 2}, {0, 2}, {2, 0}, {"0.5", "0.5"}, false, "targets of the other microbatch"},
  };
  for (const Case &c : cases) {
    INFO(c.what);
    Verdicts got = run(wholeBatchSpec(c.rows, c.xOff, c.tOff, c.weights));
    CHECK(got.element == (c.right ? Verdict::Verified : Verdict::Violated));
    CHECK((got.layout == Verdict::Verified) == c.right);
    if (c.right && got.layout == Verdict::Verified) {
      CHECK(fired(got.proof, "pieces: the same value over the row pieces"));
      // mse_loss averages over its rows, mse_loss_grad divides by their count: their
      // factors' kinds weigh each piece (LayoutFactors, certified in LayoutFactorsTest).
      CHECK(fired(got.proof, "pieces: an op on pieces of an averaged factor"));
      CHECK(fired(got.proof, "pieces: an op on pieces of a counted factor"));
    }
  }
}

namespace {
/// Rotary position embeddings on microbatches of a batch of 4 sequences of 8 positions
/// (tables of 16 positions; microbatch k reads rows [tableOff[k], tableOff[k] + 8)),
/// then the maximum over the batch: the microbatches' maxima combined by `combine`.
std::string rotaryMicrobatchSpec(const std::vector<int64_t> &tableOff, const char *combine) {
  auto T = [](int64_t b) { return "tensor<" + std::to_string(b) + "x8x4xf32>"; };
  std::string ref =
      "    %cos = ref.slice %cosall offsets [0, 0] sizes [8, 4] : tensor<16x4xf32>\n"
      "    %sin = ref.slice %sinall offsets [0, 0] sizes [8, 4] : tensor<16x4xf32>\n"
      "    %r = ref.rotary %x, %cos, %sin : " + T(4) + ", tensor<8x4xf32>\n"
      "    %m = ref.reduce_max %r dims [0] : " + T(4) + "\n"
      "    %p = ref.mul %m, %w : tensor<8x4xf32>\n"
      "    %loss = ref.reduce_sum %p dims [0, 1] : tensor<8x4xf32>\n"
      "    return %loss : tensor<f32>\n";
  std::string plan;
  for (size_t k = 0; k < tableOff.size(); ++k) {
    std::string i = std::to_string(k), off = std::to_string(tableOff[k]);
    plan += "    %x" + i + " = ref.slice %x offsets [" + std::to_string(2 * k) +
            ", 0, 0] sizes [2, 8, 4] : " + T(4) + "\n" +
            "    %c" + i + " = ref.slice %cosall offsets [" + off + ", 0] sizes [8, 4] : tensor<16x4xf32>\n" +
            "    %s" + i + " = ref.slice %sinall offsets [" + off + ", 0] sizes [8, 4] : tensor<16x4xf32>\n" +
            "    %r" + i + " = ref.rotary %x" + i + ", %c" + i + ", %s" + i + " : " + T(2) + ", tensor<8x4xf32>\n" +
            "    %m" + i + " = ref.reduce_max %r" + i + " dims [0] : " + T(2) + "\n";
  }
  plan += std::string("    %m = ") + combine + " %m0, %m1 : tensor<8x4xf32>\n"
          "    %p = ref.mul %m, %w : tensor<8x4xf32>\n"
          "    %loss = ref.reduce_sum %p dims [0, 1] : tensor<8x4xf32>\n"
          "    return %loss : tensor<f32>\n";
  std::string args[][2] = {{"x", T(4)}, {"cosall", "tensor<16x4xf32>"},
                           {"sinall", "tensor<16x4xf32>"}, {"w", "tensor<8x4xf32>"}};
  std::string refArgs, planArgs;
  for (auto &[name, type] : args) {
    std::string sep = refArgs.empty() ? "" : ", ";
    refArgs += sep + "%" + name + ": " + type + " {ref.name = \"" + name + "\"}";
    planArgs += sep + "%" + name + ": " + type + " {dist.value = \"" + name +
                "\", dist.layout = #dist.layout<[" +
                (type == T(4) ? "_, _, _" : "_, _") + "]>}";
  }
  return fill(spec(refArgs, "tensor<f32> {ref.name = \"loss\"}", ref, planArgs,
                   "tensor<f32> {dist.value = \"loss\", dist.layout = #dist.layout<[]>}", plan),
              {{"K", 1}, {"J", 1}});
}
} // namespace

TEST_CASE("ops distribute over microbatch pieces by their layout factors", "[layouts]") {
  // Rotary's positions pass through with its tables' rows; the batch passes through it;
  // a maximum over the batch is the maximum of the microbatches' maxima.
  struct Case {
    std::vector<int64_t> tableOff;
    const char *combine;
    bool right;
    const char *what;
  } cases[] = {
      {{0, 0}, "ref.maximum", true, "each microbatch's sequences at positions 0..7"},
      // Near misses.
      {{0, 8}, "ref.maximum", false, "the second microbatch's positions continue the first's"},
      {{0, 0}, "ref.add", false, "the microbatches' maxima summed"},
  };
  for (const Case &c : cases) {
    INFO(c.what);
    Verdicts got = run(rotaryMicrobatchSpec(c.tableOff, c.combine));
    CHECK(got.element == (c.right ? Verdict::Verified : Verdict::Violated));
    CHECK((got.layout == Verdict::Verified) == c.right);
    if (c.right && got.layout == Verdict::Verified) {
      CHECK(fired(got.proof, "pieces: an op on pieces of a pass-through factor"));
      CHECK(fired(got.proof, "pieces: an op on pieces of a maximized factor"));
    }
  }
}

TEST_CASE("microbatches' transposed weight gradients summed meet the whole batch's by pieces",
          "[layouts]") {
  // The reference transposes one product over every token; the plan (XLA's scan over
  // microbatches) sums each microbatch's transposed product: a sum of transposes by
  // one permutation is the transpose of the sum (Pieces.cpp).
  std::string refArgs = R"(%x: tensor<{N}x2xf32> {ref.name = "x"}, %g: tensor<{N}x3xf32> {ref.name = "g"})";
  std::string refRes = R"(tensor<3x2xf32> {ref.name = "y"})";
  std::string refBody = R"(    %xt = ref.transpose %x perm [1, 0] : tensor<{N}x2xf32>
    %w = ref.matmul %xt, %g contract(1, 0) : tensor<2x{N}xf32>, tensor<{N}x3xf32>
    %y = ref.transpose %w perm [1, 0] : tensor<2x3xf32>
    return %y : tensor<3x2xf32>
)";
  std::string planArgs = R"(%x: tensor<{N}x2xf32> {dist.value = "x", dist.layout = #dist.layout<[_, _]>}, %g: tensor<{N}x3xf32> {dist.value = "g", dist.layout = #dist.layout<[_, _]>})";
  std::string planRes = R"(tensor<3x2xf32> {dist.value = "y", dist.layout = #dist.layout<[_, _]>})";
  auto planBody = [](const char *secondG) {
    return std::string(R"(    %x0 = ref.slice %x offsets [0, 0] sizes [{n}, 2] : tensor<{N}x2xf32>
    %x1 = ref.slice %x offsets [{n}, 0] sizes [{n}, 2] : tensor<{N}x2xf32>
    %g0 = ref.slice %g offsets [0, 0] sizes [{n}, 3] : tensor<{N}x3xf32>
    %g1 = ref.slice %g offsets [)") + secondG + R"(, 0] sizes [{n}, 3] : tensor<{N}x3xf32>
    %t0 = ref.transpose %x0 perm [1, 0] : tensor<{n}x2xf32>
    %w0 = ref.matmul %t0, %g0 contract(1, 0) : tensor<2x{n}xf32>, tensor<{n}x3xf32>
    %y0 = ref.transpose %w0 perm [1, 0] : tensor<2x3xf32>
    %t1 = ref.transpose %x1 perm [1, 0] : tensor<{n}x2xf32>
    %w1 = ref.matmul %t1, %g1 contract(1, 0) : tensor<2x{n}xf32>, tensor<{n}x3xf32>
    %y1 = ref.transpose %w1 perm [1, 0] : tensor<2x3xf32>
    %y = ref.add %y0, %y1 : tensor<3x2xf32>
    return %y : tensor<3x2xf32>
)";
  };
  for (auto v : instances()) {
    v["N"] = 2 * v["n"];
    expectVerdict(fill(spec(refArgs, refRes, refBody, planArgs, planRes, planBody("{n}")), v),
                  Verdict::Verified);
    // Near miss: the second microbatch's gradients the first's.
    expectVerdict(fill(spec(refArgs, refRes, refBody, planArgs, planRes, planBody("0")), v),
                  Verdict::Violated);
  }
}

TEST_CASE("index values every rank holds alike: a step counter's terms", "[layouts]") {
  // Adam's bias correction: the gradient (split over a) scaled by 1 / (1 - 0.9^(t+1)),
  // and the counter itself returned.
  std::string refArgs = R"(%g: tensor<{B}x{Kn}xf32> {ref.name = "g"}, %step: index {ref.name = "step"})";
  std::string refRes = R"(tensor<{B}x{Kn}xf32> {ref.name = "y"}, index {ref.name = "step_next"})";
  std::string refBody = R"(    %c1 = arith.constant 1 : index
    %t = arith.addi %step, %c1 : index
    %p = ref.power %t base 0.9 : tensor<f32>
    %pb = ref.broadcast %p dims [] : tensor<f32> -> tensor<{B}x{Kn}xf32>
    %y = ref.mul %g, %pb : tensor<{B}x{Kn}xf32>
    return %y, %t : tensor<{B}x{Kn}xf32>, index
)";
  std::string planArgs = R"(%g: tensor<{B}x{n}xf32> {dist.value = "g", dist.layout = #dist.layout<[_, a]>}, %step: index {dist.value = "step"})";
  std::string planRes = R"(tensor<{B}x{n}xf32> {dist.value = "y", dist.layout = #dist.layout<[_, a]>}, index {dist.value = "step_next"})";
  auto planBody = [](const char *by) {
    return std::string(R"(    %c = arith.constant )") + by + R"( : index
    %t = arith.addi %step, %c : index
    %p = ref.power %t base 0.9 : tensor<f32>
    %pb = ref.broadcast %p dims [] : tensor<f32> -> tensor<{B}x{n}xf32>
    %y = ref.mul %g, %pb : tensor<{B}x{n}xf32>
    return %y, %t : tensor<{B}x{n}xf32>, index
)";
  };
  decides(spec(refArgs, refRes, refBody, planArgs, planRes, planBody("1")), Verdict::Verified);
  // Near miss: the counter advanced by two.
  decides(spec(refArgs, refRes, refBody, planArgs, planRes, planBody("2")), Verdict::Violated);
  // A value that differs from rank to rank (axis_index) is not followed: not verified.
  std::string rankDependent = R"(    %r = dist.axis_index "a" : index
    %z = arith.muli %r, %r : index
    %t = arith.addi %step, %z : index
    %c = arith.constant 1 : index
    %t1 = arith.addi %t, %c : index
    %p = ref.power %t1 base 0.9 : tensor<f32>
    %pb = ref.broadcast %p dims [] : tensor<f32> -> tensor<{B}x{n}xf32>
    %y = ref.mul %g, %pb : tensor<{B}x{n}xf32>
    return %y, %t1 : tensor<{B}x{n}xf32>, index
)";
  for (auto &v : instances()) {
    Verdicts got = run(fill(spec(refArgs, refRes, refBody, planArgs, planRes, rankDependent), v));
    CHECK(got.element == Verdict::Violated);
    CHECK(got.layout != Verdict::Verified);
  }
}

TEST_CASE("a padded flat buffer holds its value, then padding of any content", "[layouts]") {
  // ZeRO's flat shards: p (2K - 1 elements) padded to 2K and split over a; the
  // replicated gradient padded with a zero and sliced to each rank's block.
  std::string refArgs = R"(%p: tensor<{n}xf32> {ref.name = "p"}, %g: tensor<{n}xf32> {ref.name = "g"})";
  std::string refRes = R"(tensor<{n}xf32> {ref.name = "p_next"})";
  std::string refBody = R"(    %y = ref.sgd_update %p, %g lr 0.1 : tensor<{n}xf32>
    return %y : tensor<{n}xf32>
)";
  std::string planArgs = R"(%p: tensor<2xf32> {dist.value = "p", dist.layout = #dist.layout<[a]>, dist.padded}, %g: tensor<{n}xf32> {dist.value = "g", dist.layout = #dist.layout<[_]>})";
  std::string planRes = R"(tensor<2xf32> {dist.value = "p_next", dist.layout = #dist.layout<[a]>, dist.padded})";
  auto planBody = [](bool padAtEnd) {
    return std::string("    %z = ref.constant 0.0 : tensor<1xf32>\n") +
           (padAtEnd ? "    %gp = ref.concat %g, %z dim 0 : tensor<{n}xf32>, tensor<1xf32>\n"
                     : "    %gp = ref.concat %z, %g dim 0 : tensor<1xf32>, tensor<{n}xf32>\n") +
           R"(    %gs = dist.shard_slice %gp over ["a"] dim 0 : tensor<{KK}xf32> -> tensor<2xf32>
    %y = ref.sgd_update %p, %gs lr 0.1 : tensor<2xf32>
    return %y : tensor<2xf32>
)";
  };
  for (bool right : {true, false})
    for (int64_t K : {2, 3})
      for (int64_t J : {1, 2}) {
        std::map<std::string, int64_t> v{{"K", K}, {"J", J}, {"n", 2 * K - 1}, {"KK", 2 * K}};
        Verdicts got = run(fill(spec(refArgs, refRes, refBody, planArgs, planRes, planBody(right)), v));
        INFO("K=" << K << " J=" << J << (right ? "" : " (padding first)"));
        CHECK(got.element == (right ? Verdict::Verified : Verdict::Violated));
        CHECK((got.layout == Verdict::Verified) == right);
      }
}

TEST_CASE("dropout masks of exact streams: each rank draws its block's counters", "[layouts]") {
  // Rows split over (a, b): the rank's counter is offset + (its block number) x the
  // block's elements; the block number is coordinate a x J + coordinate b.
  std::string refArgs = R"(%x: tensor<{KJn}x2xf32> {ref.name = "x"}, %seed: index {ref.name = "seed"}, %offset: index {ref.name = "offset"})";
  std::string refRes = R"(tensor<{KJn}x2xf32> {ref.name = "y"})";
  std::string refBody = R"(    %m = ref.dropout_mask %seed, %offset p 0.5 : tensor<{KJn}x2xf32>
    %y = ref.mul %x, %m : tensor<{KJn}x2xf32>
    return %y : tensor<{KJn}x2xf32>
)";
  std::string planArgs = R"(%x: tensor<{n}x2xf32> {dist.value = "x", dist.layout = #dist.layout<[(a, b), _]>}, %seed: index {dist.value = "seed"}, %offset: index {dist.value = "offset"})";
  std::string planRes = R"(tensor<{n}x2xf32> {dist.value = "y", dist.layout = #dist.layout<[(a, b), _]>})";
  auto planBody = [](const char *strideA, const char *strideB) {
    return std::string(R"(    %ra = dist.axis_index "a" : index
    %rb = dist.axis_index "b" : index
    %sa = arith.constant )") + strideA + R"( : index
    %sb = arith.constant )" + strideB + R"( : index
    %ka = arith.muli %ra, %sa : index
    %kb = arith.muli %rb, %sb : index
    %k = arith.addi %ka, %kb : index
    %ctr = arith.addi %offset, %k : index
    %m = ref.dropout_mask %seed, %ctr p 0.5 : tensor<{n}x2xf32>
    %y = ref.mul %x, %m : tensor<{n}x2xf32>
    return %y : tensor<{n}x2xf32>
)";
  };
  for (auto &v : instances()) {
    std::map<std::string, int64_t> w = v;
    w["n2"] = 2 * v["n"];
    w["Jn2"] = 2 * v["J"] * v["n"];
    auto body = [&](const std::string &a, const std::string &b) {
      return fill(spec(refArgs, refRes, refBody, planArgs, planRes,
                       planBody(a.c_str(), b.c_str())), w);
    };
    INFO("K=" << v["K"] << " J=" << v["J"] << " n=" << v["n"]);
    Verdicts right = run(body("{Jn2}", "{n2}"));
    CHECK(right.element == Verdict::Verified);
    CHECK(right.layout == Verdict::Verified);
    CHECK(fired(right.proof, "dropout: an exact stream's piece"));
    // Near misses: every rank the same stream (identical masks on different shards),
    // and a stride of half a block (the ranks' streams overlap).
    Verdicts same = run(body("0", "0"));
    CHECK(same.element == Verdict::Violated);
    CHECK(same.layout != Verdict::Verified);
    Verdicts half = run(body("{Jn}", "{n}"));
    CHECK(half.element == Verdict::Violated);
    CHECK(half.layout != Verdict::Verified);
    if (v["J"] == 2) { // the axes' strides swapped: blocks in the other order
      Verdicts swapped = run(body("{n2}", "{Kn}"));
      CHECK(swapped.element == Verdict::Violated);
      CHECK(swapped.layout != Verdict::Verified);
    }
  }
}

TEST_CASE("independent random streams: each draw is the piece of the reference mask it "
          "stands for", "[layouts]") {
  // RNG mode independent (docs/rng.md): every rank draws from its own key; each plan
  // draw names the reference mask it stands for, its layout and (for a microbatch's
  // rows) its offset in the rank's block. Once the streams are proved apart (RngCheck,
  // both engines), both rename the draws to those pieces. Two microbatches per rank
  // where the rank holds two rows, their sums added.
  std::string refArgs = R"(%x: tensor<{KJn}x2xf32> {ref.name = "x"}, %seed: index {ref.name = "seed"}, %offset: index {ref.name = "offset"})";
  std::string refRes = R"(tensor<f32> {ref.name = "s"}, index {ref.name = "next", ref.updates = "offset"})";
  std::string refBody = R"(    %m = ref.dropout_mask %seed, %offset p 0.5 : tensor<{KJn}x2xf32>
    %y = ref.mul %x, %m : tensor<{KJn}x2xf32>
    %s = ref.reduce_sum %y dims [0, 1] : tensor<{KJn}x2xf32>
    %c = arith.constant {KJn2} : index
    %next = arith.addi %offset, %c : index
    return %s, %next : tensor<f32>, index
)";
  std::string planArgs = R"(%x: tensor<{n}x2xf32> {dist.value = "x", dist.layout = #dist.layout<[(a, b), _]>}, %seed: index {dist.value = "seed"}, %offset: index {dist.value = "offset"})";
  std::string planRes = R"(tensor<f32> {dist.value = "s", dist.layout = #dist.layout<[]>}, index {dist.value = "next"})";
  // key: "r" (seed + 7 + the rank's block number) or "same" (seed + 7 on every rank);
  // layout: the draws' claimed layout; o0, o1: the microbatches' claimed rows.
  auto planBody = [](bool twoPieces, const std::string &key, const std::string &layout,
                     int o0, int o1) {
    std::string draw = " p 0.5 {dist.draws = \"m\", dist.layout = #dist.layout<" + layout + ">";
    std::string body = R"(    %ra = dist.axis_index "a" : index
    %rb = dist.axis_index "b" : index
    %cJ = arith.constant {J} : index
    %ka = arith.muli %ra, %cJ : index
    %r = arith.addi %ka, %rb : index
    %c7 = arith.constant 7 : index
    %same = arith.addi %seed, %c7 : index
    %key = arith.addi %same, %r : index
)";
    if (!twoPieces)
      body += "    %m = ref.dropout_mask %" + key + ", %offset" + draw + R"(} : tensor<{n}x2xf32>
    %y = ref.mul %x, %m : tensor<{n}x2xf32>
    %s_part = ref.reduce_sum %y dims [0, 1] : tensor<{n}x2xf32>
)";
    else
      body += R"(    %x0 = ref.slice %x offsets [0, 0] sizes [1, 2] : tensor<2x2xf32>
    %m0 = ref.dropout_mask %)" + key + ", %offset" + draw + ", dist.block_offset = array<i64: " +
              std::to_string(o0) + R"(, 0>} : tensor<1x2xf32>
    %y0 = ref.mul %x0, %m0 : tensor<1x2xf32>
    %s0 = ref.reduce_sum %y0 dims [0, 1] : tensor<1x2xf32>
    %c2 = arith.constant 2 : index
    %ctr1 = arith.addi %offset, %c2 : index
    %x1 = ref.slice %x offsets [1, 0] sizes [1, 2] : tensor<2x2xf32>
    %m1 = ref.dropout_mask %)" + key + ", %ctr1" + draw + ", dist.block_offset = array<i64: " +
              std::to_string(o1) + R"(, 0>} : tensor<1x2xf32>
    %y1 = ref.mul %x1, %m1 : tensor<1x2xf32>
    %s1 = ref.reduce_sum %y1 dims [0, 1] : tensor<1x2xf32>
    %s_part = ref.add %s0, %s1 : tensor<f32>
)";
    return body + R"(    %s = dist.all_reduce %s_part over ["a", "b"] "sum" : tensor<f32> -> tensor<f32>
    %c = arith.constant {KJn2} : index
    %next = arith.addi %offset, %c : index
    return %s, %next : tensor<f32>, index
)";
  };
  for (auto &v : instances()) {
    std::map<std::string, int64_t> w = v;
    w["KJn2"] = 2 * v["KJn"];
    bool two = v["n"] == 2;
    auto verdicts = [&](const std::string &key, const std::string &layout, int o0, int o1) {
      std::string t = spec(refArgs, refRes, refBody, planArgs, planRes,
                           planBody(two, key, layout, o0, o1));
      t.replace(t.rfind("{dist.mesh = @mesh}"), 19,
                "{dist.mesh = @mesh, dist.rng = \"independent\"}");
      return run(fill(t, w));
    };
    INFO("K=" << v["K"] << " J=" << v["J"] << " n=" << v["n"]);
    Verdicts right = verdicts("key", "[(a, b), _]", 0, 1);
    CHECK(right.element == Verdict::Verified);
    CHECK(right.layout == Verdict::Verified);
    CHECK(fired(right.proof, "random draw: the piece of the reference's mask"));
    // Near misses: every rank the same key (identical masks on different shards: the
    // stream check's violation, in both engines); the draws claiming the rows in the
    // other axis order; the microbatches claiming each other's rows.
    Verdicts same = verdicts("same", "[(a, b), _]", 0, 1);
    CHECK(same.element == Verdict::Violated);
    CHECK(same.layout == Verdict::Violated);
    if (v["J"] == 2) {
      Verdicts swapped = verdicts("key", "[(b, a), _]", 0, 1);
      CHECK(swapped.element == Verdict::Violated);
      CHECK(swapped.layout != Verdict::Verified);
    }
    if (two) {
      Verdicts crossed = verdicts("key", "[(a, b), _]", 1, 0);
      CHECK(crossed.element == Verdict::Violated);
      CHECK(crossed.layout != Verdict::Verified);
    }
  }
}

/// A plan of two microbatches of n rows per rank (rows split over (a, b)): `planBody(
/// second, swapped)` with the second microbatch at row `second` and the results in the
/// other order where `swapped`. Both engines verify the right one; the element engine
/// refutes, and the layout engine does not verify, the second microbatch taking the
/// first's rows and the results swapped.
void microbatchVariants(const std::string &text,
                        const std::function<std::string(const char *, bool)> &planBody) {
  for (auto &v : instances()) {
    std::map<std::string, int64_t> w = v;
    w["n2"] = 2 * v["n"];
    w["KJn2"] = 2 * v["KJn"];
    auto verdicts = [&](const char *second, bool swapped) {
      std::string t = text;
      t.replace(t.find("{PLAN}"), 6, planBody(second, swapped));
      return run(fill(t, w));
    };
    INFO("K=" << v["K"] << " J=" << v["J"] << " n=" << v["n"]);
    Verdicts right = verdicts("{n}", false);
    CHECK(right.element == Verdict::Verified);
    CHECK(right.layout == Verdict::Verified);
    Verdicts twice = verdicts("0", false);
    CHECK(twice.element == Verdict::Violated);
    CHECK(twice.layout != Verdict::Verified);
    Verdicts swapped = verdicts("{n}", true);
    CHECK(swapped.element == Verdict::Violated);
    CHECK(swapped.layout != Verdict::Verified);
  }
}

TEST_CASE("microbatches' rows concatenated back are the rank's block", "[layouts]") {
  // Each rank's 2n rows in two microbatches of n, a function applied to each and the
  // results concatenated: the rows of every rank's block are two windows of the
  // concatenation's rows (microbatch 0 of every rank, then microbatch 1), which the
  // output's declared blocks describe once each rank's windows are read in order.
  // Near misses: the microbatches concatenated in the other order; the second taken
  // from the first microbatch's rows.
  std::string refArgs = R"(%x: tensor<{KJn2}x2xf32> {ref.name = "x"})";
  std::string refRes = R"(tensor<{KJn2}x2xf32> {ref.name = "y"})";
  std::string refBody = R"(    %y = ref.gelu %x : tensor<{KJn2}x2xf32>
    return %y : tensor<{KJn2}x2xf32>
)";
  std::string planArgs = R"(%x: tensor<{n2}x2xf32> {dist.value = "x", dist.layout = #dist.layout<[(a, b), _]>})";
  std::string planRes = R"(tensor<{n2}x2xf32> {dist.value = "y", dist.layout = #dist.layout<[(a, b), _]>})";
  auto planBody = [](const char *second, bool swapped) {
    return std::string(R"(    %x0 = ref.slice %x offsets [0, 0] sizes [{n}, 2] : tensor<{n2}x2xf32>
    %x1 = ref.slice %x offsets [)") + second + R"(, 0] sizes [{n}, 2] : tensor<{n2}x2xf32>
    %y0 = ref.gelu %x0 : tensor<{n}x2xf32>
    %y1 = ref.gelu %x1 : tensor<{n}x2xf32>
    %y = ref.concat )" + (swapped ? "%y1, %y0" : "%y0, %y1") + R"( dim 0 : tensor<{n}x2xf32>, tensor<{n}x2xf32>
    return %y : tensor<{n2}x2xf32>
)";
  };
  microbatchVariants(spec(refArgs, refRes, refBody, planArgs, planRes, "{PLAN}"), planBody);
}

TEST_CASE("a lookup computed whole, then cut into microbatches, meets the whole batch's; "
          "a gradient concatenated back is scattered by the rank's ids", "[layouts]") {
  // Each rank looks its 2n token ids up and applies gelu to all its rows, then takes
  // them as two microbatches (a tied embedding ahead of a pipeline's stages): the slices
  // of the lookup are the lookups of the ids' slices (the pieces' cuts reach the ids
  // through gelu and the lookup). Backward: the microbatches' cotangents concatenated
  // back and scattered into the table by the rank's ids (windows of the rows read as the
  // ids' blocks). Near misses: the second microbatch the first's rows; the cotangents
  // concatenated in the other order.
  std::string refArgs = R"(%e: tensor<5x2xf32> {ref.name = "e"}, %ids: tensor<{KJn2}xi64> {ref.name = "ids", ref.bound = 5 : i64}, %w: tensor<2x2xf32> {ref.name = "w"}, %t: tensor<{KJn2}x2xf32> {ref.name = "t"}, %g: tensor<{KJn2}x2xf32> {ref.name = "g"})";
  std::string refRes = R"(tensor<f32> {ref.name = "loss"}, tensor<5x2xf32> {ref.name = "de"})";
  std::string refBody = R"(    %x = ref.embedding %e, %ids : tensor<5x2xf32>, tensor<{KJn2}xi64>
    %h = ref.gelu %x : tensor<{KJn2}x2xf32>
    %p = ref.matmul %h, %w contract(1, 0) : tensor<{KJn2}x2xf32>, tensor<2x2xf32>
    %loss = ref.mse_loss %p, %t : tensor<{KJn2}x2xf32>
    %gg = ref.exp %g : tensor<{KJn2}x2xf32>
    %de = ref.embedding_grad %gg, %ids : tensor<{KJn2}x2xf32>, tensor<{KJn2}xi64> -> tensor<5x2xf32>
    return %loss, %de : tensor<f32>, tensor<5x2xf32>
)";
  std::string planArgs = R"(%e: tensor<5x2xf32> {dist.value = "e", dist.layout = #dist.layout<[_, _]>}, %ids: tensor<{n2}xi64> {dist.value = "ids", dist.layout = #dist.layout<[(a, b)]>}, %w: tensor<2x2xf32> {dist.value = "w", dist.layout = #dist.layout<[_, _]>}, %t: tensor<{n2}x2xf32> {dist.value = "t", dist.layout = #dist.layout<[(a, b), _]>}, %g: tensor<{n2}x2xf32> {dist.value = "g", dist.layout = #dist.layout<[(a, b), _]>})";
  std::string planRes = R"(tensor<f32> {dist.value = "loss", dist.layout = #dist.layout<[]>}, tensor<5x2xf32> {dist.value = "de", dist.layout = #dist.layout<[_, _]>})";
  auto planBody = [](const char *second, bool swapped) {
    return std::string(R"(    %x = ref.embedding %e, %ids : tensor<5x2xf32>, tensor<{n2}xi64>
    %h = ref.gelu %x : tensor<{n2}x2xf32>
    %h0 = ref.slice %h offsets [0, 0] sizes [{n}, 2] : tensor<{n2}x2xf32>
    %h1 = ref.slice %h offsets [)") + second + R"(, 0] sizes [{n}, 2] : tensor<{n2}x2xf32>
    %t0 = ref.slice %t offsets [0, 0] sizes [{n}, 2] : tensor<{n2}x2xf32>
    %t1 = ref.slice %t offsets [{n}, 0] sizes [{n}, 2] : tensor<{n2}x2xf32>
    %p0 = ref.matmul %h0, %w contract(1, 0) : tensor<{n}x2xf32>, tensor<2x2xf32>
    %p1 = ref.matmul %h1, %w contract(1, 0) : tensor<{n}x2xf32>, tensor<2x2xf32>
    %l0 = ref.mse_loss %p0, %t0 : tensor<{n}x2xf32>
    %l1 = ref.mse_loss %p1, %t1 : tensor<{n}x2xf32>
    %lsum = ref.add %l0, %l1 : tensor<f32>
    %lhalf = ref.scale %lsum by 0.5 : tensor<f32>
    %loss = dist.all_reduce %lhalf over ["a", "b"] "avg" : tensor<f32> -> tensor<f32>
    %g0 = ref.slice %g offsets [0, 0] sizes [{n}, 2] : tensor<{n2}x2xf32>
    %g1 = ref.slice %g offsets [{n}, 0] sizes [{n}, 2] : tensor<{n2}x2xf32>
    %gg0 = ref.exp %g0 : tensor<{n}x2xf32>
    %gg1 = ref.exp %g1 : tensor<{n}x2xf32>
    %gc = ref.concat )" + (swapped ? "%gg1, %gg0" : "%gg0, %gg1") + R"( dim 0 : tensor<{n}x2xf32>, tensor<{n}x2xf32>
    %de_part = ref.embedding_grad %gc, %ids : tensor<{n2}x2xf32>, tensor<{n2}xi64> -> tensor<5x2xf32>
    %de = dist.all_reduce %de_part over ["a", "b"] "sum" : tensor<5x2xf32> -> tensor<5x2xf32>
    return %loss, %de : tensor<f32>, tensor<5x2xf32>
)";
  };
  microbatchVariants(spec(refArgs, refRes, refBody, planArgs, planRes, "{PLAN}"), planBody);
}

TEST_CASE("each rank's rows shifted by one with a constant pad: the reference's runs", "[layouts]") {
  // Hugging Face's shifted labels on activations: every rank pads its m rows with one
  // row of zeros and takes rows [1, m + 1) -- each block's rows after its first, then
  // the pad -- which the reference writes as those runs concatenated. The constant pad
  // is copies on every rank (the blocks of copies KJ times as long); the rows a rank
  // holds are windows of the concatenation, read as the declared blocks, compared by
  // pieces through the slices, the concatenations and the pad cut to its rows. Near
  // misses: the rows not shifted; a pad of ones.
  for (auto &v : instances()) {
    int64_t blocks = v["K"] * v["J"], m = 2 * v["n"];
    auto text = [&](int shift, const char *pad) {
      std::string rows = std::to_string(blocks * m), mm = std::to_string(m);
      std::string ref = "module {\n  func.func @reference(%x: tensor<" + rows +
                        "x2xf32> {ref.name = \"x\"}) -> (tensor<" + rows +
                        "x2xf32> {ref.name = \"y\"}) attributes {ref.reference} {\n"
                        "    %z = ref.constant 0.0 : tensor<1x2xf32>\n";
      std::string cat = "    %cat = ref.concat", types;
      for (int64_t p = 0; p < blocks; ++p) {
        std::string r = "%r" + std::to_string(p);
        ref += "    " + r + " = ref.slice %x offsets [" + std::to_string(p * m + 1) +
               ", 0] sizes [" + std::to_string(m - 1) + ", 2] : tensor<" + rows + "x2xf32>\n";
        cat += std::string(p ? "," : "") + " " + r + ", %z";
        types += std::string(p ? ", " : "") + "tensor<" + std::to_string(m - 1) +
                 "x2xf32>, tensor<1x2xf32>";
      }
      ref += cat + " dim 0 : " + types + "\n    %y = ref.exp %cat : tensor<" + rows +
             "x2xf32>\n    return %y : tensor<" + rows + "x2xf32>\n  }\n";
      std::string mesh = "  dist.mesh @mesh axes = [\"a\", \"b\"] shape = [" +
                         std::to_string(v["K"]) + ", " + std::to_string(v["J"]) + "]\n";
      std::string plan = "  func.func @plan(%x: tensor<" + mm + "x2xf32> {dist.value = \"x\", "
                         "dist.layout = #dist.layout<[(a, b), _]>}) -> (tensor<" + mm +
                         "x2xf32> {dist.value = \"y\", dist.layout = #dist.layout<[(a, b), _]>}) "
                         "attributes {dist.mesh = @mesh} {\n"
                         "    %z = ref.constant " + pad + " : tensor<1x2xf32>\n"
                         "    %cat = ref.concat %x, %z dim 0 : tensor<" + mm + "x2xf32>, tensor<1x2xf32>\n"
                         "    %s = ref.slice %cat offsets [" + std::to_string(shift) + ", 0] sizes [" +
                         mm + ", 2] : tensor<" + std::to_string(m + 1) + "x2xf32>\n"
                         "    %y = ref.exp %s : tensor<" + mm + "x2xf32>\n"
                         "    return %y : tensor<" + mm + "x2xf32>\n  }\n}\n";
      return ref + mesh + plan;
    };
    INFO("K=" << v["K"] << " J=" << v["J"] << " n=" << v["n"]);
    Verdicts right = run(text(1, "0.0"));
    CHECK(right.element == Verdict::Verified);
    CHECK(right.layout == Verdict::Verified);
    Verdicts unshifted = run(text(0, "0.0"));
    CHECK(unshifted.element == Verdict::Violated);
    CHECK(unshifted.layout != Verdict::Verified);
    Verdicts ones = run(text(1, "1.0"));
    CHECK(ones.element == Verdict::Violated);
    CHECK(ones.layout != Verdict::Verified);
  }
}

TEST_CASE("a function of a reshape is the reshape of the function; sums of sums merge; "
          "products commute", "[layouts]") {
  // As captures write a vocabulary-parallel log-sum-exp and pick: the row sum reshaped
  // to [B, 1] for its all_reduce, the log taken there and reshaped back; the product in
  // the other operand order, summed over the classes, then over the rows. Near misses:
  // the log taken before the all_reduce; the rows averaged instead of summed.
  const char *refArgs = R"(%x: tensor<{B}x{Kn}xf32> {ref.name = "x"}, %w: tensor<{B}x{Kn}xf32> {ref.name = "w"})";
  std::string refRes = R"(tensor<{B}xf32> {ref.name = "lse"}, tensor<f32> {ref.name = "pick"})";
  std::string refBody = R"(    %e = ref.exp %x : tensor<{B}x{Kn}xf32>
    %s = ref.reduce_sum %e dims [1] : tensor<{B}x{Kn}xf32>
    %lse = ref.log %s : tensor<{B}xf32>
    %p = ref.mul %w, %x : tensor<{B}x{Kn}xf32>
    %pick = ref.reduce_sum %p dims [0, 1] : tensor<{B}x{Kn}xf32>
    return %lse, %pick : tensor<{B}xf32>, tensor<f32>
)";
  std::string planArgs = R"(%x: tensor<{B}x{n}xf32> {dist.value = "x", dist.layout = #dist.layout<[_, a]>}, %w: tensor<{B}x{n}xf32> {dist.value = "w", dist.layout = #dist.layout<[_, a]>})";
  std::string planRes = R"(tensor<{B}xf32> {dist.value = "lse", dist.layout = #dist.layout<[_]>}, tensor<f32> {dist.value = "pick", dist.layout = #dist.layout<[]>})";
  auto plan = [](bool logFirst, const char *rows) {
    std::string lse = logFirst ? R"(    %l = ref.log %s1 : tensor<{B}x1xf32>
    %t = dist.all_reduce %l over ["a"] "sum" : tensor<{B}x1xf32> -> tensor<{B}x1xf32>
)"
                               : R"(    %t1 = dist.all_reduce %s1 over ["a"] "sum" : tensor<{B}x1xf32> -> tensor<{B}x1xf32>
    %t = ref.log %t1 : tensor<{B}x1xf32>
)";
    return std::string(R"(    %e = ref.exp %x : tensor<{B}x{n}xf32>
    %s = ref.reduce_sum %e dims [1] : tensor<{B}x{n}xf32>
    %s1 = ref.reshape %s : tensor<{B}xf32> -> tensor<{B}x1xf32>
)") + lse + R"(    %lse = ref.reshape %t : tensor<{B}x1xf32> -> tensor<{B}xf32>
    %p = ref.mul %x, %w : tensor<{B}x{n}xf32>
    %ps = ref.reduce_sum %p dims [1] : tensor<{B}x{n}xf32>
    %ps1 = ref.reshape %ps : tensor<{B}xf32> -> tensor<{B}x1xf32>
    %pa = dist.all_reduce %ps1 over ["a"] "sum" : tensor<{B}x1xf32> -> tensor<{B}x1xf32>
    %pb = ref.reshape %pa : tensor<{B}x1xf32> -> tensor<{B}xf32>
    %pick = )" + rows + R"( %pb dims [0] : tensor<{B}xf32>
    return %lse, %pick : tensor<{B}xf32>, tensor<f32>
)";
  };
  proves(spec(refArgs, refRes, refBody, planArgs, planRes, plan(false, "ref.reduce_sum")));
  refutes(spec(refArgs, refRes, refBody, planArgs, planRes, plan(true, "ref.reduce_sum")));
  refutes(spec(refArgs, refRes, refBody, planArgs, planRes, plan(false, "ref.reduce_mean")));
}

TEST_CASE("a device permutation: a gather over more axes than split the value, then a "
          "pick in another order", "[layouts]") {
  // XLA's re-layout of a weight whose rows are split over (a, b) to rows split over
  // (b, c), on a K x K x K mesh: each rank's block gathered along a dimension of 1 over
  // [a, b, c] (c replicates it), picked over [b, c, a] -- rank (a, b, c)
  // takes the block of the ranks whose a is its b and whose b is its c -- then gathered
  // over [b, c]. Near miss: picked over [c, b, a] (rows over (c, b)), gathered over
  // [b, c]: the blocks in the other order.
  for (int64_t K : {2, 3}) {
    for (const char *pick : {"\"b\", \"c\", \"a\"", "\"c\", \"b\", \"a\""}) {
      std::map<std::string, int64_t> v = {{"K", K}, {"KK", K * K}, {"KKK", K * K * K}};
      std::string text = fill(std::string(R"(module {
  func.func @reference(%w: tensor<1x{KK}x2xf32> {ref.name = "w"}) -> (tensor<1x{KK}x2xf32> {ref.name = "y"}) attributes {ref.reference} {
    %y = ref.scale %w by 2.0 : tensor<1x{KK}x2xf32>
    return %y : tensor<1x{KK}x2xf32>
  }
  dist.mesh @mesh axes = ["a", "b", "c"] shape = [{K}, {K}, {K}]
  func.func @plan(%w: tensor<1x1x2xf32> {dist.value = "w", dist.layout = #dist.layout<[_, (a, b), _]>}) -> (tensor<1x{KK}x2xf32> {dist.value = "y", dist.layout = #dist.layout<[_, _, _]>}) attributes {dist.mesh = @mesh} {
    %g = dist.all_gather %w over ["a", "b", "c"] dim 0 : tensor<1x1x2xf32> -> tensor<{KKK}x1x2xf32>
    %p = dist.shard_slice %g over [)") + pick + R"(] dim 0 : tensor<{KKK}x1x2xf32> -> tensor<1x1x2xf32>
    %s = ref.scale %p by 2.0 : tensor<1x1x2xf32>
    %y = dist.all_gather %s over ["b", "c"] dim 1 : tensor<1x1x2xf32> -> tensor<1x{KK}x2xf32>
    return %y : tensor<1x{KK}x2xf32>
  }
}
)", v);
      expectVerdict(text, pick[1] == 'b' ? Verdict::Verified : Verdict::Violated);
    }
  }
}

TEST_CASE("a product transposed is the product of the other order; reshapes compose",
          "[layouts]") {
  // dw = x^T dy (contract(0, 0)), written by the plan as (dy^T x)^T on its split batch,
  // and a flat round trip [B, Kn] -> [B Kn] -> [B, Kn] before the all_reduce.
  std::string refArgs = R"(%x: tensor<{KJn}x{Kn}xf32> {ref.name = "x"}, %dy: tensor<{KJn}x{Kn}xf32> {ref.name = "dy"})";
  std::string refRes = R"(tensor<{Kn}x{Kn}xf32> {ref.name = "dw"})";
  std::string refBody = R"(    %dw = ref.matmul %x, %dy contract(0, 0) : tensor<{KJn}x{Kn}xf32>, tensor<{KJn}x{Kn}xf32>
    return %dw : tensor<{Kn}x{Kn}xf32>
)";
  std::string planArgs = R"(%x: tensor<{n}x{Kn}xf32> {dist.value = "x", dist.layout = #dist.layout<[(a, b), _]>}, %dy: tensor<{n}x{Kn}xf32> {dist.value = "dy", dist.layout = #dist.layout<[(a, b), _]>})";
  std::string planRes = R"(tensor<{Kn}x{Kn}xf32> {dist.value = "dw", dist.layout = #dist.layout<[_, _]>})";
  auto planBody = [](const char *first, const char *second) {
    return std::string("    %p = ref.matmul ") + first + ", " + second +
           R"( contract(0, 0) : tensor<{n}x{Kn}xf32>, tensor<{n}x{Kn}xf32>
    %t = ref.transpose %p perm [1, 0] : tensor<{Kn}x{Kn}xf32>
    %f = ref.reshape %t : tensor<{Kn}x{Kn}xf32> -> tensor<{KnKn}xf32>
    %r = ref.reshape %f : tensor<{KnKn}xf32> -> tensor<{Kn}x{Kn}xf32>
    %dw = dist.all_reduce %r over ["a", "b"] "sum" : tensor<{Kn}x{Kn}xf32> -> tensor<{Kn}x{Kn}xf32>
    return %dw : tensor<{Kn}x{Kn}xf32>
)";
  };
  for (auto &v : instances()) {
    std::map<std::string, int64_t> w = v;
    w["KnKn"] = v["Kn"] * v["Kn"];
    INFO("K=" << v["K"] << " J=" << v["J"] << " n=" << v["n"]);
    Verdicts right = run(fill(spec(refArgs, refRes, refBody, planArgs, planRes, planBody("%dy", "%x")), w));
    CHECK(right.element == Verdict::Verified);
    CHECK(right.layout == Verdict::Verified);
    // Near miss: the product in the reference's order, then transposed: dw^T.
    Verdicts wrong = run(fill(spec(refArgs, refRes, refBody, planArgs, planRes, planBody("%x", "%dy")), w));
    CHECK(wrong.element == Verdict::Violated);
    CHECK(wrong.layout != Verdict::Verified);
  }
}

TEST_CASE("a token-mean loss accumulated over microbatches meets the whole batch's",
          "[layouts]") {
  // The reference divides the summed cross-entropy by the batch's token count; the plan
  // divides each microbatch's sum by that same count and adds them (and their
  // gradients, derived through softmax and the mask's broadcast).
  std::string refArgs = R"(%x: tensor<4x2xf32> {ref.name = "x"}, %w: tensor<2x3xf32> {ref.name = "w"}, %labels: tensor<4x3xf32> {ref.name = "labels"}, %mask: tensor<4xf32> {ref.name = "mask"})";
  std::string refRes = R"(tensor<f32> {ref.name = "loss"}, tensor<2x3xf32> {ref.name = "dw"})";
  std::string refBody = R"(    %logits = ref.matmul %x, %w contract(1, 0) : tensor<4x2xf32>, tensor<2x3xf32>
    %sum = ref.cross_entropy_sum %logits, %labels, %mask : tensor<4x3xf32>, tensor<4xf32>
    %tokens = ref.reduce_sum %mask dims [0] : tensor<4xf32>
    %loss = ref.div %sum, %tokens : tensor<f32>
    %dw = ref.grad %loss wrt %w : tensor<f32>, tensor<2x3xf32> -> tensor<2x3xf32>
    return %loss, %dw : tensor<f32>, tensor<2x3xf32>
)";
  std::string planArgs;
  for (auto [v, t] : {std::pair<const char *, const char *>{"x", "4x2"}, {"w", "2x3"}, {"labels", "4x3"}, {"mask", "4"}})
    planArgs += std::string(planArgs.empty() ? "" : ", ") + "%" + v + ": tensor<" + t +
                "xf32> {dist.value = \"" + v + "\", dist.layout = #dist.layout<[" +
                (std::string(t).find('x') != std::string::npos ? "_, _" : "_") + "]>}";
  std::string planRes = R"(tensor<f32> {dist.value = "loss", dist.layout = #dist.layout<[]>}, tensor<2x3xf32> {dist.value = "dw", dist.layout = #dist.layout<[_, _]>})";
  auto planBody = [](bool globalCount) {
    std::string b;
    for (int i = 0; i < 2; ++i) {
      std::string k = std::to_string(i), o = std::to_string(2 * i);
      b += "    %x" + k + " = ref.slice %x offsets [" + o + ", 0] sizes [2, 2] : tensor<4x2xf32>\n" +
           "    %l" + k + " = ref.slice %labels offsets [" + o + ", 0] sizes [2, 3] : tensor<4x3xf32>\n" +
           "    %m" + k + " = ref.slice %mask offsets [" + o + "] sizes [2] : tensor<4xf32>\n" +
           "    %z" + k + " = ref.matmul %x" + k + ", %w contract(1, 0) : tensor<2x2xf32>, tensor<2x3xf32>\n" +
           "    %s" + k + " = ref.cross_entropy_sum %z" + k + ", %l" + k + ", %m" + k +
           " : tensor<2x3xf32>, tensor<2xf32>\n" +
           (globalCount ? "    %c" + k + " = ref.reduce_sum %mask dims [0] : tensor<4xf32>\n"
                        : "    %c" + k + " = ref.reduce_sum %m" + k + " dims [0] : tensor<2xf32>\n") +
           "    %p" + k + " = ref.div %s" + k + ", %c" + k + " : tensor<f32>\n" +
           "    %g" + k + " = ref.grad %p" + k + " wrt %w : tensor<f32>, tensor<2x3xf32> -> tensor<2x3xf32>\n";
    }
    return b + R"(    %loss = ref.add %p0, %p1 : tensor<f32>
    %dw = ref.add %g0, %g1 : tensor<2x3xf32>
    return %loss, %dw : tensor<f32>, tensor<2x3xf32>
)";
  };
  auto text = [&](bool global) {
    return fill(spec(refArgs, refRes, refBody, planArgs, planRes, planBody(global)), {{"K", 2}, {"J", 1}});
  };
  Verdicts right = run(text(true));
  CHECK(right.element == Verdict::Verified);
  CHECK(right.layout == Verdict::Verified);
  // Near miss: each microbatch's mean over its own tokens.
  Verdicts perMicrobatch = run(text(false));
  CHECK(perMicrobatch.element == Verdict::Violated);
  CHECK(perMicrobatch.layout != Verdict::Verified);
}

TEST_CASE("zigzag: shard_slice and all_gather in chunk order; an output's zigzag counts",
          "[layouts]") {
  // x [B, 2 K n] replicated; the plan takes each rank's zigzag chunks (rank p of K:
  // chunks p and 2K-1-p), doubles them and returns them as declared. The near misses:
  // a plain slice declared zigzag (the rows of the wrong chunks), and a gather in rank
  // order of zigzag chunks.
  const char *refArgs = R"(%x: tensor<{B}x{KKn}xf32> {ref.name = "x"})";
  std::string refRes = R"(tensor<{B}x{KKn}xf32> {ref.name = "y"})";
  std::string refBody = R"(    %y = ref.scale %x by 2.0 : tensor<{B}x{KKn}xf32>
    return %y : tensor<{B}x{KKn}xf32>
)";
  std::string planArgs =
      R"(%x: tensor<{B}x{KKn}xf32> {dist.value = "x", dist.layout = #dist.layout<[_, _]>})";
  auto sliced = [](const char *zig, const char *declared) {
    return std::make_pair(std::string(R"(    %s = dist.shard_slice %x over ["a"] dim 1)") + zig +
                              R"( : tensor<{B}x{KKn}xf32> -> tensor<{B}x{Kn2}xf32>
    %y = ref.scale %s by 2.0 : tensor<{B}x{Kn2}xf32>
    return %y : tensor<{B}x{Kn2}xf32>
)",
                          std::string(R"(tensor<{B}x{Kn2}xf32> {dist.value = "y", dist.layout = #dist.layout<[_, a)") +
                              declared + "]>}");
  };
  auto gathered = [](const char *zig) {
    return std::string(R"(    %s = dist.shard_slice %x over ["a"] dim 1 zigzag : tensor<{B}x{KKn}xf32> -> tensor<{B}x{Kn2}xf32>
    %d = ref.scale %s by 2.0 : tensor<{B}x{Kn2}xf32>
    %y = dist.all_gather %d over ["a"] dim 1)") +
           zig + R"( : tensor<{B}x{Kn2}xf32> -> tensor<{B}x{KKn}xf32>
    return %y : tensor<{B}x{KKn}xf32>
)";
  };
  std::string whole = R"(tensor<{B}x{KKn}xf32> {dist.value = "y", dist.layout = #dist.layout<[_, _]>})";
  for (int64_t K : {2, 3})
    for (int64_t n : {1, 2}) {
      std::map<std::string, int64_t> v{{"K", K}, {"J", 1}, {"B", 2}, {"KKn", 2 * K * n}, {"Kn2", 2 * n}};
      auto check = [&](const std::string &body, const std::string &res, bool right) {
        Verdicts got = run(fill(spec(refArgs, refRes, refBody, planArgs, res, body), v));
        CHECK(got.element == (right ? Verdict::Verified : Verdict::Violated));
        CHECK((got.layout == Verdict::Verified) == right);
      };
      auto [zz, zzRes] = sliced(" zigzag", " zigzag");
      check(zz, zzRes, true);
      auto [plain, plainRes] = sliced("", " zigzag");
      check(plain, plainRes, false);
      check(gathered(" zigzag"), whole, true);
      check(gathered(""), whole, false);
    }
}

TEST_CASE("shard_pad: each rank's block in zeros of the whole is a partial sum of it",
          "[layouts]") {
  // The adjoint of shard_slice: summed over the axis, the blocks fill the whole once.
  // Near miss: averaged instead of summed.
  const char *refArgs = R"(%x: tensor<{B}x{Kn}xf32> {ref.name = "x"})";
  std::string refRes = R"(tensor<{B}x{Kn}xf32> {ref.name = "y"})";
  std::string refBody = R"(    %y = ref.scale %x by 3.0 : tensor<{B}x{Kn}xf32>
    return %y : tensor<{B}x{Kn}xf32>
)";
  std::string planArgs =
      R"(%x: tensor<{B}x{Kn}xf32> {dist.value = "x", dist.layout = #dist.layout<[_, _]>})";
  std::string planRes =
      R"(tensor<{B}x{Kn}xf32> {dist.value = "y", dist.layout = #dist.layout<[_, _]>})";
  auto plan = [](const char *kind) {
    return std::string(R"(    %s = dist.shard_slice %x over ["a"] dim 1 : tensor<{B}x{Kn}xf32> -> tensor<{B}x{n}xf32>
    %d = ref.scale %s by 3.0 : tensor<{B}x{n}xf32>
    %p = dist.shard_pad %d over ["a"] dim 1 : tensor<{B}x{n}xf32> -> tensor<{B}x{Kn}xf32>
    %y = dist.all_reduce %p over ["a"] ")") +
           kind + R"(" : tensor<{B}x{Kn}xf32> -> tensor<{B}x{Kn}xf32>
    return %y : tensor<{B}x{Kn}xf32>
)";
  };
  proves(spec(refArgs, refRes, refBody, planArgs, planRes, plan("sum")),
         {"collective `dist.shard_pad`"});
  refutes(spec(refArgs, refRes, refBody, planArgs, planRes, plan("avg")));
}

TEST_CASE("products sharing an operand meet the product of the sum (distributivity)",
          "[layouts]") {
  // A weight gradient derived in two parts and added (x^T a + x^T b) against the
  // reference's one product of the summed cotangent; a tensor-parallel split of the
  // columns keeps it. Near miss: one part counted twice, the other dropped.
  const char *refArgs = R"(%x: tensor<{B}x{Kn}xf32> {ref.name = "x"}, %a: tensor<{B}x{KJn}xf32> {ref.name = "a"}, %b: tensor<{B}x{KJn}xf32> {ref.name = "b"})";
  std::string refRes = R"(tensor<{Kn}x{KJn}xf32> {ref.name = "g"})";
  std::string refBody = R"(    %s = ref.add %a, %b : tensor<{B}x{KJn}xf32>
    %g = ref.matmul %x, %s contract(0, 0) : tensor<{B}x{Kn}xf32>, tensor<{B}x{KJn}xf32>
    return %g : tensor<{Kn}x{KJn}xf32>
)";
  std::string planArgs = R"(%x: tensor<{B}x{Kn}xf32> {dist.value = "x", dist.layout = #dist.layout<[_, _]>}, %a: tensor<{B}x{Jn}xf32> {dist.value = "a", dist.layout = #dist.layout<[_, a]>}, %b: tensor<{B}x{Jn}xf32> {dist.value = "b", dist.layout = #dist.layout<[_, a]>})";
  std::string planRes =
      R"(tensor<{Kn}x{Jn}xf32> {dist.value = "g", dist.layout = #dist.layout<[_, a]>})";
  auto plan = [](const char *second) {
    return std::string(R"(    %ga = ref.matmul %x, %a contract(0, 0) : tensor<{B}x{Kn}xf32>, tensor<{B}x{Jn}xf32>
    %gb = ref.matmul %x, %)") +
           second + R"( contract(0, 0) : tensor<{B}x{Kn}xf32>, tensor<{B}x{Jn}xf32>
    %g = ref.add %ga, %gb : tensor<{Kn}x{Jn}xf32>
    return %g : tensor<{Kn}x{Jn}xf32>
)";
  };
  proves(spec(refArgs, refRes, refBody, planArgs, planRes, plan("b")));
  refutes(spec(refArgs, refRes, refBody, planArgs, planRes, plan("a")));
}

TEST_CASE("position_mask with each rank's query offset: the rows of the whole mask",
          "[layouts]") {
  // Queries split over a, keys whole; each rank passes its first query's global
  // position. Near misses: local positions (offset 0 on every rank), and a stride of
  // one row fewer than the block.
  const char *refArgs = R"(%s: tensor<{Kn}x{Kn}xf32> {ref.name = "s"}, %v: tensor<{Kn}x2xf32> {ref.name = "v"})";
  std::string refRes = R"(tensor<{Kn}x2xf32> {ref.name = "o"})";
  std::string refBody = R"(    %zero = arith.constant 0 : index
    %pos = ref.position_mask %zero, %zero causal window 2 : tensor<{Kn}x{Kn}xf32>
    %p = ref.masked_softmax %s, %pos : tensor<{Kn}x{Kn}xf32>, tensor<{Kn}x{Kn}xf32>
    %o = ref.matmul %p, %v contract(1, 0) : tensor<{Kn}x{Kn}xf32>, tensor<{Kn}x2xf32>
    return %o : tensor<{Kn}x2xf32>
)";
  std::string planArgs = R"(%s: tensor<{n}x{Kn}xf32> {dist.value = "s", dist.layout = #dist.layout<[a, _]>}, %v: tensor<{Kn}x2xf32> {dist.value = "v", dist.layout = #dist.layout<[_, _]>})";
  std::string planRes =
      R"(tensor<{n}x2xf32> {dist.value = "o", dist.layout = #dist.layout<[a, _]>})";
  auto plan = [](const char *q0) {
    return std::string(R"(    %r = dist.axis_index "a" : index
    %n = arith.constant {n} : index
    %one = arith.constant 1 : index
    %nm1 = arith.subi %n, %one : index
    %k0 = arith.constant 0 : index
    %q0 = )") + q0 + R"( : index
    %pos = ref.position_mask %q0, %k0 causal window 2 : tensor<{n}x{Kn}xf32>
    %p = ref.masked_softmax %s, %pos : tensor<{n}x{Kn}xf32>, tensor<{n}x{Kn}xf32>
    %o = ref.matmul %p, %v contract(1, 0) : tensor<{n}x{Kn}xf32>, tensor<{Kn}x2xf32>
    return %o : tensor<{n}x2xf32>
)";
  };
  proves(spec(refArgs, refRes, refBody, planArgs, planRes, plan("arith.muli %r, %n")),
         {"windows: rows chosen per rank", "index: affine in the rank's coordinates"});
  refutes(spec(refArgs, refRes, refBody, planArgs, planRes, plan("arith.muli %r, %k0")));
  // A stride of n - 1 differs from n's only where n > 1.
  refutesWithBlocks(
      spec(refArgs, refRes, refBody, planArgs, planRes, plan("arith.muli %r, %nm1")));
}

TEST_CASE("vocabulary-parallel embedding: each rank's rows from its offset", "[layouts]") {
  // The table's rows split over a; each rank looks up the ids in its rows (zeros
  // elsewhere: a partial sum over a) and scatters the gradients of its rows. Near
  // misses: every rank's offset 0; the lookup averaged over a.
  const char *refArgs = R"(%table: tensor<{Kn}x2xf32> {ref.name = "table"}, %dx: tensor<3x2xf32> {ref.name = "dx"}, %ids: tensor<3xi64> {ref.name = "ids", ref.bound = {Kn} : i64})";
  std::string refRes = R"(tensor<3x2xf32> {ref.name = "x"}, tensor<{Kn}x2xf32> {ref.name = "dtable"})";
  std::string refBody = R"(    %x = ref.embedding %table, %ids : tensor<{Kn}x2xf32>, tensor<3xi64>
    %dtable = ref.embedding_grad %dx, %ids : tensor<3x2xf32>, tensor<3xi64> -> tensor<{Kn}x2xf32>
    return %x, %dtable : tensor<3x2xf32>, tensor<{Kn}x2xf32>
)";
  std::string planArgs = R"(%table: tensor<{n}x2xf32> {dist.value = "table", dist.layout = #dist.layout<[a, _]>}, %dx: tensor<3x2xf32> {dist.value = "dx", dist.layout = #dist.layout<[_, _]>}, %ids: tensor<3xi64> {dist.value = "ids", dist.layout = #dist.layout<[_]>})";
  std::string planRes = R"(tensor<3x2xf32> {dist.value = "x", dist.layout = #dist.layout<[_, _]>}, tensor<{n}x2xf32> {dist.value = "dtable", dist.layout = #dist.layout<[a, _]>})";
  auto plan = [](const char *first, const char *kind) {
    return std::string(R"(    %r = dist.axis_index "a" : index
    %n = arith.constant {n} : index
    %zero = arith.constant 0 : index
    %first = )") + first + R"( : index
    %x_part = ref.embedding %table, %ids offset %first : tensor<{n}x2xf32>, tensor<3xi64>
    %x = dist.all_reduce %x_part over ["a"] ")" + kind + R"(" : tensor<3x2xf32> -> tensor<3x2xf32>
    %dtable = ref.embedding_grad %dx, %ids offset %first : tensor<3x2xf32>, tensor<3xi64> -> tensor<{n}x2xf32>
    return %x, %dtable : tensor<3x2xf32>, tensor<{n}x2xf32>
)";
  };
  proves(spec(refArgs, refRes, refBody, planArgs, planRes, plan("arith.muli %r, %n", "sum")),
         {"windows: rows chosen per rank"});
  refutes(spec(refArgs, refRes, refBody, planArgs, planRes, plan("arith.muli %r, %zero", "sum")));
  refutes(spec(refArgs, refRes, refBody, planArgs, planRes, plan("arith.muli %r, %n", "avg")));
}

TEST_CASE("vocabulary-parallel one_hot: each rank's classes from its offset", "[layouts]") {
  // The classes split over a: each rank's one-hot columns start at its first class,
  // its logits' block picked by them (zeros for the labels of other ranks: a partial
  // sum over a). Near misses: every rank's offset 0; a stride of one class fewer than
  // the block; the pick averaged over a.
  const char *refArgs = R"(%logits: tensor<3x{Kn}xf32> {ref.name = "logits"}, %ids: tensor<3xi64> {ref.name = "ids", ref.bound = {Kn} : i64})";
  std::string refRes = R"(tensor<3x{Kn}xf32> {ref.name = "hot"}, tensor<3xf32> {ref.name = "picked"})";
  std::string refBody = R"(    %hot = ref.one_hot %ids : tensor<3xi64> -> tensor<3x{Kn}xf32>
    %p = ref.mul %logits, %hot : tensor<3x{Kn}xf32>
    %picked = ref.reduce_sum %p dims [1] : tensor<3x{Kn}xf32>
    return %hot, %picked : tensor<3x{Kn}xf32>, tensor<3xf32>
)";
  std::string planArgs = R"(%logits: tensor<3x{n}xf32> {dist.value = "logits", dist.layout = #dist.layout<[_, a]>}, %ids: tensor<3xi64> {dist.value = "ids", dist.layout = #dist.layout<[_]>})";
  std::string planRes = R"(tensor<3x{n}xf32> {dist.value = "hot", dist.layout = #dist.layout<[_, a]>}, tensor<3xf32> {dist.value = "picked", dist.layout = #dist.layout<[_]>})";
  auto plan = [](const char *first, const char *kind) {
    return std::string(R"(    %r = dist.axis_index "a" : index
    %n = arith.constant {n} : index
    %one = arith.constant 1 : index
    %nm1 = arith.subi %n, %one : index
    %zero = arith.constant 0 : index
    %first = )") + first + R"( : index
    %hot = ref.one_hot %ids offset %first : tensor<3xi64> -> tensor<3x{n}xf32>
    %p = ref.mul %logits, %hot : tensor<3x{n}xf32>
    %part = ref.reduce_sum %p dims [1] : tensor<3x{n}xf32>
    %picked = dist.all_reduce %part over ["a"] ")" + kind + R"(" : tensor<3xf32> -> tensor<3xf32>
    return %hot, %picked : tensor<3x{n}xf32>, tensor<3xf32>
)";
  };
  proves(spec(refArgs, refRes, refBody, planArgs, planRes, plan("arith.muli %r, %n", "sum")),
         {"windows: rows chosen per rank"});
  refutes(spec(refArgs, refRes, refBody, planArgs, planRes, plan("arith.muli %r, %zero", "sum")));
  refutes(spec(refArgs, refRes, refBody, planArgs, planRes, plan("arith.muli %r, %n", "avg")));
  refutesWithBlocks(
      spec(refArgs, refRes, refBody, planArgs, planRes, plan("arith.muli %r, %nm1", "sum")));
}

TEST_CASE("a one-hot's block times a function of its own row sums: the function at 1",
          "[layouts]") {
  // Each rank's one-hot columns (classes split over a) times an affine function of
  // their own row sums, which are 0 or 1: the one-hot times the function at 1
  // (torchtitan's loss-parallel update: one_hot * ((1 - row sums) - 1) = -one_hot).
  // Near misses: the row sums of a one-hot every rank takes from class 0; the sums of
  // the other dimension (a class's count, which may exceed 1); another ids' one-hot
  // times these row sums.
  const char *refArgs = R"(%ids: tensor<3xi64> {ref.name = "ids", ref.bound = {Kn} : i64}, %other: tensor<3xi64> {ref.name = "other", ref.bound = {Kn} : i64})";
  auto ref = [](const char *factor) {
    return std::string(R"(    %hot = ref.one_hot %ids : tensor<3xi64> -> tensor<3x{Kn}xf32>
    %out = ref.scale %hot by )") + factor + R"( : tensor<3x{Kn}xf32>
    return %out : tensor<3x{Kn}xf32>
)";
  };
  std::string refRes = R"(tensor<3x{Kn}xf32> {ref.name = "out"})";
  std::string planArgs = R"(%ids: tensor<3xi64> {dist.value = "ids", dist.layout = #dist.layout<[_]>}, %other: tensor<3xi64> {dist.value = "other", dist.layout = #dist.layout<[_]>})";
  std::string planRes = R"(tensor<3x{n}xf32> {dist.value = "out", dist.layout = #dist.layout<[_, a]>})";
  auto plan = [](const char *summed, const char *sums, const char *function,
                 const char *times) {
    return std::string(R"(    %r = dist.axis_index "a" : index
    %n = arith.constant {n} : index
    %zero = arith.constant 0 : index
    %first = arith.muli %r, %n : index
    %first0 = arith.muli %r, %zero : index
    %hot = ref.one_hot %ids offset %first : tensor<3xi64> -> tensor<3x{n}xf32>
    %hot0 = ref.one_hot %ids offset %first0 : tensor<3xi64> -> tensor<3x{n}xf32>
    %hotb = ref.one_hot %other offset %first : tensor<3xi64> -> tensor<3x{n}xf32>
    %one = ref.constant 1.0 : tensor<3xf32>
    %s = ref.reduce_sum )") + summed + " " + sums + "\n" + function + R"(
    %hb = ref.broadcast %h dims [0] : tensor<3xf32> -> tensor<3x{n}xf32>
    %out = ref.mul )" + times + R"(, %hb : tensor<3x{n}xf32>
    return %out : tensor<3x{n}xf32>
)";
  };
  const char *rows = "dims [1] : tensor<3x{n}xf32>";
  const char *torchtitan = R"(    %keep = ref.sub %one, %s : tensor<3xf32>
    %h = ref.sub %keep, %one : tensor<3xf32>)";
  const char *affine = R"(    %s3 = ref.scale %s by 3.0 : tensor<3xf32>
    %h = ref.add %one, %s3 : tensor<3xf32>)";
  proves(spec(refArgs, refRes, ref("-1.0"), planArgs, planRes, plan("%hot", rows, torchtitan, "%hot")),
         {"row sums: a one-hot's block times a function of its row sums"});
  // 1 + 3 s, and the product in the other order.
  std::string swapped = plan("%hot", rows, affine, "%hot");
  swapped.replace(swapped.find("ref.mul %hot, %hb"), 17, "ref.mul %hb, %hot");
  proves(spec(refArgs, refRes, ref("4.0"), planArgs, planRes, swapped));
  refutes(spec(refArgs, refRes, ref("-1.0"), planArgs, planRes, plan("%hot0", rows, torchtitan, "%hot")));
  refutes(spec(refArgs, refRes, ref("-1.0"), planArgs, planRes, plan("%hot", rows, torchtitan, "%hotb")));
  // The sums of a class's column over the rows: broadcast along the rows instead.
  std::string columns = plan("%hot", "dims [0] : tensor<3x{n}xf32>", torchtitan, "%hot");
  columns.replace(columns.find("ref.broadcast %h dims [0] : tensor<3xf32>"),
                  std::string("ref.broadcast %h dims [0] : tensor<3xf32>").size(),
                  "ref.broadcast %h dims [1] : tensor<{n}xf32>");
  for (const char *t : {"%keep = ref.sub %one, %s : tensor<3xf32>", "%h = ref.sub %keep, %one : tensor<3xf32>"})
    columns.replace(columns.find(t), std::string(t).size(),
                    std::string(t).replace(std::string(t).find("tensor<3xf32>"), 13, "tensor<{n}xf32>"));
  columns.replace(columns.find("%one = ref.constant 1.0 : tensor<3xf32>"),
                  std::string("%one = ref.constant 1.0 : tensor<3xf32>").size(),
                  "%one = ref.constant 1.0 : tensor<{n}xf32>");
  refutesWithBlocks(spec(refArgs, refRes, ref("-1.0"), planArgs, planRes, columns));
}

TEST_CASE("a one-hot's rows sum to 1: picks of a difference, and totals in two shapes",
          "[layouts]") {
  // Ids in [0, Kn) over Kn classes: the sum over the classes of one_hot x (x - c copied
  // along the classes) is the pick of x minus c (a cross-entropy's log-probability
  // picked by the reference, the label's logit picked by a vocabulary-parallel plan,
  // Megatron's, which subtracts the rest itself); and the total of that difference in
  // a [1, 2] shape is the reference's total over [2]. Near misses: c copied along the
  // rows instead; another ids' one-hot; ids of a bound past the classes (J = 2: a row
  // of zeros where the reference's id is past them); the plan's total of c doubled.
  const char *refArgs = R"(%x: tensor<2x{Kn}xf32> {ref.name = "x"}, %c: tensor<2xf32> {ref.name = "c"}, %ids: tensor<2xi64> {ref.name = "ids", ref.bound = BOUND : i64}, %other: tensor<2xi64> {ref.name = "other", ref.bound = {Kn} : i64})";
  std::string refRes = R"(tensor<2xf32> {ref.name = "picked"}, tensor<f32> {ref.name = "total"})";
  std::string refBody = R"(    %hot = ref.one_hot %ids : tensor<2xi64> -> tensor<2x{Kn}xf32>
    %cb = ref.broadcast %c dims [0] : tensor<2xf32> -> tensor<2x{Kn}xf32>
    %z = ref.sub %x, %cb : tensor<2x{Kn}xf32>
    %p = ref.mul %hot, %z : tensor<2x{Kn}xf32>
    %picked = ref.reduce_sum %p dims [1] : tensor<2x{Kn}xf32>
    %total = ref.reduce_sum %p dims [0, 1] : tensor<2x{Kn}xf32>
    return %picked, %total : tensor<2xf32>, tensor<f32>
)";
  std::string planArgs = R"(%x: tensor<2x{n}xf32> {dist.value = "x", dist.layout = #dist.layout<[_, a]>}, %c: tensor<2xf32> {dist.value = "c", dist.layout = #dist.layout<[_]>}, %ids: tensor<2xi64> {dist.value = "ids", dist.layout = #dist.layout<[_]>}, %other: tensor<2xi64> {dist.value = "other", dist.layout = #dist.layout<[_]>})";
  std::string planRes = R"(tensor<2xf32> {dist.value = "picked", dist.layout = #dist.layout<[_]>}, tensor<f32> {dist.value = "total", dist.layout = #dist.layout<[]>})";
  auto plan = [](const char *ids, const char *copies) {
    return std::string(R"(    %r = dist.axis_index "a" : index
    %n = arith.constant {n} : index
    %first = arith.muli %r, %n : index
    %hot = ref.one_hot )") + ids + R"( offset %first : tensor<2xi64> -> tensor<2x{n}xf32>
    %p = ref.mul %x, %hot : tensor<2x{n}xf32>
    %part = ref.reduce_sum %p dims [1] : tensor<2x{n}xf32>
    %px = dist.all_reduce %part over ["a"] "sum" : tensor<2xf32> -> tensor<2xf32>
    %picked = ref.sub %px, %c : tensor<2xf32>
    %c2 = ref.scale %c by )" + copies + R"( : tensor<2xf32>
    %d = ref.sub %px, %c2 : tensor<2xf32>
    %d13 = ref.reshape %d : tensor<2xf32> -> tensor<1x2xf32>
    %total = ref.reduce_sum %d13 dims [0, 1] : tensor<1x2xf32>
    return %picked, %total : tensor<2xf32>, tensor<f32>
)";
  };
  auto bound = [&](const char *b) {
    std::string a = refArgs;
    a.replace(a.find("BOUND"), 5, b);
    return a;
  };
  proves(spec(bound("{Kn}"), refRes, refBody, planArgs, planRes, plan("%ids", "1.0")),
         {"reference: picks: a one-hot's rows sum to 1"});
  refutes(spec(bound("{Kn}"), refRes, refBody, planArgs, planRes, plan("%other", "1.0")));
  refutes(spec(bound("{Kn}"), refRes, refBody, planArgs, planRes, plan("%ids", "2.0")));
  decides(spec(bound("{KJn}"), refRes, refBody, planArgs, planRes, plan("%ids", "1.0")),
          Verdict::Violated, true);
  std::string rows = refBody;
  rows.replace(rows.find("%cb = ref.broadcast %c dims [0] : tensor<2xf32>"),
               std::string("%cb = ref.broadcast %c dims [0] : tensor<2xf32>").size(),
               "%cb = ref.broadcast %cr dims [1] : tensor<{Kn}xf32>");
  rows.replace(rows.find("    %cb"), 0, "    %cr = ref.reduce_sum %x dims [0] : tensor<2x{Kn}xf32>\n");
  refutes(spec(bound("{Kn}"), refRes, rows, planArgs, planRes, plan("%ids", "1.0")));
}

TEST_CASE("rows of a one-hot sum to 1 too: a microbatch's cut of a rank's one-hot",
          "[layouts]") {
  // Each rank one-hots its two rows of ids and cuts the one-hot into two microbatches
  // of one row (slices keeping every class; their global value is a concatenation of
  // the ranks' slices): the sum over the classes of a cut times (x - c copied along
  // the classes) is the pick of x minus c, as the reference computes it. Near misses:
  // a cut that drops the last class (a row whose id is 2 picks nothing), and the
  // microbatches' rows crossed.
  const char *refArgs = R"(%x: tensor<{KJ2}x3xf32> {ref.name = "x"}, %c: tensor<{KJ2}xf32> {ref.name = "c"}, %ids: tensor<{KJ2}xi64> {ref.name = "ids", ref.bound = 3 : i64})";
  std::string refRes = R"(tensor<f32> {ref.name = "total"})";
  std::string refBody = R"(    %hot = ref.one_hot %ids : tensor<{KJ2}xi64> -> tensor<{KJ2}x3xf32>
    %p = ref.mul %hot, %x : tensor<{KJ2}x3xf32>
    %k = ref.reduce_sum %p dims [1] : tensor<{KJ2}x3xf32>
    %d = ref.sub %k, %c : tensor<{KJ2}xf32>
    %total = ref.reduce_sum %d dims [0] : tensor<{KJ2}xf32>
    return %total : tensor<f32>
)";
  std::string planArgs = R"(%x: tensor<2x3xf32> {dist.value = "x", dist.layout = #dist.layout<[(a, b), _]>}, %c: tensor<2xf32> {dist.value = "c", dist.layout = #dist.layout<[(a, b)]>}, %ids: tensor<2xi64> {dist.value = "ids", dist.layout = #dist.layout<[(a, b)]>})";
  std::string planRes = R"(tensor<f32> {dist.value = "total", dist.layout = #dist.layout<[]>})";
  auto plan = [](int classes, const char *second) {
    std::string C = std::to_string(classes);
    return std::string(R"(    %hot = ref.one_hot %ids : tensor<2xi64> -> tensor<2x3xf32>
    %h0 = ref.slice %hot offsets [0, 0] sizes [1, )") + C + R"(] : tensor<2x3xf32>
    %h1 = ref.slice %hot offsets [1, 0] sizes [1, )" + C + R"(] : tensor<2x3xf32>
    %x0 = ref.slice %x offsets [0, 0] sizes [1, )" + C + R"(] : tensor<2x3xf32>
    %x1 = ref.slice %x offsets [)" + second + R"(, 0] sizes [1, )" + C + R"(] : tensor<2x3xf32>
    %c0 = ref.slice %c offsets [0] sizes [1] : tensor<2xf32>
    %c1 = ref.slice %c offsets [)" + second + R"(] sizes [1] : tensor<2xf32>
    %cb0 = ref.broadcast %c0 dims [0] : tensor<1xf32> -> tensor<1x)" + C + R"(xf32>
    %cb1 = ref.broadcast %c1 dims [0] : tensor<1xf32> -> tensor<1x)" + C + R"(xf32>
    %z0 = ref.sub %x0, %cb0 : tensor<1x)" + C + R"(xf32>
    %z1 = ref.sub %x1, %cb1 : tensor<1x)" + C + R"(xf32>
    %p0 = ref.mul %h0, %z0 : tensor<1x)" + C + R"(xf32>
    %p1 = ref.mul %h1, %z1 : tensor<1x)" + C + R"(xf32>
    %k0 = ref.reduce_sum %p0 dims [1] : tensor<1x)" + C + R"(xf32>
    %k1 = ref.reduce_sum %p1 dims [1] : tensor<1x)" + C + R"(xf32>
    %s0 = ref.reduce_sum %k0 dims [0] : tensor<1xf32>
    %s1 = ref.reduce_sum %k1 dims [0] : tensor<1xf32>
    %s = ref.add %s0, %s1 : tensor<f32>
    %total = dist.all_reduce %s over ["a", "b"] "sum" : tensor<f32> -> tensor<f32>
    return %total : tensor<f32>
)";
  };
  // At 2 ranks only: the element engine needs seconds for each further row of ids.
  std::map<std::string, int64_t> at = {{"K", 2}, {"J", 1}, {"KJ2", 4}};
  Verdicts right = run(fill(spec(refArgs, refRes, refBody, planArgs, planRes, plan(3, "1")), at));
  CHECK(right.element == Verdict::Verified);
  CHECK(right.layout == Verdict::Verified);
  CHECK(fired(right.proof, "picks: a one-hot's rows sum to 1"));
  for (auto [classes, second] : {std::pair{2, "1"}, std::pair{3, "0"}}) {
    Verdicts wrong =
        run(fill(spec(refArgs, refRes, refBody, planArgs, planRes, plan(classes, second)), at));
    CHECK(wrong.element == Verdict::Violated);
    CHECK(wrong.layout != Verdict::Verified);
  }
}

TEST_CASE("slices of a split batch stacked along it: each rank's reshape of its block",
          "[layouts]") {
  // A row-parallel output's positions stacked along the batch (torchtitan's sequence
  // parallelism), where the batch is split over a (FSDP): each rank's concatenation of
  // its one batch row's position slices is the reshape of its block; a function of it,
  // reshaped back, is the reference's. Near misses: two slices in the other order; one
  // slice twice.
  const char *refArgs = R"(%x: tensor<{KJ}x4x2xf32> {ref.name = "x"})";
  std::string refRes = R"(tensor<{KJ}x4x2xf32> {ref.name = "y"})";
  std::string refBody = R"(    %y = ref.exp %x : tensor<{KJ}x4x2xf32>
    return %y : tensor<{KJ}x4x2xf32>
)";
  std::string planArgs = R"(%x: tensor<1x4x2xf32> {dist.value = "x", dist.layout = #dist.layout<[(a, b), _, _]>})";
  std::string planRes = R"(tensor<1x4x2xf32> {dist.value = "y", dist.layout = #dist.layout<[(a, b), _, _]>})";
  auto plan = [](const char *order) {
    return std::string(R"(    %p0 = ref.slice %x offsets [0, 0, 0] sizes [1, 1, 2] : tensor<1x4x2xf32>
    %p1 = ref.slice %x offsets [0, 1, 0] sizes [1, 1, 2] : tensor<1x4x2xf32>
    %p2 = ref.slice %x offsets [0, 2, 0] sizes [1, 1, 2] : tensor<1x4x2xf32>
    %p3 = ref.slice %x offsets [0, 3, 0] sizes [1, 1, 2] : tensor<1x4x2xf32>
    %s = ref.concat )") + order + R"( dim 0 : tensor<1x1x2xf32>, tensor<1x1x2xf32>, tensor<1x1x2xf32>, tensor<1x1x2xf32>
    %e = ref.exp %s : tensor<4x1x2xf32>
    %y = ref.reshape %e : tensor<4x1x2xf32> -> tensor<1x4x2xf32>
    return %y : tensor<1x4x2xf32>
)";
  };
  proves(spec(refArgs, refRes, refBody, planArgs, planRes, plan("%p0, %p1, %p2, %p3")));
  refutes(spec(refArgs, refRes, refBody, planArgs, planRes, plan("%p1, %p0, %p2, %p3")));
  refutes(spec(refArgs, refRes, refBody, planArgs, planRes, plan("%p0, %p0, %p2, %p3")));
  // Chunks of two positions (a sequence cut in two for tp = 2): the same, with the
  // chunks in the other order as the near miss.
  auto chunks = [](const char *order) {
    return std::string(R"(    %p0 = ref.slice %x offsets [0, 0, 0] sizes [1, 2, 2] : tensor<1x4x2xf32>
    %p1 = ref.slice %x offsets [0, 2, 0] sizes [1, 2, 2] : tensor<1x4x2xf32>
    %s = ref.concat )") + order + R"( dim 0 : tensor<1x2x2xf32>, tensor<1x2x2xf32>
    %e = ref.exp %s : tensor<2x2x2xf32>
    %y = ref.reshape %e : tensor<2x2x2xf32> -> tensor<1x4x2xf32>
    return %y : tensor<1x4x2xf32>
)";
  };
  proves(spec(refArgs, refRes, refBody, planArgs, planRes, chunks("%p0, %p1")));
  refutes(spec(refArgs, refRes, refBody, planArgs, planRes, chunks("%p1, %p0")));
}

TEST_CASE("functions of values reshaped alike are reshapes of the functions", "[layouts]") {
  // torchtitan with FSDP stacks a batch row's positions along the batch ([1, S, H] on
  // each rank becomes [S, 1, H]) and computes its RMSNorm there: the square, the mean
  // over H, the added constant and rsqrt, the broadcasts of the inverse root and of the
  // weight, the products. Each meets the reference's [B, S, H] computation as a reshape
  // of one term. Near miss: the weight broadcast along the positions (dimension 0 of
  // the stacked shape is a group of its own, so it lifts, to another value).
  const char *refArgs = R"(%x: tensor<{KJ}x2x2xf32> {ref.name = "x"}, %w: tensor<2xf32> {ref.name = "w"})";
  std::string refRes = R"(tensor<{KJ}x2x2xf32> {ref.name = "y"})";
  std::string refBody = R"(    %sq = ref.mul %x, %x : tensor<{KJ}x2x2xf32>
    %m = ref.reduce_mean %sq dims [2] : tensor<{KJ}x2x2xf32>
    %m1 = ref.reshape %m : tensor<{KJ}x2xf32> -> tensor<{KJ}x2x1xf32>
    %c = ref.constant 5.000000e-01 : tensor<{KJ}x2x1xf32>
    %a = ref.add %m1, %c : tensor<{KJ}x2x1xf32>
    %r = ref.rsqrt %a : tensor<{KJ}x2x1xf32>
    %r2 = ref.reshape %r : tensor<{KJ}x2x1xf32> -> tensor<{KJ}x2xf32>
    %rb = ref.broadcast %r2 dims [0, 1] : tensor<{KJ}x2xf32> -> tensor<{KJ}x2x2xf32>
    %y0 = ref.mul %x, %rb : tensor<{KJ}x2x2xf32>
    %wb = ref.broadcast %w dims [2] : tensor<2xf32> -> tensor<{KJ}x2x2xf32>
    %y = ref.mul %y0, %wb : tensor<{KJ}x2x2xf32>
    return %y : tensor<{KJ}x2x2xf32>
)";
  std::string planArgs = R"(%x: tensor<1x2x2xf32> {dist.value = "x", dist.layout = #dist.layout<[(a, b), _, _]>}, %w: tensor<2xf32> {dist.value = "w", dist.layout = #dist.layout<[_]>})";
  std::string planRes = R"(tensor<1x2x2xf32> {dist.value = "y", dist.layout = #dist.layout<[(a, b), _, _]>})";
  auto plan = [](const char *weightDim) {
    return std::string(R"(    %s = ref.reshape %x : tensor<1x2x2xf32> -> tensor<2x1x2xf32>
    %sq = ref.mul %s, %s : tensor<2x1x2xf32>
    %m = ref.reduce_mean %sq dims [2] : tensor<2x1x2xf32>
    %m1 = ref.reshape %m : tensor<2x1xf32> -> tensor<2x1x1xf32>
    %c = ref.constant 5.000000e-01 : tensor<2x1x1xf32>
    %a = ref.add %m1, %c : tensor<2x1x1xf32>
    %r = ref.rsqrt %a : tensor<2x1x1xf32>
    %r2 = ref.reshape %r : tensor<2x1x1xf32> -> tensor<2x1xf32>
    %rb = ref.broadcast %r2 dims [0, 1] : tensor<2x1xf32> -> tensor<2x1x2xf32>
    %y0 = ref.mul %s, %rb : tensor<2x1x2xf32>
    %wb = ref.broadcast %w dims [)") + weightDim + R"(] : tensor<2xf32> -> tensor<2x1x2xf32>
    %y1 = ref.mul %y0, %wb : tensor<2x1x2xf32>
    %y = ref.reshape %y1 : tensor<2x1x2xf32> -> tensor<1x2x2xf32>
    return %y : tensor<1x2x2xf32>
)";
  };
  proves(spec(refArgs, refRes, refBody, planArgs, planRes, plan("2")));
  refutes(spec(refArgs, refRes, refBody, planArgs, planRes, plan("0")));
}

TEST_CASE("a sum over whole groups of a reshape is the reshape of the sum; a broadcast "
          "copying whole groups is one", "[layouts]") {
  // [1, 4, 2] merged to [4, 2] keeps H whole: a sum (mean) over it is the reference's
  // sum over H, and a product by the weight broadcast along it the reference's
  // product. Near misses: [1, 4, 2] as [2, 4] (one group) summed over its dimension 0,
  // or times the weight broadcast along it (each row by one weight element).
  const char *refArgs = R"(%x: tensor<{KJ}x4x2xf32> {ref.name = "x"}, %w: tensor<2xf32> {ref.name = "w"})";
  std::string refRes = R"(tensor<{KJ}x4xf32> {ref.name = "s"}, tensor<{KJ}x4x2xf32> {ref.name = "y"})";
  std::string refBody = R"(    %s = ref.reduce_mean %x dims [2] : tensor<{KJ}x4x2xf32>
    %wb = ref.broadcast %w dims [2] : tensor<2xf32> -> tensor<{KJ}x4x2xf32>
    %y = ref.mul %x, %wb : tensor<{KJ}x4x2xf32>
    return %s, %y : tensor<{KJ}x4xf32>, tensor<{KJ}x4x2xf32>
)";
  std::string planArgs = R"(%x: tensor<1x4x2xf32> {dist.value = "x", dist.layout = #dist.layout<[(a, b), _, _]>}, %w: tensor<2xf32> {dist.value = "w", dist.layout = #dist.layout<[_]>})";
  std::string planRes = R"(tensor<1x4xf32> {dist.value = "s", dist.layout = #dist.layout<[(a, b), _]>}, tensor<1x4x2xf32> {dist.value = "y", dist.layout = #dist.layout<[(a, b), _, _]>})";
  auto plan = [](bool sumRight, bool productRight) {
    std::string sum = sumRight ? R"(    %v = ref.reshape %x : tensor<1x4x2xf32> -> tensor<4x2xf32>
    %m = ref.reduce_mean %v dims [1] : tensor<4x2xf32>
)"
                               : R"(    %v = ref.reshape %x : tensor<1x4x2xf32> -> tensor<2x4xf32>
    %m = ref.reduce_mean %v dims [0] : tensor<2x4xf32>
)";
    std::string product = productRight ? R"(    %u = ref.reshape %x : tensor<1x4x2xf32> -> tensor<4x2xf32>
    %wb = ref.broadcast %w dims [1] : tensor<2xf32> -> tensor<4x2xf32>
    %p = ref.mul %u, %wb : tensor<4x2xf32>
    %y = ref.reshape %p : tensor<4x2xf32> -> tensor<1x4x2xf32>
)"
                                       : R"(    %u = ref.reshape %x : tensor<1x4x2xf32> -> tensor<2x4xf32>
    %wb = ref.broadcast %w dims [0] : tensor<2xf32> -> tensor<2x4xf32>
    %p = ref.mul %u, %wb : tensor<2x4xf32>
    %y = ref.reshape %p : tensor<2x4xf32> -> tensor<1x4x2xf32>
)";
    return sum + R"(    %s = ref.reshape %m : tensor<4xf32> -> tensor<1x4xf32>
)" + product + R"(    return %s, %y : tensor<1x4xf32>, tensor<1x4x2xf32>
)";
  };
  proves(spec(refArgs, refRes, refBody, planArgs, planRes, plan(true, true)));
  refutes(spec(refArgs, refRes, refBody, planArgs, planRes, plan(false, true)));
  refutes(spec(refArgs, refRes, refBody, planArgs, planRes, plan(true, false)));
}

TEST_CASE("a batch with one entry per rank merges into the contracted rows", "[layouts]") {
  // XLA's weight gradient contracts batch and sequence at once: dW = sum over b, s of
  // x[b, s, :]^T g[b, s, :]. The reference merges them ([1, D, B S]); the plan, its batch
  // split with one entry per rank, multiplies x's transpose [D, B, S] by g [B, S, F] --
  // D whole (a batch of 1) or split over b with one entry per rank (then g is a batch
  // of one for every entry) -- or x's transpose reshaped to [1, D, B S] by g, and sums
  // over the batch axes. Near misses: g's entries on the ranks in the other axis order
  // (x's batch entry times another's g), and the sum an average.
  const char *refArgs = R"(%x: tensor<{B}x{S}x{D}xf32> {ref.name = "x"}, %g: tensor<{B}x{S}x4xf32> {ref.name = "g"})";
  std::string refRes = R"(tensor<{D}x4xf32> {ref.name = "dw"})";
  std::string refBody = R"(    %xp = ref.transpose %x perm [2, 0, 1] : tensor<{B}x{S}x{D}xf32>
    %xt = ref.reshape %xp : tensor<{D}x{B}x{S}xf32> -> tensor<1x{D}x{B2}xf32>
    %gr = ref.reshape %g : tensor<{B}x{S}x4xf32> -> tensor<1x{B2}x4xf32>
    %p = ref.batch_matmul %xt, %gr contract(2, 1) : tensor<1x{D}x{B2}xf32>, tensor<1x{B2}x4xf32>
    %dw = ref.reshape %p : tensor<1x{D}x4xf32> -> tensor<{D}x4xf32>
    return %dw : tensor<{D}x4xf32>
)";
  auto planArgs = [](const char *xLayout, const char *gAxes, int64_t d) {
    return std::string(R"(%x: tensor<1x2x)") + std::to_string(d) +
           R"(xf32> {dist.value = "x", dist.layout = #dist.layout<)" + xLayout +
           R"(>}, %g: tensor<1x2x4xf32> {dist.value = "g", dist.layout = #dist.layout<[)" +
           gAxes + R"(, _, _]>})";
  };
  auto planRes = [](const char *layout) {
    return std::string(R"(tensor<1x4xf32> {dist.value = "dw", dist.layout = #dist.layout<)") +
           layout + ">}";
  };
  // x's transpose [D, B, S] (D one entry per rank) by g [B, S, F].
  auto transposed = [](const char *axes, const char *kind) {
    return std::string(R"(    %xt = ref.transpose %x perm [2, 0, 1] : tensor<1x2x1xf32>
    %p = ref.batch_matmul %xt, %g contract(2, 1) : tensor<1x1x2xf32>, tensor<1x2x4xf32>
    %q = ref.reshape %p : tensor<1x1x4xf32> -> tensor<1x4xf32>
    %dw = dist.all_reduce %q over )") + axes + " \"" + kind + R"(" : tensor<1x4xf32> -> tensor<1x4xf32>
    return %dw : tensor<1x4xf32>
)";
  };
  // x's transpose gathered, reshaped to [1, D, B S] and cut back: only g is merged.
  std::string rhsOnly = R"(    %xt = ref.transpose %x perm [0, 2, 1] : tensor<1x2x1xf32>
    %xs = dist.all_gather %xt over ["a", "b"] dim 0 : tensor<1x1x2xf32> -> tensor<{B}x1x2xf32>
    %xm = ref.transpose %xs perm [1, 0, 2] : tensor<{B}x1x2xf32>
    %xr = ref.reshape %xm : tensor<1x{B}x2xf32> -> tensor<1x1x{B2}xf32>
    %xl = dist.shard_slice %xr over ["a", "b"] dim 2 : tensor<1x1x{B2}xf32> -> tensor<1x1x2xf32>
    %p = ref.batch_matmul %xl, %g contract(2, 1) : tensor<1x1x2xf32>, tensor<1x2x4xf32>
    %q = ref.reshape %p : tensor<1x1x4xf32> -> tensor<1x4xf32>
    %dw = dist.all_reduce %q over ["a", "b"] "sum" : tensor<1x4xf32> -> tensor<1x4xf32>
    return %dw : tensor<1x4xf32>
)";
  for (auto v : instances()) {
    // The batch over (a, b), D = 1.
    v["B"] = v["KJ"];
    v["S"] = 2;
    v["B2"] = 2 * v["KJ"];
    v["D"] = 1;
    std::string args = planArgs("[(a, b), _, _]", "(a, b)", 1), res = planRes("[_, _]");
    expectVerdict(fill(spec(refArgs, refRes, refBody, args, res,
                            transposed(R"(["a", "b"])", "sum")), v),
                  Verdict::Verified);
    expectVerdict(fill(spec(refArgs, refRes, refBody, args, res, rhsOnly), v), Verdict::Verified);
    expectVerdict(fill(spec(refArgs, refRes, refBody, args, res,
                            transposed(R"(["a", "b"])", "avg")), v),
                  Verdict::Violated);
    if (v["J"] == 2)
      expectVerdict(fill(spec(refArgs, refRes, refBody,
                              planArgs("[(a, b), _, _]", "(b, a)", 1), res,
                              transposed(R"(["a", "b"])", "sum")),
                         v),
                    Verdict::Violated);
    // The batch over a, D over b (one entry per rank): g is a batch of one.
    v["B"] = v["K"];
    v["B2"] = 2 * v["K"];
    v["D"] = v["J"];
    expectVerdict(fill(spec(refArgs, refRes, refBody, planArgs("[a, _, b]", "a", 1),
                            planRes("[b, _]"), transposed(R"(["a"])", "sum")),
                       v),
                  Verdict::Verified);
    // The batch over a, the sequence over b (sequence parallelism): the merged rows
    // split over a, then b.
    v["S"] = 2 * v["J"];
    v["B2"] = v["S"] * v["K"];
    v["D"] = 1;
    expectVerdict(fill(spec(refArgs, refRes, refBody,
                            std::string(R"(%x: tensor<1x2x1xf32> {dist.value = "x", dist.layout = #dist.layout<[a, b, _]>}, %g: tensor<1x2x4xf32> {dist.value = "g", dist.layout = #dist.layout<[a, b, _]>})"),
                            planRes("[_, _]"), transposed(R"(["a", "b"])", "sum")),
                       v),
                  Verdict::Verified);
    if (v["J"] == 2 && v["K"] == 2) // g's batch and sequence chunks swapped on the ranks
      expectVerdict(fill(spec(refArgs, refRes, refBody,
                              std::string(R"(%x: tensor<1x2x1xf32> {dist.value = "x", dist.layout = #dist.layout<[a, b, _]>}, %g: tensor<1x2x4xf32> {dist.value = "g", dist.layout = #dist.layout<[b, a, _]>})"),
                              planRes("[_, _]"), transposed(R"(["a", "b"])", "sum")),
                         v),
                    Verdict::Violated);
  }
}

/// `make(axes, gather)` with an operand's blocks over (a, b), gathered in that order, is
/// verified; over (b, a) -- a near miss where b has size 2 -- violated.
static void decidesByAxisOrder(const std::function<std::string(const char *, const char *)> &make) {
  for (auto v : instances()) {
    v["KJ4"] = 4 * v["KJ"];
    expectVerdict(fill(make("(a, b)", R"(["a", "b"])"), v), Verdict::Verified);
    if (v["J"] == 2)
      expectVerdict(fill(make("(b, a)", R"(["b", "a"])"), v), Verdict::Violated);
  }
}

TEST_CASE("an elementwise operand's blocks under another global shape are re-described",
          "[layouts]") {
  // z [4 KJ] reshaped on each rank to [1, 4]: the reference reshapes z to [1, 4 KJ] as
  // well as to [KJ, 4], so the reshape's global shape is a choice; x + z takes z's
  // blocks under x's global shape [KJ, 4] (the same blocks on every rank). Near miss
  // (b of size 2): z's blocks in the other axis order, which no description of x's
  // layout gives.
  const char *refArgs = R"(%x: tensor<{KJ}x4xf32> {ref.name = "x"}, %z: tensor<{KJ4}xf32> {ref.name = "z"})";
  std::string refRes = R"(tensor<{KJ}x4xf32> {ref.name = "y"}, tensor<1x{KJ4}xf32> {ref.name = "w"})";
  std::string refBody = R"(    %w = ref.reshape %z : tensor<{KJ4}xf32> -> tensor<1x{KJ4}xf32>
    %zr = ref.reshape %z : tensor<{KJ4}xf32> -> tensor<{KJ}x4xf32>
    %y = ref.add %x, %zr : tensor<{KJ}x4xf32>
    return %y, %w : tensor<{KJ}x4xf32>, tensor<1x{KJ4}xf32>
)";
  auto planArgs = [](const char *zAxes) {
    return std::string(R"(%x: tensor<1x4xf32> {dist.value = "x", dist.layout = #dist.layout<[(a, b), _]>}, %z: tensor<4xf32> {dist.value = "z", dist.layout = #dist.layout<[)") +
           zAxes + "]>}";
  };
  std::string planRes = R"(tensor<1x4xf32> {dist.value = "y", dist.layout = #dist.layout<[(a, b), _]>}, tensor<1x{KJ4}xf32> {dist.value = "w", dist.layout = #dist.layout<[_, _]>})";
  // (w gathers z in z's own axis order, so only y can be wrong.)
  auto body = [](const char *gather) {
    return std::string(R"(    %zr = ref.reshape %z : tensor<4xf32> -> tensor<1x4xf32>
    %y = ref.add %x, %zr : tensor<1x4xf32>
    %w = dist.all_gather %zr over )") + gather + R"( dim 1 : tensor<1x4xf32> -> tensor<1x{KJ4}xf32>
    return %y, %w : tensor<1x4xf32>, tensor<1x{KJ4}xf32>
)";
  };
  decidesByAxisOrder([&](const char *axes, const char *gather) {
    return spec(refArgs, refRes, refBody, planArgs(axes), planRes, body(gather));
  });
}

TEST_CASE("a broadcast's source blocks under another global shape are re-described",
          "[layouts]") {
  // Row scalars s [4 KJ] reshaped on each rank to [1, 4] and broadcast along the hidden
  // dimension: where the reshape took the global shape [1, 4 KJ] (the reference reshapes
  // s that way first), x * broadcast(s) takes the broadcast under x's global shape
  // [KJ, 4, 2], its source described as [KJ, 4] (the same blocks). Near miss (b of size
  // 2): s's blocks in the other axis order.
  const char *refArgs = R"(%x: tensor<{KJ}x4x2xf32> {ref.name = "x"}, %s: tensor<{KJ4}xf32> {ref.name = "s"})";
  std::string refRes = R"(tensor<{KJ}x4x2xf32> {ref.name = "y"}, tensor<1x{KJ4}xf32> {ref.name = "w"})";
  std::string refBody = R"(    %w = ref.reshape %s : tensor<{KJ4}xf32> -> tensor<1x{KJ4}xf32>
    %sr = ref.reshape %s : tensor<{KJ4}xf32> -> tensor<{KJ}x4xf32>
    %sb = ref.broadcast %sr dims [0, 1] : tensor<{KJ}x4xf32> -> tensor<{KJ}x4x2xf32>
    %y = ref.mul %x, %sb : tensor<{KJ}x4x2xf32>
    return %y, %w : tensor<{KJ}x4x2xf32>, tensor<1x{KJ4}xf32>
)";
  auto planArgs = [](const char *sAxes) {
    return std::string(R"(%x: tensor<1x4x2xf32> {dist.value = "x", dist.layout = #dist.layout<[(a, b), _, _]>}, %s: tensor<4xf32> {dist.value = "s", dist.layout = #dist.layout<[)") +
           sAxes + "]>}";
  };
  std::string planRes = R"(tensor<1x4x2xf32> {dist.value = "y", dist.layout = #dist.layout<[(a, b), _, _]>}, tensor<1x{KJ4}xf32> {dist.value = "w", dist.layout = #dist.layout<[_, _]>})";
  auto body = [](const char *gather) {
    return std::string(R"(    %sr = ref.reshape %s : tensor<4xf32> -> tensor<1x4xf32>
    %sb = ref.broadcast %sr dims [0, 1] : tensor<1x4xf32> -> tensor<1x4x2xf32>
    %y = ref.mul %x, %sb : tensor<1x4x2xf32>
    %w = dist.all_gather %sr over )") + gather + R"( dim 1 : tensor<1x4xf32> -> tensor<1x{KJ4}xf32>
    return %y, %w : tensor<1x4x2xf32>, tensor<1x{KJ4}xf32>
)";
  };
  decidesByAxisOrder([&](const char *axes, const char *gather) {
    return spec(refArgs, refRes, refBody, planArgs(axes), planRes, body(gather));
  });
}

TEST_CASE("a broadcast whose copies are split, under another global shape; a transpose "
          "of a value whose global shape is a choice", "[layouts]") {
  // Row scalars r [K, 4], each rank's row taken by shard_slice over a, broadcast along a
  // new dimension: the reference broadcasts r to [K, 4, 2J], so the plan's copies are
  // split over b (a block of copies is copies). x times that, with x held as
  // [1, 4K, 2J] (a reshape on each rank that moves nothing, steered by the reference's
  // reshape to XLA's merged shape), re-describes the broadcast under x's shape though
  // its copied dimension is split; the output, held as [1, 4K, 2J], is described under
  // the reference's [K, 4, 2J]. Near miss: every rank slices r's first row.
  const char *refArgs = R"(%x: tensor<{K}x4x{J2}xf32> {ref.name = "x"}, %r: tensor<{K}x4xf32> {ref.name = "r"})";
  std::string refRes = R"(tensor<{K}x4x{J2}xf32> {ref.name = "y"}, tensor<1x{K4}x{J2}xf32> {ref.name = "m"})";
  std::string refBody = R"(    %m = ref.reshape %x : tensor<{K}x4x{J2}xf32> -> tensor<1x{K4}x{J2}xf32>
    %rb = ref.broadcast %r dims [0, 1] : tensor<{K}x4xf32> -> tensor<{K}x4x{J2}xf32>
    %y = ref.mul %x, %rb : tensor<{K}x4x{J2}xf32>
    return %y, %m : tensor<{K}x4x{J2}xf32>, tensor<1x{K4}x{J2}xf32>
)";
  std::string planArgs = R"(%x: tensor<1x4x2xf32> {dist.value = "x", dist.layout = #dist.layout<[a, _, b]>}, %r: tensor<{K}x4xf32> {dist.value = "r", dist.layout = #dist.layout<[_, _]>})";
  std::string planRes = R"(tensor<1x4x2xf32> {dist.value = "y", dist.layout = #dist.layout<[a, _, b]>}, tensor<1x4x2xf32> {dist.value = "m", dist.layout = #dist.layout<[_, a, b]>})";
  auto body = [](bool right) {
    return std::string(right ? R"(    %rk = dist.shard_slice %r over ["a"] dim 0 : tensor<{K}x4xf32> -> tensor<1x4xf32>
)"
                             : R"(    %rk = ref.slice %r offsets [0, 0] sizes [1, 4] : tensor<{K}x4xf32>
)") +
           R"(    %m = ref.reshape %x : tensor<1x4x2xf32> -> tensor<1x4x2xf32>
    %rb = ref.broadcast %rk dims [0, 1] : tensor<1x4xf32> -> tensor<1x4x2xf32>
    %y = ref.mul %m, %rb : tensor<1x4x2xf32>
    return %y, %m : tensor<1x4x2xf32>, tensor<1x4x2xf32>
)";
  };
  // A transpose of x held as [1, 4K, 2] (a reshape on each rank that moves nothing,
  // whose global shape the reference's reshape steers) is described under the shape
  // the reference transposes, [K, 4, 2]: its result is the reference's [2, K, 4] over a.
  // Near miss: every rank transposes the first block.
  const char *tRefArgs = R"(%x: tensor<{K}x4x2xf32> {ref.name = "x"})";
  std::string tRefRes = R"(tensor<2x{K}x4xf32> {ref.name = "t"}, tensor<1x{K4}x2xf32> {ref.name = "m"})";
  std::string tRefBody = R"(    %m = ref.reshape %x : tensor<{K}x4x2xf32> -> tensor<1x{K4}x2xf32>
    %t = ref.transpose %x perm [2, 0, 1] : tensor<{K}x4x2xf32>
    return %t, %m : tensor<2x{K}x4xf32>, tensor<1x{K4}x2xf32>
)";
  std::string tPlanArgs = R"(%x: tensor<{K}x4x2xf32> {dist.value = "x", dist.layout = #dist.layout<[_, _, _]>})";
  std::string tPlanRes = R"(tensor<2x1x4xf32> {dist.value = "t", dist.layout = #dist.layout<[_, a, _]>}, tensor<1x4x2xf32> {dist.value = "m", dist.layout = #dist.layout<[_, a, _]>})";
  auto tBody = [](bool right) {
    return std::string(right ? R"(    %xk = dist.shard_slice %x over ["a"] dim 0 : tensor<{K}x4x2xf32> -> tensor<1x4x2xf32>
)"
                             : R"(    %xk = ref.slice %x offsets [0, 0, 0] sizes [1, 4, 2] : tensor<{K}x4x2xf32>
)") +
           R"(    %m = ref.reshape %xk : tensor<1x4x2xf32> -> tensor<1x4x2xf32>
    %t = ref.transpose %m perm [2, 0, 1] : tensor<1x4x2xf32>
    return %t, %m : tensor<2x1x4xf32>, tensor<1x4x2xf32>
)";
  };
  for (auto v : instances()) {
    v["K4"] = 4 * v["K"];
    v["J2"] = 2 * v["J"];
    expectVerdict(fill(spec(refArgs, refRes, refBody, planArgs, planRes, body(true)), v),
                  Verdict::Verified);
    expectVerdict(fill(spec(refArgs, refRes, refBody, planArgs, planRes, body(false)), v),
                  Verdict::Violated);
    Verdicts t = run(fill(spec(tRefArgs, tRefRes, tRefBody, tPlanArgs, tPlanRes, tBody(true)), v));
    CHECK(t.element == Verdict::Verified);
    CHECK(t.layout == Verdict::Verified);
    CHECK(fired(t.proof, "placement: a transpose's operand under the reference's shape"));
    expectVerdict(fill(spec(tRefArgs, tRefRes, tRefBody, tPlanArgs, tPlanRes, tBody(false)), v),
                  Verdict::Violated);
  }
}

TEST_CASE("interleaved layouts: a fused weight's segments, each split over the axis",
          "[layouts]") {
  // [gate | up] fused and split within its two segments: each rank's columns are its
  // block of gate, then its block of up. Near miss: the fused weight split evenly (the
  // rank's local halves are then not gate and up).
  const char *refArgs = R"(%x: tensor<{B}x3xf32> {ref.name = "x"}, %w: tensor<3x{KKn}xf32> {ref.name = "w"})";
  std::string refRes = R"(tensor<{B}x{Kn}xf32> {ref.name = "y"})";
  std::string refBody = R"(    %gu = ref.matmul %x, %w contract(1, 0) : tensor<{B}x3xf32>, tensor<3x{KKn}xf32>
    %gate = ref.slice %gu offsets [0, 0] sizes [{B}, {Kn}] : tensor<{B}x{KKn}xf32>
    %up = ref.slice %gu offsets [0, {Kn}] sizes [{B}, {Kn}] : tensor<{B}x{KKn}xf32>
    %act = ref.silu %gate : tensor<{B}x{Kn}xf32>
    %y = ref.mul %act, %up : tensor<{B}x{Kn}xf32>
    return %y : tensor<{B}x{Kn}xf32>
)";
  auto planArgs = [](const char *layout) {
    return std::string(R"(%x: tensor<{B}x3xf32> {dist.value = "x", dist.layout = #dist.layout<[_, _]>}, %w: tensor<3x{n2}xf32> {dist.value = "w", dist.layout = #dist.layout<[_, )") +
           layout + "]>}";
  };
  std::string planRes =
      R"(tensor<{B}x{n}xf32> {dist.value = "y", dist.layout = #dist.layout<[_, a]>})";
  std::string body = R"(    %gu = ref.matmul %x, %w contract(1, 0) : tensor<{B}x3xf32>, tensor<3x{n2}xf32>
    %gate = ref.slice %gu offsets [0, 0] sizes [{B}, {n}] : tensor<{B}x{n2}xf32>
    %up = ref.slice %gu offsets [0, {n}] sizes [{B}, {n}] : tensor<{B}x{n2}xf32>
    %act = ref.silu %gate : tensor<{B}x{n}xf32>
    %y = ref.mul %act, %up : tensor<{B}x{n}xf32>
    return %y : tensor<{B}x{n}xf32>
)";
  for (int64_t K : {2, 3})
    for (int64_t n : {1, 2}) {
      std::map<std::string, int64_t> v{{"K", K}, {"J", 1}, {"B", 2}, {"n", n}, {"Kn", K * n},
                                        {"KKn", 2 * K * n}, {"n2", 2 * n}};
      for (bool right : {true, false}) {
        Verdicts got = run(fill(spec(refArgs, refRes, refBody, planArgs(right ? "a in 2" : "a"),
                                     planRes, body),
                                v));
        CHECK(got.element == (right ? Verdict::Verified : Verdict::Violated));
        CHECK((got.layout == Verdict::Verified) == right);
      }
    }
}

TEST_CASE("select_on: a value on one rank of each group, zeros elsewhere, is a partial sum",
          "[layouts]") {
  // A bias added once, on a's rank 0 (or 1), to a row-parallel product's partial sums
  // before the sum over a. Near miss: the bias on the ranks of b's coordinate 0 --
  // every rank of a's groups, so the sum counts it |a| times.
  std::string refBody = R"(    %p = ref.matmul %x, %w contract(1, 0) : tensor<{B}x{Kn}xf32>, tensor<{Kn}x{KJn}xf32>
    %y = ref.bias_add %p, %bias : tensor<{B}x{KJn}xf32>, tensor<{KJn}xf32>
    return %y : tensor<{B}x{KJn}xf32>
)";
  std::string refArgs = std::string(kRefXW) + R"(, %bias: tensor<{KJn}xf32> {ref.name = "bias"})";
  std::string refRes = R"(tensor<{B}x{KJn}xf32> {ref.name = "y"})";
  std::string planArgs = R"(%x: tensor<{B}x{n}xf32> {dist.value = "x", dist.layout = #dist.layout<[_, a]>}, %w: tensor<{n}x{KJn}xf32> {dist.value = "w", dist.layout = #dist.layout<[a, _]>}, %bias: tensor<{KJn}xf32> {dist.value = "bias", dist.layout = #dist.layout<[_]>})";
  std::string planRes = R"(tensor<{B}x{KJn}xf32> {dist.value = "y", dist.layout = #dist.layout<[_, _]>})";
  auto plan = [](const char *on) {
    return std::string(R"(    %p = ref.matmul %x, %w contract(1, 0) : tensor<{B}x{n}xf32>, tensor<{n}x{KJn}xf32>
    %zero = ref.constant 0.0 : tensor<{KJn}xf32>
    %once = dist.select_on %bias, %zero on {)") + on + R"(} : tensor<{KJn}xf32>
    %pb = ref.bias_add %p, %once : tensor<{B}x{KJn}xf32>, tensor<{KJn}xf32>
    %y = dist.all_reduce %pb over ["a"] "sum" : tensor<{B}x{KJn}xf32> -> tensor<{B}x{KJn}xf32>
    return %y : tensor<{B}x{KJn}xf32>
)";
  };
  proves(spec(refArgs, refRes, refBody, planArgs, planRes, plan("a = 0 : i64")),
         {"collective `dist.select_on`"});
  proves(spec(refArgs, refRes, refBody, planArgs, planRes, plan("a = 1 : i64")));
  refutes(spec(refArgs, refRes, refBody, planArgs, planRes, plan("b = 0 : i64")));
}

TEST_CASE("a reshape's dimensions of size 1 are copies: one table for every rank's heads",
          "[layouts]") {
  // Rotary tables as PyTorch captures them: the reference broadcasts the table over
  // the heads (before or after slicing its first half); a plan with one head per rank
  // reshapes it with a head dimension of size 1, slices it, and multiplies it with its
  // head. Near miss: the table's other half.
  const char *refArgs = R"(%x: tensor<{B}x{K}x{n}xf32> {ref.name = "x"}, %t: tensor<{B}x{Jn}xf32> {ref.name = "t"})";
  std::string refRes = R"(tensor<{B}x{K}x{n}xf32> {ref.name = "y"})";
  std::string sliceThenCopy = R"(    %s = ref.slice %t offsets [0, 0] sizes [{B}, {n}] : tensor<{B}x{Jn}xf32>
    %c = ref.broadcast %s dims [0, 2] : tensor<{B}x{n}xf32> -> tensor<{B}x{K}x{n}xf32>
    %y = ref.mul %x, %c : tensor<{B}x{K}x{n}xf32>
    return %y : tensor<{B}x{K}x{n}xf32>
)";
  std::string copyThenSlice = R"(    %r = ref.reshape %t : tensor<{B}x{Jn}xf32> -> tensor<1x{B}x{Jn}xf32>
    %c = ref.broadcast %r dims [0, 1, 3] : tensor<1x{B}x{Jn}xf32> -> tensor<1x{B}x{K}x{Jn}xf32>
    %s = ref.slice %c offsets [0, 0, 0, 0] sizes [1, {B}, {K}, {n}] : tensor<1x{B}x{K}x{Jn}xf32>
    %s3 = ref.reshape %s : tensor<1x{B}x{K}x{n}xf32> -> tensor<{B}x{K}x{n}xf32>
    %y = ref.mul %x, %s3 : tensor<{B}x{K}x{n}xf32>
    return %y : tensor<{B}x{K}x{n}xf32>
)";
  std::string planArgs = R"(%x: tensor<{B}x1x{n}xf32> {dist.value = "x", dist.layout = #dist.layout<[_, a, _]>}, %t: tensor<{B}x{Jn}xf32> {dist.value = "t", dist.layout = #dist.layout<[_, _]>})";
  std::string planRes =
      R"(tensor<{B}x1x{n}xf32> {dist.value = "y", dist.layout = #dist.layout<[_, a, _]>})";
  auto plan = [](const char *offset) {
    return std::string(R"(    %r = ref.reshape %t : tensor<{B}x{Jn}xf32> -> tensor<{B}x1x{Jn}xf32>
    %s = ref.slice %r offsets [0, 0, )") +
           offset + R"(] sizes [{B}, 1, {n}] : tensor<{B}x1x{Jn}xf32>
    %y = ref.mul %x, %s : tensor<{B}x1x{n}xf32>
    return %y : tensor<{B}x1x{n}xf32>
)";
  };
  for (const std::string &refBody : {sliceThenCopy, copyThenSlice}) {
    proves(spec(refArgs, refRes, refBody, planArgs, planRes, plan("0")));
    // (With J = 1 the table has one half.)
    decides(spec(refArgs, refRes, refBody, planArgs, planRes, plan("{n}")), Verdict::Violated,
            /*onlyJ2=*/true);
  }
}

namespace {

/// Sequence parallelism as PyTorch writes it, for a mesh of K x J: x [B, K*n, 2] whole
/// cut into K pieces along dim 1 stacked along dim 0, reduce_scatter'ed over a (an
/// average of copies: the value), gathered back along dim 0 and the pieces put side by
/// side again. `cutOrder`/`joinOrder`: the pieces' order in each concatenation. With
/// `rowsPerRank` > 0 the batch is split over b, that many rows on each rank (B =
/// rowsPerRank x J): the stack along dim 0 holds each rank's block of every piece, as
/// DTensor moves a split between dimensions through dimension 0 when the batch is split.
std::string stackedSpec(int64_t K, int64_t J, int64_t n, const std::vector<int64_t> &cutOrder,
                        const std::vector<int64_t> &joinOrder, int64_t rowsPerRank = 0) {
  int64_t local = rowsPerRank > 0 ? rowsPerRank : 2;
  std::string B = std::to_string(rowsPerRank > 0 ? rowsPerRank * J : 2), L = std::to_string(local),
              S = std::to_string(K * n), N = std::to_string(n), KB = std::to_string(K * local);
  std::string whole = "tensor<" + B + "x" + S + "x2xf32>", mine = "tensor<" + L + "x" + S + "x2xf32>",
              piece = "tensor<" + L + "x" + N + "x2xf32>",
              stacked = "tensor<" + KB + "x" + N + "x2xf32>";
  std::string batch = rowsPerRank > 0 ? "b" : "_";
  std::string body;
  std::string cut = "    %cat = ref.concat ", join = "    %y = ref.concat ";
  for (size_t i = 0; i < cutOrder.size(); ++i) {
    std::string k = std::to_string(i);
    body += "    %p" + k + " = ref.slice %x offsets [0, " + std::to_string(cutOrder[i] * n) +
            ", 0] sizes [" + L + ", " + N + ", 2] : " + mine + "\n";
    cut += std::string(i ? ", " : "") + "%p" + k;
  }
  body += cut + " dim 0 : ";
  for (size_t i = 0; i < cutOrder.size(); ++i)
    body += std::string(i ? ", " : "") + piece;
  body += "\n    %s = dist.reduce_scatter %cat over [\"a\"] dim 0 \"avg\" : " + stacked + " -> " +
          piece + "\n    %g = dist.all_gather %s over [\"a\"] dim 0 : " + piece + " -> " +
          stacked + "\n";
  for (size_t i = 0; i < joinOrder.size(); ++i) {
    std::string k = std::to_string(i);
    body += "    %q" + k + " = ref.slice %g offsets [" + std::to_string(joinOrder[i] * local) +
            ", 0, 0] sizes [" + L + ", " + N + ", 2] : " + stacked + "\n";
    join += std::string(i ? ", " : "") + "%q" + k;
  }
  body += join + " dim 1 : ";
  for (size_t i = 0; i < joinOrder.size(); ++i)
    body += std::string(i ? ", " : "") + piece;
  body += "\n    return %s, %y : " + piece + ", " + mine + "\n";
  std::string refBody = "    %s = ref.scale %x by 1.0 : " + whole + "\n    return %s, %x : " +
                        whole + ", " + whole + "\n";
  std::map<std::string, int64_t> v{{"K", K}, {"J", J}};
  return fill(spec("%x: " + whole + " {ref.name = \"x\"}",
                   whole + " {ref.name = \"s\"}, " + whole + " {ref.name = \"y\"}", refBody,
                   "%x: " + mine + " {dist.value = \"x\", dist.layout = #dist.layout<[" + batch +
                       ", _, _]>}",
                   piece + " {dist.value = \"s\", dist.layout = #dist.layout<[" + batch +
                       ", a, _]>}, " + mine + " {dist.value = \"y\", dist.layout = #dist.layout<[" +
                       batch + ", _, _]>}",
                   body),
              v);
}

/// stackedSpec's orders of K pieces: in order (verified), and the two near misses --
/// the pieces stacked in another order before the reduce_scatter (rank k gets another
/// rank's part), or put side by side in another order after the gather.
std::vector<std::tuple<std::vector<int64_t>, std::vector<int64_t>, Verdict>>
stackOrders(int64_t K) {
  std::vector<int64_t> order, swapped;
  for (int64_t k = 0; k < K; ++k)
    order.push_back(k);
  swapped = order;
  std::swap(swapped[0], swapped[1]);
  return {{order, order, Verdict::Verified},
          {swapped, order, Verdict::Violated},
          {order, swapped, Verdict::Violated}};
}

} // namespace

TEST_CASE("a gather along another dimension stacks the blocks; a reduce_scatter of stacked "
          "pieces splits the value", "[layouts]") {
  for (int64_t K : {2, 3})
    for (int64_t J : {1, 2})
      for (int64_t n : {1, 2})
        for (auto [cut, join, expect] : stackOrders(K))
          expectVerdict(stackedSpec(K, J, n, cut, join), expect);
}

TEST_CASE("pieces stacked along a split batch: each rank's block of every piece, in windows",
          "[layouts]") {
  // DTensor without sequence parallelism, the batch split over b: a reduce_scatter to
  // the sequence stacks each rank's chunks along its batch block (the concatenation in
  // windows, one per piece), and a gather of the sequence stacks its pieces so
  // (stackGather's windows; a slice of one piece reads it back). One and two batch rows
  // per rank. Near misses as above: the pieces stacked, or put side by side, in another
  // order.
  for (int64_t K : {2, 3})
    for (int64_t J : {1, 2})
      for (int64_t rows : {1, 2})
        for (auto [cut, join, expect] : stackOrders(K)) {
          INFO("K " << K << " J " << J << " rows " << rows);
          expectVerdict(stackedSpec(K, J, /*n=*/2, cut, join, rows), expect);
        }
}

TEST_CASE("a reshape of stacked pieces: their rows follow each other where the dimensions "
          "before them are of size 1", "[layouts]") {
  // A batch of one: the gathered [K, n, 2] stack reshaped to the whole sequence, as
  // [K*n, 2] or [1, K*n, 2]. Near miss: the stack transposed first, which interleaves
  // the ranks' rows (the same only for n = 1).
  std::string refArgs = R"(%x: tensor<1x{Kn}x2xf32> {ref.name = "x"})";
  std::string refRes = R"(tensor<{Kn}x2xf32> {ref.name = "y"}, tensor<1x{Kn}x2xf32> {ref.name = "z"})";
  std::string refBody = R"(    %y = ref.reshape %x : tensor<1x{Kn}x2xf32> -> tensor<{Kn}x2xf32>
    %z = ref.scale %x by 2.0 : tensor<1x{Kn}x2xf32>
    return %y, %z : tensor<{Kn}x2xf32>, tensor<1x{Kn}x2xf32>
)";
  std::string planArgs = R"(%x: tensor<1x{n}x2xf32> {dist.value = "x", dist.layout = #dist.layout<[_, a, _]>})";
  std::string planRes = R"(tensor<{Kn}x2xf32> {dist.value = "y", dist.layout = #dist.layout<[_, _]>}, tensor<1x{Kn}x2xf32> {dist.value = "z", dist.layout = #dist.layout<[_, _, _]>})";
  std::string planBody = R"(    %g = dist.all_gather %x over ["a"] dim 0 : tensor<1x{n}x2xf32> -> tensor<{K}x{n}x2xf32>
    %y = ref.reshape %g : tensor<{K}x{n}x2xf32> -> tensor<{Kn}x2xf32>
    %r = ref.reshape %g : tensor<{K}x{n}x2xf32> -> tensor<1x{Kn}x2xf32>
    %z = ref.scale %r by 2.0 : tensor<1x{Kn}x2xf32>
    return %y, %z : tensor<{Kn}x2xf32>, tensor<1x{Kn}x2xf32>
)";
  std::string nearBody = R"(    %g = dist.all_gather %x over ["a"] dim 0 : tensor<1x{n}x2xf32> -> tensor<{K}x{n}x2xf32>
    %t = ref.transpose %g perm [1, 0, 2] : tensor<{K}x{n}x2xf32>
    %y = ref.reshape %t : tensor<{n}x{K}x2xf32> -> tensor<{Kn}x2xf32>
    %r = ref.reshape %g : tensor<{K}x{n}x2xf32> -> tensor<1x{Kn}x2xf32>
    %z = ref.scale %r by 2.0 : tensor<1x{Kn}x2xf32>
    return %y, %z : tensor<{Kn}x2xf32>, tensor<1x{Kn}x2xf32>
)";
  proves(spec(refArgs, refRes, refBody, planArgs, planRes, planBody));
  for (auto &v : instances()) {
    if (v["n"] != 2)
      continue;
    expectVerdict(fill(spec(refArgs, refRes, refBody, planArgs, planRes, nearBody), v),
                  Verdict::Violated);
  }
}

TEST_CASE("each rank's maximum moves through reshapes and transposes before its all_reduce",
          "[layouts]") {
  // A vocabulary-parallel softmax as torchtitan writes it: the row maxima reshaped to a
  // column, completed by all_reduce max, reshaped back. Near miss: completed by sum.
  std::string refArgs = R"(%x: tensor<{B}x{Kn}xf32> {ref.name = "x"})";
  std::string refRes = R"(tensor<{B}x{Kn}xf32> {ref.name = "y"})";
  std::string refBody = R"(    %m = ref.reduce_max %x dims [1] : tensor<{B}x{Kn}xf32>
    %mb = ref.broadcast %m dims [0] : tensor<{B}xf32> -> tensor<{B}x{Kn}xf32>
    %y = ref.sub %x, %mb : tensor<{B}x{Kn}xf32>
    return %y : tensor<{B}x{Kn}xf32>
)";
  std::string planArgs = R"(%x: tensor<{B}x{n}xf32> {dist.value = "x", dist.layout = #dist.layout<[_, a]>})";
  std::string planRes = R"(tensor<{B}x{n}xf32> {dist.value = "y", dist.layout = #dist.layout<[_, a]>})";
  auto plan = [&](const char *kind) {
    return std::string(R"(    %l = ref.reduce_max %x dims [1] : tensor<{B}x{n}xf32>
    %c = ref.reshape %l : tensor<{B}xf32> -> tensor<{B}x1xf32>
    %t = ref.transpose %c perm [1, 0] : tensor<{B}x1xf32>
    %r = dist.all_reduce %t over ["a"] ")") + kind + R"(" : tensor<1x{B}xf32> -> tensor<1x{B}xf32>
    %m = ref.reshape %r : tensor<1x{B}xf32> -> tensor<{B}xf32>
    %mb = ref.broadcast %m dims [0] : tensor<{B}xf32> -> tensor<{B}x{n}xf32>
    %y = ref.sub %x, %mb : tensor<{B}x{n}xf32>
    return %y : tensor<{B}x{n}xf32>
)";
  };
  proves(spec(refArgs, refRes, refBody, planArgs, planRes, plan("max")),
         {"maxima: a partial maximum through an op that commutes with it"});
  refutes(spec(refArgs, refRes, refBody, planArgs, planRes, plan("sum")));
}

TEST_CASE("a partial average: the ranks' values average to the value; a quotient by a "
          "constant is a scale", "[layouts]") {
  // Each rank's mean squared error over its rows, written as a sum over a constant
  // count, returned as a partial average over a (what DTensor's Partial("avg") and a
  // data-parallel loss are). Near misses: the global count, or the output declared a
  // partial sum.
  std::string refArgs = R"(%x: tensor<{Kn}x{B}xf32> {ref.name = "x"})";
  std::string refRes = R"(tensor<f32> {ref.name = "loss"})";
  std::string refBody = R"(    %sq = ref.mul %x, %x : tensor<{Kn}x{B}xf32>
    %loss = ref.reduce_mean %sq dims [0, 1] : tensor<{Kn}x{B}xf32>
    return %loss : tensor<f32>
)";
  std::string planArgs = R"(%x: tensor<{n}x{B}xf32> {dist.value = "x", dist.layout = #dist.layout<[a, _]>})";
  auto planRes = [](const char *kind) {
    return std::string(R"(tensor<f32> {dist.value = "loss", dist.layout = #dist.layout<[], )") +
           kind + R"( = [a]>})";
  };
  auto plan = [](const char *count) {
    return std::string(R"(    %sq = ref.mul %x, %x : tensor<{n}x{B}xf32>
    %s = ref.reduce_sum %sq dims [0, 1] : tensor<{n}x{B}xf32>
    %c = ref.constant )") + count + R"( : tensor<f32>
    %loss = ref.div %s, %c : tensor<f32>
    return %loss : tensor<f32>
)";
  };
  for (auto &v : instances()) {
    std::string local = std::to_string(2 * v["n"]) + ".0",
                global = std::to_string(2 * v["Kn"]) + ".0";
    for (auto [count, kind, expect] :
         {std::tuple{local, "avg", Verdict::Verified}, std::tuple{global, "avg", Verdict::Violated},
          std::tuple{local, "sum", Verdict::Violated}}) {
      std::string t = fill(spec(refArgs, refRes, refBody, planArgs, planRes(kind),
                                plan(count.c_str())),
                           v);
      expectVerdict(t, expect);
    }
  }
}

TEST_CASE("a product by a weight with a batch of one, and a literal's copies", "[layouts]") {
  // XLA's partitioned step: the reference merges the batch into the rows ([1, B*M, K]
  // times [1, K, N]); each rank multiplies its batch block [Bl, M, K] by the weight
  // reshaped to a batch of one. And a mask the reference writes as a literal copied over
  // batch and heads, which a rank writes as its block's literal (size 1 there).
  // Near misses: the weight's other column block; the mask's rows reversed.
  std::string refArgs = R"(%x: tensor<{K}x2x2xf32> {ref.name = "x"}, %w: tensor<2x{Jn}xf32> {ref.name = "w"})";
  std::string refRes = R"(tensor<{K}x2x{Jn}xf32> {ref.name = "y"})";
  std::string refBody = R"(    %xr = ref.reshape %x : tensor<{K}x2x2xf32> -> tensor<1x{K2}x2xf32>
    %wr = ref.reshape %w : tensor<2x{Jn}xf32> -> tensor<1x2x{Jn}xf32>
    %p = ref.batch_matmul %xr, %wr contract(2, 1) : tensor<1x{K2}x2xf32>, tensor<1x2x{Jn}xf32>
    %y = ref.reshape %p : tensor<1x{K2}x{Jn}xf32> -> tensor<{K}x2x{Jn}xf32>
    return %y : tensor<{K}x2x{Jn}xf32>
)";
  std::string planArgs = R"(%x: tensor<1x2x2xf32> {dist.value = "x", dist.layout = #dist.layout<[a, _, _]>}, %w: tensor<2x{n}xf32> {dist.value = "w", dist.layout = #dist.layout<[_, b]>})";
  std::string planRes = R"(tensor<1x2x{n}xf32> {dist.value = "y", dist.layout = #dist.layout<[a, _, b]>})";
  auto plan = [](const char *w) {
    return std::string(R"(    %wr = ref.reshape )") + w + R"( : tensor<2x{n}xf32> -> tensor<1x2x{n}xf32>
    %y = ref.batch_matmul %x, %wr contract(2, 1) : tensor<1x2x2xf32>, tensor<1x2x{n}xf32>
    return %y : tensor<1x2x{n}xf32>
)";
  };
  for (auto &v : instances()) {
    v["K2"] = 2 * v["K"];
    expectVerdict(fill(spec(refArgs, refRes, refBody, planArgs, planRes, plan("%w")), v),
                  Verdict::Verified);
    if (v["J"] != 2)
      continue;
    // The other column block: b's other rank's.
    std::string near = fill(spec(refArgs, refRes, refBody, planArgs, planRes,
                                 R"(    %o = dist.all_gather %w over ["b"] dim 1 : tensor<2x{n}xf32> -> tensor<2x{Jn}xf32>
    %s = ref.slice %o offsets [0, 0] sizes [2, {n}] : tensor<2x{Jn}xf32>
    %wr = ref.reshape %s : tensor<2x{n}xf32> -> tensor<1x2x{n}xf32>
    %y = ref.batch_matmul %x, %wr contract(2, 1) : tensor<1x2x2xf32>, tensor<1x2x{n}xf32>
    return %y : tensor<1x2x{n}xf32>
)"),
                            v);
    expectVerdict(near, Verdict::Violated);
  }

  // The literal: a 2x2 mask copied over {K} batch entries in the reference.
  std::string maskArgs = R"(%s: tensor<{K}x2x2xf32> {ref.name = "s"})";
  std::string maskRes = R"(tensor<{K}x2x2xf32> {ref.name = "y"})";
  auto maskRef = [](int64_t K) {
    std::string vals;
    for (int64_t k = 0; k < K; ++k)
      vals += std::string(k ? ", " : "") + "1.0, 0.0, 1.0, 1.0";
    return "    %m = ref.literal [" + vals + R"(] : tensor<{K}x2x2xf32>
    %y = ref.mul %m, %s : tensor<{K}x2x2xf32>
    return %y : tensor<{K}x2x2xf32>
)";
  };
  std::string maskPlanArgs = R"(%s: tensor<1x2x2xf32> {dist.value = "s", dist.layout = #dist.layout<[a, _, _]>})";
  std::string maskPlanRes = R"(tensor<1x2x2xf32> {dist.value = "y", dist.layout = #dist.layout<[a, _, _]>})";
  auto maskPlan = [](const char *vals) {
    return std::string("    %m = ref.literal [") + vals + R"(] : tensor<1x2x2xf32>
    %y = ref.mul %m, %s : tensor<1x2x2xf32>
    return %y : tensor<1x2x2xf32>
)";
  };
  for (auto &v : instances()) {
    for (auto [vals, expect] : {std::pair{"1.0, 0.0, 1.0, 1.0", Verdict::Verified},
                                std::pair{"1.0, 1.0, 1.0, 0.0", Verdict::Violated}}) {
      std::string t = fill(spec(maskArgs, maskRes, maskRef(v["K"]), maskPlanArgs, maskPlanRes,
                                maskPlan(vals)),
                           v);
      expectVerdict(t, expect);
    }
  }
}

TEST_CASE("a gather over the minor axes of a dimension split over more: each piece is a "
          "window of the rank's rows", "[layouts]") {
  // DTensor on a 2-D mesh: columns split over (a, b), gathered over b along dim 0 --
  // the pieces stacked differ with a's coordinate -- then cut and put side by side along
  // dim 1: each rank's columns over a. Near miss: the pieces put side by side in the
  // other order.
  for (int64_t K : {2, 3})
    for (int64_t J : {1, 2})
      for (int64_t n : {1, 2})
        for (bool swapped : {false, true}) {
          if (swapped && J != 2)
            continue;
          std::string N = std::to_string(n), Jn = std::to_string(J * n),
                      KJn = std::to_string(K * J * n), J2 = std::to_string(2 * J);
          std::string body = "    %g = dist.all_gather %x over [\"b\"] dim 0 : tensor<2x" + N +
                             "xf32> -> tensor<" + J2 + "x" + N + "xf32>\n";
          std::string cat = "    %y = ref.concat ", types;
          for (int64_t k = 0; k < J; ++k) {
            int64_t from = swapped ? J - 1 - k : k;
            body += "    %q" + std::to_string(k) + " = ref.slice %g offsets [" +
                    std::to_string(2 * from) + ", 0] sizes [2, " + N + "] : tensor<" + J2 +
                    "x" + N + "xf32>\n";
            cat += std::string(k ? ", " : "") + "%q" + std::to_string(k);
            types += std::string(k ? ", " : "") + "tensor<2x" + N + "xf32>";
          }
          body += cat + " dim 1 : " + types + "\n    return %y : tensor<2x" + Jn + "xf32>\n";
          std::string t = fill(
              spec("%x: tensor<2x" + KJn + "xf32> {ref.name = \"x\"}",
                   "tensor<2x" + KJn + "xf32> {ref.name = \"y\"}",
                   "    %y = ref.scale %x by 1.0 : tensor<2x" + KJn + "xf32>\n    return %y : tensor<2x" +
                       KJn + "xf32>\n",
                   "%x: tensor<2x" + N +
                       "xf32> {dist.value = \"x\", dist.layout = #dist.layout<[_, (a, b)]>}",
                   "tensor<2x" + Jn + "xf32> {dist.value = \"y\", dist.layout = #dist.layout<[_, a]>}",
                   body),
              {{"K", K}, {"J", J}});
          expectVerdict(t, swapped ? Verdict::Violated : Verdict::Verified);
        }
}

TEST_CASE("a row maximum over whole groups of a reshape is the reshape of the maximum; a "
          "positive factor stays outside it", "[layouts]") {
  // XLA computes the logits in its merged [1, B S, V] shape, the reference in [B, S, V]:
  // each row's maximum reads the same elements either way. The batch split over a, the
  // rows scaled by 2 before the maximum and by 1/2 after. Near miss: scaled by -2 and
  // -1/2 (max(-2 x) = -2 min(x)).
  std::string refArgs = R"(%x: tensor<{Kn}x2x3xf32> {ref.name = "x"})";
  std::string refRes = R"(tensor<{Kn}x2xf32> {ref.name = "m"})";
  std::string refBody = R"(    %m = ref.reduce_max %x dims [2] : tensor<{Kn}x2x3xf32>
    return %m : tensor<{Kn}x2xf32>
)";
  std::string planArgs = R"(%x: tensor<{n}x2x3xf32> {dist.value = "x", dist.layout = #dist.layout<[a, _, _]>})";
  std::string planRes = R"(tensor<{n}x2xf32> {dist.value = "m", dist.layout = #dist.layout<[a, _]>})";
  auto plan = [](const char *up, const char *down) {
    return std::string(R"(    %r = ref.reshape %x : tensor<{n}x2x3xf32> -> tensor<1x{2n}x3xf32>
    %s = ref.scale %r by )") + up + R"( : tensor<1x{2n}x3xf32>
    %mx = ref.reduce_max %s dims [2] : tensor<1x{2n}x3xf32>
    %b = ref.reshape %mx : tensor<1x{2n}xf32> -> tensor<{n}x2xf32>
    %m = ref.scale %b by )" + down + R"( : tensor<{n}x2xf32>
    return %m : tensor<{n}x2xf32>
)";
  };
  for (auto &v : instances()) {
    v["2n"] = 2 * v["n"];
    expectVerdict(fill(spec(refArgs, refRes, refBody, planArgs, planRes, plan("2.0", "0.5")), v),
                  Verdict::Verified);
    expectVerdict(fill(spec(refArgs, refRes, refBody, planArgs, planRes, plan("-2.0", "-0.5")), v),
                  Verdict::Violated);
  }
}

TEST_CASE("a broadcast's source dimensions of one element are dropped; a reshape of a "
          "uniform value is uniform", "[layouts]") {
  // A [1, N] row copied to [1, M, N] is the [N] vector copied so (XLA keeps the unit
  // dimension its reshape made); a uniform constant reshaped to another shape is the same
  // constant (the reference's -1/8 of a [2, 4, 1] constant reshaped to [8]). Near
  // misses: the row copied along the other dimension; a literal of distinct values
  // reshaped where the plan scales by one of them.
  std::string refArgs = R"(%x: tensor<{Kn}xf32> {ref.name = "x"}, %z: tensor<1x{Kn}x{Kn}xf32> {ref.name = "z"})";
  std::string refRes = R"(tensor<1x{Kn}x{Kn}xf32> {ref.name = "y"})";
  std::string refBody = R"(    %c = ref.broadcast %x dims [2] : tensor<{Kn}xf32> -> tensor<1x{Kn}x{Kn}xf32>
    %y = ref.mul %z, %c : tensor<1x{Kn}x{Kn}xf32>
    return %y : tensor<1x{Kn}x{Kn}xf32>
)";
  std::string planArgs = R"(%x: tensor<{Kn}xf32> {dist.value = "x", dist.layout = #dist.layout<[_]>}, %z: tensor<1x{n}x{Kn}xf32> {dist.value = "z", dist.layout = #dist.layout<[_, a, _]>})";
  std::string planRes = R"(tensor<1x{n}x{Kn}xf32> {dist.value = "y", dist.layout = #dist.layout<[_, a, _]>})";
  auto plan = [](const char *dims, const char *rowShape) {
    return std::string(R"(    %r = ref.reshape %x : tensor<{Kn}xf32> -> )") + rowShape + R"(
    %c = ref.broadcast %r dims )" + dims + " : " + rowShape + R"( -> tensor<1x{Kn}x{Kn}xf32>
    %s = dist.shard_slice %c over ["a"] dim 1 : tensor<1x{Kn}x{Kn}xf32> -> tensor<1x{n}x{Kn}xf32>
    %y = ref.mul %z, %s : tensor<1x{n}x{Kn}xf32>
    return %y : tensor<1x{n}x{Kn}xf32>
)";
  };
  proves(spec(refArgs, refRes, refBody, planArgs, planRes, plan("[0, 2]", "tensor<1x{Kn}xf32>")));
  refutes(spec(refArgs, refRes, refBody, planArgs, planRes, plan("[0, 1]", "tensor<1x{Kn}xf32>")));

  std::string uArgs = R"(%x: tensor<{Kn}x3xf32> {ref.name = "x"})";
  std::string uRes = R"(tensor<{Kn}x3xf32> {ref.name = "y"})";
  auto uBody = [](const char *made) {
    return std::string(made) + R"(
    %r = ref.reshape %c : tensor<{K}x{n}x1xf32> -> tensor<{Kn}xf32>
    %b = ref.broadcast %r dims [0] : tensor<{Kn}xf32> -> tensor<{Kn}x3xf32>
    %y = ref.mul %x, %b : tensor<{Kn}x3xf32>
    return %y : tensor<{Kn}x3xf32>
)";
  };
  std::string uPlanArgs = R"(%x: tensor<{n}x3xf32> {dist.value = "x", dist.layout = #dist.layout<[a, _]>})";
  std::string uPlanRes = R"(tensor<{n}x3xf32> {dist.value = "y", dist.layout = #dist.layout<[a, _]>})";
  std::string uPlan = R"(    %y = ref.scale %x by -1.250000e-01 : tensor<{n}x3xf32>
    return %y : tensor<{n}x3xf32>
)";
  proves(spec(uArgs, uRes, uBody("    %c = ref.constant -1.250000e-01 : tensor<{K}x{n}x1xf32>"),
              uPlanArgs, uPlanRes, uPlan));
  for (auto &v : instances()) {
    std::string vals;
    for (int64_t i = 0; i < v["K"] * v["n"]; ++i)
      vals += std::string(i ? ", " : "") + (i == 0 ? "-1.250000e-01" : "2.0");
    std::string made = "    %c = ref.literal [" + vals + "] : tensor<{K}x{n}x1xf32>";
    expectVerdict(fill(spec(uArgs, uRes, uBody(made.c_str()), uPlanArgs, uPlanRes, uPlan), v),
                  Verdict::Violated);
  }
}

TEST_CASE("an elementwise op of uniform values is uniform: its copies fit any split",
          "[layouts]") {
  // optax's clip_by_global_norm selects with 1 - step(norm - max): the constant one
  // minus the step's copies, made at each rank's block shape, times a gradient split
  // over a. op(copies of a, copies of b) = copies of op(a, b), so the difference is
  // the copies of 1 - step(s), which fit the gradient's split. Near misses: another
  // constant; the difference reversed.
  std::string refArgs = R"(%x: tensor<{Kn}xf32> {ref.name = "x"}, %s: tensor<f32> {ref.name = "s"})";
  std::string refRes = R"(tensor<{Kn}xf32> {ref.name = "y"})";
  auto body = [](const char *shape, const char *one, bool reversed) {
    std::string t = shape;
    return R"(    %st = ref.step %s : tensor<f32>
    %b = ref.broadcast %st dims [] : tensor<f32> -> tensor<)" + t + R"(xf32>
    %one = ref.constant )" + one + " : tensor<" + t + R"(xf32>
    %u = ref.sub )" + (reversed ? "%b, %one" : "%one, %b") + " : tensor<" + t + R"(xf32>
    %y = ref.mul %x, %u : tensor<)" + t + R"(xf32>
    return %y : tensor<)" + t + R"(xf32>
)";
  };
  std::string planArgs = R"(%x: tensor<{n}xf32> {dist.value = "x", dist.layout = #dist.layout<[a]>}, %s: tensor<f32> {dist.value = "s", dist.layout = #dist.layout<[]>})";
  std::string planRes = R"(tensor<{n}xf32> {dist.value = "y", dist.layout = #dist.layout<[a]>})";
  std::string ref = body("{Kn}", "1.000000e+00", false);
  proves(spec(refArgs, refRes, ref, planArgs, planRes, body("{n}", "1.000000e+00", false)));
  refutes(spec(refArgs, refRes, ref, planArgs, planRes, body("{n}", "2.000000e+00", false)));
  refutes(spec(refArgs, refRes, ref, planArgs, planRes, body("{n}", "1.000000e+00", true)));
}

TEST_CASE("a row-wise op of a reshape keeping the last dimension is the reshape of the op",
          "[layouts]") {
  // softmax and rms_norm over the last dimension, the plan computing them in a merged
  // [1, B S, V] shape, the batch split over a: each row is one of the reference's rows,
  // renamed. Near miss: the rows regrouped ([n, 2, 3] as [n, 3, 2]), which the element
  // engine refutes.
  std::string refArgs = R"(%x: tensor<{Kn}x2x3xf32> {ref.name = "x"}, %w: tensor<3xf32> {ref.name = "w"})";
  std::string refRes = R"(tensor<{Kn}x2x3xf32> {ref.name = "p"}, tensor<{Kn}x2x3xf32> {ref.name = "r"})";
  std::string refBody = R"(    %p = ref.softmax %x : tensor<{Kn}x2x3xf32>
    %r = ref.rms_norm %x, %w eps 1.0e-05 : tensor<{Kn}x2x3xf32>, tensor<3xf32>
    return %p, %r : tensor<{Kn}x2x3xf32>, tensor<{Kn}x2x3xf32>
)";
  std::string planArgs = R"(%x: tensor<{n}x2x3xf32> {dist.value = "x", dist.layout = #dist.layout<[a, _, _]>}, %w: tensor<3xf32> {dist.value = "w", dist.layout = #dist.layout<[_]>})";
  std::string planRes = R"(tensor<{n}x2x3xf32> {dist.value = "p", dist.layout = #dist.layout<[a, _, _]>}, tensor<{n}x2x3xf32> {dist.value = "r", dist.layout = #dist.layout<[a, _, _]>})";
  std::string merged = R"(    %m = ref.reshape %x : tensor<{n}x2x3xf32> -> tensor<1x{2n}x3xf32>
    %pm = ref.softmax %m : tensor<1x{2n}x3xf32>
    %p = ref.reshape %pm : tensor<1x{2n}x3xf32> -> tensor<{n}x2x3xf32>
    %rm = ref.rms_norm %m, %w eps 1.0e-05 : tensor<1x{2n}x3xf32>, tensor<3xf32>
    %r = ref.reshape %rm : tensor<1x{2n}x3xf32> -> tensor<{n}x2x3xf32>
    return %p, %r : tensor<{n}x2x3xf32>, tensor<{n}x2x3xf32>
)";
  std::string regrouped = R"(    %m = ref.reshape %x : tensor<{n}x2x3xf32> -> tensor<{n}x3x2xf32>
    %pm = ref.softmax %m : tensor<{n}x3x2xf32>
    %p = ref.reshape %pm : tensor<{n}x3x2xf32> -> tensor<{n}x2x3xf32>
    %r = ref.rms_norm %x, %w eps 1.0e-05 : tensor<{n}x2x3xf32>, tensor<3xf32>
    return %p, %r : tensor<{n}x2x3xf32>, tensor<{n}x2x3xf32>
)";
  for (auto &v : instances()) {
    v["2n"] = 2 * v["n"];
    expectVerdict(fill(spec(refArgs, refRes, refBody, planArgs, planRes, merged), v),
                  Verdict::Verified);
    expectVerdict(fill(spec(refArgs, refRes, refBody, planArgs, planRes, regrouped), v),
                  Verdict::Violated);
  }
}

TEST_CASE("a concatenation's operand described under the others' global shape where a "
          "reshape's unit dimensions left it a choice", "[layouts]") {
  // Grouped-query attention's fused QKV gradient: per KV head, the query heads' rows and
  // the key's concatenated along the head-slot dimension, the KV heads split over a. The
  // key's gradient [1, 1, D] on each rank may be described as [K, 1, D] or [1, K, D]
  // (the reference reshapes it both ways); its blocks are the same. Near miss: the
  // operands concatenated in the other order.
  std::string refArgs = R"(%q: tensor<{K}x2x3xf32> {ref.name = "q"}, %k: tensor<{K}x3xf32> {ref.name = "k"})";
  std::string refRes = R"(tensor<1x{K}x3xf32> {ref.name = "kr"}, tensor<{K}x3x3xf32> {ref.name = "y"})";
  std::string refBody = R"(    %kr = ref.reshape %k : tensor<{K}x3xf32> -> tensor<1x{K}x3xf32>
    %k3 = ref.reshape %k : tensor<{K}x3xf32> -> tensor<{K}x1x3xf32>
    %y = ref.concat %q, %k3 dim 1 : tensor<{K}x2x3xf32>, tensor<{K}x1x3xf32>
    return %kr, %y : tensor<1x{K}x3xf32>, tensor<{K}x3x3xf32>
)";
  std::string planArgs = R"(%q: tensor<1x2x3xf32> {dist.value = "q", dist.layout = #dist.layout<[a, _, _]>}, %k: tensor<1x3xf32> {dist.value = "k", dist.layout = #dist.layout<[a, _]>})";
  std::string planRes = R"(tensor<1x1x3xf32> {dist.value = "kr", dist.layout = #dist.layout<[_, a, _]>}, tensor<1x3x3xf32> {dist.value = "y", dist.layout = #dist.layout<[a, _, _]>})";
  auto plan = [](const char *operands) {
    return std::string(R"(    %r = ref.reshape %k : tensor<1x3xf32> -> tensor<1x1x3xf32>
    %y = ref.concat )") + operands + R"( dim 1 : tensor<1x2x3xf32>, tensor<1x1x3xf32>
    return %r, %y : tensor<1x1x3xf32>, tensor<1x3x3xf32>
)";
  };
  proves(spec(refArgs, refRes, refBody, planArgs, planRes, plan("%q, %r")),
         {"placement: an operand described under its partner's global shape"});
  std::string swapped = R"(    %r = ref.reshape %k : tensor<1x3xf32> -> tensor<1x1x3xf32>
    %y = ref.concat %r, %q dim 1 : tensor<1x1x3xf32>, tensor<1x2x3xf32>
    return %r, %y : tensor<1x1x3xf32>, tensor<1x3x3xf32>
)";
  refutes(spec(refArgs, refRes, refBody, planArgs, planRes, swapped));
}

TEST_CASE("a partial maximum shifted by a replicated value is the maximum shifted",
          "[layouts]") {
  // Each rank's row maximum of its columns, minus (or plus) a value every rank holds,
  // then all_reduce max: max_r(m_r - c) = max_r(m_r) - c (Maxima.cpp). Near misses: the
  // maximum on the right of the subtraction (c - m_r takes the minimum), two partial
  // maxima added, a shift by a value split over the axis.
  std::string refArgs = R"(%x: tensor<3x{Kn}xf32> {ref.name = "x"}, %c: tensor<3xf32> {ref.name = "c"})";
  std::string refRes = R"(tensor<3xf32> {ref.name = "m"})";
  auto ref = [](const char *op, const char *operands) {
    return std::string(R"(    %m0 = ref.reduce_max %x dims [1] : tensor<3x{Kn}xf32>
    %m = )") + op + " " + operands + R"( : tensor<3xf32>
    return %m : tensor<3xf32>
)";
  };
  std::string planArgs = R"(%x: tensor<3x{n}xf32> {dist.value = "x", dist.layout = #dist.layout<[_, a]>}, %c: tensor<3xf32> {dist.value = "c", dist.layout = #dist.layout<[_]>})";
  std::string planRes = R"(tensor<3xf32> {dist.value = "m", dist.layout = #dist.layout<[_]>})";
  auto plan = [](const char *op, const char *operands) {
    return std::string(R"(    %p = ref.reduce_max %x dims [1] : tensor<3x{n}xf32>
    %d = )") + op + " " + operands + R"( : tensor<3xf32>
    %m = dist.all_reduce %d over ["a"] "max" : tensor<3xf32> -> tensor<3xf32>
    return %m : tensor<3xf32>
)";
  };
  for (const char *op : {"ref.sub", "ref.add"})
    proves(spec(refArgs, refRes, ref(op, "%m0, %c"), planArgs, planRes, plan(op, "%p, %c")),
           {"maxima: a partial maximum through an op that commutes with it"});
  proves(spec(refArgs, refRes, ref("ref.add", "%c, %m0"), planArgs, planRes,
              plan("ref.add", "%c, %p")),
         {"maxima: a partial maximum through an op that commutes with it"});
  decides(spec(refArgs, refRes, ref("ref.sub", "%c, %m0"), planArgs, planRes,
               plan("ref.sub", "%c, %p")),
          Verdict::Violated);
  // Two partial maxima added: max_r(m_r + n_r) is no sum of maxima.
  std::string twoArgs = R"(%x: tensor<3x{Kn}xf32> {ref.name = "x"}, %c: tensor<3x{Kn}xf32> {ref.name = "c"})";
  std::string twoPlanArgs = R"(%x: tensor<3x{n}xf32> {dist.value = "x", dist.layout = #dist.layout<[_, a]>}, %c: tensor<3x{n}xf32> {dist.value = "c", dist.layout = #dist.layout<[_, a]>})";
  decides(spec(twoArgs, refRes, R"(    %m0 = ref.reduce_max %x dims [1] : tensor<3x{Kn}xf32>
    %n0 = ref.reduce_max %c dims [1] : tensor<3x{Kn}xf32>
    %m = ref.add %m0, %n0 : tensor<3xf32>
    return %m : tensor<3xf32>
)", twoPlanArgs, planRes, R"(    %p = ref.reduce_max %x dims [1] : tensor<3x{n}xf32>
    %q = ref.reduce_max %c dims [1] : tensor<3x{n}xf32>
    %d = ref.add %p, %q : tensor<3xf32>
    %m = dist.all_reduce %d over ["a"] "max" : tensor<3xf32> -> tensor<3xf32>
    return %m : tensor<3xf32>
)"), Verdict::Violated, /*onlyJ2=*/false);
}

TEST_CASE("a maximum of microbatch maxima is the whole batch's maximum", "[layouts]") {
  // reduce_max over rows cut into two microbatches: the maximum of the microbatches'
  // maxima (Pieces.cpp). Near misses: one microbatch twice (rows left out), a sum of
  // the maxima.
  std::string refArgs = R"(%x: tensor<4x{Kn}xf32> {ref.name = "x"})";
  std::string refRes = R"(tensor<{Kn}xf32> {ref.name = "m"})";
  std::string refBody = R"(    %m = ref.reduce_max %x dims [0] : tensor<4x{Kn}xf32>
    return %m : tensor<{Kn}xf32>
)";
  std::string planArgs = R"(%x: tensor<4x{n}xf32> {dist.value = "x", dist.layout = #dist.layout<[_, a]>})";
  std::string planRes = R"(tensor<{n}xf32> {dist.value = "m", dist.layout = #dist.layout<[a]>})";
  auto plan = [](const char *second, const char *join) {
    return std::string(R"(    %p = ref.slice %x offsets [0, 0] sizes [2, {n}] : tensor<4x{n}xf32>
    %q = ref.slice %x offsets [)") + second + R"(, 0] sizes [2, {n}] : tensor<4x{n}xf32>
    %mp = ref.reduce_max %p dims [0] : tensor<2x{n}xf32>
    %mq = ref.reduce_max %q dims [0] : tensor<2x{n}xf32>
    %m = )" + join + R"( %mp, %mq : tensor<{n}xf32>
    return %m : tensor<{n}xf32>
)";
  };
  proves(spec(refArgs, refRes, refBody, planArgs, planRes, plan("2", "ref.maximum")),
         {"pieces: the same value over the row pieces"});
  decides(spec(refArgs, refRes, refBody, planArgs, planRes, plan("0", "ref.maximum")),
          Verdict::Violated);
  decides(spec(refArgs, refRes, refBody, planArgs, planRes, plan("2", "ref.add")),
          Verdict::Violated);
}

TEST_CASE("the square of a negated root: (0 - sqrt(x))^2 = x where x is nonnegative",
          "[layouts]") {
  // `-norm` as a framework traces it (0 - x), squared: the square of the root. Near
  // miss: 1 - sqrt(x), whose square is not x.
  std::string refArgs = R"(%x: tensor<{Kn}xf32> {ref.name = "x"})";
  std::string refRes = R"(tensor<{Kn}xf32> {ref.name = "y"})";
  std::string refBody = R"(    %e = ref.exp %x : tensor<{Kn}xf32>
    return %e : tensor<{Kn}xf32>
)";
  std::string planArgs = R"(%x: tensor<{n}xf32> {dist.value = "x", dist.layout = #dist.layout<[a]>})";
  std::string planRes = R"(tensor<{n}xf32> {dist.value = "y", dist.layout = #dist.layout<[a]>})";
  auto plan = [](const char *c, bool zeroFirst) {
    std::string sub = zeroFirst ? "%z, %r" : "%r, %z";
    return std::string(R"(    %e = ref.exp %x : tensor<{n}xf32>
    %r = ref.sqrt %e : tensor<{n}xf32>
    %z = ref.constant )") + c + R"( : tensor<{n}xf32>
    %m = ref.sub )" + sub + R"( : tensor<{n}xf32>
    %y = ref.mul %m, %m : tensor<{n}xf32>
    return %y : tensor<{n}xf32>
)";
  };
  proves(spec(refArgs, refRes, refBody, planArgs, planRes, plan("0.000000e+00", true)),
         {"squares: a square of square roots"});
  proves(spec(refArgs, refRes, refBody, planArgs, planRes, plan("0.000000e+00", false)),
         {"squares: a square of square roots"});
  decides(spec(refArgs, refRes, refBody, planArgs, planRes, plan("1.000000e+00", true)),
          Verdict::Violated);
}

TEST_CASE("the square of a norm of norms: sqrt(x)^2 = x where x is nonnegative on every "
          "rank", "[layouts]") {
  // A gradient norm as DTensor computes it: a split gradient's local 2-norm (the square
  // root of a partial sum of squares), a replicated one's divided by sqrt(K), the norms
  // stacked, squared, summed over a, and the norm of their roots. The reference: the
  // norm of the two norms. At K = 4 the divisor is 2 (exact: both engines decide); at
  // K = 2 and 3, sqrt(K) as ref.sqrt of the constant K (the layout engine verifies;
  // the element engine's division by a root stays undecided or proved, never refuted).
  // Near misses: the replicated norm not divided (counted K times), the local norms
  // not squared before the sum, a sum that is no square (x times another value).
  std::string refArgs = R"(%w: tensor<{Kn}xf32> {ref.name = "w"}, %r: tensor<3xf32> {ref.name = "r"})";
  std::string refRes = R"(tensor<f32> {ref.name = "n"})";
  std::string refBody = R"(    %w2 = ref.mul %w, %w : tensor<{Kn}xf32>
    %ws = ref.reduce_sum %w2 dims [0] : tensor<{Kn}xf32>
    %wn = ref.sqrt %ws : tensor<f32>
    %r2 = ref.mul %r, %r : tensor<3xf32>
    %rs = ref.reduce_sum %r2 dims [0] : tensor<3xf32>
    %rn = ref.sqrt %rs : tensor<f32>
    %a = ref.reshape %wn : tensor<f32> -> tensor<1xf32>
    %b = ref.reshape %rn : tensor<f32> -> tensor<1xf32>
    %st = ref.concat %a, %b dim 0 : tensor<1xf32>, tensor<1xf32>
    %sq = ref.mul %st, %st : tensor<2xf32>
    %t = ref.reduce_sum %sq dims [0] : tensor<2xf32>
    %n = ref.sqrt %t : tensor<f32>
    return %n : tensor<f32>
)";
  std::string planArgs = R"(%w: tensor<{n}xf32> {dist.value = "w", dist.layout = #dist.layout<[a]>}, %r: tensor<3xf32> {dist.value = "r", dist.layout = #dist.layout<[_]>})";
  std::string planRes = R"(tensor<f32> {dist.value = "n", dist.layout = #dist.layout<[]>})";
  auto plan = [](const std::string &divisor, const char *squared, const char *rootSquared) {
    return std::string(R"(    %w2 = ref.mul %w, %w : tensor<{n}xf32>
    %ws = ref.reduce_sum %w2 dims [0] : tensor<{n}xf32>
    %wn = ref.sqrt %ws : tensor<f32>
    %r2 = ref.mul %r, %r : tensor<3xf32>
    %rs = ref.reduce_sum %r2 dims [0] : tensor<3xf32>
    %rn0 = ref.sqrt %rs : tensor<f32>
)") + divisor + R"(    %rn = ref.div %rn0, %k : tensor<f32>
    %a = ref.reshape %wn : tensor<f32> -> tensor<1xf32>
    %b = ref.reshape %rn : tensor<f32> -> tensor<1xf32>
    %st = ref.concat %a, %b dim 0 : tensor<1xf32>, tensor<1xf32>
    %sq = )" + squared + R"( : tensor<2xf32>
    %ar = dist.all_reduce %sq over ["a"] "sum" : tensor<2xf32> -> tensor<2xf32>
    %rt = ref.sqrt %ar : tensor<2xf32>
    %sq2 = )" + rootSquared + R"( : tensor<2xf32>
    %t = ref.reduce_sum %sq2 dims [0] : tensor<2xf32>
    %n = ref.sqrt %t : tensor<f32>
    return %n : tensor<f32>
)";
  };
  const char *square = "ref.mul %st, %st", *rootSquare = "ref.mul %rt, %rt";
  for (int64_t J : {1, 2})
    for (int64_t n : {1, 2}) {
      std::map<std::string, int64_t> v{{"K", 4}, {"J", J}, {"n", n}, {"Kn", 4 * n}};
      auto at = [&](const std::string &body) {
        return run(fill(spec(refArgs, refRes, refBody, planArgs, planRes, body), v));
      };
      std::string two = "    %k = ref.constant 2.0 : tensor<f32>\n";
      Verdicts ok = at(plan(two, square, rootSquare));
      CHECK(ok.element == Verdict::Verified);
      CHECK(ok.layout == Verdict::Verified);
      CHECK(fired(ok.proof, "squares: a square of square roots"));
      for (const std::string &miss :
           {plan("    %k = ref.constant 1.0 : tensor<f32>\n", square, rootSquare),
            plan(two, "ref.scale %st by 1.0", rootSquare),
            plan(two, square, "ref.mul %rt, %ar")}) {
        Verdicts bad = at(miss);
        INFO(miss);
        CHECK(bad.element == Verdict::Violated);
        CHECK(bad.layout != Verdict::Verified);
      }
    }
  for (int64_t K : {2, 3})
    for (int64_t n : {1, 2}) {
      std::map<std::string, int64_t> v{{"K", K}, {"J", 1}, {"n", n}, {"Kn", K * n}};
      auto at = [&](const std::string &body) {
        return run(fill(spec(refArgs, refRes, refBody, planArgs, planRes, body), v));
      };
      std::string root = "    %kk = ref.constant {K}.0 : tensor<f32>\n"
                         "    %k = ref.sqrt %kk : tensor<f32>\n";
      Verdicts ok = at(plan(root, square, rootSquare));
      CHECK(ok.layout == Verdict::Verified);
      CHECK(ok.element != Verdict::Violated);
      // The double nearest sqrt(K) is not sqrt(K): its square is not K.
      Verdicts near = at(plan(K == 2 ? "    %k = ref.constant 1.4142135623730951 : tensor<f32>\n"
                                     : "    %k = ref.constant 1.7320508075688772 : tensor<f32>\n",
                              square, rootSquare));
      CHECK(near.layout != Verdict::Verified);
      Verdicts bad = at(plan("    %k = ref.constant 1.0 : tensor<f32>\n", square, rootSquare));
      CHECK(bad.element == Verdict::Violated);
      CHECK(bad.layout != Verdict::Verified);
    }
}

TEST_CASE("a square of a root whose operand is a deep shared DAG is decided at once",
          "[layouts]") {
  // x = w*w doubled 60 times by add(a, a): 2^60 paths through 61 values. Whether it is
  // nonnegative, and its square, are looked at once per value (Squares.cpp's memos),
  // so this runs in no time (without them it would not end).
  std::string body = "    %a0 = ref.mul %w, %w : tensor<3xf32>\n";
  for (int i = 0; i < 60; ++i)
    body += "    %a" + std::to_string(i + 1) + " = ref.add %a" + std::to_string(i) + ", %a" +
            std::to_string(i) + " : tensor<3xf32>\n";
  body += "    %s = ref.sqrt %a60 : tensor<3xf32>\n"
          "    %q = ref.mul %s, %s : tensor<3xf32>\n"
          "    return %q : tensor<3xf32>\n";
  std::string text =
      spec(R"(%w: tensor<3xf32> {ref.name = "w"})", R"(tensor<3xf32> {ref.name = "q"})", body,
           R"(%w: tensor<3xf32> {dist.value = "w", dist.layout = #dist.layout<[_]>})",
           R"(tensor<3xf32> {dist.value = "q", dist.layout = #dist.layout<[_]>})", body);
  Verdicts got = run(fill(text, {{"K", 2}, {"J", 1}}));
  CHECK(got.layout == Verdict::Verified);
}

TEST_CASE("the infinity norm of maxima: max over ranks commutes with moves, concatenation, "
          "maximum and reduce_max, and |x| = x where x is nonnegative on every rank",
          "[layouts]") {
  // A gradient's infinity norm as DTensor computes it: a split gradient's local largest
  // |w| (each rank's maximum of its block: partial-max over a), a replicated one's,
  // stacked, made absolute again (|x| of values nonnegative on every rank: x), their
  // largest, all_reduce "max" over a. Near misses: the all_reduce summing, the split
  // gradient's maximum taken without |.| (the reference takes |max w|: per rank |max w_r|
  // is not the maximum's magnitude, so |.| of that stack is no identity), the all_reduce
  // missing.
  // The norm's steps on w of {size} elements, its largest element named `last`; the
  // plan writes the replicated gradient's |r| with the operands the other way round (a
  // maximum commutes).
  auto steps = [](const std::string &size, const char *wAbs, const char *rAbs,
                  const char *last) {
    return "    %wneg = ref.scale %w by -1.0 : tensor<" + size + "xf32>\n"
           "    %wabs = ref.maximum %w, %wneg : tensor<" + size + "xf32>\n"
           "    %wm = ref.reduce_max " + wAbs + " dims [0] : tensor<" + size + "xf32>\n" +
           R"(    %rneg = ref.scale %r by -1.0 : tensor<3xf32>
    %rabs = ref.maximum )" + rAbs + R"( : tensor<3xf32>
    %rm = ref.reduce_max %rabs dims [0] : tensor<3xf32>
    %a = ref.reshape %wm : tensor<f32> -> tensor<1xf32>
    %b = ref.reshape %rm : tensor<f32> -> tensor<1xf32>
    %st = ref.concat %a, %b dim 0 : tensor<1xf32>, tensor<1xf32>
    %sneg = ref.scale %st by -1.0 : tensor<2xf32>
    %sabs = ref.maximum %st, %sneg : tensor<2xf32>
    %)" + last + R"( = ref.reduce_max %sabs dims [0] : tensor<2xf32>
)";
  };
  std::string refArgs = R"(%w: tensor<{Kn}xf32> {ref.name = "w"}, %r: tensor<3xf32> {ref.name = "r"})";
  std::string refRes = R"(tensor<f32> {ref.name = "n"})";
  auto ref = [&](const char *wAbs) {
    return steps("{Kn}", wAbs, "%r, %rneg", "n") + "    return %n : tensor<f32>\n";
  };
  std::string planArgs = R"(%w: tensor<{n}xf32> {dist.value = "w", dist.layout = #dist.layout<[a]>}, %r: tensor<3xf32> {dist.value = "r", dist.layout = #dist.layout<[_]>})";
  std::string planRes = R"(tensor<f32> {dist.value = "n", dist.layout = #dist.layout<[]>})";
  auto plan = [&](const char *wAbs, const std::string &reduce) {
    return steps("{n}", wAbs, "%rneg, %r", "m") + reduce + "    return %n : tensor<f32>\n";
  };
  std::string maxOver = "    %n = dist.all_reduce %m over [\"a\"] \"max\" : tensor<f32> -> tensor<f32>\n";
  std::string sumOver = "    %n = dist.all_reduce %m over [\"a\"] \"sum\" : tensor<f32> -> tensor<f32>\n";
  std::string none = "    %n = ref.detach %m : tensor<f32>\n";
  for (int64_t K : {2, 3})
    for (int64_t n : {1, 2}) {
      std::map<std::string, int64_t> v{{"K", K}, {"J", 1}, {"n", n}, {"Kn", K * n}};
      auto at = [&](const std::string &r, const std::string &p) {
        return run(fill(spec(refArgs, refRes, r, planArgs, planRes, p), v));
      };
      Verdicts ok = at(ref("%wabs"), plan("%wabs", maxOver));
      CHECK(ok.element == Verdict::Verified);
      CHECK(ok.layout == Verdict::Verified);
      for (const auto &[r, p] : {std::pair{ref("%wabs"), plan("%wabs", sumOver)},
                                 std::pair{ref("%w"), plan("%w", maxOver)},
                                 std::pair{ref("%wabs"), plan("%wabs", none)}}) {
        Verdicts bad = at(r, p);
        INFO(p);
        CHECK(bad.element == Verdict::Violated);
        CHECK(bad.layout != Verdict::Verified);
      }
    }
}

TEST_CASE("maxima do not pass through a negative scale, nor join a partial sum",
          "[layouts]") {
  // max_r(-x_r) is -min_r x_r, not -max_r x_r; max_r max(m_r, s_r) is not max(max_r m_r,
  // sum_r s_r). Their correct forms: the all_reduce "max" before the negation, and the
  // sum all-reduced before it joins the maxima (a replicated operand: the maximum of its
  // copies is itself).
  std::string refArgs = R"(%w: tensor<{Kn}xf32> {ref.name = "w"})";
  std::string refRes = R"(tensor<f32> {ref.name = "neg"}, tensor<f32> {ref.name = "top"})";
  std::string refBody = R"(    %wm = ref.reduce_max %w dims [0] : tensor<{Kn}xf32>
    %neg = ref.scale %wm by -1.0 : tensor<f32>
    %ws = ref.reduce_sum %w dims [0] : tensor<{Kn}xf32>
    %a = ref.reshape %wm : tensor<f32> -> tensor<1xf32>
    %b = ref.reshape %ws : tensor<f32> -> tensor<1xf32>
    %st = ref.concat %a, %b dim 0 : tensor<1xf32>, tensor<1xf32>
    %top = ref.reduce_max %st dims [0] : tensor<2xf32>
    return %neg, %top : tensor<f32>, tensor<f32>
)";
  std::string planArgs = R"(%w: tensor<{n}xf32> {dist.value = "w", dist.layout = #dist.layout<[a]>})";
  std::string planRes = R"(tensor<f32> {dist.value = "neg", dist.layout = #dist.layout<[]>}, tensor<f32> {dist.value = "top", dist.layout = #dist.layout<[]>})";
  auto plan = [](bool negateFirst, bool sumFirst) {
    std::string negation =
        negateFirst ? "    %x = ref.scale %wm by -1.0 : tensor<f32>\n"
                      "    %neg = dist.all_reduce %x over [\"a\"] \"max\" : tensor<f32> -> tensor<f32>\n"
                    : "    %x = dist.all_reduce %wm over [\"a\"] \"max\" : tensor<f32> -> tensor<f32>\n"
                      "    %neg = ref.scale %x by -1.0 : tensor<f32>\n";
    std::string sum = sumFirst ? "    %ws = ref.reduce_sum %w dims [0] : tensor<{n}xf32>\n"
                               : "    %wsl = ref.reduce_sum %w dims [0] : tensor<{n}xf32>\n"
                                 "    %ws = dist.all_reduce %wsl over [\"a\"] \"sum\" : tensor<f32> -> tensor<f32>\n";
    return "    %wm = ref.reduce_max %w dims [0] : tensor<{n}xf32>\n" + negation + sum +
           R"(    %a = ref.reshape %wm : tensor<f32> -> tensor<1xf32>
    %b = ref.reshape %ws : tensor<f32> -> tensor<1xf32>
    %st = ref.concat %a, %b dim 0 : tensor<1xf32>, tensor<1xf32>
    %m = ref.reduce_max %st dims [0] : tensor<2xf32>
    %top = dist.all_reduce %m over ["a"] "max" : tensor<f32> -> tensor<f32>
    return %neg, %top : tensor<f32>, tensor<f32>
)";
  };
  for (int64_t K : {2, 3}) {
    std::map<std::string, int64_t> v{{"K", K}, {"J", 1}, {"n", 2}, {"Kn", K * 2}};
    auto at = [&](const std::string &p) {
      return run(fill(spec(refArgs, refRes, refBody, planArgs, planRes, p), v));
    };
    Verdicts ok = at(plan(false, false));
    CHECK(ok.element == Verdict::Verified);
    CHECK(ok.layout == Verdict::Verified);
    for (const std::string &p : {plan(true, false), plan(false, true)}) {
      Verdicts bad = at(p);
      INFO(p);
      CHECK(bad.element == Verdict::Violated);
      CHECK(bad.layout != Verdict::Verified);
    }
  }
}

namespace {
/// Attention over token lookups, the whole batch against microbatches: {N} sequences
/// of {S} tokens, split over a (K ranks); each rank runs its sequences as {M}
/// microbatches. The ops between the lookup and the loss are the ones a framework's
/// attention writes: a reshape into sequences, slices and a concatenation along the
/// features (half rotation), batched products, a causal softmax, a mean; the table's
/// gradient scatter-adds every microbatch's rows. `variant` breaks one op.
std::string microbatchedAttention(int64_t N, int64_t S, int64_t K, int64_t M,
                                  const std::string &variant) {
  int64_t T = N * S, local = T / K, per = local / M, seqs = per / S;
  auto t = [](std::vector<int64_t> dims) {
    std::string s = "tensor<";
    for (int64_t d : dims)
      s += std::to_string(d) + "x";
    return s + "f32>";
  };
  // One attention block over `rows` tokens in `n` sequences, from ids %ID; values
  // named with suffix X.
  auto block = [&](const std::string &X, const std::string &ids, int64_t rows, int64_t n,
                   bool plan) {
    std::string ids_t = "tensor<" + std::to_string(rows) + "xi64>";
    std::string r3 = t({n, S, 2}), h3 = t({n, S, 1});
    bool swap = plan && variant == "concat order";
    std::string out;
    out += "    %e" + X + " = ref.embedding %table, " + ids + " : tensor<4x2xf32>, " + ids_t + "\n";
    out += "    %r" + X + " = ref.reshape %e" + X + " : " + t({rows, 2}) + " -> " + r3 + "\n";
    out += "    %q" + X + " = ref.slice %r" + X + " offsets [0, 0, 0] sizes [" + std::to_string(n) + ", " +
           std::to_string(S) + ", 1] : " + r3 + "\n";
    out += "    %k" + X + " = ref.slice %r" + X + " offsets [0, 0, 1] sizes [" + std::to_string(n) + ", " +
           std::to_string(S) + ", 1] : " + r3 + "\n";
    out += "    %c" + X + " = ref.concat " + (swap ? "%q" + X + ", %k" + X : "%k" + X + ", %q" + X) +
           " dim 2 : " + h3 + ", " + h3 + "\n";
    std::string sc = plan && variant == "scores contract" ? "contract(2, 1)" : "contract(2, 2)";
    out += "    %s" + X + " = ref.batch_matmul %c" + X + ", %r" + X + " " + sc + " : " + r3 + ", " + r3 + "\n";
    out += "    %p" + X + " = ref.causal_softmax %s" + X + " : " + t({n, S, S}) + "\n";
    out += "    %o" + X + " = ref.batch_matmul %p" + X + ", %r" + X + " contract(2, 1) : " + t({n, S, S}) + ", " + r3 + "\n";
    // A gradient's zeros beside a slice (a splat concatenated along the features).
    out += "    %z" + X + " = ref.constant 0.0 : " + h3 + "\n";
    bool zerosAfter = plan && variant == "zeros after";
    out += "    %w" + X + " = ref.concat " + (zerosAfter ? "%q" + X + ", %z" + X : "%z" + X + ", %q" + X) +
           " dim 2 : " + h3 + ", " + h3 + "\n";
    out += "    %ow" + X + " = ref.add %o" + X + ", %w" + X + " : " + r3 + "\n";
    std::string red = plan && variant == "sum for mean" ? "reduce_sum" : "reduce_mean";
    out += "    %m" + X + " = ref." + red + " %ow" + X + " dims [1, 2] : " + r3 + "\n";
    out += "    %l" + X + " = ref.reduce_sum %m" + X + " dims [0] : " + t({n}) + "\n";
    out += "    %of" + X + " = ref.reshape %ow" + X + " : " + r3 + " -> " + t({rows, 2}) + "\n";
    out += "    %g" + X + " = ref.embedding_grad %of" + X + ", " + ids + " : " + t({rows, 2}) + ", " +
           ids_t + " -> tensor<4x2xf32>\n";
    return out;
  };
  std::string text = "module {\n  func.func @reference(%table: tensor<4x2xf32> {ref.name = \"table\"}, "
                     "%ids: tensor<" + std::to_string(T) + "xi64> {ref.name = \"ids\", ref.bound = 4 : i64})"
                     " -> (tensor<f32> {ref.name = \"loss\"}, tensor<4x2xf32> {ref.name = \"dtable\"})"
                     " attributes {ref.reference} {\n";
  text += block("", "%ids", T, N, false);
  text += "    return %l, %g : tensor<f32>, tensor<4x2xf32>\n  }\n";
  text += "  dist.mesh @mesh axes = [\"a\"] shape = [" + std::to_string(K) + "]\n";
  text += "  func.func @plan(%table: tensor<4x2xf32> {dist.value = \"table\", dist.layout = #dist.layout<[_, _]>}, "
          "%ids: tensor<" + std::to_string(local) + "xi64> {dist.value = \"ids\", dist.layout = #dist.layout<[a]>})"
          " -> (tensor<f32> {dist.value = \"loss\", dist.layout = #dist.layout<[]>}, "
          "tensor<4x2xf32> {dist.value = \"dtable\", dist.layout = #dist.layout<[_, _]>}) "
          "attributes {dist.mesh = @mesh} {\n";
  for (int64_t m = 0; m < M; ++m) {
    std::string X = "_" + std::to_string(m);
    int64_t at = variant == "microbatch twice" && m == M - 1 ? 0 : m * per;
    text += "    %ids" + X + " = ref.slice %ids offsets [" + std::to_string(at) + "] sizes [" +
            std::to_string(per) + "] : tensor<" + std::to_string(local) + "xi64>\n";
    text += block(X, "%ids" + X, per, seqs, true);
  }
  std::string l = "%l_0", g = "%g_0";
  for (int64_t m = 1; m < M; ++m) {
    text += "    %la_" + std::to_string(m) + " = ref.add " + l + ", %l_" + std::to_string(m) + " : tensor<f32>\n";
    text += "    %ga_" + std::to_string(m) + " = ref.add " + g + ", %g_" + std::to_string(m) + " : tensor<4x2xf32>\n";
    l = "%la_" + std::to_string(m);
    g = "%ga_" + std::to_string(m);
  }
  text += "    %loss = dist.all_reduce " + l + " over [\"a\"] \"sum\" : tensor<f32> -> tensor<f32>\n";
  text += "    %dtable = dist.all_reduce " + g + " over [\"a\"] \"sum\" : tensor<4x2xf32> -> tensor<4x2xf32>\n";
  text += "    return %loss, %dtable : tensor<f32>, tensor<4x2xf32>\n  }\n}\n";
  return text;
}
} // namespace

TEST_CASE("token lookups through attention, microbatch by microbatch, meet the whole batch's",
          "[layouts]") {
  // Pieces of token ids distribute through lookups, reshapes, feature slices and
  // concatenations (with zeros beside them), batched products, causal softmax, means
  // and scatter-adds.
  struct Size {
    int64_t N, S, K, M;
  } sizes[] = {{4, 2, 2, 2}, {6, 2, 3, 2}, {4, 3, 1, 2}, {8, 2, 2, 4}};
  for (const Size &z : sizes) {
    INFO("N=" << z.N << " S=" << z.S << " K=" << z.K << " M=" << z.M);
    Verdicts ok = run(microbatchedAttention(z.N, z.S, z.K, z.M, ""));
    CHECK(ok.element == Verdict::Verified);
    CHECK(ok.layout == Verdict::Verified);
    // Near misses, one per rule: each the element engine refutes and the layout engine
    // does not verify.
    for (std::string variant :
         {"microbatch twice", "concat order", "scores contract", "sum for mean", "zeros after"}) {
      if (variant == "scores contract" && z.S != 2)
        continue; // (scores of the values' transposes have the right shape only then)
      INFO(variant);
      Verdicts bad = run(microbatchedAttention(z.N, z.S, z.K, z.M, variant));
      CHECK(bad.element == Verdict::Violated);
      CHECK(bad.layout != Verdict::Verified);
    }
  }
}

/// all_to_all over one dimension (split_dim = concat_dim = 0) of x [G L] split over
/// the group's axes A ((b, a) where b has 2 ranks, else a: G ranks, L = G n rows each),
/// then microbatch p (of G) taken as window p of the G windows each rank holds, scaled
/// by p + 1 and gathered back. The reference scales microbatch p = rows [p L, (p + 1) L)
/// of x alike. `variant`: "" (right), "wrong window" (microbatch p takes window p + 1),
/// "no exchange" (the windows cut from the rank's own block), "gather order" (gathered
/// over (a, b): the blocks in the other order).
static std::string exchangedMicrobatches(int64_t K, int64_t J, int64_t n, const std::string &variant) {
  int64_t G = K * J, L = G * n, T = G * L;
  std::string axes = J > 1 ? "[\"b\", \"a\"]" : "[\"a\"]";
  std::string gatherAxes = variant == "gather order" ? "[\"a\", \"b\"]" : axes;
  auto ty = [](int64_t r) { return "tensor<" + std::to_string(r) + "xf32>"; };
  auto str = [](int64_t v) { return std::to_string(v); };
  std::string ref, plan, outs, refTypes, planTypes, refResults, planResults;
  for (int64_t p = 0; p < G; ++p) {
    std::string ps = str(p), f = str(p + 1) + ".0", sep = p ? ", " : "";
    ref += "    %y" + ps + "s = ref.slice %x offsets [" + str(p * L) + "] sizes [" + str(L) +
           "] : " + ty(T) + "\n    %y" + ps + " = ref.scale %y" + ps + "s by " + f + " : " +
           ty(L) + "\n";
    int64_t w = variant == "wrong window" ? (p + 1) % G : p;
    plan += "    %y" + ps + "s = ref.slice " + (variant == "no exchange" ? "%x" : "%t") +
            " offsets [" + str(w * n) + "] sizes [" + str(n) + "] : " + ty(L) + "\n    %y" + ps +
            "z = ref.scale %y" + ps + "s by " + f + " : " + ty(n) + "\n    %y" + ps +
            " = dist.all_gather %y" + ps + "z over " + gatherAxes + " dim 0 : " + ty(n) + " -> " +
            ty(L) + "\n";
    outs += sep + "%y" + ps;
    refTypes += sep + ty(L);
    refResults += sep + ty(L) + " {ref.name = \"y" + ps + "\"}";
    planResults += sep + ty(L) + " {dist.value = \"y" + ps + "\", dist.layout = #dist.layout<[_]>}";
  }
  return "module {\n  func.func @reference(%x: " + ty(T) + " {ref.name = \"x\"}) -> (" +
         refResults + ") attributes {ref.reference} {\n" + ref + "    return " + outs + " : " +
         refTypes + "\n  }\n  dist.mesh @mesh axes = [\"a\", \"b\"] shape = [" + str(K) + ", " +
         str(J) + "]\n  func.func @plan(%x: " + ty(L) +
         " {dist.value = \"x\", dist.layout = #dist.layout<[" + (J > 1 ? "(b, a)" : "a") +
         "]>}) -> (" + planResults + ") attributes {dist.mesh = @mesh} {\n" +
         "    %t = dist.all_to_all %x over " + axes + " split_dim 0 concat_dim 0 : " + ty(L) +
         " -> " + ty(L) + "\n" + plan + "    return " + outs + " : " + refTypes + "\n  }\n}\n";
}

/// A row-wise op per microbatch of exchanged rows, summed: x [G L, 3] split over a (G
/// ranks, L = G n rows each) is exchanged by all_to_all; microbatch p is window p of
/// each rank's rows (n rows), its x - max(x) over the classes summed over rows and
/// classes; the microbatches' sums are added and all-reduced. The reference sums
/// x - max(x) over the whole batch. `variant`: "" (right), "window twice" (microbatch 1
/// takes window 0), "dropped" (the last microbatch not added), "weighted" (microbatch 1
/// counted twice).
static std::string rowwiseExchanged(int64_t K, int64_t J, int64_t n, const std::string &variant) {
  (void)J;
  int64_t G = K, L = G * n, T = G * L;
  auto str = [](int64_t v) { return std::to_string(v); };
  auto ty = [&](int64_t r) { return "tensor<" + str(r) + "x3xf32>"; };
  std::string text = "module {\n  func.func @reference(%x: " + ty(T) +
                     " {ref.name = \"x\"}) -> (tensor<f32> {ref.name = \"loss\"}) attributes "
                     "{ref.reference} {\n" +
                     "    %m = ref.reduce_max %x dims [1] : " + ty(T) + "\n" +
                     "    %mb = ref.broadcast %m dims [0] : tensor<" + str(T) + "xf32> -> " +
                     ty(T) + "\n    %z = ref.sub %x, %mb : " + ty(T) + "\n" +
                     "    %loss = ref.reduce_sum %z dims [0, 1] : " + ty(T) + "\n" +
                     "    return %loss : tensor<f32>\n  }\n" +
                     "  dist.mesh @mesh axes = [\"a\", \"b\"] shape = [" + str(K) + ", 1]\n" +
                     "  func.func @plan(%x: " + ty(L) +
                     " {dist.value = \"x\", dist.layout = #dist.layout<[a, _]>}) -> (tensor<f32> "
                     "{dist.value = \"loss\", dist.layout = #dist.layout<[]>}) attributes "
                     "{dist.mesh = @mesh} {\n" +
                     "    %t = dist.all_to_all %x over [\"a\"] split_dim 0 concat_dim 0 : " + ty(L) +
                     " -> " + ty(L) + "\n";
  std::string sum;
  for (int64_t p = 0; p < G; ++p) {
    std::string ps = str(p);
    int64_t w = variant == "window twice" && p == 1 ? 0 : p;
    text += "    %x" + ps + " = ref.slice %t offsets [" + str(w * n) + ", 0] sizes [" + str(n) +
            ", 3] : " + ty(L) + "\n    %m" + ps + " = ref.reduce_max %x" + ps +
            " dims [1] : " + ty(n) + "\n    %mb" + ps + " = ref.broadcast %m" + ps +
            " dims [0] : tensor<" + str(n) + "xf32> -> " + ty(n) + "\n    %z" + ps +
            " = ref.sub %x" + ps + ", %mb" + ps + " : " + ty(n) + "\n    %l" + ps +
            " = ref.reduce_sum %z" + ps + " dims [0, 1] : " + ty(n) + "\n";
    std::string l = "%l" + ps;
    if (variant == "weighted" && p == 1) {
      text += "    %w1 = ref.scale %l1 by 2.0 : tensor<f32>\n";
      l = "%w1";
    }
    if (variant == "dropped" && p == G - 1)
      continue;
    if (sum.empty()) {
      sum = l;
    } else {
      text += "    %s" + ps + " = ref.add " + sum + ", " + l + " : tensor<f32>\n";
      sum = "%s" + ps;
    }
  }
  text += "    %loss = dist.all_reduce " + sum + " over [\"a\"] \"sum\" : tensor<f32> -> tensor<f32>\n";
  return text + "    return %loss : tensor<f32>\n  }\n}\n";
}

/// Each instance (K in {2, 3}, J in {1, 2}, n in {1, 2}) of `make`: both engines verify
/// its right variant (""); the element engine refutes each near miss and the layout
/// engine never verifies it (a near miss named in `twoAxes` only where b has 2 ranks).
static void decidesExchanges(
    const std::function<std::string(int64_t, int64_t, int64_t, const std::string &)> &make,
    const std::vector<std::string> &misses, const std::string &twoAxes = "") {
  for (int64_t K : {2, 3})
    for (int64_t J : {1, 2})
      for (int64_t n : {1, 2}) {
        INFO("K=" << K << " J=" << J << " n=" << n);
        Verdicts ok = run(make(K, J, n, ""));
        CHECK(ok.element == Verdict::Verified);
        CHECK(ok.layout == Verdict::Verified);
        for (const std::string &variant : misses) {
          if (variant == twoAxes && J == 1)
            continue;  // (one axis: no other order)
          INFO(variant);
          Verdicts bad = run(make(K, J, n, variant));
          CHECK(bad.element == Verdict::Violated);
          CHECK(bad.layout != Verdict::Verified);
        }
      }
}

TEST_CASE("sums over pieces that tile a value: a row-wise op per microbatch of exchanged "
          "rows", "[layouts]") {
  // Each microbatch's rows are a window of the exchanged block: the plan's sums are
  // sums of slices of the reference's x - max(x), which tile its rows; their sum is the
  // whole sum (TermPool::joinSlicedSums). Near misses: a window taken twice (pieces
  // that do not tile), a microbatch dropped (a gap), one counted twice (unequal
  // weights). K in {2, 3} ranks, n in {1, 2} rows per window.
  for (int64_t K : {2, 3})
    for (int64_t n : {1, 2}) {
      INFO("K=" << K << " n=" << n);
      Verdicts ok = run(rowwiseExchanged(K, 1, n, ""));
      CHECK(ok.element == Verdict::Verified);
      CHECK(ok.layout == Verdict::Verified);
      CHECK(fired(ok.proof, "sums: pieces that tile a value"));
      for (const char *variant : {"window twice", "dropped", "weighted"}) {
        INFO(variant);
        Verdicts bad = run(rowwiseExchanged(K, 1, n, variant));
        CHECK(bad.element == Verdict::Violated);
        CHECK(bad.layout != Verdict::Verified);
      }
    }
}

TEST_CASE("all_to_all over one dimension: each rank holds its part of every member's "
          "block; a window that is the blocks of a run is a block of the run",
          "[layouts]") {
  decidesExchanges(exchangedMicrobatches, {"wrong window", "no exchange", "gather order"},
                   "gather order");
}

/// A rank's block moved in two runs: x [T] split over the group's axes A ((b, a) or a:
/// G ranks, L = 2 G n rows each); each half of the rank's block is exchanged by an
/// all_to_all on its own and the two results concatenated (XLA's exchange of a view of
/// several microbatches, one leading index at a time). Rank g then holds chunk g of
/// every member's first half, then of every member's second half: run (h, m) of the
/// concatenation, gathered over A, is member m's half h. `variant`: "" (right),
/// "swapped" (the runs concatenated in the other order), "no exchange" (the halves put
/// back as they were).
static std::string exchangedRuns(int64_t K, int64_t J, int64_t n, const std::string &variant) {
  int64_t G = K * J, L = 2 * G * n, T = G * L, seg = G * n;
  std::string axes = J > 1 ? "[\"b\", \"a\"]" : "[\"a\"]", split = J > 1 ? "(b, a)" : "a";
  auto ty = [](int64_t r) { return "tensor<" + std::to_string(r) + "xf32>"; };
  auto str = [](int64_t v) { return std::to_string(v); };
  std::string ref, plan, outs, types, refResults, planResults;
  for (int64_t h = 0; h < 2; ++h) {
    std::string hs = str(h);
    plan += "    %x" + hs + " = ref.slice %x offsets [" + str(h * L / 2) + "] sizes [" +
            str(L / 2) + "] : " + ty(L) + "\n";
    if (variant != "no exchange")
      plan += "    %t" + hs + " = dist.all_to_all %x" + hs + " over " + axes +
              " split_dim 0 concat_dim 0 : " + ty(L / 2) + " -> " + ty(L / 2) + "\n";
  }
  std::string a = variant == "no exchange" ? "%x0" : "%t0", b = variant == "no exchange" ? "%x1" : "%t1";
  if (variant == "swapped")
    std::swap(a, b);
  plan += "    %t = ref.concat " + a + ", " + b + " dim 0 : " + ty(L / 2) + ", " + ty(L / 2) + "\n";
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t m = 0; m < G; ++m) {
      std::string y = "%y" + str(h) + "_" + str(m), sep = outs.empty() ? "" : ", ";
      ref += "    " + y + " = ref.slice %x offsets [" + str((m * 2 + h) * seg) + "] sizes [" +
             str(seg) + "] : " + ty(T) + "\n";
      plan += "    " + y + "s = ref.slice %t offsets [" + str((h * G + m) * n) + "] sizes [" +
              str(n) + "] : " + ty(L) + "\n    " + y + " = dist.all_gather " + y + "s over " +
              axes + " dim 0 : " + ty(n) + " -> " + ty(seg) + "\n";
      outs += sep + y;
      types += sep + ty(seg);
      refResults += sep + ty(seg) + " {ref.name = \"" + y.substr(1) + "\"}";
      planResults += sep + ty(seg) + " {dist.value = \"" + y.substr(1) +
                     "\", dist.layout = #dist.layout<[_]>}";
    }
  return "module {\n  func.func @reference(%x: " + ty(T) + " {ref.name = \"x\"}) -> (" +
         refResults + ") attributes {ref.reference} {\n" + ref + "    return " + outs + " : " +
         types + "\n  }\n  dist.mesh @mesh axes = [\"a\", \"b\"] shape = [" + str(K) + ", " +
         str(J) + "]\n  func.func @plan(%x: " + ty(L) + " {dist.value = \"x\", dist.layout = " +
         "#dist.layout<[" + split + "]>}) -> (" + planResults + ") attributes {dist.mesh = @mesh} {\n" +
         plan + "    return " + outs + " : " + types + "\n  }\n}\n";
}

TEST_CASE("a concatenation of values laid out in windows: each rank's windows of each, "
          "one after the other", "[layouts]") {
  decidesExchanges(exchangedRuns, {"swapped", "no exchange"});
}

TEST_CASE("rows and split heads merged into a product's batch are runs of it, and split "
          "again after the products",
          "[layouts]") {
  // Each rank holds 2 batch rows x 3 of the 6 heads; merged row-major into the batch of
  // its products they are 2 runs of 3 of the reference's merged batch (windows), which
  // the products and the causal softmax pass through (pass-through factors) and the
  // reshape back splits into rows over dp and heads over tp again.
  auto read = [](const std::string &rel) {
    std::ifstream in(std::string(PLANPROOF_SOURCE_DIR) + "/" + rel);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  };
  std::string good = read("verify-specs/transformer/attention_dp2_tp2_rows_heads.mlir");
  REQUIRE(!good.empty());
  Verdicts got = run(good);
  CHECK(got.element == Verdict::Verified);
  CHECK(got.layout == Verdict::Verified);
  INFO("proof trace:\n" << traceText(got.proof));
  CHECK(fired(got.proof, "windows: a split dimension merged after ones of several indices"));
  CHECK(fired(got.proof, "windows: runs of a merged dimension split into its dimensions again"));
  // The near miss: the keys merged heads-major pair each query with another row's and
  // head's keys.
  std::string bad =
      read("test/CLI/Inputs/attention_dp2_tp2_rows_heads_keys_heads_major.mlir");
  REQUIRE(!bad.empty());
  Verdicts wrong = run(bad);
  CHECK(wrong.element == Verdict::Violated);
  CHECK(wrong.layout != Verdict::Verified);
}
