//===- SymbolicExec.h - symbolic execution of reference and plan -*- C++ -*-===//
//
// Runs the reference once and the plan on every rank of the mesh over canonical
// polynomials: each element of each reference input is a symbol, each rank's plan
// argument is the block of those symbols its layout gives it (scatter), and every op
// is evaluated through the shared op semantics (Semantics/OpSemantics.h).
//
//===----------------------------------------------------------------------===//
#ifndef PLANPROOF_ENGINE_SYMBOLICEXEC_H
#define PLANPROOF_ENGINE_SYMBOLICEXEC_H

#include "Engine/Expr.h"
#include "Interp/Checkpoint.h"
#include "Interp/RunFailure.h"
#include "Spec/Spec.h"
#include "Support/Deadline.h"

#include "llvm/ADT/DenseMap.h"

#include <string>
#include <vector>

namespace planproof {

/// The scalar domain of the element engine: canonical polynomials in an ExprPool.
struct SymbolicDomain {
  using Value = PolyId;
  ExprPool &pool;
  Value constant(const Rational &c) { return pool.constant(c); }
  Value add(Value a, Value b) { return pool.add(a, b); }
  Value sum(const std::vector<Value> &parts) { return pool.sum(parts); }
  Value sub(Value a, Value b) { return pool.sub(a, b); }
  Value mul(Value a, Value b) { return pool.mul(a, b); }
  Value scale(Value a, const Rational &c) { return pool.scale(a, c); }
  Value apply(Fn f, std::vector<Value> args) { return pool.apply(f, std::move(args)); }
  bool integer(const Value &v, int64_t &out) {
    Rational c;
    return pool.isConstant(v, &c) && c.asInt64(out);
  }
};

using SymTensor = Tensor<PolyId>;

struct ReferenceTrace {
  /// Every value of the reference; `index` values are scalar tensors.
  llvm::DenseMap<mlir::Value, SymTensor> values;
  std::map<std::string, SymTensor> byName;       // inputs and outputs by ref.name
};

/// A checkpoint of polynomials, as the saving plan wrote it (Interp/Checkpoint.h).
using CheckpointEntry = CheckpointEntryOf<PolyId>;
using Checkpoint = CheckpointOf<PolyId>;

struct PlanTrace {
  /// Per rank; `index` values are scalar tensors of integer polynomials.
  llvm::DenseMap<mlir::Value, std::vector<SymTensor>> values;
};

/// Upper bound on the scalar operations (summed over ops and ranks; a matmul counts
/// I*J*K) the element engine executes before answering *inconclusive*. Far above
/// what the bundled specs need (thousands), far below what would take minutes.
constexpr int64_t kMaxSymbolicWork = 2'000'000;

/// Executes the reference. Returns false and fills `failure` when it cannot. With
/// `inputs`, the reference inputs of those names take the given values (a second step
/// continues from the first step's state) and the others are fresh symbols suffixed
/// with `suffix`.
bool runReference(const Spec &spec, ExprPool &pool, ReferenceTrace &trace, RunFailure &failure,
                  const std::map<std::string, SymTensor> *inputs = nullptr,
                  const std::string &suffix = "", const Deadline &deadline = Deadline());

/// Executes the plan on every rank from the reference inputs' symbols. Its dist.save
/// ops write into `save`, its dist.load ops read from `load` (when given).
/// With `arguments`, plan arguments bound to those reference inputs take the given
/// values instead of the reference's (a resumed step's arguments hold what the job was
/// started with, not the state the first step left).
bool runPlan(const Spec &spec, ExprPool &pool, const ReferenceTrace &ref, PlanTrace &trace,
             RunFailure &failure, Checkpoint *save = nullptr, const Checkpoint *load = nullptr,
             const Deadline &deadline = Deadline(),
             const std::map<std::string, SymTensor> *arguments = nullptr);

} // namespace planproof

#endif
