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

/// Reads edit JSON `e` into `out`; false with why.
bool readEdit(const nlohmann::json &e, Edit &out, std::string &why) {
  if (!e.is_object()) {
    why = "must be an object";
    return false;
  }
  if (stringField(e, "replace", out.from) || stringField(e, "replace_all", out.from)) {
    out.kind = e.contains("replace_all") ? Edit::ReplaceAll : Edit::Replace;
    if (!stringField(e, "with", out.to)) {
      why = "needs \"with\", a string";
      return false;
    }
    return true;
  }
  if (stringField(e, "move_line", out.from)) {
    out.kind = Edit::MoveLine;
    if (!stringField(e, "before", out.to)) {
      why = "needs \"before\", a string";
      return false;
    }
    return true;
  }
  why = "an edit is {\"replace\": .., \"with\": ..}, {\"replace_all\": .., \"with\": ..} or "
        "{\"move_line\": .., \"before\": ..}";
  return false;
}

} // namespace

bool applyEdit(const Edit &e, std::string &text, std::string &why) {
  const std::string &from = e.from, &to = e.to;
  if (e.kind != Edit::MoveLine) {
    bool all = e.kind == Edit::ReplaceAll;
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
  if (count(text, from) != 1 || count(text, to) != 1) {
    why = "move_line: the line to move and the line before which it goes must each occur "
          "exactly once in the generated plan";
    return false;
  }
  auto [b, e2] = lineOf(text, text.find(from));
  std::string line = text.substr(b, e2 - b);
  text.erase(b, e2 - b);
  size_t target = lineOf(text, text.find(to)).first;
  text.insert(target, line);
  return true;
}

bool readRecipeFile(const std::string &path, RecipeFile &r, Diagnostics &diags) {
  std::string text;
  if (!readInputFile(path, text, diags))
    return false;
  r.path = path;
  if (!checkNesting(path, text, Syntax::Json, diags) || !r.doc.parse(path, text, diags))
    return false;
  const nlohmann::json &j = r.doc.root;
  // `where` is a JSON pointer: every error names the field's line, column and path.
  auto fail = [&](const std::string &where, const std::string &why) {
    return r.doc.error(diags, where, why);
  };
  if (!j.is_object())
    return fail("", "a generated spec (.plan) is a JSON object");
  stringField(j, "description", r.description);
  if (!stringField(j, "model", r.modelRef))
    return fail("/model", "missing, or not a string (a model configuration, relative to this file)");
  if (!stringField(j, "parallel", r.parallelText))
    return fail("/parallel", "missing, or not a string (planproof plan's --parallel)");
  namespace fs = std::filesystem;
  r.modelPath = (fs::path(path).parent_path() / r.modelRef).string();
  Diagnostics modelErrors;
  if (!readModel(r.modelPath, r.model, modelErrors)) {
    // Placed at the recipe's field first, then the model file's own errors.
    fail("/model", "the model configuration '" + r.modelRef + "' cannot be used: " +
                       (modelErrors.empty() ? std::string("it does not load")
                                            : modelErrors.list().front().message));
    diags.append(modelErrors);
    return false;
  }
  std::string err;
  if (!parseParallel(r.parallelText, r.parallel, err))
    return fail("/parallel", err);
  if (auto edits = j.find("edits"); edits != j.end()) {
    if (!edits->is_array())
      return fail("/edits", "must be an array");
    for (size_t i = 0; i < edits->size(); ++i) {
      r.edits.emplace_back();
      if (!readEdit((*edits)[i], r.edits.back(), err))
        return fail("/edits/" + std::to_string(i), err);
    }
  }
  auto expect = j.find("expect");
  if (expect == j.end())
    return true;
  Recipe &x = r.expect;
  if (!expect->is_object() || !stringField(*expect, "verdict", x.verdict))
    return fail("/expect", "an object with \"verdict\" (verified, violated or inconclusive)");
  if (x.verdict != "verified" && x.verdict != "violated" && x.verdict != "inconclusive")
    return fail("/expect/verdict", "verified, violated or inconclusive, not '" + x.verdict + "'");
  x.expected = true;
  stringField(*expect, "kind", x.kind);
  stringField(*expect, "at", x.at);
  if (stringField(*expect, "engine", x.engine) && x.engine != "element" &&
      x.engine != "layout" && x.engine != "auto")
    return fail("/expect/engine", "element, layout or auto, not '" + x.engine + "'");
  if (x.verdict == "violated" && x.kind.empty())
    return fail("/expect/kind", "a violation's kind is needed");
  return true;
}

bool loadRecipe(const std::string &path, Recipe &r, Diagnostics &diags) {
  RecipeFile file;
  return readRecipeFile(path, file, diags) && buildRecipe(file, r, diags);
}

bool buildRecipe(const RecipeFile &file, Recipe &r, Diagnostics &diags) {
  // `where` is a JSON pointer into the recipe (file.doc; a recipe built in code has
  // no places: its errors name the file).
  auto fail = [&](const std::string &where, const std::string &why) {
    if (file.doc.path.empty())
      return diags.error({file.path}, readableJsonPath(where) + ": " + why);
    return file.doc.error(diags, where, why);
  };
  std::string err;
  if (!generate(file.model, file.parallel, r.mlir, err))
    return fail("/parallel", "cannot generate this configuration: " + err);
  if ((int64_t)r.mlir.size() > kMaxInputBytes)
    return fail("/parallel", "the generated plan is larger than " +
                                std::to_string(kMaxInputBytes >> 20) + " MiB (the input limit)");
  for (size_t i = 0; i < file.edits.size(); ++i)
    if (!applyEdit(file.edits[i], r.mlir, err))
      return fail("/edits/" + std::to_string(i), err);
  std::string text = std::move(r.mlir);
  r = file.expect;
  r.mlir = std::move(text);
  if (!r.at.empty()) {
    // The line that defines `at` in the generated plan: where an inconclusive
    // verdict's first place must be. A value inside a call is named after the call
    // (`%l0_out/attn_ar`, docs/calls.md): its line is the callee's.
    size_t slash = r.at.rfind('/');
    std::string def = (slash == std::string::npos ? r.at : "%" + r.at.substr(slash + 1)) + " = ";
    size_t at = r.mlir.find(def);
    if (at == std::string::npos || count(r.mlir, def) != 1)
      return fail("/expect/at", "'" + r.at + "' is not defined exactly once in the generated plan");
    r.atLine = 1 + (int)std::count(r.mlir.begin(), r.mlir.begin() + at, '\n');
  }
  return true;
}

} // namespace planproof::plangen
