//===- planproof.cpp - the planproof command-line tool ----------*- C++ -*-===//
//
// planproof verify SPEC | --ref REF --plan PLAN   decide one spec
// planproof check-specs DIR                       run a spec catalogue against expectations
// planproof import FILE.json                      print the MLIR of a JSON spec
//
// Exit status: 0 verified (or all specs as expected), 1 violated (or a spec not as
// expected), 2 bad input or usage, 3 inconclusive.
//
//===----------------------------------------------------------------------===//
#include "Engine/Verifier.h"
#include "Import/JsonExport.h"
#include "Import/JsonImport.h"
#include "Import/XlaImport.h"
#include "Replay/Device.h"
#include "Replay/Replay.h"
#include "Plan/PlanGen.h"
#include "Report/Report.h"
#include "Spec/Spec.h"
#include "Support/Input.h"

#include "mlir/IR/AsmState.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <set>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <unistd.h>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>
#include <vector>
#include <sstream>
#include <nlohmann/json.hpp>

using namespace planproof;
namespace fs = std::filesystem;

namespace planproof {
/// The CLI's entry point; `watchdog` arms the hard stop of --time-limit (see Watchdog).
int cliMain(int argc, char **argv, bool watchdog);
} // namespace planproof

namespace {
const char *kUsage = R"(planproof - a formal verifier for parallel training plans

Usage:
  planproof verify SPEC [options]              verify a spec (.mlir or .json) holding the
                                               reference step and the plan
  planproof verify --ref REF --plan PLAN [options]
                                               reference and plan in separate files
  planproof check-specs DIR [--format text|json]
                                               verify every spec under DIR against the
                                               verdict it states (planproof.expect)
  planproof import FILE.json                   print the MLIR of a JSON spec
  planproof export FILE.mlir                   print a spec in the JSON interchange format
  planproof import-xla BEFORE.txt AFTER.txt [--mesh dp=2,tp=4] [-o SPEC.json]
                 [--reference REF.txt]
                                               a spec from the HLO XLA dumps before and
                                               after its SPMD partitioner (docs/xla.md);
                                               --reference: the single-device step (for
                                               shard_map); exit 3 when an op is not
                                               covered
  planproof replay SPEC [replay options]       run the reference and the plan on numbers
                                               and compare under an error model
                                               (docs/replay.md)
  planproof plan --model MODEL.json --parallel dp=N,tp=N,sp,ep=N,cp=N,pp=N,zero=N,
                 microbatches=N[,schedule=gpipe|1f1b|interleaved,chunks=N,layers=N,
                 cf=X] [-o OUT.mlir]
                                               write the reference step and the plan of
                                               a model configuration (docs/plan.md)
  planproof --help | --version

Options:
  --format text|json|sarif   report format (default text)
  --timeout-ms N             Z3 timeout per query (default 10000); a timeout makes the
                             verdict inconclusive, never verified
  --threads N                threads deciding obligations (default: the machine's cores)
  --time-limit SECONDS       wall-clock budget of the whole run (default 600); when it is
                             spent the verdict is inconclusive and names the phase (for
                             check-specs: per spec)
  --full-shapes              decide parametric specs (JSON "dims") at their full sizes
                             instead of the reduced ones (docs/shape-reduction.md)

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
  --format text|json         report format (default text)
  --shape reduced|full|NAME=SIZE,...
                             the shapes to replay: the verified ones (default), a
                             parametric spec's full sizes, or chosen sizes
  --check-counterexamples    run each counterexample the verifier reports concretely
                             and check that it shows the difference it claims
  --time-limit SECONDS       wall-clock budget of the run (default 600)
  Exit status: 0 within tolerance, 1 divergence, 2 bad input, 3 could not run.

Exit status: 0 verified, 1 violated, 2 bad input or usage, 3 inconclusive.
For check-specs: 0 every spec as expected, 1 some spec not as expected.
)";

int usage(const std::string &msg) {
  std::cerr << "planproof: error: " << msg << "\n"
            << "run 'planproof --help' for usage\n";
  return 2;
}

/// The default wall-clock budget of a run: long enough for every spec of the
/// catalogue many times over, short enough for a CI gate (README, "CI gates").
constexpr double kDefaultTimeLimit = 600;

struct Options {
  Options() { verify.threads = std::max(1u, std::thread::hardware_concurrency()); }
  std::string format = "text";
  VerifyOptions verify;
  bool fullShapes = false;
  double timeLimit = kDefaultTimeLimit;
};

/// Parses a --time-limit value: seconds in (0, 86400].
bool parseSeconds(const std::string &v, double &out) {
  char *end = nullptr;
  double s = std::strtod(v.c_str(), &end);
  if (v.empty() || *end || !(s > 0 && s <= 86400))
    return false;
  out = s;
  return true;
}

/// The last line of defence of the time limit: when a run outlives its budget by a
/// grace period (a phase that does not check the deadline, a solver that ignores its
/// timeout), the watchdog prints an inconclusive report in the requested format and
/// ends the process with status 3. Destroying it before then disarms it.
bool watchdogEnabled = true;

class Watchdog {
public:
  Watchdog(double seconds, std::string format, std::string spec)
      : format(std::move(format)), spec(std::move(spec)), seconds(seconds) {
    if (!watchdogEnabled)
      return;
    double grace = std::max(5.0, 0.1 * seconds);
    thread = std::thread([this, grace] {
      std::unique_lock<std::mutex> lock(m);
      auto limit = std::chrono::duration<double>(this->seconds + grace);
      if (cv.wait_for(lock, limit, [this] { return done; }))
        return;
      fire();
    });
  }
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(m);
      done = true;
    }
    cv.notify_all();
    if (thread.joinable())
      thread.join();
  }

