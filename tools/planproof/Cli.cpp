//===- Cli.cpp - the planproof command-line tool ----------------*- C++ -*-===//
//
// planproof verify SPEC | --ref REF --plan PLAN   decide one spec
// planproof check-specs PATH...                   run a spec catalogue against expectations
// planproof import FILE.json | export FILE        the JSON interchange format
// planproof import-xla BEFORE AFTER               a spec from XLA's dumps
// planproof replay SPEC                           numbers (CmdReplay.cpp)
// planproof plan --model M --parallel P           write a plan
// planproof shrink SPEC.plan                      a recipe's bug at small degrees (CmdShrink.cpp)
//
// What the commands share, the short commands, and the dispatch (Cli.h).
//
//===----------------------------------------------------------------------===//
#include "Cli.h"

#include "Import/JsonExport.h"
#include "Import/JsonImport.h"
#include "Import/LoadSpec.h"
#include "Import/XlaImport.h"
#include "LayoutEngine/LayoutEngine.h"
#include "Plan/PlanGen.h"
#include "Report/Report.h"
#include "Spec/Spec.h"
#include "Support/Input.h"

#include "mlir/IR/AsmState.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <unistd.h>

#include <nlohmann/json.hpp>

using namespace planproof;
using namespace planproof::cli;

namespace {
const char *kUsage = R"(planproof - a formal verifier for parallel training plans

Usage:
  planproof verify SPEC [options]              verify a spec (.mlir or .json) holding the
                                               reference step and the plan
  planproof verify --ref REF --plan PLAN [options]
                                               reference and plan in separate files
  planproof check-specs PATH... [--cross-check] [--format text|json]
                                               verify every spec under each directory
                                               PATH (or the spec file PATH) against the
                                               verdict it states (planproof.expect);
                                               --cross-check: also run each reported
                                               counterexample, and replay every spec on
                                               the CPU and the emulated kernel backend:
                                               both must agree with the verdict
  planproof import FILE.json                   print the MLIR of a JSON spec
  planproof export FILE.mlir                   print a spec in the JSON interchange format
  planproof import-xla BEFORE.txt AFTER.txt [--mesh dp=2,tp=4] [-o SPEC.json]
                 [--reference REF.txt] [--output-names a,b,...]
                                               a spec from the HLO XLA dumps before and
                                               after its SPMD partitioner (docs/xla.md);
                                               --reference: the single-device step (for
                                               shard_map); --output-names: the step's
                                               results' names, in order (identifiers);
                                               exit 3 when an op is not covered
  planproof replay SPEC [replay options]       run the reference and the plan on numbers
                                               and compare under an error model
                                               (docs/replay.md)
  planproof plan --model MODEL.json --parallel dp=N,tp=N,sp,ep=N,cp=N,pp=N,zero=N,
                 microbatches=N[,schedule=gpipe|1f1b|interleaved,chunks=N,layers=N,
                 cf=X,size=full,seq=N,compact] [-o OUT.mlir]
                                               write the reference step and the plan of
                                               a model configuration (docs/plan.md)
  planproof plan --recipe SPEC.plan [-o OUT.mlir]
                                               the plan of a generated spec (a
                                               configuration and edits, docs/plan.md)
  planproof shrink SPEC.plan [-o SMALL.plan] [--tries N] [--format text|json]
                                               a generated spec's bug at reduced sizes and
                                               smaller degrees: the first configuration
                                               (smallest first, at most N, default 24)
                                               where the edits carry over, the plan
                                               without them verifies and with them the
                                               element engine shows a counterexample that
                                               running it confirms; written as a recipe
                                               (exit 1 reproduced, 3 not)
  planproof --help | --version

Options:
  --format text|json|sarif|html
                             report format (default text); html: one self-contained
                             page (verify only; bad input is reported as text)
  --solver-budget N          Z3's resource limit per query (default 5000000 units of
                             counted work, the same on any machine and load); reaching
                             it makes the verdict inconclusive, never verified; a
                             report's stats say how much was used
  --timeout-ms N             the older form of --solver-budget: N x 500 units (a fixed
                             rate, not a clock)
  --threads N                threads deciding obligations (default: the machine's cores)
  --time-limit SECONDS       wall-clock budget of the whole run (default 600); when it is
                             spent the verdict is inconclusive and names the phase (for
                             check-specs: per spec)
  --source-root DIR          a folder whose files reports may quote (a JSON op's "loc"
                             naming a user source); by default only files in the
                             spec's own folder are quoted (repeatable)
  --quiet                    verify: no progress line (by default one is shown on
                             stderr while a run works, when stderr is a terminal)
  --progress                 verify: the progress line even when stderr is not a
                             terminal (a line a second)
  --full-shapes              decide parametric specs (JSON "dims") at their full sizes
                             instead of the reduced ones (docs/shape-reduction.md)
  --explain-proof             verify: with a verified verdict, the rules that proved each
                             output (text notes; "proof" in --format json)
  --engine auto|element|layout
                             auto (default): the layout engine, then the element engine
                             where it is not verified (the layout engine's places first
                             where both are inconclusive); element: every rank on every
                             element, alone; layout: the layout engine alone, which
                             proves without elements or ranks and is inconclusive where
                             it has no rule, never reporting a violation
                             (docs/layout-engine.md)

Replay options:
  --backend cpu|cuda|emulated
                             where to run (default cpu): the CPU interpreter, the CUDA
                             kernel backend, or that backend's kernels run on the host
  --ranks virtual|nccl       kernel backend ranks: all on one GPU (default), or one GPU
                             per rank with NCCL collectives
  --inputs DIR               read reference inputs from DIR/NAME.npy (others are drawn)
  --nccl-smoke               the NCCL smoke test: a communicator over every GPU, checked
                             collectives (no SPEC)
  --dtype fp32|bf16|fp64     storage precision (default fp32; bf16 accumulates in fp32)
  --order rank|ring|tree     reduction order of collectives (default ring)
  --seed N                   the seed of the generated inputs (default 1)
  --format text|json|html    report format (default text); html: one page with the
                             first divergence and heat-maps of the errors
  --shape reduced|full|NAME=SIZE,...
                             the shapes to replay: the verified ones (default), a
                             parametric spec's full sizes, or chosen sizes
  --check-counterexamples    run each counterexample the verifier reports concretely
                             and check that it shows the difference it claims
  --no-localize              on a divergence, do not look for the first plan op that
                             leaves the reference (that search runs the symbolic engine
                             and can take far longer than the replay)
  --time-limit SECONDS       wall-clock budget of the run (default 600)
  Exit status: 0 within tolerance, 1 divergence, 2 bad input, 3 could not run.

Exit status: 0 verified, 1 violated, 2 bad input or usage, 3 inconclusive.
For check-specs: 0 every spec as expected, 1 some spec not as expected.
)";
} // namespace

