//===- CmdShrink.cpp - planproof shrink: a production bug at small degrees -===//
//
// planproof shrink FILE.plan [-o SMALL.plan]: a recipe (a generated plan and its
// edits) whose bug the layout engine locates at production degrees and sizes but
// cannot show, looked for where the element engine can: the recipe's configuration at
// reduced sizes with smaller degrees, layers and microbatches, smallest first
// (lib/Plan/PlanShrink.cpp), its edits carried over. A configuration reproduces the
// bug when all of these hold:
//
//   - the edits carry over (each finds its op in the smaller plan),
//   - the smaller plan without the edits verifies (so the difference is the edits'),
//   - with them, the element engine reports a violation,
//   - its counterexample, run concretely, shows the difference it claims (and the
//     replay of the plan on drawn inputs is reported beside).
//
// The first that does is written out as a recipe of its own (expecting the violation,
// engine element) and its report printed. The production plan's verdict is not
// changed: the smaller plan is another plan, and a bug it shows is evidence about the
// production plan, not a proof (docs/plan.md, "Shrinking a recipe").
//
// Exit status: 1 reproduced, 3 not reproduced (every configuration tried, or the time
// limit), 2 bad input.
//
//===----------------------------------------------------------------------===//
#include "Cli.h"

#include "Import/LoadSpec.h"
#include "Plan/PlanGen.h"
#include "Replay/Replay.h"
#include "Report/Report.h"
#include "Spec/Spec.h"
#include "Support/Deadline.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <unistd.h>
#include <iostream>

#include <nlohmann/json.hpp>

using namespace planproof;
using namespace planproof::cli;
namespace fs = std::filesystem;