private:
  [[noreturn]] void fire() {
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
      out = j.dump(2) + "\n";
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
                                {{"artifactLocation", {{"uri", spec}}}}}}})}}})}}})}};
      out = j.dump(2) + "\n";
    } else {
      out = spec + ": warning: [inconclusive] " + reason + "\n" + spec + ": inconclusive\n";
    }
    std::fflush(stdout);
    ssize_t ignored = ::write(1, out.data(), out.size());
    (void)ignored;
    ::_exit(3);
  }
  std::string format, spec;
  double seconds;
  std::mutex m;
  std::condition_variable cv;
  bool done = false;
  std::thread thread;
};

/// Writes a loader's errors on stderr (control characters escaped) and, for
/// machine-readable formats, the error object on stdout. Returns exit status 2.
int badInput(const std::string &path, const std::string &errors, const std::string &format) {
  std::cerr << printable(errors);
  if (format == "json")
    std::cout << renderErrorJson(path, errors);
  else if (format == "sarif")
    std::cout << renderErrorSarif(path, errors);
  return 2;
}

bool parseCommon(std::vector<std::string> &args, Options &o, std::string &err) {
  std::vector<std::string> rest;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string &a = args[i];
    if (a == "--full-shapes") {
      o.fullShapes = true;
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
    } else if (a == "--format" || a == "--timeout-ms") {
      if (i + 1 >= args.size()) {
        err = a + " needs a value";
        return false;
      }
      std::string v = args[++i];
      if (a == "--format") {
        if (v != "text" && v != "json" && v != "sarif") {
          err = "unknown format '" + v + "' (expected text, json or sarif)";
          return false;
        }
        o.format = v;
      } else {
        char *end = nullptr;
        unsigned long ms = std::strtoul(v.c_str(), &end, 10);
        if (v.empty() || *end || ms == 0 || ms > 3600000) {
          err = "--timeout-ms needs a number of milliseconds between 1 and 3600000";
          return false;
        }
        o.verify.solverTimeoutMs = (unsigned)ms;
      }
    } else {
      rest.push_back(a);
    }
  }
  args = rest;
  return true;
}