namespace planproof::cli {
std::string requestedFormat = "text";

int usage(const std::string &msg) {
  std::cerr << "planproof: error: " << printable(msg, false) << "\n"
            << "run 'planproof --help' for usage\n";
  // A gate reading --format json|sarif gets a machine-readable answer here too.
  if (requestedFormat == "json" || requestedFormat == "sarif") {
    Diagnostics d;
    d.error({"<command line>"}, msg);
    std::cout << (requestedFormat == "json" ? renderErrorJson("<command line>", d)
                                            : renderErrorSarif("<command line>", d));
  }
  return 2;
}

bool parseSeconds(const std::string &v, double &out) {
  char *end = nullptr;
  double s = std::strtod(v.c_str(), &end);
  if (v.empty() || *end || !(s > 0 && s <= 86400))
    return false;
  out = s;
  return true;
}

bool watchdogEnabled = true;

Watchdog::Watchdog(double seconds, std::string format, std::string spec, bool withGrace)
      : format(std::move(format)), spec(std::move(spec)), seconds(seconds) {
    if (!watchdogEnabled)
      return;
    double grace = withGrace ? std::max(5.0, 0.1 * seconds) : 0.0;
    thread = std::thread([this, grace] {
      std::unique_lock<std::mutex> lock(m);
      auto limit = std::chrono::duration<double>(this->seconds + grace);
      if (cv.wait_for(lock, limit, [this] { return done; }))
        return;
      fire();
    });
  }
Watchdog::~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(m);
      done = true;
    }
    cv.notify_all();
    if (thread.joinable())
      thread.join();
  }

