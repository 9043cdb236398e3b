//===- CmdReplay.cpp - planproof replay -------------------------*- C++ -*-===//
//
// planproof replay SPEC [options]: the reference and the plan on numbers
// (lib/Replay/Replay.h, docs/replay.md). Parsing, loading at the chosen shapes, the
// counterexample cross-check, and the two report formats, one function each.
//
//===----------------------------------------------------------------------===//
#include "Cli.h"

#include "Import/JsonImport.h"
#include "Import/LoadSpec.h"
#include "Device/Device.h"
#include "Replay/Replay.h"
#include "Report/Report.h"
#include "Spec/Spec.h"
#include "Support/Input.h"

#include "llvm/ADT/STLExtras.h"

#include <cstdlib>
#include <iostream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

using namespace planproof;
using namespace planproof::cli;

namespace {
/// What `planproof replay` was asked to do.
struct ReplayArgs {
  ReplayOptions ro;
  std::string format = "text", backend = "cpu", ranks = "virtual";
  std::string shape = "reduced", inputsDir;
  std::vector<std::string> positional;
  bool checkCx = false, ncclSmoke = false;
  double timeLimit = kDefaultTimeLimit;
};

/// One option that takes a value; "" or the usage error.
std::string parseValued(const std::string &a, const std::string &v, ReplayArgs &r) {
  ReplayOptions &ro = r.ro;
  if (a == "--dtype") {
    if (v != "fp32" && v != "bf16" && v != "fp64")
      return "unknown dtype '" + v + "' (expected fp32, bf16 or fp64)";
    ro.dtype = v == "fp32" ? ReplayDtype::F32 : v == "bf16" ? ReplayDtype::BF16 : ReplayDtype::F64;
  } else if (a == "--order") {
    if (v != "rank" && v != "ring" && v != "tree")
      return "unknown reduction order '" + v + "' (expected rank, ring or tree)";
    ro.order = v == "rank" ? ReduceOrder::Rank : v == "ring" ? ReduceOrder::Ring : ReduceOrder::Tree;
  } else if (a == "--seed") {
    // (strtoull takes "-1" as 2^64 - 1: digits only, and in range.)
    char *end = nullptr;
    errno = 0;
    unsigned long long n = std::strtoull(v.c_str(), &end, 10);
    if (v.empty() || !std::isdigit((unsigned char)v[0]) || *end || errno)
      return "--seed needs a non-negative integer below 2^64";
    ro.seed = n;
  } else if (a == "--format") {
    if (v != "text" && v != "json" && v != "html")
      return "unknown format '" + v + "' (expected text, json or html)";
    r.format = v;
  } else if (a == "--shape") {
    r.shape = v;
  } else if (a == "--inputs") {
    r.inputsDir = v;
  } else if (a == "--ranks") {
    if (v != "virtual" && v != "nccl")
      return "unknown ranks '" + v + "' (expected virtual or nccl)";
    r.ranks = v;
  } else {
    if (v != "cpu" && v != "cuda" && v != "emulated")
      return "unknown backend '" + v + "' (expected cpu, cuda or emulated)";
    r.backend = v;
  }
  return "";
}

/// Parses the command line; "" or the usage error.
std::string parseReplayArgs(const std::vector<std::string> &args, ReplayArgs &r) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string &a = args[i];
    if (a == "--check-counterexamples") {
      r.checkCx = true;
    } else if (a == "--nccl-smoke") {
      r.ncclSmoke = true;
    } else if (a == "--no-localize") {
      r.ro.localize = false;
    } else if (a == "--time-limit") {
      if (i + 1 >= args.size() || !parseSeconds(args[++i], r.timeLimit))
        return "--time-limit needs a number of seconds in (0, 86400]";
    } else if (a == "--dtype" || a == "--order" || a == "--seed" || a == "--format" ||
               a == "--backend" || a == "--shape" || a == "--inputs" || a == "--ranks") {
      if (i + 1 >= args.size())
        return a + " needs a value";
      std::string err = parseValued(a, args[++i], r);
      if (!err.empty())
        return err;
    } else if (a.rfind("--", 0) == 0) {
      return "unknown option '" + a + "'";
    } else {
      r.positional.push_back(a);
    }
  }
  return "";
}

/// --shape NAME=SIZE,...: the sizes of a parametric spec's symbols; "" or the error.
std::string parseShapeSizes(const std::string &shape, std::map<std::string, int64_t> &dims) {
  if (shape == "reduced" || shape == "full")
    return "";
  std::stringstream ss(shape);
  std::string item;
  while (std::getline(ss, item, ',')) {
    auto eq = item.find('=');
    char *end = nullptr;
    long long n = eq == std::string::npos ? 0 : std::strtoll(item.c_str() + eq + 1, &end, 10);
    if (eq == std::string::npos || eq == 0 || !end || *end || n < 1 || n > (1ll << 31))
      return "--shape takes reduced, full, or NAME=SIZE,... (got '" + item + "')";
    dims[item.substr(0, eq)] = n;
  }
  return "";
}

