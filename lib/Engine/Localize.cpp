//===- Localize.cpp - from a wrong output to its culprit --------*- C++ -*-===//
//
// Engine (Engine.h): from a failed obligation to the culprit: which reference value each plan
// value holds (relations), and the walk to the first op whose operands are right and
// whose result is wrong; counterexamples attached to violations.
//
//===----------------------------------------------------------------------===//
#include "Engine/Engine.h"

using namespace planproof;

namespace {
/// A collective that reduces over its groups (all_reduce, reduce_scatter): its result
/// is complete over its axes.
bool reducingCollective(mlir::Operation *op) {
  auto collective = mlir::dyn_cast<planproof::dist::CollectiveOp>(op);
  return collective && collective.getReduction();
}
} // namespace

namespace planproof::engine {

/// The relation of `v` when it is exact (factor 1), else none: what the walk to a
/// culprit needs ("is this value correct?"), found among the few reference values
/// whose elements' fingerprints it shares, not among all of them.
Relation Engine::exactRelationOf(Value v) {
  auto it = exactRelations.find(v);
  if (it != exactRelations.end())
    return it->second;
  Relation r;
  auto pt = planTrace.values.find(v);
  if (pt != planTrace.values.end()) {
    std::vector<int> complete;
    if (Operation *def = v.getDefiningOp())
      if (reducingCollective(def))
        complete = collectiveAxes(def, mesh);
    std::vector<int> only = finder->exactCandidates(pt->second);
    if (!only.empty())
      r = finder->find(pt->second, complete, &only);
    if (!r.exact())
      r = Relation();
    // A contraction may compute the transpose of a reference value (dW^T) for a later
    // transpose: correct (buildRefValues).
    if (!r.exact() && isa_and_nonnull<ref::MatmulOp, ref::BatchMatmulOp>(v.getDefiningOp())) {
      std::vector<int> t = transposeFinder->exactCandidates(pt->second);
      Relation tr = t.empty() ? Relation() : transposeFinder->find(pt->second, complete, &t);
      if (tr.exact()) {
        r = tr;
        r.transposed = true;
      }
    }
  }
  exactRelations[v] = r;
  return r;
}

Relation Engine::relationOf(Value v) {
  auto it = relations.find(v);
  if (it != relations.end())
    return it->second;
  if (Relation e = exactRelationOf(v); e.exact() && !e.transposed)
    return relations[v] = e;
  Relation r;
  auto pt = planTrace.values.find(v);
  std::vector<int> complete;
  if (Operation *def = v.getDefiningOp())
    if (reducingCollective(def))
      complete = collectiveAxes(def, mesh);
  if (pt != planTrace.values.end())
    r = finder->find(pt->second, complete);
  relations[v] = r;
  return r;
}

/// Follows wrong values backwards: the culprit is the first op (in dataflow order)
/// whose tensor operands are all correct (an exact relation) but whose result is not.
/// Operands matching no reference value at all are followed before merely rescaled ones.
/// Whether `v` is computed from constants only (masks, padding): the plan's own data.
bool Engine::constantDerived(Value v) {
  // Computed once for every plan value, in program order (operands come first), so
  // that long chains cost linear time and no recursion.
  if (constantDerivedMemo.empty()) {
    for (Operation *op : spec.planOps()) {
      bool c = isa<ref::RefDialect>(op->getDialect()) &&
               (isa<ref::ConstantOp>(op) ||
                (op->getNumOperands() > 0 && llvm::all_of(op->getOperands(), [&](Value x) {
                   auto it = constantDerivedMemo.find(x);
                   return it != constantDerivedMemo.end() && it->second;
                 })));
      for (Value r : op->getResults())
        constantDerivedMemo[r] = c;
    }
    if (constantDerivedMemo.empty())
      constantDerivedMemo[Value()] = false;
  }
  auto it = constantDerivedMemo.find(v);
  return it != constantDerivedMemo.end() && it->second;
}

/// A sum over the tokens of one microbatch (of tiles that are all correct): a legitimate
/// intermediate that no single reference value describes (the reference sums over the
/// whole batch at once), so it is not where a plan goes wrong.
/// A plan's ref.capacity_dispatch computes its rank's group only: the reference's
/// mask restricted to the rank's tokens and its group's slots. (No layout expresses
/// that block: one mesh axis splits both the tokens and the slots.) True when every
/// rank's mask equals that block of a reference dispatch mask.
bool Engine::dispatchMatchesReference(Value v) {
  auto cd = v.getDefiningOp<ref::CapacityDispatchOp>();
  if (!cd || cast<RankedTensorType>(cd.getInput().getType()).getRank() != 2)
    return false; // a batched mask's blocks are ordinary layouts
  Relation in = exactRelationOf(cd.getInput());
  if (!in.exact() || !in.block.empty() || in.layout.isPartial())
    return false;
  const auto &plan = planTrace.values[v];
  const auto &chosen = planTrace.values[cd.getInput()];
  int64_t C = cd.getCapacity();
  bool found = false;
  spec.reference.walk([&](ref::CapacityDispatchOp rd) {
    if (found || (int64_t)rd.getCapacity() != C || cd.getGroups() != 1)
      return;
    const SymTensor &R = refTrace.values[rd.getResult()];
    int64_t T = R.shape[0], E = R.shape[1], G = rd.getGroups(), per = T / G;
    bool all = true;
    for (int64_t r = 0; r < mesh.numRanks() && all; ++r) {
      const SymTensor &P = plan[r];
      int64_t Tl = P.shape[0];
      int64_t first = in.layout.globalIndex(mesh, r, chosen[r].shape, {0, 0})[0];
      for (int64_t i = 0; i < Tl && all; ++i) {
        int64_t t = in.layout.globalIndex(mesh, r, chosen[r].shape, {i, 0})[0];
        // The rank's tokens must be one whole group, in order.
        if (t != first + i || first % per != 0 || Tl != per) {
          all = false;
          break;
        }
        int64_t g = t / per;
        for (int64_t e = 0; e < E && all; ++e)
          for (int64_t c = 0; c < C; ++c)
            if (P.at({i, e, c}) != R.at({t, e, g * C + c})) {
              all = false;
              break;
            }
      }
    }
    found = all;
  });
  return found;
}

/// A rank-local value of the routing path that no layout relates to the reference: a
/// dispatch mask that matches the reference's block (above), or a ref op computed
/// only from such values and correct ones (the gate-weighted combine mask).
bool Engine::routedLocal(Value v, int depth) {
  auto it = routedLocalMemo.find(v);
  if (it != routedLocalMemo.end())
    return it->second;
  if (depth > kMaxWalkDepth)
    return false;
  routedLocalMemo[v] = false; // cycles cannot occur; this only guards re-entry
  bool ok = dispatchMatchesReference(v);
  Operation *def = v.getDefiningOp();
  if (!ok && def && isa<ref::MulOp, ref::ReshapeOp, ref::ScaleOp>(def)) {
    bool anyRouted = false;
    ok = true;
    for (Value o : def->getOperands()) {
      if (!isa<RankedTensorType>(o.getType()))
        continue;
      Relation r = exactRelationOf(o);
      if (routedLocal(o, depth + 1))
        anyRouted = true;
      else if (!r.exact() || !r.block.empty())
        ok = false;
    }
    ok = ok && anyRouted;
  }
  routedLocalMemo[v] = ok;
  return ok;
}

Operation *Engine::walkToCulprit(Value v, std::set<Operation *> &seen,
                                  std::vector<Value> *path) {
  // Iterative: each step moves to a wrong operand; chains of 10^5 ops cannot overflow.
  while (true) {
    options.deadline.check("localizing violations");
    if (path)
      path->push_back(v);
    Operation *op = v.getDefiningOp();
    if (!op || !seen.insert(op).second)
      return op;
    Value next = culpritOperand(op);
    if (!next) {
      // Correct operands that the reference never pairs: where their computations part.
      Operation *crossed = crossedCulprit(op);
      return crossed ? crossed : op;
    }
    v = next;
  }
}

/// The operand of `op` along which a wrong value arrives, or null when every operand
/// is correct (then `op` is the culprit).
Value Engine::culpritOperand(Operation *op) {
  // A tile of a reference value (one microbatch of a rank's block) is only taken as
  // correct next to other tiles: combined with a whole block, the tile is more likely
  // the wrong piece (e.g. every rank drawing the first rows of a mask).
  // A tile cut by a ref.slice is likewise suspect unless some other operand is a tile
  // computed from tiles (the op then sits inside a microbatch's computation).
  bool anyWhole = false, anyComputedTile = false;
  for (Value operand : op->getOperands())
    if (isa<RankedTensorType>(operand.getType())) {
      Relation r = exactRelationOf(operand);
      anyWhole |= r.exact() && r.block.empty() && !r.layout.dims.empty() &&
                  llvm::any_of(r.layout.dims, [](auto &axes) { return !axes.empty(); });
      anyComputedTile |= r.exact() && !r.block.empty() &&
                         !isa_and_nonnull<ref::SliceOp>(operand.getDefiningOp());
    }
  auto trusted = [&](Value operand, const Relation &r) {
    if (!r.exact())
      return isMicrobatchPartial(operand) || routedLocal(operand) || evenShare(op, operand).has_value();
    if (r.block.empty())
      return true;
    if (anyWhole)
      return false;
    return anyComputedTile || !isa_and_nonnull<ref::SliceOp>(operand.getDefiningOp());
  };
  std::vector<Value> wrong;
  for (Value operand : op->getOperands()) {
    // Arguments are the scattered inputs and constants are the plan's own data:
    // neither is a path along which a wrong value can arrive.
    if (!isa<RankedTensorType>(operand.getType()) || isa<BlockArgument>(operand) ||
        constantDerived(operand))
      continue;
    if (!trusted(operand, exactRelationOf(operand)))
      wrong.push_back(operand);
  }
  // An op pairing tiles of different microbatches, one of them cut again where an
  // earlier slice already cut its window: that cut is the wrong one.
  // Otherwise the op itself pairs them wrongly.
  if (mixesTiles(op)) {
    for (Value operand : op->getOperands())
      if (isa<RankedTensorType>(operand.getType()) && fromRecutTile(operand))
        return operand;
    return Value();
  }
  if (wrong.empty()) {
    // Every operand that carries data is correct. The plan's own constants are not a
    // path along which a wrong value arrives -- except one cut or computed from a
    // constant that does hold a reference value (a 0/1 mask literal) into something
    // that holds none: every rank taking the wrong block of a mask, say.
    for (Value operand : op->getOperands()) {
      if (!isa<RankedTensorType>(operand.getType()) || !constantDerived(operand) ||
          exactRelationOf(operand).exact())
        continue;
      // (A source of zeros matches too much by accident to count.)
      Operation *def = operand.getDefiningOp();
      if (def && llvm::any_of(def->getOperands(), [&](Value x) {
            auto pt = planTrace.values.find(x);
            bool nonzero = pt != planTrace.values.end() &&
                           llvm::any_of(pt->second, [&](const SymTensor &t) {
                             return llvm::any_of(t.data, [&](PolyId p) { return p != pool.zero(); });
                           });
            return isa<RankedTensorType>(x.getType()) && nonzero && exactRelationOf(x).exact();
          }))
        return operand;
    }
    return Value();
  }
  if (wrong.size() == 1)
    return wrong[0];
  // Operands matching no reference value at all are followed before rescaled ones
  // (the full relation search runs only here, where there is a choice).
  for (Value operand : wrong)
    if (!relationOf(operand).related())
      return operand;
  return wrong[0];
}

/// The reading of `operand` of the reducing collective `op` as a correct partial sum that the
/// relation search reads otherwise: every rank of a group over some of the reduced axes
/// holds the same 1/n of a reference value (n the group's size). That value is both
/// "1/n of the replicated value" and "partial-sum over those axes"; RelationFinder
/// prefers the scaled reading, which explains a wrong factor elsewhere better, but as
/// the operand of a reduction over those axes it is the partial sum the reduction
/// completes (a loss's share 1/tp differentiated on every tensor-parallel rank). None
/// where it is not one.
std::optional<Relation> Engine::evenShare(Operation *op, Value operand) {
  if (!reducingCollective(op))
    return std::nullopt;
  return evenShareOver(operand, collectiveAxes(op, mesh));
}

/// `v` read as a partial sum over a group of `axes` (over which its layout replicates
/// it) where every rank of the group holds the same 1/n of a reference value.
std::optional<Relation> Engine::evenShareOver(Value v, const std::vector<int> &axes) {
  if (!isa<RankedTensorType>(v.getType()))
    return std::nullopt;
  Relation r = relationOf(v);
  if (!r.related() || r.transposed || !r.block.empty() || r.layout.isPartial() ||
      r.scale.isOne())
    return std::nullopt;
  std::vector<int> free;
  for (int a : axes)
    if (!llvm::any_of(r.layout.dims, [&](const std::vector<int> &d) { return llvm::is_contained(d, a); }))
      free.push_back(a); // the value is replicated over a: every rank of its group holds it
  for (uint32_t subset = 1; subset < (1u << std::min<size_t>(free.size(), 8)); ++subset) {
    std::vector<int> group;
    for (size_t k = 0; k < free.size(); ++k)
      if (subset & (1u << k))
        group.push_back(free[k]);
    if (r.scale * Rational(mesh.groupSize(group)) != Rational(1))
      continue;
    Relation partial = r;
    partial.scale = Rational(1);
    for (int a : group)
      partial.layout.partial.push_back({a, ReduceKind::Sum});
    return partial;
  }
  return std::nullopt;
}

/// A returned gradient that is every rank's equal share of the reference's, where the
/// plan differentiates a loss share (a ref.grad seed scaled by 1/n, n the size of a
/// group of axes the gradient is replicated over): the seed's factor is the plan's
/// design -- each rank of the group differentiates 1/n of the loss -- and what is
/// missing is the reduction over the group that sums the shares. Read as that partial
/// sum, the output's violation is a missing reduction where the value is computed, not
/// a wrong factor at the seed.
std::optional<Relation> Engine::gradientShare(Value v) {
  std::vector<int> axes;
  Operation *def = v.getDefiningOp();
  std::vector<int> reduced = def && reducingCollective(def) ? collectiveAxes(def, mesh)
                                                            : std::vector<int>();
  for (int a = 0; a < (int)mesh.axes.size(); ++a)
    if (!llvm::is_contained(reduced, a))
      axes.push_back(a);
  std::optional<Relation> share = evenShareOver(v, axes);
  if (!share)
    return std::nullopt;
  Rational factor = relationOf(v).scale;
  for (Value seed : spec.planGradSeeds) {
    Relation sr = relationOf(seed);
    if (sr.related() && sr.scale == factor)
      return share;
  }
  return std::nullopt;
}

void Engine::addCounterexample(const FailedObligation &f, Violation &viol) {
  Counterexample &cx = viol.counterexample;
  const std::vector<double> &vals = f.decision.assignment;
  if (vals.empty())
    return;
  viol.hasCounterexample = true;
  cx.fromSolver = f.decision.assignmentFromSolver;
  cx.element = f.output->refName + (f.global.empty() ? "" : indexStr(f.global));
  for (size_t i = 0; i < vals.size(); ++i)
    if (vals[i] != 0)
      cx.inputs.push_back({pool.input(i).str(), vals[i]});
  // The values shown are enclosed ones (exact where doubles would cancel).
  auto ret = cast<func::ReturnOp>(spec.plan.getBody().front().getTerminator());
  const auto &perRank = planTrace.values[ret.getOperand(f.output->index)];
  std::vector<int64_t> members{f.rank};
  if (f.output->layout.isPartial())
    members = mesh.group(f.rank, f.output->layout.partialAxes());
  std::vector<PolyId> shown{f.reference, f.plan};
  for (int64_t m : members)
    shown.push_back(perRank[m].data[f.local]);
  std::vector<double> values = enclosedValues(pool, shown, vals);
  cx.reference = values[0];
  cx.plan = values[1];
  for (size_t k = 0; k < members.size(); ++k) {
    cx.rankValues.push_back({mesh.rankStr(members[k]), values[2 + k]});
    viol.ranks.push_back(mesh.rankStr(members[k]));
  }
}

/// VerifyOptions::verdictOnly: the difference at its output, neither localized nor
/// explained.
void Engine::reportUnlocalized(const FailedObligation &f) {
  Violation v;
  v.kind = "dataflow";
  v.value = f.output->refName;
  v.location = toSourceLoc(f.output->loc);
  v.message = "output '" + f.output->refName + indexStr(f.global) +
              "' differs from the reference (not localized: only the verdict was asked for)";
  result.violations.push_back(std::move(v));
}

void Engine::localize(const std::vector<FailedObligation> &failures) {
  auto ret = cast<func::ReturnOp>(spec.plan.getBody().front().getTerminator());
  std::map<Operation *, size_t> byCulprit;
  for (const FailedObligation &f : failures) {
    options.deadline.check("localizing violations");
    const Binding &b = *f.output;
    Violation viol;
    Operation *culprit = findCulprit(f, ret, viol);
    auto it = byCulprit.find(culprit);
    if (it != byCulprit.end()) {
      Violation &existing = result.violations[it->second];
      existing.value += ", " + b.refName;
      continue;
    }
    viol.location = toSourceLoc(culprit->getLoc());
    viol.at = culprit == ret.getOperation() ? "" : opName(culprit);
    viol.value = b.refName;
    addCounterexample(f, viol);
    viol.locatedNotes.push_back({toSourceLoc(ret.getLoc()),
                                 "output `" + b.refName + "` (" + b.layout.str(mesh) +
                                     ") differs from the reference; it is returned here"});
    byCulprit[culprit] = result.violations.size();
    result.violations.push_back(std::move(viol));
  }
  foldDerivedGradients();
}

/// The culprit of failure `f` (the plan's return when none is found), with `viol`
/// filled in to say what is wrong there.
Operation *Engine::findCulprit(const FailedObligation &f, func::ReturnOp ret, Violation &viol) {
  const Binding &b = *f.output;
  Value v = ret.getOperand(b.index);
  Relation actual = relationOf(v);
  // Where the plan has no value at the counterexample (a division by a count that is
  // 0 there), the first undefined op is the culprit unless a wrong value comes before
  // it: the data-flow walk below decides first, the undefined op is its fallback.
  Violation undefinedViol;
  Operation *undefinedAt = undefinedCulprit(f, undefinedViol);
  if (!actual.exact())
    if (std::optional<Relation> share = gradientShare(v))
      actual = *share;
  if (actual.exact() && actual.block.empty()) {
    explainOutput(b, v, actual, viol);
    return v.getDefiningOp() ? v.getDefiningOp() : ret.getOperation();
  }
  std::set<Operation *> seen;
  std::vector<Value> path;
  Operation *culprit = walkToCulprit(v, seen, &path), *relocatedFrom = nullptr;
  if (!culprit)
    culprit = ret.getOperation();
  // A culprit computing, from correct operands, a value the reference never computes
  // may be the plan's own way there, its reduction left out further on. (Not where an
  // operand is itself a partial value: then the culprit is where it needed reducing.)
  if (culprit != ret.getOperation() && culprit->getNumResults() == 1 &&
      culprit->getResult(0) == path.back() && !relationOf(path.back()).related() &&
      llvm::none_of(culprit->getOperands(), [&](Value x) {
        return isa<RankedTensorType>(x.getType()) && relationOf(x).layout.isPartial();
      }))
    if (Operation *unreducedAt = unreducedOnPath(path)) {
      relocatedFrom = culprit;
      culprit = unreducedAt;
    }
  // A culprit inside a derived backward pass whose seed (the loss a plan ref.grad
  // differentiates) is itself off by a factor: the seed's own culprit is the cause.
  if (culprit != ret.getOperation() && opName(culprit).rfind("%d(", 0) == 0)
    for (Value seed : spec.planGradSeeds) {
      Relation sr = relationOf(seed);
      if (!sr.related() || sr.exact())
        continue;
      std::set<Operation *> seenSeed;
      Operation *c = walkToCulprit(seed, seenSeed);
      if (c && c != ret.getOperation() && opName(c).rfind("%d(", 0) != 0) {
        culprit = c;
        break;
      }
    }
  if (culprit == ret.getOperation() && undefinedAt) {
    culprit = undefinedAt;
    viol = undefinedViol;
  } else if (culprit == ret.getOperation()) {
    viol.kind = "dataflow";
    viol.message = "plan result #" + std::to_string(b.index) + " returns argument `" +
                   spec.nameOf(v) + "` as `" + b.refName + "`, which it is not";
  } else {
    explainCulprit(culprit, f, undefinedAt, undefinedViol, viol);
    // The relocation's claim (the reduction would fix the value) is its fix: where
    // re-verifying refutes it, the walk's own culprit is reported instead.
    if (relocatedFrom && relocatedFrom != culprit && viol.fix) {
      auto alt = std::make_shared<Violation>();
      explainCulprit(relocatedFrom, f, undefinedAt, undefinedViol, *alt);
      alt->location = toSourceLoc(relocatedFrom->getLoc());
      alt->at = opName(relocatedFrom);
      viol.fallback = std::move(alt);
    }
  }
  return culprit;
}

/// Visits the ops `work` holds and those they depend on, each once, until `visit`
/// returns true (then true); `input` sees every operand no op defines.
static bool anyUpstream(std::vector<Operation *> work,
                        llvm::function_ref<bool(Operation *)> visit,
                        llvm::function_ref<void(Value)> input) {
  llvm::DenseSet<Operation *> seen;
  while (!work.empty()) {
    Operation *op = work.back();
    work.pop_back();
    if (!seen.insert(op).second)
      continue;
    if (visit(op))
      return true;
    for (Value v : op->getOperands()) {
      if (Operation *def = v.getDefiningOp())
        work.push_back(def);
      else
        input(v);
    }
  }
  return false;
}

static bool normalizes(Operation *op) {
  auto role = op->getAttrOfType<StringAttr>("ref.role");
  return role && role.getValue() == "loss-normalization";
}

/// Whether reference value `ref` depends on a value the reference marks as its loss
/// normalization (ref.role = "loss-normalization"); an input or unknown value does not.
bool Engine::reachedByNormalization(int ref) const {
  if (ref < 0 || ref >= (int)refValueOf.size() || !refValueOf[ref])
    return false;
  Operation *def = refValueOf[ref].getDefiningOp();
  return def && anyUpstream({def}, normalizes, [](Value) {});
}

/// The reference inputs its loss normalization (ref.role = "loss-normalization") is
/// computed from (a token mask).
llvm::DenseSet<Value> Engine::normalizationInputs() const {
  llvm::DenseSet<Value> normInputs;
  std::vector<Operation *> roots;
  for (Value v : refValueOf)
    if (Operation *def = v ? v.getDefiningOp() : nullptr; def && normalizes(def))
      roots.push_back(def);
  anyUpstream(roots, [](Operation *) { return false; },
              [&](Value v) { normInputs.insert(v); });
  return normInputs;
}

/// Whether plan value `v` is computed by its op from values that hold exactly (pieces
/// of) a reference input the loss normalization is computed from, or a value on its
/// way (a kept-label column): a count of one microbatch's tokens.
bool Engine::countsNormalizationInput(Value v) {
  Operation *def = v.getDefiningOp();
  if (!def)
    return false;
  llvm::DenseSet<Value> normInputs = normalizationInputs();
  for (Value operand : def->getOperands()) {
    Relation r = exactRelationOf(operand);
    if (!r.exact() || r.ref < 0 || r.ref >= (int)refValueOf.size() || !refValueOf[r.ref])
      continue;
    Operation *refDef = refValueOf[r.ref].getDefiningOp();
    if (normInputs.count(refValueOf[r.ref]) || (refDef && normalizes(refDef)))
      return true;
  }
  return false;
}

/// The mesh axes that split the batch: those splitting a plan input bound to a
/// reference input of integer type (tokens, labels, ids) or one the reference's loss
/// normalization (ref.role = "loss-normalization") is computed from (a token mask).
/// Empty where the spec shows none.
std::set<int> Engine::dataAxes() const {
  llvm::DenseSet<Value> normInputs = normalizationInputs();
  std::set<int> axes;
  for (const Binding &b : spec.planInputs) {
    auto it = refIndexByName.find(b.refName);
    if (it == refIndexByName.end() || it->second < 0 || it->second >= (int)refValueOf.size() ||
        !refValueOf[it->second])
      continue;
    Value v = refValueOf[it->second];
    auto type = dyn_cast<RankedTensorType>(v.getType());
    bool data = normInputs.count(v) || (type && isa<IntegerType>(type.getElementType()));
    if (!data)
      continue;
    for (const auto &d : b.layout.dims)
      axes.insert(d.begin(), d.end());
  }
  return axes;
}

/// Whether `op` is a collective over mesh axes none of which splits the batch (a model
/// axis: tp, ep, pp), where the batch's axes are known.
bool Engine::overModelAxesOnly(Operation *op) const {
  auto names = op->getAttrOfType<ArrayAttr>("axes");
  if (!isa<dist::DistDialect>(op->getDialect()) || !names || names.empty())
    return false;
  std::set<int> data = dataAxes();
  if (data.empty())
    return false;
  for (Attribute a : names) {
    auto name = dyn_cast<StringAttr>(a);
    if (!name || data.count(mesh.axisIndex(name.str())))
      return false;
  }
  return true;
}

/// What is wrong at `culprit`, an op of the plan, for failure `f`: the explanation, its
/// kind refined by the reference's roles, and the first undefined op (`undefinedAt`,
/// described by `undefinedViol`) when there is one.
void Engine::explainCulprit(Operation *culprit, const FailedObligation &f, Operation *undefinedAt,
                            const Violation &undefinedViol, Violation &viol) {
  const Binding &b = *f.output;
  lastFixedRef = -1;
  explainOp(culprit, viol);
  std::string role = roleFor(culprit);
  if (!role.empty())
    viol.kind = role;
  // A norm taken of one part of the reference's sum of squares (one stage's, one
  // rank's parameters): say which part.
  if (role == "grad-norm" && isa<ref::SqrtOp>(culprit)) {
    Relation in = relationOf(culprit->getOperand(0));
    if (in.exact() && in.scale.isOne() && !in.layout.isPartial())
      viol.message = "first wrong value is `" + opName(culprit) + "` = ref.sqrt: it takes "
                     "the norm of `" + refValues[in.ref].name + "` alone, one term of the "
                     "reference's sum of squares: the norm must sum the squares of every "
                     "parameter's gradient, over every stage and shard that holds one";
  }
  // A constant factor on values that the reference's loss normalization reaches
  // (ref.role = "loss-normalization": the loss and its gradients) is a normalization
  // error: an average on top of a global token count, gradients rescaled per
  // microbatch. (A forward activation off by a factor -- an average where a layer's
  // sum belongs -- stays a reduction error, as does a collective over model axes only:
  // an average over tp where the sum belongs is no question of the token count.)
  Relation res = culprit->getNumResults() ? relationOf(culprit->getResult(0)) : Relation();
  if (viol.kind == "reduction" && res.related() && !res.scale.isOne() &&
      llvm::is_contained(refRoles, "loss-normalization") && reachedByNormalization(res.ref) &&
      !overModelAxesOnly(culprit))
    viol.kind = "loss-normalization";
  // Wrong values first seen in an updated parameter or optimizer state (the
  // reference marks its update with ref.role = "optimizer") come from the update.
  auto out = refIndexByName.find(b.refName);
  if (role.empty() && (viol.kind == "sharding" || viol.kind == "reduction") &&
      out != refIndexByName.end() && refRoles[out->second] == "optimizer") {
    viol.kind = "optimizer";
    viol.hint = "check the optimizer update here: which elements it applies to (decay "
                "masks, padding of the flat shard) and its coefficients";
  }
  if (culprit->getNumResults() == 1 && culprit->getResult(0).getType().isIndex())
    explainCounter(culprit, b, f, viol);
  if (culprit == undefinedAt)
    viol.notes.push_back(undefinedViol.notes.front());
  else if (undefinedAt)
    viol.locatedNotes.push_back({toSourceLoc(undefinedAt->getLoc()),
                                 "`" + opName(undefinedAt) + "`, computed from it: " +
                                     undefinedViol.notes.front()});
}

/// A culprit inside a backward pass the plan derives with ref.grad (ops named
/// `d(%x).k`) follows from a wrong forward value when another violation points into the
/// forward computation: report that one, and the gradients as its consequence.
void Engine::foldDerivedGradients() {
  auto derived = [](const Violation &v) { return v.at.rfind("%d(", 0) == 0; };
  auto forward = std::find_if(result.violations.begin(), result.violations.end(),
                              [&](const Violation &v) { return !derived(v) && !v.at.empty(); });
  if (forward == result.violations.end())
    return;
  std::vector<Violation> kept;
  std::string consequences;
  for (Violation &v : result.violations)
    if (derived(v))
      consequences += (consequences.empty() ? "" : ", ") + v.value;
  for (Violation &v : result.violations) {
    if (derived(v))
      continue;
    if (&v == &*forward && !consequences.empty()) {
      v.value += ", " + consequences;
      v.notes.push_back("the gradients the plan derives from this value (ref.grad) differ as a "
                        "consequence: " + consequences);
    }
    kept.push_back(std::move(v));
  }
  result.violations = std::move(kept);
}

/// When the plan's value does not exist at the counterexample (NaN: a division by 0, a
/// root of a negative number) where the reference's does: the first plan op, in
/// execution order, whose value is undefined on some rank while its operands are not.
Operation *Engine::undefinedCulprit(const FailedObligation &f, Violation &viol) {
  const std::vector<double> &vals = f.decision.assignment;
  if (vals.empty())
    return nullptr;
  Evaluator eval(pool);
  eval.reset(vals);
  if (std::isfinite(eval.poly(f.plan)) || !std::isfinite(eval.poly(f.reference)))
    return nullptr;
  auto finiteOn = [&](Value x, int64_t r) {
    auto it = planTrace.values.find(x);
    if (it == planTrace.values.end() || r >= (int64_t)it->second.size())
      return true;
    for (PolyId p : it->second[r].data)
      if (!std::isfinite(eval.poly(p)))
        return false;
    return true;
  };
  for (Operation *op : spec.planOps()) {
    if (op->getNumResults() != 1 || !planTrace.values.count(op->getResult(0)))
      continue;
    for (int64_t r = 0; r < mesh.numRanks(); ++r) {
      if (finiteOn(op->getResult(0), r) ||
          !llvm::all_of(op->getOperands(), [&](Value x) { return finiteOn(x, r); }))
        continue;
      std::string why = "an operation in it is undefined there";
      if (isa<ref::DivOp, ref::RecipOp, ref::RsqrtOp, ref::LogOp, ref::SqrtOp>(op)) {
        std::string x = "`" + spec.nameOf(op->getOperand(op->getNumOperands() - 1)) + "`";
        why = isa<ref::DivOp>(op)     ? "it divides by " + x + ", which is 0 there"
              : isa<ref::RecipOp>(op) ? "it takes the reciprocal of " + x + ", which is 0 there"
              : isa<ref::SqrtOp>(op)  ? "it takes the square root of " + x + ", which is negative there"
                                      : "its operand " + x + " is not positive there";
      }
      viol.kind = "dataflow";
      std::string role = roleFor(op);
      if (!role.empty())
        viol.kind = role;
      viol.message = "first wrong value is `" + opName(op) + "` = " +
                     op->getName().getStringRef().str() + ": on rank " + mesh.rankStr(r) +
                     " it has no value at the counterexample (" + why +
                     "), where the reference's outputs do: the plan divides or takes a root "
                     "where the reference does not";
      viol.notes.push_back("on rank " + mesh.rankStr(r) + " it has no value at the "
                           "counterexample (" + why + ")");
      viol.notes.push_back("the plan must stay defined wherever the reference is: guard the "
                           "division (a count of at least 1), or compute it as the reference "
                           "does");
      return op;
    }
  }
  return nullptr;
}

} // namespace planproof::engine
