//===- Unreduced.cpp - a reduction missing, found by what it would fix -*- C++ -*-===//
//
// Engine (Engine.h): counterfactual evaluations of one op with one operand reduced
// over mesh axes first. They serve two questions of the localization:
//
//  - fixedByReducing: would this op be right had its partial operand (a partial sum
//    of a reference value) been reduced first? (Explain.cpp's partial operands.)
//  - unreducedOnPath: where the walk back from a wrong output ends at an op that,
//    from correct operands, computes a value the reference never computes, the plan
//    may be computing through values of its own (a vocabulary-parallel
//    cross-entropy picks the label's logit from `x - max`, where the reference picks
//    log-probabilities) and have left out their reduction further on. The op to
//    blame is then the first one on the walk's path whose operand, reduced over a
//    group of mesh axes it varies over, would make the op's result -- or a value a
//    few ref ops later on the path, computed from it -- a reference value (complete,
//    up to its sign): there the value was needed complete. A reduction that leaves
//    the operand zero (a max of values <= 0 against the zeros of the other ranks)
//    removes it and fixes nothing: not taken.
//
// Neither changes a verdict: the violation stands on its counterexample. They choose
// the op named and its explanation, and the hint they give is checked like every
// other (Fixes.cpp: the edited plan is verified again before the hint is shown).
//
//===----------------------------------------------------------------------===//
#include "Engine/Engine.h"

using namespace planproof;

