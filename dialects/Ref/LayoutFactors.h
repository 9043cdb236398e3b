//===- LayoutFactors.h - what an op does to the layout of its operands -*- C++ -*-===//
//
// An op's layout rule as data, in the spirit of Shardy's sharding rules: the op's
// index space is a list of *factors*; each dimension of each tensor operand and of the
// result indexes one factor (or none), and each factor has a kind that says what a
// split of it means. The layout engine propagates splits over factors with one generic
// rule (lib/LayoutEngine/Splits.cpp, factorSplit); no engine knows an op by name for it.
//
// Rules are derived once per op family from the op's traits (familyFactors: MLIR's
// `Elementwise`, ref's `RowWise`) and written by hand only where an op is special
// (LayoutFactors.cpp, next to nothing else). Each kind's claim is checked against the
// shared op semantics on random shapes and values by test/unit/LayoutFactorsTest.cpp,
// which also fails when an op with a rule has no certification case.
//
//===----------------------------------------------------------------------===//
#ifndef PLANPROOF_DIALECTS_REF_LAYOUTFACTORS_H
#define PLANPROOF_DIALECTS_REF_LAYOUTFACTORS_H

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mlir {
class Operation;
}

namespace planproof::ref {

/// What a split of a factor (its positions cut into blocks, one per rank group) means
/// for the op computed on each rank's blocks. Each claim is certified in
/// LayoutFactorsTest for every op that declares it.
enum class FactorKind : uint8_t {
  /// The operand dimensions and the result dimension index the same positions: the op
  /// on a block of them computes the same block of the result (a batch, a free
  /// dimension of a product).
  PassThrough,
  /// Pass-through, and the op divides by the number of positions along the factor (a
  /// mean's gradient): on a block of n it computes n times that block of the result.
  Counted,
  /// Summed over (absent from the result): the result is the sum of the op on the
  /// blocks, so a split gives a partial sum (a contraction, reduce_sum).
  Sum,
  /// Averaged over: the result is the mean of the op on the blocks, so a split gives a
  /// partial sum of values each the number of blocks times too large (reduce_mean).
  Mean,
  /// Maximized over: the result is the maximum of the op on the blocks, a partial
  /// maximum (reduce_max).
  Max,
  /// Read whole: every position may affect every result position along it, so it
  /// must not be split (a norm's or a softmax's row, an embedding table's rows).
  Whole,
};

const char *factorKindName(FactorKind k);

struct LayoutFactors {
  std::vector<FactorKind> kinds;
  /// operands[i][d]: the factor that dimension d of tensor operand i indexes, or -1
  /// (a dimension of size 1 that is broadcast: it must not be split). Only tensor
  /// operands, in order; an op's index operands (offsets) are not listed.
  std::vector<std::vector<int>> operands;
  /// result[d]: the factor of result dimension d, or -1 for a dimension the op makes
  /// (one-hot classes, a table gradient's rows), whole on every rank.
  std::vector<int> result;

  int add(FactorKind k) {
    kinds.push_back(k);
    return (int)kinds.size() - 1;
  }
  /// "matmul(m, k) x (k, n) -> (m, n)"-like text: each factor named by its index and
  /// kind, for messages and the certification test.
  std::string str() const;
};

/// The rule of an op of a family, from its traits: elementwise ops (every dimension
/// pass-through), row-wise ops (leading dimensions pass-through, the last whole, and
/// lower-rank operands such as a norm's weight whole). None for other ops.
std::optional<LayoutFactors> familyFactors(mlir::Operation *op);

} // namespace planproof::ref

#endif
