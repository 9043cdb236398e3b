//===- RefDialect.cpp - the reference dialect -------------------*- C++ -*-===//
//
// The `ref` dialect: registration and the shape rules (result type inference) of its
// ops. Shape rules live here once; the verifier, the parser and the JSON importer all
// use them through InferTypeOpInterface.
//
//===----------------------------------------------------------------------===//
#include "Ref/RefDialect.h"
#include "Support/Limits.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"

#include <cmath>

using namespace mlir;
using namespace planproof::ref;

#include "Ref/RefDialect.cpp.inc"
#include "Ref/RefOpInterfaces.cpp.inc"

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

static LogicalResult inferReduce(MLIRContext *ctx, std::optional<Location> loc, StringRef name,
                                 Value input, DenseI64ArrayAttr dimsAttr,
                                 SmallVectorImpl<Type> &out) {
  auto in = asTensor(input);
  if (!in)
    return fail(loc, name + ": operand must be a ranked tensor");
  if (!dimsAttr)
    return fail(loc, name + ": requires an integer array attribute 'dims'");
  SmallVector<int64_t> shape;
  int64_t prev = -1;
  for (int64_t d : dimsAttr.asArrayRef()) {
    if (d <= prev || d >= in.getRank())
      return fail(loc, name + ": 'dims' must be sorted, distinct, and within the operand's "
                              "rank " + Twine(in.getRank()));
    prev = d;
  }
  for (int64_t d = 0; d < in.getRank(); ++d)
    if (!llvm::is_contained(dimsAttr.asArrayRef(), d))
      shape.push_back(in.getDimSize(d));
  out.push_back(f32Tensor(ctx, shape));
  return success();
}

#define REDUCE_INFER(OP, NAME)                                                       \
  LogicalResult OP::inferReturnTypes(MLIRContext *ctx, std::optional<Location> loc,   \
                                     ValueRange operands, DictionaryAttr attrs,       \
                                     OpaqueProperties props, RegionRange,             \
                                     SmallVectorImpl<Type> &out) {                    \
    Adaptor adaptor(operands, attrs, props);                                          \
    return inferReduce(ctx, loc, NAME, operands[0], adaptor.getDimsAttr(), out);      \
  }
REDUCE_INFER(ReduceSumOp, "ref.reduce_sum")
REDUCE_INFER(ReduceMaxOp, "ref.reduce_max")
REDUCE_INFER(ReduceMeanOp, "ref.reduce_mean")
#undef REDUCE_INFER

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

LogicalResult DotOp::inferReturnTypes(MLIRContext *ctx, std::optional<Location> loc,
                                      ValueRange operands, DictionaryAttr, OpaqueProperties,
                                      RegionRange, SmallVectorImpl<Type> &out) {
  SmallVector<Type> same;
  if (failed(sameShape(loc, "ref.dot", operands, same)))
    return failure();
  if (asTensor(operands[0]).getRank() != 1)
    return fail(loc, "ref.dot: its operands must be vectors (1-D)");
  out.push_back(f32Tensor(ctx, {}));
  return success();
}

LogicalResult TransposeOp::inferReturnTypes(MLIRContext *ctx, std::optional<Location> loc,
                                            ValueRange operands, DictionaryAttr attrs,
                                            OpaqueProperties props, RegionRange,
                                            SmallVectorImpl<Type> &out) {
  Adaptor adaptor(operands, attrs, props);
  auto in = asTensor(operands[0]);
  if (!in || !adaptor.getPermAttr())
    return fail(loc, "ref.transpose: needs a ranked tensor and a 'perm' attribute");
  ArrayRef<int64_t> perm = adaptor.getPerm();
  if ((int64_t)perm.size() != in.getRank())
    return fail(loc, "ref.transpose: 'perm' must have one entry per dimension");
  SmallVector<bool> seen(in.getRank(), false);
  SmallVector<int64_t> shape;
  for (int64_t p : perm) {
    if (p < 0 || p >= in.getRank() || seen[p])
      return fail(loc, "ref.transpose: 'perm' must be a permutation of 0.." +
                           Twine(in.getRank() - 1));
    seen[p] = true;
    shape.push_back(in.getDimSize(p));
  }
  out.push_back(f32Tensor(ctx, shape));
  return success();
}

