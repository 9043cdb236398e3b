//===- EditTest.cpp - changing a loaded plan in place (Session::edit) ------===//
//
// A planner's move as an edit of the loaded plan: the verdict and reasons after it are
// those of the edited text loaded afresh, the undo edits give back the plan's own,
// the layout engine re-derives only what the edit reaches, and edits that cannot be
// made in place (or are malformed) are errors that change nothing.
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

/// `text` with its one occurrence of `from` replaced by `to`.
std::string replaced(std::string text, const std::string &from, const std::string &to) {
  size_t at = text.find(from);
  REQUIRE(at != std::string::npos);
  REQUIRE(text.find(from, at + 1) == std::string::npos);
  return text.replace(at, from.size(), to);
}

/// The reasons of a result as one text (places and messages).
std::string reasons(const Result &r) {
  std::string all;
  for (const auto &[at, why] : r.inconclusive)
    all += at.str() + ": " + why + "\n";
  for (const Finding &v : r.violations)
    all += "[" + v.kind + "] " + v.at.str() + ": " + v.message + " (" + v.hint + ")\n";
  return all;
}

/// What a fresh session finds for `text` (named `name`).
Result fresh(const std::string &name, const std::string &text, const Options &o) {
  Session alone;
  auto spec = alone.loadText(name, text, o);
  REQUIRE(spec);
  return alone.verify(*spec, o);
}
} // namespace

TEST_CASE("an edit of a loaded plan decides like the edited text loaded afresh", "[api][edit]") {
  const std::string path = kSpecs + "transformer/llama_tp2.mlir";
  const std::string text = readFile(path);
  const std::string sum = "%mlp_out_p over [\"tp\"] \"sum\"";
  Options layout;
  layout.engine = Options::Engine::Layout;
  Session session;
  auto spec = session.load(path, layout);
  REQUIRE(spec);
  Result first = session.verify(*spec, layout);
  REQUIRE(first.verdict == Verdict::Verified);

  auto undo = session.edit(*spec, {{"%mlp_out", "kind", "\"avg\""}});
  REQUIRE(undo);
  REQUIRE(undo->size() == 1);
  CHECK((*undo)[0].value == "%mlp_out");
  CHECK((*undo)[0].attribute == "kind");
  CHECK((*undo)[0].to == "\"sum\"");
  Result edited = session.verify(*spec, layout);
  Result byItself =
      fresh(path, replaced(text, sum, "%mlp_out_p over [\"tp\"] \"avg\""), layout);
  CHECK(edited.verdict == Verdict::Inconclusive);
  CHECK(edited.verdict == byItself.verdict);
  CHECK(reasons(edited) == reasons(byItself));
  // Only what the edit reaches was derived again.
  CHECK(edited.stats.reusedStates > 0);
  CHECK(edited.stats.reusedStates < edited.stats.planOps);
  // The report's snippet shows the plan that was verified.
  CHECK(edited.text.find("// edited: kind = \"avg\"") != std::string::npos);
  // The element engine decides the edited plan too, as it decides the text.
  Result element = session.verify(*spec);
  Result elementAlone = fresh(path, replaced(text, sum, "%mlp_out_p over [\"tp\"] \"avg\""), {});
  CHECK(element.verdict == Verdict::Violated);
  CHECK(reasons(element) == reasons(elementAlone));

  // The undo gives the plan back: verified, every state reused, the snippet as written.
  auto redo = session.edit(*spec, *undo);
  REQUIRE(redo);
  CHECK((*redo)[0].to == "\"avg\"");
  Result back = session.verify(*spec, layout);
  CHECK(back.verdict == Verdict::Verified);
  CHECK(back.stats.reusedStates == back.stats.planOps);
  CHECK(reasons(back) == reasons(first));

  // Edits at once, applied in order (a name with or without its `%`); the undo, in
  // reverse order, restores them all; and the text edited alike is decided alike.
  auto three = session.edit(*spec, {{"attn", "kind", "\"avg\""},
                                    {"%mlp_out", "kind", "\"max\""},
                                    {"%mlp_out", "kind", "\"avg\""}});
  INFO((three ? std::string() : three.error().message));
  REQUIRE(three);
  REQUIRE(three->size() == 3);
  CHECK((*three)[0].to == "\"max\"");
  CHECK((*three)[1].to == "\"sum\"");
  CHECK((*three)[2].value == "%attn");
  CHECK(reasons(session.verify(*spec, layout)) ==
        reasons(fresh(path,
                      replaced(replaced(text, sum, "%mlp_out_p over [\"tp\"] \"avg\""),
                               "%attn_p over [\"tp\"] \"sum\"", "%attn_p over [\"tp\"] \"avg\""),
                      layout)));
  REQUIRE(session.edit(*spec, *three));
  CHECK(session.verify(*spec, layout).verdict == Verdict::Verified);
}

