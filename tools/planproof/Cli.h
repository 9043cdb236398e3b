//===- Cli.h - what the planproof commands share ----------------*- C++ -*-===//
//
// The command-line tool is one library (PlanproofCli) of commands, one per file where
// they are long (CmdReplay.cpp, CmdCheckSpecs.cpp), and a main: the fuzzing harness of
// the CLI (test/fuzz/fuzz_cli.cpp) links the same library and calls cliMain.
//
// Exit status of every command: 0 verified / as expected, 1 violated / not as expected
// / diverged, 2 bad input or usage, 3 inconclusive / could not run.
//
//===----------------------------------------------------------------------===//
#ifndef PLANPROOF_TOOLS_CLI_H
#define PLANPROOF_TOOLS_CLI_H

#include "API/Policy.h"
#include "Engine/Verifier.h"

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace planproof {
/// The CLI's entry point; `watchdog` arms the hard stop of --time-limit (see Watchdog).
int cliMain(int argc, char **argv, bool watchdog);

namespace cli {
/// Prints "planproof: error: MSG" and the pointer to --help; returns exit status 2.
int usage(const std::string &msg);

/// The default wall-clock budget of a run: long enough for every spec of the
/// catalogue many times over, short enough for a CI gate (README, "CI gates").
constexpr double kDefaultTimeLimit = 600;

/// The options verify and check-specs share (parseCommon).
struct Options {
  Options() { verify.threads = std::max(1u, std::thread::hardware_concurrency()); }
  std::string format = "text";
  VerifyOptions verify;
  bool fullShapes = false;
  double timeLimit = kDefaultTimeLimit;
  /// --engine: "element", "layout" or "auto" (the default); engineGiven: named on the
  /// command line.
  std::string engine = "auto";
  bool engineGiven = false;
  /// The progress line: -1 on a terminal (the default), 0 never (--quiet), 1 always
  /// (--progress).
  int progress = -1;
};

/// decideSpec (API/Policy.h) with the engine and options of `o`.
Decision decideWith(const SpecReadings &readings, const Options &o);

/// Parses a --time-limit value: seconds in (0, 86400].
bool parseSeconds(const std::string &v, double &out);
/// Takes --format, --solver-budget, --timeout-ms, --threads, --time-limit, --full-shapes and --engine out of
/// `args` into `o`; false with the reason for a bad value.
bool parseCommon(std::vector<std::string> &args, Options &o, std::string &err);
/// Writes a loader's errors on stderr (control characters escaped) and, for
/// machine-readable formats, the error object on stdout. Returns exit status 2.
int badInput(const std::string &path, const Diagnostics &errors, const std::string &format);
int exitCode(Verdict v);
/// "%x" for "x" or "%x": how planproof.expect's `at` compares with Violation::at.
std::string normalizeAt(std::string s);

/// The --format a command line asks for (read before the command parses its options,
/// so that usage and internal errors answer in it too).
extern std::string requestedFormat;
/// `status`, or 2 when stdout could not take the report (a full disk, a closed pipe).
int finish(int status);

/// Whether Watchdogs arm (off in-process, for the fuzzing harness).
extern bool watchdogEnabled;

/// The last line of defence of the time limit: when a run outlives its budget by a
/// grace period (a phase that does not check the deadline, a solver that ignores its
/// timeout), the watchdog prints an inconclusive report in the requested format and
/// ends the process with status 3. Destroying it before then disarms it. Without
/// `withGrace` (commands that check no deadline themselves) it fires at the limit.
class Watchdog {
public:
  Watchdog(double seconds, std::string format, std::string spec, bool withGrace = true);
  ~Watchdog();

private:
  [[noreturn]] void fire();
  std::string format, spec;
  double seconds;
  std::mutex m;
  std::condition_variable cv;
  bool done = false;
  std::thread thread;
};

/// The progress line on stderr while a run works (Progress.cpp): the phase, its count
/// (ops executed, obligations decided, of the total), the time spent. Shown from half a
/// second on, when `mode` (Options::progress) and stderr allow; erased when destroyed.
class ProgressLine {
public:
  ProgressLine(int mode, std::string label);
  ~ProgressLine();
  /// What the line names (the spec; check-specs: the spec and its number).
  void setLabel(const std::string &label);
  static bool wanted(int mode);

private:
  std::string line(double seconds) const;
  void print(const std::string &text);
  std::string label;
  bool terminal, shown = false;
  std::chrono::steady_clock::time_point started;
  std::mutex m;
  std::condition_variable cv;
  bool done = false;
  std::thread thread;
};

int cmdVerify(std::vector<std::string> args);
int cmdPlan(std::vector<std::string> args);
int cmdReplay(std::vector<std::string> args);
int cmdCheckSpecs(std::vector<std::string> args);
int cmdImport(std::vector<std::string> args);
int cmdImportXla(std::vector<std::string> args);
int cmdExport(std::vector<std::string> args);
int cmdShrink(std::vector<std::string> args);
} // namespace cli
} // namespace planproof

#endif
