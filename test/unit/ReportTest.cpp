//===- ReportTest.cpp - lib/Report: text, JSON and SARIF reports ------------===//
#include "Engine/Verifier.h"
#include "Import/LoadSpec.h"
#include "Report/Report.h"
#include "Spec/Spec.h"

#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>
#include <string>

using namespace planproof;
using Catch::Matchers::Contains;

namespace {
struct Loaded {
  mlir::MLIRContext ctx;
  Spec spec;
  VerifyResult result;
  std::string path, text;
  explicit Loaded(const std::string &relative) {
    registerDialects(ctx);
    path = std::string(PLANPROOF_SOURCE_DIR "/verify-specs/") + relative;
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    text = s.str();
    Diagnostics errors;
    INFO(errors.str());
    REQUIRE(loadSpec(ctx, path, spec, errors));
    VerifyOptions options;
    options.checkFixes = false;
    result = verifySpec(spec, options);
  }
  /// The 1-based line of the first line of the spec that defines `name` (`%y_b =`).
  int lineDefining(const std::string &name) const {
    std::istringstream in(text);
    std::string line;
    for (int n = 1; std::getline(in, line); ++n)
      if (line.find(name + " = ") != std::string::npos)
        return n;
    return -1;
  }
};
} // namespace

TEST_CASE("a violation is reported at the op that is wrong, in all three formats", "[report]") {
  // The seeded bug: the bias is added to a partial sum before its all-reduce.
  Loaded l("mlp/mlp_tp2_bias_before_allreduce.mlir");
  REQUIRE(l.result.verdict == Verdict::Violated);
  int line = l.lineDefining("%y_b");
  REQUIRE(line > 0);

  std::string text = renderText(l.spec, l.result);
  CHECK_THAT(text, Contains(l.path + ":" + std::to_string(line) + ":"));
  CHECK_THAT(text, Contains("error: [reduction] first wrong value is `%y_b`"));
  CHECK_THAT(text, Contains("note: counterexample:"));
  CHECK_THAT(text, Contains(": violated (1 violation)"));

  nlohmann::json j = nlohmann::json::parse(renderJson(l.spec, l.result));
  CHECK(j["verdict"] == "violated");
  REQUIRE(j["violations"].size() == 1);
  const nlohmann::json &v = j["violations"][0];
  CHECK(v["kind"] == "reduction");
  CHECK(v["op"] == "%y_b");
  CHECK(v["location"]["line"] == line);
  CHECK(v.contains("counterexample"));

  nlohmann::json sarif = nlohmann::json::parse(renderSarif(l.spec, l.result));
  CHECK(sarif["version"] == "2.1.0");
  const nlohmann::json &r = sarif["runs"][0]["results"][0];
  CHECK(r["ruleId"] == "planproof/reduction");
  CHECK(r["level"] == "error");
  CHECK(r["locations"][0]["physicalLocation"]["region"]["startLine"] == line);
}

TEST_CASE("a proved plan is reported verified, with nothing else to say", "[report]") {
  Loaded l("mlp/mlp_tp2.mlir");
  REQUIRE(l.result.verdict == Verdict::Verified);
  CHECK_THAT(renderText(l.spec, l.result), Contains(": verified --"));
  CHECK_THAT(renderText(l.spec, l.result), !Contains("error:"));
  nlohmann::json j = nlohmann::json::parse(renderJson(l.spec, l.result));
  CHECK(j["verdict"] == "verified");
  CHECK(j["violations"].empty());
  nlohmann::json sarif = nlohmann::json::parse(renderSarif(l.spec, l.result));
  CHECK(sarif["runs"][0]["results"].empty());
}

TEST_CASE("bad input is one machine-readable error object", "[report]") {
  Diagnostics errors;
  errors.error({"spec.json", 3, 7}, "/ops/2/kind: unknown op 'ref.frobnicate'");
  errors.note("note: known ops are listed in docs/json-format.md\n  excerpt\n");
  nlohmann::json j = nlohmann::json::parse(renderErrorJson("spec.json", errors));
  CHECK(j["verdict"] == "error");
  REQUIRE(j["errors"].size() == 1);
  CHECK(j["errors"][0]["message"] == "/ops/2/kind: unknown op 'ref.frobnicate'\n"
                                     "note: known ops are listed in docs/json-format.md");
  CHECK(j["errors"][0]["location"]["line"] == 3);
  CHECK(j["errors"][0]["location"]["col"] == 7);
  // No located error at all is still one error object, at the spec.
  nlohmann::json none = nlohmann::json::parse(renderErrorJson("spec.json", Diagnostics()));
  REQUIRE(none["errors"].size() == 1);
  CHECK(none["errors"][0]["location"]["file"] == "spec.json");
  nlohmann::json sarif = nlohmann::json::parse(renderErrorSarif("spec.json", errors));
  CHECK(sarif["runs"][0]["invocations"][0]["executionSuccessful"] == false);
}

TEST_CASE("names from a spec cannot drive the terminal", "[report]") {
  CHECK(printable("a\x1b[2Jb") == "a\\x1b[2Jb");
  CHECK(printable("line\nnext\tcol") == "line\nnext\tcol");
  CHECK(printable("line\nnext", /*keepNewlines=*/false) == "line\\x0anext");
}

TEST_CASE("a long source line is cut to a window that keeps the caret on its column",
          "[report]") {
  std::string line;
  for (int i = 0; i < 5000; ++i)
    line += char('a' + i % 26) + std::string(i % 7 == 0 ? " " : "");
  unsigned col = 3000;
  char at = line[col - 1];
  std::string window = snippetWindow(line, col, 160);
  CHECK(window.size() <= 200);
  REQUIRE(col >= 1);
  REQUIRE(col <= window.size());
  CHECK(window[col - 1] == at);
  unsigned near = 5;
  CHECK(snippetWindow("short line", near) == "short line");
  CHECK(near == 5);
}