LogicalResult ReshapeOp::verify() {
  auto in = getInput().getType(), res = getResult().getType();
  // Counted with overflow checks: a wrapped count must not make two sizes look equal.
  int64_t n = planproof::checkedProduct(in.getShape()), m = planproof::checkedProduct(res.getShape());
  if (n < 0 || m < 0)
    return emitOpError() << "operand or result has more than 2^40 elements or a dynamic size";
  if (n != m)
    return emitOpError() << "cannot reshape " << n << " elements into " << m;
  return success();
}

LogicalResult BroadcastOp::verify() {
  auto in = getInput().getType(), res = getResult().getType();
  ArrayRef<int64_t> dims = getDims();
  if ((int64_t)dims.size() != in.getRank())
    return emitOpError() << "'dims' needs one entry per operand dimension";
  int64_t prev = -1;
  for (auto [k, d] : llvm::enumerate(dims)) {
    if (d <= prev || d >= res.getRank())
      return emitOpError() << "'dims' must be increasing result dimensions";
    if (in.getDimSize(k) != res.getDimSize(d))
      return emitOpError() << "operand dim " << k << " (size " << in.getDimSize(k)
                           << ") does not match result dim " << d << " (size "
                           << res.getDimSize(d) << ")";
    prev = d;
  }
  return success();
}

LogicalResult SliceOp::inferReturnTypes(MLIRContext *ctx, std::optional<Location> loc,
                                        ValueRange operands, DictionaryAttr attrs,
                                        OpaqueProperties props, RegionRange,
                                        SmallVectorImpl<Type> &out) {
  Adaptor adaptor(operands, attrs, props);
  auto in = asTensor(operands[0]);
  if (!in || !adaptor.getOffsetsAttr() || !adaptor.getSizesAttr())
    return fail(loc, "ref.slice: needs a ranked tensor, 'offsets' and 'sizes'");
  ArrayRef<int64_t> off = adaptor.getOffsets(), sizes = adaptor.getSizes();
  if ((int64_t)off.size() != in.getRank() || (int64_t)sizes.size() != in.getRank())
    return fail(loc, "ref.slice: 'offsets' and 'sizes' need one entry per dimension");
  for (int64_t d = 0; d < in.getRank(); ++d)
    if (sizes[d] < 1 || !planproof::rangeInside(off[d], sizes[d], in.getDimSize(d)))
      return fail(loc, "ref.slice: dimension " + Twine(d) + ": offset " + Twine(off[d]) +
                           " and size " + Twine(sizes[d]) + " are out of bounds: the slice "
                           "must lie inside [0, " + Twine(in.getDimSize(d)) +
                           ") with a size of at least 1");
  out.push_back(RankedTensorType::get(sizes, in.getElementType()));
  return success();
}

LogicalResult ConcatOp::inferReturnTypes(MLIRContext *ctx, std::optional<Location> loc,
                                         ValueRange operands, DictionaryAttr attrs,
                                         OpaqueProperties props, RegionRange,
                                         SmallVectorImpl<Type> &out) {
  Adaptor adaptor(operands, attrs, props);
  if (operands.empty() || !adaptor.getDimAttr())
    return fail(loc, "ref.concat: needs at least one operand and a 'dim'");
  auto first = asTensor(operands[0]);
  int64_t dim = adaptor.getDim();
  if (!first || dim < 0 || dim >= first.getRank())
    return fail(loc, "ref.concat: 'dim' is out of range");
  SmallVector<int64_t> shape(first.getShape());
  shape[dim] = 0;
  for (Value v : operands) {
    auto t = asTensor(v);
    if (!t || t.getRank() != first.getRank())
      return fail(loc, "ref.concat: operands must have the same rank");
    if (t.getElementType() != first.getElementType())
      return fail(loc, "ref.concat: operands must have the same element type");
    for (int64_t d = 0; d < t.getRank(); ++d)
      if (d != dim && t.getDimSize(d) != first.getDimSize(d))
        return fail(loc, "ref.concat: operands differ in dimension " + Twine(d));
    if (!planproof::checkedAdd(shape[dim], t.getDimSize(dim), shape[dim]) ||
        shape[dim] > planproof::kMaxDimSize)
      return fail(loc, "ref.concat: the concatenated dimension is larger than 2^31");
  }
  out.push_back(RankedTensorType::get(shape, first.getElementType()));
  return success();
}

