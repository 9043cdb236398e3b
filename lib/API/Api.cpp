//===- Api.cpp - planproof's public C++ API over the library ---------------===//
//
// include/planproof/planproof.h: loading through Spec.h's loaders, verifying through
// verifySpec and the reports, replaying through replaySpec; every internal type
// converted to the API's plain structs, every exception caught here.
//
//===----------------------------------------------------------------------===//
#include "planproof/planproof.h"

#include "API/Policy.h"
#include "Engine/Verifier.h"
#include "LayoutEngine/LayoutEngine.h"
#include "Replay/Replay.h"
#include "Support/Diagnostic.h"
#include "Report/Report.h"
#include "Import/LoadSpec.h"
#include "Plan/PlanGen.h"
#include "Spec/Edit.h"
#include "Spec/Spec.h"

#include "mlir/IR/MLIRContext.h"

#include <cctype>
#include <functional>

using namespace planproof;

namespace planproof {
namespace api {

std::string Location::str() const {
  std::string s = file;
  if (line) {
    s += ":" + std::to_string(line);
    if (column)
      s += ":" + std::to_string(column);
  }
  return s;
}

const char *verdictName(Verdict verdict) {
  return verdict == Verdict::Verified ? "verified"
         : verdict == Verdict::Violated ? "violated"
                                        : "inconclusive";
}

struct Spec::Impl {
  planproof::Spec spec;
  std::string name;
  /// Reads the spec again with its calls kept (Policy.h), for a spec with calls loaded
  /// from a file or text; empty otherwise. Read on the first verify that asks for it.
  std::function<bool(planproof::Spec &, Diagnostics &)> loadKept;
  KeptReading kept;
};

Spec::Spec(std::unique_ptr<Impl> impl) : impl(std::move(impl)) {}
Spec::Spec(Spec &&) noexcept = default;
Spec &Spec::operator=(Spec &&) noexcept = default;
Spec::~Spec() = default;
const std::string &Spec::name() const { return impl->name; }
int64_t Spec::ranks() const { return impl->spec.mesh.numRanks(); }

struct Session::Impl {
  /// Without MLIR's thread pool: planproof's engines run their own threads per call, and
  /// a process forked after a Session was used (Python's multiprocessing) must find no
  /// pool threads it does not have.
  mlir::MLIRContext ctx{mlir::MLIRContext::Threading::DISABLED};
  /// The layout engine's reference states and plan states, kept between verifications
  /// of specs sharing a reference (a planner's candidates).
  LayoutCache layouts;
  /// The element engine's pool and reference run, likewise (Engine/Verifier.h).
  ElementCache elements;
  Impl() { registerDialects(ctx); }
};

Session::Session() : impl(std::make_unique<Impl>()) {}
Session::~Session() = default;

namespace {

/// The first of a loader's errors as an Error, with the text of all of them; at `name`
/// when there is none.
// Every string the API returns is UTF-8 (validUtf8): a spec's names may not be.
Location location(const SourceLoc &loc) { return {validUtf8(loc.file), loc.line, loc.col}; }

std::vector<std::string> utf8All(const std::vector<std::string> &in) {
  std::vector<std::string> out;
  for (const std::string &s : in)
    out.push_back(validUtf8(s));
  return out;
}

std::vector<std::pair<std::string, double>> utf8All(
    const std::vector<std::pair<std::string, double>> &in) {
  std::vector<std::pair<std::string, double>> out;
  for (auto &[s, v] : in)
    out.push_back({validUtf8(s), v});
  return out;
}

/// The first of a loader's errors as an Error, with the text of all of them; at `name`
/// when there is none.
Error toError(const std::string &name, const Diagnostics &errors) {
  Error e;
  e.diagnostics = validUtf8(errors.str());
  e.at.file = validUtf8(name);
  if (errors.empty()) {
    e.message = "the spec could not be loaded";
    return e;
  }
  e.message = validUtf8(errors.list().front().message);
  e.at = location(errors.list().front().at);
  return e;
}

Finding toFinding(const planproof::Violation &v) {
  Finding f;
  f.kind = v.kind;
  f.message = validUtf8(v.message);
  f.hint = validUtf8(v.hint);
  f.at = location(v.location);
  f.op = validUtf8(v.at);
  f.value = validUtf8(v.value);
  f.ranks = utf8All(v.ranks);
  f.notes = utf8All(v.notes);
  if (v.hasCounterexample) {
    const planproof::Counterexample &c = v.counterexample;
    f.counterexample = api::Counterexample{validUtf8(c.element), utf8All(c.inputs), c.reference,
                                           c.plan, utf8All(c.rankValues)};
  }
  return f;
}

bool endsWith(const std::string &s, const std::string &tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

} // namespace

Expected<Spec> Session::loadWith(const std::string &name, const std::string &diagnosed,
                                 const Options &options,
                                 const std::function<bool(planproof::Spec &, Diagnostics &)> &load) {
  auto impl = std::make_unique<Spec::Impl>();
  impl->name = name;
  impl->spec.reduceShapes = !options.fullShapes;
  Diagnostics errors;
  bool ok;
  try {
    ok = load(impl->spec, errors);
  } catch (const std::exception &e) {
    ok = errors.error({diagnosed}, std::string("the spec could not be read: ") + e.what());
  }
  if (!ok)
    return toError(diagnosed, errors);
  return Spec(std::move(impl));
}

Expected<Spec> Session::load(const std::string &path, const Options &options) {
  Expected<Spec> out = loadWith(path, path, options, [&](planproof::Spec &spec, Diagnostics &errors) {
    return loadSpec(impl->ctx, path, spec, errors);
  });
  // A spec with calls can be read again with its calls kept (Policy.h).
  if (out && !endsWith(path, ".json") && !out->impl->spec.functionAt.empty())
    out->impl->loadKept = [ctx = &impl->ctx, path](planproof::Spec &spec, Diagnostics &errors) {
      return loadSpec(*ctx, path, spec, errors);
    };
  return out;
}

Expected<Spec> Session::loadText(const std::string &name, const std::string &text,
                                 const Options &options) {
  size_t first = text.find_first_not_of(" \t\r\n");
  bool json = endsWith(name, ".json") || (first != std::string::npos && text[first] == '{');
  // The loader tells the syntax by the name's extension.
  std::string as = json && !endsWith(name, ".json") ? name + ".json" : name;
  Expected<Spec> out = loadWith(name, as, options, [&](planproof::Spec &spec, Diagnostics &errors) {
    return loadSpecText(impl->ctx, as, text, spec, errors);
  });
  if (out && !json && !out->impl->spec.functionAt.empty())
    out->impl->loadKept = [ctx = &impl->ctx, as, text](planproof::Spec &spec, Diagnostics &errors) {
      return loadSpecText(*ctx, as, text, spec, errors);
    };
  return out;
}

Expected<Spec> Session::loadPlan(const Spec &base, const std::string &name,
                                 const std::string &planText, const Options &options) {
  return loadWith(name, name, options, [&](planproof::Spec &spec, Diagnostics &errors) {
    spec.reduceShapes = base.impl->spec.reduceShapes;
    return loadPlanWithReference(impl->ctx, base.impl->spec, name, planText, spec, errors);
  });
}

Expected<std::vector<PlanEdit>> Session::edit(Spec &spec, const std::vector<PlanEdit> &edits) {
  std::vector<AttributeEdit> in, undo;
  for (const PlanEdit &e : edits)
    in.push_back({e.value, e.attribute, e.to});
  Diagnostics errors;
  bool ok;
  try {
    ok = editPlan(spec.impl->spec, in, undo, errors);
  } catch (const std::exception &e) {
    ok = errors.error({spec.name()}, std::string("the plan could not be edited: ") + e.what());
  }
  if (!ok)
    return toError(spec.name(), errors);
  // The text the kept reading would read is no longer the spec.
  spec.impl->loadKept = nullptr;
  spec.impl->kept = KeptReading();
  std::vector<PlanEdit> out;
  for (const AttributeEdit &e : undo)
    out.push_back({e.value, e.attribute, e.to});
  return out;
}

static_assert(api::kDefaultSolverBudget == planproof::kDefaultSolverBudget &&
                  api::kSolverUnitsPerMs == planproof::kSolverUnitsPerMs,
              "the public budgets are the library's");

Result Session::verify(const Spec &spec, const Options &options) {
  VerifyOptions vo;
  vo.deadline = Deadline(options.timeLimitSeconds).withInterrupt(options.interrupt);
  vo.threads = options.threads;
  vo.solverBudget = options.solverBudget;
  vo.checkFixes = options.checkFixes;
  vo.proofTrace = options.explainProof;
  Spec::Impl &si = *spec.impl;
  SpecReadings readings;
  if (si.loadKept)
    readings.kept = [&] { return readKept(si.kept, si.spec.reduceShapes, si.loadKept); };
  readings.expanded = [&] { return &si.spec; };
  EngineChoice engine = options.engine == Options::Engine::Element  ? EngineChoice::Element
                        : options.engine == Options::Engine::Layout ? EngineChoice::Layout
                                                                    : EngineChoice::Auto;
  Decision d = decideSpec(readings, engine, vo, {&impl->layouts, &impl->elements});
  const VerifyResult &r = d.result;
  const planproof::Spec &read = *d.read;
  Result out;
  out.verdict = r.verdict == planproof::Verdict::Verified   ? Verdict::Verified
                : r.verdict == planproof::Verdict::Violated ? Verdict::Violated
                                                            : Verdict::Inconclusive;
  for (const planproof::Violation &v : r.violations)
    out.violations.push_back(toFinding(v));
  for (const planproof::Violation &v : r.warnings)
    out.warnings.push_back(toFinding(v));
  for (auto &[loc, why] : r.inconclusiveReasons)
    out.inconclusive.push_back({location(loc), validUtf8(why)});
  out.assumptions = utf8All(read.assumptions);
  for (const VerifyResult::Proof &p : r.proof) {
    Proof q{validUtf8(p.output), p.engine, {}};
    for (const VerifyResult::ProofRule &k : p.rules)
      q.rules.push_back({validUtf8(k.rule), k.count});
    out.proof.push_back(std::move(q));
  }
  const VerifyStats &s = r.stats;
  out.stats = {s.obligations, s.decidedCanonical, s.solverQueries, s.ranks,
               s.referenceOps, s.planOps,     s.milliseconds, s.reusedStates,
               s.reusedReference};
  out.text = validUtf8(renderText(read, r));
  out.json = validUtf8(renderJson(read, r));
  out.html = validUtf8(renderHtml(read, r));
  return out;
}

Expected<ReplayResult> Session::replay(const Spec &spec, const ReplayOptions &options) {
  planproof::ReplayOptions ro;
  const std::string &d = options.dtype, &o = options.order;
  if (d != "fp32" && d != "bf16" && d != "fp64")
    return Error{"unknown dtype '" + d + "' (fp64, fp32, bf16)", {spec.name()}, ""};
  if (o != "rank" && o != "ring" && o != "tree")
    return Error{"unknown reduction order '" + o + "' (rank, ring, tree)", {spec.name()}, ""};
  ro.dtype = d == "fp32" ? ReplayDtype::F32 : d == "bf16" ? ReplayDtype::BF16 : ReplayDtype::F64;
  ro.order = o == "rank" ? ReduceOrder::Rank : o == "ring" ? ReduceOrder::Ring : ReduceOrder::Tree;
  ro.seed = options.seed;
  ro.localize = options.localize;
  ro.deadline = Deadline(options.timeLimitSeconds).withInterrupt(options.interrupt);
  planproof::ReplayResult r;
  try {
    r = replaySpec(spec.impl->spec, ro);
  } catch (const std::exception &e) {
    r.ran = false;
    r.failure = std::string("internal error: ") + e.what();
  }
  ReplayResult out;
  out.ran = r.ran;
  out.failure = validUtf8(r.failure);
  out.diverged = r.diverged();
  out.seed = r.seed;
  for (const planproof::ReplayOutput &x : r.outputs)
    out.outputs.push_back({validUtf8(x.name), x.within, x.maxAbsError, x.maxRelError});
  if (r.first.found) {
    out.firstOp = validUtf8(r.first.op);
    out.firstAt = location(r.first.location);
  }
  out.firstNote = validUtf8(r.first.note);
  return out;
}

Expected<std::string> generatePlan(const std::string &modelPath, const std::string &parallel) {
  plangen::Model m;
  plangen::Parallel p;
  Diagnostics errors;
  if (!plangen::readModel(modelPath, m, errors))
    return toError(modelPath, errors);
  std::string err, text;
  Error e;
  if (!plangen::parseParallel(parallel, p, err)) {
    e.message = err;
    e.diagnostics = "error: " + err + "\n";
    return e;
  }
  e.at.file = modelPath;
  try {
    if (plangen::generate(m, p, text, err))
      return text;
    e.message = "cannot generate this configuration: " + err;
    e.diagnostics = modelPath + ": error: " + e.message + "\n";
  } catch (const std::exception &x) {
    e.message = std::string("internal error: ") + x.what();
  }
  return e;
}

} // namespace api
} // namespace planproof
