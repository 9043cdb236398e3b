//===- Relations.h - how a plan value relates to reference values -*- C++ -*-===//
//
// Gathering a plan value through a layout (the obligation side), and the inverse
// question the diagnostics ask: given the per-rank values of some plan intermediate,
// which reference value is it, under which layout, and up to which constant factor?
// A relation with factor 1 means "this intermediate is correct"; the first plan op
// whose operands are all correct but whose result is not is where the plan breaks.
//
//===----------------------------------------------------------------------===//
#ifndef PLANPROOF_ENGINE_RELATIONS_H
#define PLANPROOF_ENGINE_RELATIONS_H

#include "Engine/SymbolicExec.h"
#include "Semantics/Layout.h"

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace planproof {

/// The global value of element `l` of rank `rank`'s block: the element itself, or
/// for partial layouts the reduction over the rank's partial group. Returns false for
/// layouts that mix max with sum/avg (not supported).
bool gatherElement(ExprPool &pool, const Mesh &mesh, const Layout &layout,
                   const std::vector<SymTensor> &perRank, int64_t rank, int64_t l,
                   PolyId &out);

/// Whether `rank` is the first rank of its partial group (the one that stands for the
/// group in obligations).
bool isGroupLeader(const Mesh &mesh, const Layout &layout, int64_t rank);

struct RefValue {
  std::string name;
  const SymTensor *tensor;
  /// The reference states a role for it (ref.role): searched first, so that a plan
  /// value equal to several reference values reads as the one with a stated meaning
  /// (a loss's normalizer rather than an equal count nll_loss also returns).
  bool preferred = false;
};

struct Relation {
  int ref = -1;       // index into the finder's reference values; -1: none found
  Layout layout;
  Rational scale{1};  // plan value == scale * reference value
  /// Non-empty for a *sub-block*: the plan value is the part at `offset` of the rank's
  /// block (shape `block`) of the reference value -- one microbatch of the block.
  Shape block;
  std::vector<int64_t> offset;
  /// Found by the verifier's search of transposed reference values: `ref` indexes that
  /// list, not the finder's (Verifier.cpp, exactRelationOf).
  bool transposed = false;
  /// Found with both values read flat, row-major (Unreduced.cpp, flatRelation): `ref`
  /// indexes the reference's values all the same.
  bool flat = false;
  bool related() const { return ref >= 0; }
  bool exact() const { return ref >= 0 && scale.isOne(); }
};

class RelationFinder {
public:
  RelationFinder(ExprPool &pool, const Mesh &mesh, std::vector<RefValue> refs)
      : pool(pool), mesh(mesh), refs(std::move(refs)) {}

  /// An exact relation when one exists, else a scaled one, else none. Layouts that
  /// are partial over any of `notPartial` are not considered (the result of a reducing
  /// collective is complete over its axes by contract, even where the numbers would
  /// also read as partial).
  /// With `only`, the reference values searched are those (sorted indices).
  Relation find(const std::vector<SymTensor> &perRank, const std::vector<int> &notPartial = {},
                const std::vector<int> *only = nullptr);

  /// The reference values that can hold `perRank` exactly (factor 1) under some
  /// layout: those with an element whose numeric fingerprint equals one of the plan
  /// value's element, alone or summed over a group of mesh axes (a partial value).
  /// An index over every reference element makes this independent of the number of
  /// reference values, so localizing along a long chain stays linear.
  /// With `negated`, also those that can hold it times -1.
  std::vector<int> exactCandidates(const std::vector<SymTensor> &perRank, bool negated = false);

  /// Whether `perRank` gathered through `layout` equals `scale * ref`, for one scale.
  bool matches(const std::vector<SymTensor> &perRank, const SymTensor &ref,
               const Layout &layout, Rational &scale, const Shape &block = {},
               const std::vector<int64_t> &offset = {});

  const RefValue &ref(int i) const { return refs[i]; }
  /// Microbatches of an unsplit dimension count as tiles too (pipelined plans, whose
  /// microbatches slice the whole batch on every stage).
  bool replicatedTiles = false;
  /// Also try the zigzag order of each split (plans with load-balanced context
  /// parallelism, whose sequence blocks are chunks p and 2n-1-p).
  bool zigzagCandidates = false;
  /// Also try each split as that many interleaved segments (plans that exchange a
  /// dimension's blocks by all_to_all: each rank then holds its block of every member's
  /// block, the blocks of n segments).
  std::vector<int64_t> segmentCandidates;
  /// Accept a ratio of two values whose canonical forms are not proportional when two
  /// independent numeric evaluations agree on it (matches), whatever the forms: for
  /// counterfactual readings in the localization (Unreduced.cpp), where the plan's
  /// own way to a value (masks of ids, indicator sums) is no canonical form of the
  /// reference's. Diagnostics only, as every relation.
  bool numericRatios = false;
  std::string describe(const Relation &r) const;
  /// Whether every element of `perRank` evaluates to 0 at both fingerprint points.
  bool numericallyZero(const std::vector<SymTensor> &perRank);

private:
  /// Whether every rank of each partial group of `layout` holds the same values.
  bool uniformOverPartial(const std::vector<SymTensor> &perRank, const Layout &layout) const;

  /// A numeric fingerprint of a polynomial: its value at one fixed random assignment of
  /// the inputs in [0.5, 1.5] (memoized). Candidate relations are screened on
  /// fingerprints first and confirmed exactly with `matches` only when they pass.
  double fingerprint(PolyId p);
  /// The same at a second, independent assignment: confirms a relation between values
  /// whose canonical forms cannot be compared (unexpanded products of large sums).
  double fingerprint2(PolyId p);
  bool matchesNumerically(const std::vector<SymTensor> &perRank, const SymTensor &ref,
                          const Layout &layout, const Shape &block,
                          const std::vector<int64_t> &offset);
  /// Layouts whose block is the local shape (`out`), and those whose block is a whole
  /// multiple of it along one dimension (`sub`: microbatches of the block).
  void candidates(const Shape &local, const Shape &global, const std::vector<int> &notPartial,
                  std::vector<Layout> &out, std::vector<std::pair<Layout, Shape>> &sub);

  ExprPool &pool;
  const Mesh &mesh;
  std::vector<RefValue> refs;
  std::vector<double> fpInputs;
  std::unique_ptr<Evaluator> fpEval;
  std::vector<double> fpInputs2;
  std::unique_ptr<Evaluator> fpEval2;
  /// (fingerprint, reference index) of every reference element, sorted.
  std::vector<std::pair<double, int>> fpIndex;
  bool indexed = false;
};

} // namespace planproof

#endif
