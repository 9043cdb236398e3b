//===- Vjp.cpp - differentiating through calls: vector-Jacobian functions -===//
//
// A call on the way from a `wrt` value to the loss is differentiated by a call of its
// callee's vector-Jacobian function (docs/calls.md, "Backward passes through calls"):
//
//   @f(a_1..a_n) -> (y_1..y_m)   gives   @f.vjp(a_1..a_n, c_1..c_m') -> (da_i, i active)
//
// c_k the cotangent of f's k-th float result, da_i the gradient of the sum over k of
// <y_k, c_k> with respect to argument i (for the arguments the call site differentiates:
// those its caller's derivation marked active). The body is f's body -- its forward
// computed again, from the same arguments: the same values, as a called function has no
// effects (no messages, no checkpoints, no gradient of its own: refused below) -- then
// the backward pass the same per-op rules derive from the seeds c_k. So the call of
// @f.vjp computes what differentiating the expanded call computes: expanded, it is the
// same ops' vector-Jacobian products, summed in the same places, after a copy of the
// forward. Nested calls are differentiated the same way, callees first (the loader
// refuses recursion). Each (function, active arguments) gets one vjp function.
//
//===----------------------------------------------------------------------===//
#include "Transforms/Differentiator.h"

#include "Dist/DistDialect.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"

using namespace mlir;
using namespace planproof;
using namespace planproof::autodiff;

bool VjpFunctions::takesCotangent(Type t) {
  auto r = dyn_cast<RankedTensorType>(t);
  return r && isa<FloatType>(r.getElementType());
}

func::FuncOp VjpFunctions::of(func::FuncOp f, ArrayRef<bool> active, std::string &why,
                              Location &where) {
  std::string mask;
  for (bool a : active)
    mask += a ? '1' : '0';
  std::string key = f.getSymName().str() + "/" + mask;
  if (auto it = made.find(key); it != made.end())
    return it->second;
  Operation *effect = nullptr;
  f.walk([&](Operation *op) {
    if (!effect && isa<dist::SendOp, dist::RecvOp, dist::SaveOp, dist::LoadOp, ref::GradOp>(op))
      effect = op;
  });
  if (effect) {
    why = "autodiff: @" + f.getSymName().str() + " is differentiated through a call, and its '" +
          effect->getName().getStringRef().str() +
          "' cannot be computed again in its backward pass";
    where = effect->getLoc();
    return {};
  }
  FunctionType type = f.getFunctionType();
  SmallVector<Type> ins(type.getInputs()), outs;
  for (Type t : type.getResults())
    if (takesCotangent(t))
      ins.push_back(t);
  for (auto [i, a] : llvm::enumerate(active))
    if (a)
      outs.push_back(type.getInput(i));
  std::string name = f.getSymName().str() + ".vjp";
  if (llvm::is_contained(active, false))
    name += "." + mask;
  while (module.lookupSymbol(name))
    name += "_";
  OpBuilder mb(f);
  mb.setInsertionPointAfter(f);
  auto v = func::FuncOp::create(mb, f.getLoc(), name,
                                FunctionType::get(f.getContext(), ins, outs));
  v.setPrivate();
  if (Attribute mesh = f->getAttr(dist::kMeshAttr))
    v->setAttr(dist::kMeshAttr, mesh);
  // What it differentiates, for readers of the module (the layout engine's summaries
  // do not rely on it: they match results by the terms they hold).
  v->setAttr("planproof.vjp_of", FlatSymbolRefAttr::get(f.getSymNameAttr()));
  made[key] = v;
  Block *body = v.addEntryBlock();
  IRMapping map;
  llvm::DenseMap<Value, Value> origin; // a copy -> the value of f it copies (for names)
  for (unsigned i = 0; i < f.getNumArguments(); ++i) {
    map.map(f.getArgument(i), body->getArgument(i));
    origin[body->getArgument(i)] = f.getArgument(i);
  }
  OpBuilder bb = OpBuilder::atBlockEnd(body);
  Block &forward = f.getBody().front();
  for (Operation &op : forward.without_terminator()) {
    Operation *copy = bb.clone(op, map);
    for (auto [from, to] : llvm::zip(op.getResults(), copy->getResults()))
      origin[to] = from;
  }
  SmallVector<std::pair<Value, Value>> seeds;
  unsigned c = f.getNumArguments();
  for (Value r : forward.getTerminator()->getOperands())
    if (takesCotangent(r.getType()))
      seeds.push_back({map.lookupOrDefault(r), body->getArgument(c++)});
  SmallVector<Value> wrt;
  for (auto [i, a] : llvm::enumerate(active))
    if (a)
      wrt.push_back(body->getArgument(i));
  std::function<std::string(Value)> names;
  if (nameOf)
    names = [this, origin](Value x) {
      auto it = origin.find(x);
      return nameOf(it != origin.end() ? it->second : x);
    };
  Differentiator d(body, f.getLoc(), seeds, wrt, names, ruled, this);
  SmallVector<Value> results;
  if (failed(d.derive(results, why, where))) {
    made.erase(key);
    v.erase();
    return {};
  }
  func::ReturnOp::create(bb, f.getLoc(), results);
  return v;
}

LogicalResult Differentiator::backpropCall(func::CallOp call, std::string &why,
                                           Location &where) {
  bool flows = llvm::any_of(call.getResults(), [&](Value r) {
    return active.contains(r) && adjoint.count(r);
  });
  SmallVector<bool> act;
  for (Value a : call.getOperands())
    act.push_back(active.contains(a) && VjpFunctions::takesCotangent(a.getType()));
  if (!flows || !llvm::is_contained(act, true))
    return success();
  auto fail = [&](const std::string &message) {
    why = message;
    where = call.getLoc();
    return failure();
  };
  if (!calls)
    return fail("autodiff: no derivative rule for 'func.call'");
  auto f = SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(call, call.getCalleeAttr());
  if (!f || f.isExternal())
    return fail("autodiff: @" + call.getCallee().str() + " has no body to differentiate");
  func::FuncOp v = calls->of(f, act, why, where);
  if (!v)
    return failure();
  if (ruled)
    ruled(call, nullptr);
  SmallVector<Value> operands(call.getOperands());
  for (Value r : call.getResults()) {
    if (!VjpFunctions::takesCotangent(r.getType()))
      continue;
    auto it = adjoint.find(r);
    operands.push_back(it != adjoint.end() && active.contains(r)
                           ? it->second
                           : constant(cast<RankedTensorType>(r.getType()), 0.0));
  }
  auto vjp = func::CallOp::create(b, loc, v, operands);
  if (nameOf && call.getNumResults())
    vjp->setLoc(NameLoc::get(b.getStringAttr("d(" + nameOf(call.getResult(0)) + ").call"),
                             gradLoc));
  unsigned j = 0;
  for (auto [i, a] : llvm::enumerate(act))
    if (a)
      accumulate(call.getOperand(i), vjp.getResult(j++));
  return success();
}
