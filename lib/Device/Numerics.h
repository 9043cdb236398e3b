//===- Numerics.h - the replay's precisions and reduction orders -*- C++ -*-===//
//
// Kept apart from Replay.h so that the CUDA sources (Device.h) need no MLIR headers.
//
//===----------------------------------------------------------------------===//
#ifndef PLANPROOF_REPLAY_NUMERICS_H
#define PLANPROOF_REPLAY_NUMERICS_H

namespace planproof {

/// Storage precision: fp64, fp32, or bf16 with fp32 accumulation.
enum class ReplayDtype { F64, F32, BF16 };
/// The order a collective sums its group in.
enum class ReduceOrder { Rank, Ring, Tree };

} // namespace planproof

#endif
