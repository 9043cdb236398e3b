//===- LayoutState.h - what a plan value holds, on every rank at once -*- C++ -*-===//
//
// The abstract states of the layout engine (docs/layout-engine.md) and the transfer
// rules over them (Rules.cpp). Internal to lib/LayoutEngine.
//
//===----------------------------------------------------------------------===//
#ifndef PLANPROOF_LAYOUTENGINE_LAYOUTSTATE_H
#define PLANPROOF_LAYOUTENGINE_LAYOUTSTATE_H

#include "LayoutEngine/Terms.h"
#include "Semantics/Layout.h"
#include "Support/Rational.h"
#include "Support/Deadline.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Operation.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/Hashing.h"
#include "llvm/Support/Allocator.h"

#include <algorithm>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <optional>
#include <vector>

namespace planproof {
struct Spec;
}

namespace planproof::layouts {

/// A run of rows of a dimension that every rank holds (Windows.cpp): `length` rows of
/// the term from row base + sum over (axis, c) of c x the rank's coordinate along the
/// axis -- or `length` rows of zeros. Context parallelism's chunks are such windows: a
/// zigzag block is two of them, a query chunk one.
struct Window {
  int64_t length = 0;
  bool zero = false;
  int64_t base = 0;
  std::vector<std::pair<int, int64_t>> coeff; // by axis, sorted; no zero coefficients
  /// Equal windows hold the same rows (zeros: whatever base and coefficients).
  bool operator==(const Window &o) const {
    return length == o.length && zero == o.zero && (zero || (base == o.base && coeff == o.coeff));
  }
  bool operator!=(const Window &o) const { return !(*this == o); }
};

/// How one dimension is laid out over the ranks: split over the mesh axes it holds
/// (major to minor; Layout.h's blocks) -- unless `windows` is set: then each rank's
/// block is the concatenation of those windows (the axes are those the windows'
/// coefficients name, in the split's order), and no rule that does not say so takes it.
struct DimSplit : std::vector<int> {
  using std::vector<int>::vector;
  DimSplit() = default;
  DimSplit(const std::vector<int> &axes) : std::vector<int>(axes) {}
  std::vector<Window> windows;
  bool operator==(const DimSplit &) const = default;
};

/// What a value holds on every rank: factor x term, with dimension d split over the
/// mesh axes split[d] (major to minor; the blocks of Layout.h) and a partial sum over
/// the axes `partial` (each rank holds one summand; the sum over those axes' groups is
/// the value). Axes of size 1 never appear. Or unknown, with why and where.
///
/// A state is a few orthogonal parts, each its own type below; equality (and with it
/// the memo's keys, StatesKey) is derived from the parts' types field by field, so a
/// field added to a part is compared without being listed anywhere.

/// Why a state is unknown, and where (every field empty on a known state).
struct Unknown {
  /// Empty: a value no rule gave a state, such as an index argument without a binding
  /// (State::reason() says so). Empty by default, so that making a state allocates
  /// nothing.
  std::string why;
  mlir::Operation *origin = nullptr; // where an unknown state arose (null: an argument)
  /// The operand of `origin` that is a partial sum the op is not linear in (-1: not
  /// that reason).
  int partialOperand = -1;
  bool operator==(const Unknown &) const = default;
};

/// The value every rank's block is a block of: factor x term over the global shape --
/// or a broadcast: factor x `source` copied along every dimension but sourceDims
/// (result dimension sourceDims[k] is source dimension k); the term is then
/// TermPool::broadcast of it. Its block under a split of the copied dimensions is a
/// broadcast of the same source. Uniform values (constants, broadcasts of scalars) are
/// broadcasts without source dimensions.
struct Denotation {
  TermId term = 0;
  Rational factor = Rational(1);
  Shape global;
  bool broadcast = false;
  TermId source = 0;
  std::vector<int64_t> sourceDims;
  bool operator==(const Denotation &) const = default;
};

/// Where the blocks lie: dimension d split over the mesh axes split[d] (or laid out in
/// windows).
struct Placement {
  std::vector<DimSplit> split;
  bool operator==(const Placement &) const = default;
};

/// Reductions still to come: a partial sum over the axes `partial`, or (partialMax)
/// each rank holding the maximum of its block, the value being the maximum over those
/// axes' groups (a reduce_max over a split dimension, before its all_reduce "max";
/// only that all_reduce takes such a value). Both sorted.
struct Pending {
  std::vector<int> partial;
  std::vector<int> partialMax;
  bool operator==(const Pending &) const = default;
};

/// What index values (not tensors) are known to be.
struct IndexFacts {
  /// An index value that differs from rank to rank: term + sum over (axis, c) of
  /// c x the rank's coordinate along the axis (dist.axis_index and +, -, * by
  /// constants of it). Empty for every other state; only the rules that say so take
  /// such a value (dropout_mask's counter), every other use leaves it unknown.
  std::vector<std::pair<int, int64_t>> rankCoeff;
  /// An index constant's value (arith.constant), for products by constants.
  bool isConst = false;
  int64_t constValue = 0;
  bool operator==(const IndexFacts &) const = default;
};

/// A partial sum whose summand on every rank is known (RowSums.cpp): a x (the sums
/// along `dim`, the class dimension, of the rank's block of the one-hot term `of` under
/// `split`) + b. The value's dimension k indexes dimension at[k] of the one-hot (-1: a
/// copy along a broadcast dimension). Set only by annotateRowSums.
struct RowSums {
  TermId of = 0;
  int dim = -1;
  std::vector<DimSplit> split;
  Rational a = Rational(1), b = Rational(0);
  std::vector<int64_t> at;
  bool operator==(const RowSums &) const = default;
};

struct State : Unknown, Denotation, Placement, Pending, IndexFacts {
  using RowSums = layouts::RowSums;
  bool known = false;
  std::optional<RowSums> rowSums;