LogicalResult BatchMatmulOp::inferReturnTypes(MLIRContext *ctx, std::optional<Location> loc,
                                              ValueRange operands, DictionaryAttr attrs,
                                              OpaqueProperties props, RegionRange,
                                              SmallVectorImpl<Type> &out) {
  Adaptor adaptor(operands, attrs, props);
  auto lhs = asTensor(operands[0]), rhs = asTensor(operands[1]);
  if (!lhs || !rhs || lhs.getRank() != 3 || rhs.getRank() != 3)
    return fail(loc, "ref.batch_matmul: both operands must be 3-D tensors");
  if (!adaptor.getLhsDimAttr() || !adaptor.getRhsDimAttr())
    return fail(loc, "ref.batch_matmul: requires integer attributes 'lhs_dim' and 'rhs_dim'");
  int64_t ld = adaptor.getLhsDim(), rd = adaptor.getRhsDim();
  if (ld < 1 || ld > 2 || rd < 1 || rd > 2)
    return fail(loc, "ref.batch_matmul: contraction dimensions must be 1 or 2");
  if (lhs.getDimSize(0) != rhs.getDimSize(0))
    return fail(loc, "ref.batch_matmul: batch dimensions differ");
  if (lhs.getDimSize(ld) != rhs.getDimSize(rd))
    return fail(loc, "ref.batch_matmul: contracted dimensions differ: " +
                         Twine(lhs.getDimSize(ld)) + " vs " + Twine(rhs.getDimSize(rd)));
  out.push_back(f32Tensor(ctx, {lhs.getDimSize(0), lhs.getDimSize(3 - ld),
                                rhs.getDimSize(3 - rd)}));
  return success();
}

LogicalResult CausalSoftmaxOp::verify() {
  auto t = getInput().getType();
  if (t.getRank() < 2)
    return emitOpError() << "needs scores [..., Sq, Sk]";
  if (!getOffset() && t.getDimSize(t.getRank() - 1) < t.getDimSize(t.getRank() - 2))
    return emitOpError() << "needs scores [..., Sq, Sk] with Sk >= Sq (or an explicit offset)";
  return success();
}

LogicalResult CausalSoftmaxOp::inferReturnTypes(MLIRContext *, std::optional<Location>,
                                                ValueRange operands, DictionaryAttr,
                                                OpaqueProperties, RegionRange,
                                                SmallVectorImpl<Type> &out) {
  out.push_back(operands[0].getType());
  return success();
}

/// Norm ops: the weight (and bias) are 1-D over the last dimension.
static LogicalResult inferNorm(std::optional<Location> loc, StringRef name, ValueRange operands,
                               SmallVectorImpl<Type> &out) {
  auto in = asTensor(operands[0]);
  if (!in || in.getRank() < 1)
    return fail(loc, name + ": input must have rank >= 1");
  for (Value v : operands.drop_front()) {
    auto w = asTensor(v);
    if (!w || w.getRank() != 1 || w.getDimSize(0) != in.getShape().back())
      return fail(loc, name + ": weight and bias must be 1-D of the last dimension's size " +
                           Twine(in.getShape().back()));
  }
  out.push_back(in);
  return success();
}

LogicalResult RmsNormOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                          ValueRange operands, DictionaryAttr, OpaqueProperties,
                                          RegionRange, SmallVectorImpl<Type> &out) {
  return inferNorm(loc, "ref.rms_norm", operands, out);
}

LogicalResult LayerNormOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                            ValueRange operands, DictionaryAttr,
                                            OpaqueProperties, RegionRange,
                                            SmallVectorImpl<Type> &out) {
  return inferNorm(loc, "ref.layer_norm", operands, out);
}

LogicalResult RotaryOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         ValueRange operands, DictionaryAttr, OpaqueProperties,
                                         RegionRange, SmallVectorImpl<Type> &out) {
  auto in = asTensor(operands[0]), c = asTensor(operands[1]), s = asTensor(operands[2]);
  if (!in || in.getRank() < 2 || in.getShape().back() % 2 != 0)
    return fail(loc, "ref.rotary: input must be [..., S, D] with D even");
  ArrayRef<int64_t> sd = in.getShape().take_back(2);
  if (!c || !s || c.getShape() != sd || s.getShape() != sd)
    return fail(loc, "ref.rotary: cos and sin must have shape [S, D] = [" + Twine(sd[0]) +
                         ", " + Twine(sd[1]) + "]");
  out.push_back(in);
  return success();
}