/// Loads the spec at the shapes --shape asks for. Returns -1 when loaded, else the
/// exit status (bad input or usage) after saying why.
int loadAtShapes(mlir::MLIRContext &ctx, const ReplayArgs &r, Spec &spec) {
  const std::string &path = r.positional[0];
  std::map<std::string, int64_t> dims;
  std::string err = parseShapeSizes(r.shape, dims);
  if (!err.empty())
    return usage(err);
  spec.reduceShapes = r.shape == "reduced";
  Diagnostics errors;
  bool loaded;
  try {
    if (dims.empty()) {
      loaded = loadSpec(ctx, path, spec, errors);
    } else {
      if (path.size() < 5 || path.substr(path.size() - 5) != ".json")
        return usage("--shape NAME=SIZE applies to parametric JSON specs (\"dims\")");
      std::string text;
      spec.path = path;
      loaded = readInputFile(path, text, errors) &&
               checkNesting(path, text, Syntax::Json, errors) &&
               importJsonText(ctx, path, text, spec, &dims, errors) && analyzeSpec(spec, errors);
      if (loaded)
        for (auto &[n, v] : dims)
          if (!llvm::any_of(spec.reducedDims, [&](const ReducedDim &d) { return d.name == n; }))
            return usage("--shape: the spec has no dimension '" + n + "'");
    }
  } catch (const std::exception &e) {
    loaded = errors.error({path}, std::string("the spec could not be read: ") + e.what());
  }
  if (!loaded)
    return badInput(path, errors, r.format);
  return -1;
}

/// --check-counterexamples: each counterexample the verifier reports, run concretely.
int checkCounterexamples(const Spec &spec, const std::string &path, const Deadline &deadline) {
  VerifyOptions vo;
  vo.deadline = deadline;
  vo.checkFixes = false; // only the counterexamples are checked here
  VerifyResult v = verifySpec(spec, vo);
  int refuted = 0, confirmed = 0;
  for (const Violation &viol : v.violations) {
    if (!viol.hasCounterexample)
      continue;
    CounterexampleCheck c = checkCounterexample(spec, viol.counterexample);
    refuted += c.status == "refuted";
    confirmed += c.status == "confirmed";
    std::cout << path << ": counterexample for `" << viol.counterexample.element << "` ("
              << viol.kind << " at " << (viol.at.empty() ? "-" : viol.at) << "): " << c.status
              << " -- " << c.detail << "\n";
  }
  std::cout << path << ": " << confirmed << " counterexamples confirmed, " << refuted
            << " refuted\n";
  return refuted ? 1 : 0;
}

void renderReplayJson(const ReplayArgs &a, const ReplayResult &r) {
  const ReplayOptions &ro = a.ro;
  nlohmann::ordered_json j = {{"spec", a.positional[0]},
                              {"backend", a.backend},
                              {"dtype", dtypeName(ro.dtype)},
                              {"order", ro.ranks == ReplayRanks::Nccl ? "nccl" : orderName(ro.order)},
                              {"seed", r.seed},
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
  const ReplayDivergence &f = r.first;
  if (f.found)
    j["first_divergence"] = {{"explanation", f.note},
                             {"location", {{"file", f.location.file},
                                           {"line", f.location.line},
                                           {"col", f.location.col}}},
                             {"op", f.op},
                             {"holds", f.value},
                             {"rank", f.rank},
                             {"local", f.local},
                             {"element", f.global},
                             {"plan", f.plan},
                             {"reference", f.reference},
                             {"tolerance", f.tolerance},
                             {"by", f.byLayouts ? "layout engine" : "element engine"},
                             {"why", f.why}};
  else if (r.diverged())
    j["first_divergence"] = {{"note", f.note}};
  if (f.found && !f.earlierOp.empty())
    j["first_divergence"]["earlier_departure"] = {
        {"op", f.earlierOp},
        {"location", {{"file", f.earlierLocation.file},
                      {"line", f.earlierLocation.line},
                      {"col", f.earlierLocation.col}}},
        {"explanation", f.earlierNote}};
  std::cout << jsonEscapeHidden(j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace)) << "\n";
}

/// One output's line of the text report.
std::string outputLine(const ReplayOutput &o) {
  std::ostringstream line;
  line << "  " << (o.within ? "ok      " : "DIVERGED") << " " << o.name << ": ";
  if (!o.note.empty())
    return line.str() + o.note;
  line.precision(3);
  line << "max abs error " << o.maxAbsError << ", max rel error " << o.maxRelError
       << "; worst element " << o.name << indexStr(o.worst) << " on " << o.worstRank << ": plan "
       << o.worstPlan << " vs reference " << o.worstReference << " (error " << o.worstError
       << ", tolerance " << o.worstTolerance << ")";
  if (o.undefined)
    line << "; " << o.undefined << " elements not compared (the reference is not finite "
                                   "there at these inputs)";
  return line.str();
}

