//===- RngCheck.h - random streams in independent mode -----------*- C++ -*-===//
//
// In *independent* RNG mode (plan attribute `dist.rng = "independent"`) a plan's
// dropout masks need not equal the reference's; what must hold is what makes them
// distributed like the reference's, for every rank of the mesh:
//
//   (1) distinct mask elements never draw the same (key, counter) pair, on any two
//       ranks, in any two ops of the step;
//   (2) ranks holding replicas of one element draw the same pair (else replicas of a
//       replicated activation diverge);
//   (3) no pair drawn in this step is drawn again in the next step, whose random state
//       is the one the reference returns (`ref.updates`).
//
// Keys and counters are integer polynomials over the step's integer inputs and the
// rank's mesh coordinates; each property is one Z3 query with the coordinates and
// element indices of two draws as bounded integer unknowns, so it is proved for all
// ranks at once, not by enumerating pairs of ranks. A model is reported as the ranks,
// elements and pair that break it.
//
//===----------------------------------------------------------------------===//
#ifndef PLANPROOF_ENGINE_RNGCHECK_H
#define PLANPROOF_ENGINE_RNGCHECK_H

#include "Engine/Decide.h"
#include "Engine/Verifier.h"

namespace planproof {

/// Checks properties (1)-(3) for `spec.draws`. Violations (kind `rng`) and reasons for
/// not deciding are appended to `result`.
void checkRandomStreams(const Spec &spec, const SolverBudget &budget, VerifyResult &result);

} // namespace planproof

#endif