LogicalResult CrossEntropyOp::inferReturnTypes(MLIRContext *ctx, std::optional<Location> loc,
                                               ValueRange operands, DictionaryAttr,
                                               OpaqueProperties, RegionRange,
                                               SmallVectorImpl<Type> &out) {
  auto logits = asTensor(operands[0]), labels = asTensor(operands[1]),
       mask = asTensor(operands[2]);
  if (!logits || logits.getRank() != 2 || !labels || labels.getShape() != logits.getShape())
    return fail(loc, "ref.cross_entropy: logits and one-hot labels must both be [T, V]");
  if (!mask || mask.getRank() != 1 || mask.getDimSize(0) != logits.getDimSize(0))
    return fail(loc, "ref.cross_entropy: the mask must be [T] with T = " +
                         Twine(logits.getDimSize(0)));
  out.push_back(f32Tensor(ctx, {}));
  return success();
}

LogicalResult CrossEntropySumOp::inferReturnTypes(MLIRContext *ctx, std::optional<Location> loc,
                                                  ValueRange operands, DictionaryAttr attrs,
                                                  OpaqueProperties props, RegionRange regions,
                                                  SmallVectorImpl<Type> &out) {
  // The same shape rule as ref.cross_entropy.
  return CrossEntropyOp::inferReturnTypes(ctx, loc, operands, attrs, props, regions, out);
}

LogicalResult GradOp::verify() {
  if (getLoss().getType().getRank() != 0)
    return emitOpError() << "needs a 0-D loss, got " << getLoss().getType();
  if (getWrt().empty())
    return emitOpError() << "needs at least one value to differentiate with respect to";
  if (getGrads().getTypes() != getWrt().getTypes())
    return emitOpError() << "must have one result per 'wrt' value, of the same type";
  return success();
}

void GradOp::getAsmResultNames(OpAsmSetValueNameFn setName) {
  // One name per result: a fused location whose metadata lists them (planproof plan
  // builds such). Any other location leaves the printer's default numbering.
  auto fused = dyn_cast<FusedLoc>(getLoc());
  auto names = fused ? dyn_cast_or_null<ArrayAttr>(fused.getMetadata()) : ArrayAttr();
  if (!names || names.size() != getNumResults())
    return;
  for (auto [result, name] : llvm::zip(getResults(), names))
    if (auto s = dyn_cast<StringAttr>(name))
      setName(result, s.getValue());
}

LogicalResult EmbeddingOp::inferReturnTypes(MLIRContext *ctx, std::optional<Location> loc,
                                            ValueRange operands, DictionaryAttr,
                                            OpaqueProperties, RegionRange,
                                            SmallVectorImpl<Type> &out) {
  auto table = asTensor(operands[0]), ids = asTensor(operands[1]);
  if (!table || table.getRank() != 2 || !ids || ids.getRank() != 1)
    return fail(loc, "ref.embedding: needs a [rows, width] table and [tokens] ids");
  out.push_back(f32Tensor(ctx, {ids.getDimSize(0), table.getDimSize(1)}));
  return success();
}

LogicalResult PositionMaskOp::verify() {
  if (getType().getRank() != 2)
    return emitOpError() << "result must be [Sq, Sk]";
  if (getWindow() < 0)
    return emitOpError() << "window must be positive (or 0: no window)";
  return success();
}

LogicalResult DocumentMaskOp::inferReturnTypes(MLIRContext *ctx, std::optional<Location> loc,
                                               ValueRange operands, DictionaryAttr,
                                               OpaqueProperties, RegionRange,
                                               SmallVectorImpl<Type> &out) {
  auto q = asTensor(operands[0]), k = asTensor(operands[1]);
  if (!q || !k || q.getRank() != 1 || k.getRank() != 1)
    return fail(loc, "ref.document_mask: needs document ids [Sq] and [Sk]");
  out.push_back(f32Tensor(ctx, {q.getDimSize(0), k.getDimSize(0)}));
  return success();
}

LogicalResult MaskedSoftmaxOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                                ValueRange operands, DictionaryAttr,
                                                OpaqueProperties, RegionRange,
                                                SmallVectorImpl<Type> &out) {
  auto x = asTensor(operands[0]), m = asTensor(operands[1]);
  if (!x || !m || x.getRank() < 1 || m.getRank() < 1 || m.getRank() > x.getRank() ||
      x.getShape().take_back(m.getRank()) != m.getShape())
    return fail(loc, "ref.masked_softmax: the mask must have the input's shape, or that of "
                     "its last dimensions");
  out.push_back(x);
  return success();
}