int exitCode(Verdict v) {
  switch (v) {
  case Verdict::Verified: return 0;
  case Verdict::Violated: return 1;
  case Verdict::Inconclusive: return 3;
  }
  return 3;
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
  mlir::MLIRContext ctx;
  registerDialects(ctx);
  Spec spec;
  spec.reduceShapes = !o.fullShapes;
  std::string errors;
  bool ok;
  try {
    ok = ref.empty() ? loadSpec(ctx, positional[0], spec, errors)
                     : loadSpecPair(ctx, ref, plan, spec, errors);
  } catch (const std::exception &e) {
    ok = false;
    errors += path + ": error: the spec could not be read: " + e.what() + "\n";
  }
  if (!ok)
    return badInput(path, errors, o.format);
  VerifyResult r = verifySpec(spec, o.verify);
  if (o.format == "json")
    std::cout << renderJson(spec, r);
  else if (o.format == "sarif")
    std::cout << renderSarif(spec, r);
  else
    std::cout << renderText(spec, r);
  return exitCode(r.verdict);
}

/// `planproof plan --model MODEL.json --parallel dp=2,tp=2,... [-o OUT]`: writes the
/// reference and the plan of a model configuration (lib/Plan/PlanGen.h, docs/plan.md).
int cmdPlan(std::vector<std::string> args) {
  std::string model, parallel, out;
  std::set<std::string> given;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string &a = args[i];
    if (a == "--model" || a == "--parallel" || a == "-o") {
      if (i + 1 >= args.size())
        return usage(a + " needs a value");
      if (!given.insert(a).second)
        return usage(a + " is given twice");
      (a == "--model" ? model : a == "--parallel" ? parallel : out) = args[++i];
    } else {
      return usage("unknown option '" + a + "'");
    }
  }
  if (model.empty())
    return usage("plan needs --model MODEL.json");
  plangen::Model m;
  plangen::Parallel p;
  std::string err;
  if (!plangen::readModel(model, m, err)) {
    std::cerr << err << "\n";
    return 2;
  }
  if (!plangen::parseParallel(parallel, p, err))
    return usage(err);
  std::string text;
  if (!plangen::generate(m, p, text, err)) {
    std::cerr << "planproof: error: cannot generate this configuration: " << err << "\n";
    return 2;
  }
  if (out.empty()) {
    std::cout << text;
    return 0;
  }
  std::ofstream f(out);
  if (!(f << text))
    return usage("cannot write '" + out + "'");
  return 0;
}

