//===- Replay.h - numeric replay of a spec on the CPU -----------*- C++ -*-===//
//
// Runs the reference and the plan on real numbers, from the same IR and the same op
// semantics as the proofs (Semantics/OpSemantics.h instantiated with a floating-point
// domain), with every rank's collectives reduced in a chosen order (rank, ring, tree)
// and every value rounded to the chosen precision (fp64, fp32, bf16 with fp32
// accumulation). Each plan output is compared, element by element through its layout,
// with the reference computed in fp64, against a tolerance estimated for that element
// (docs/replay.md): what floating point explains, not one global atol.
//
//===----------------------------------------------------------------------===//
#ifndef PLANPROOF_REPLAY_REPLAY_H
#define PLANPROOF_REPLAY_REPLAY_H

#include "Spec/Spec.h"
#include "Semantics/Layout.h"

#include <cstdint>
#include <string>
#include <vector>

namespace planproof {

enum class ReplayDtype { F64, F32, BF16 };
enum class ReduceOrder { Rank, Ring, Tree };

struct ReplayOptions {
  ReplayDtype dtype = ReplayDtype::F32;
  ReduceOrder order = ReduceOrder::Ring;
  uint64_t seed = 1;
  /// Refuse runs past this many scalar operations (about a minute on one core).
  double maxWork = 2e10;
  /// Report progress on stderr for runs longer than a couple of seconds.
  bool progress = false;
};

/// One plan output against the fp64 reference.
struct ReplayOutput {
  std::string name;
  int64_t elements = 0;
  /// Elements not compared: the reference is not finite there at these inputs.
  int64_t undefined = 0;
  double maxAbsError = 0, maxRelError = 0;
  /// The element with the largest error relative to its tolerance.
  std::vector<int64_t> worst;
  std::string worstRank;
  double worstError = 0, worstTolerance = 0, worstReference = 0, worstPlan = 0;
  bool within = true;
};

/// The first plan op whose result leaves its tolerance, compared through the layout of
/// the reference value it holds (the verifier's relations): where the numbers start to
/// differ.
struct ReplayDivergence {
  bool found = false;
  SourceLoc location;
  std::string op, value; // the plan op's result name and the reference value it holds
  std::string rank;
  std::vector<int64_t> local, global;
  double plan = 0, reference = 0, tolerance = 0;
  std::string note; // when no op-level point was found, why
};

struct ReplayResult {
  ReplayDivergence first;
  /// False when the spec could not be run (an op or feature the replay does not
  /// support yet), with the reason and where.
  bool ran = false;
  std::string failure;
  SourceLoc failureAt;
  std::vector<ReplayOutput> outputs;
  bool diverged() const {
    for (const ReplayOutput &o : outputs)
      if (!o.within)
        return true;
    return false;
  }
};

const char *dtypeName(ReplayDtype d);
const char *orderName(ReduceOrder o);

/// Replays `spec` at its own shapes on inputs drawn from `options.seed`.
ReplayResult replaySpec(const Spec &spec, const ReplayOptions &options);

struct Counterexample;

/// Runs a counterexample of the verifier concretely (fp64, its inputs, every other
/// input 0): does the claimed output element differ between plan and reference, with
/// the values the report gives? `status`: "confirmed", "refuted" (with why), or
/// "not replayable" (inputs the replay cannot set: padding, a second step).
struct CounterexampleCheck {
  std::string status, detail;
};
CounterexampleCheck checkCounterexample(const Spec &spec, const Counterexample &cx);

} // namespace planproof

#endif
