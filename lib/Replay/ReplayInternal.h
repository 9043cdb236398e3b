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
#include "Interp/RunFailure.h"
#include "Replay/Products.h"
#include "Replay/Replay.h"
#include "Semantics/Scalar.h"
#include "Semantics/Tensor.h"

#include "llvm/ADT/DenseMap.h"
#include "mlir/IR/Location.h"
#include "mlir/IR/Operation.h"
#include "mlir/IR/Value.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace planproof {
namespace kernels {
class Device;
class Collectives;
} // namespace kernels
namespace replay {

using NumTensor = Tensor<double>;

/// The four reference runs of the error model: fp64 (the truth), and the storage
/// precision summed forward, reversed and pairwise (the rounding noise).
enum RefRun { Truth = 0, Forward = 1, Reverse = 2, Pairwise = 3 };

double unitRoundoff(ReplayDtype d);

/// The numeric scalar domain: every result rounded to the storage precision, sums
/// accumulated in the accumulation precision (fp32 for bf16), in a chosen order.
struct NumericDomain {
  using Value = double;
  ReplayDtype dtype;
  ReduceOrder order;
  bool reverse = false;  // sums in reverse order (the noise estimate of the error model)
  bool pairwise = false; // sums as binary trees (likewise)
  /// Matrix products through the BLAS in fp64 (the truth run: its order is free) and
  /// otherwise through the exact kernels of Products.h; false: element by element.
  bool blas = false;
  bool bulk = true;

  double round(double x) const {
    switch (dtype) {
    case ReplayDtype::F64:
      return x;
    case ReplayDtype::F32:
      return (double)(float)x;
    case ReplayDtype::BF16:
      return (double)scalar::roundBf16((float)x);
    }
    return x;
  }
  double accumulate(const std::vector<double> &v, bool backwards) const {
    if (dtype == ReplayDtype::F64) {
      double s = 0;
      for (size_t i = 0; i < v.size(); ++i)
        s += v[backwards ? v.size() - 1 - i : i];
      return s;
    }
    float s = 0; // fp32 accumulation, for fp32 and for bf16 storage
    for (size_t i = 0; i < v.size(); ++i)
      s += (float)v[backwards ? v.size() - 1 - i : i];
    return s;
  }
  Value constant(const Rational &c) { return round(c.toDouble()); }
  bool integer(const Value &v, int64_t &out) {
    out = (int64_t)std::llround(v);
    return (double)out == v;
  }
  Value add(Value a, Value b) { return round(a + b); }
  Value sub(Value a, Value b) { return round(a - b); }
  Value mul(Value a, Value b) { return round(a * b); }
  Value scale(Value a, const Rational &c) { return round(a * c.toDouble()); }
  Value sum(const std::vector<Value> &v) {
    if (!pairwise)
      return round(accumulate(v, reverse));
    std::vector<Value> w = v;
    while (w.size() > 1) {
      std::vector<Value> next;
      for (size_t i = 0; i + 1 < w.size(); i += 2)
        next.push_back(dtype == ReplayDtype::F64 ? w[i] + w[i + 1]
                                                 : (double)((float)w[i] + (float)w[i + 1]));
      if (w.size() % 2)
        next.push_back(w.back());
      w = std::move(next);
    }
    return round(w.empty() ? 0.0 : w[0]);
  }
  Value apply(Fn f, std::vector<Value> args) { return round(evalFn(f, args)); }
  /// A whole matrix product (OpSemantics.h's evalProducts): bit-identical to `mul`s
  /// and `sum`, except in the fp64 truth run, which takes the BLAS's order.
  bool products(const ProductDims &p, const Value *a, const Value *b, Value *out) {
    if (!bulk)
      return false;
    if (blas && dtype == ReplayDtype::F64) {
      blasProducts(p, a, b, out);
      return true;
    }
    using kernels::SumOrder;
    SumOrder o = pairwise ? SumOrder::Pairwise : reverse ? SumOrder::Reverse : SumOrder::Forward;
    return exactProducts(dtype, o, p, a, b, out);
  }
  /// A collective's reduction over its group: in rank order, in ring order (each
  /// chunk's sum starts at the next rank, as NCCL's ring all-reduce does), or as a
  /// binary tree.
  Value groupSum(const std::vector<Value> &v) {
    if (v.empty())
      return 0;
    std::vector<Value> w = v;
    if (reverse)
      std::reverse(w.begin(), w.end());
    if (order == ReduceOrder::Ring)
      std::rotate(w.begin(), w.begin() + (w.size() > 1 ? 1 : 0), w.end());
    if (order == ReduceOrder::Tree) {
      while (w.size() > 1) {
        std::vector<Value> next;
        for (size_t i = 0; i + 1 < w.size(); i += 2)
          next.push_back(round(w[i] + w[i + 1]));
        if (w.size() % 2)
          next.push_back(w.back());
        w = std::move(next);
      }
      return w[0];
    }
    return round(accumulate(w, false));
  }
};


/// Runs body(begin, end) over [0, n) split into contiguous chunks, one per core, when
/// there are at least `grain` items per chunk; on this thread otherwise. `body` must
/// not throw.
template <class F> void parallelChunks(int64_t n, int64_t grain, F body) {
  int64_t chunks = std::min<int64_t>(std::max(1u, std::thread::hardware_concurrency()),
                                     std::max<int64_t>(1, n / std::max<int64_t>(grain, 1)));
  std::vector<std::thread> pool;
  int64_t step = (n + chunks - 1) / std::max<int64_t>(chunks, 1);
  for (int64_t c = 1; c < chunks; ++c)
    pool.emplace_back([&, c] { body(c * step, std::min(n, (c + 1) * step)); });
  body(0, std::min(n, step));
  for (std::thread &t : pool)
    t.join();
}

/// Per reference input: whether the replay draws it from |N(0, 1)| (Replay.cpp).
std::vector<bool> drawnNonnegative(const Spec &spec);

struct NumCheckpoint; // Replay.cpp: a numeric checkpoint of a two-step spec
struct RngRecord;     // Replay.cpp: independent-mode random draws at a seed

/// Runs the reference on numbers in domain `d` from `in` (its inputs by name): its
/// outputs by name, every value in `vals`. False with `f` where an op cannot run.
bool runReference(const Spec &spec, NumericDomain &d, const std::map<std::string, NumTensor> &in,
                  std::map<std::string, NumTensor> &outputs, RunFailure &f,
                  llvm::DenseMap<mlir::Value, NumTensor> &vals);

/// Runs the plan on every rank (Interp/PlanWalk.h) from the reference inputs `in`:
/// each plan output's per-rank values in `outputs`, every value in `vals`. `seed`
/// fills padding; `ckpt` and `rng` serve two-step specs and independent draws.
bool runPlan(const Spec &spec, NumericDomain &d, const std::map<std::string, NumTensor> &in,
             uint64_t seed, std::vector<std::vector<NumTensor>> &outputs, RunFailure &f,
             llvm::DenseMap<mlir::Value, std::vector<NumTensor>> &vals,
             NumCheckpoint *ckpt = nullptr, RngRecord *rng = nullptr);

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

/// The devices of a kernel replay: the host device (emulated), one GPU for every
/// virtual rank, or one GPU per rank with NCCL. Returns why they cannot be had, with
/// `located` false where the machine, not the spec, is what is missing.
/// (KernelDevices.cpp.)
std::string openDevices(const Spec &spec, const ReplayOptions &options,
                        std::vector<std::unique_ptr<kernels::Device>> &owned,
                        std::vector<kernels::Device *> &rankDev,
                        std::unique_ptr<kernels::Collectives> &nccl, bool &located);

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