int cmdReplay(std::vector<std::string> args) {
  ReplayOptions ro;
  std::string format = "text", backend = "cpu";
  std::vector<std::string> positional;
  bool checkCx = false, ncclSmoke = false;
  double timeLimit = kDefaultTimeLimit;
  std::string shapeArg = "reduced", inputsDir, ranks = "virtual";
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string &a = args[i];
    if (a == "--check-counterexamples") {
      checkCx = true;
      continue;
    }
    if (a == "--nccl-smoke") {
      ncclSmoke = true;
      continue;
    }
    if (a == "--time-limit") {
      if (i + 1 >= args.size() || !parseSeconds(args[++i], timeLimit))
        return usage("--time-limit needs a number of seconds in (0, 86400]");
      continue;
    }
    if (a == "--dtype" || a == "--order" || a == "--seed" || a == "--format" || a == "--backend" ||
        a == "--shape" || a == "--inputs" || a == "--ranks") {
      if (i + 1 >= args.size())
        return usage(a + " needs a value");
      std::string v = args[++i];
      if (a == "--dtype") {
        if (v != "fp32" && v != "bf16" && v != "fp64")
          return usage("unknown dtype '" + v + "' (expected fp32, bf16 or fp64)");
        ro.dtype = v == "fp32" ? ReplayDtype::F32 : v == "bf16" ? ReplayDtype::BF16 : ReplayDtype::F64;
      } else if (a == "--order") {
        if (v != "rank" && v != "ring" && v != "tree")
          return usage("unknown reduction order '" + v + "' (expected rank, ring or tree)");
        ro.order = v == "rank" ? ReduceOrder::Rank : v == "ring" ? ReduceOrder::Ring : ReduceOrder::Tree;
      } else if (a == "--seed") {
        char *end = nullptr;
        unsigned long long n = std::strtoull(v.c_str(), &end, 10);
        if (v.empty() || *end)
          return usage("--seed needs a non-negative integer");
        ro.seed = n;
      } else if (a == "--format") {
        if (v != "text" && v != "json")
          return usage("unknown format '" + v + "' (expected text or json)");
        format = v;
      } else if (a == "--shape") {
        shapeArg = v;
      } else if (a == "--inputs") {
        inputsDir = v;
      } else if (a == "--ranks") {
        if (v != "virtual" && v != "nccl")
          return usage("unknown ranks '" + v + "' (expected virtual or nccl)");
        ranks = v;
      } else {
        if (v != "cpu" && v != "cuda" && v != "emulated")
          return usage("unknown backend '" + v + "' (expected cpu, cuda or emulated)");
        backend = v;
      }
    } else if (a.rfind("--", 0) == 0) {
      return usage("unknown option '" + a + "'");
    } else {
      positional.push_back(a);
    }
  }
  if (ncclSmoke) {
    if (!positional.empty())
      return usage("--nccl-smoke takes no SPEC");
    std::string report, err = kernels::ncclSmokeTest(report);
    std::cout << "nccl smoke test: " << report << "\n";
    if (!err.empty()) {
      std::cerr << "planproof: could not run: " << err << "\n";
      return 3;
    }
    return 0;
  }
  if (positional.size() != 1)
    return usage("replay needs one SPEC file");
  ro.backend = backend == "cpu" ? ReplayBackend::Cpu
               : backend == "cuda" ? ReplayBackend::Cuda
                                   : ReplayBackend::Emulated;
  ro.ranks = ranks == "nccl" ? ReplayRanks::Nccl : ReplayRanks::Virtual;
  ro.deadline = Deadline(timeLimit);
  Watchdog watchdog(timeLimit, format, positional[0]);
  if (ro.ranks == ReplayRanks::Nccl && ro.backend != ReplayBackend::Cuda)
    return usage("--ranks nccl needs --backend cuda");
  mlir::MLIRContext ctx;
  registerDialects(ctx);
  Spec spec;
  std::string errors;
  // --shape reduced (the verified sizes), full (a parametric spec's declared sizes), or
  // NAME=SIZE,... (a parametric spec's symbols at chosen sizes).
  std::map<std::string, int64_t> dims;
  if (shapeArg != "reduced" && shapeArg != "full") {
    std::stringstream ss(shapeArg);
    std::string item;
    while (std::getline(ss, item, ',')) {
      auto eq = item.find('=');
      char *end = nullptr;
      long long n = eq == std::string::npos ? 0 : std::strtoll(item.c_str() + eq + 1, &end, 10);
      if (eq == std::string::npos || eq == 0 || !end || *end || n < 1 || n > (1ll << 31))
        return usage("--shape takes reduced, full, or NAME=SIZE,... (got '" + item + "')");
      dims[item.substr(0, eq)] = n;
    }
  }
  spec.reduceShapes = shapeArg == "reduced";
  bool loaded;
  try {
  if (dims.empty()) {
    loaded = loadSpec(ctx, positional[0], spec, errors);
  } else {
    if (positional[0].size() < 5 || positional[0].substr(positional[0].size() - 5) != ".json")
      return usage("--shape NAME=SIZE applies to parametric JSON specs (\"dims\")");
    std::string text;
    spec.path = positional[0];
    loaded = readInputFile(positional[0], text, errors) &&
             checkNesting(positional[0], text, Syntax::Json, errors) &&
             importJsonText(ctx, positional[0], text, spec, &dims, errors) &&
             analyzeSpec(spec, errors);
    if (loaded)
      for (auto &[n, v] : dims)
        if (!llvm::any_of(spec.reducedDims, [&](const ReducedDim &d) { return d.name == n; }))
          return usage("--shape: the spec has no dimension '" + n + "'");
  }
  } catch (const std::exception &e) {
    loaded = false;
    errors += positional[0] + ": error: the spec could not be read: " + e.what() + "\n";
  }
  if (!loaded)
    return badInput(positional[0], errors, format);
  ro.progress = true;
  if (checkCx) {
    // Cross-check of the verifier: each reported counterexample, run concretely.
    VerifyOptions vo;
    vo.deadline = ro.deadline;
    vo.checkFixes = false; // only the counterexamples are checked here
    VerifyResult v = verifySpec(spec, vo);
    int refuted = 0, confirmed = 0;
    for (const Violation &viol : v.violations) {
      if (!viol.hasCounterexample)
        continue;
      CounterexampleCheck c = checkCounterexample(spec, viol.counterexample);
      refuted += c.status == "refuted";
      confirmed += c.status == "confirmed";
      std::cout << positional[0] << ": counterexample for `" << viol.counterexample.element
                << "` (" << viol.kind << " at " << (viol.at.empty() ? "-" : viol.at)
                << "): " << c.status << " -- " << c.detail << "\n";
    }
    std::cout << positional[0] << ": " << confirmed << " counterexamples confirmed, " << refuted
              << " refuted\n";
    return refuted ? 1 : 0;
  }
  if (!inputsDir.empty()) {
    std::string err;
    if (!loadNpyInputs(spec, inputsDir, ro, err)) {
      std::cerr << err << "\n";
      return 2;
    }
  }
  ReplayResult r = replaySpec(spec, ro);
  if (!r.ran) {
    std::cerr << (r.failureAt.known() ? r.failureAt.str() : positional[0])
              << ": could not run: " << r.failure << "\n";
    return 3;
  }
  if (format == "json") {
    nlohmann::ordered_json j = {{"spec", positional[0]},
                        {"backend", backend},
                        {"dtype", dtypeName(ro.dtype)},
                        {"order", ro.ranks == ReplayRanks::Nccl ? "nccl" : orderName(ro.order)},
                        {"seed", ro.seed},
                        {"device", r.device},
                        {"inputs_from_files", r.loadedInputs},
                        {"reference_seconds", r.referenceSeconds},
                        {"plan_seconds", r.planSeconds},
                        {"verdict", r.diverged() ? "diverged" : "within-tolerance"}};
    nlohmann::ordered_json outs = nlohmann::ordered_json::array();
    for (const ReplayOutput &o : r.outputs)
      outs.push_back({{"output", o.name},
                      {"elements", o.elements},
                      {"undefined", o.undefined},
                      {"within", o.within},
                      {"note", o.note},
                      {"max_abs_error", o.maxAbsError},
                      {"max_rel_error", o.maxRelError},
                      {"worst", {{"element", o.worst},
                                 {"rank", o.worstRank},
                                 {"reference", o.worstReference},
                                 {"plan", o.worstPlan},
                                 {"error", o.worstError},
                                 {"tolerance", o.worstTolerance}}}});
    j["outputs"] = outs;
    if (r.first.found)
      j["first_divergence"] = {{"explanation", r.first.note},
                               {"location", {{"file", r.first.location.file},
                                             {"line", r.first.location.line},
                                             {"col", r.first.location.col}}},
                               {"op", r.first.op},
                               {"holds", r.first.value},
                               {"rank", r.first.rank},
                               {"local", r.first.local},
                               {"element", r.first.global},
                               {"plan", r.first.plan},
                               {"reference", r.first.reference},
                               {"tolerance", r.first.tolerance}};
    else if (r.diverged())
      j["first_divergence"] = {{"note", r.first.note}};
    std::cout << j.dump(2) << "\n";
  } else {
    for (const ReplayOutput &o : r.outputs) {
      if (!o.note.empty()) {
        std::cout << "  " << (o.within ? "ok      " : "DIVERGED") << " " << o.name << ": " << o.note << "\n";
        continue;
      }
      std::ostringstream line;
      line.precision(3);
      line << "  " << (o.within ? "ok      " : "DIVERGED") << " " << o.name << ": max abs error "
           << o.maxAbsError << ", max rel error " << o.maxRelError << "; worst element "
           << o.name << indexStr(o.worst) << " on " << o.worstRank << ": plan " << o.worstPlan
           << " vs reference " << o.worstReference << " (error " << o.worstError
           << ", tolerance " << o.worstTolerance << ")";
      if (o.undefined)
        line << "; " << o.undefined << " elements not compared (the reference is not finite "
                                       "there at these inputs)";
      std::cout << line.str() << "\n";
    }
    if (r.first.found) {
      std::ostringstream d;
      d.precision(6);
      if (r.first.op.empty())
        d << r.first.location.str() << ": error: " << r.first.note;
      else if (!r.first.value.empty())
        d << r.first.location.str() << ": error: [numerics] first divergence: `" << r.first.op
          << "` holds reference `" << r.first.value << "`, but on rank " << r.first.rank
          << " its element " << indexStr(r.first.local) << " (" << r.first.value
          << indexStr(r.first.global) << ") is " << r.first.plan << " against "
          << r.first.reference << " (tolerance " << r.first.tolerance << ")";
      else
        d << r.first.location.str() << ": error: [numerics] first divergence at `" << r.first.op
          << "`: every earlier value that holds a reference value is within tolerance, and "
             "this op's result holds none; the verifier says: " << r.first.note;
      std::cout << d.str() << "\n";
      std::string line = spec.snippet(r.first.location);
      if (!line.empty())
        std::cout << line << "\n";
    } else if (r.diverged()) {
      std::cout << positional[0] << ": note: " << r.first.note << "\n";
    }
    std::cout << positional[0] << ": " << (r.diverged() ? "diverged" : "within tolerance")
              << " -- " << dtypeName(ro.dtype) << ", "
              << (ro.ranks == ReplayRanks::Nccl ? std::string("NCCL") : orderName(ro.order))
              << "-order collectives, seed " << ro.seed << ", " << r.device;
    if (!r.loadedInputs.empty()) {
      std::cout << "; inputs from files:";
      for (const std::string &n : r.loadedInputs)
        std::cout << " " << n;
    }
    std::cout << "\n";
  }
  return r.diverged() ? 1 : 0;
}

