//===- Crossed.cpp - where a plan pairs values of different iterations ---===//
//
// DepartureFinder (LayoutState.h): an op whose operands hold values the reference
// computes, combined as the reference never does -- a loop body run once per
// microbatch or layer where one operand comes from another iteration. The reference's
// op of that kind and attributes that takes all but one of the same values (its
// counterpart) says what the odd operand should be; walking the plan's computation of
// it and the reference's of the counterpart's side by side finds where they part: an op
// of the same kind and inputs with other attributes (a slice at another microbatch's
// offset), or an op taking a value the plan holds elsewhere. The element engine reads
// its values the same way (lib/Engine/Counterparts.cpp). A diagnostic: no verdict
// changes.
//
//===----------------------------------------------------------------------===//
#include "LayoutEngine/LayoutState.h"
#include "Spec/Spec.h"

#include "Dist/DistDialect.h"
#include "Ref/RefDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

using namespace mlir;

namespace planproof::layouts {

void DepartureFinder::indexReference() const {
  if (indexed)
    return;
  indexed = true;
  referenceName(0); // fills referenceOps
  Block &body = spec.reference.getBody().front();
  for (const auto &[term, rv] : ref)
    for (const auto &[f, index] : rv.uses) {
      Value v;
      if (index < 0 && -1 - index < (int)body.getNumArguments())
        v = body.getArgument(-1 - index);
      else if (index >= 0 && index < (int)referenceOps.size() &&
               referenceOps[index]->getNumResults() == 1)
        v = referenceOps[index]->getResult(0);
      if (v)
        referenceOf[{term, f.str()}] = v;
    }
  for (const auto &[v, s] : planStates)
    if (s.known && s.partial.empty() && s.partialMax.empty())
      if (auto it = referenceOf.find({s.term, s.factor.str()}); it != referenceOf.end())
        heldBy.try_emplace(it->second, v);
}

Value DepartureFinder::heldReference(Value v) const {
  auto it = planStates.find(v);
  if (it == planStates.end() || !it->second.known || !it->second.partial.empty() ||
      !it->second.partialMax.empty())
    return Value();
  auto r = referenceOf.find({it->second.term, it->second.factor.str()});
  return r == referenceOf.end() ? Value() : r->second;
}

Value DepartureFinder::planHolder(Value want) const {
  auto it = heldBy.find(want);
  return it == heldBy.end() ? Value() : it->second;
}

static std::string lineOf(Operation *op) {
  SourceLoc l = toSourceLoc(op->getLoc());
  return l.line ? " (line " + std::to_string(l.line) + ")" : std::string();
}

DepartureFinder::Found DepartureFinder::crossed(Operation *op) const {
  if (!isa<ref::RefDialect>(op->getDialect()) || op->getNumOperands() < 2)
    return {};
  indexReference();
  SmallVector<Value> held;
  for (Value o : op->getOperands()) {
    held.push_back(heldReference(o));
    if (!held.back())
      return {};
  }
  Operation *partner = nullptr;
  unsigned j = 0;
  if (!referenceCounterpart(op, held, [&](Value v) { return bool(planHolder(v)); }, partner, j))
    return {};
  std::string meet = "`" + spec.nameOf(op->getResult(0)) + "` = " +
                     op->getName().getStringRef().str() + lineOf(op) +
                     " (the reference's counterpart `" + spec.nameOf(partner->getResult(0)) +
                     "`" + lineOf(partner) + ")";
  Operation *consumer = op;
  Value p = op->getOperand(j), want = partner->getOperand(j);
  for (int depth = 0; depth < 256; ++depth) {
    Value got = heldReference(p);
    Operation *P = p.getDefiningOp();
    Value h = planHolder(want);
    if (h || !P) {
      unsigned pos = 0;
      for (unsigned i = 0; i < consumer->getNumOperands(); ++i)
        if (consumer->getOperand(i) == p)
          pos = i;
      return {consumer, "it takes `" + spec.nameOf(p) + "` (the reference's `" +
                            spec.nameOf(got) + "`) as operand #" + std::to_string(pos) +
                            " where the reference takes `" + spec.nameOf(want) + "`" +
                            (h ? ", which the plan holds in `" + spec.nameOf(h) + "`" : "") +
                            ": values of different iterations (microbatches, layers) are "
                            "crossed" + (consumer == op ? "" : "; they meet at " + meet)};
    }
    // Collectives move a value: look through those whose operand holds it too.
    if (isa<dist::DistDialect>(P->getDialect()) && P->getNumOperands() == 1 &&
        heldReference(P->getOperand(0)) == got) {
      p = P->getOperand(0);
      continue;
    }
    Operation *Q = want.getDefiningOp();
    int at = -1;
    bool same = Q && P->getName() == Q->getName() && P->getNumOperands() == Q->getNumOperands();
    if (same && P->getAttrDictionary() == Q->getAttrDictionary())
      at = partingOperand(
          P, Q, [&](Value v) { return heldReference(v); },
          [&](Value v) { return bool(planHolder(v)); });
    if (at < 0) {
      std::string diff;
      if (same)
        for (NamedAttribute a : Q->getAttrs())
          if (Attribute mine = P->getAttr(a.getName()); mine != a.getValue())
            diff += std::string(diff.empty() ? "" : ", ") + a.getName().str() + " = " +
                    attrText(a.getValue()) + " (here " + (mine ? attrText(mine) : "none") + ")";
      return {P, "its value is the reference's `" + spec.nameOf(got) + "` where the reference " +
                     "computes `" + spec.nameOf(want) + "`" +
                     (diff.empty() ? "" : " by the same op with " + diff) +
                     ", which the plan never computes; the two meet at " + meet};
    }
    consumer = P;
    p = P->getOperand(at);
    want = Q->getOperand(at);
  }
  return {};
}

} // namespace planproof::layouts
