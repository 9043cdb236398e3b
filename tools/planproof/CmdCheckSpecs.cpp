//===- CmdCheckSpecs.cpp - planproof check-specs ----------------*- C++ -*-===//
//
// planproof check-specs PATH... [--cross-check]: every spec under the given
// directories (and every spec file given) verified against the verdict it states
// (planproof.expect). With --cross-check, each spec's one verification also feeds the
// numeric cross-checks of the verifier (docs/replay.md): every counterexample it
// reports is run concretely, the replay agrees with the verdict, and the kernel
// backend (emulated on the host) agrees with the CPU replay -- so the catalogue is
// verified once for all of these purposes.
//
//===----------------------------------------------------------------------===//
#include "Cli.h"

#include "Replay/Replay.h"
#include "Report/Report.h"
#include "Import/LoadSpec.h"
#include "Spec/Spec.h"
#include "Support/Input.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include <nlohmann/json.hpp>

using namespace planproof;
using namespace planproof::cli;
namespace fs = std::filesystem;

namespace {
struct CheckArgs {
  Options o;
  bool crossCheck = false;
  std::vector<std::string> paths;
};

/// The spec files to check, sorted, and what could not be read. Every entry is either
/// checked or reported: a broken or looping symlink, an unreadable file or directory is
/// a failure, never silently skipped.
struct Collected {
  std::vector<std::string> files;
  std::vector<std::pair<std::string, std::string>> unreadable;
};

/// A model configuration (planproof plan --model) beside the specs: a JSON object
/// without the spec format's "planproof" version is not a spec.
bool isModelConfig(const fs::path &p) {
  std::string text;
  Diagnostics ignored;
  if (!readInputFile(p.string(), text, ignored))
    return false;
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  return j.is_object() && !j.contains("planproof") && j.contains("layers") && j.contains("hidden");
}

void collectDirectory(const std::string &dir, Collected &c) {
  std::error_code ec;
  auto it = fs::recursive_directory_iterator(dir, fs::directory_options::none, ec);
  if (ec)
    c.unreadable.push_back({dir, ec.message()});
  for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    const fs::path &p = it->path();
    std::string ext = p.extension().string();
    std::error_code sec;
    fs::file_status st = fs::status(p, sec);
    if (sec || !fs::exists(st)) {
      std::error_code lec;
      if (fs::is_symlink(fs::symlink_status(p, lec)))
        c.unreadable.push_back({p.string(), sec ? "symlink that cannot be followed: " + sec.message()
                                                : "broken symlink"});
      else
        c.unreadable.push_back({p.string(), sec ? sec.message() : "vanished"});
      continue;
    }
    if (!fs::is_regular_file(st) || (ext != ".mlir" && ext != ".json" && ext != ".plan"))
      continue;
    if (ext == ".json" && isModelConfig(p))
      continue;
    c.files.push_back(p.string());
  }
  if (ec)
    c.unreadable.push_back({dir, "cannot list: " + ec.message()});
}

/// The outcome of one replay, as planproof replay's exit status names it.
std::string outcome(const ReplayResult &r) {
  return !r.ran ? "could not run" : r.diverged() ? "diverged" : "within tolerance";
}

/// The numeric cross-checks of one verified spec (see the file comment).
struct CrossCheck {
  bool ok = true;
  std::string summary;
  void add(const std::string &what, bool good = true) {
    summary += (summary.empty() ? "" : "; ") + what;
    ok = ok && good;
  }
};

