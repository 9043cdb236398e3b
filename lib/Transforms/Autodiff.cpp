//===- Autodiff.cpp - deriving the reference backward pass ------*- C++ -*-===//
//
// For `%g... = ref.grad %loss wrt %w...`: mark the values that depend on some `w`
// (active), walk the ops before the grad op in reverse, and for every active operand of
// an op whose result has an adjoint, add that operand's vector-Jacobian product. Only
// active operands get adjoints, so labels, masks and position tables are never
// differentiated. Ops whose derivative is not defined here (max, maximum)
// fail with their location: a wrong derivative rule would make proofs unsound.
//
//===----------------------------------------------------------------------===//
#include "Transforms/Autodiff.h"
#include "Transforms/Differentiator.h"

#include "Dist/DistDialect.h"
#include "Ref/RefDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringMap.h"

#include <cmath>
#include <map>
#include <set>

using namespace mlir;
using namespace planproof;
using namespace planproof::ref;
using namespace planproof::autodiff;

namespace planproof::autodiff {

/// The vector-Jacobian rules of arithmetic, products and bias addition; none when `op` is not one of them.
std::optional<LogicalResult> Differentiator::backpropArithmetic(Operation *op, Value g) {
  auto give = [&](unsigned i, llvm::function_ref<Value()> make) { contribute(op, i, make); };
  Value res = op->getResult(0);
  if (isa<AddOp>(op)) {
    give(0, [&] { return g; });
    give(1, [&] { return g; });
  } else if (isa<SubOp>(op)) {
    give(0, [&] { return g; });
    give(1, [&] { return scale(g, -1); });
  } else if (isa<MulOp>(op)) {
    give(0, [&] { return mul(g, op->getOperand(1)); });
    give(1, [&] { return mul(g, op->getOperand(0)); });
  } else if (isa<DivOp>(op)) {
    give(0, [&] { return div(g, op->getOperand(1)); });
    give(1, [&] { return scale(div(mul(g, res), op->getOperand(1)), -1); });
  } else if (auto s = dyn_cast<ScaleOp>(op)) {
    give(0, [&] { return ScaleOp::create(b, loc, g, s.getFactorAttr().getValue()); });
  } else if (isa<DotOp>(op)) {
    // d lhs = g rhs, d rhs = g lhs: the scalar g copied along the vector.
    auto vec = typeOf(op->getOperand(0));
    give(0, [&] { return mul(broadcast(g, {}, vec), op->getOperand(1)); });
    give(1, [&] { return mul(broadcast(g, {}, vec), op->getOperand(0)); });
  } else if (auto m = dyn_cast<MatmulOp>(op)) {
    int64_t ld = m.getLhsDim(), rd = m.getRhsDim();
    Value lhs = m.getLhs(), rhs = m.getRhs();
    // g is [free(lhs), free(rhs)].
    give(0, [&]() -> Value {
      if (ld == 1) // lhs [I, K]: g [I, J] . rhs over J
        return MatmulOp::create(b, loc, g, rhs, 1, rd == 0 ? 1 : 0);
      return MatmulOp::create(b, loc, rhs, g, rd == 0 ? 1 : 0, 1); // lhs [K, I]
    });
    give(1, [&]() -> Value {
      if (rd == 0) // rhs [K, J]: lhs over I . g over I
        return MatmulOp::create(b, loc, lhs, g, 1 - ld, 0);
      return MatmulOp::create(b, loc, g, lhs, 0, 1 - ld); // rhs [J, K]
    });
  } else if (auto m = dyn_cast<BatchMatmulOp>(op)) {
    int64_t ld = m.getLhsDim(), rd = m.getRhsDim();
    Value lhs = m.getLhs(), rhs = m.getRhs();
    give(0, [&]() -> Value {
      if (ld == 2)
        return BatchMatmulOp::create(b, loc, g, rhs, 2, rd == 1 ? 2 : 1);
      return BatchMatmulOp::create(b, loc, rhs, g, rd == 1 ? 2 : 1, 2);
    });
    give(1, [&]() -> Value {
      if (rd == 1)
        return BatchMatmulOp::create(b, loc, lhs, g, 3 - ld, 1);
      return BatchMatmulOp::create(b, loc, g, lhs, 1, 3 - ld);
    });
  } else if (isa<BiasAddOp>(op)) {
    give(0, [&] { return g; });
    give(1, [&] {
      SmallVector<int64_t> lead;
      for (int64_t d = 0; d + 1 < typeOf(g).getRank(); ++d)
        lead.push_back(d);
      return reduceSum(g, lead);
    });
  } else {
    return std::nullopt;
  }
  return success();
}

/// The vector-Jacobian rules of elementwise functions; none when `op` is not one of them.
std::optional<LogicalResult> Differentiator::backpropFunctions(Operation *op, Value g) {
  auto give = [&](unsigned i, llvm::function_ref<Value()> make) { contribute(op, i, make); };
  Value res = op->getResult(0);
  if (isa<GeluOp>(op)) {
    give(0, [&] { return GeluGradOp::create(b, loc, op->getOperand(0), g); });
  } else if (isa<SiluOp>(op)) {
    give(0, [&] { return SiluGradOp::create(b, loc, op->getOperand(0), g); });
  } else if (isa<ExpOp>(op)) {
    give(0, [&] { return mul(g, res); });
  } else if (isa<LogOp>(op)) {
    give(0, [&] { return div(g, op->getOperand(0)); });
  } else if (isa<RecipOp>(op)) {
    give(0, [&] { return scale(mul(g, mul(res, res)), -1); });
  } else if (isa<TanhOp>(op)) {  // tanh' = 1 - tanh^2
    give(0, [&] { return sub(g, mul(g, mul(res, res))); });
  } else if (isa<LogisticOp>(op)) {  // logistic' = s (1 - s)
    give(0, [&] { return mul(g, sub(res, mul(res, res))); });
  } else if (isa<ErfOp>(op)) {  // erf' = 2/sqrt(pi) exp(-x^2)
    give(0, [&] {
      Value x = op->getOperand(0);
      return scale(mul(g, ExpOp::create(b, loc, scale(mul(x, x), -1))), 2 / std::sqrt(M_PI));
    });
  } else if (isa<SinOp>(op)) {  // sin' = cos
    give(0, [&] { return mul(g, CosOp::create(b, loc, op->getOperand(0))); });
  } else if (isa<CosOp>(op)) {  // cos' = -sin
    give(0, [&] { return scale(mul(g, SinOp::create(b, loc, op->getOperand(0))), -1); });
  } else if (isa<StepOp>(op)) {  // step' = 0 (where it has a derivative)
    give(0, [&] { return scale(g, 0); });
  } else if (isa<SqrtOp>(op)) {
    give(0, [&] { return scale(div(g, res), 0.5); });
  } else if (isa<RsqrtOp>(op)) {
    give(0, [&] { return scale(mul(g, mul(res, mul(res, res))), -0.5); });
  } else {
    return std::nullopt;
  }
  return success();
}

/// The vector-Jacobian rules of reductions and layout ops; none when `op` is not one of them.
std::optional<LogicalResult> Differentiator::backpropLayout(Operation *op, Value g) {
  auto give = [&](unsigned i, llvm::function_ref<Value()> make) { contribute(op, i, make); };
  Value res = op->getResult(0);
  if (auto r = dyn_cast<ReduceSumOp>(op)) {
    give(0, [&] {
      SmallVector<int64_t> kept;
      for (int64_t d = 0; d < typeOf(op->getOperand(0)).getRank(); ++d)
        if (!llvm::is_contained(r.getDims(), d))
          kept.push_back(d);
      return broadcast(g, kept, typeOf(op->getOperand(0)));
    });
  } else if (auto r = dyn_cast<ReduceMeanOp>(op)) {
    give(0, [&] {
      auto in = typeOf(op->getOperand(0));
      SmallVector<int64_t> kept;
      int64_t n = 1;
      for (int64_t d = 0; d < in.getRank(); ++d) {
        if (llvm::is_contained(r.getDims(), d))
          n *= in.getDimSize(d);
        else
          kept.push_back(d);
      }
      return scale(broadcast(g, kept, in), 1.0 / double(n));
    });
  } else if (auto t = dyn_cast<TransposeOp>(op)) {
    give(0, [&] {
      SmallVector<int64_t> inverse(t.getPerm().size());
      for (auto [k, p] : llvm::enumerate(t.getPerm()))
        inverse[p] = k;
      return TransposeOp::create(b, loc, g, inverse);
    });
  } else if (isa<ReshapeOp>(op)) {
    give(0, [&] { return ReshapeOp::create(b, loc, typeOf(op->getOperand(0)), g); });
  } else if (auto br = dyn_cast<BroadcastOp>(op)) {
    give(0, [&] {
      SmallVector<int64_t> summed;
      for (int64_t d = 0; d < typeOf(res).getRank(); ++d)
        if (!llvm::is_contained(br.getDims(), d))
          summed.push_back(d);
      return reduceSum(g, summed);
    });
  } else if (auto sl = dyn_cast<SliceOp>(op)) {
    give(0, [&] {
      // Pad with zeros back to the operand's shape, one dimension at a time.
      Value cur = g;
      auto in = typeOf(op->getOperand(0));
      for (int64_t d = 0; d < in.getRank(); ++d) {
        int64_t before = sl.getOffsets()[d], after = in.getDimSize(d) - before - sl.getSizes()[d];
        SmallVector<Value> parts;
        auto piece = [&](int64_t n) {
          SmallVector<int64_t> shape(typeOf(cur).getShape());
          shape[d] = n;
          return constant(RankedTensorType::get(shape, in.getElementType()), 0.0);
        };
        if (before > 0)
          parts.push_back(piece(before));
        parts.push_back(cur);
        if (after > 0)
          parts.push_back(piece(after));
        if (parts.size() > 1)
          cur = ConcatOp::create(b, loc, parts, d);
      }
      return cur;
    });
  } else if (auto c = dyn_cast<ConcatOp>(op)) {
    int64_t dim = c.getDim(), offset = 0;
    for (unsigned i = 0; i < op->getNumOperands(); ++i) {
      auto t = typeOf(op->getOperand(i));
      give(i, [&] {
        SmallVector<int64_t> offsets(t.getRank(), 0);
        offsets[dim] = offset;
        return SliceOp::create(b, loc, g, offsets, t.getShape());
      });
      offset += t.getDimSize(dim);
    }
  } else {
    return std::nullopt;
  }
  return success();
}

/// The vector-Jacobian rules of the norms (RMS and layer norm); none when `op` is not
/// one of them.
std::optional<LogicalResult> Differentiator::backpropNorms(Operation *op, Value g) {
  auto give = [&](unsigned i, llvm::function_ref<Value()> make) { contribute(op, i, make); };
  if (auto n = dyn_cast<RmsNormOp>(op)) {
    // y = x * r * w with r = rsqrt(mean(x^2) + eps) per row:
    // dw = sum_rows(g * x * r);  dx = r * (g w) - x * r^3 * mean(g w x).
    Value x = n.getInput(), w = n.getWeight();
    auto xt = typeOf(x);
    int64_t width = xt.getShape().back();
    Value ones = constant(typeOf(w), 1.0);
    Value xhat = RmsNormOp::create(b, loc, x, ones, n.getEpsAttr().getValue()); // x * r
    give(1, [&] {
      SmallVector<int64_t> rows;
      for (int64_t d = 0; d + 1 < xt.getRank(); ++d)
        rows.push_back(d);
      return reduceSum(mul(g, xhat), rows);
    });
    give(0, [&] {
      Value gw = mul(g, broadcastTrailing(w, xt));
      // r broadcast: xhat / x is not usable at x = 0, so rebuild r from its definition.
      SmallVector<int64_t> rows;
      for (int64_t d = 0; d + 1 < xt.getRank(); ++d)
        rows.push_back(d);
      SmallVector<int64_t> last{xt.getRank() - 1};
      Value ms = ReduceMeanOp::create(b, loc, mul(x, x), last);
      Value r =
          RsqrtOp::create(b, loc, add(ms, constant(typeOf(ms), n.getEps().convertToDouble())));
      Value rb = broadcast(r, rows, xt);
      Value meanGwx = scale(rowSumBroadcast(mul(gw, x)), 1.0 / double(width));
      return sub(mul(rb, gw), mul(mul(x, mul(rb, mul(rb, rb))), meanGwx));
    });
  } else if (auto n = dyn_cast<LayerNormOp>(op)) {
    // y = xhat * w + b with xhat = (x - mu) * r, r = rsqrt(var + eps) per row:
    // dw = sum_rows(g * xhat), db = sum_rows(g),
    // dx = r * (g w - mean(g w) - xhat * mean(g w * xhat)).
    Value x = n.getInput(), w = n.getWeight();
    auto xt = typeOf(x);
    int64_t width = xt.getShape().back();
    SmallVector<int64_t> rows;
    for (int64_t d = 0; d + 1 < xt.getRank(); ++d)
      rows.push_back(d);
    Value ones = constant(typeOf(w), 1.0), zeros = constant(typeOf(w), 0.0);
    Value xhat = LayerNormOp::create(b, loc, x, ones, zeros, n.getEpsAttr().getValue());
    give(1, [&] { return reduceSum(mul(g, xhat), rows); });
    give(2, [&] { return reduceSum(g, rows); });
    give(0, [&] {
      SmallVector<int64_t> last{xt.getRank() - 1};
      Value mu = ReduceMeanOp::create(b, loc, x, last);
      Value xc = sub(x, broadcast(mu, rows, xt));
      Value var = ReduceMeanOp::create(b, loc, mul(xc, xc), last);
      Value r =
          RsqrtOp::create(b, loc, add(var, constant(typeOf(var), n.getEps().convertToDouble())));
      Value gw = mul(g, broadcastTrailing(w, xt));
      Value meanGw = scale(rowSumBroadcast(gw), 1.0 / double(width));
      Value meanGwX = scale(rowSumBroadcast(mul(gw, xhat)), 1.0 / double(width));
      return mul(broadcast(r, rows, xt), sub(sub(gw, meanGw), mul(xhat, meanGwX)));
    });
  } else {
    return std::nullopt;
  }
  return success();
}

/// The vector-Jacobian rules of losses, softmaxes, rotary, lookups, masks and constants;
/// none when `op` is not one of them.
std::optional<LogicalResult> Differentiator::backpropComposites(Operation *op, Value g) {
  auto give = [&](unsigned i, llvm::function_ref<Value()> make) { contribute(op, i, make); };
  auto isActive = [&](unsigned i) { return active.contains(op->getOperand(i)); };
  Value res = op->getResult(0);
  if (isa<MseLossOp>(op)) {
    auto t = typeOf(op->getOperand(0));
    Value dpred = mul(broadcast(g, {}, t), MseLossGradOp::create(b, loc, op->getOperand(0),
                                                                 op->getOperand(1)));
    give(0, [&] { return dpred; });
    give(1, [&] { return scale(dpred, -1); });
  } else if (isa<SoftmaxOp, CausalSoftmaxOp>(op)) {
    // dx = y * (g - rowsum(g * y)); masked entries have y = 0.
    give(0, [&] { return mul(res, sub(g, rowSumBroadcast(mul(g, res)))); });
  } else if (auto ro = dyn_cast<RotaryOp>(op)) {
    // y = x * cos + R(x) * sin with R^T = -R:  dx = g * cos - R(g * sin), and
    // R(z) = rotary(z, 0, 1).
    give(0, [&] {
      auto xt = typeOf(ro.getInput());
      Value cosB = broadcastTrailing(ro.getCos(), xt), sinB = broadcastTrailing(ro.getSin(), xt);
      Value zeros = constant(typeOf(ro.getCos()), 0.0), ones = constant(typeOf(ro.getCos()), 1.0);
      Value rotated = RotaryOp::create(b, loc, mul(g, sinB), zeros, ones);
      return sub(mul(g, cosB), rotated);
    });
  } else if (auto ce = dyn_cast<CrossEntropyOp>(op)) {
    // d logits[t] = g * mask[t] / sum(mask) * (softmax(logits[t]) - labels[t]).
    if (isActive(1) || isActive(2))
      return failure(); // only the logits are differentiable here
    give(0, [&] {
      auto lt = typeOf(ce.getLogits());
      auto mt = typeOf(ce.getMask());
      Value tokens = reduceSum(ce.getMask(), {0});
      Value weight = div(mul(broadcast(g, {}, mt), ce.getMask()), broadcast(tokens, {}, mt));
      Value probs = SoftmaxOp::create(b, loc, ce.getLogits());
      return mul(broadcast(weight, {0}, lt), sub(probs, ce.getLabels()));
    });
  } else if (auto ce = dyn_cast<CrossEntropySumOp>(op)) {
    // d logits[t] = g * mask[t] * (softmax(logits[t]) - labels[t]).
    if (isActive(1) || isActive(2))
      return failure();
    give(0, [&] {
      auto lt = typeOf(ce.getLogits());
      auto mt = typeOf(ce.getMask());
      Value weight = mul(broadcast(g, {}, mt), ce.getMask());
      Value probs = SoftmaxOp::create(b, loc, ce.getLogits());
      return mul(broadcast(weight, {0}, lt), sub(probs, ce.getLabels()));
    });
  } else if (auto e = dyn_cast<EmbeddingOp>(op)) {
    give(0, [&]() -> Value {
      return EmbeddingGradOp::create(b, loc, typeOf(e.getTable()), g, e.getIds(), e.getOffset());
    });
  } else if (isa<MaskedSoftmaxOp>(op)) {
    // As softmax (masked entries have y = 0); the mask is data, not differentiated.
    if (isActive(1))
      return failure();
    give(0, [&] { return mul(res, sub(g, rowSumBroadcast(mul(g, res)))); });
  } else if (isa<PositionMaskOp, DocumentMaskOp>(op)) {
    // 0/1 masks: piecewise constant in their operands, no gradient flows.
  } else if (isa<ConstantOp, LiteralOp>(op)) {
    // No operands.
  } else {
    return std::nullopt;
  }
  return success();
}

/// The vector-Jacobian rules of rank-local cuts, selections, routing and collectives (their
/// adjoints); none when `op` is not one of them.
std::optional<LogicalResult> Differentiator::backpropCollectives(Operation *op, Value g) {
  auto give = [&](unsigned i, llvm::function_ref<Value()> make) { contribute(op, i, make); };
  if (auto ss = dyn_cast<dist::ShardSliceOp>(op)) {
    // Each rank's copy of the replicated value gets its block's share of the gradient,
    // zeros elsewhere: partial over `axes` until the plan sums it.
    give(0, [&]() -> Value {
      return madeBy(op,
                     dist::ShardPadOp::create(b, loc, typeOf(ss.getInput()), g, ss.getAxesAttr(),
                                              ss.getDimAttr(), ss.getZigzagAttr()));
    });
  } else if (auto sp = dyn_cast<dist::ShardPadOp>(op)) {
    give(0, [&]() -> Value {
      return madeBy(op,
                     dist::ShardSliceOp::create(b, loc, typeOf(sp.getInput()), g, sp.getAxesAttr(),
                                                sp.getDimAttr(), sp.getZigzagAttr()));
    });
  } else if (auto sel = dyn_cast<dist::SelectOnOp>(op)) {
    // The gradient goes to the operand each rank took.
    if (!isa<RankedTensorType>(sel.getType()))
      return failure();
    give(0, [&]() -> Value {
      return madeBy(
          op, dist::SelectOnOp::create(b, loc, g, constant(typeOf(g), 0.0), sel.getOnAttr()));
    });
    give(1, [&]() -> Value {
      return madeBy(
          op, dist::SelectOnOp::create(b, loc, constant(typeOf(g), 0.0), g, sel.getOnAttr()));
    });
  } else if (isa<TopkMaskOp, CapacityDispatchOp>(op)) {
    // Piecewise constant in its operand: no gradient flows (the router learns through
    // its gates).
  } else if (auto a2a = dyn_cast<dist::AllToAllOp>(op)) {
    // In a plan, ref.grad differentiates the sum of every rank's loss: the adjoint of
    // an all_to_all is the all_to_all back.
    give(0, [&]() -> Value {
      return madeBy(op,
                     dist::AllToAllOp::create(b, loc, typeOf(a2a.getInput()), g, a2a.getAxesAttr(),
                                              a2a.getConcatDimAttr(), a2a.getSplitDimAttr()));
    });
  } else if (auto ag = dyn_cast<dist::AllGatherOp>(op)) {
    give(0, [&]() -> Value {
      return madeBy(op, dist::ReduceScatterOp::create(b, loc, typeOf(ag.getInput()), g,
                                                       ag.getAxesAttr(), ag.getDimAttr(),
                                                       ag.getZigzagAttr(), b.getStringAttr("sum")));
    });
  } else if (auto rs = dyn_cast<dist::ReduceScatterOp>(op)) {
    if (rs.getKind() != "sum")
      return failure();
    give(0, [&]() -> Value {
      return madeBy(op,
                     dist::AllGatherOp::create(b, loc, typeOf(rs.getInput()), g, rs.getAxesAttr(),
                                               rs.getDimAttr(), rs.getZigzagAttr()));
    });
  } else if (auto ar = dyn_cast<dist::AllReduceOp>(op)) {
    if (ar.getKind() != "sum" && ar.getKind() != "avg")
      return failure();
    give(0, [&]() -> Value {
      return madeBy(op, dist::AllReduceOp::create(b, loc, typeOf(ar.getInput()), g,
                                                   ar.getAxesAttr(), ar.getKindAttr()));
    });
  } else {
    return std::nullopt;
  }
  return success();
}

/// Gives each active operand of `op` its contribution to the gradient, the cotangent of
/// `op`'s result being `g`: one rule per op, by family.
LogicalResult Differentiator::backprop(Operation *op, Value g) {
  for (auto rule : {&Differentiator::backpropArithmetic, &Differentiator::backpropFunctions,
                    &Differentiator::backpropLayout, &Differentiator::backpropNorms,
                    &Differentiator::backpropComposites, &Differentiator::backpropCollectives})
    if (std::optional<LogicalResult> done = (this->*rule)(op, g))
      return *done;
  return failure();
}

/// Adds `make()` to the gradient of operand `i` of `op` if it is active, naming the ops
/// it creates after what they differentiate, uniquely: d(%x).0, d(%x).1, ...
void Differentiator::contribute(Operation *op, unsigned i, llvm::function_ref<Value()> make) {
  if (!active.contains(op->getOperand(i)))
    return;
  // The backward pass is built at the end of a scratch block (run).
  Block *into = b.getInsertionBlock();
  Operation *before = into->empty() ? nullptr : &into->back();
  accumulate(op->getOperand(i), make());
  if (!nameOf)
    return;
  // Each op computed for this contribution is named after what it differentiates,
  // uniquely: d(%x).0, d(%x).1, ...
  std::string base = "d(" + nameOf(op->getOperand(i)) + ")";
  for (Operation *o = before ? before->getNextNode() : (into->empty() ? nullptr : &into->front());
       o; o = o->getNextNode())
    o->setLoc(NameLoc::get(b.getStringAttr(base + "." + std::to_string(counters[base]++)),
                           gradLoc));
}


LogicalResult Differentiator::derive(SmallVectorImpl<Value> &results, std::string &why,
                                     Location &where) {
  Operation *before = anchor ? anchor->getPrevNode() : (block->empty() ? nullptr : &block->back());
  // Only the ops the seeds depend on can receive an adjoint: their backward slice in
  // this block (all before the anchor), in block order. Walking the slice rather than
  // the block keeps a plan with one grad per microbatch and stage linear: each grad
  // visits its own microbatch's ops.
  SmallVector<Operation *> ops, stack;
  llvm::DenseSet<Operation *> inSlice;
  auto visit = [&](Value v) {
    Operation *d = v.getDefiningOp();
    if (d && d->getBlock() == block && inSlice.insert(d).second)
      stack.push_back(d);
  };
  for (auto &[v, cot] : seeds)
    visit(v);
  while (!stack.empty()) {
    Operation *op = stack.pop_back_val();
    ops.push_back(op);
    for (Value v : op->getOperands())
      visit(v);
  }
  bool allPlaced = positions && llvm::all_of(ops, [&](Operation *o) { return positions->count(o); });
  if (allPlaced)
    llvm::sort(ops, [&](Operation *x, Operation *y) { return positions->lookup(x) < positions->lookup(y); });
  else
    llvm::sort(ops, [](Operation *x, Operation *y) { return x->isBeforeInBlock(y); });
  // Forward: what is computed from a `wrt` value is active.
  for (Value w : wrt)
    active.insert(w);
  for (Operation *op : ops) {
    if (isa<DetachOp>(op))
      continue; // stop-gradient: its result never depends on a wrt value
    if (llvm::any_of(op->getOperands(), [&](Value v) { return active.contains(v); }))
      for (Value r : op->getResults())
        active.insert(r);
  }
  // The backward pass is built in a scratch block and moved before the anchor in one
  // splice: inserting op by op before it would renumber the block's op order again and
  // again (isBeforeInBlock, above, needs it).
  Block scratch;
  b.setInsertionPointToEnd(&scratch);
  auto place = [&] {
    block->getOperations().splice(anchor ? anchor->getIterator() : block->end(),
                                  scratch.getOperations());
  };
  for (auto &[v, cot] : seeds) {
    if (!active.contains(v))
      continue;
    accumulate(v, cot ? cot : constant(typeOf(v), 1.0));
    // A loss's seed is named after the loss it differentiates (`d(%loss).seed`), so
    // the backward pass can be traced to its loss even after export.
    if (!cot && nameOf)
      adjoint[v].getDefiningOp()->setLoc(
          NameLoc::get(b.getStringAttr("d(" + nameOf(v) + ").seed"), gradLoc));
  }
  for (Operation *op : llvm::reverse(ops)) {
    if (auto call = dyn_cast<func::CallOp>(op)) {
      if (failed(backpropCall(call, why, where))) {
        place();
        return failure();
      }
      continue;
    }
    if (op->getNumResults() != 1 || !active.contains(op->getResult(0)))
      continue;
    auto it = adjoint.find(op->getResult(0));
    if (it == adjoint.end())
      continue;
    // Nothing to propagate past an op none of whose operands depends on a wrt value
    // (the op defining a wrt value itself, say): it needs no derivative rule.
    if (llvm::none_of(op->getOperands(), [&](Value v) { return active.contains(v); }))
      continue;
    if (isa<DetachOp>(op))
      continue; // a detached wrt value: its gradient stops here
    bool collective = isa<dist::CollectiveOp, dist::SelectOnOp>(op);
    if (ruled)
      ruled(op, nullptr);
    if ((!isa<RefDialect>(op->getDialect()) && !collective) ||
        failed(backprop(op, it->second))) {
      why = "autodiff: no derivative rule for '" + op->getName().getStringRef().str() + "'";
      where = op->getLoc();
      place();
      return failure();
    }
  }
  for (Value w : wrt) {
    auto it = adjoint.find(w);
    results.push_back(it != adjoint.end() ? it->second : constant(typeOf(w), 0.0));
  }
  place();
  // The derived backward pass runs where the grad op runs: on a pipelined plan's
  // stage, its ops carry the grad op's `dist.stage`.
  if (Attribute stage = anchor ? anchor->getAttr("dist.stage") : Attribute())
    for (Operation *o = before ? before->getNextNode() : &block->front(); o && o != anchor;
         o = o->getNextNode())
      o->setAttr("dist.stage", stage);
  return success();
}

LogicalResult Differentiator::run(std::string &why, Location &where) {
  SmallVector<Value> results;
  if (failed(derive(results, why, where)))
    return failure();
  if (replaced)
    for (auto [old, now, w] : llvm::zip(grad.getResults(), results, grad.getWrt()))
      replaced(old, now, w);
  grad->replaceAllUsesWith(results);
  grad->erase();
  return success();
}

} // namespace planproof::autodiff