std::string normalizeAt(std::string s) {
  if (!s.empty() && s[0] != '%')
    s = "%" + s;
  return s;
}

int cmdCheckSpecs(std::vector<std::string> args) {
  Options o;
  std::string err;
  if (!parseCommon(args, o, err))
    return usage(err);
  if (args.size() != 1)
    return usage("check-specs needs one directory");
  std::error_code ec;
  if (!fs::is_directory(args[0], ec))
    return usage("'" + args[0] + "' is not a directory");
  // Every entry is either checked or reported: a broken or looping symlink, an
  // unreadable file or directory is a failure, never silently skipped.
  std::vector<std::string> files;
  std::vector<std::pair<std::string, std::string>> unreadable;
  auto it = fs::recursive_directory_iterator(args[0], fs::directory_options::none, ec);
  if (ec)
    unreadable.push_back({args[0], ec.message()});
  for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    const fs::path &p = it->path();
    std::string ext = p.extension().string();
    std::error_code sec;
    fs::file_status st = fs::status(p, sec);
    if (sec || !fs::exists(st)) {
      std::error_code lec;
      if (fs::is_symlink(fs::symlink_status(p, lec)))
        unreadable.push_back({p.string(), sec ? "symlink that cannot be followed: " + sec.message()
                                              : "broken symlink"});
      else
        unreadable.push_back({p.string(), sec ? sec.message() : "vanished"});
      continue;
    }
    if (!fs::is_regular_file(st) || (ext != ".mlir" && ext != ".json"))
      continue;
    if (ext == ".json") {
      // Model configurations (planproof plan --model) live beside the specs: a JSON
      // object without the spec format's "planproof" version is not a spec.
      std::string text, err;
      if (readInputFile(p.string(), text, err)) {
        nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
        if (j.is_object() && !j.contains("planproof") && j.contains("layers") && j.contains("hidden"))
          continue;
      }
    }
    files.push_back(p.string());
  }
  if (ec)
    unreadable.push_back({args[0], "cannot list: " + ec.message()});
  std::sort(files.begin(), files.end());
  int passed = 0, failed = 0;
  if (files.empty() && unreadable.empty()) {
    std::cerr << "planproof: error: no specs (.mlir or .json) under '" << args[0] << "'\n";
    return 1;
  }
  bool json = o.format == "json";
  if (o.format == "sarif")
    return usage("check-specs reports as text or json");
  std::string results;
  for (auto &[f, why] : unreadable) {
    ++failed;
    std::cerr << printable(f) << ": error: " << why << "\n";
    if (!json) {
      std::cout << "FAIL " << printable(f) << " unreadable: " << why << "\n";
      continue;
    }
    nlohmann::json entry = {{"spec", f}, {"ok", false}, {"got", "unreadable: " + why},
                            {"expected", "?"}, {"milliseconds", 0}};
    results += std::string(results.empty() ? "" : ",\n") + "    " + entry.dump();
  }
  for (const std::string &f : files) {
    mlir::MLIRContext ctx;
    registerDialects(ctx);
    Spec spec;
    spec.reduceShapes = !o.fullShapes;
    std::string errors;
    std::string got, expected = "?";
    bool match = false;
    double ms = 0;
    bool loaded;
    try {
      loaded = loadSpec(ctx, f, spec, errors);
    } catch (const std::exception &e) {
      loaded = false;
      errors += f + ": error: the spec could not be read: " + e.what() + "\n";
    }
    if (!loaded) {
      got = "bad input";
      std::cerr << printable(errors);
    } else {
      o.verify.deadline = Deadline(o.timeLimit);
      VerifyResult r = verifySpec(spec, o.verify);
      ms = r.stats.milliseconds;
      got = verdictName(r.verdict);
      if (!r.violations.empty())
        got += " [" + r.violations[0].kind + " @ " +
               (r.violations[0].at.empty() ? "-" : r.violations[0].at) + "]";
      const Expectation &e = spec.expect;
      if (!e.present) {
        expected = "no planproof.expect";
      } else {
        expected = e.verdict;
        if (e.verdict == "violated")
          expected += " [" + e.kind + " @ " + normalizeAt(e.at) + "]";
        match = e.verdict == verdictName(r.verdict);
        if (match && e.verdict == "violated")
          match = std::any_of(r.violations.begin(), r.violations.end(), [&](const Violation &v) {
            return v.kind == e.kind && (e.at.empty() || v.at == normalizeAt(e.at));
          });
      }
      if (!match && !json)
        std::cout << renderText(spec, r);
    }
    (match ? passed : failed)++;
    if (json) {
      auto quote = [](const std::string &x) {
        return nlohmann::json(x).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      };
      results += std::string(results.empty() ? "" : ",\n") + "    {\"spec\": " + quote(f) +
                 ", \"ok\": " + (match ? "true" : "false") + ", \"got\": " + quote(got) +
                 ", \"expected\": " + quote(expected) + ", \"milliseconds\": " +
                 std::to_string(ms) + "}";
      continue;
    }
    char line[512];
    std::snprintf(line, sizeof line, "%-4s %-52s %-40s expected %s (%.0f ms)\n",
                  match ? "ok" : "FAIL", f.c_str(), got.c_str(), expected.c_str(), ms);
    std::cout << line;
  }
  if (json)
    std::cout << "{\n  \"results\": [\n" << results << "\n  ],\n  \"passed\": " << passed
              << ",\n  \"failed\": " << failed << "\n}\n";
  else
    std::cout << "check-specs: " << passed << " passed, " << failed << " failed\n";
  return failed ? 1 : 0;
}

