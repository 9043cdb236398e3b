//===- SymbolicExec.cpp - symbolic execution of reference and plan -*- C++ -*-===//
#include "Engine/SymbolicExec.h"
#include "Interp/PlanWalk.h"

#include "Semantics/OpSemantics.h"
#include "Support/Progress.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

using namespace mlir;
using namespace planproof;

namespace {
int64_t tensorElements(Type t) {
  auto r = dyn_cast<RankedTensorType>(t);
  return r ? numElements(Shape(r.getShape().begin(), r.getShape().end())) : 0;
}

/// `spec` (the plan's): an op of one pipeline stage runs on that stage's ranks only.
bool checkBudget(func::FuncOp f, int64_t ranks, RunFailure &failure,
                 const Spec *spec = nullptr) {
  int64_t stages = spec && spec->pipelineAxis >= 0 ? spec->mesh.shape[spec->pipelineAxis] : 1;
  // In double: with up to 2^40 ranks the product can leave int64.
  double total = 0;
  f.walk([&](Operation *op) {
    double work = 0;
    if (auto mm = dyn_cast<ref::MatmulOp>(op)) {
      auto lhs = cast<RankedTensorType>(mm.getLhs().getType());
      work = double(tensorElements(mm.getType())) * lhs.getDimSize(mm.getLhsDim());
    } else if (auto bm = dyn_cast<ref::BatchMatmulOp>(op)) {
      auto lhs = cast<RankedTensorType>(bm.getLhs().getType());
      work = double(tensorElements(bm.getType())) * lhs.getDimSize(bm.getLhsDim());
    } else {
      for (Type t : op->getOperandTypes())
        work += tensorElements(t);
      for (Type t : op->getResultTypes())
        work += tensorElements(t);
    }
    bool staged = stages > 1 && spec->stageOf(op) >= 0;
    total += work * double(staged ? ranks / stages : ranks);
  });
  if (total > kMaxSymbolicWork) {
    failure = {"the element engine would need about " + std::to_string((long long)std::min(total, 9e18)) +
                   " scalar operations at these shapes (limit " +
                   std::to_string(kMaxSymbolicWork) +
                   "); write the spec at smaller shapes (automatic shape reduction is not "
                   "implemented yet)",
               f.getLoc()};
    return false;
  }
  return true;
}

/// Evaluates an `index` arithmetic op (constants and +, -, *) over integer polynomials.
/// `get` gives an operand's value. Returns false for anything else.
template <class Get>
bool evalIndexOp(Operation &op, ExprPool &pool, Get get, PolyId &out) {
  if (auto c = dyn_cast<arith::ConstantOp>(op)) {
    auto v = dyn_cast<IntegerAttr>(c.getValue());
    if (!v)
      return false;
    out = pool.constant(Rational(v.getInt()));
    return true;
  }
  if (!isa<arith::AddIOp, arith::SubIOp, arith::MulIOp>(op))
    return false;
  const PolyId *a = get(op.getOperand(0)), *b = get(op.getOperand(1));
  if (!a || !b)
    return false;
  out = isa<arith::AddIOp>(op) ? pool.add(*a, *b)
        : isa<arith::SubIOp>(op) ? pool.sub(*a, *b)
                                 : pool.mul(*a, *b);
  return true;
}


/// The element engine's elements of a checkpoint (Interp/Checkpoint.h): offsets are
/// constants; padding and elements never saved are fresh unknowns, so that what depends
/// on them is caught.
struct SymbolicCheckpointElements {
  ExprPool &pool;
  bool offset(const SymTensor &v, int64_t &out) {
    Rational c;
    return pool.isConstant(v.data[0], &c) && c.asInt64(out);
  }
  PolyId fill() { return pool.zero(); }
  PolyId padding(const std::string &key, int64_t r, int64_t l) {
    return pool.inputPoly(pool.addInput({key + ".pad", {r, l}, 0}));
  }
  PolyId unsaved(const std::string &key, const std::vector<int64_t> &g) {
    return pool.inputPoly(pool.addInput({"unsaved." + key, g, 0}));
  }
};

} // namespace