namespace {

struct ExpandGradPass : PassWrapper<ExpandGradPass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(ExpandGradPass)
  StringRef getArgument() const override { return "ref-expand-grad"; }
  StringRef getDescription() const override {
    return "Replace ref.grad ops by the derived backward pass";
  }
  ExpandGradPass() = default;
  ExpandGradPass(const ExpandGradPass &other) : PassWrapper(other) {}
  Option<bool> throughCalls{
      *this, "through-calls",
      llvm::cl::desc("differentiate calls through their callees' vector-Jacobian functions "
                     "(added to the module) instead of refusing them"),
      llvm::cl::init(false)};
  void runOnOperation() override {
    std::string why;
    Location where = getOperation().getLoc();
    if (failed(expandGradOps(getOperation(), why, where, nullptr, nullptr, nullptr,
                             throughCalls))) {
      emitError(where) << why;
      signalPassFailure();
    }
  }
};

} // namespace

LogicalResult planproof::expandGradOps(Operation *root, std::string &why, Location &where,
                                      std::function<std::string(Value)> nameOf,
                                      std::function<void(Value, Value, Value)> replaced,
                                      std::function<void(Operation *, Operation *)> ruled,
                                      bool throughCalls) {
  SmallVector<GradOp> grads;
  root->walk([&](GradOp g) { grads.push_back(g); });
  llvm::DenseMap<Operation *, size_t> positions;
  std::set<Block *> blocks;
  for (GradOp g : grads)
    if (blocks.insert(g->getBlock()).second) {
      size_t i = 0;
      for (Operation &op : *g->getBlock())
        positions[&op] = i++;
    }
  std::optional<VjpFunctions> calls;
  if (throughCalls) {
    auto module = dyn_cast<ModuleOp>(root);
    if (!module)
      module = root->getParentOfType<ModuleOp>();
    calls.emplace(module, nameOf, ruled);
  }
  for (GradOp g : grads)
    if (failed(Differentiator(g, nameOf, replaced, &positions, ruled, calls ? &*calls : nullptr)
                   .run(why, where)))
      return failure();
  return success();
}

std::unique_ptr<Pass> planproof::createExpandGradPass() {
  return std::make_unique<ExpandGradPass>();
}

void planproof::registerAutodiffPasses() { PassRegistration<ExpandGradPass>(); }