void Watchdog::fire() {
    std::string phase = Deadline::currentPhase().load();
    std::string reason = "the time limit of " + std::to_string((long long)seconds) +
                         " s was exceeded during " + phase +
                         "; the run was stopped (raise it with --time-limit)";
    std::string out;
    if (format == "json") {
      nlohmann::ordered_json j = {
          {"spec", spec},
          {"verdict", "inconclusive"},
          {"violations", nlohmann::ordered_json::array()},
          {"inconclusive",
           nlohmann::ordered_json::array(
               {{{"location", {{"file", spec}, {"line", 0}, {"col", 0}}}, {"reason", reason}}})}};
      out = jsonEscapeHidden(j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace)) + "\n";
    } else if (format == "sarif") {
      nlohmann::ordered_json j = {
          {"$schema", "https://json.schemastore.org/sarif-2.1.0.json"},
          {"version", "2.1.0"},
          {"runs",
           nlohmann::ordered_json::array(
               {{{"tool", {{"driver", {{"name", "planproof"}}}}},
                 {"results",
                  nlohmann::ordered_json::array(
                      {{{"ruleId", "planproof/inconclusive"},
                        {"level", "warning"},
                        {"message", {{"text", reason}}},
                        {"locations",
                         nlohmann::ordered_json::array(
                             {{{"physicalLocation",
                                {{"artifactLocation", {{"uri", uriEncode(spec)}}}}}}})}}})}}})}};
      out = jsonEscapeHidden(j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace)) + "\n";
    } else {
      out = spec + ": warning: [inconclusive] " + reason + "\n" + spec + ": inconclusive\n";
    }
    std::fflush(stdout);
    // A report that stdout could not take is an error, as everywhere (finish()).
    bool written = ::write(1, out.data(), out.size()) == (ssize_t)out.size();
    ::_exit(written ? 3 : 2);
  }

int badInput(const std::string &path, const Diagnostics &errors, const std::string &format) {
  std::cerr << printable(errors.str());
  if (format == "json")
    std::cout << renderErrorJson(path, errors);
  else if (format == "sarif")
    std::cout << renderErrorSarif(path, errors);
  return 2;
}

Decision decideWith(const SpecReadings &readings, const Options &o) {
  return decideSpec(readings, *engineNamed(o.engine), o.verify);
}