namespace {
/// Index arithmetic over integer polynomials, for walkPlan's and walkReference's
/// backends: `args` are the operands' values in order.
bool symbolicIndexOp(Operation &op, ExprPool &pool, const std::vector<PolyId> &args, PolyId &out) {
  auto get = [&](mlir::Value x) -> const PolyId * {
    for (unsigned i = 0; i < op.getNumOperands(); ++i)
      if (op.getOperand(i) == x && i < args.size())
        return &args[i];
    return nullptr;
  };
  return evalIndexOp(op, pool, get, out);
}

/// The element engine as a backend of walkReference (Interp/PlanWalk.h).
struct SymbolicRefWalk : DomainBackend<SymbolicRefWalk, SymbolicDomain> {
  ExprPool &pool;
  const Deadline &deadline;
  SymbolicDomain d{pool};
  SymbolicRefWalk(const Spec &spec, ExprPool &pool, const Deadline &deadline)
      : DomainBackend(spec), pool(pool), deadline(deadline) {}
  SymbolicDomain &domain() { return d; }
  const char *who() { return "by the element engine"; }
  int64_t opsDone = 0, opsTotal = (int64_t)spec.reference.getBody().front().getOperations().size();
  void beforeOp(Operation &) {
    deadline.check("symbolic execution of the reference");
    Progress::count("symbolic execution of the reference", ++opsDone, opsTotal);
  }
  bool indexOp(Operation &op, const std::vector<PolyId> &args, PolyId &out) {
    return symbolicIndexOp(op, pool, args, out);
  }
  void afterRef(Operation &, int64_t, SymTensor &) {}
};
} // namespace

bool planproof::runReference(const Spec &spec, ExprPool &pool, ReferenceTrace &trace,
                             RunFailure &failure, const std::map<std::string, SymTensor> *inputs,
                             const std::string &suffix, const Deadline &deadline) {
  if (!checkBudget(spec.reference, 1, failure))
    return false;
  for (unsigned i = 0; i < spec.reference.getNumArguments(); ++i) {
    Value arg = spec.reference.getArgument(i);
    auto type = dyn_cast<RankedTensorType>(arg.getType());
    Shape shape = type ? Shape(type.getShape().begin(), type.getShape().end()) : Shape{};
    SymTensor t(shape, pool.zero());
    int64_t bound = i < spec.refInputBounds.size() ? spec.refInputBounds[i] : 0;
    auto given = inputs ? inputs->find(spec.refInputs[i]) : std::map<std::string, SymTensor>::const_iterator();
    if (inputs && given != inputs->end())
      t = given->second;
    else
      for (int64_t l = 0; l < (int64_t)t.data.size(); ++l)
        t.data[l] = pool.inputPoly(pool.addInput(
            {spec.refInputs[i] + suffix, t.unravel(l), bound,
             i < spec.refInputNonnegative.size() && spec.refInputNonnegative[i]}));
    trace.byName[spec.refInputs[i]] = t;
    trace.values[arg] = std::move(t);
  }
  SymbolicRefWalk walk(spec, pool, deadline);
  try {
    std::map<std::string, SymTensor> outputs;
    if (!walkReference(spec, walk, trace.values, outputs, failure))
      return false;
    for (auto &[name, t] : outputs)
      trace.byName[name] = std::move(t);
  } catch (const NumericLimit &e) {
    failure = {e.what(), spec.reference.getLoc()};
    return false;
  }
  return true;
}

namespace {
/// The element engine as a backend of walkPlan (Interp/PlanWalk.h).
struct SymbolicWalk : DomainBackend<SymbolicWalk, SymbolicDomain> {
  ExprPool &pool;
  const ReferenceTrace &refTrace;
  PlanTrace &trace;
  Checkpoint *save;
  const Checkpoint *load;
  const Deadline &deadline;
  SymbolicDomain d{pool};
  std::map<Operation *, const DrawBinding *> draws;

  SymbolicWalk(const Spec &spec, ExprPool &pool, const ReferenceTrace &ref, PlanTrace &trace,
               Checkpoint *save, const Checkpoint *load, const Deadline &deadline)
      : DomainBackend(spec), pool(pool), refTrace(ref), trace(trace), save(save), load(load),
        deadline(deadline) {}

