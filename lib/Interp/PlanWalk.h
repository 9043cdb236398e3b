//===- PlanWalk.h - one walk of a plan over its ranks -----------*- C++ -*-===//
//
// How a plan runs, written once for every engine that runs one: the element engine
// (SymbolicExec.cpp, canonical polynomials), the CPU replay (Replay.cpp, floating
// point) and the kernel replay (KernelReplay.cpp, device buffers). The walk owns
//
//  - the order (Spec::planOps) and the binding of each rank's arguments;
//  - pipeline messages (a recv takes the matching send's operand on the sending
//    stage's rank with the receiver's other coordinates; stage_select and select_on
//    pick per rank), rank coordinates (axis_index) and integer arithmetic on `index`
//    values;
//  - rank-local ops on the ranks of their pipeline stage, copied to the others (every
//    other rank holds what the stage's rank with its other coordinates computes: its
//    inputs are that rank's), on threads where the backend allows;
//  - collectives, with every rank's operand.
//
// A backend supplies storage and the evaluation of one op (Backend below). The engines
// over a scalar domain share DomainBackend, which evaluates ops through OpSemantics.h
// (evalRefOp, evalCollective) and binds arguments through their layouts.
//
//===----------------------------------------------------------------------===//
#ifndef PLANPROOF_SEMANTICS_PLANWALK_H
#define PLANPROOF_SEMANTICS_PLANWALK_H

#include "Semantics/OpSemantics.h"
#include "Interp/RunFailure.h"
#include "Spec/Spec.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"

#include <atomic>
#include <exception>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace planproof {

/// Every plan value on every rank.
template <class T> using PlanValues = llvm::DenseMap<mlir::Value, std::vector<T>>;
template <class V> using RankValues = PlanValues<Tensor<V>>;