bool parseCommon(std::vector<std::string> &args, Options &o, std::string &err) {
  std::vector<std::string> rest;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string &a = args[i];
    if (a == "--full-shapes") {
      o.fullShapes = true;
    } else if (a == "--source-root") {
      if (i + 1 >= args.size())
        return (err = "--source-root needs a folder", false);
      sourceRoots().push_back(args[++i]);
    } else if (a == "--explain-proof") {
      o.verify.proofTrace = true;
    } else if (a == "--quiet" || a == "--progress") {
      o.progress = a == "--quiet" ? 0 : 1;
    } else if (a == "--engine") {
      if (i + 1 >= args.size())
        return (err = "--engine needs a value", false);
      o.engine = args[++i];
      o.engineGiven = true;
      if (!engineNamed(o.engine))
        return (err = "unknown engine '" + o.engine + "' (expected element, layout or auto)",
                false);
    } else if (a == "--time-limit") {
      if (i + 1 >= args.size() || !parseSeconds(args[++i], o.timeLimit))
        return (err = "--time-limit needs a number of seconds in (0, 86400]", false);
    } else if (a == "--threads") {
      if (i + 1 >= args.size())
        return (err = "--threads needs a value", false);
      char *end = nullptr;
      unsigned long n = std::strtoul(args[++i].c_str(), &end, 10);
      if (args[i].empty() || *end || n == 0 || n > 256)
        return (err = "--threads needs a number between 1 and 256", false);
      o.verify.threads = (unsigned)n;
    } else if (a == "--format" || a == "--timeout-ms" || a == "--solver-budget") {
      if (i + 1 >= args.size()) {
        err = a + " needs a value";
        return false;
      }
      std::string v = args[++i];
      if (a == "--format") {
        if (v != "text" && v != "json" && v != "sarif" && v != "html") {
          err = "unknown format '" + v + "' (expected text, json, sarif or html)";
          return false;
        }
        o.format = v;
      } else if (a == "--timeout-ms") {
        char *end = nullptr;
        errno = 0;
        unsigned long ms = std::strtoul(v.c_str(), &end, 10);
        if (v.empty() || !std::isdigit((unsigned char)v[0]) || *end || errno || ms == 0 ||
            ms > 3600000) {
          err = "--timeout-ms needs a number of milliseconds between 1 and 3600000";
          return false;
        }
        o.verify.solverBudget = (uint64_t)ms * kSolverUnitsPerMs;
      } else {
        char *end = nullptr;
        errno = 0;
        unsigned long long n = std::strtoull(v.c_str(), &end, 10);
        if (v.empty() || !std::isdigit((unsigned char)v[0]) || *end || errno || n == 0 ||
            n > UINT32_MAX) {
          err = "--solver-budget needs a number of Z3 resource units between 1 and 4294967295";
          return false;
        }
        o.verify.solverBudget = (uint64_t)n;
      }
    } else {
      rest.push_back(a);
    }
  }
  args = rest;
  return true;
}

/// A command's exit status, once its output is known to have reached stdout: a report
/// lost to a full disk or a closed pipe is an error (exit 2), never a silent success.
int finish(int status) {
  std::cout.flush();
  bool lost = !std::cout || std::fflush(stdout) != 0 || std::ferror(stdout);
  if (lost) {
    std::cerr << "planproof: error: the report could not be written to standard output\n";
    std::cout.clear();
    return 2;
  }
  return status;
}

int exitCode(Verdict v) {
  switch (v) {
  case Verdict::Verified: return 0;
  case Verdict::Violated: return 1;
  case Verdict::Inconclusive: return 3;
  }
  return 3;
}
/// Writes `text` to the file `out`, or to stdout when `out` is empty. Exit status 0,
/// or 2 when the file cannot be written.
int writeOutput(const std::string &out, const std::string &text) {
  if (out.empty()) {
    std::cout << text;
    return 0;
  }
  // Flushed and closed before it is called written: a full disk fails there.
  std::ofstream f(out);
  f << text;
  f.close();
  if (!f)
    return usage("cannot write '" + out + "'");
  return 0;
}

std::string normalizeAt(std::string s) {
  if (!s.empty() && s[0] != '%')
    s = "%" + s;
  return s;
}

/// For a recipe with edits (a seeded bug) left inconclusive: where a counterexample
/// may be found (planproof shrink, CmdShrink.cpp).
void shrinkHint(const std::string &path) {
  if (path.size() < 5 || path.compare(path.size() - 5, 5, ".plan") != 0)
    return;
  plangen::RecipeFile recipe;
  Diagnostics ignored;
  if (plangen::readRecipeFile(path, recipe, ignored) && !recipe.edits.empty())
    std::cout << path << ": note: `planproof shrink " << path
              << "` looks for this recipe's bug at reduced sizes and smaller degrees, where "
                 "the element engine can show a counterexample\n";
}

