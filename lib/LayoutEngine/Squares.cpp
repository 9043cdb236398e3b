//===- Squares.cpp - the square of a square root ---------------------------===//
//
// A norm of norms, as DTensor and torch.nn.utils compute a gradient norm: each shard's
// 2-norm (the square root of its partial sum of squares), the norms stacked, squared,
// summed over the ranks, and the norm of those. sqrt(x)^2 = x wherever x >= 0, so the
// square of a value made of square roots of values that are nonnegative on every rank
// -- moved (reshape, transpose, slice, broadcast, concat), scaled or divided by
// constants -- is those values moved alike: its state is theirs, through the same
// rules. Nonnegativity is read off how each rank computes the value (squares, sums of
// nonnegative values, square roots, exponentials), never off its state (a partial
// sum's total may be nonnegative where a rank's part is not).
//
//===----------------------------------------------------------------------===//
#include "LayoutEngine/LayoutState.h"

#include "Dist/DistDialect.h"
#include "Ref/RefDialect.h"

#include "llvm/ADT/DenseMap.h"

#include <optional>

using namespace mlir;

namespace planproof::layouts {

namespace {

constexpr int kMaxDepth = 64; // deeper definitions are not followed (not nonnegative)

/// x where `op` is max(x, c x) or max(c x, x) with c <= 0 (|x| scaled: >= 0 for every
/// x); null otherwise.
Value magnitudeOf(Operation *op) {
  if (!isa<ref::MaximumOp>(op))
    return {};
  for (int i = 0; i < 2; ++i) {
    Value x = op->getOperand(i);
    auto s = op->getOperand(1 - i).getDefiningOp<ref::ScaleOp>();
    if (s && s->getOperand(0) == x && s.getFactorAttr().getValueAsDouble() <= 0)
      return x;
  }
  return {};
}

/// Whether every element of every rank's value of `v` is >= 0 (where defined), from
/// the ops that compute it. Memoized in `memo`: a definition shared by many values (a
/// DAG such as add(x, x) repeated) is looked at once.
bool nonnegative(Value v, int depth, llvm::DenseMap<Value, bool> &memo) {
  if (auto it = memo.find(v); it != memo.end())
    return it->second;
  Operation *op = v.getDefiningOp();
  if (!op || depth > kMaxDepth)
    return false; // (not memoized: at a smaller depth it may be followed)
  auto all = [&]() {
    for (Value x : op->getOperands())
      if (!nonnegative(x, depth + 1, memo))
        return false;
    return true;
  };
  bool yes = false;
  if (auto m = dyn_cast<ref::MulOp>(op))
    yes = m->getOperand(0) == m->getOperand(1) || all();
  else if (isa<ref::SqrtOp, ref::ExpOp>(op))
    yes = true;
  else if (auto s = dyn_cast<ref::ScaleOp>(op))
    yes = s.getFactorAttr().getValueAsDouble() >= 0 && all();
  else if (auto k = dyn_cast<ref::ConstantOp>(op))
    yes = k.getValueAttr().getValueAsDouble() >= 0;
  else if (isa<ref::ReduceSumOp, ref::ReshapeOp, ref::TransposeOp, ref::ConcatOp,
               ref::BroadcastOp, ref::SliceOp, ref::AddOp, ref::DivOp, ref::DetachOp,
               dist::AllGatherOp, dist::ShardSliceOp>(op))
    yes = all();
  else if (isa<ref::ReduceMaxOp, ref::ReduceMeanOp>(op))
    yes = all();
  else if (isa<ref::MaximumOp>(op))
    yes = magnitudeOf(op) || nonnegative(op->getOperand(0), depth + 1, memo) ||
          nonnegative(op->getOperand(1), depth + 1, memo);
  else if (auto r = dyn_cast<dist::AllReduceOp>(op))
    yes = (r.getKind() == "sum" || r.getKind() == "max" || r.getKind() == "avg") && all();
  else if (auto r = dyn_cast<dist::ReduceScatterOp>(op))
    yes = r.getKind() == "sum" && all();
  memo[v] = yes;
  return yes;
}

/// k x k for a divisor k that is a constant c (c x c, exactly) or the square root of a
/// nonnegative constant n (n: DTensor divides a replicated norm by sqrt(|axis|), which
/// planproof.torch writes as ref.sqrt of the constant). False for any other divisor.
bool divisorSquare(Value k, Rational &out) {
  std::string why;
  if (auto c = k.getDefiningOp<ref::ConstantOp>()) {
    Rational r;
    if (!exactConstant(c.getValueAttr().getValueAsDouble(), r, why))
      return false;
    out = r * r;
    return true;
  }
  if (auto root = k.getDefiningOp<ref::SqrtOp>())
    if (auto c = root->getOperand(0).getDefiningOp<ref::ConstantOp>())
      return c.getValueAttr().getValueAsDouble() >= 0 &&
             exactConstant(c.getValueAttr().getValueAsDouble(), out, why);
  return false;
}

struct Squarer {
  Squarer(const std::function<State(Value)> &stateOf,
          const std::function<State(Operation &, const std::vector<const State *> &)> &rule)
      : stateOf(stateOf), rule(rule) {}
  const std::function<State(Value)> &stateOf;
  const std::function<State(Operation &, const std::vector<const State *> &)> &rule;
  llvm::DenseMap<Value, bool> nonnegativeMemo;
  /// Each value's square, once (a concatenation of one value with itself, repeated,
  /// would otherwise be squared once per path): nullopt where it has none.
  llvm::DenseMap<Value, std::optional<State>> squares;

