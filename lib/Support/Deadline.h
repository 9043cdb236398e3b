//===- Deadline.h - one wall-clock budget for a whole run --------*- C++ -*-===//
//
// A CI gate must get an answer in bounded time. A Deadline is the end of a run's
// budget (`planproof verify --time-limit`); every phase that can take long -- symbolic
// execution, deciding obligations, Z3 queries, localization, the RNG and checkpoint
// checks, the numeric replay -- calls check() at its loop heads, and gives solvers at
// most remainingMs(). When the budget is spent, check() throws TimeLimit naming the
// phase, and the verdict is *inconclusive* with that reason, never verified.
//
//===----------------------------------------------------------------------===//
#ifndef PLANPROOF_SUPPORT_DEADLINE_H
#define PLANPROOF_SUPPORT_DEADLINE_H

#include <algorithm>
#include <atomic>
#include <chrono>
#include <stdexcept>
#include <string>

namespace planproof {

/// Thrown by Deadline::check when the budget is spent (or the run was interrupted).
struct TimeLimit : std::runtime_error {
  std::string phase;
  TimeLimit(const std::string &phase, double seconds, bool interrupted = false)
      : std::runtime_error(interrupted ? "the run was interrupted during " + phase
                                       : "the time limit of " +
                                             std::to_string((long long)seconds) +
                                             " s was reached during " + phase),
        phase(phase) {}
};

class Deadline {
public:
  using Clock = std::chrono::steady_clock;
  /// No limit.
  Deadline() = default;
  /// `seconds` from now. A limit past a year (an infinity included) is no limit: the
  /// clock arithmetic would overflow and end the run at once.
  explicit Deadline(double seconds)
      : limited(seconds < kLongest), seconds(seconds),
        end(limited ? Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                         std::chrono::duration<double>(seconds))
                    : Clock::time_point{}) {}

  /// Also ends when `*flag` becomes true (another thread interrupting the run: Ctrl-C
  /// in the Python binding). The flag must outlive every copy of the deadline.
  Deadline withInterrupt(const std::atomic<bool> *flag) const {
    Deadline d = *this;
    d.interrupt = flag;
    return d;
  }

  bool isLimited() const { return limited || interrupt; }
  double limitSeconds() const { return seconds; }
  bool interrupted() const { return interrupt && interrupt->load(std::memory_order_relaxed); }
  bool expired() const { return interrupted() || (limited && Clock::now() >= end); }
  /// Milliseconds left (a large number without a limit), at least 1 while not expired.
  unsigned remainingMs() const {
    if (interrupted())
      return 0;
    if (!limited)
      return 1u << 30;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now()).count();
    return (unsigned)std::clamp<long long>(left, 0, 1 << 30);
  }
  /// `ms`, or less when the budget has less left (never 0: Z3 reads 0 as no limit).
  unsigned cap(unsigned ms) const { return std::max(1u, std::min(ms, remainingMs())); }
  /// Throws TimeLimit when the budget is spent; records `phase` as the current phase.
  void check(const char *phase) const {
    currentPhase().store(phase, std::memory_order_relaxed);
    if (expired())
      throw TimeLimit(phase, seconds, interrupted());
  }
  /// The phase most recently entered by any check() (for the watchdog's report).
  static std::atomic<const char *> &currentPhase() {
    static std::atomic<const char *> phase{"loading the spec"};
    return phase;
  }

private:
  static constexpr double kLongest = 365.0 * 86400;
  bool limited = false;
  double seconds = 0;
  Clock::time_point end{};
  const std::atomic<bool> *interrupt = nullptr;
};

} // namespace planproof

#endif