int cmdVerify(std::vector<std::string> args) {
  Options o;
  std::string err, ref, plan;
  if (!parseCommon(args, o, err))
    return usage(err);
  std::vector<std::string> positional;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--ref" || args[i] == "--plan") {
      if (i + 1 >= args.size())
        return usage(args[i] + " needs a file");
      (args[i] == "--ref" ? ref : plan) = args[i + 1];
      ++i;
    } else if (args[i].rfind("--", 0) == 0) {
      return usage("unknown option '" + args[i] + "'");
    } else {
      positional.push_back(args[i]);
    }
  }
  if (ref.empty() != plan.empty())
    return usage("--ref and --plan go together");
  if (ref.empty() && positional.size() != 1)
    return usage("verify needs one SPEC file, or --ref REF --plan PLAN");
  if (!ref.empty() && !positional.empty())
    return usage("give either SPEC or --ref/--plan, not both");
  std::string path = ref.empty() ? positional[0] : plan;
  o.verify.deadline = Deadline(o.timeLimit);
  Watchdog watchdog(o.timeLimit, o.format, path);
  std::optional<ProgressLine> progress;
  progress.emplace(o.progress, path);
  mlir::MLIRContext ctx;
  registerDialects(ctx);
  o.verify.keepMemory = watchdogEnabled; // the process ends below (std::_Exit)
  // Which engines decide, on which reading of the spec, is the library's policy
  // (API/Policy.h); the readings are made here, each at most once.
  KeptReading kept;
  std::unique_ptr<Spec> expanded;
  Diagnostics errors;
  SpecReadings readings;
  if (ref.empty() && !llvm::StringRef(path).ends_with(".json"))
    readings.kept = [&] {
      return readKept(kept, !o.fullShapes, [&](Spec &s, Diagnostics &e) {
        return loadSpec(ctx, path, s, e);
      });
    };
  readings.expanded = [&]() -> const Spec * {
    expanded = std::make_unique<Spec>();
    expanded->reduceShapes = !o.fullShapes;
    bool ok;
    try {
      ok = ref.empty() ? loadSpec(ctx, positional[0], *expanded, errors)
                       : loadSpecPair(ctx, ref, plan, *expanded, errors);
    } catch (const std::exception &e) {
      ok = errors.error({path}, std::string("the spec could not be read: ") + e.what());
    }
    return ok ? expanded.get() : nullptr;
  };
  Decision d = decideWith(readings, o);
  if (!d.read) {
    progress.reset(); // erased before the errors are written
    return badInput(path, errors, o.format);
  }
  const Spec *read = d.read;
  const VerifyResult &r = d.result;
  progress.reset();
  if (o.format == "json")
    std::cout << renderJson(*read, r);
  else if (o.format == "sarif")
    std::cout << renderSarif(*read, r);
  else if (o.format == "html")
    std::cout << renderHtml(*read, r);
  else
    std::cout << renderText(*read, r);
  if (o.format == "text" && r.verdict == Verdict::Inconclusive && ref.empty())
    shrinkHint(path);
  // In the planproof tool (not a harness calling cliMain), the process ends here and
  // its memory goes back with it: tearing down a large plan's IR and context first
  // would be a tenth of its run (the same reasoning as clang's -disable-free).
  if (watchdogEnabled) {
    int status = finish(exitCode(r.verdict));
    std::cerr.flush();
    std::fflush(nullptr);
    std::_Exit(status);
  }
  return exitCode(r.verdict);
}

