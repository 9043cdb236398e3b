//===- Explain.cpp - what is wrong at the culprit ---------------*- C++ -*-===//
//
// Engine (Engine.h): what is wrong at the culprit op: the violation kind, message and notes,
// one op kind at a time.
//
//===----------------------------------------------------------------------===//
#include "Engine/Engine.h"

using namespace planproof;

namespace planproof::engine {

/// The role of the reference values around a culprit: what its result would hold once
/// fixed, what it holds, or what its operands hold.
std::string Engine::roleFor(Operation *op) {
  auto role = [&](int ref) { return ref >= 0 && ref < (int)refRoles.size() ? refRoles[ref] : ""; };
  if (!role(lastFixedRef).empty())
    return role(lastFixedRef);
  if (op->getNumResults() && !role(relationOf(op->getResult(0)).ref).empty())
    return role(relationOf(op->getResult(0)).ref);
  for (Value v : op->getOperands())
    if (isa<RankedTensorType>(v.getType()) && !role(relationOf(v).ref).empty())
      return role(relationOf(v).ref);
  return "";
}

/// A wrong integer state (a step count, a random counter): what the plan computes, what
/// the reference returns, and which kind of state it is, from what the reference uses
/// the input it updates for.
void Engine::explainCounter(Operation *op, const Binding &b, const FailedObligation &f, Violation &viol) {
  std::string found = pool.str(planTrace.values[op->getResult(0)][f.rank].data[0], 80);
  std::string want = pool.str(f.reference, 80);
  viol.kind = "dataflow";
  auto upd = spec.stateUpdates.find(b.refName);
  if (upd != spec.stateUpdates.end())
    for (unsigned i = 0; i < spec.reference.getNumArguments(); ++i)
      if (spec.refInputs[i] == upd->second)
        for (Operation *user : spec.reference.getArgument(i).getUsers()) {
          std::set<Operation *> seen{user};
          std::vector<Operation *> work{user};
          while (!work.empty()) {
            Operation *u = work.back();
            work.pop_back();
            if (isa<ref::PowerOp>(u))
              viol.kind = "optimizer";
            else if (isa<ref::DropoutMaskOp>(u) && viol.kind == "dataflow")
              viol.kind = "rng";
            else if (u->getNumResults() == 1 && u->getResult(0).getType().isIndex())
              for (Operation *next : u->getResult(0).getUsers())
                if (seen.insert(next).second)
                  work.push_back(next);
          }
        }
  viol.message = "first wrong value is `" + opName(op) + "`: the plan's next `" +
                 (upd != spec.stateUpdates.end() ? upd->second : b.refName) + "` is " + found +
                 ", the reference's is " + want;
  viol.hint = viol.kind == "optimizer"
                  ? "advance the optimizer's step counter once per step, not per microbatch"
                  : "advance the counter exactly as the reference does";
}

void Engine::explainOp(Operation *op, Violation &viol) {
  std::string name = op->getName().getStringRef().str();
  Relation res = relationOf(op->getResult(0));
  for (unsigned i = 0; i < op->getNumOperands(); ++i)
    viol.notes.push_back(describeOperand(op, i));
  viol.notes.push_back("its result `" + opName(op) + "` " + (res.related() ? "holds " : "matches ") +
                       finder->describe(res));
  std::string head = "first wrong value is `" + opName(op) + "` = " + name + ": ";
  // The rules, most specific first: the first that recognizes the defect explains it.
  using Rule = bool (Engine::*)(const ExplainSite &, Violation &);
  static constexpr Rule kRules[] = {
      &Engine::explainUnreduced,
      &Engine::explainCounterpart,
      &Engine::explainReduction,
      &Engine::explainGather,
      &Engine::explainPartialOperand,
      &Engine::explainNonlinearOfPartial,
      &Engine::explainLossTokens,
      &Engine::explainMicrobatchWeights,
      &Engine::explainMissingMicrobatch,
      &Engine::explainMissingSummand,
      &Engine::explainLoad,
      &Engine::explainPower,
      &Engine::explainDropoutMask,
      &Engine::explainCapacityDispatch,
      &Engine::explainAllToAll,
      &Engine::explainPositionMask,
      &Engine::explainCausalSoftmax,
      &Engine::explainMixedTiles,
      &Engine::explainTile,
      &Engine::explainScaled};
  ExplainSite site{op, name, head, res};
  for (Rule rule : kRules)
    if ((this->*rule)(site, viol))
      return;
  explainUnmatched(site, viol);
}

/// A reduction collective whose kind, axes or group is wrong.
bool Engine::explainReduction(const ExplainSite &site, Violation &viol) {
  Operation *op = site.op;
  const std::string &name = site.name;
  const std::string &head = site.head;
  auto collective = dyn_cast<dist::CollectiveOp>(op);
  if (collective && collective.getReduction()) {
    std::vector<int> axes = collectiveAxes(op, mesh);
    std::string kind = collective.getReduction()->str();
    Relation in = relationOf(op->getOperand(0));
    if (std::optional<Relation> share = evenShare(op, op->getOperand(0)))
      in = *share;
    if (in.related())
      viol.pictures.push_back({"operand `" + spec.nameOf(op->getOperand(0)) + "` holds " +
                                   finder->describe(in),
                               in.layout, refValues[in.ref].tensor->shape});
    if (site.res.related())
      viol.pictures.push_back({"result `" + opName(op) + "` holds " + finder->describe(site.res),
                               site.res.layout, refValues[site.res.ref].tensor->shape});
    if (in.exact() && in.layout.isPartial()) {
      Layout reduced = in.layout;
      reduced.partial.clear();
      viol.pictures.push_back({"what the reference needs: a complete `" + refValues[in.ref].name +
                                   "` (" + reduced.str(mesh) + "), the partial values summed",
                               reduced, refValues[in.ref].tensor->shape});
      std::vector<int> pa = in.layout.partialAxes();
      std::string pk = reduceKindName(in.layout.partial[0].second);
      std::set<int> a1(axes.begin(), axes.end()), a2(pa.begin(), pa.end());
      viol.kind = "reduction";
      if (a1 != a2) {
        viol.message = head + "reduces over " + axesStr(mesh, axes) +
                       ", but its operand is partial over " + axesStr(mesh, pa);
        viol.hint = "reduce over " + axesStr(mesh, pa) + " instead of " + axesStr(mesh, axes);
        auto fix = PlanEdit::setAttr(op, "axes", axesAttr(op->getContext(), pa));
        fix->alike = alikeOps(op, [&](Operation *o) {
          Relation r = relationOf(o->getOperand(0));
          return o->getAttr("axes") == op->getAttr("axes") && r.exact() && r.layout.isPartial() &&
                 r.layout.partialAxes() == pa;
        });
        if (fix->alike.empty())
          fix->alike = writtenAlike(op);
        viol.fix = fix;
      } else if (kind != pk) {
        viol.message = head + "expected reduction \"" + pk + "\" over " + axesStr(mesh, pa) +
                       " (the operand is partial-" + pk + "), found \"" + kind + "\"";
        viol.hint = "use \"" + pk + "\" instead of \"" + kind + "\" in this " + name;
        auto fix = PlanEdit::setAttr(op, "kind", StringAttr::get(op->getContext(), pk));
        fix->alike = alikeOps(op, [&](Operation *o) {
          Relation r = relationOf(o->getOperand(0));
          return o->getAttr("kind") == op->getAttr("kind") && r.exact() && r.layout.isPartial() &&
                 reduceKindName(r.layout.partial[0].second) == pk;
        });
        if (fix->alike.empty())
          fix->alike = writtenAlike(op);
        viol.fix = fix;
      } else {
        viol.kind = "sharding";
        viol.message = head + "the reduction matches the operand, but the result's block of "
                              "the scattered dimension is not the reference's";
        viol.hint = "scatter the dimension that the consumers (and the result's layout) "
                    "expect to be split";
      }
      return true;
    }
    if (in.exact()) {
      viol.kind = "reduction";
      viol.message = head + "its operand is already complete (" + in.layout.str(mesh) +
                     "); reducing it with \"" + kind + "\" over " + axesStr(mesh, axes) +
                     (kind == "sum" ? " multiplies it by " + std::to_string(mesh.groupSize(axes))
                                    : " changes it");
      viol.hint = "remove this " + name + ": its operand is already complete";
      viol.fix = PlanEdit::forward(op);
      return true;
    }
    viol.kind = "reduction";
    viol.message = head + "its result matches no reference value";
    return true;
  }
  return false;
}

/// An all-gather or shard slice on the wrong dimension or axes.
bool Engine::explainGather(const ExplainSite &site, Violation &viol) {
  Operation *op = site.op;
  const std::string &name = site.name;
  const std::string &head = site.head;
  if (isa<dist::AllGatherOp, dist::ShardSliceOp>(op)) {
    Relation in = relationOf(op->getOperand(0));
    int64_t dim = op->getAttrOfType<IntegerAttr>("dim").getInt();
    bool zig = op->hasAttr("zigzag");
    if (in.exact() && in.layout.isPartial() && isa<dist::ShardSliceOp>(op)) {
      std::vector<int> pa = in.layout.partialAxes();
      viol.kind = "reduction";
      viol.message = head + "its operand is still partial-" +
                     std::string(reduceKindName(in.layout.partial[0].second)) + " over " +
                     axesStr(mesh, pa) + ": keeping this rank's block drops the other ranks' "
                     "contributions to it";
      viol.hint = "use dist.reduce_scatter over " + axesStr(mesh, pa) + " instead of " + name;
      return true;
    }
    if (in.exact() && in.block.empty() && dim < (int64_t)in.layout.dims.size() &&
        !in.layout.dims[dim].empty() && in.layout.zigzagAt(dim) != zig) {
      viol.kind = "sharding";
      viol.message = head + "its operand is split on dim " + std::to_string(dim) + " in " +
                     (in.layout.zigzagAt(dim) ? "zigzag chunk order" : "consecutive blocks") +
                     ", but this op " + (zig ? "assumes zigzag chunks" : "places consecutive blocks") +
                     ": the result's elements are permuted";
      viol.hint = in.layout.zigzagAt(dim) ? "add `zigzag` to this " + name
                                          : "remove `zigzag` from this " + name;
      auto fix = in.layout.zigzagAt(dim)
                     ? PlanEdit::setAttr(op, "zigzag", UnitAttr::get(op->getContext()))
                     : PlanEdit::removeAttr(op, "zigzag");
      fix->alike = alikeOps(op, [&](Operation *o) {
        Relation r = relationOf(o->getOperand(0));
        int64_t d = o->getAttrOfType<IntegerAttr>("dim").getInt();
        return r.exact() && r.block.empty() && d < (int64_t)r.layout.dims.size() &&
               !r.layout.dims[d].empty() && r.layout.zigzagAt(d) != o->hasAttr("zigzag");
      });
      viol.fix = fix;
      return true;
    }
    viol.kind = "sharding";
    viol.message = head + "its result matches no reference value under any layout: the " +
                   "operand is not split the way this op assumes";
    viol.hint = "check which dimension and mesh axes the operand is split on";
    return true;
  }
  return false;
}

/// A partial operand that reducing first would have made right.
/// A rank-local compute op. A partial operand is the fault when reducing it first
/// would have made this op's result right (a counterfactual evaluation): gelu of a
/// partial sum, a bias added on every rank, a max shift taken before the max
/// all-reduce. Partial values that flow through linear or layout ops are fine.
bool Engine::explainPartialOperand(const ExplainSite &site, Violation &viol) {
  Operation *op = site.op;
  const std::string &name = site.name;
  const std::string &head = site.head;
  for (unsigned i = 0; i < op->getNumOperands(); ++i) {
    Relation in = relationOf(op->getOperand(i));
    if (!in.exact() || !in.layout.isPartial() || !fixedByReducing(op, i, in))
      continue;
    std::vector<int> pa = in.layout.partialAxes();
    ReduceKind kind = in.layout.partial[0].second;
    std::string pk = reduceKindName(kind);
    bool additive = isa<ref::BiasAddOp, ref::AddOp, ref::SubOp>(op) && kind == ReduceKind::Sum;
    viol.kind = "reduction";
    viol.message = head + "operand #" + std::to_string(i) + " `" + spec.nameOf(op->getOperand(i)) +
                   "` is still partial-" + pk + " over " + axesStr(mesh, pa) +
                   (additive ? ", and adding a complete operand to it on every rank counts "
                               "that operand " + std::to_string(mesh.groupSize(pa)) + " times"
                             : ", but " + name + " needs its complete value") +
                   "; reduce it first (dist.all_reduce \"" + pk + "\" over " +
                   axesStr(mesh, pa) + ")";
    viol.hint = "insert dist.all_reduce \"" + pk + "\" over " + axesStr(mesh, pa) +
                " on `" + spec.nameOf(op->getOperand(i)) + "` before this op";
    viol.fix = PlanEdit::insertAllReduce(op, i, pk, axisNames(pa));
    return true;
  }
  return false;
}

/// A partial operand reaching an op that is not linear in it, even where reducing it
/// alone would not make the result a reference value (a microbatch's share).
bool Engine::explainNonlinearOfPartial(const ExplainSite &site, Violation &viol) {
  Operation *op = site.op;
  const std::string &name = site.name;
  const std::string &head = site.head;
  if (auto nonlinear = dyn_cast<ref::NonlinearOp>(op)) {
    unsigned which = nonlinear.getNonlinearOperands();
    for (unsigned i = 0; i < op->getNumOperands(); ++i) {
      if (i >= 32 || !((which >> i) & 1) || !isa<RankedTensorType>(op->getOperand(i).getType()))
        continue;
      Relation in = relationOf(op->getOperand(i));
      if (!in.exact() || !in.layout.isPartial())
        continue;
      std::vector<int> pa = in.layout.partialAxes();
      std::string pk = reduceKindName(in.layout.partial[0].second);
      viol.kind = "reduction";
      viol.message = head + "operand #" + std::to_string(i) + " `" +
                     spec.nameOf(op->getOperand(i)) + "` is still partial-" + pk + " over " +
                     axesStr(mesh, pa) + " (it holds reference `" + refValues[in.ref].name +
                     "` only once reduced), but " + name + " is not linear in it and needs "
                     "its complete value";
      viol.hint = "reduce `" + spec.nameOf(op->getOperand(i)) + "` over " + axesStr(mesh, pa) +
                  " as well before this op";
      viol.fix = PlanEdit::insertAllReduce(op, i, pk, axisNames(pa));
      lastFixedRef = in.ref;
      return true;
    }
  }
  return false;
}

/// A loss normalized over the wrong tokens.
bool Engine::explainLossTokens(const ExplainSite &site, Violation &viol) {
  Operation *op = site.op;
  const std::string &head = site.head;
  const Relation &res = site.res;
  if (isa<ref::CrossEntropyOp, ref::CrossEntropySumOp>(op) && !res.related()) {
    viol.kind = "loss-normalization";
    viol.message = head + "from correct operands (logits, labels and mask of its tokens) it "
                          "computes a loss that is no reference value: the loss is normalized "
                          "over the wrong set of tokens";
    viol.hint = "sum the token losses here (ref.cross_entropy_sum) and divide once by the "
                "count of non-ignored tokens of the whole global batch";
    return true;
  }
  return false;
}

/// Microbatches accumulated with unequal weights.
bool Engine::explainMicrobatchWeights(const ExplainSite &site, Violation &viol) {
  Operation *op = site.op;
  const std::string &head = site.head;
  const Relation &res = site.res;
  if (isa<ref::AddOp, ref::ScaleOp>(op) && !res.related()) {
    // Gradient accumulation over microbatches: each must be counted exactly once.
    auto terms = microbatchTerms(op->getResult(0));
    if (terms && !isMicrobatchPartial(op->getResult(0))) {
      std::string wrong;
      for (auto &[tile, c] : *terms)
        wrong += (wrong.empty() ? "" : ", ") +
                 (tile == "*" ? std::string("a sum over every microbatch")
                              : "the microbatch at " + tile + " with weight " + c.str());
      {
        viol.kind = "reduction";
        viol.message = head + "it accumulates the microbatches' contributions with unequal "
                              "weights: " + wrong + " (each microbatch must count once, "
                              "all with one weight)";
        viol.hint = "add each microbatch's gradient to the accumulator exactly once, and scale "
                    "the loss (not the accumulator) by the number of microbatches";
        return true;
      }
    }
  }
  return false;
}

/// A microbatch's own share where the op needs the whole batch's value (an op not
/// linear in that operand: a loss divided by one microbatch's token count), or a
/// microbatch missing from an accumulation.
bool Engine::explainMissingMicrobatch(const ExplainSite &site, Violation &viol) {
  Operation *op = site.op;
  const std::string &head = site.head;
  auto tilesOf = [&](Value v) {
    std::string tiles;
    auto terms = microbatchTerms(v); // (kept: iterating *microbatchTerms(v) would dangle)
    for (auto &[tile, c] : *terms)
      tiles += (tiles.empty() ? "" : ", ") + tile;
    return tiles;
  };
  if (auto nonlinear = dyn_cast<ref::NonlinearOp>(op)) {
    unsigned which = nonlinear.getNonlinearOperands();
    for (unsigned i = 0; i < op->getNumOperands() && i < 32; ++i) {
      Value operand = op->getOperand(i);
      if (!((which >> i) & 1) || !isa<RankedTensorType>(operand.getType()) ||
          relationOf(operand).exact() || !isMicrobatchPartial(operand))
        continue;
      bool tokens = countsNormalizationInput(operand);
      viol.kind = tokens ? "loss-normalization" : "reduction";
      viol.message = head + "operand #" + std::to_string(i) + " `" + spec.nameOf(operand) +
                     "` holds the microbatches at " + tilesOf(operand) + " only, but " +
                     site.name + " is not linear in it and needs the whole batch's value" +
                     (tokens ? ": the loss is normalized by one microbatch's count of what "
                               "the reference counts over the whole batch"
                             : "");
      viol.hint = tokens ? "count the whole global batch (every microbatch and every "
                           "data-parallel rank) before the accumulation, and divide each "
                           "microbatch's summed loss by that count"
                         : "compute this from the whole batch's value, after accumulating "
                           "every microbatch";
      return true;
    }
  }
  for (unsigned i = 0; i < op->getNumOperands(); ++i) {
    Value operand = op->getOperand(i);
    if (isa<ref::AddOp, ref::ScaleOp>(op) || !isa<RankedTensorType>(operand.getType()) ||
        relationOf(operand).exact() || !isMicrobatchPartial(operand))
      continue;
    viol.kind = "reduction";
    viol.message = head + "operand #" + std::to_string(i) + " `" + spec.nameOf(operand) +
                   "` sums the contributions of the microbatches at " + tilesOf(operand) +
                   " only: a microbatch is missing from the accumulation";
    viol.hint = "accumulate every microbatch's gradient before the optimizer step";
    return true;
  }
  return false;
}

/// An operand holding one summand of what the reference takes.
/// An operand holding one summand of what the reference's same op takes: the other
/// summand never arrived (the gradient of a weight used twice -- tied embeddings on
/// two stages -- is the sum of both uses' gradients).
bool Engine::explainMissingSummand(const ExplainSite &site, Violation &viol) {
  Operation *op = site.op;
  const std::string &name = site.name;
  const std::string &head = site.head;
  for (unsigned i = 0; i < op->getNumOperands(); ++i) {
    Value operand = op->getOperand(i);
    if (!isa<RankedTensorType>(operand.getType()))
      continue;
    Relation in = relationOf(operand);
    if (!in.exact() || !in.block.empty())
      continue;
    const std::string &held = refValues[in.ref].name;
    std::string whole, other;
    spec.reference.walk([&](Operation *r) {
      if (!whole.empty() || r->getName() != op->getName() || r->getNumOperands() <= i)
        return;
      auto add = r->getOperand(i).getDefiningOp<ref::AddOp>();
      if (!add)
        return;
      for (unsigned k = 0; k < 2; ++k)
        if (spec.nameOf(add->getOperand(k)) == held) {
          whole = spec.nameOf(add.getResult());
          other = spec.nameOf(add->getOperand(1 - k));
        }
    });
    if (whole.empty())
      continue;
    viol.kind = "reduction";
    viol.message = head + "operand #" + std::to_string(i) + " `" + spec.nameOf(operand) +
                   "` holds reference `" + held + "`, but the reference's " + name + " takes `" +
                   whole + "` = `" + held + "` + `" + other + "`: the other summand never "
                   "reaches this op";
    viol.hint = "a weight used in two places (tied embedding and LM head on the first and last "
                "stage) needs the sum of both uses' gradients on every copy: reduce them between "
                "the stages that hold it";
    return true;
  }
  return false;
}

/// A checkpoint load that reads the wrong state.
bool Engine::explainLoad(const ExplainSite &site, Violation &viol) {
  Operation *op = site.op;
  const std::string &head = site.head;
  if (isa<dist::LoadOp>(op)) {
    viol.kind = "checkpoint";
    viol.message = head + "the values it reads are not the state the reference resumes "
                          "from, for the elements this rank needs";
    viol.hint = "check the entry and the offsets this rank reads, against where the saving "
                "plan wrote them";
    return true;
  }
  return false;
}

/// A power with the wrong exponent.
bool Engine::explainPower(const ExplainSite &site, Violation &viol) {
  Operation *op = site.op;
  const std::string &head = site.head;
  if (auto pw = dyn_cast<ref::PowerOp>(op)) {
    viol.kind = "optimizer";
    viol.message = head + "it raises " + std::to_string(pw.getBase().convertToDouble()) +
                   " to a step count that no reference power uses: the optimizer's step "
                   "counter (bias correction) is wrong";
    viol.hint = "advance the step counter once per optimizer step (not per microbatch) and "
                "use the advanced count in the bias corrections";
    return true;
  }
  return false;
}

/// A dropout mask drawn from the wrong stream.
bool Engine::explainDropoutMask(const ExplainSite &site, Violation &viol) {
  Operation *op = site.op;
  const std::string &head = site.head;
  if (isa<ref::DropoutMaskOp>(op)) {
    viol.kind = "rng";
    viol.message = head + "its elements draw (key, counter) pairs that no reference dropout "
                          "mask draws for the same elements under any layout (RNG mode "
                          "'exact': every element must draw the reference's pair)";
    viol.hint = "derive the key from the reference's key and the counter from the reference's "
                "counter plus the element's global linear index; or, if statistically "
                "independent masks are intended, set dist.rng = \"independent\" on the plan";
    return true;
  }
  return false;
}

/// An expert capacity from the wrong token count.
bool Engine::explainCapacityDispatch(const ExplainSite &site, Violation &viol) {
  Operation *op = site.op;
  const std::string &head = site.head;
  if (auto cd = dyn_cast<ref::CapacityDispatchOp>(op)) {
    // Compare with the reference's capacity: slots per expert in each token group.
    Relation in = relationOf(cd.getInput());
    auto tokens = [](Value mask) { // [batch..., tokens, experts]
      auto t = cast<RankedTensorType>(mask.getType());
      return t.getDimSize(t.getRank() - 2);
    };
    std::string ref;
    spec.reference.walk([&](ref::CapacityDispatchOp rd) {
      int64_t T = tokens(rd.getInput());
      ref = std::to_string(rd.getCapacity()) + " per expert in each of " +
            std::to_string(rd.getGroups()) + " groups of " +
            std::to_string(T / rd.getGroups()) + " tokens";
    });
    if (in.exact() && !ref.empty()) {
      int64_t Tl = tokens(cd.getInput());
      viol.kind = "routing";
      viol.message = head + "it keeps " + std::to_string(cd.getCapacity()) +
                     " slots per expert for this rank's " + std::to_string(Tl) + " tokens (in " +
                     std::to_string(cd.getGroups()) + " group(s)), but the reference's capacity is " +
                     ref + ": tokens the reference drops are computed, or kept ones dropped";
      viol.hint = "compute the capacity from the tokens of this rank's group, as the reference "
                  "does (capacity factor x group tokens x k / experts)";
      return true;
    }
  }
  return false;
}

/// An all-to-all over the wrong group or split.
bool Engine::explainAllToAll(const ExplainSite &site, Violation &viol) {
  Operation *op = site.op;
  const std::string &head = site.head;
  if (auto a2a = dyn_cast<dist::AllToAllOp>(op)) {
    Relation in = relationOf(a2a.getInput());
    std::vector<int> axes = collectiveAxes(op, mesh);
    int64_t cdim = a2a.getConcatDim();
    auto splitting = cdim < (int64_t)in.layout.dims.size() ? in.layout.dims[cdim] : std::vector<int>{};
    bool within = llvm::all_of(axes, [&](int a) { return llvm::is_contained(splitting, a); });
    if (in.exact() && !splitting.empty() && !within) {
      viol.kind = "sharding";
      viol.message = head + "it exchanges blocks over " + axesStr(mesh, axes) +
                     ", but its operand's dim " + std::to_string(cdim) + " is split over " +
                     axesStr(mesh, in.layout.dims[cdim]) +
                     ": blocks go to ranks that do not hold their part (experts' slots to the "
                     "wrong ranks)";
      viol.hint = "run this all_to_all over " + axesStr(mesh, in.layout.dims[cdim]);
      auto fix = PlanEdit::setAttr(op, "axes", axesAttr(op->getContext(), in.layout.dims[cdim]));
      fix->alike = alikeOps(op, [&](Operation *o) { return o->getAttr("axes") == op->getAttr("axes"); });
      viol.fix = fix;
      return true;
    }
  }
  return false;
}

/// A position mask at local instead of global positions.
bool Engine::explainPositionMask(const ExplainSite &site, Violation &viol) {
  Operation *op = site.op;
  const std::string &head = site.head;
  if (auto pm = dyn_cast<ref::PositionMaskOp>(op)) {
    // A position mask matching no block of any reference mask: its offsets are not the
    // global positions of the rank's queries and keys.
    std::string offsets;
    for (int64_t r = 0; r < mesh.numRanks() && r < 8; ++r) {
      Rational q, k;
      if (pool.isConstant(planTrace.values[pm.getQOffset()][r].data[0], &q) &&
          pool.isConstant(planTrace.values[pm.getKOffset()][r].data[0], &k))
        offsets += (offsets.empty() ? "" : ", ") + mesh.rankStr(r) + " queries from " + q.str() +
                   ", keys from " + k.str();
    }
    viol.kind = "masking";
    viol.message = head + "its query and key positions (" + offsets + ") give a mask that is "
                   "no block of the reference's under any layout: each rank's offsets must be "
                   "the global positions of its first query and its first key";
    viol.hint = "compute the offsets from dist.axis_index: the global position of this rank's "
                "first query (and first key) in the reference's sequence";
    return true;
  }
  return false;
}

/// A causal softmax at the wrong positions.
bool Engine::explainCausalSoftmax(const ExplainSite &site, Violation &viol) {
  Operation *op = site.op;
  const std::string &head = site.head;
  if (auto cs = dyn_cast<ref::CausalSoftmaxOp>(op)) {
    // The mask is right when each query sees the keys up to its own global position:
    // offset = (global position of the first query) - (global position of the first key).
    Relation in = relationOf(cs.getInput());
    const SymTensor &x = planTrace.values[cs.getInput()][0];
    size_t rank = x.shape.size();
    if (in.exact() && rank >= 2) {
      for (int64_t r = 0; r < mesh.numRanks(); ++r) {
        std::vector<int64_t> at(rank, 0);
        for (size_t k = 0; k < in.offset.size(); ++k)
          at[k] += in.offset[k];
        std::vector<int64_t> g =
            in.layout.globalIndex(mesh, r, in.block.empty() ? x.shape : in.block, at);
        int64_t want = g[rank - 2] - g[rank - 1];
        int64_t have = x.shape[rank - 1] - x.shape[rank - 2];
        if (cs.getOffset()) {
          Rational c;
          if (!pool.isConstant(planTrace.values[cs.getOffset()][r].data[0], &c) ||
              !c.asInt64(have))
            continue;
        }
        if (have == want)
          continue;
        viol.kind = "masking";
        viol.message = head + "on rank " + mesh.rankStr(r) + " its causal offset is " +
                       std::to_string(have) + ", but its first query is at global position " +
                       std::to_string(g[rank - 2]) + " and its first key at " +
                       std::to_string(g[rank - 1]) + " (" + finder->describe(in) +
                       "): the mask must compare global positions, so the offset must be " +
                       std::to_string(want);
        viol.hint = "pass the global position of this block's first query (from "
                    "dist.axis_index and the chunk order) as the offset";
        return true;
      }
    }
  }
  return false;
}

/// A piece of a reference value that does not line up.
bool Engine::explainTile(const ExplainSite &site, Violation &viol) {
  const std::string &head = site.head;
  const Relation &res = site.res;
  if (res.exact() && !res.block.empty()) {
    viol.kind = "sharding";
    viol.message = head + "its result is a piece of `" + refValues[res.ref].name + "` (" +
                   finder->describe(res) + ") that does not line up with how its users "
                   "hold their other operands";
    viol.hint = "check which rows/columns of the reference value each rank (and each "
                "microbatch) must hold here";
    if (site.op->getNumResults() == 1)
      if (ref::SliceOp first = earlierCut(site.op->getResult(0)))
        viol.notes.push_back("`" + opName(first) + "` already cuts this window: one microbatch's "
                             "rows are taken twice, another's never");
    return true;
  }
  return false;
}

/// A reference value off by a factor.
bool Engine::explainScaled(const ExplainSite &site, Violation &viol) {
  Operation *op = site.op;
  const std::string &head = site.head;
  const Relation &res = site.res;
  if (res.related()) {
    viol.kind = isa<ref::MseLossOp, ref::MseLossGradOp>(op) ? "loss-normalization" : "reduction";
    viol.message = head + "its result is " + res.scale.str() + " times `" +
                   refValues[res.ref].name + "` (" + res.layout.str(mesh) +
                   "): the scaling is wrong";
    viol.hint = "remove the extra factor " + res.scale.str() + " (multiply by " +
                (Rational(1) / res.scale).str() + ")";
    viol.fix = PlanEdit::scaleResult(op, Rational(1) / res.scale);
    return true;
  }
  return false;
}

/// No rule applies: the result matches no reference value; notes for slices and
/// matmuls on split dimensions.
void Engine::explainUnmatched(const ExplainSite &site, Violation &viol) {
  Operation *op = site.op;
  const std::string &head = site.head;
  viol.kind = "sharding";
  viol.message = head + "from correct operands it computes a value that matches no reference "
                        "value under any layout";
  viol.hint = "check which dimension each operand is split on, and the op's attributes";
  if (isa<ref::SliceOp, ref::ConcatOp>(op)) {
    // A shift or a slice along a split dimension works on this rank's block only.
    auto sl = dyn_cast<ref::SliceOp>(op);
    int64_t dim = -1;
    if (auto cc = dyn_cast<ref::ConcatOp>(op))
      dim = cc.getDim();
    Relation in = relationOf(op->getOperand(0));
    for (size_t d = 0; d < in.layout.dims.size(); ++d) {
      bool touched = sl ? (sl.getOffsets()[d] != 0 ||
                           sl.getSizes()[d] != planTrace.values[op->getOperand(0)][0].shape[d])
                        : (int64_t)d == dim;
      if (!in.exact() || in.layout.dims[d].empty() || !touched)
        continue;
      viol.notes.push_back("it " + std::string(sl ? "slices" : "concatenates along") + " dim " +
                           std::to_string(d) + ", which is split over " +
                           axesStr(mesh, in.layout.dims[d]) +
                           (in.layout.zigzagAt(d) ? " in zigzag chunks" : "") +
                           ": positions here are positions in this rank's block, not in the "
                           "global tensor");
      viol.hint = "do this shift or slice on the whole dimension before it is split over " +
                  axesStr(mesh, in.layout.dims[d]) + " (or exchange the boundary elements)";
      break;
    }
  }
  if (auto mm = dyn_cast<ref::MatmulOp>(op)) {
    Relation a = relationOf(mm.getLhs()), b = relationOf(mm.getRhs());
    auto dimAxes = [&](const Relation &r, int64_t d) -> std::string {
      if (!r.exact() || d >= (int64_t)r.layout.dims.size() || r.layout.dims[d].empty())
        return "not split";
      return "split over " + axesStr(mesh, r.layout.dims[d]);
    };
    viol.notes.push_back("it contracts dim " + std::to_string(mm.getLhsDim()) + " of `" +
                         spec.nameOf(mm.getLhs()) + "` (" +
                         dimAxes(a, mm.getLhsDim()) + ") with dim " +
                         std::to_string(mm.getRhsDim()) + " of `" + spec.nameOf(mm.getRhs()) +
                         "` (" + dimAxes(b, mm.getRhsDim()) + "); check which dimension each operand is sharded on");
  }
}

void Engine::explainOutput(const Binding &b, Value v, const Relation &actual, Violation &viol) {
  std::string declared = "`" + b.refName + "` (" + b.layout.str(mesh) + ")";
  std::string holds = finder->describe(actual);
  std::string head = "plan result #" + std::to_string(b.index) + " `" + spec.nameOf(v) +
                     "` is returned as " + declared + ", but it holds " + holds;
  const std::string &actualName = refValues[actual.ref].name;
  viol.pictures.push_back({"`" + spec.nameOf(v) + "` holds " + holds, actual.layout,
                           refValues[actual.ref].tensor->shape});
  auto declaredShape = refTrace.byName.find(b.refName);
  if (declaredShape != refTrace.byName.end())
    viol.pictures.push_back({"returned as " + declared, b.layout, declaredShape->second.shape});
  if (actualName != b.refName) {
    viol.kind = "dataflow";
    viol.message = head + ": the wrong value is returned";
    viol.hint = "return the value that holds `" + b.refName + "`";
  } else if (actual.layout.isPartial() && !b.layout.isPartial()) {
    std::vector<int> pa = actual.layout.partialAxes();
    std::string pk = reduceKindName(actual.layout.partial[0].second);
    viol.kind = "reduction";
    viol.message = head + ": a reduction is missing (dist.all_reduce \"" + pk + "\" over " +
                   axesStr(mesh, pa) + ")";
    viol.hint = "insert dist.all_reduce \"" + pk + "\" over " + axesStr(mesh, pa) + " on `" +
                spec.nameOf(v) + "` before returning it";
    viol.fix = PlanEdit::insertAllReduce(spec.plan.getBody().front().getTerminator(), b.index, pk,
                                         axisNames(pa));
  } else if (b.layout.isPartial() && !actual.layout.isPartial()) {
    viol.kind = "reduction";
    viol.message = head + ": gathering it as partial would reduce a complete value";
    viol.hint = "declare the result with layout '" + actual.layout.str(mesh) + "'";
    viol.fix = PlanEdit::resultLayout(spec.plan, b.index, actual.layout);
  } else if (actual.scale.isOne() && actual.layout.str(mesh) == b.layout.str(mesh)) {
    // The relation says the declared value (it is found by numeric fingerprints, which
    // can match where the values differ elsewhere): say only that the value is wrong.
    viol.kind = "dataflow";
    viol.message = "plan result #" + std::to_string(b.index) + " `" + spec.nameOf(v) +
                   "`, returned as " + declared + ", differs from the reference's value; "
                   "no single op that computes it was found wrong";
    viol.hint = "compare how the plan computes `" + b.refName + "` with the reference";
  } else {
    viol.kind = actual.layout.partial != b.layout.partial ? "reduction" : "sharding";
    viol.message = head;
    viol.hint = "declare the result with layout '" + actual.layout.str(mesh) +
                "', or re-lay the value out before returning it";
    viol.fix = PlanEdit::resultLayout(spec.plan, b.index, actual.layout);
  }
}

} // namespace planproof::engine