int cmdImport(std::vector<std::string> args) {
  if (args.size() != 1)
    return usage("import needs one FILE.json");
  mlir::MLIRContext ctx;
  registerDialects(ctx);
  Spec spec;
  std::string errors;
  if (!loadSpec(ctx, args[0], spec, errors)) {
    std::cerr << errors;
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
        a == "--reference") {
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
  std::string texts[2], errors;
  for (int k = 0; k < 2; ++k)
    if (!readInputFile(files[k], texts[k], errors))
      return badInput(files[k], errors, format);
  if (!opts.referencePath.empty()) {
    if (!readInputFile(opts.referencePath, opts.referenceText, errors))
      return badInput(opts.referencePath, errors, format);
    if (opts.referenceText.empty())
      return badInput(opts.referencePath, opts.referencePath + ": error: empty file\n", format);
  }
  nlohmann::ordered_json spec;
  std::string message;
  XlaImportStatus st = importXla(files[0], texts[0], files[1], texts[1], opts, spec, message);
  if (st == XlaImportStatus::BadInput)
    return badInput(files[0], message + "\n", format);
  if (st == XlaImportStatus::Unsupported) {
    std::cerr << printable(message) << "\n";
    if (format == "json")
      std::cout << nlohmann::ordered_json{{"verdict", "inconclusive"}, {"reason", message}}.dump(2)
                << "\n";
    else
      std::cout << "inconclusive: the import does not cover this program\n";
    return 3;
  }
  std::string text = spec.dump(1) + "\n";
  if (out.empty()) {
    std::cout << text;
    return 0;
  }
  std::ofstream f(out);
  if (!(f << text))
    return usage("cannot write '" + out + "'");
  return 0;
}

int cmdExport(std::vector<std::string> args) {
  if (args.size() != 1)
    return usage("export needs one spec file");
  mlir::MLIRContext ctx;
  registerDialects(ctx);
  Spec spec;
  std::string errors, out;
  if (!loadSpec(ctx, args[0], spec, errors)) {
    std::cerr << errors;
    return 2;
  }
  if (!exportJsonSpec(spec, out, errors)) {
    std::cerr << errors << "\n";
    return 2;
  }
  std::cout << out;
  return 0;
}
} // namespace

