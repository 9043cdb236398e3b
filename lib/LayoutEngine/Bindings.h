//===- Bindings.h - states of reference values under a layout ----*- C++ -*-===//
//
// Internal to lib/LayoutEngine (Bindings.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef PLANPROOF_LAYOUTENGINE_BINDINGS_H
#define PLANPROOF_LAYOUTENGINE_BINDINGS_H

#include "LayoutEngine/LayoutState.h"

namespace planproof::layouts {

/// "2x3xf32": the type text of an f32 tensor of shape s (leaves' types).
std::string shapeText(const Shape &s);
/// The size of dimension d of `global` padded to a multiple of l's blocks; the one
/// split dimension that layout `l` pads (its axes do not divide it), -1 for none, -2
/// for several.
int64_t paddedSize(const Mesh &mesh, const Layout &l, const Shape &global, size_t d);
int paddedDim(const Mesh &mesh, const Layout &l, const Shape &global);

/// The state of what every rank holds of the reference value `whole` (named `name`)
/// under layout `l`: its blocks, an interleaved dimension's blocks of every segment,
/// zigzag windows, a padded flat buffer's padding (a leaf of its own), partial sums
/// (an average's summands times the group's size). Unknown, without an op, where a
/// layout is not modelled.
State layoutOf(RuleContext &c, mlir::MLIRContext *ctx, const State &whole, const Layout &l,
               const std::string &name);

/// A plan draw in independent RNG mode (dist.draws, docs/rng.md). Once RngCheck has
/// proved, for all ranks and elements at once, that draws standing for different
/// elements never share a (key, counter) pair and replicas share theirs, the plan's
/// draws are distributed as the reference's, and each is renamed to the piece of the
/// reference mask it stands for, as the element engine renames it (SymbolicExec): the
/// rank's `block` under `l` of `whole`, the reference mask's state, and of that the
/// piece at `off` of the op's own shape (a microbatch's rows). Padded layouts, and a
/// piece of a zigzag block, are not modelled (unknown).
State drawRule(RuleContext &c, mlir::Operation &op, const State &whole, const Layout &l,
               const Shape &block, llvm::ArrayRef<int64_t> off);

/// A state whose dimension d is held in windows (rows chosen per rank: microbatches'
/// rows concatenated back, each a window of every rank's block) described as the
/// plain blocks of `axes` (a declared layout's, major to minor): the rank at block p
/// holds its windows' rows in order, which is block p of the concatenation over p of
/// those rows -- slices of the term. Exact: every rank holds what it held. False where
/// a window is zeros, names another axis, or the blocks' rows differ in number.
bool windowsAsBlocks(RuleContext &c, mlir::MLIRContext *ctx, const State &s, size_t d,
                     const DimSplit &axes, State &out);

/// The operands `in` of op with each dimension held in windows described as the plain
/// blocks of a partner operand's split of as many rows (windowsAsBlocks), or without
/// one as the plain blocks of the axes the windows name, into `conv`: true where none
/// is left in windows (a gradient concatenated from microbatches scattered by the
/// rank's own ids; shifted labels, each rank's run and pad, summed over the tokens),
/// which a rule of plain blocks then takes. Exact: every rank holds what it held.
bool windowsAsPartners(RuleContext &c, mlir::Operation &op, const std::vector<const State *> &in,
                       std::vector<State> &conv);

} // namespace planproof::layouts

#endif