CrossCheck crossCheck(const Spec &spec, const std::string &path, const VerifyResult &r,
                      double timeLimit) {
  CrossCheck cc;
  int confirmed = 0, notReplayable = 0;
  for (const Violation &v : r.violations) {
    if (!v.hasCounterexample)
      continue;
    CounterexampleCheck c = checkCounterexample(spec, v.counterexample);
    confirmed += c.status == "confirmed";
    notReplayable += c.status == "not replayable";
    if (c.status == "refuted")
      cc.add("REFUTED counterexample for `" + v.counterexample.element + "` (" + v.kind + "): " +
                 c.detail,
             false);
  }
  if (confirmed || notReplayable)
    cc.add("counterexamples: " + std::to_string(confirmed) + " confirmed" +
           (notReplayable ? ", " + std::to_string(notReplayable) + " not replayable" : ""));
  auto replay = [&](ReplayBackend b) {
    ReplayOptions ro;
    ro.backend = b;
    ro.localize = false; // only the verdict is compared
    ro.deadline = Deadline(timeLimit);
    return replaySpec(spec, ro);
  };
  ReplayResult cpu = replay(ReplayBackend::Cpu);
  std::string seen = outcome(cpu);
  if (r.verdict == Verdict::Verified && seen == "diverged") {
    cc.add("CONTRADICTED: the replay diverges from what the verifier proves", false);
  } else if (r.verdict == Verdict::Violated && seen == "within tolerance") {
    std::string text;
    Diagnostics ignored;
    bool documented = readInputFile(path, text, ignored) &&
                      text.find("REPLAY: invisible to numerics") != std::string::npos;
    cc.add(documented ? "replay within tolerance (the spec documents why numerics cannot see "
                        "the bug)"
                      : "UNSEEN: the replay does not see the bug the verifier reports",
           documented);
  } else {
    cc.add("replay " + seen);
  }
  ReplayResult emulated = replay(ReplayBackend::Emulated);
  if (!emulated.ran && emulated.failure.find("not replayed by the kernel backend yet") !=
                           std::string::npos)
    cc.add("kernel backend: not yet (two-step spec)");
  else if (outcome(emulated) != seen)
    cc.add("DISAGREE: the kernel backend's replay " + outcome(emulated) +
               (emulated.ran ? "" : " (" + emulated.failure + ")"),
           false);
  else
    cc.add("kernel backend agrees");
  return cc;
}

/// A JSON string (invalid UTF-8 replaced).
std::string quote(const std::string &x) {
  return jsonEscapeHidden(nlohmann::json(x).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

/// One spec against its expectation (and its cross-checks); prints its report line.
bool checkOne(const std::string &f, CheckArgs &a, std::string &jsonEntry) {
  Options &o = a.o;
  mlir::MLIRContext ctx;
  registerDialects(ctx);
  Spec spec;
  spec.reduceShapes = !o.fullShapes;
  Diagnostics errors;
  std::string got, expected = "?";
  bool match = false, loaded;
  double ms = 0;
  uint64_t solverWork = 0, solverWorkMax = 0;
  CrossCheck cc;
  try {
    loaded = loadSpec(ctx, f, spec, errors);
  } catch (const std::exception &e) {
    loaded = errors.error({f}, std::string("the spec could not be read: ") + e.what());
  }
  if (!loaded) {
    got = "bad input";
    std::cerr << printable(errors.str());
  } else {
    o.verify.deadline = Deadline(o.timeLimit);
    // A generated spec states the engine its expectation is for (a production-sized
    // plan: the layout engine's places).
    Options run = o;
    if (!spec.expect.engine.empty())
      run.engine = spec.expect.engine;
    // As `planproof verify` decides it (API/Policy.h); the spec read with its calls
    // kept only where it has calls.
    KeptReading kept;
    SpecReadings readings;
    if (!spec.functionAt.empty() && !llvm::StringRef(f).ends_with(".json"))
      readings.kept = [&] {
        return readKept(kept, spec.reduceShapes, [&](Spec &s, Diagnostics &e) {
          return loadSpec(ctx, f, s, e);
        });
      };
    readings.expanded = [&] { return &spec; };
    Decision d = decideWith(readings, run);
    VerifyResult &r = d.result;
    ms = r.stats.milliseconds;
    solverWork = r.stats.solverWork;
    solverWorkMax = r.stats.solverWorkMax;
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
      if (match && e.atLine > 0) { // the first place is the seeded bug's op
        bool at = !r.inconclusiveReasons.empty() &&
                  (int)r.inconclusiveReasons[0].first.line == e.atLine;
        match = at;
        expected += " at " + e.at + " (line " + std::to_string(e.atLine) + ")";
        if (!r.inconclusiveReasons.empty())
          got += " at line " + std::to_string(r.inconclusiveReasons[0].first.line);
      }
      if (match && e.verdict == "violated")
        match = std::any_of(r.violations.begin(), r.violations.end(), [&](const Violation &v) {
          return v.kind == e.kind && (e.at.empty() || v.at == normalizeAt(e.at));
        });
    }
    // The layout engine alone proves or says it cannot; it agrees with the catalogue
    // when it proves only what is expected verified.
    if (!match && o.engine == "layout" && r.verdict == Verdict::Inconclusive &&
        e.present && e.verdict != "inconclusive") {
      match = true;
      got = "not decided by the layout engine";
    }
    if (!match && o.format != "json")
      std::cout << renderText(*d.read, r);
    // Numeric cross-checks run every rank on every element: not for production-sized
    // generated specs, which state another engine.
    if (a.crossCheck && run.engine == o.engine)
      cc = crossCheck(spec, f, r, o.timeLimit);
  }
  bool ok = match && cc.ok;
  if (o.format == "json") {
    jsonEntry = "{\"spec\": " + quote(f) + ", \"ok\": " + (ok ? "true" : "false") +
                ", \"got\": " + quote(got) + ", \"expected\": " + quote(expected) +
                ", \"milliseconds\": " + std::to_string(ms) +
                ", \"solver_work\": " + std::to_string(solverWork) +
                ", \"solver_work_max\": " + std::to_string(solverWorkMax);
    if (a.crossCheck && loaded)
      jsonEntry += std::string(", \"cross_check\": {\"ok\": ") + (cc.ok ? "true" : "false") +
                   ", \"summary\": " + quote(cc.summary) + "}";
    jsonEntry += "}";
    return ok;
  }
  // One line per spec, whatever its name and expectation hold (Printable.h).
  auto padded = [](std::string t, size_t width) {
    return t.size() < width ? t + std::string(width - t.size(), ' ') : t;
  };
  char ms_[32];
  std::snprintf(ms_, sizeof ms_, "%.0f", ms);
  std::cout << padded(match ? "ok" : "FAIL", 4) << " " << padded(printable(f, false), 52) << " "
            << padded(printable(got, false), 40) << " expected " << printable(expected, false)
            << " (" << ms_ << " ms)\n";
  if (a.crossCheck && loaded)
    std::cout << (cc.ok ? "     " : "FAIL ") << "cross-check: " << printable(cc.summary, false)
              << "\n";
  return ok;
}

/// Parses the command line; "" or the usage error.
std::string parseCheckArgs(std::vector<std::string> args, CheckArgs &a) {
  std::string err;
  if (!parseCommon(args, a.o, err))
    return err;
  if (a.o.format == "sarif" || a.o.format == "html")
    return "check-specs reports as text or json";
  for (const std::string &s : args) {
    if (s == "--cross-check")
      a.crossCheck = true;
    else if (s.rfind("--", 0) == 0)
      return "unknown option '" + s + "'";
    else
      a.paths.push_back(s);
  }
  if (a.paths.empty())
    return "check-specs needs a directory or spec files";
  return "";
}
} // namespace