  bool of(Value v, State &out, int depth) {
    if (auto it = squares.find(v); it != squares.end()) {
      if (it->second)
        out = *it->second;
      return it->second.has_value();
    }
    if (depth > kMaxDepth)
      return false; // (not memoized: at a smaller depth it may be followed)
    bool yes = square(v, out, depth);
    squares[v] = yes ? std::optional<State>(out) : std::nullopt;
    return yes;
  }

  bool square(Value v, State &out, int depth) {
    Operation *op = v.getDefiningOp();
    if (!op)
      return false;
    if (auto r = dyn_cast<ref::SqrtOp>(op)) {
      out = stateOf(r->getOperand(0));
      return out.known && nonnegative(r->getOperand(0), 0, nonnegativeMemo);
    }
    if (isa<ref::ReshapeOp, ref::TransposeOp, ref::ConcatOp, ref::SliceOp, ref::BroadcastOp>(op)) {
      std::vector<State> squares(op->getNumOperands());
      std::vector<const State *> in;
      for (unsigned i = 0; i < op->getNumOperands(); ++i) {
        if (!of(op->getOperand(i), squares[i], depth + 1))
          return false;
        in.push_back(&squares[i]);
      }
      out = rule(*op, in);
      return out.known;
    }
    if (auto s = dyn_cast<ref::ScaleOp>(op)) {
      std::string why;
      Rational f;
      if (!exactConstant(s.getFactorAttr().getValueAsDouble(), f, why) ||
          !of(op->getOperand(0), out, depth + 1))
        return false;
      out.factor = out.factor * f * f;
      out.rowSums.reset(); // (its affine description was of the unscaled value)
      return true;
    }
    // (0 - x)^2 = x^2 and (x - 0)^2 = x^2: a negation written as a subtraction from a
    // constant zero (PyTorch's and JAX's `-x` as traced).
    if (isa<ref::SubOp>(op)) {
      auto zero = [](Value k) {
        auto c = k.getDefiningOp<ref::ConstantOp>();
        return c && c.getValueAttr().getValueAsDouble() == 0.0;
      };
      for (unsigned i = 0; i < 2; ++i)
        if (zero(op->getOperand(1 - i)))
          return of(op->getOperand(i), out, depth + 1);
      return false;
    }
    if (isa<ref::DivOp>(op)) {
      Rational k2;
      if (!divisorSquare(op->getOperand(1), k2) || k2.isZero() ||
          !of(op->getOperand(0), out, depth + 1))
        return false;
      out.factor = out.factor / k2;
      out.rowSums.reset();
      return true;
    }
    return false;
  }
};

} // namespace

bool readsDefinitions(Operation &op) {
  return (isa<ref::MulOp>(op) && op.getOperand(0) == op.getOperand(1)) || magnitudeOf(&op);
}

bool definitionRule(Operation &op, const std::function<State(Value)> &stateOf,
                    const std::function<State(Operation &, const std::vector<const State *> &)> &rule,
                    State &out) {
  if (squareOfRoots(op, stateOf, rule, out))
    return true;
  Value x = magnitudeOf(&op);
  if (!x)
    return false;
  State sx = stateOf(x);
  llvm::DenseMap<Value, bool> memo;
  if (!sx.known || sx.partialMax.empty() || !nonnegative(x, 0, memo))
    return false;
  // Per rank max(x_r, c x_r) = x_r: the maxima over the ranks are x's; the term is the
  // maximum's of x's term (equal: x's value is a maximum of nonnegative values).
  std::vector<int> axes = sx.partialMax;
  sx.partialMax.clear();
  Operation *scale = op.getOperand(op.getOperand(0) == x ? 1 : 0).getDefiningOp();
  State scaled = rule(*scale, {&sx});
  if (!scaled.known)
    return false;
  out = op.getOperand(0) == x ? rule(op, {&sx, &scaled}) : rule(op, {&scaled, &sx});
  if (!out.known || intersects(out.splitAxes(), axes) || intersects(out.partial, axes) ||
      !out.partialMax.empty())
    return false;
  out.partialMax = axes;
  return true;
}

bool squareOfRoots(Operation &op, const std::function<State(Value)> &stateOf,
                   const std::function<State(Operation &, const std::vector<const State *> &)> &rule,
                   State &out) {
  auto m = dyn_cast<ref::MulOp>(op);
  if (!m || m->getOperand(0) != m->getOperand(1))
    return false;
  Squarer s{stateOf, rule};
  State sq;
  if (!s.of(m->getOperand(0), sq, 0))
    return false;
  out = std::move(sq);
  return true;
}

} // namespace planproof::layouts