/// What a backend B of walkPlan provides:
///
///   using Value;  // one rank's value of a plan value (a tensor, or an index value)
///   using Index;  // an `index` value's scalar
///   const char *who();                           // "by the element engine", in messages
///   void beforeOp(mlir::Operation &op);          // progress, deadline (may throw)
///   Value bind(const Binding &b, int64_t rank);  // rank's argument for input `b`
///   Value copy(const Value &v, int64_t rank);    // v, held a second time
///   Value coordinate(int64_t c);                 // a rank coordinate
///   Index indexOf(const Value &v);
///   Value fromIndex(Index x);
///   bool indexOp(mlir::Operation &op, const std::vector<Index> &args, Index &out);
///   bool unmatchedRecv(mlir::Operation &op, int64_t rank, Value &out, std::string &why);
///   // Runs `op` itself when it is one of its own (random draws, checkpoint ops): true
///   // when handled, with `why` set on failure.
///   bool special(mlir::Operation &op, PlanValues<Value> &vals, std::string &why);
///   std::string ref(mlir::Operation &op, int64_t rank, const std::vector<const Value *> &in,
///                   const std::vector<Index> &idx, Value &out);   // "" or why not
///   std::string collective(mlir::Operation &op, const std::vector<const Value *> &in,
///                          std::vector<Value> &out);
///   bool parallelRanks(mlir::Operation &op);     // run a rank-local op's ranks on threads
///   void afterOp(mlir::Operation &op, PlanValues<Value> &vals); // e.g. free dead values
///   void afterReferenceOp(mlir::Operation &op, llvm::DenseMap<mlir::Value, Value> &vals);
template <class B> class PlanWalker {
public:
  using T = typename B::Value;
  using I = typename B::Index;
  PlanWalker(const Spec &spec, B &backend, PlanValues<T> &vals)
      : spec(spec), mesh(spec.mesh), ranks(spec.mesh.numRanks()), backend(backend), vals(vals) {}

  /// Each rank's arguments.
  void bind() {
    for (const Binding &b : spec.planInputs) {
      std::vector<T> per;
      per.reserve(ranks);
      for (int64_t r = 0; r < ranks; ++r)
        per.push_back(backend.bind(b, r));
      vals[spec.plan.getArgument(b.index)] = std::move(per);
    }
  }

  /// Runs every plan op in order; false with `failure` at the first that cannot run.
  bool run(RunFailure &failure) {
    for (mlir::Operation *op : spec.planOps()) {
      backend.beforeOp(*op);
      if (mlir::isa<mlir::func::ReturnOp, dist::SendOp>(op))
        continue;
      std::string why;
      if (backend.special(*op, vals, why)) {
        if (!why.empty()) {
          failure = {why, op->getLoc()};
          return false;
        }
        continue;
      }
      std::vector<T> results(ranks);
      why = step(*op, results);
      if (!why.empty()) {
        failure = {why, op->getLoc()};
        return false;
      }
      vals[op->getResult(0)] = std::move(results);
      backend.afterOp(*op, vals);
    }
    return true;
  }

private:
  const Spec &spec;
  const Mesh &mesh;
  int64_t ranks;
  B &backend;
  PlanValues<T> &vals;

  std::string opName(mlir::Operation &op) { return op.getName().getStringRef().str(); }

  /// One op's per-rank results; why not, or "".
  std::string step(mlir::Operation &op, std::vector<T> &results) {
    for (mlir::Value v : op.getOperands())
      if (!vals.count(v))
        return "op '" + opName(op) + "' uses a value not tracked " + backend.who() +
               " (an unsupported op's result)";
    if (mlir::isa<dist::SelectOnOp, dist::StageSelectOp, dist::RecvOp>(op))
      return route(op, results);
    if (auto ax = mlir::dyn_cast<dist::AxisIndexOp>(op)) {
      int axis = mesh.axisIndex(ax.getAxis().str());
      for (int64_t r = 0; r < ranks; ++r)
        results[r] = backend.coordinate(mesh.coords(r)[axis]);
      return "";
    }
    if (op.getNumResults() == 1 && op.getResult(0).getType().isIndex())
      return index(op, results);
    if (mlir::isa<ref::RefDialect>(op.getDialect()))
      return rankLocal(op, results);
    if (mlir::isa<dist::DistDialect>(op.getDialect())) {
      std::vector<const T *> in;
      for (int64_t r = 0; r < ranks; ++r)
        in.push_back(&vals[op.getOperand(0)][r]);
      return backend.collective(op, in, results);
    }
    return "op '" + opName(op) + "' is not supported in plans " + backend.who();
  }

  /// Values that move without arithmetic: select_on and stage_select pick per rank; a
  /// recv takes the matching send's operand on the sending stage's rank with the
  /// receiver's other coordinates (docs/pipeline.md).
  std::string route(mlir::Operation &op, std::vector<T> &results) {
    if (auto sel = mlir::dyn_cast<dist::SelectOnOp>(op)) {
      for (int64_t r = 0; r < ranks; ++r)
        results[r] = backend.copy(
            vals[selectOnTaken(sel, mesh, r) ? sel.getWhen() : sel.getOtherwise()][r], r);
    } else if (auto sel = mlir::dyn_cast<dist::StageSelectOp>(op)) {
      for (int64_t r = 0; r < ranks; ++r)
        results[r] = backend.copy(vals[sel.getValues()[mesh.coords(r)[spec.pipelineAxis]]][r], r);
    } else {
      auto recv = mlir::cast<dist::RecvOp>(op);
      auto match = spec.recvFrom.find(&op);
      std::string why;
      for (int64_t r = 0; r < ranks; ++r) {
        if (match != spec.recvFrom.end())
          results[r] = backend.copy(
              vals[match->second->getOperand(0)][spec.rankOnStage(r, recv.getFrom())], r);
        else if (!backend.unmatchedRecv(op, r, results[r], why))
          return why;
      }
    }
    return "";
  }

  /// Integer arithmetic on `index` values, per rank.
  std::string index(mlir::Operation &op, std::vector<T> &results) {
    for (int64_t r = 0; r < ranks; ++r) {
      std::vector<I> args;
      for (mlir::Value v : op.getOperands())
        args.push_back(backend.indexOf(vals[v][r]));
      I x;
      if (!backend.indexOp(op, args, x))
        return "op '" + opName(op) +
               "' on index values is not supported (use arith.constant, addi, subi, muli on "
               "index arguments and dist.axis_index)";
      results[r] = backend.fromIndex(x);
    }
    return "";
  }

  /// A rank-local op on the ranks of its pipeline stage (on threads where the backend
  /// allows), then copied to the other ranks: each holds what the stage's rank with its
  /// other coordinates computes, since its inputs are that rank's.
  std::string rankLocal(mlir::Operation &op, std::vector<T> &results) {
    int64_t stage = spec.stageOf(&op);
    std::vector<int64_t> run;
    for (int64_t r = 0; r < ranks; ++r)
      if (spec.onStage(r, stage))
        run.push_back(r);
    std::vector<std::string> errs(ranks);
    auto one = [&](int64_t r) {
      std::vector<const T *> in;
      std::vector<I> idx;
      for (mlir::Value v : op.getOperands()) {
        const T &x = vals.find(v)->second[r];
        if (v.getType().isIndex())
          idx.push_back(backend.indexOf(x));
        else
          in.push_back(&x);
      }
      errs[r] = backend.ref(op, r, in, idx, results[r]);
    };
    forRanks(op, run, one);
    for (int64_t r : run)
      if (!errs[r].empty())
        return errs[r];
    for (int64_t r = 0; r < ranks; ++r)
      if (!spec.onStage(r, stage))
        results[r] = backend.copy(results[spec.rankOnStage(r, stage)], r);
    return "";
  }
  template <class F> void forRanks(mlir::Operation &op, const std::vector<int64_t> &run, F one) {
    if (!backend.parallelRanks(op) || run.size() < 2) {
      for (int64_t r : run)
        one(r);
      return;
    }
    // An exception on a worker (a time limit, a numeric limit) is rethrown here, after
    // every worker has stopped, as the serial walk would throw it.
    std::atomic<size_t> next{0};
    std::exception_ptr thrown;
    std::mutex lock;
    auto work = [&] {
      try {
        for (size_t i; (i = next++) < run.size();)
          one(run[i]);
      } catch (...) {
        std::lock_guard<std::mutex> g(lock);
        if (!thrown)
          thrown = std::current_exception();
        next = run.size();
      }
    };
    unsigned threads =
        std::min<size_t>(run.size(), std::max(1u, std::thread::hardware_concurrency()));
    std::vector<std::thread> pool;
    for (unsigned t = 1; t < threads; ++t)
      pool.emplace_back(work);
    work();
    for (std::thread &t : pool)
      t.join();
    if (thrown)
      std::rethrow_exception(thrown);
  }
};