LogicalResult LiteralOp::verify() {
  int64_t n = planproof::checkedProduct(getType().getShape());
  if (n < 0 || (int64_t)getValues().size() != n)
    return emitOpError() << "needs one value per element of " << getType() << ", got "
                         << getValues().size();
  for (double v : getValues())
    if (!std::isfinite(v))
      return emitOpError() << "values must be finite numbers";
  return success();
}

LogicalResult DropoutMaskOp::verify() {
  double p = getP().convertToDouble();
  if (!(p >= 0.0 && p < 1.0))
    return emitOpError() << "drop probability p must lie in [0, 1), got " << p;
  return success();
}

LogicalResult PowerOp::verify() {
  if (getType().getRank() != 0)
    return emitOpError() << "result must be a scalar tensor<f32>";
  double b = getBase().convertToDouble();
  if (!(b > 0.0 && b < 1e6))
    return emitOpError() << "base must be positive, got " << b;
  return success();
}

LogicalResult EmbeddingGradOp::verify() {
  auto g = getGrad().getType(), r = getResult().getType();
  if (g.getRank() != 2 || r.getRank() != 2 || g.getDimSize(1) != r.getDimSize(1) ||
      g.getDimSize(0) != getIds().getType().getDimSize(0))
    return emitOpError() << "needs a [tokens, width] gradient, [tokens] ids and a "
                            "[rows, width] result";
  return success();
}

LogicalResult OneHotOp::verify() {
  auto r = getResult().getType();
  if (r.getRank() != 2 || r.getDimSize(0) != getIds().getType().getDimSize(0))
    return emitOpError() << "needs [tokens] ids and a [tokens, classes] result";
  return success();
}

LogicalResult RefDialect::verifyOperationAttribute(Operation *op, NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  if (name == kReferenceAttr) {
    if (!isa<UnitAttr>(attr.getValue()))
      return op->emitError() << "'" << kReferenceAttr << "' is a unit attribute";
    return success();
  }
  if (name == "ref.role") {
    static const char *const kinds[] = {"sharding", "reduction", "rng", "grad-norm",
                                        "loss-normalization", "optimizer", "checkpoint",
                                        "schedule", "masking", "routing", "dataflow"};
    auto s = dyn_cast<StringAttr>(attr.getValue());
    if (!s || !llvm::is_contained(kinds, s.getValue()))
      return op->emitError() << "'ref.role' must be a violation kind (sharding, reduction, rng, "
                                "grad-norm, loss-normalization, optimizer, checkpoint, "
                                "schedule, masking, routing, dataflow)";
    return success();
  }
  return op->emitError() << "unknown ref attribute '" << name << "'";
}

LogicalResult TopkMaskOp::verify() {
  auto t = getInput().getType();
  if (t.getRank() < 1 || getK() < 1 || (int64_t)getK() > t.getShape().back())
    return emitOpError() << "k must be between 1 and the size of the last dimension";
  return success();
}

LogicalResult TopkMaskOp::inferReturnTypes(MLIRContext *, std::optional<Location>,
                                           ValueRange operands, DictionaryAttr, OpaqueProperties,
                                           RegionRange, SmallVectorImpl<Type> &out) {
  out.push_back(operands[0].getType());
  return success();
}

LogicalResult CapacityDispatchOp::inferReturnTypes(MLIRContext *ctx, std::optional<Location> loc,
                                                   ValueRange operands, DictionaryAttr attrs,
                                                   OpaqueProperties props, RegionRange,
                                                   SmallVectorImpl<Type> &out) {
  Adaptor adaptor(operands, attrs, props);
  auto in = asTensor(operands[0]);
  if (!in || in.getRank() < 2)
    return fail(loc, "ref.capacity_dispatch: the routing mask must be [batch..., tokens, "
                     "experts]");
  int64_t r = in.getRank(), T = in.getDimSize(r - 2);
  int64_t c = adaptor.getCapacity(), g = adaptor.getGroups(), slots;
  if (c < 1 || g < 1 || c > (1 << 20) || T % g != 0 || !planproof::checkedMul(g, c, slots) ||
      slots > planproof::kMaxDimSize)
    return fail(loc, "ref.capacity_dispatch: capacity and groups must be positive, and the " +
                         Twine(T) + " tokens must divide into " + Twine(g) + " groups");
  SmallVector<int64_t> shape(in.getShape());
  shape.push_back(slots);
  if (planproof::checkedProduct(shape) < 0)
    return fail(loc, "ref.capacity_dispatch: the dispatch mask would hold more than 2^40 "
                     "elements");
  out.push_back(f32Tensor(ctx, shape));
  return success();
}
