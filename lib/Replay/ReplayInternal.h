//===- ReplayInternal.h - what the CPU and kernel replay backends share -*- C++ -*-===//
//
// The error model (per-element tolerances from the reference's rounding noise), the
// comparison of plan outputs with the reference, and first-divergence localization,
// written once for both backends: each backend produces the reference values in fp64
// and in the storage precision summed three ways, and the plan's per-rank values.
//
//===----------------------------------------------------------------------===//
#ifndef PLANPROOF_REPLAY_REPLAYINTERNAL_H
#define PLANPROOF_REPLAY_REPLAYINTERNAL_H

#include "Engine/Verifier.h"
#include "Replay/Replay.h"
#include "Semantics/Tensor.h"

#include "mlir/IR/Location.h"
#include "mlir/IR/Operation.h"
#include "mlir/IR/Value.h"

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace planproof {
namespace kernels {
class Device;
}
namespace replay {

using NumTensor = Tensor<double>;

/// The four reference runs of the error model: fp64 (the truth), and the storage
/// precision summed forward, reversed and pairwise (the rounding noise).
enum RefRun { Truth = 0, Forward = 1, Reverse = 2, Pairwise = 3 };

double unitRoundoff(ReplayDtype d);

/// Why a run stopped (an op or feature a backend does not support), and where.
struct Failure {
  std::string why;
  mlir::Location loc;
};

/// The value of an `index` op (arith constant, addi, subi, muli) from its operands'
/// values; false for any other op.
bool indexOp(mlir::Operation &op, const std::vector<double> &args, double &out);

/// Scalar operations of one run of `f` on `ranks` ranks (a matmul counts I*J*K).
double workOf(mlir::func::FuncOp f, int64_t ranks);

/// Compares every plan output (per rank, through its layout) with the truth, against
/// each element's tolerance; fills result.outputs.
void compareOutputs(const Spec &spec, const ReplayOptions &options,
                    const std::map<std::string, NumTensor> *refs[4],
                    const std::vector<std::vector<NumTensor>> &plan, ReplayResult &result);

/// First-divergence localization: the first plan intermediate that holds a reference
/// value and leaves its tolerance. `ref(run, v)` and `plan(v)` give the values (null
/// when not kept).
void findFirstDivergence(const Spec &spec, const ReplayOptions &options,
                         const std::function<const NumTensor *(int, mlir::Value)> &ref,
                         const std::function<const std::vector<NumTensor> *(mlir::Value)> &plan,
                         ReplayDivergence &out);

/// Evaluates one ref op on `dev` through the kernel backend's lowering, from host
/// operands (uploaded in `dtype`'s storage) to a host result: the unit tests compare it
/// with evalRefOp (OpSemantics.h), op by op. Returns "" or why the op has no lowering.
std::string evalRefOnDevice(kernels::Device &dev, ReplayDtype dtype, mlir::Operation *op,
                            const std::vector<NumTensor> &ins, const std::vector<double> &idx,
                            NumTensor &out);

/// A progress line on stderr for long runs (thread-local; see Replay.cpp).
void progressBegin(const std::string &phase, size_t ops);
void progressTick();

} // namespace replay
} // namespace planproof

#endif
