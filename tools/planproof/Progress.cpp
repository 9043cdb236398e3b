//===- Progress.cpp - the CLI's progress line on stderr -------------------===//
//
// Cli.h's ProgressLine: a thread that, every 100 ms after the first half second,
// rewrites one stderr line with where the run is (Deadline::currentPhase and
// Support/Progress.h's count and context) and the time spent. On a terminal the line is
// rewritten in place and erased at the end; forced on elsewhere (--progress), it is a
// new line each second, for logs. Reports go to stdout and are never interleaved with
// it: the line is erased before the destructor returns.
//
//===----------------------------------------------------------------------===//
#include "Cli.h"

#include "Support/Deadline.h"
#include "Support/Progress.h"

#include <cstdio>
#include <cstring>
#include <sys/ioctl.h>
#include <unistd.h>

namespace planproof::cli {

namespace {

/// Columns of the terminal on stderr (80 where unknown).
size_t terminalWidth() {
  struct winsize w {};
  if (ioctl(STDERR_FILENO, TIOCGWINSZ, &w) == 0 && w.ws_col >= 20)
    return w.ws_col;
  return 80;
}

} // namespace

bool ProgressLine::wanted(int mode) {
  if (!watchdogEnabled || mode == 0)
    return false;
  return mode == 1 || isatty(STDERR_FILENO);
}

ProgressLine::ProgressLine(int mode, std::string label)
    : label(std::move(label)), terminal(isatty(STDERR_FILENO)),
      started(std::chrono::steady_clock::now()) {
  if (!wanted(mode))
    return;
  thread = std::thread([this] {
    std::unique_lock<std::mutex> lock(m);
    auto last = started;
    while (!cv.wait_for(lock, std::chrono::milliseconds(100), [this] { return done; })) {
      auto now = std::chrono::steady_clock::now();
      if (now - started < std::chrono::milliseconds(500) ||
          (!terminal && now - last < std::chrono::seconds(1)))
        continue;
      last = now;
      print(line(std::chrono::duration<double>(now - started).count()));
    }
    if (shown && terminal)
      print("");
  });
}

ProgressLine::~ProgressLine() {
  {
    std::lock_guard<std::mutex> lock(m);
    done = true;
  }
  cv.notify_all();
  if (thread.joinable())
    thread.join();
}

void ProgressLine::setLabel(const std::string &text) {
  std::lock_guard<std::mutex> lock(m);
  label = text;
}

std::string ProgressLine::line(double seconds) const {
  const char *phase = Deadline::currentPhase().load();
  Progress::Snapshot s = Progress::snapshot();
  // The spec last: on a narrow terminal the line is cut at its end.
  std::string out = "planproof: ";
  if (s.context)
    out += std::string(s.context) + ": ";
  out += phase;
  if (s.counted && std::strcmp(s.counted, phase) == 0 && s.total > 0) {
    int64_t done = std::min(s.done, s.total);
    out += " " + std::to_string(done) + "/" + std::to_string(s.total) + " (" +
           std::to_string(100 * done / s.total) + "%)";
  }
  char t[32];
  std::snprintf(t, sizeof t, ", %.1f s", seconds);
  return out + t + " -- " + label;
}

void ProgressLine::print(const std::string &text) {
  if (!terminal) {
    if (!text.empty())
      std::fprintf(stderr, "%s\n", text.c_str());
    std::fflush(stderr);
    shown = true;
    return;
  }
  std::string shownText = text.substr(0, terminalWidth() - 1);
  // Back to the line's start, the text, and the rest of the line erased.
  std::fprintf(stderr, "\r%s\033[K", shownText.c_str());
  std::fflush(stderr);
  shown = !text.empty();
}

} // namespace planproof::cli
