//===- LayoutFactors.cpp - the ref ops' layout rules as data ----------------===//
//
// familyFactors derives the rule of an op of a family from its traits; the ops whose
// rule is special (contractions, reductions, layout ops, losses, lookups, masks) get it
// here, each a few lines next to what the op's documentation in RefOps.td says it
// computes. LayoutFactorsTest certifies every rule against lib/Semantics.
//
//===----------------------------------------------------------------------===//
#include "Ref/RefDialect.h"

#include "mlir/IR/BuiltinTypes.h"

using namespace mlir;

namespace planproof::ref {

const char *factorKindName(FactorKind k) {
  switch (k) {
  case FactorKind::PassThrough: return "pass-through";
  case FactorKind::Counted: return "counted";
  case FactorKind::Sum: return "sum";
  case FactorKind::Mean: return "mean";
  case FactorKind::Max: return "max";
  case FactorKind::Whole: return "whole";
  }
  return "?";
}

std::string LayoutFactors::str() const {
  auto dims = [&](const std::vector<int> &ds) {
    std::string s = "(";
    for (size_t d = 0; d < ds.size(); ++d)
      s += (d ? ", " : "") + (ds[d] < 0 ? std::string("_") : "f" + std::to_string(ds[d]));
    return s + ")";
  };
  std::string s;
  for (size_t i = 0; i < operands.size(); ++i)
    s += (i ? " x " : "") + dims(operands[i]);
  s += " -> " + dims(result) + " where";
  for (size_t f = 0; f < kinds.size(); ++f)
    s += (f ? ", f" : " f") + std::to_string(f) + " " + factorKindName(kinds[f]);
  return s;
}

namespace {

int64_t rankOf(Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  return t ? t.getRank() : -1;
}

/// The tensor operands of `op`, in order.
std::vector<Value> tensorOperands(Operation *op) {
  std::vector<Value> vs;
  for (Value v : op->getOperands())
    if (isa<RankedTensorType>(v.getType()))
      vs.push_back(v);
  return vs;
}

/// One factor of kind `k` per dimension of an operand of rank n, in order.
std::vector<int> fresh(LayoutFactors &r, int64_t n, FactorKind k) {
  std::vector<int> dims;
  for (int64_t d = 0; d < n; ++d)
    dims.push_back(r.add(k));
  return dims;
}

/// Row by row over the last dimension: leading dimensions pass through, the last is
/// read whole; other operands index the first one's last dimensions (a norm's weight
/// its last, a mask broadcast over the leading dimensions its rows and columns).
std::optional<LayoutFactors> rowWise(Operation *op) {
  std::vector<Value> in = tensorOperands(op);
  if (in.empty() || op->getNumResults() != 1 || rankOf(in[0]) < 1 ||
      rankOf(op->getResult(0)) != rankOf(in[0]))
    return std::nullopt;
  int64_t n = rankOf(in[0]);
  LayoutFactors r;
  std::vector<int> rows = fresh(r, n - 1, FactorKind::PassThrough);
  rows.push_back(r.add(FactorKind::Whole));
  for (Value v : in) {
    int64_t k = rankOf(v);
    if (k < 0 || k > n)
      return std::nullopt;
    r.operands.push_back(std::vector<int>(rows.end() - k, rows.end()));
  }
  r.result = rows;
  return r;
}

/// Leading dimensions of the first operand pass through; its last `inner` dimensions
/// are read whole and stay in the result, which may add dimensions of its own.
std::optional<LayoutFactors> batchDims(Operation *op, int64_t inner) {
  if (op->getNumOperands() < 1 || op->getNumResults() != 1 ||
      rankOf(op->getOperand(0)) < inner)
    return std::nullopt;
  int64_t n = rankOf(op->getOperand(0)), m = rankOf(op->getResult(0));
  if (m < n)
    return std::nullopt;
  LayoutFactors r;
  std::vector<int> dims = fresh(r, n - inner, FactorKind::PassThrough);
  std::vector<int> whole = fresh(r, inner, FactorKind::Whole);
  dims.insert(dims.end(), whole.begin(), whole.end());
  r.operands = {dims};
  r.result = dims;
  r.result.resize(m, -1);
  return r;
}

/// A reduction of kind `k` over `dims` (sorted, distinct): the other dimensions pass
/// through.
std::optional<LayoutFactors> reduction(Operation *op, ArrayRef<int64_t> dims, FactorKind k) {
  int64_t n = rankOf(op->getOperand(0));
  LayoutFactors r;
  std::vector<int> in;
  for (int64_t d = 0; d < n; ++d) {
    bool reduced = llvm::is_contained(dims, d);
    in.push_back(r.add(reduced ? k : FactorKind::PassThrough));
    if (!reduced)
      r.result.push_back(in.back());
  }
  r.operands = {in};
  return r;
}

/// A product of lhs and rhs contracting lhs dimension `ld` with rhs dimension `rd`
/// after `batch` leading batch dimensions they share: result [batch..., lhs free, rhs
/// free].
std::optional<LayoutFactors> product(Operation *op, int64_t ld, int64_t rd, int64_t batch) {
  int64_t n = batch + 2;
  if (rankOf(op->getOperand(0)) != n || rankOf(op->getOperand(1)) != n || ld < batch ||
      rd < batch || ld >= n || rd >= n)
    return std::nullopt;
  LayoutFactors r;
  std::vector<int> b = fresh(r, batch, FactorKind::PassThrough);
  int m = r.add(FactorKind::PassThrough), k = r.add(FactorKind::Sum),
      j = r.add(FactorKind::PassThrough);
  std::vector<int> lhs = b, rhs = b;
  lhs.push_back(ld == batch ? k : m);
  lhs.push_back(ld == batch ? m : k);
  rhs.push_back(rd == batch ? k : j);
  rhs.push_back(rd == batch ? j : k);
  r.operands = {lhs, rhs};
  r.result = b;
  r.result.push_back(m);
  r.result.push_back(j);
  return r;
}

} // namespace

std::optional<LayoutFactors> familyFactors(Operation *op) {
  if (op->hasTrait<mlir::OpTrait::Elementwise>()) {
    std::vector<Value> in = tensorOperands(op);
    if (in.empty() || op->getNumResults() != 1)
      return std::nullopt;
    int64_t n = rankOf(op->getResult(0));
    LayoutFactors r;
    r.result = fresh(r, n, FactorKind::PassThrough);
    for (Value v : in) {
      if (rankOf(v) != n)
        return std::nullopt;
      r.operands.push_back(r.result);
    }
    return r;
  }
  if (op->hasTrait<OpTrait::RowWise>())
    return rowWise(op);
  return std::nullopt;
}

//===----------------------------------------------------------------------===//
// Ops whose rule is their own
//===----------------------------------------------------------------------===//

// result[i, j] = sum_k lhs[.. i, k ..] * rhs[.. k, j ..]
std::optional<LayoutFactors> MatmulOp::getLayoutFactors() {
  return product(*this, getLhsDim(), getRhsDim(), 0);
}

// result = sum_k lhs[k] * rhs[k]
std::optional<LayoutFactors> DotOp::getLayoutFactors() {
  LayoutFactors r;
  int k = r.add(FactorKind::Sum);
  r.operands = {{k}, {k}};
  return r;
}

std::optional<LayoutFactors> BatchMatmulOp::getLayoutFactors() {
  return product(*this, getLhsDim(), getRhsDim(), 1);
}

// result[..., j] = input[..., j] + bias[j]
std::optional<LayoutFactors> BiasAddOp::getLayoutFactors() {
  int64_t n = rankOf(getInput());
  if (n < 1)
    return std::nullopt;
  LayoutFactors r;
  r.result = fresh(r, n, FactorKind::PassThrough);
  r.operands = {r.result, {r.result.back()}};
  return r;
}

std::optional<LayoutFactors> ReduceSumOp::getLayoutFactors() {
  return reduction(*this, getDims(), FactorKind::Sum);
}
std::optional<LayoutFactors> ReduceMeanOp::getLayoutFactors() {
  return reduction(*this, getDims(), FactorKind::Mean);
}
std::optional<LayoutFactors> ReduceMaxOp::getLayoutFactors() {
  return reduction(*this, getDims(), FactorKind::Max);
}

// result dimension d is input dimension perm[d]
std::optional<LayoutFactors> TransposeOp::getLayoutFactors() {
  int64_t n = rankOf(getInput());
  if ((int64_t)getPerm().size() != n)
    return std::nullopt;
  LayoutFactors r;
  std::vector<int> in = fresh(r, n, FactorKind::PassThrough);
  r.operands = {in};
  for (int64_t p : getPerm())
    r.result.push_back(in[p]);
  return r;
}

// (1/N) sum_i (prediction[i] - target[i])^2: a mean over every dimension.
std::optional<LayoutFactors> MseLossOp::getLayoutFactors() {
  LayoutFactors r;
  std::vector<int> dims = fresh(r, rankOf(getPrediction()), FactorKind::Mean);
  r.operands = {dims, dims};
  return r;
}

// (2/N) (prediction[i] - target[i]): divided by the count of every dimension.
std::optional<LayoutFactors> MseLossGradOp::getLayoutFactors() {
  LayoutFactors r;
  r.result = fresh(r, rankOf(getPrediction()), FactorKind::Counted);
  r.operands = {r.result, r.result};
  return r;
}

// Row i's mask depends on its position among the Sq queries and on Sk: the last two
// dimensions whole. With an offset operand the mask is the offset's (Windows.cpp).
std::optional<LayoutFactors> CausalSoftmaxOp::getLayoutFactors() {
  if (getOffset() || rankOf(getInput()) < 2)
    return std::nullopt;
  return batchDims(*this, 2);
}

std::optional<LayoutFactors> MaskedSoftmaxOp::getLayoutFactors() { return rowWise(*this); }

// Position s of each [S, D] slice is rotated with row s of the tables: positions pass
// through with the tables' rows; the features are mixed by the rotation (rotate-half).
std::optional<LayoutFactors> RotaryOp::getLayoutFactors() {
  int64_t n = rankOf(getInput());
  if (n < 2 || rankOf(getCos()) != 2 || rankOf(getSin()) != 2)
    return std::nullopt;
  LayoutFactors r;
  std::vector<int> dims = fresh(r, n - 1, FactorKind::PassThrough);
  dims.push_back(r.add(FactorKind::Whole));
  std::vector<int> tables(dims.end() - 2, dims.end());
  r.operands = {dims, tables, tables};
  r.result = dims;
  return r;
}

// sum_t mask[t] * (lse(logits[t]) - sum_v labels[t, v] logits[t, v]): a sum over the
// rows, each read whole; the mask has one entry per row.
std::optional<LayoutFactors> CrossEntropySumOp::getLayoutFactors() {
  int64_t n = rankOf(getLogits());
  if (n < 1 || rankOf(getMask()) != n - 1)
    return std::nullopt;
  LayoutFactors r;
  std::vector<int> rows = fresh(r, n - 1, FactorKind::Sum);
  std::vector<int> dims = rows;
  dims.push_back(r.add(FactorKind::Whole));
  r.operands = {dims, dims, rows};
  return r;
}

// result[t, :] = table[ids[t], :]; with an offset the rows are a vocabulary shard's
// (Windows.cpp).
std::optional<LayoutFactors> EmbeddingOp::getLayoutFactors() {
  if (getOffset())
    return std::nullopt;
  LayoutFactors r;
  int v = r.add(FactorKind::Whole), d = r.add(FactorKind::PassThrough),
      t = r.add(FactorKind::PassThrough);
  r.operands = {{v, d}, {t}};
  r.result = {t, d};
  return r;
}

// result[t, c] = [ids[t] == c]: the classes are the op's own dimension.
std::optional<LayoutFactors> OneHotOp::getLayoutFactors() {
  if (getOffset())
    return std::nullopt;
  LayoutFactors r;
  int t = r.add(FactorKind::PassThrough);
  r.operands = {{t}};
  r.result = {t, -1};
  return r;
}

// result[v, :] = sum_t [ids[t] == v] grad[t, :]: a sum over the tokens.
std::optional<LayoutFactors> EmbeddingGradOp::getLayoutFactors() {
  if (getOffset())
    return std::nullopt;
  LayoutFactors r;
  int t = r.add(FactorKind::Sum), d = r.add(FactorKind::PassThrough);
  r.operands = {{t, d}, {t}};
  r.result = {-1, d};
  return r;
}

// result[i, j] = [q[i] == k[j]]
std::optional<LayoutFactors> DocumentMaskOp::getLayoutFactors() {
  LayoutFactors r;
  int i = r.add(FactorKind::PassThrough), j = r.add(FactorKind::PassThrough);
  r.operands = {{i}, {j}};
  r.result = {i, j};
  return r;
}

// Each batch index's [tokens, experts] mask is dispatched on its own, and each
// expert's slots are counted over the tokens routed to it alone: batch dimensions and
// experts pass through, the tokens are read whole (a slot is the count of earlier
// tokens), and the slots are the op's own dimension.
std::optional<LayoutFactors> CapacityDispatchOp::getLayoutFactors() {
  int64_t n = rankOf(getInput());
  if (n < 2 || rankOf(getResult()) != n + 1)
    return std::nullopt;
  LayoutFactors r;
  std::vector<int> dims = fresh(r, n - 2, FactorKind::PassThrough);
  dims.push_back(r.add(FactorKind::Whole));
  dims.push_back(r.add(FactorKind::PassThrough));
  r.operands = {dims};
  r.result = dims;
  r.result.push_back(-1);
  return r;
}

} // namespace planproof::ref
