//===- Counterparts.cpp - a plan op's counterpart in the reference --------===//
//
// Spec.h, referenceCounterpart: both engines' reading of a plan op whose operands hold
// reference values the reference never combines (lib/Engine/Counterparts.cpp,
// lib/LayoutEngine/Crossed.cpp): which reference op it stands for, and which operand is
// the odd one.
//
//===----------------------------------------------------------------------===//
#include "Spec/Spec.h"

#include "mlir/IR/Operation.h"

using namespace mlir;

namespace planproof {

bool referenceCounterpart(Operation *op, ArrayRef<Value> held,
                          llvm::function_ref<bool(Value)> planHolds, Operation *&partner,
                          unsigned &operand) {
  auto sameKind = [&](Operation *u) {
    return u->getName() == op->getName() && u->getNumOperands() == op->getNumOperands() &&
           u->getAttrDictionary() == op->getAttrDictionary();
  };
  std::vector<std::pair<Operation *, unsigned>> found;
  for (Value h : held)
    for (Operation *user : h.getUsers()) {
      if (!sameKind(user) || llvm::any_of(found, [&](auto &f) { return f.first == user; }))
        continue;
      unsigned differ = 0, at = 0;
      for (unsigned i = 0; i < op->getNumOperands(); ++i)
        if (user->getOperand(i) != held[i])
          ++differ, at = i;
      if (differ == 0)
        return false; // the reference pairs them so: what differs is no pairing
      // The plan's op has every held value at hand, so its counterpart comes after
      // all of them in the reference (an earlier iteration's op does not).
      bool after = llvm::all_of(held, [&](Value v) {
        Operation *def = v.getDefiningOp();
        return !def || def->getBlock() != user->getBlock() || def->isBeforeInBlock(user);
      });
      // Only a value in the same role as in the reference: the odd operand's value is,
      // at that position, an operand of an op of this kind there too (another
      // iteration's), not a value equal by coincidence.
      bool sameRole = llvm::any_of(held[at].getUses(), [&](OpOperand &use) {
        return use.getOperandNumber() == at && sameKind(use.getOwner());
      });
      // (and the value it takes there is of the odd value's type: interchangeable.)
      if (differ == 1 && after && sameRole && user->getOperand(at).getType() == held[at].getType())
        found.push_back({user, at});
    }
  // Where two remain (iteration i's value paired with k's), the one whose wanted value
  // the plan never computes is where it went wrong.
  int unheld = 0;
  for (auto [user, at] : found)
    if (!planHolds(user->getOperand(at)))
      ++unheld, partner = user, operand = at;
  if (unheld > 1 || (unheld == 0 && found.size() != 1))
    return false;
  if (unheld == 0)
    partner = found[0].first, operand = found[0].second;
  return true;
}

int partingOperand(Operation *P, Operation *Q, llvm::function_ref<Value(Value)> held,
                   llvm::function_ref<bool(Value)> planHolds) {
  int at = -1;
  for (unsigned i = 0; i < P->getNumOperands() && i < Q->getNumOperands(); ++i)
    if (Value h = held(P->getOperand(i)); h && h != Q->getOperand(i) &&
        (at < 0 || !planHolds(Q->getOperand(i)))) {
      at = i;
      if (!planHolds(Q->getOperand(i)))
        break;
    }
  return at;
}

} // namespace planproof