/// Binds each rank's arguments and runs the plan, filling `vals`. Returns false with
/// `failure` set when an op cannot be run.
template <class B>
bool walkPlan(const Spec &spec, B &backend, PlanValues<typename B::Value> &vals,
              RunFailure &failure) {
  PlanWalker<B> walker(spec, backend, vals);
  walker.bind();
  return walker.run(failure);
}

/// Runs the reference program (one device, no ranks) with the same backend: `vals`
/// holds its arguments on entry and every value on return; `outputs` gets the returned
/// values by reference name. The backend's `ref` sees rank -1, and
/// `afterReferenceOp(op, vals)` follows each op (e.g. to free dead values). Returns
/// false with `failure` set when an op cannot be run.
template <class B>
bool walkReference(const Spec &spec, B &backend,
                   llvm::DenseMap<mlir::Value, typename B::Value> &vals,
                   std::map<std::string, typename B::Value> &outputs, RunFailure &failure) {
  using T = typename B::Value;
  using I = typename B::Index;
  for (mlir::Operation &op : spec.reference.getBody().front()) {
    backend.beforeOp(op);
    std::string name = op.getName().getStringRef().str();
    if (auto ret = mlir::dyn_cast<mlir::func::ReturnOp>(op)) {
      for (auto [i, v] : llvm::enumerate(ret.getOperands()))
        outputs[spec.refOutputs[i]] = vals.lookup(v);
      continue;
    }
    for (mlir::Value v : op.getOperands())
      if (!vals.count(v)) {
        failure = {"op '" + name + "' uses a value not tracked " + backend.who(), op.getLoc()};
        return false;
      }
    std::vector<const T *> in;
    std::vector<I> idx;
    for (mlir::Value v : op.getOperands()) {
      if (v.getType().isIndex())
        idx.push_back(backend.indexOf(vals.find(v)->second));
      else
        in.push_back(&vals.find(v)->second);
    }
    T out;
    if (op.getNumResults() == 1 && op.getResult(0).getType().isIndex()) {
      I x;
      if (!backend.indexOp(op, idx, x)) {
        failure = {"op '" + name +
                       "' on index values is not supported (use arith.constant, addi, subi, "
                       "muli on index arguments and dist.axis_index)",
                   op.getLoc()};
        return false;
      }
      out = backend.fromIndex(x);
    } else if (!mlir::isa<ref::RefDialect>(op.getDialect())) {
      failure = {"the reference may only use ref ops and index arithmetic; '" + name +
                     "' is not supported",
                 op.getLoc()};
      return false;
    } else {
      std::string why = backend.ref(op, -1, in, idx, out);
      if (!why.empty()) {
        failure = {why, op.getLoc()};
        return false;
      }
    }
    vals[op.getResult(0)] = std::move(out);
    backend.afterReferenceOp(op, vals);
  }
  return true;
}