int planproof::cli::cmdCheckSpecs(std::vector<std::string> args) {
  CheckArgs a;
  std::string err = parseCheckArgs(args, a);
  if (!err.empty())
    return usage(err);
  Collected c;
  for (const std::string &p : a.paths) {
    std::error_code ec;
    if (fs::is_directory(p, ec))
      collectDirectory(p, c);
    else if (fs::is_regular_file(p, ec))
      c.files.push_back(p);
    else
      return usage("'" + p + "' is not a directory or a spec file");
  }
  std::sort(c.files.begin(), c.files.end());
  if (c.files.empty() && c.unreadable.empty()) {
    std::cerr << "planproof: error: no specs (.mlir, .json or .plan) under '" << a.paths[0] << "'\n";
    return 1;
  }
  bool json = a.o.format == "json";
  int passed = 0, failed = 0;
  std::vector<std::string> entries;
  for (auto &[f, why] : c.unreadable) {
    ++failed;
    std::cerr << printable(f, false) << ": error: " << printable(why, false) << "\n";
    if (json)
      entries.push_back("{\"spec\": " + quote(f) + ", \"ok\": false, \"got\": " +
                        quote("unreadable: " + why) + ", \"expected\": \"?\", \"milliseconds\": 0}");
    else
      std::cout << "FAIL " << printable(f, false) << " unreadable: " << printable(why, false) << "\n";
  }
  for (const std::string &f : c.files) {
    std::string entry;
    (checkOne(f, a, entry) ? passed : failed)++;
    if (json)
      entries.push_back(entry);
  }
  if (json) {
    std::cout << "{\n  \"results\": [\n";
    for (size_t i = 0; i < entries.size(); ++i)
      std::cout << "    " << entries[i] << (i + 1 < entries.size() ? ",\n" : "\n");
    std::cout << "  ],\n  \"passed\": " << passed << ",\n  \"failed\": " << failed << "\n}\n";
  } else {
    std::cout << "check-specs: " << passed << " passed, " << failed << " failed\n";
  }
  return failed ? 1 : 0;
}