namespace {

/// One configuration tried and what came of it.
struct Tried {
  std::string parallel, outcome;
};

/// A reproduction: the configuration, its edits, the verdicts and checks.
struct Found {
  plangen::Parallel parallel;
  plangen::Translation tr;
  std::string name; // the smaller spec's name in its report
  Spec spec;
  VerifyResult result;
  int confirmed = 0, counterexamples = 0;
  std::string replay;
  bool schedule = false; // only schedule violations (the exact check's wait cycle)
};

nlohmann::ordered_json editJson(const plangen::Edit &e) {
  switch (e.kind) {
  case plangen::Edit::Replace: return {{"replace", e.from}, {"with", e.to}};
  case plangen::Edit::ReplaceAll: return {{"replace_all", e.from}, {"with", e.to}};
  case plangen::Edit::MoveLine: return {{"move_line", e.from}, {"before", e.to}};
  }
  return {};
}

/// The smaller configuration's recipe: the model relative to where it is written.
nlohmann::ordered_json recipeJson(const plangen::RecipeFile &big, const Found &f,
                                  const std::string &out) {
  std::error_code ec;
  fs::path dir = out.empty() ? fs::current_path(ec) : fs::absolute(out, ec).parent_path();
  fs::path model = fs::relative(fs::absolute(big.modelPath, ec), dir, ec);
  if (ec || model.empty())
    model = fs::absolute(big.modelPath, ec);
  nlohmann::ordered_json edits = nlohmann::ordered_json::array();
  for (const plangen::Edit &e : f.tr.edits)
    edits.push_back(editJson(e));
  const Violation &v = f.result.violations.front();
  return {{"description", "The edits of " + fs::path(big.path).filename().string() + " (" +
                              big.parallelText +
                              ") carried over by planproof shrink to a smaller configuration, "
                              "where the element engine shows the violation."},
          {"shrunk_from", {{"recipe", big.path}, {"parallel", big.parallelText},
                           {"description", big.description}}},
          {"model", model.string()},
          {"parallel", plangen::printParallel(f.parallel)},
          {"edits", edits},
          {"expect", {{"verdict", "violated"}, {"kind", v.kind}, {"at", v.at}, {"engine", "element"}}}};
}

/// A verdict in a few words: inconclusive with its first reason.
std::string verdictText(const VerifyResult &r) {
  if (r.verdict == Verdict::Verified)
    return "verified";
  if (r.verdict == Verdict::Violated)
    return "violated";
  std::string why = r.inconclusiveReasons.empty() ? "" : r.inconclusiveReasons.front().second;
  if (why.size() > 160)
    why = why.substr(0, 157) + "...";
  return "inconclusive" + (why.empty() ? "" : " (" + why + ")");
}

bool loadText(mlir::MLIRContext &ctx, const std::string &name, const std::string &text,
              Spec &spec, std::string &why) {
  Diagnostics diags;
  bool ok;
  try {
    ok = loadSpecText(ctx, name, text, spec, diags);
  } catch (const std::exception &e) {
    ok = diags.error({name}, e.what());
  }
  if (!ok)
    why = "the smaller plan does not load: " + diags.str();
  return ok;
}

/// Tries one configuration; true when it reproduces the bug (into `f`), else the
/// outcome in `why`.
bool tryConfiguration(const plangen::RecipeFile &big, const plangen::Parallel &p,
                      const Options &o, mlir::MLIRContext &ctx, Found &f, std::string &why) {
  std::string text;
  if (!plangen::generate(big.model, p, text, why))
    return (why = "not generated: " + why, false);
  if (!plangen::translateEdits(big.edits, big.expect.at, text, f.tr, why))
    return (why = "the edits do not carry over: " + why, false);
  Spec plain;
  if (!loadText(ctx, f.name, text, plain, why))
    return false;
  VerifyOptions vo = o.verify;
  vo.checkFixes = false;
  vo.proofOnly = true;
  VerifyResult r0 = verifySpec(plain, vo);
  if (r0.verdict != Verdict::Verified)
    return (why = "without the edits: " + verdictText(r0), false);
  if (!loadText(ctx, f.name, f.tr.text, f.spec, why))
    return false;
  f.result = verifySpec(f.spec, o.verify);
  if (f.result.verdict != Verdict::Violated)
    return (why = "with the edits: " + verdictText(f.result), false);
  // A pipeline schedule's violation (unmatched messages, a deadlock) is found by the
  // exact schedule check at the plan's degrees: its wait cycle is its witness, and a
  // plan that deadlocks cannot be replayed.
  f.schedule = std::all_of(f.result.violations.begin(), f.result.violations.end(),
                           [](const Violation &v) { return v.kind == "schedule"; });
  if (f.schedule) {
    f.parallel = p;
    return true;
  }
  for (const Violation &v : f.result.violations) {
    if (!v.hasCounterexample)
      continue;
    ++f.counterexamples;
    CounterexampleCheck c = checkCounterexample(f.spec, v.counterexample);
    f.confirmed += c.status == "confirmed";
    if (c.status == "refuted")
      return (why = "violated, but its counterexample is refuted when run: " + c.detail, false);
  }
  ReplayOptions ro;
  ro.localize = false;
  ro.deadline = o.verify.deadline;
  ReplayResult rr = replaySpec(f.spec, ro);
  f.replay = !rr.ran ? "could not run (" + rr.failure + ")"
             : rr.diverged() ? "diverges" : "is within tolerance";
  if (f.confirmed == 0 && !rr.diverged())
    return (why = "violated, but neither a counterexample nor the replay shows it", false);
  f.parallel = p;
  return true;
}

/// Whether the violation's value is the counterpart `at`: the same name, or, inside a
/// call, the callee's value (`%l0_out/attn_ar` for `%attn_ar`, docs/calls.md).
bool samePlace(const std::string &violationAt, const std::string &at) {
  size_t slash = violationAt.rfind('/');
  return violationAt == at ||
         (slash != std::string::npos && "%" + violationAt.substr(slash + 1) == at);
}

void printText(const plangen::RecipeFile &big, const std::vector<Tried> &tried,
               const Found *f, const std::string &out) {
  std::cout << big.path << ": shrinking " << big.parallelText << " ("
            << tried.size() << " smaller configuration" << (tried.size() == 1 ? "" : "s")
            << " tried, smallest first)\n";
  for (const Tried &t : tried)
    std::cout << "  " << t.parallel << ": " << t.outcome << "\n";
  if (!f) {
    std::cout << big.path << ": not reproduced at a smaller configuration\n";
    return;
  }
  std::cout << big.path << ": reproduced at " << plangen::printParallel(f->parallel)
            << " (reduced sizes)\n";
  for (const plangen::Edit &e : f->tr.edits)
    std::cout << "  edit: " << editJson(e).dump() << "\n";
  if (!big.expect.at.empty())
    std::cout << "  the counterpart of " << big.expect.at << " is " << f->tr.at
              << (samePlace(f->result.violations.front().at, f->tr.at)
                      ? ", where the violation is reported"
                      : "; the violation is reported at " + f->result.violations.front().at)
              << "\n";
  if (f->schedule)
    std::cout << "  without the edits the plan is verified; with them the exact schedule check "
                 "finds the violation (its wait cycle is the witness; nothing to replay)\n";
  else
    std::cout << "  without the edits the plan is verified; counterexamples confirmed by "
                 "running them: "
              << f->confirmed << " of " << f->counterexamples << "; the replay " << f->replay
              << "\n";
  std::cout << renderText(f->spec, f->result);
  if (!out.empty())
    std::cout << "wrote " << out << " (planproof plan --recipe " << out
              << " writes the plan these lines refer to)\n";
}

void printJson(const plangen::RecipeFile &big, const std::vector<Tried> &tried,
               const Found *f, const std::string &out) {
  nlohmann::ordered_json j = {{"recipe", big.path}, {"parallel", big.parallelText},
                              {"reproduced", f != nullptr}};
  nlohmann::ordered_json t = nlohmann::ordered_json::array();
  for (const Tried &x : tried)
    t.push_back({{"parallel", x.parallel}, {"outcome", x.outcome}});
  j["tried"] = t;
  if (f) {
    j["shrunk"] = recipeJson(big, *f, out);
    j["at_counterpart"] = f->tr.at;
    j["counterexamples_confirmed"] = f->confirmed;
    j["counterexamples"] = f->counterexamples;
    j["replay"] = f->schedule ? "not run (a schedule violation)" : f->replay;
    j["schedule"] = f->schedule;
    j["report"] = nlohmann::ordered_json::parse(renderJson(f->spec, f->result), nullptr, false);
  }
  std::cout << jsonEscapeHidden(j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace)) << "\n";
}

} // namespace