/// The whole CLI, callable in-process (the fuzzing harness of the CLI calls it).
int planproof::cliMain(int argc, char **argv, bool watchdog) {
  watchdogEnabled = watchdog;
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty())
    return usage("missing command");
  std::string cmd = args[0];
  args.erase(args.begin());
  if (cmd == "--help" || cmd == "-h" || cmd == "help") {
    std::cout << kUsage;
    return 0;
  }
  if (cmd == "--version") {
    std::cout << "planproof 0.1.0\n";
    return 0;
  }
  try {
    if (cmd == "verify")
      return cmdVerify(args);
    if (cmd == "check-specs")
      return cmdCheckSpecs(args);
    if (cmd == "import")
      return cmdImport(args);
    if (cmd == "export")
      return cmdExport(args);
    if (cmd == "import-xla")
      return cmdImportXla(args);
    if (cmd == "replay")
      return cmdReplay(args);
    if (cmd == "plan")
      return cmdPlan(args);
  } catch (const std::exception &e) {
    std::cerr << "planproof: internal error: " << e.what() << "\n";
    return 3;
  }
  return usage("unknown command '" + cmd + "'");
}

#ifndef PLANPROOF_CLI_NO_MAIN
int main(int argc, char **argv) { return planproof::cliMain(argc, argv, true); }
#endif
