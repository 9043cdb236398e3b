//===- MemoKey.cpp - a plan op's rule input, exactly, as text -------------===//
//
// The key under which LayoutCache keeps a plan op's result state (LayoutEngine.h,
// docs/layout-engine.md "Reuse"): the mesh, the op's name, attributes and types (by
// identity: MLIR uniques them) and its operands' states, every field of them.
//
//===----------------------------------------------------------------------===//
#include "LayoutEngine/LayoutState.h"

#include "mlir/IR/Operation.h"

using namespace mlir;

namespace planproof::layouts {

/// A known state, exactly, as text (for memoKey).
void stateKey(const State &s, std::string &out) {
  auto list = [&](const std::vector<int> &axes) {
    for (int a : axes)
      out += std::to_string(a) + ",";
    out += ";";
  };
  out += std::to_string(s.term) + "|" + s.factor.str() + "|";
  for (int64_t d : s.global)
    out += std::to_string(d) + "x";
  out += "|";
  for (const auto &d : s.split) {
    list(d);
    for (const Window &w : d.windows) { // rows chosen per rank are part of the layout
      out += "w" + std::to_string(w.length) + (w.zero ? "z" : "@" + std::to_string(w.base));
      for (auto [a, k] : w.coeff)
        out += "+" + std::to_string(a) + "*" + std::to_string(k);
      out += ";";
    }
  }
  out += "|";
  list(s.partial);
  list(s.partialMax);
  if (s.broadcast) {
    out += "b" + std::to_string(s.source) + ":";
    for (int64_t d : s.sourceDims)
      out += std::to_string(d) + ",";
  }
  for (auto [a, k] : s.rankCoeff)
    out += "r" + std::to_string(a) + "*" + std::to_string(k);
  if (s.isConst)
    out += "c" + std::to_string(s.constValue);
  if (s.rowSums) {
    const State::RowSums &r = *s.rowSums;
    out += "R" + std::to_string(r.of) + "/" + std::to_string(r.dim) + "/" + r.a.str() + "/" +
           r.b.str() + "/";
    for (int64_t k : r.at)
      out += std::to_string(k) + ",";
    State split; // the split, as a state's
    split.split = r.split;
    stateKey(split, out);
  }
  out += "#";
}

/// A plan op's rule input, exactly: the mesh, the op's name, attributes and types
/// (by identity) and its operands' states; "" when an operand's state is unknown.
std::string memoKey(const std::string &mesh, Operation &op,
                    const std::vector<const State *> &in) {
  std::string key = mesh;
  auto ptr = [&](const void *p) { key += std::to_string(reinterpret_cast<uintptr_t>(p)) + ","; };
  ptr(op.getName().getAsOpaquePointer());
  ptr(op.getAttrDictionary().getAsOpaquePointer());
  for (Value r : op.getResults())
    ptr(r.getType().getAsOpaquePointer());
  for (size_t i = 0; i < in.size(); ++i) {
    if (!in[i]->known)
      return "";
    ptr(op.getOperand(i).getType().getAsOpaquePointer());
    stateKey(*in[i], key);
  }
  return key;
}

} // namespace planproof::layouts