  std::string reason() const {
    return why.empty() ? "a value the layout engine does not follow" : why;
  }
  bool uniformOne(TermId one) const { return broadcast && sourceDims.empty() && source == one; }
  /// Whether a broadcast copies its source along some dimension of more than one
  /// element. One that only adds dimensions of size 1 is a reshape of its source: its
  /// slices and concatenations keep their own terms (a reshape's term composes with
  /// other reshapes), where a broadcast with copies takes the broadcast's term.
  bool copies() const {
    for (size_t d = 0; d < global.size(); ++d)
      if (global[d] > 1 &&
          std::find(sourceDims.begin(), sourceDims.end(), (int64_t)d) == sourceDims.end())
        return true;
    return false;
  }

  static State unknown(mlir::Operation *at, std::string why) {
    State s;
    s.why = std::move(why);
    s.origin = at;
    return s;
  }
  /// Whether some dimension is split (or laid out in windows).
  bool isSplit() const {
    for (const auto &d : split)
      if (!d.empty() || !d.windows.empty())
        return true;
    return false;
  }
  /// Whether some dimension is laid out in windows (zigzag, chunks, zeros).
  bool windowed() const {
    for (const auto &d : split)
      if (!d.windows.empty())
        return true;
    return false;
  }
  /// Every axis splitting some dimension.
  std::vector<int> splitAxes() const;