  SymbolicDomain &domain() { return d; }
  const char *who() { return "by the element engine"; }
  int64_t opsDone = 0, opsTotal = (int64_t)spec.plan.getBody().front().getOperations().size();
  void beforeOp(Operation &) {
    deadline.check("symbolic execution of the plan");
    Progress::count("symbolic execution of the plan", ++opsDone, opsTotal);
  }
  bool parallelRanks(Operation &) { return false; } // one ExprPool: not thread-safe
  SymTensor coordinate(int64_t c) { return SymTensor({}, pool.constant(Rational(c))); }
  /// Padding holds whatever was there: a fresh symbol, so that a plan whose result
  /// depends on it is caught.
  PolyId padding(const Binding &b, int64_t r, int64_t l) {
    return pool.inputPoly(pool.addInput({b.refName + ".pad", {r, l}, 0}));
  }
  /// An unmatched recv (a schedule violation, reported by the schedule check) receives
  /// fresh unknowns.
  bool unmatchedRecv(Operation &op, int64_t r, SymTensor &out, std::string &) {
    Type t = op.getResult(0).getType();
    Shape s = t.isIndex() ? Shape{} : Shape(cast<RankedTensorType>(t).getShape().vec());
    out = SymTensor(s, pool.zero());
    for (int64_t l = 0; l < (int64_t)out.data.size(); ++l)
      out.data[l] = pool.inputPoly(
          pool.addInput({"unmatched." + spec.nameOf(op.getResult(0)), {r, l}, 0}));
    return true;
  }
  bool indexOp(Operation &op, const std::vector<PolyId> &args, PolyId &out) {
    return symbolicIndexOp(op, pool, args, out);
  }
  bool special(Operation &op, RankValues<PolyId> &, std::string &why) {
    if (!isa<dist::CheckpointOp>(op))
      return false;
    SymbolicCheckpointElements elems{pool};
    why = checkpointOp(op, spec.mesh, trace.values, save, load, elems);
    return true;
  }
  /// A draw whose attributes differ from the reference's keeps its own value (RngCheck
  /// reports it): the substitution assumes they are equal. Independent mode: once the
  /// streams are proved distinct for distinct elements and equal for replicas
  /// (RngCheck), the plan's draws are distributed exactly like the reference's, and
  /// may be renamed to them.
  void afterRef(Operation &op, int64_t r, SymTensor &result) {
    auto db = draws.find(&op);
    if (db == draws.end() || !db->second->mismatch.empty())
      return;
    const DrawBinding &b = *db->second;
    const SymTensor &refMask = refTrace.values.find(b.refMask)->second;
    for (int64_t l = 0; l < (int64_t)result.data.size(); ++l) {
      std::vector<int64_t> inBlock = result.unravel(l);
      for (size_t k = 0; k < inBlock.size(); ++k)
        inBlock[k] += b.blockOffset[k];
      result.data[l] = refMask.at(b.layout.globalIndex(spec.mesh, r, b.blockShape, inBlock));
    }
  }
};
} // namespace

bool planproof::runPlan(const Spec &spec, ExprPool &pool, const ReferenceTrace &ref,
                        PlanTrace &trace, RunFailure &failure, Checkpoint *save,
                        const Checkpoint *load, const Deadline &deadline,
                        const std::map<std::string, SymTensor> *arguments) {
  if (!checkBudget(spec.plan, spec.mesh.numRanks(), failure, &spec))
    return false;
  SymbolicWalk walk{spec, pool, ref, trace, save, load, deadline};
  for (const DrawBinding &db : spec.draws)
    walk.draws[db.op] = &db;
  // Rank r's argument is its block of the reference input (or of a given argument).
  std::map<std::string, SymTensor> globals;
  for (const Binding &b : spec.planInputs) {
    auto given = arguments ? arguments->find(b.refName) : std::map<std::string, SymTensor>::const_iterator();
    globals[b.refName] =
        arguments && given != arguments->end() ? given->second : ref.byName.at(b.refName);
  }
  walk.globals = &globals;
  try {
    if (!walkPlan(spec, walk, trace.values, failure))
      return false;
  } catch (const NumericLimit &e) {
    failure = {e.what(), spec.plan.getLoc()};
    return false;
  }
  return true;
}
