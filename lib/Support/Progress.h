//===- Progress.h - where a long run is, for a progress line ------*- C++ -*-===//
//
// The phase a run is in is Deadline::currentPhase() (every phase's loop checks its
// deadline). Here, beside it, the phase's position -- ops executed, obligations decided,
// of how many -- and what the phase serves (a fix hint's re-verification runs the
// phases again). The loops store; the CLI's progress line (tools/planproof/Progress.h)
// reads from its own thread. Lock-free and global: one run per process is what the CLI
// does, and the library's other users ignore it.
//
//===----------------------------------------------------------------------===//
#ifndef PLANPROOF_SUPPORT_PROGRESS_H
#define PLANPROOF_SUPPORT_PROGRESS_H

#include <atomic>
#include <cstdint>

namespace planproof {

class Progress {
public:
  /// The position in `phase` (the string Deadline::check is given): `done` of `total`.
  static void count(const char *phase, int64_t done, int64_t total) {
    State &s = state();
    s.total.store(total, std::memory_order_relaxed);
    s.done.store(done, std::memory_order_relaxed);
    s.counted.store(phase, std::memory_order_release);
  }

  /// What the phases now run for, shown before them ("checking fix hints"); null: the
  /// run itself. Restored by the destructor.
  class Context {
  public:
    explicit Context(const char *what) : saved(state().context.exchange(what)) {}
    ~Context() { state().context.store(saved); }
    Context(const Context &) = delete;
    Context &operator=(const Context &) = delete;

  private:
    const char *saved;
  };

  struct Snapshot {
    const char *context, *counted;
    int64_t done, total;
  };
  static Snapshot snapshot() {
    State &s = state();
    const char *counted = s.counted.load(std::memory_order_acquire);
    return {s.context.load(), counted, s.done.load(std::memory_order_relaxed),
            s.total.load(std::memory_order_relaxed)};
  }

private:
  struct State {
    std::atomic<const char *> context{nullptr}, counted{nullptr};
    std::atomic<int64_t> done{0}, total{0};
  };
  static State &state() {
    static State s;
    return s;
  }
};

} // namespace planproof

#endif