/// `planproof plan --model MODEL.json --parallel dp=2,tp=2,... [-o OUT]`: writes the
/// reference and the plan of a model configuration (lib/Plan/PlanGen.h, docs/plan.md).
int cmdPlan(std::vector<std::string> args) {
  std::string model, parallel, out, recipe;
  std::set<std::string> given;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string &a = args[i];
    if (a == "--model" || a == "--parallel" || a == "-o" || a == "--recipe") {
      if (i + 1 >= args.size())
        return usage(a + " needs a value");
      if (!given.insert(a).second)
        return usage(a + " is given twice");
      (a == "--model" ? model : a == "--parallel" ? parallel : a == "-o" ? out : recipe) = args[++i];
    } else {
      return usage("unknown option '" + a + "'");
    }
  }
  if (!recipe.empty()) {
    // A generated spec's plan, edited as its recipe says: the text its reports' lines
    // refer to.
    if (!model.empty() || !parallel.empty())
      return usage("--recipe takes the model and the parallel degrees from the recipe");
    plangen::Recipe r;
    Diagnostics errors;
    if (!plangen::loadRecipe(recipe, r, errors)) {
      std::cerr << printable(errors.str());
      return 2;
    }
    return writeOutput(out, r.mlir);
  }
  if (model.empty())
    return usage("plan needs --model MODEL.json");
  plangen::Model m;
  plangen::Parallel p;
  Diagnostics errors;
  if (!plangen::readModel(model, m, errors)) {
    std::cerr << printable(errors.str());
    return 2;
  }
  std::string err;
  if (!plangen::parseParallel(parallel, p, err))
    return usage(err);
  std::string text;
  if (!plangen::generate(m, p, text, err)) {
    std::cerr << "planproof: error: cannot generate this configuration: " << printable(err, false)
              << "\n";
    return 2;
  }
  // What plan writes, verify reads: the spec is loaded and checked as verify would
  // before it is written (a configuration the generator cannot write correctly is
  // refused, not written for verify to reject).
  {
    mlir::MLIRContext ctx(mlir::MLIRContext::Threading::DISABLED);
    registerDialects(ctx);
    Spec spec;
    Diagnostics problems;
    std::string name = out.empty() ? "<generated plan>" : out;
    if (!loadSpecText(ctx, name, text, spec, problems)) {
      std::cerr << "planproof: error: cannot generate this configuration: its spec does not "
                   "load:\n"
                << printable(problems.str());
      return 2;
    }
  }
  return writeOutput(out, text);
}