  /// The same state in every part (an unknown state's reason and place included).
  bool operator==(const State &) const = default;
};

/// States under a context, as a hash-map key (the layout cache's and the function
/// summaries'): `context` and `ids` (identities: MLIR uniques op names, attribute
/// dictionaries and types) and the states, compared whole (State's derived equality).
/// The hash reads only a few fields of each state; equality decides.
struct StatesKey {
  std::string context;
  std::vector<const void *> ids;
  std::vector<State> states;
  bool operator==(const StatesKey &) const = default;
};
struct StatesKeyHash {
  size_t operator()(const StatesKey &k) const;
};

/// What the reference's shape ops show of the shapes it computes in. Where a plan's op
/// could describe its result under more than one global shape (dimensions of local size
/// 1), its rule takes the choice the reference takes; every choice is a true
/// description of the same blocks, so these steer completeness, not soundness.
struct ReferenceShapes {
  /// Reshapes: input shape -> output shapes (a plan's reshape holds its split on the
  /// output dimension that gives one of them).
  std::map<Shape, std::set<Shape>> reshapes;
  /// The same, by the reshaped value's term: the shapes the reference reshapes that
  /// value itself to, tried first (at small sizes the tokens of a batch and a model
  /// dimension are often one number: [8, 8] -> [2, 4, 8] and a weight's [8, 8] ->
  /// [1, 8, 8] must not be confused).
  std::map<TermId, std::set<Shape>> reshapesOf;
  /// Broadcasts: source shape -> result shapes. A plan's broadcast whose copies are
  /// fewer on each rank (query heads split, one KV head copied to each rank's heads)
  /// takes its copied dimensions as split over unused axes so that its global shape is
  /// one the reference broadcasts to: a copy's block is a copy.
  std::map<Shape, std::set<Shape>> broadcasts;
  /// Transposes: permutation -> input shapes. A plan's transpose of a value whose global
  /// shape is a choice (XLA's merged [1, B S, H] for the reference's [B, S, H]) is
  /// described under the shape the reference transposes so (placedAs).
  std::map<std::vector<int64_t>, std::set<Shape>> transposes;
  /// Every term the reference computes (an elementwise op's operands under different
  /// global shapes are placed as the one whose result is among them: refOpRule).
  std::set<TermId> terms;
  /// Records reference op `op` (operands `in`, result `out`).
  void note(mlir::Operation &op, const std::vector<const State *> &in, const State &out);
};

/// The mesh and the term pool the rules work in.
struct RuleContext {
  const Mesh &mesh;
  TermPool &terms;
  /// A layout's text for messages: "[tp, _] partial(dp)".
  std::string show(const State &s) const;
  /// `axes` (names) without the axes of size 1, as mesh indices; false for an axis the
  /// mesh lacks.
  bool axesOf(mlir::ArrayAttr names, std::vector<int> &out) const;
  int64_t size(const std::vector<int> &axes) const;
  /// The shapes the reference's reshapes, broadcasts and transposes take, which steer
  /// the plan's choices of global shapes (ReferenceShapes).
  ReferenceShapes shapes;
  /// The plan's pipeline axis (-1: none): no state is split over it.
  int pipelineAxis = -1;
  /// The proof trace (VerifyResult::proof): the rules that derived the state of the op
  /// being visited, each named once by the rule that applied (fire). The driver clears
  /// it before each op and keeps it with the op's state.
  std::vector<std::string> fired;
  /// Of those, the identities of the terms' normal form (TermPool::applied): the
  /// reference run keeps them for the proofs of the outputs they wrote.
  std::vector<std::string> identities;
  void fireApplied() {
    for (std::string &identity : terms.takeApplied()) {
      if (std::find(identities.begin(), identities.end(), identity) == identities.end())
        identities.push_back(identity);
      fire(std::move(identity));
    }
  }
  void fire(std::string rule) {
    if (std::find(fired.begin(), fired.end(), rule) == fired.end())
      fired.push_back(std::move(rule));
  }
};

// Shared by the rule files.
std::string axesText(const Mesh &mesh, const std::vector<int> &axes);
bool intersects(const std::vector<int> &a, const std::vector<int> &b);
std::vector<int> sortedUnion(std::vector<int> a, const std::vector<int> &b);
std::string opName(mlir::Operation &op);
/// The shape of `op`'s one tensor result; false when it has no such result.
bool resultShape(mlir::Operation &op, Shape &local);
/// Whether `local` is the block of `s.global` under `s.split` (each dimension's global
/// size is its local size times the number of its blocks), and no axis is used twice.
bool consistent(RuleContext &c, const State &s, const Shape &local, std::string &why);
/// The head of terms of op `name` with inherent attributes `attrs` (dialect
/// attributes, whose names hold a '.', say where or how the op runs, not what it
/// computes, and are left out) and the result's global shape `global`.
std::string headFrom(llvm::StringRef name, mlir::DictionaryAttr attrs, const Shape &global);
/// ref.slice of a split operand (Slices.cpp); sliceState: the piece [off, off + size) of
/// each rank's block (local shape inLocal) of `in`, whose local shape is `local`, at `op`.
State sliceRule(RuleContext &c, mlir::Operation &op, const State &in);
State sliceState(RuleContext &c, mlir::Operation &op, const State &in,
                 llvm::ArrayRef<int64_t> off, llvm::ArrayRef<int64_t> size,
                 llvm::ArrayRef<int64_t> inLocal, const Shape &local);
/// The term of the reference's `ref.slice` of `term` (global shape `whole`) at
/// `offsets` with `sizes`; `term` itself when the slice is the whole value (Slices.cpp).
/// Exact identities keep one term per value: a slice of a slice is one slice, a
/// slice of a concatenation's rows inside one operand is that operand's slice (of a
/// run of operands, their concatenation).
TermId sliceTerm(TermPool &terms, mlir::MLIRContext *ctx, TermId term, const Shape &whole,
                 const std::vector<int64_t> &offsets, const std::vector<int64_t> &sizes);
/// The head of the concatenation along `dim` with result shape `shape` (the reference's
/// ref.concat's, Slices.cpp).
std::string concatHead(mlir::MLIRContext *ctx, int64_t dim, const Shape &shape);
/// TermPool::concat, with adjacent slices of one term along the dimension joined into
/// one slice (the term itself where they cover it).
TermId joinedConcat(TermPool &terms, mlir::MLIRContext *ctx, const std::string &head,
                    const std::vector<TermId> &operands);
/// t = ref.slice(input) at offsets with sizes: true, with them.
bool sliceParts(const TermPool &terms, TermId t, TermId &input, std::vector<int64_t> &offsets,
                std::vector<int64_t> &sizes);
/// t = ref.concat along `dim`: true, with it.
bool concatDim(const TermPool &terms, TermId t, int64_t &dim);

// Views (Views.cpp): one value written through other layout ops.
/// A reshape of x to `out` that only inserts or drops dimensions of size 1 (dropping
/// only copied ones) is a broadcast of x's source (x itself where x is no broadcast):
/// true, with the source and the result dimensions of its dimensions.
bool unitReshape(const State &x, const Shape &out, TermId &source, std::vector<int64_t> &dims);
/// The source's slice that slice `s` of broadcast x (whole on every rank) copies.
TermId slicedSource(TermPool &terms, mlir::Operation &slice, const State &x);
/// Whether `op` is a slice of a broadcast whole on every rank.
bool sliceOfBroadcast(mlir::Operation &op, const std::vector<const State *> &in);
/// A concatenation of broadcasts with one layout and the same source dimensions: true,
/// with the source its result copies.
bool concatOfBroadcasts(TermPool &terms, mlir::Operation &op, const Shape &global,
                        const std::vector<const State *> &in, TermId &source);
/// The term of t reshaped to `shape` (reshapes compose).
TermId reshapeTerm(TermPool &terms, mlir::Operation &op, TermId t, const Shape &shape);
/// f(reshape(x)) as reshape(f(x)) for an elementwise function f (Views.cpp). False
/// where `op` and its operand `x` are not of that form.
bool functionOfReshape(TermPool &terms, mlir::Operation &op, const State &x, const Shape &global,
                       TermId &out);

// Reshapes (Reshapes.cpp): functions of reshaped values as reshapes of functions.
/// A run of dimensions of one shape (`a`) and the run of another (`b`) that a
/// row-major reshape between them maps onto each other (dimensions of size 1 in none).
struct ReshapeGroup {
  std::vector<int64_t> a, b;
};
/// The groups of a reshape between shapes a and b, in order; false if their sizes differ.
bool reshapeGroups(const Shape &a, const Shape &b, std::vector<ReshapeGroup> &groups);
/// The dimensions a reshape from `in` to `out` groups, sizes of 1 included: [i0, i1)
/// of the input with [j0, j1) of the output (Windows.cpp); false if their sizes differ.
struct DimGroup {
  size_t i0, i1, j0, j1;
};
bool dimGroups(const Shape &in, const Shape &out, std::vector<DimGroup> &groups);
/// Term b, of shape s, reshaped to t without a reshape at its head (the operand of a
/// reshape from t, or a broadcast copying whole groups): true, with it.
bool reshapedOperand(TermPool &terms, mlir::Operation &op, TermId b, const Shape &s,
                     const Shape &t, TermId &out);
/// Elementwise `op` of operands that are reshapes of values of shape `inner` (or
/// reshaped to it by reshapedOperand): true, with their states in that shape.
bool elementwiseOfReshapes(TermPool &terms, mlir::Operation &op, const Shape &global,
                           const std::vector<const State *> &in, Shape &inner,
                           std::vector<State> &lifted);
/// The same for a row-wise op (RowWise: softmax, norms) whose first operand is a
/// reshape keeping the last dimension: its rows are the operand's rows, renamed.
bool rowWiseOfReshapes(TermPool &terms, mlir::Operation &op, const Shape &global,
                       const std::vector<const State *> &in, Shape &inner,
                       std::vector<State> &lifted);
/// batch_matmul of an operand with one batch entry on every rank, its batch adjacent to
/// its contracted dimension, by one with a batch of one contracting those entries'
/// rows: true, with the operands' states, the former merged to [1, B R, N].
bool batchIntoRows(RuleContext &c, mlir::Operation &op, const std::vector<const State *> &in,
                   std::vector<State> &out);
/// A broadcast with copies described under global shape `target` with the same blocks
/// (its source re-described by placedAs): true, with that state (Reshapes.cpp).
bool broadcastPlacedAs(RuleContext &c, mlir::Operation &op, const State &x,
                       const Shape &target, State &out);
/// u a reshape whose groups `dims` reduce whole (every dimension of more than one
/// element of a group, or none): true, with the operand's dimensions of those groups
/// (`inner`, sorted) and the operand's shape without them (`kept`).
bool reducedThroughReshape(const TermPool &terms, TermId u, const std::vector<int64_t> &dims,
                           std::vector<int64_t> &inner, Shape &kept);
/// The term of the sum of u over `dims` (result shape `global`): sums of sums merged,
/// sums of reshapes over whole groups written as reshapes of sums.
TermId sumTerm(TermPool &terms, mlir::Operation &op, TermId u, const std::vector<int64_t> &dims,
               const Shape &global);
/// The sum over `dims` (with the class dim 1) of u = one_hot(ids) x y, the one-hot of
/// ids in [0, bound) over at least `bound` classes, y with summands constant along the
/// classes: the sum of the one-hot times y's other summands, plus each constant one's
/// row value (each row of the one-hot sums to 1; Picks.cpp). True, with that term and
/// its factor; false where u is no such product.
bool pickedRows(TermPool &terms, mlir::Operation &op, TermId u, const std::vector<int64_t> &dims,
                const Shape &global, TermId &out, Rational &factor);
/// t's operands with their scales taken out: (operand, its factor), in order.
std::vector<std::pair<TermId, Rational>> weightedOperands(const TermPool &terms, TermId t);
/// The term and factor of the sum of u over `dims`: pickedRows; the sum of all
/// elements of a sum or broadcast written through its summands' or source's; sumTerm.
std::pair<TermId, Rational> sumOf(TermPool &terms, mlir::Operation &op, TermId u,
                                  const std::vector<int64_t> &dims, const Shape &global);
/// The same for a maximum (reduce_max): maxima of maxima merged, maxima of reshapes over
/// whole groups written as reshapes of maxima.
TermId maxTerm(TermPool &terms, mlir::Operation &op, TermId u, const std::vector<int64_t> &dims,
               const Shape &global);
/// A term and the exact factor it is held with (combine's result, Rules.cpp).
struct Combined {
  TermId term;
  Rational factor;
};
/// Terms of layout ops written in another order, and reductions, in one form
/// (NormalForm.cpp): true, with `out`, where one applies to `op` of operands `in`.
bool layoutNormalForm(TermPool &terms, mlir::Operation &op, const Shape &global,
                      const std::vector<const State *> &in, Combined &out);
/// Whether `op` is a transpose that only moves dimensions of size 1 of a value of
/// shape `in` (a reshape).
bool unitTranspose(mlir::Operation &op, const Shape &in);
/// A reshape to `global` of x, a concatenation along a dimension after only dimensions
/// of size 1: true, with its term.
bool reshapeOfConcat(TermPool &terms, mlir::Operation &op, const Shape &global, const State &x,
                     TermId &out);

/// batch_matmul of an lhs [B, M, K] (contracting its dimension 2) by an rhs with one
/// batch entry on every rank: each lhs batch entry times that one matrix.
bool batchOfOne(const State &lhs, const State &rhs, int64_t lhsDim);
/// Its term: the product of the lhs's rows, all batch entries merged into one (row-major:
/// a reshape to [1, B M, K]), by the rhs, reshaped back to [B, M, N] -- the term the
/// reference writes when it merges the batch into the rows itself.
bool batchOfOneProduct(TermPool &terms, mlir::Operation &op, const Shape &global,
                       const State &lhs, const State &rhs, TermId &out);

/// A literal whose elements are the same along some dimensions (those of size 1
/// among them) is the broadcast of its elements at index 0 of those: true, with that
/// literal and its dimensions -- or, where every element is one value, isUniform and
/// that value (a constant).
bool literalView(TermPool &terms, mlir::Operation &op, TermId &source, std::vector<int64_t> &dims,
                 double &uniform, bool &isUniform);

/// A slice of one piece of a stacked gather over the minor axes of a dimension split
/// over more (Collectives.cpp): the gathered value's rows as a window.
State stackSlice(RuleContext &c, mlir::Operation &op, const State &in);

// Windows (Windows.cpp): rows chosen per rank.
/// The windows of the plain blocks of a dimension of `global` rows split over `axes`
/// (one window; none where the axes do not divide it).
std::vector<Window> plainWindows(const Mesh &mesh, const std::vector<int> &axes, int64_t global);
/// The windows of a zigzag split over `axes` (Layout.h's blockToWhole: the last axis's
/// rank p of n holds chunks p and 2n-1-p of the others' block); none where the blocks do
/// not divide into 2n chunks.
std::vector<Window> zigzagWindows(const Mesh &mesh, const std::vector<int> &axes, int64_t global);
/// Dimension d of declared layout `l` for a value of `global` rows (zigzag as windows);
/// false, with why, for a layout the engine does not model.
bool layoutDim(const Mesh &mesh, const Layout &l, size_t d, int64_t global, DimSplit &out,
               std::string &why);
/// d in normal form: adjacent runs merged, its axes those its windows name, and no
/// windows where they are the plain blocks of its axes.
void normalizeWindows(const Mesh &mesh, DimSplit &d, int64_t global);
/// Dimensions of `s` held in one window that is the plain blocks of a run of the rows,
/// described instead as the blocks of the term's slice there; whether any was
/// (Windows.cpp: the fallback of rules that take no such windows).
bool runsAsSlices(RuleContext &c, mlir::Operation &op, State &s);
/// The first row any rank's window `w` starts at and the row past the last one any
/// ends at; false on overflow.
bool windowReach(const Mesh &mesh, const Window &w, int64_t &lo, int64_t &hi);
/// Whether d's windows fit a dimension of `global` rows on every rank and hold `local` rows.
bool windowsFit(const Mesh &mesh, const DimSplit &d, int64_t global, int64_t local,
                std::string &why);
std::string windowsText(const Mesh &mesh, const DimSplit &d, int64_t global);
/// The runs of `windows` (one rank's rows, in order) that fall in its local rows
/// [lo, hi), each window cut to them.
std::vector<Window> cutWindows(const std::vector<Window> &windows, int64_t lo, int64_t hi);

// Stacked pieces (Stacks.cpp): a value's chunks concatenated along a split dimension.
/// Dimension d laid out in windows, split further over `axes` (reduce_scatter,
/// shard_slice): the rank at position t of the group keeps part t of its rows. Where
/// part t is part 0 moved by t x delta rows, d's windows become part 0's, moving by
/// delta per step of the group's position; false, with why, otherwise.
bool scatterWindows(const Mesh &mesh, DimSplit &d, int64_t global, const std::vector<int> &axes,
                    std::string &why);
/// After a split of windowed dimension e over `axes`: where the term is the
/// concatenation along e of a term y's n blocks of another (whole) dimension d in
/// order, and each window moves by one piece per step of the group's position and
/// stays within a piece, the rank holds rows of y's block of d at its position: the
/// state of y split along d over `axes`, e laid out in the windows less that motion.
bool unstackWindows(RuleContext &c, State &s, int64_t e, const std::vector<int> &axes);
/// Whether t is the concatenation along e of a term y's n blocks of another dimension d,
/// in order, each whole elsewhere: true, with y, d and y's shape.
bool blocksStacked(const TermPool &terms, TermId t, int64_t e, int64_t n, TermId &y,
                   int64_t &d, Shape &whole);
/// Where every rank's windows of d lie within one piece of the term's concatenation
/// along d, the state of that piece (the windows moved by its offset).
void narrowToPiece(RuleContext &c, State &s, int64_t d);
/// The windows of n pieces of `rows` rows each split over `axes` in plain blocks: each
/// piece's block, one after the other (none where the axes do not divide the rows).
std::vector<Window> stackedWindows(const Mesh &mesh, const std::vector<int> &axes,
                                   int64_t rows, int64_t n);
/// The rules for ops whose operands are laid out in windows (and causal_softmax with
/// an offset); `generic` is the rule every other op gets, which the window rules call
/// where the windows pass through unchanged.
State windowRule(RuleContext &c, mlir::Operation &op, const std::vector<const State *> &in,
                 const std::function<State(const std::vector<const State *> &)> &generic);

// Shared by Windows.cpp and Offsets.cpp (internal to lib/LayoutEngine).
bool hasZero(const DimSplit &d);
bool hasZero(const State &s);
/// The windows of d: its own, the plain blocks of its axes, or the whole dimension.
std::vector<Window> windowsOf(const Mesh &mesh, const DimSplit &d, int64_t global);
/// Whether the ranks of d's axes hold each row of [0, global) exactly once.
bool tiles(const Mesh &mesh, const DimSplit &d, int64_t global);
/// The constant an index value holds on every rank apart from its rank part.
bool indexConstant(const TermPool &terms, const State &s, int64_t &v);
/// `from` as a new result (not a broadcast).
State freshResult(const State &from);
/// The rules for ops that take a rank-dependent offset (Offsets.cpp).
State causalOffsetRule(RuleContext &c, mlir::Operation &op, const std::vector<const State *> &in);
State positionMaskRule(RuleContext &c, mlir::Operation &op, const std::vector<const State *> &in);
State embeddingRule(RuleContext &c, mlir::Operation &op, const std::vector<const State *> &in);
State embeddingGradRule(RuleContext &c, mlir::Operation &op, const std::vector<const State *> &in);
State oneHotRule(RuleContext &c, mlir::Operation &op, const std::vector<const State *> &in);
/// The reference's one_hot with a constant first class, as a slice of a whole one-hot
/// (the plan's form); false for other ops (Offsets.cpp).
bool referenceOneHot(RuleContext &c, mlir::Operation &op, const std::vector<const State *> &in,
                     State &out);

/// all_reduce, reduce_scatter, all_gather, all_to_all, shard_slice (Collectives.cpp).
State collectiveRule(RuleContext &c, mlir::Operation &op, const std::vector<const State *> &in);

/// Terms compared by the row pieces that the slices of inputs cut (Pieces.cpp): both
/// rewritten by distributing ops over concatenations, with exact identities only. One
/// per run: terms added first (their slices give the cuts), then compared; the
/// rewriting is shared by every comparison and bounded (nodes, deadline).
class PieceComparison {
public:
  PieceComparison(TermPool &terms, mlir::MLIRContext *ctx, const Deadline &deadline);
  ~PieceComparison();
  void add(TermId t);
  /// Whether fa x a = fb x b after the rewriting; false when not shown equal or past
  /// the budget.
  bool equal(TermId a, const Rational &fa, TermId b, const Rational &fb);
  /// Whether fa x a, cut to its first n elements along `dim`, equals fb x b (a padded
  /// buffer against the value it holds: what follows is padding); dim < 0: equal().
  bool equalPrefix(TermId a, const Rational &fa, TermId b, const Rational &fb, int dim,
                   int64_t n);
  /// Where a and b are one term after the rewriting but fa x a = r x fb x b with
  /// r != 1: why the output is not verified (it holds r times the reference's value);
  /// empty otherwise.
  std::string scaling(TermId a, const Rational &fa, TermId b, const Rational &fb);
  /// The distributions over pieces the last equal() or equalPrefix() applied (for the
  /// proof trace).
  std::vector<std::string> lastRules;

private:
  class Normalizer;
  std::unique_ptr<Normalizer> n;
  bool settled = false;
};

/// What the layout engine does not model yet (the spec is then inconclusive), or empty.
std::string layoutUncovered(const Spec &spec);
/// An index value's state (arith constants, +, -, * of index values every rank holds
/// alike): a scalar term.
State indexRule(RuleContext &c, mlir::Operation &op, const std::vector<const State *> &in);

/// What a split rule produces: the result's split and global shape, the axes whose
/// blocks the op sums over (contractions, reductions: the result is a partial sum over
/// them) and a factor (means over split dimensions).
struct SplitResult {
  std::vector<DimSplit> split;
  Shape global;
  std::vector<int> contracted;
  std::vector<int> maxOver; // a reduce_max's split reduced dimensions: a partial max
  Rational factor = Rational(1);
  std::string why; // non-empty: no rule
};

/// The split rule of ref op `op` (Splits.cpp): the result's split, global shape,
/// contracted axes and factor from its operands' states, `local` its result's shape.
SplitResult splitRule(RuleContext &c, mlir::Operation &op, const std::vector<const State *> &in,
                      const Shape &local);

/// A plan op's rule input, exactly: the mesh (`mesh`), the op's name, attributes and
/// types (by identity) and its operands' states; none when an operand's state is
/// unknown (MemoKey.cpp). LayoutCache keeps result states under it.
std::optional<StatesKey> memoKey(const std::string &mesh, mlir::Operation &op,
                                 const std::vector<const State *> &in);

/// `op`'s rule on partial maxima over A, where it commutes with them (Maxima.cpp).
bool throughMaxima(RuleContext &c, mlir::Operation &op, const std::vector<const State *> &in,
                   State &out);

/// The split of each rank's reshape of its block of x (local shape inLocal) to
/// outLocal: a ref.reshape's rule (Splits.cpp).
SplitResult reshapeSplitOf(RuleContext &c, const State &x, const Shape &inLocal,
                           const Shape &outLocal);
/// Each rank's block shape of x (global over blocks per dimension); false where a
/// split does not divide (padded or windowed layouts).
bool localShape(RuleContext &c, const State &x, Shape &local);
/// x described under global shape `target` with the same blocks on every rank (a
/// reshape whose local shape is unchanged, or is `targetLocal`, a reshape of it: the
/// reshape rule's split for that global shape; Splits.cpp). False where no split of
/// `target` gives the ranks x's blocks.
bool placedAs(RuleContext &c, mlir::Operation &op, const State &x, const Shape &target,
              State &out, const Shape *targetLocal = nullptr);
/// A concatenation of the consecutive unit slices of one value along another
/// dimension, each of local size 1 along the concatenated one, split there (a
/// row-parallel output's positions stacked along a batch that FSDP splits): each rank's
/// reshape of its block of the value (Views.cpp). False where that does not apply.
bool concatOfUnitSlices(RuleContext &c, mlir::Operation &op, const std::vector<const State *> &in,
                        State &out);
/// `out` (op's result state by its rule) with the summands of a partial sum of a
/// one-hot's row sums where op keeps them known on every rank, and without any
/// operand's otherwise (RowSums.cpp).
void annotateRowSums(RuleContext &c, mlir::Operation &op, const std::vector<const State *> &in,
                     State &out);
/// A product of a one-hot's blocks and a function of their own row sums (RowSums.cpp):
/// true, with the one-hot times that function at 1.
bool oneHotTimesRowSums(RuleContext &c, mlir::Operation &op, const std::vector<const State *> &in,
                        State &out);

/// Whether t is an index constant's leaf, and its value (Index.cpp).
bool constantLeaf(const TermPool &terms, TermId t, int64_t &v);
/// dropout_mask with a rank-dependent counter (Index.cpp).
State dropoutRule(RuleContext &c, mlir::Operation &op, const std::vector<const State *> &in);

/// The state of reference op `op`'s result from its operands' states (all unsplit,
/// never partial): the term of the op applied to theirs.
State referenceRule(RuleContext &c, mlir::Operation &op, const std::vector<const State *> &in);
/// `op` = ref.mul of a value by itself, where that value is made of square roots of
/// values nonnegative on every rank, moved, scaled or divided by constants (a norm of
/// norms): the state of those values moved alike (sqrt(x)^2 = x for x >= 0), from
/// `stateOf` (a value's state) and `rule` (the reference's or the plan's rules).
/// False where `op` is no such square (Squares.cpp).
bool squareOfRoots(mlir::Operation &op, const std::function<State(mlir::Value)> &stateOf,
                   const std::function<State(mlir::Operation &, const std::vector<const State *> &)> &rule,
                   State &out);
/// Whether `op` may have a state that reads the definitions of its operands, not only
/// their states (a square by squareOfRoots, a magnitude by definitionRule): such an op's
/// state is never memoized and is derived again on every run.
bool readsDefinitions(mlir::Operation &op);
/// squareOfRoots, or for `op` = ref.maximum(x, ref.scale(x, c <= 0)) -- |x| -- of a value
/// x nonnegative on every rank and each rank's maximum of its block over some axes:
/// the maximum's state with x's maxima (each rank's |x_r| is x_r, and their maximum X
/// is >= 0, so X = |X|). False where neither applies (Squares.cpp).
bool definitionRule(mlir::Operation &op, const std::function<State(mlir::Value)> &stateOf,
                    const std::function<State(mlir::Operation &, const std::vector<const State *> &)> &rule,
                    State &out);

/// The state of plan op `op`'s result from its operands' states: a ref op or a
/// collective. Unknown, with the side condition that fails, where no rule applies.
State planRule(RuleContext &c, mlir::Operation &op, const std::vector<const State *> &in);

/// A term the reference computes: the factors it computes it with, and for each the
/// first reference value holding it (its op's position in the reference's body, or
/// -1 - n for argument n; positions, not Values, since a cached reference outlives its
/// module).
struct ReferenceValue {
  std::vector<std::pair<Rational, int>> uses;
  void add(const Rational &f, int index) {
    for (const auto &u : uses)
      if (u.first == f)
        return;
    uses.push_back({f, index});
  }
};
using ReferenceTerms = std::unordered_map<TermId, ReferenceValue>;

/// Where a plan departs from its reference on an output's way (Departure.cpp): back
/// from the output through values the reference does not compute (another term, or
/// the reference's term times another factor), to the op whose result departs while
/// none of its inputs does. A diagnostic for outputs not shown equal.
class DepartureFinder {
public:
  DepartureFinder(const Spec &spec, TermPool &terms,
                  const llvm::DenseMap<mlir::Value, State> &planStates,
                  const ReferenceTerms &ref);
  struct Found {
    mlir::Operation *op = nullptr;
    std::string why;
  };
  /// The departure on `v`'s way (op null: none found).
  Found of(mlir::Value v);

private:
  bool accounted(const State &s) const;
  Rational ratio(const State &s) const;
  /// Whether v's state is known and is not a value the reference computes.
  bool departed(mlir::Value v) const;
  /// The first input of `op` that departed (null: none).
  mlir::Value departedInput(mlir::Operation *op) const;
  std::string why(mlir::Operation *op) const;
  std::string referenceName(int index) const;
  /// Crossed.cpp: where `op` pairs values the reference computes but never pairs.
  Found crossed(mlir::Operation *op) const;
  /// Where `op` adds a complete value on every rank to a partial sum (none: op null).
  Found countedPerRank(mlir::Operation *op) const;
  void indexReference() const;
  mlir::Value heldReference(mlir::Value v) const;
  mlir::Value planHolder(mlir::Value want) const;
  mutable bool indexed = false, reshapedIndexed = false;
  /// Terms a reference reshape reads (accounted: the reference's value in its shape).
  mutable std::unordered_set<TermId> reshapedRef;
  mutable std::map<std::pair<TermId, std::string>, mlir::Value> referenceOf; // by state
  mutable llvm::DenseMap<mlir::Value, mlir::Value> heldBy; // reference value -> plan value
  /// How many plan values hold the reference's value times `r` (counted once).
  size_t frequency(const Rational &r) const;
  mutable std::unordered_map<std::string, size_t> ratioCounts;
  mutable std::vector<mlir::Operation *> referenceOps; // by position, for names
  const Spec &spec;
  TermPool &terms;
  const llvm::DenseMap<mlir::Value, State> &planStates;
  const ReferenceTerms &ref;
  llvm::DenseMap<mlir::Value, mlir::Operation *> memo;
};

} // namespace planproof::layouts

#endif
