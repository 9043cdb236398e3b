//===- Differentiator.h - reverse mode over one block (private) -*- C++ -*-===//
//
// The derivation behind expandGradOps (Autodiff.cpp: one vector-Jacobian rule per op)
// and the vector-Jacobian functions of called functions (Vjp.cpp). A derivation runs
// over one block: seeds (values and their cotangents) at the end, `wrt` values whose
// gradients it returns, and the backward pass inserted before an anchor op (or at the
// block's end).
//
//===----------------------------------------------------------------------===//
#ifndef PLANPROOF_TRANSFORMS_DIFFERENTIATOR_H
#define PLANPROOF_TRANSFORMS_DIFFERENTIATOR_H

#include "Ref/RefDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringMap.h"

#include <functional>
#include <map>
#include <optional>
#include <string>

namespace planproof::autodiff {

class Differentiator;

/// The vector-Jacobian functions of a module's private functions, made on demand and
/// once per (function, differentiated arguments) (Vjp.cpp, docs/calls.md): for
/// `@f(a_1..a_n) -> (y_1..y_m)` and the arguments `active`, `@f.vjp...(a_1..a_n,
/// c_1..c_m') -> (da_i for i active)`, the c_k the cotangents of f's float results.
class VjpFunctions {
public:
  VjpFunctions(mlir::ModuleOp module, std::function<std::string(mlir::Value)> nameOf,
               std::function<void(mlir::Operation *, mlir::Operation *)> ruled)
      : module(module), nameOf(std::move(nameOf)), ruled(std::move(ruled)) {}
  /// The vjp function of `f` for the arguments `active`; null on failure (`why`,
  /// `where` set: an op of f's body without a derivative rule, an op that may not be
  /// differentiated through a call).
  mlir::func::FuncOp of(mlir::func::FuncOp f, llvm::ArrayRef<bool> active, std::string &why,
                        mlir::Location &where);
  /// Whether result `k` of `f` takes a cotangent (a float tensor).
  static bool takesCotangent(mlir::Type t);

private:
  mlir::ModuleOp module;
  std::function<std::string(mlir::Value)> nameOf;
  std::function<void(mlir::Operation *, mlir::Operation *)> ruled;
  std::map<std::string, mlir::func::FuncOp> made;
};

class Differentiator {
public:
  /// `positions`: the ops' places in their blocks before any grad was expanded (ops
  /// created since have none), to order a loss's backward slice without renumbering
  /// the block; null to use the block's own order.
  Differentiator(ref::GradOp grad, std::function<std::string(mlir::Value)> nameOf,
                 std::function<void(mlir::Value, mlir::Value, mlir::Value)> replaced = nullptr,
                 const llvm::DenseMap<mlir::Operation *, size_t> *positions = nullptr,
                 std::function<void(mlir::Operation *, mlir::Operation *)> ruled = nullptr,
                 VjpFunctions *calls = nullptr)
      : grad(grad), block(grad->getBlock()), anchor(grad), b(grad), loc(grad.getLoc()),
        gradLoc(grad.getLoc()), nameOf(nameOf), replaced(replaced), ruled(ruled),
        positions(positions), calls(calls) {
    seeds.push_back({grad.getLoss(), mlir::Value()});
    for (mlir::Value w : grad.getWrt())
      wrt.push_back(w);
  }
  /// A derivation at the end of `block` (a vjp function's body): each seed value's
  /// cotangent given, the gradients of `wrt` returned by derive.
  Differentiator(mlir::Block *block, mlir::Location at,
                 llvm::ArrayRef<std::pair<mlir::Value, mlir::Value>> seeds,
                 llvm::ArrayRef<mlir::Value> wrt, std::function<std::string(mlir::Value)> nameOf,
                 std::function<void(mlir::Operation *, mlir::Operation *)> ruled,
                 VjpFunctions *calls)
      : block(block), b(block, block->end()), loc(at), gradLoc(at),
        seeds(seeds.begin(), seeds.end()), wrt(wrt.begin(), wrt.end()), nameOf(nameOf),
        ruled(ruled), calls(calls) {}