int cmdImport(std::vector<std::string> args) {
  if (args.size() != 1)
    return usage("import needs one FILE.json");
  mlir::MLIRContext ctx;
  registerDialects(ctx);
  Spec spec;
  Diagnostics errors;
  if (!loadSpec(ctx, args[0], spec, errors)) {
    std::cerr << errors.str();
    return 2;
  }
  mlir::OpPrintingFlags flags;
  for (auto &m : spec.modules)
    m->print(llvm::outs(), flags);
  llvm::outs() << "\n";
  return 0;
}
/// `planproof import-xla BEFORE AFTER [--mesh ...] [-o OUT] [--format text|json]`
/// (lib/Import/XlaImport.h, docs/xla.md).
int cmdImportXla(std::vector<std::string> args) {
  std::string out, format = "text";
  XlaImportOptions opts;
  std::vector<std::string> files;
  std::set<std::string> given;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string &a = args[i];
    if (a == "--mesh" || a == "-o" || a == "--format" || a == "--description" ||
        a == "--reference" || a == "--output-names") {
      if (i + 1 >= args.size())
        return usage(a + " needs a value");
      if (!given.insert(a).second)
        return usage(a + " is given twice");
      const std::string &v = args[++i];
      std::string why;
      if (a == "--mesh" && !parseMeshOption(v, opts.mesh, why))
        return usage(why);
      if (a == "-o")
        out = v;
      if (a == "--description")
        opts.description = v;
      if (a == "--reference")
        opts.referencePath = v;
      if (a == "--output-names" && !parseOutputNames(v, opts.outputNames, why))
        return usage(why);
      if (a == "--format") {
        if (v != "text" && v != "json")
          return usage("--format for import-xla is text or json");
        format = v;
      }
    } else if (a.rfind("-", 0) == 0) {
      return usage("unknown option '" + a + "'");
    } else {
      files.push_back(a);
    }
  }
  if (files.size() != 2)
    return usage("import-xla needs BEFORE.txt and AFTER.txt (the dumps around "
                 "spmd-partitioning)");
  std::string texts[2];
  Diagnostics errors;
  for (int k = 0; k < 2; ++k)
    if (!readInputFile(files[k], texts[k], errors))
      return badInput(files[k], errors, format);
  if (!opts.referencePath.empty()) {
    if (!readInputFile(opts.referencePath, opts.referenceText, errors))
      return badInput(opts.referencePath, errors, format);
    if (opts.referenceText.empty()) {
      errors.error({opts.referencePath}, "empty file");
      return badInput(opts.referencePath, errors, format);
    }
  }
  nlohmann::ordered_json spec;
  XlaImportStatus st = importXla(files[0], texts[0], files[1], texts[1], opts, spec, errors);
  if (st == XlaImportStatus::BadInput)
    return badInput(files[0], errors, format);
  if (st == XlaImportStatus::Unsupported) {
    const Diagnostic &why = errors.list().front();
    std::string message = why.at.str() + ": unsupported: " + why.message;
    std::cerr << printable(message) << "\n";
    if (format == "json")
      std::cout << jsonEscapeHidden(nlohmann::ordered_json{{"verdict", "inconclusive"}, {"reason", message}}.dump(2, ' ', false, nlohmann::json::error_handler_t::replace))
                << "\n";
    else
      std::cout << "inconclusive: the import does not cover this program\n";
    return 3;
  }
  std::string text = spec.dump(1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
  // What import-xla writes, verify reads: the spec is loaded and checked before it is
  // written. Anything the translation let through that the spec's own checks refuse
  // (shapes the dumps declare inconsistently) is the dumps' error, not a file to write.
  {
    mlir::MLIRContext ctx(mlir::MLIRContext::Threading::DISABLED);
    registerDialects(ctx);
    Spec check;
    Diagnostics problems;
    std::string name = out.size() > 5 && out.compare(out.size() - 5, 5, ".json") == 0
                           ? out
                           : "<import-xla output>.json";
    if (!loadSpecText(ctx, name, text, check, problems)) {
      Diagnostic first = problems.empty() ? Diagnostic{{name}, "it does not load", {}, ""}
                                          : problems.list().front();
      errors.error({files[1]}, "the dumps do not make a consistent spec: " + first.message +
                                   " (in the spec the import would write, at " +
                                   first.at.str() + ")");
      return badInput(files[1], errors, format);
    }
  }
  return writeOutput(out, text);
}

int cmdExport(std::vector<std::string> args) {
  if (args.size() != 1)
    return usage("export needs one spec file");
  mlir::MLIRContext ctx;
  registerDialects(ctx);
  Spec spec;
  // What export writes out must be readable again: calls that would expand past what
  // a JSON spec holds are refused before they are expanded.
  spec.maxExpandedOps = kMaxExportOps;
  Diagnostics errors;
  if (!loadSpec(ctx, args[0], spec, errors)) {
    std::cerr << errors.str();
    return 2;
  }
  std::string out, why;
  if (!exportJsonSpec(spec, out, why)) {
    // (The exporter's reasons start with their place, "FILE:LINE:COL: error: ".)
    std::string line = why.find(": error: ") == std::string::npos
                           ? args[0] + ": error: " + why
                           : why;
    std::cerr << printable(line, false) << "\n";
    return 2;
  }
  std::cout << out;
  return 0;
}
} // namespace planproof::cli

