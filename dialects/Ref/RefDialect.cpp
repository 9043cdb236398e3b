//===- RefDialect.cpp - the reference dialect -------------------*- C++ -*-===//
//
// The `ref` dialect: registration and the shape rules (result type inference) of its
// ops. Shape rules live here once; the verifier, the parser and the JSON importer all
// use them through InferTypeOpInterface.
//
//===----------------------------------------------------------------------===//
#include "Ref/RefDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"

using namespace mlir;
using namespace planproof::ref;

#include "Ref/RefDialect.cpp.inc"

void RefDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "Ref/RefOps.cpp.inc"
      >();
}

#define GET_OP_CLASSES
#include "Ref/RefOps.cpp.inc"

namespace {
LogicalResult fail(std::optional<Location> loc, const Twine &msg) {
  if (loc)
    emitError(*loc) << msg;
  return failure();
}

RankedTensorType f32Tensor(MLIRContext *ctx, ArrayRef<int64_t> shape) {
  return RankedTensorType::get(shape, Float32Type::get(ctx));
}

RankedTensorType asTensor(Value v) {
  return dyn_cast_or_null<RankedTensorType>(v ? v.getType() : Type());
}

LogicalResult sameShape(std::optional<Location> loc, StringRef op, ValueRange operands,
                        SmallVectorImpl<Type> &out) {
  auto first = asTensor(operands[0]);
  if (!first)
    return fail(loc, op + ": operand #0 must be a ranked tensor");
  for (auto [i, v] : llvm::enumerate(operands)) {
    auto t = asTensor(v);
    if (!t || t.getShape() != first.getShape())
      return fail(loc, op + ": operand #" + Twine(i) +
                           " must have the shape of operand #0");
  }
  out.push_back(first);
  return success();
}
} // namespace

// Ops whose operands and result share one type get inferReturnTypes from ODS.

LogicalResult MatmulOp::inferReturnTypes(MLIRContext *ctx, std::optional<Location> loc,
                                         ValueRange operands, DictionaryAttr attrs,
                                         OpaqueProperties props, RegionRange,
                                         SmallVectorImpl<Type> &out) {
  Adaptor adaptor(operands, attrs, props);
  auto lhs = asTensor(operands[0]), rhs = asTensor(operands[1]);
  if (!lhs || !rhs || lhs.getRank() != 2 || rhs.getRank() != 2)
    return fail(loc, "ref.matmul: both operands must be 2-D tensors");
  if (!adaptor.getLhsDimAttr() || !adaptor.getRhsDimAttr())
    return fail(loc, "ref.matmul: requires integer attributes 'lhs_dim' and 'rhs_dim'");
  int64_t ld = adaptor.getLhsDim(), rd = adaptor.getRhsDim();
  if (ld < 0 || ld > 1 || rd < 0 || rd > 1)
    return fail(loc, "ref.matmul: contraction dimensions must be 0 or 1");
  if (lhs.getDimSize(ld) != rhs.getDimSize(rd))
    return fail(loc, "ref.matmul: contracted dimensions differ: lhs dim " + Twine(ld) +
                         " has size " + Twine(lhs.getDimSize(ld)) + ", rhs dim " +
                         Twine(rd) + " has size " + Twine(rhs.getDimSize(rd)));
  out.push_back(f32Tensor(ctx, {lhs.getDimSize(1 - ld), rhs.getDimSize(1 - rd)}));
  return success();
}

LogicalResult BiasAddOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                          ValueRange operands, DictionaryAttr,
                                          OpaqueProperties, RegionRange,
                                          SmallVectorImpl<Type> &out) {
  auto in = asTensor(operands[0]), bias = asTensor(operands[1]);
  if (!in || !bias || in.getRank() < 1 || bias.getRank() != 1)
    return fail(loc, "ref.bias_add: needs an input of rank >= 1 and a 1-D bias");
  if (in.getShape().back() != bias.getDimSize(0))
    return fail(loc, "ref.bias_add: bias has " + Twine(bias.getDimSize(0)) +
                         " elements but the input's last dimension has " +
                         Twine(in.getShape().back()));
  out.push_back(in);
  return success();
}

LogicalResult ReduceSumOp::inferReturnTypes(MLIRContext *ctx, std::optional<Location> loc,
                                            ValueRange operands, DictionaryAttr attrs,
                                            OpaqueProperties props, RegionRange,
                                            SmallVectorImpl<Type> &out) {
  Adaptor adaptor(operands, attrs, props);
  auto in = asTensor(operands[0]);
  if (!in)
    return fail(loc, "ref.reduce_sum: operand must be a ranked tensor");
  if (!adaptor.getDimsAttr())
    return fail(loc, "ref.reduce_sum: requires an integer array attribute 'dims'");
  SmallVector<int64_t> shape;
  int64_t prev = -1;
  for (int64_t d : adaptor.getDims()) {
    if (d <= prev || d >= in.getRank())
      return fail(loc, "ref.reduce_sum: 'dims' must be sorted, distinct, and within "
                       "the operand's rank " + Twine(in.getRank()));
    prev = d;
  }
  for (int64_t d = 0; d < in.getRank(); ++d)
    if (!llvm::is_contained(adaptor.getDims(), d))
      shape.push_back(in.getDimSize(d));
  out.push_back(f32Tensor(ctx, shape));
  return success();
}

LogicalResult MseLossOp::inferReturnTypes(MLIRContext *ctx, std::optional<Location> loc,
                                          ValueRange operands, DictionaryAttr,
                                          OpaqueProperties, RegionRange,
                                          SmallVectorImpl<Type> &out) {
  SmallVector<Type> same;
  if (failed(sameShape(loc, "ref.mse_loss", operands, same)))
    return failure();
  out.push_back(f32Tensor(ctx, {}));
  return success();
}