/// The first divergence as a diagnostic in the verifier's format.
std::string divergenceLine(const ReplayDivergence &f) {
  std::ostringstream d;
  d.precision(6);
  if (f.op.empty())
    d << f.location.str() << ": error: " << f.note;
  else if (f.byLayouts)
    d << f.location.str() << ": error: [numerics] the outputs diverge; " << f.why
      << "; the layout engine finds where the plan departs: " << f.note;
  else if (!f.value.empty())
    d << f.location.str() << ": error: [numerics] first divergence: `" << f.op
      << "` holds reference `" << f.value << "`, but on rank " << f.rank << " its element "
      << indexStr(f.local) << " (" << f.value << indexStr(f.global) << ") is " << f.plan
      << " against " << f.reference << " (tolerance " << f.tolerance << ")";
  else
    d << f.location.str() << ": error: [numerics] first divergence at `" << f.op
      << "`: every earlier value that holds a reference value is within tolerance, and "
         "this op's result holds none; the verifier says: "
      << f.note;
  return d.str();
}

void renderReplayText(const ReplayArgs &a, const Spec &spec, const ReplayResult &r) {
  const std::string &path = a.positional[0];
  const ReplayOptions &ro = a.ro;
  for (const ReplayOutput &o : r.outputs)
    std::cout << outputLine(o) << "\n";
  if (r.first.found) {
    std::cout << divergenceLine(r.first) << "\n";
    std::string line = spec.snippet(r.first.location);
    if (!line.empty())
      std::cout << line << "\n";
    if (!r.first.earlierOp.empty())
      std::cout << r.first.earlierLocation.str()
                << ": note: the plan departs earlier, where no value is compared (the "
                   "layout engine): " << r.first.earlierNote << "\n";
  } else if (r.diverged()) {
    std::cout << path << ": note: " << r.first.note << "\n";
  }
  std::cout << path << ": " << (r.diverged() ? "diverged" : "within tolerance") << " -- "
            << dtypeName(ro.dtype) << ", "
            << (ro.ranks == ReplayRanks::Nccl ? std::string("NCCL") : orderName(ro.order))
            << "-order collectives, seed " << r.seed << ", " << r.device;
  if (!r.loadedInputs.empty()) {
    std::cout << "; inputs from files:";
    for (const std::string &n : r.loadedInputs)
      std::cout << " " << n;
  }
  std::cout << "\n";
}

int ncclSmoke(const ReplayArgs &a) {
  if (!a.positional.empty())
    return usage("--nccl-smoke takes no SPEC");
  std::string report, err = kernels::ncclSmokeTest(report);
  std::cout << "nccl smoke test: " << report << "\n";
  if (!err.empty()) {
    std::cerr << "planproof: could not run: " << err << "\n";
    return 3;
  }
  return 0;
}
} // namespace

int planproof::cli::cmdReplay(std::vector<std::string> args) {
  ReplayArgs a;
  std::string err = parseReplayArgs(args, a);
  if (!err.empty())
    return usage(err);
  if (a.ncclSmoke)
    return ncclSmoke(a);
  if (a.positional.size() != 1)
    return usage("replay needs one SPEC file");
  ReplayOptions &ro = a.ro;
  ro.backend = a.backend == "cpu"    ? ReplayBackend::Cpu
               : a.backend == "cuda" ? ReplayBackend::Cuda
                                     : ReplayBackend::Emulated;
  ro.ranks = a.ranks == "nccl" ? ReplayRanks::Nccl : ReplayRanks::Virtual;
  ro.deadline = Deadline(a.timeLimit);
  Watchdog watchdog(a.timeLimit, a.format, a.positional[0]);
  if (ro.ranks == ReplayRanks::Nccl && ro.backend != ReplayBackend::Cuda)
    return usage("--ranks nccl needs --backend cuda");
  mlir::MLIRContext ctx;
  registerDialects(ctx);
  Spec spec;
  int status = loadAtShapes(ctx, a, spec);
  if (status >= 0)
    return status;
  ro.progress = true;
  if (a.checkCx)
    return checkCounterexamples(spec, a.positional[0], ro.deadline);
  if (!a.inputsDir.empty()) {
    Diagnostics npyErrors;
    if (!loadNpyInputs(spec, a.inputsDir, ro, npyErrors))
      return badInput(a.inputsDir, npyErrors, a.format);
  }
  ReplayResult r = replaySpec(spec, ro);
  if (!r.ran) {
    std::cerr << (r.failureAt.known() ? r.failureAt.str() : a.positional[0])
              << ": could not run: " << r.failure << "\n";
    return 3;
  }
  if (a.format == "json")
    renderReplayJson(a, r);
  else if (a.format == "html")
    std::cout << renderReplayHtml(spec, r,
                                  std::string(dtypeName(ro.dtype)) + ", " +
                                      (ro.ranks == ReplayRanks::Nccl ? std::string("NCCL")
                                                                     : orderName(ro.order)) +
                                      "-order collectives, seed " + std::to_string(r.seed));
  else
    renderReplayText(a, spec, r);
  return r.diverged() ? 1 : 0;
}