/// The whole CLI, callable in-process (the fuzzing harness of the CLI calls it).
int planproof::cliMain(int argc, char **argv, bool watchdog) {
  watchdogEnabled = watchdog;
  std::vector<std::string> args(argv + 1, argv + argc);
  // The format asked for, known before any command parses its options: usage and
  // internal errors answer in it too.
  requestedFormat = "text";
  for (size_t i = 0; i + 1 < args.size(); ++i) {
    double limit;
    if (args[i] == "--format")
      requestedFormat = args[i + 1];
    // A pipe given as input is not waited on past the run's time limit.
    if (args[i] == "--time-limit" && parseSeconds(args[i + 1], limit))
      inputWaitMs() = (int)std::min<double>(kMaxInputWaitMs, std::max(1.0, limit * 1000 - 500));
  }
  if (args.empty())
    return finish(usage("missing command"));
  std::string cmd = args[0];
  args.erase(args.begin());
  if (cmd == "--help" || cmd == "-h" || cmd == "help") {
    std::cout << kUsage;
    return finish(0);
  }
  // Every command's --help: the usage (each option says which commands take it).
  static const char *const kCommands[] = {"verify", "check-specs", "replay", "shrink",
                                          "import", "export", "import-xla", "plan"};
  if (llvm::is_contained(kCommands, cmd) &&
      llvm::any_of(args, [](const std::string &a) { return a == "--help" || a == "-h"; })) {
    std::cout << kUsage;
    return finish(0);
  }
  if (cmd == "--version") {
    std::cout << "planproof 0.1.0\n";
    return finish(0);
  }
  try {
    if (cmd == "verify")
      return finish(cmdVerify(args));
    if (cmd == "check-specs")
      return finish(cmdCheckSpecs(args));
    if (cmd == "replay")
      return finish(cmdReplay(args));
    if (cmd == "shrink")
      return finish(cmdShrink(args));
    // The commands that read or write a spec without deciding it are bounded by the
    // same --time-limit (default 600 s): past it, the watchdog ends the run (exit 3).
    using Command = int (*)(std::vector<std::string>);
    Command other = cmd == "import"       ? cmdImport
                    : cmd == "export"     ? cmdExport
                    : cmd == "import-xla" ? cmdImportXla
                    : cmd == "plan"       ? cmdPlan
                                          : nullptr;
    if (other) {
      double limit = 600;
      std::string subject;
      for (size_t i = 0; i < args.size(); ++i) {
        if (args[i] == "--time-limit") {
          if (i + 1 >= args.size() || !parseSeconds(args[i + 1], limit))
            return finish(usage("--time-limit needs a number of seconds in (0, 86400]"));
          args.erase(args.begin() + i, args.begin() + i + 2);
          --i;
        } else if (subject.empty() && args[i].rfind("-", 0) != 0) {
          subject = args[i];
        }
      }
      Watchdog dog(limit, requestedFormat, subject.empty() ? cmd : subject, /*grace=*/false);
      return finish(other(args));
    }
  } catch (const std::bad_alloc &) {
    // A budget, not a defect: memory ran out before a size check caught the input.
    std::string reason = "memory ran out during " + std::string(Deadline::currentPhase().load()) +
                         " (the input is larger than this machine can hold)";
    std::cerr << "planproof: inconclusive: " << reason << "\n";
    if (requestedFormat == "json")
      std::cout << nlohmann::ordered_json{{"verdict", "inconclusive"}, {"exit_status", 3},
                                          {"reason", reason}}
                       .dump(2, ' ', false, nlohmann::json::error_handler_t::replace)
                << "\n";
    return finish(3);
  } catch (const std::exception &e) {
    std::cerr << "planproof: internal error: " << printable(e.what(), false) << "\n";
    if (requestedFormat == "json")
      std::cout << jsonEscapeHidden(
                       nlohmann::ordered_json{{"verdict", "internal error"}, {"exit_status", 3},
                                              {"reason", e.what()}}
                           .dump(2, ' ', false, nlohmann::json::error_handler_t::replace))
                << "\n";
    return finish(3);
  }
  return finish(usage("unknown command '" + cmd + "'"));
}