int planproof::cli::cmdShrink(std::vector<std::string> args) {
  Options o;
  std::string err, out;
  size_t tries = 24;
  if (!parseCommon(args, o, err))
    return usage(err);
  if (o.engineGiven && o.engine != "element")
    return usage("shrink runs the element engine (no --engine)");
  o.engine = "element";
  if (o.format != "text" && o.format != "json")
    return usage("--format for shrink is text or json");
  std::vector<std::string> positional;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "-o" || args[i] == "--tries") {
      if (i + 1 >= args.size())
        return usage(args[i] + " needs a value");
      const std::string &v = args[++i];
      if (args[i - 1] == "-o") {
        out = v;
        continue;
      }
      char *end = nullptr;
      unsigned long n = std::strtoul(v.c_str(), &end, 10);
      if (v.empty() || *end || n < 1 || n > 1000)
        return usage("--tries needs a number between 1 and 1000");
      tries = n;
    } else if (args[i].rfind("-", 0) == 0) {
      return usage("unknown option '" + args[i] + "'");
    } else {
      positional.push_back(args[i]);
    }
  }
  if (positional.size() != 1)
    return usage("shrink needs one recipe (FILE.plan)");
  const std::string &path = positional[0];
  // Where the result goes is checked before the work: a folder, or a file in a folder
  // that is not there, is a usage error now rather than after minutes of shrinking.
  if (!out.empty()) {
    std::error_code ec;
    fs::path target(out);
    fs::path folder = target.has_parent_path() ? target.parent_path() : fs::path(".");
    if (fs::is_directory(target, ec))
      return usage("-o '" + out + "' is a folder; name the recipe file to write");
    if (!fs::is_directory(folder, ec) || ::access(folder.c_str(), W_OK) != 0)
      return usage("-o '" + out + "': the folder '" + folder.string() +
                   "' does not exist or cannot be written");
  }
  plangen::RecipeFile big;
  Diagnostics errors;
  if (!plangen::readRecipeFile(path, big, errors))
    return badInput(path, errors, o.format);
  if (big.edits.empty()) {
    errors.error({path}, "edits: the recipe has none, so there is no bug to shrink");
    return badInput(path, errors, o.format);
  }
  {
    // The recipe must hold at its own configuration: its edits apply to the plan it
    // generates (the production plan, which is then let go).
    plangen::Recipe whole;
    if (!plangen::buildRecipe(big, whole, errors))
      return badInput(path, errors, o.format);
  }
  o.verify.deadline = Deadline(o.timeLimit);
  Watchdog watchdog(o.timeLimit, o.format, path);
  std::vector<Tried> tried;
  std::unique_ptr<Found> found;
  for (const plangen::Parallel &p : plangen::smallerConfigurations(big.model, big.parallel, tries)) {
    if (o.verify.deadline.expired()) {
      tried.push_back({"(the rest)", "not tried: the time limit was spent"});
      break;
    }
    auto ctx = std::make_unique<mlir::MLIRContext>();
    registerDialects(*ctx);
    auto f = std::make_unique<Found>();
    f->name = out.empty() ? fs::path(path).stem().string() + ".shrunk.plan" : out;
    std::string why;
    bool ok = false;
    try {
      ok = tryConfiguration(big, p, o, *ctx, *f, why);
    } catch (const TimeLimit &) {
      why = "the time limit was spent";
    }
    tried.push_back({plangen::printParallel(p), ok ? "reproduced" : why});
    if (ok) {
      found = std::move(f);
      ctx.release(); // the spec lives in it; the process ends soon after
      break;
    }
  }
  if (found && !out.empty()) {
    // Flushed and closed before it is called written: a full disk fails there.
    std::ofstream file(out);
    file << recipeJson(big, *found, out).dump(2, ' ', false, nlohmann::json::error_handler_t::replace)
         << "\n";
    file.close();
    if (!file)
      return usage("cannot write '" + out + "'");
  }
  if (o.format == "json")
    printJson(big, tried, found.get(), out);
  else
    printText(big, tried, found.get(), out);
  return found ? 1 : 3;
}