/// The backend plumbing shared by the engines over a scalar domain D (OpSemantics.h):
/// values are Tensor<D::Value> (index values scalar tensors), rank-local ops and
/// collectives are evalRefOp and evalCollective, arguments are the blocks of `globals`
/// (the reference inputs by name) through their layouts. Derived supplies domain(),
/// padding(b, rank, l) for a block's elements past the end, and afterRef(op, rank,
/// result) (may be empty), besides the rest of the Backend interface.
template <class Derived, class D> struct DomainBackend {
  using V = typename D::Value;
  using Value = Tensor<V>;
  using Index = V;
  const Spec &spec;
  const std::map<std::string, Value> *globals = nullptr;

  explicit DomainBackend(const Spec &spec) : spec(spec) {}
  Derived &self() { return static_cast<Derived &>(*this); }

  Value bind(const Binding &b, int64_t r) {
    const Value &global = globals->at(b.refName);
    Value t(b.localShape, self().domain().constant(Rational(0)));
    b.layout.forEachElement(spec.mesh, r, b.localShape, global.shape, [&](int64_t l, int64_t at) {
      t.data[l] = at >= 0 ? global.data[at] : self().padding(b, r, l);
    });
    return t;
  }
  Value copy(const Value &v, int64_t) { return v; }
  Index indexOf(const Value &v) { return v.data[0]; }
  Value fromIndex(Index x) { return Value({}, x); }
  std::string ref(mlir::Operation &op, int64_t r, const std::vector<const Value *> &in,
                  const std::vector<Index> &idx, Value &out) {
    std::string err = evalRefOp(self().domain(), &op, in, out, idx);
    if (err.empty())
      self().afterRef(op, r, out);
    return err;
  }
  std::string collective(mlir::Operation &op, const std::vector<const Value *> &in,
                         std::vector<Value> &out) {
    return evalCollective(self().domain(), &op, spec.mesh, in, out);
  }
  void afterOp(mlir::Operation &, PlanValues<Value> &) {}
  void afterReferenceOp(mlir::Operation &, llvm::DenseMap<mlir::Value, Value> &) {}
};

} // namespace planproof

#endif
