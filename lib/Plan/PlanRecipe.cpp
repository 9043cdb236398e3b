//===- PlanRecipe.cpp - generated specs: a configuration and edits ----------===//
//
// A `.plan` file is a spec written as the recipe that makes it: a model
// configuration, `planproof plan`'s --parallel text, and edits of the generated text
// (a seeded bug), with the expectation the catalogue checks. Production-sized plans are
// 1-30 MiB of MLIR; their recipes are a few lines, and the bug they seed is the edit
// (docs/plan.md, "Generated specs").
//
//===----------------------------------------------------------------------===//
#include "Plan/PlanGen.h"

#include "Support/Diagnostic.h"
#include "Support/Input.h"
#include "Support/Limits.h"

#include <algorithm>
#include <filesystem>

#include <nlohmann/json.hpp>

namespace planproof::plangen {

namespace {

/// Occurrences of `s` in `text`.
size_t count(const std::string &text, const std::string &s) {
  size_t n = 0;
  for (size_t at = text.find(s); !s.empty() && at != std::string::npos;
       at = text.find(s, at + s.size()))
    ++n;
  return n;
}

/// The [begin, end) of the one line of `text` holding `s` (end past its newline).
std::pair<size_t, size_t> lineOf(const std::string &text, size_t at) {
  size_t begin = text.rfind('\n', at);
  begin = begin == std::string::npos ? 0 : begin + 1;
  size_t end = text.find('\n', at);
  end = end == std::string::npos ? text.size() : end + 1;
  return {begin, end};
}

bool stringField(const nlohmann::json &j, const char *key, std::string &out) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_string())
    return false;
  out = it->get<std::string>();
  return true;
}

/// Applies edit `e` (number `i`) to `text`; false with why.
bool applyEdit(const nlohmann::json &e, std::string &text, std::string &why) {
  std::string from, to, before;
  if (!e.is_object()) {
    why = "must be an object";
    return false;
  }
  if (stringField(e, "replace", from) || stringField(e, "replace_all", from)) {
    bool all = e.contains("replace_all");
    if (!stringField(e, "with", to)) {
      why = "needs \"with\", a string";
      return false;
    }
    size_t n = count(text, from);
    if (!from.empty() && to.size() > from.size() &&
        (int64_t)(text.size() + n * (to.size() - from.size())) > kMaxInputBytes) {
      why = "the edited plan would be larger than " + std::to_string(kMaxInputBytes >> 20) +
            " MiB (the input limit)";
      return false;
    }
    if (from.empty() || (all ? n == 0 : n != 1)) {
      why = std::string(all ? "replace_all" : "replace") + ": the text occurs " +
            std::to_string(n) + " times in the generated plan (" +
            (all ? "needs at least one" : "needs exactly one") + ")";
      return false;
    }
    for (size_t at = text.find(from); at != std::string::npos;
         at = all ? text.find(from, at + to.size()) : std::string::npos)
      text.replace(at, from.size(), to);
    return true;
  }
  if (stringField(e, "move_line", from)) {
    if (!stringField(e, "before", before)) {
      why = "needs \"before\", a string";
      return false;
    }
    if (count(text, from) != 1 || count(text, before) != 1) {
      why = "move_line: the line to move and the line before which it goes must each occur "
            "exactly once in the generated plan";
      return false;
    }
    auto [b, e2] = lineOf(text, text.find(from));
    std::string line = text.substr(b, e2 - b);
    text.erase(b, e2 - b);
    size_t target = lineOf(text, text.find(before)).first;
    text.insert(target, line);
    return true;
  }
  why = "an edit is {\"replace\": .., \"with\": ..}, {\"replace_all\": .., \"with\": ..} or "
        "{\"move_line\": .., \"before\": ..}";
  return false;
}

} // namespace

bool loadRecipe(const std::string &path, Recipe &r, Diagnostics &diags) {
  std::string text;
  if (!readInputFile(path, text, diags))
    return false;
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  auto fail = [&](const std::string &where, const std::string &why) {
    return diags.error({path}, (where.empty() ? "" : where + ": ") + why);
  };
  if (j.is_discarded() || !j.is_object())
    return fail("", "a generated spec (.plan) is a JSON object");
  std::string modelPath, parallel;
  if (!stringField(j, "model", modelPath))
    return fail("model", "missing, or not a string (a model configuration, relative to this file)");
  if (!stringField(j, "parallel", parallel))
    return fail("parallel", "missing, or not a string (planproof plan's --parallel)");
  namespace fs = std::filesystem;
  fs::path model = fs::path(path).parent_path() / modelPath;
  Model m;
  if (!readModel(model.string(), m, diags))
    return false;
  Parallel p;
  std::string err;
  if (!parseParallel(parallel, p, err))
    return fail("parallel", err);
  if (!generate(m, p, r.mlir, err))
    return fail("parallel", "cannot generate this configuration: " + err);
  if ((int64_t)r.mlir.size() > kMaxInputBytes)
    return fail("parallel", "the generated plan is larger than " +
                                std::to_string(kMaxInputBytes >> 20) + " MiB (the input limit)");
  if (auto edits = j.find("edits"); edits != j.end()) {
    if (!edits->is_array())
      return fail("edits", "must be an array");
    for (size_t i = 0; i < edits->size(); ++i)
      if (!applyEdit((*edits)[i], r.mlir, err))
        return fail("edits[" + std::to_string(i) + "]", err);
  }
  auto expect = j.find("expect");
  if (expect == j.end())
    return true;
  if (!expect->is_object() || !stringField(*expect, "verdict", r.verdict))
    return fail("expect", "an object with \"verdict\" (verified, violated or inconclusive)");
  if (r.verdict != "verified" && r.verdict != "violated" && r.verdict != "inconclusive")
    return fail("expect.verdict", "verified, violated or inconclusive, not '" + r.verdict + "'");
  r.expected = true;
  stringField(*expect, "kind", r.kind);
  stringField(*expect, "at", r.at);
  if (stringField(*expect, "engine", r.engine) && r.engine != "element" &&
      r.engine != "layout" && r.engine != "auto")
    return fail("expect.engine", "element, layout or auto, not '" + r.engine + "'");
  if (r.verdict == "violated" && r.kind.empty())
    return fail("expect.kind", "a violation's kind is needed");
  if (!r.at.empty()) {
    // The line that defines `at` in the generated plan: where an inconclusive
    // verdict's first place must be.
    std::string def = r.at + " = ";
    size_t at = r.mlir.find(def);
    if (at == std::string::npos || count(r.mlir, def) != 1)
      return fail("expect.at", "'" + r.at + "' is not defined exactly once in the generated plan");
    r.atLine = 1 + (int)std::count(r.mlir.begin(), r.mlir.begin() + at, '\n');
  }
  return true;
}

} // namespace planproof::plangen
