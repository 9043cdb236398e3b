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

#include "Device/Numerics.h"
#include "Spec/Spec.h"
#include "Support/Deadline.h"
#include "Semantics/Layout.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace planproof {

/// Where the replay runs: the CPU interpreter of OpSemantics.h, the kernel backend on a
/// CUDA GPU, or the kernel backend on the host (its primitives as loops: the GPU path's
/// lowering and error model, testable without a GPU).
enum class ReplayBackend { Cpu, Cuda, Emulated };
/// Ranks of the kernel backend: virtual (all on one device, collectives as device
/// copies and reduction kernels) or real (one GPU per rank, NCCL collectives).
enum class ReplayRanks { Virtual, Nccl };

struct ReplayOptions {
  ReplayDtype dtype = ReplayDtype::F32;
  ReduceOrder order = ReduceOrder::Ring;
  uint64_t seed = 1;
  /// Refuse runs past this many scalar operations (about a minute on one core).
  double maxWork = 2e10;
  /// Report progress on stderr for runs longer than a couple of seconds.
  bool progress = false;
  /// On a divergence, look for the first plan op that leaves the reference
  /// (ReplayResult::first): the symbolic engine's relations, and the verifier when no
  /// intermediate holds a reference value. Off when only the verdict is wanted
  /// (planproof replay --no-localize): the replay alone is much cheaper than that search.
  bool localize = true;
  ReplayBackend backend = ReplayBackend::Cpu;
  ReplayRanks ranks = ReplayRanks::Virtual;
  /// Reference inputs given as values (from .npy files, see loadNpyInputs), by name,
  /// row-major; the others are drawn from the seed.
  std::map<std::string, std::vector<double>> given;
  /// The wall-clock budget of the run (planproof --time-limit): when it is spent the
  /// replay stops and says so (exit status 3), checked at every op.
  Deadline deadline;
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
  /// Per element of the reference value (row-major, `shape`), its error over its
  /// tolerance (the largest over the ranks holding it; 0 where not compared): the HTML
  /// report's heat-map. Only for outputs of at most kMaxRatioElements elements.
  Shape shape;
  std::vector<float> ratio;
  static constexpr int64_t kMaxRatioElements = 1 << 20;
  /// Set for what is not an output compared element by element (a checkpoint that is
  /// inconsistent): what is wrong.
  std::string note;
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
  /// The point is where the layout engine finds the plan departing from the reference
  /// (its diagnostic, in `note`), not a comparison of numbers: the element engine could
  /// not relate the plan's values to the reference's (its reason in `why`).
  bool byLayouts = false;
  std::string why;
  /// Where a numeric first divergence was found (by the element engine's relations):
  /// the layout engine's first place the plan departs from the reference, when that op
  /// comes earlier in the plan -- a root cause the numbers did not show (values no
  /// reference value describes are not compared), as `earlierOp` at `earlierLocation`
  /// with its diagnostic. Empty otherwise.
  std::string earlierOp, earlierNote;
  SourceLoc earlierLocation;
};

struct ReplayResult {
  ReplayDivergence first;
  /// False when the spec could not be run (an op or feature the replay does not
  /// support yet), with the reason and where.
  bool ran = false;
  std::string failure;
  SourceLoc failureAt;
  std::vector<ReplayOutput> outputs;
  /// What ran it ("4 ranks on the CPU", "NVIDIA H200, 16 virtual ranks") and how long
  /// the runs took (seconds: reference runs, plan).
  std::string device;
  double referenceSeconds = 0, planSeconds = 0;
  /// Inputs read from .npy files.
  std::vector<std::string> loadedInputs;
  /// The seed the inputs were drawn from: options.seed, or a later one where an
  /// output's reference was not finite anywhere at the earlier ones (replaySpec).
  uint64_t seed = 0;
  bool diverged() const {
    for (const ReplayOutput &o : outputs)
      if (!o.within)
        return true;
    return false;
  }
};

const char *dtypeName(ReplayDtype d);
const char *orderName(ReduceOrder o);
const char *backendName(ReplayBackend b);

/// Replays `spec` at its own shapes on inputs drawn from `options.seed` (or read from
/// `options.inputsDir`), on `options.backend`.
ReplayResult replaySpec(const Spec &spec, const ReplayOptions &options);
/// The kernel backend (KernelReplay.cpp); replaySpec dispatches to it.
ReplayResult replaySpecOnKernels(const Spec &spec, const ReplayOptions &options);

/// Reads NAME.npy for every reference input NAME that has one in `dir` into
/// options.given. False with "FILE: why" for a file that is not a little-endian,
/// C-ordered .npy array of f2/f4/f8/i1-i8/u1-u8/bool, or whose shape is not the input's
/// (or for an .npy file in `dir` that names no input).
bool loadNpyInputs(const Spec &spec, const std::string &dir, ReplayOptions &options,
                   Diagnostics &errors);

/// Reads one .npy array; false with the reason.
/// With `want`, the data is read only when the header's shape is `want` (else `shape`
/// is set and `data` left empty, for the caller's message).
bool readNpy(const std::string &path, Shape &shape, std::vector<double> &data, std::string &error,
             const Shape *want = nullptr);
/// Writes a little-endian f8 .npy array.
bool writeNpy(const std::string &path, const Shape &shape, const std::vector<double> &data);

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