namespace planproof::engine {

/// The global value `layout` reads from `v`'s ranks, on every rank (for a partial
/// layout, the reduction over each rank's group); false where it cannot be read so.
bool Engine::reducedValue(Value v, const Layout &layout, std::vector<SymTensor> &out) {
  auto it = planTrace.values.find(v);
  // Every rank holds a block of one shape (not so for a value of one pipeline stage).
  if (it == planTrace.values.end() || (int64_t)it->second.size() != mesh.numRanks() ||
      llvm::any_of(it->second, [&](const SymTensor &t) {
        return t.data.empty() || t.shape != it->second[0].shape;
      }))
    return false;
  const std::vector<SymTensor> &partial = it->second;
  out = partial;
  for (int64_t r = 0; r < (int64_t)partial.size(); ++r)
    for (int64_t l = 0; l < (int64_t)partial[r].data.size(); ++l)
      if (!gatherElement(pool, mesh, layout, partial, r, l, out[r].data[l]))
        return false;
  return true;
}

/// What the ref op `op` computes on every rank with its operand #`operand` holding
/// `value` instead (false where it cannot be evaluated so).
bool Engine::evaluateWith(Operation *op, unsigned operand, const std::vector<SymTensor> &value,
                          std::vector<SymTensor> &results) {
  if (!isa<ref::RefDialect>(op->getDialect()) || op->getNumResults() != 1)
    return false;
  SymbolicDomain d{pool};
  for (Value x : op->getOperands()) {
    auto it = planTrace.values.find(x);
    if (it == planTrace.values.end() || it->second.size() != value.size())
      return false;
  }
  results.assign(value.size(), SymTensor());
  for (int64_t r = 0; r < (int64_t)value.size(); ++r) {
    std::vector<const SymTensor *> ins;
    std::vector<PolyId> idx;
    for (unsigned j = 0; j < op->getNumOperands(); ++j) {
      if (op->getOperand(j).getType().isIndex())
        idx.push_back(planTrace.values[op->getOperand(j)][r].data[0]);
      else
        ins.push_back(j == operand ? &value[r] : &planTrace.values[op->getOperand(j)][r]);
    }
    if (!evalRefOp(d, op, ins, results[r], idx).empty())
      return false;
  }
  return true;
}

/// Would `op` compute a correct value (an exact relation to some reference value) if
/// its partial operand `operand` were reduced first?
bool Engine::fixedByReducing(Operation *op, unsigned operand, const Relation &in) {
  try {
    std::vector<SymTensor> complete, results;
    if (!reducedValue(op->getOperand(operand), in.layout, complete) ||
        !evaluateWith(op, operand, complete, results))
      return false;
    Relation fixed = finder->find(results);
    if (fixed.exact())
      lastFixedRef = fixed.ref;
    return fixed.exact();
  } catch (const NumericLimit &) {
    return false;
  }
}

/// Whether every element of `perRank` is 0 at both fingerprint points.
bool Engine::numericallyZero(const std::vector<SymTensor> &perRank) {
  counterfactualFinders();
  return numericFinder->numericallyZero(perRank);
}

/// The finders of counterfactual readings (numeric ratios; the reference read flat).
void Engine::counterfactualFinders() {
  if (!numericFinder) {
    numericFinder = std::make_unique<RelationFinder>(pool, mesh, refValues);
    numericFinder->numericRatios = true;
    flatRefs.reserve(refValues.size());
    std::vector<RefValue> views;
    for (const RefValue &r : refValues) {
      flatRefs.push_back(*r.tensor);
      flatRefs.back().shape = {(int64_t)r.tensor->data.size()};
    }
    for (size_t i = 0; i < refValues.size(); ++i)
      views.push_back({refValues[i].name, &flatRefs[i]});
    flatFinder = std::make_unique<RelationFinder>(pool, mesh, std::move(views));
    flatFinder->numericRatios = true;
  }
}

/// What `perRank` holds, for a counterfactual reading: found among the reference
/// values whose elements' fingerprints it shares (up to sign), with ratios accepted
/// numerically (RelationFinder::numericRatios); then read flat (row-major) against the
/// reference's values read flat: a plan that computes per token in the shape [batch,
/// sequence] where the reference computes on [batch * sequence] tokens holds its
/// values in another shape. A split of the flat value's only dimension is a split of
/// the plan value's first dimension, so a relation found so is one of the plan's value:
/// its blocks are the reference's row-major blocks. (Other splits are not contiguous
/// when flat, and are not found.)
Relation Engine::counterfactualRelation(const std::vector<SymTensor> &perRank) {
  counterfactualFinders();
  std::vector<int> only = numericFinder->exactCandidates(perRank, /*negated=*/true);
  // A constant of the reference (a broadcast literal) is no value to be completed: a
  // ratio to it says nothing.
  llvm::erase_if(only, [&](int i) {
    return llvm::all_of(refValues[i].tensor->data, [&](PolyId p) { return pool.isConstant(p); });
  });
  if (only.empty())
    return Relation(); // no element of it is any reference element, up to sign
  Relation r = numericFinder->find(perRank, {}, &only);
  if (r.related())
    return r;
  std::vector<SymTensor> flat = perRank;
  for (SymTensor &t : flat)
    t.shape = {(int64_t)t.data.size()};
  r = flatFinder->find(flat, {}, &only);
  r.flat = r.related();
  return r;
}

/// The mesh axes over which `v` differs between ranks (ranks that differ in that
/// axis's coordinate only hold different elements somewhere).
std::vector<int> Engine::axesVaried(Value v) {
  std::vector<int> out;
  auto pt = planTrace.values.find(v);
  if (pt == planTrace.values.end() || (int64_t)pt->second.size() != mesh.numRanks())
    return out;
  const std::vector<SymTensor> &ranks = pt->second;
  for (int a = 0; a < (int)mesh.axes.size(); ++a) {
    bool varies = false;
    for (int64_t r = 0; r < (int64_t)ranks.size() && !varies; ++r) {
      std::vector<int64_t> c = mesh.coords(r);
      if (c[a] != 0)
        continue; // compare each group's first rank with the others
      for (int64_t k = 1; k < mesh.shape[a] && !varies; ++k) {
        c[a] = k;
        varies = ranks[mesh.rankOf(c)].data != ranks[r].data;
      }
    }
    if (varies)
      out.push_back(a);
  }
  return out;
}

/// Operand #k of def(path[i - 1]) that is path[i], or -1.
static int operandOnPath(const std::vector<Value> &path, size_t i) {
  Operation *op = path[i - 1].getDefiningOp();
  for (unsigned k = 0; op && k < op->getNumOperands(); ++k)
    if (op->getOperand(k) == path[i])
      return (int)k;
  return -1;
}

/// Whether a counterfactual reading is what a reduction fixes: complete, as a
/// reduction makes it, and the value itself (up to its sign).
static bool acceptable(const Relation &r) {
  return r.related() && !r.transposed && r.block.empty() && !r.layout.isPartial() &&
         (r.scale.isOne() || r.scale == Rational(-1));
}

/// Whether reducing path[i] ("kind" over `axes`) as the operand of def(path[i - 1])
/// makes that op's result, or a value at most 8 ref ops later on the path computed from
/// it, a reference value: the record for `unreduced`, or none.
std::optional<Engine::Unreduced> Engine::reducedOnPath(const std::vector<Value> &path, size_t i,
                                                       ReduceKind kind,
                                                       const std::vector<int> &axes) {
  constexpr size_t kMaxFollow = 8;
  Operation *op = path[i - 1].getDefiningOp();
  int operand = operandOnPath(path, i);
  auto type = dyn_cast<RankedTensorType>(path[i].getType());
  if (!op || operand < 0 || !type || !isa<ref::RefDialect>(op->getDialect()) ||
      relationOf(op->getResult(0)).exact())
    return std::nullopt;
  // Bounded over the run (a count of evaluated ops, so that reports do not depend on
  // the machine): past it, the walk's own culprit stands.
  if (counterfactualBudget <= 0)
    return std::nullopt;
  Layout reduced;
  reduced.dims.assign(type.getRank(), {});
  for (int a : axes)
    reduced.partial.push_back({a, kind});
  try {
    std::vector<SymTensor> value, results;
    // A reduction that leaves nothing (a max of values <= 0 and the zeros of the ranks
    // without them) fixes nothing: it removes the operand.
    --counterfactualBudget;
    if (!reducedValue(path[i], reduced, value) || numericallyZero(value) ||
        !evaluateWith(op, operand, value, results))
      return std::nullopt;
    Relation fixed = counterfactualRelation(results);
    Value at = path[i - 1];
    for (size_t k = i - 1, n = 0; !acceptable(fixed) && k > 0 && n < kMaxFollow; --k, ++n) {
      Operation *next = path[k - 1].getDefiningOp();
      int nextOperand = operandOnPath(path, k);
      std::vector<SymTensor> followed;
      if (!next || nextOperand < 0 || counterfactualBudget-- <= 0 ||
          !evaluateWith(next, nextOperand, results, followed))
        break;
      results = std::move(followed);
      fixed = counterfactualRelation(results);
      at = path[k - 1];
    }
    if (!acceptable(fixed))
      return std::nullopt;
    return Unreduced{(unsigned)operand, kind, axes, fixed, at};
  } catch (const NumericLimit &) {
    return std::nullopt;
  }
}

/// The op on the walk's `path` (output first, the culprit's result last) that needed
/// its operand on the path reduced over mesh axes (see the file comment), recorded in
/// `unreduced` for explainUnreduced, or null. Of the places where the reduction would
/// fix the value -- consecutive ops linear in it (a sum over the classes, a reshape) --
/// the last: where the value stops being usable as a partial one (a complete value
/// added to it on every rank), which is where it was needed complete.
Operation *Engine::unreducedOnPath(const std::vector<Value> &path) {
  // Bounded: the 16 ops nearest the culprit (a missing reduction sits right after the
  // plan's own values), each with the groups of at most 5 axes its operand varies over.
  constexpr size_t kMaxOps = 16;
  for (size_t i = path.size() - 1, tried = 0; i > 0 && tried < kMaxOps; --i, ++tried) {
    options.deadline.check("localizing violations");
    std::vector<int> varied = axesVaried(path[i]);
    if (varied.empty() || varied.size() > 5)
      continue;
    for (ReduceKind kind : {ReduceKind::Sum, ReduceKind::Max, ReduceKind::Avg})
      for (uint32_t subset = 1; subset < (1u << varied.size()); ++subset) {
        std::vector<int> axes;
        for (size_t k = 0; k < varied.size(); ++k)
          if (subset & (1u << k))
            axes.push_back(varied[k]);
        std::optional<Unreduced> found = reducedOnPath(path, i, kind, axes);
        if (!found)
          continue;
        // The same reduction, as late as it still fixes the value.
        size_t at = i;
        for (size_t j = i - 1; j > 0 && at - j <= kMaxOps; --j) {
          std::vector<int> v = axesVaried(path[j]);
          if (!llvm::all_of(axes, [&](int a) { return llvm::is_contained(v, a); }))
            break;
          std::optional<Unreduced> later = reducedOnPath(path, j, kind, axes);
          if (!later)
            break;
          found = later;
          at = j;
        }
        Operation *op = path[at - 1].getDefiningOp();
        unreduced[op] = *found;
        return op;
      }
  }
  return nullptr;
}

/// A relation as a note says it; one found flat says so (flatRelation).
std::string Engine::describeRelation(const Relation &r) const {
  if (!r.flat)
    return finder->describe(r);
  return flatFinder->describe(r) + ", both read row-major as flat elements";
}

/// An op on the path of a value the reference never computes, whose operand is only
/// right reduced over mesh axes (unreducedOnPath found it).
bool Engine::explainUnreduced(const ExplainSite &site, Violation &viol) {
  auto it = unreduced.find(site.op);
  if (it == unreduced.end())
    return false;
  const Unreduced &u = it->second;
  std::string pk = reduceKindName(u.kind);
  std::string operand = spec.nameOf(site.op->getOperand(u.operand));
  viol.kind = "reduction";
  viol.message = site.head + "operand #" + std::to_string(u.operand) + " `" + operand +
                 "` is a value of the plan's own (no reference value) that differs across " +
                 axesStr(mesh, u.axes) + "; reduced with \"" + pk + "\" over " +
                 axesStr(mesh, u.axes) + " first, " +
                 (u.at == site.op->getResult(0)
                      ? std::string("this op's result")
                      : "`" + spec.nameOf(u.at) + "` (line " +
                            std::to_string(toSourceLoc(u.at.getLoc()).line) + ")") +
                 " would hold " + describeRelation(u.fixed) + ": a reduction is missing (dist.all_reduce \"" +
                 pk + "\" over " + axesStr(mesh, u.axes) + ")";
  viol.hint = "insert dist.all_reduce \"" + pk + "\" over " + axesStr(mesh, u.axes) + " on `" +
              operand + "` before this op";
  viol.fix = PlanEdit::insertAllReduce(site.op, u.operand, pk, axisNames(u.axes));
  lastFixedRef = u.fixed.ref;
  return true;
}

} // namespace planproof::engine