TEST_CASE("edits that cannot be made are errors that change nothing", "[api][edit]") {
  const std::string path = kSpecs + "transformer/llama_tp2.mlir";
  Options layout;
  layout.engine = Options::Engine::Layout;
  Session session;
  auto spec = session.load(path, layout);
  REQUIRE(spec);
  auto refused = [&](const std::vector<PlanEdit> &edits, const std::string &message) {
    auto r = session.edit(*spec, edits);
    REQUIRE_FALSE(r);
    CHECK(r.error().at.file == path);
    INFO(r.error().message);
    CHECK(r.error().message.find(message) != std::string::npos);
    // Nothing changed: the plan still verifies, with every state reused.
    Result after = session.verify(*spec, layout);
    CHECK(after.verdict == Verdict::Verified);
  };
  refused({{"%nowhere", "kind", "\"avg\""}}, "edits[0]: no op of the plan function defines");
  refused({{"%mlp_out", "dist.stage", "1"}}, "has no attribute 'dist.stage' that an edit may "
                                             "change (it has: axes, kind)");
  refused({{"%mlp_out", "kind", "\"avg"}}, "cannot read the attribute");
  refused({{"%mlp_out", "kind", "\"avg\" junk"}}, "unexpected text after the attribute");
  // Of the right syntax but the wrong kind, or a value the op rejects: the op's verifier.
  refused({{"%mlp_out", "kind", "7 : i64"}}, "does not verify");
  refused({{"%mlp_out", "kind", "\"median\""}}, "does not verify");
  refused({{"%mlp_out", "axes", "[]"}}, "needs at least one mesh axis");
  refused({{"%mlp_out", "axes", "[\"pp\"]"}}, "which mesh @mesh does not have");
  // All or none: a good edit before a bad one is undone too.
  refused({{"%mlp_out", "kind", "\"avg\""}, {"%mlp_out", "axes", "[3]"}}, "edits[1]");
  CHECK(session.verify(*spec, layout).stats.reusedStates > 0);
}

TEST_CASE("in a plan that derives its backward pass, a collective's edit reaches its adjoint",
          "[api][edit]") {
  const std::string text = [] {
    auto t = generatePlan(PLANPROOF_SOURCE_DIR "/verify-specs/models/llama3-8b.json",
                          "dp=2,tp=2,sp,layers=1");
    REQUIRE(t);
    return *t;
  }();
  Options layout;
  layout.engine = Options::Engine::Layout;
  Session session;
  auto spec = session.loadText("gen.mlir", text, layout);
  REQUIRE(spec);
  Result first = session.verify(*spec, layout);
  REQUIRE(first.verdict == Verdict::Verified);
  // Every collective of the plan, forward (its derived adjoint edited alike) and
  // backward, in two ways each: the other reduction, and the other mesh axis (the
  // same group size, so the shapes still fit). Each edit is decided as the edited text
  // loaded afresh is, and its undo gives the plan back.
  struct Change {
    std::string value, attribute, to, from, into;
  };
  std::vector<Change> changes;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    size_t eq = line.find(" = dist.");
    if (eq == std::string::npos || line.find("over [") == std::string::npos)
      continue;
    std::string value = line.substr(line.find('%'), eq - line.find('%'));
    for (auto [from, into] : {std::pair<std::string, std::string>{"] \"sum\"", "] \"avg\""},
                              {"] \"avg\"", "] \"sum\""}})
      if (line.find(from) != std::string::npos)
        changes.push_back({value, "kind", into.substr(2), line, replaced(line, from, into)});
    for (auto [from, into] : {std::pair<std::string, std::string>{"over [\"tp\"]", "[\"dp\"]"},
                              {"over [\"dp\"]", "[\"tp\"]"}})
      if (line.find(from) != std::string::npos)
        changes.push_back({value, "axes", into, line, replaced(line, from, "over " + into)});
  }
  REQUIRE(changes.size() > 20);
  int forward = 0;
  for (const Change &c : changes) {
    INFO(c.value << " " << c.attribute << " = " << c.to);
    auto undo = session.edit(*spec, {{c.value, c.attribute, c.to}});
    REQUIRE(undo);
    Result edited = session.verify(*spec, layout);
    Result byItself = fresh("gen.mlir", replaced(text, c.from, c.into), layout);
    CHECK(edited.verdict == byItself.verdict);
    CHECK(reasons(edited) == reasons(byItself));
    forward += edited.stats.reusedStates < edited.stats.planOps - 1; // an adjoint re-derived too
    REQUIRE(session.edit(*spec, *undo));
    Result back = session.verify(*spec, layout);
    CHECK(back.verdict == Verdict::Verified);
    CHECK(reasons(back) == reasons(first));
  }
  CHECK(forward > 5);
  // The element engine on an edited forward collective: as on its text. (Without fix
  // hints: their re-verifications would double the run, and what is compared here is
  // the verdict and the violations' places and messages.)
  const std::string rs = "%l0_attn_3d over [\"tp\"] dim 1 \"sum\"";
  auto undo = session.edit(*spec, {{"%l0_attn_rs", "axes", "[\"dp\"]"}});
  REQUIRE(undo);
  Options element0;
  element0.checkFixes = false;
  Result element = session.verify(*spec, element0);
  Result elementAlone =
      fresh("gen.mlir", replaced(text, rs, "%l0_attn_3d over [\"dp\"] dim 1 \"sum\""), element0);
  CHECK(element.verdict == Verdict::Violated);
  CHECK(reasons(element) == reasons(elementAlone));
  REQUIRE(session.edit(*spec, *undo));

  // What a derivative rule read beyond a collective's own attributes cannot change in
  // place, nor a reduction the derivation has no rule for, nor an op it made.
  auto rule = session.edit(*spec, {{"%l0_attn_rs", "kind", "\"avg\""}});
  REQUIRE_FALSE(rule);
  CHECK(rule.error().message.find("is differentiated by the plan's derivation") !=
        std::string::npos);
  auto max = session.edit(*spec, {{"%tokens", "kind", "\"max\""}});
  REQUIRE(max); // %tokens: no rule read it (the loss's scale, no parameter's path)
  REQUIRE(session.edit(*spec, *max));
  const std::string dense = "%l0_q = ref.matmul";
  REQUIRE(text.find(dense) != std::string::npos);
  auto matmul = session.edit(*spec, {{"%l0_q", "lhs_dim", "0 : i64"}});
  REQUIRE_FALSE(matmul);
  CHECK(matmul.error().message.find("only a collective's axes, dimensions or reduction") !=
        std::string::npos);
  CHECK(session.verify(*spec, layout).verdict == Verdict::Verified);
}