  /// Expands the grad op (the first constructor).
  mlir::LogicalResult run(std::string &why, mlir::Location &where);
  /// Derives the backward pass into the block and sets `results` (a gradient per
  /// `wrt` value, zeros where none flows).
  mlir::LogicalResult derive(llvm::SmallVectorImpl<mlir::Value> &results, std::string &why,
                             mlir::Location &where);

private:
  mlir::RankedTensorType typeOf(mlir::Value v) { return mlir::cast<mlir::RankedTensorType>(v.getType()); }
  mlir::Value constant(mlir::RankedTensorType t, double v) {
    return ref::ConstantOp::create(b, loc, t, b.getF64FloatAttr(v));
  }
  mlir::Value scale(mlir::Value v, double f) {
    return ref::ScaleOp::create(b, loc, v, llvm::APFloat(f));
  }
  mlir::Value add(mlir::Value a, mlir::Value c) { return ref::AddOp::create(b, loc, a, c); }
  mlir::Value sub(mlir::Value a, mlir::Value c) { return ref::SubOp::create(b, loc, a, c); }
  mlir::Value mul(mlir::Value a, mlir::Value c) { return ref::MulOp::create(b, loc, a, c); }
  mlir::Value div(mlir::Value a, mlir::Value c) { return ref::DivOp::create(b, loc, a, c); }
  mlir::Value reduceSum(mlir::Value v, llvm::ArrayRef<int64_t> dims) {
    if (dims.empty())
      return v;
    return ref::ReduceSumOp::create(b, loc, v, llvm::SmallVector<int64_t>(dims));
  }
  /// Broadcasts `v` (whose dims are `dims` of `to`) to the type `to`.
  mlir::Value broadcast(mlir::Value v, llvm::ArrayRef<int64_t> dims, mlir::RankedTensorType to) {
    if (typeOf(v) == to)
      return v;
    return ref::BroadcastOp::create(b, loc, to, v, dims);
  }
  /// Broadcasts `v` over the leading dimensions of `to` (v matches its trailing dims).
  mlir::Value broadcastTrailing(mlir::Value v, mlir::RankedTensorType to) {
    llvm::SmallVector<int64_t> dims;
    for (int64_t d = to.getRank() - typeOf(v).getRank(); d < to.getRank(); ++d)
      dims.push_back(d);
    return broadcast(v, dims, to);
  }
  /// Sums `v` over the last dimension and broadcasts the sums back over it.
  mlir::Value rowSumBroadcast(mlir::Value v) {
    auto t = typeOf(v);
    mlir::Value s = reduceSum(v, llvm::SmallVector<int64_t>{t.getRank() - 1});
    llvm::SmallVector<int64_t> dims;
    for (int64_t d = 0; d + 1 < t.getRank(); ++d)
      dims.push_back(d);
    return broadcast(s, dims, t);
  }

  void accumulate(mlir::Value v, mlir::Value contribution) {
    auto it = adjoint.find(v);
    if (it == adjoint.end())
      adjoint[v] = contribution;
    else
      it->second = add(it->second, contribution);
  }
  /// Adds the vector-Jacobian products of `op` for its active operands.
  mlir::LogicalResult backprop(mlir::Operation *op, mlir::Value g);
  std::optional<mlir::LogicalResult> backpropArithmetic(mlir::Operation *op, mlir::Value g);
  std::optional<mlir::LogicalResult> backpropFunctions(mlir::Operation *op, mlir::Value g);
  std::optional<mlir::LogicalResult> backpropLayout(mlir::Operation *op, mlir::Value g);
  std::optional<mlir::LogicalResult> backpropNorms(mlir::Operation *op, mlir::Value g);
  std::optional<mlir::LogicalResult> backpropComposites(mlir::Operation *op, mlir::Value g);
  std::optional<mlir::LogicalResult> backpropCollectives(mlir::Operation *op, mlir::Value g);
  /// A call: its callee's vjp function called on the call's operands and its results'
  /// cotangents (Vjp.cpp).
  mlir::LogicalResult backpropCall(mlir::func::CallOp call, std::string &why,
                                   mlir::Location &where);
  void contribute(mlir::Operation *op, unsigned i, llvm::function_ref<mlir::Value()> make);

  ref::GradOp grad; // (null for a vjp function's derivation)
  mlir::Block *block;
  mlir::Operation *anchor = nullptr; // the backward pass goes before it; null: at the end
  mlir::OpBuilder b;
  mlir::Location loc;
  mlir::Location gradLoc;
  llvm::SmallVector<std::pair<mlir::Value, mlir::Value>> seeds; // (value, cotangent; null: 1)
  llvm::SmallVector<mlir::Value> wrt;
  std::function<std::string(mlir::Value)> nameOf;
  std::function<void(mlir::Value, mlir::Value, mlir::Value)> replaced;
  /// Told each op whose derivative rule ran (with null) and each adjoint collective a
  /// collective's rule made (expandGradOps).
  std::function<void(mlir::Operation *, mlir::Operation *)> ruled;
  /// `v`, the adjoint collective made by `op`'s rule, told to `ruled`.
  mlir::Value madeBy(mlir::Operation *op, mlir::Value v) {
    if (ruled)
      ruled(op, v.getDefiningOp());
    return v;
  }
  const llvm::DenseMap<mlir::Operation *, size_t> *positions = nullptr;
  /// Where calls are differentiated (through their callees' vjp functions); null: a
  /// call has no derivative rule (the calls were expanded before).
  VjpFunctions *calls = nullptr;
  llvm::StringMap<unsigned> counters;
  llvm::DenseSet<mlir::Value> active;
  llvm::DenseMap<mlir::Value, mlir::Value> adjoint;
};

} // namespace planproof::autodiff

#endif
