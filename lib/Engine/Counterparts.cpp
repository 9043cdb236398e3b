//===- Counterparts.cpp - operands crossed between iterations -----*- C++ -*-===//
//
// Engine (Engine.h): the localization's reading of an op whose operands each hold a
// reference value, but a pair of them the reference never combines -- a loop body run
// once per microbatch (or layer) where one operand comes from another iteration. The
// reference's own op of that kind that takes all but one of the same values (its
// *counterpart*) says what the odd operand should have been; walking the two
// computations back side by side finds where they part: an op of the same kind and
// inputs with other attributes (a slice at another microbatch's offset), or an op that
// takes a value the plan does hold where the reference takes another.
//
//===----------------------------------------------------------------------===//
#include "Engine/Engine.h"
#include "Engine/PlanEdit.h"

#include "mlir/IR/Diagnostics.h"

using namespace planproof;

namespace planproof::engine {

/// The reference Value plan value `v` holds whole, exactly and complete on every rank
/// (null where none).
Value Engine::heldReference(Value v) {
  if (!isa<RankedTensorType>(v.getType()))
    return Value();
  Relation r = exactRelationOf(v);
  if (!r.exact() || !r.block.empty() || r.transposed || r.layout.isPartial() || r.ref < 0 ||
      r.ref >= (int)refValueOf.size())
    return Value();
  return refValueOf[r.ref];
}

/// Some plan value of an op of `want`'s kind that holds `want` (null where none).
Value Engine::planHolder(Value want) {
  for (Value arg : spec.plan.getArguments())
    if (heldReference(arg) == want)
      return arg;
  Operation *def = want.getDefiningOp();
  for (Operation *op : spec.planOps())
    if (op->getNumResults() == 1 && (!def || op->getName() == def->getName()) &&
        heldReference(op->getResult(0)) == want)
      return op->getResult(0);
  return Value();
}

Operation *Engine::crossedCulprit(Operation *op) {
  // (A result that is a reference value off by a factor is explained by that factor.)
  if (!isa<ref::RefDialect>(op->getDialect()) || op->getNumOperands() < 2 ||
      op->getNumResults() != 1 || relationOf(op->getResult(0)).related())
    return nullptr;
  SmallVector<Value> held;
  for (Value o : op->getOperands()) {
    held.push_back(heldReference(o));
    if (!held.back())
      return nullptr;
  }
  Operation *q = nullptr;
  unsigned j = 0;
  if (!referenceCounterpart(op, held, [&](Value v) { return bool(planHolder(v)); }, q, j))
    return nullptr;
  Counterpart c;
  c.meet = op;
  c.partner = q;
  c.partnerOperand = j;
  Operation *consumer = op;
  Value p = op->getOperand(j), want = q->getOperand(j);
  c.meetWant = want;
  for (int depth = 0; depth < kMaxWalkDepth; ++depth) {
    c.consumer = consumer;
    c.got = heldReference(p);
    c.want = want;
    // The plan holds what the reference takes here: the consumer takes the wrong one.
    if (Value h = planHolder(want)) {
      c.crossed = p;
      c.holder = h;
      counterparts[consumer] = c;
      return consumer;
    }
    Operation *P = p.getDefiningOp();
    if (!P) {
      c.crossed = p;
      counterparts[consumer] = c;
      return consumer;
    }
    // Collectives move a value: look through those whose operand holds it too.
    if (isa<dist::DistDialect>(P->getDialect()) && P->getNumOperands() == 1 &&
        heldReference(P->getOperand(0)) == c.got) {
      p = P->getOperand(0);
      continue;
    }
    Operation *Q = want.getDefiningOp();
    c.theirs = Q;
    if (!Q || P->getName() != Q->getName() || P->getNumOperands() != Q->getNumOperands() ||
        P->getAttrDictionary() != Q->getAttrDictionary()) {
      counterparts[P] = c;
      return P;
    }
    int at = partingOperand(
        P, Q, [&](Value v) { return heldReference(v); },
        [&](Value v) { return bool(planHolder(v)); });
    if (at < 0) {
      counterparts[P] = c;
      return P;
    }
    consumer = P;
    p = P->getOperand(at);
    want = Q->getOperand(at);
  }
  return nullptr;
}

bool Engine::explainCounterpart(const ExplainSite &site, Violation &viol) {
  auto it = counterparts.find(site.op);
  if (it == counterparts.end())
    return false;
  const Counterpart &c = it->second;
  auto line = [&](Operation *at) {
    SourceLoc l = toSourceLoc(at->getLoc());
    return l.line ? " (line " + std::to_string(l.line) + ")" : std::string();
  };
  std::string meet = "`" + opName(c.meet) + "` = " + c.meet->getName().getStringRef().str() +
                     line(c.meet);
  viol.kind = "sharding";
  if (c.crossed) {
    unsigned pos = 0;
    for (unsigned i = 0; i < site.op->getNumOperands(); ++i)
      if (site.op->getOperand(i) == c.crossed)
        pos = i;
    viol.message = site.head + "it takes `" + spec.nameOf(c.crossed) + "` (reference `" +
                   spec.nameOf(c.got) + "`) as operand #" + std::to_string(pos) +
                   " where the reference's counterpart takes `" + spec.nameOf(c.want) + "`" +
                   (c.holder ? ", which the plan holds in `" + spec.nameOf(c.holder) + "`" : "") +
                   ": the values of different iterations (microbatches, layers) are crossed";
    viol.hint = c.holder ? "pass `" + spec.nameOf(c.holder) + "` here"
                         : "pass the value the reference takes here";
    Operation *def = c.holder ? c.holder.getDefiningOp() : nullptr;
    if (c.holder && (!def || (def->getBlock() == site.op->getBlock() && def->isBeforeInBlock(site.op))))
      viol.fix = PlanEdit::replaceOperand(site.op, pos, c.holder);
  } else {
    std::string diff;
    int differing = 0;
    if (c.theirs && c.theirs->getName() == site.op->getName())
      for (NamedAttribute a : c.theirs->getAttrs()) {
        Attribute mine = site.op->getAttr(a.getName());
        if (mine == a.getValue())
          continue;
        // (One attribute set as the reference's: the fix, kept only where it verifies.)
        if (++differing == 1 && mine && c.theirs->getAttrs().size() == site.op->getAttrs().size())
          viol.fix = PlanEdit::setAttr(site.op, a.getName().str(), a.getValue());
        else
          viol.fix = nullptr;
        diff += std::string(diff.empty() ? "" : ", ") + a.getName().str() + " = " +
                attrText(a.getValue()) + " (here " + (mine ? attrText(mine) : "none") + ")";
      }
    viol.message = site.head + "it computes `" + spec.nameOf(c.got) + "` where the reference " +
                   "computes `" + spec.nameOf(c.want) + "`" +
                   (diff.empty() ? "" : " by the same op with " + diff) +
                   ", which the plan never computes; the two meet at " + meet +
                   ", whose other operands are the reference's";
    viol.hint = "take this value for the iteration (microbatch, layer) its users are in: "
                "check the op's offsets or indices against the loop counter";
    if (viol.fix)
      for (NamedAttribute a : c.theirs->getAttrs())
        if (site.op->getAttr(a.getName()) != a.getValue())
          viol.hint = "use " + a.getName().str() + " = " + attrText(a.getValue()) +
                      ", as the reference's counterpart does";
  }
  viol.notes.push_back("the reference's counterpart of " + meet + " is `" +
                       opName(c.partner) + "`" + line(c.partner) + ": it takes `" +
                       spec.nameOf(c.meetWant) + "` where the plan's takes `" +
                       spec.nameOf(c.meet->getOperand(c.partnerOperand)) + "`");
  return true;
}

} // namespace planproof::engine
