//===- MemoKey.cpp - a plan op's rule input, exactly ----------------------===//
//
// The key under which LayoutCache keeps a plan op's result state (LayoutEngine.h,
// docs/layout-engine.md "Reuse"): the mesh, the op's name, attributes and types (by
// identity: MLIR uniques them) and its operands' states, compared whole by State's
// derived equality.
//
//===----------------------------------------------------------------------===//
#include "LayoutEngine/LayoutState.h"

#include "mlir/IR/Operation.h"

using namespace mlir;

namespace planproof::layouts {

size_t StatesKeyHash::operator()(const StatesKey &k) const {
  // A few fields that tell most states apart; equality (derived) decides the rest.
  llvm::hash_code h = llvm::hash_combine(
      llvm::hash_value(k.context), llvm::hash_combine_range(k.ids.begin(), k.ids.end()));
  for (const State &s : k.states) {
    auto [num, den] = s.factor.key();
    h = llvm::hash_combine(h, s.known, s.term, num, den, s.split.size(), s.partial.size());
  }
  return h;
}

std::optional<StatesKey> memoKey(const std::string &mesh, Operation &op,
                                 const std::vector<const State *> &in) {
  StatesKey key;
  key.context = mesh;
  key.ids.push_back(op.getName().getAsOpaquePointer());
  key.ids.push_back(op.getAttrDictionary().getAsOpaquePointer());
  for (Value r : op.getResults())
    key.ids.push_back(r.getType().getAsOpaquePointer());
  for (size_t i = 0; i < in.size(); ++i) {
    if (!in[i]->known)
      return std::nullopt;
    key.ids.push_back(op.getOperand(i).getType().getAsOpaquePointer());
    key.states.push_back(*in[i]);
  }
  return key;
}

} // namespace planproof::layouts