TEST_CASE("an edit of a pipelined plan is analyzed as its text is", "[api][edit]") {
  const std::string path = kSpecs + "pipeline/1f1b_dp2_pp2_mb2.mlir";
  const std::string text = readFile(path);
  Options layout;
  layout.engine = Options::Engine::Layout;
  Session session;
  auto spec = session.load(path, layout);
  REQUIRE(spec);
  REQUIRE(session.verify(*spec, layout).verdict == Verdict::Verified);
  // A collective of stage 0 over the pipeline axis too: a structural problem the
  // pipeline analysis finds, reported as the text's is.
  auto undo = session.edit(*spec, {{"%dw0", "axes", "[\"dp\", \"pp\"]"}});
  REQUIRE(undo);
  Result edited = session.verify(*spec, layout);
  Result byItself = fresh(path,
                          replaced(text, "%acc0_1 over [\"dp\"] \"avg\"",
                                   "%acc0_1 over [\"dp\", \"pp\"] \"avg\""),
                          layout);
  CHECK(edited.verdict == Verdict::Violated);
  CHECK(reasons(edited) == reasons(byItself));
  REQUIRE(session.edit(*spec, *undo));
  CHECK(session.verify(*spec, layout).verdict == Verdict::Verified);
}

TEST_CASE("an edit of a JSON spec names its op by the JSON result's name", "[api][edit]") {
  const std::string path = kSpecs + "json/mlp_tp2.json";
  std::string text = readFile(path);
  Options layout;
  layout.engine = Options::Engine::Layout;
  Session session;
  auto spec = session.load(path, layout);
  REQUIRE(spec);
  REQUIRE(session.verify(*spec, layout).verdict == Verdict::Verified);
  // `y_pre`, the forward all_reduce (its first "kind" in the file), averaged.
  auto undo = session.edit(*spec, {{"y_pre", "kind", "\"avg\""}});
  REQUIRE(undo);
  size_t at = text.find("\"kind\": \"sum\"");
  REQUIRE(at != std::string::npos);
  text.replace(at, 13, "\"kind\": \"avg\"");
  Result edited = session.verify(*spec, layout);
  CHECK(edited.verdict == Verdict::Inconclusive);
  CHECK(reasons(edited) == reasons(fresh(path, text, layout)));
  Result element = session.verify(*spec);
  CHECK(element.verdict == Verdict::Violated);
  CHECK(reasons(element) == reasons(fresh(path, text, {})));
  REQUIRE(session.edit(*spec, *undo));
  CHECK(session.verify(*spec, layout).verdict == Verdict::Verified);
}
