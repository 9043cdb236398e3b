//===- Microbatches.cpp - microbatch tiles in the localization -*- C++ -*-===//
//
// Engine (Engine.h): the localization's reading of values computed microbatch by
// microbatch -- a sum over one tile of a reference value (a microbatch of a rank's
// block) is a legitimate accumulator on its way to the whole, not where a plan goes
// wrong -- and of tiles cut from a value twice, where a microbatch's inputs do not
// line up.
//
//===----------------------------------------------------------------------===//
#include "Engine/Engine.h"

using namespace planproof;

namespace planproof::engine {

bool Engine::isMicrobatchPartial(Value v) {
  // Some microbatches, all with one weight (the same scaling for each, as a loss
  // scaled by 1/M): an accumulator on its way to the whole sum. A sum that already
  // holds every microbatch ("*") plus more over-counts.
  auto terms = microbatchTerms(v);
  if (!terms || terms->count("*"))
    return false;
  return llvm::all_of(*terms, [&](auto &t) { return t.second == terms->begin()->second; });
}

/// The dimension of operand `i` of `def` that a sum over a microbatch's tokens runs
/// along, where the op pairs its operands' tokens: -1 where it does not.
static int64_t summedDim(Operation *def, size_t i) {
  if (isa<ref::EmbeddingGradOp, ref::CrossEntropySumOp>(def))
    return 0;
  if (auto mm = dyn_cast<ref::MatmulOp>(def))
    return i == 0 ? mm.getLhsDim() : mm.getRhsDim();
  return -1;
}

/// Whether operand `i` of `def`, the sub-block `r` of a rank's block, is cut from that
/// block only along dims `def` sums over (a microbatch's tokens); then `cut` is where,
/// (offset, extent) along each of those dims. A block cut along a dim the op keeps --
/// one head of several -- is no microbatch's contribution to a sum, nor are operands
/// cut at different places along the summed dims (two chunks of one fused projection
/// multiplied together pair no microbatch's tokens).
static bool cutAlongSummed(Operation *def, size_t i, Value operand, const Relation &r,
                           std::vector<std::pair<int64_t, int64_t>> &cut) {
  auto shape = cast<RankedTensorType>(operand.getType()).getShape();
  if (shape.size() != r.block.size() || r.offset.size() != shape.size())
    return false;
  std::vector<int64_t> summed;
  if (auto sum = dyn_cast<ref::ReduceSumOp>(def))
    summed.assign(sum.getDims().begin(), sum.getDims().end());
  else if (auto mm = dyn_cast<ref::MatmulOp>(def))
    summed = {(int64_t)(i == 0 ? mm.getLhsDim() : mm.getRhsDim())};
  else if (auto bm = dyn_cast<ref::BatchMatmulOp>(def))
    summed = {(int64_t)(i == 0 ? bm.getLhsDim() : bm.getRhsDim())};
  else if (isa<ref::MseLossOp>(def))
    for (size_t d = 0; d < shape.size(); ++d)
      summed.push_back((int64_t)d);
  else  // embedding_grad, cross_entropy_sum: along the tokens
    summed = {0};
  for (size_t d = 0; d < shape.size(); ++d)
    if (shape[d] != r.block[d] && !llvm::is_contained(summed, (int64_t)d))
      return false;
  cut.clear();
  for (int64_t d : summed)
    if (d >= 0 && d < (int64_t)shape.size())
      cut.push_back({r.offset[d], shape[d]});
  return true;
}

std::optional<std::map<std::string, Rational>> Engine::microbatchTerms(Value v, int depth) {
  Operation *def = v.getDefiningOp();
  if (depth > kMaxWalkDepth)
    return std::nullopt;
  if (!def || !isa<RankedTensorType>(v.getType()) || exactRelationOf(v).exact())
    return std::nullopt;
  if (isa<ref::ReduceSumOp, ref::CrossEntropySumOp, ref::MseLossOp, ref::MatmulOp,
          ref::BatchMatmulOp, ref::EmbeddingGradOp>(def)) {
    // (Operands cut from different microbatches are no microbatch's sum.)
    if (mixesTiles(def))
      return std::nullopt;
    std::string tile;
    std::optional<std::vector<std::pair<int64_t, int64_t>>> tokens;
    for (auto [i, operand] : llvm::enumerate(def->getOperands())) {
      if (!isa<RankedTensorType>(operand.getType()))
        continue;
      Relation r = exactRelationOf(operand);
      if (!r.exact())
        return std::nullopt;
      std::vector<std::pair<int64_t, int64_t>> cut;
      if (!r.block.empty() && (!cutAlongSummed(def, i, operand, r, cut) ||
                               (isa<ref::MatmulOp, ref::BatchMatmulOp>(def) && tokens &&
                                *tokens != cut)))
        return std::nullopt;
      if (!r.block.empty())
        tokens = cut;
      if (!r.block.empty() && tile.empty())
        tile = indexStr(r.offset);
    }
    if (tile.empty())
      return std::nullopt;
    return std::map<std::string, Rational>{{tile, Rational(1)}};
  }
  if (auto s = dyn_cast<ref::ScaleOp>(def)) {
    auto in = microbatchTerms(s.getOperand(), depth + 1);
    if (!in)
      return std::nullopt;
    for (auto &[k, c] : *in)
      c = c * attrRational(s.getFactorAttr());
    return in;
  }
  if (isa<ref::AddOp>(def)) {
    std::map<std::string, Rational> sum;
    bool partial = false;
    for (Value operand : def->getOperands()) {
      auto in = microbatchTerms(operand, depth + 1);
      if (!in) {
        // A complete value (an exact reference value: every microbatch already) is
        // "*"; adding microbatches to it over-counts them.
        if (!exactRelationOf(operand).exact())
          return std::nullopt;
        sum["*"] = Rational(1);
        continue;
      }
      partial = true;
      for (auto &[k, c] : *in)
        sum[k] = sum.count(k) ? sum[k] + c : c;
    }
    if (!partial)
      return std::nullopt;
    return sum;
  }
  return std::nullopt;
}

/// Whether `op` pairs tiles of different microbatches: operands cut from the rank's
/// blocks at different offsets along the dimension it sums over (or, for an
/// elementwise op, anywhere).
bool Engine::mixesTiles(Operation *op) {
  bool elementwise = op->hasTrait<OpTrait::Elementwise>();
  std::optional<int64_t> tokensAt;
  std::optional<std::vector<int64_t>> at;
  // (Tiles of blocks laid out differently -- a rank's plain block and its block of
  // interleaved segments -- are different rows even at one offset.)
  std::optional<Layout> tiled;
  for (auto [i, operand] : llvm::enumerate(op->getOperands())) {
    if (!isa<RankedTensorType>(operand.getType()))
      continue;
    Relation r = exactRelationOf(operand);
    if (!r.exact() || r.block.empty())
      continue;
    if (elementwise) {
      if ((at && *at != r.offset) || (tiled && !(*tiled == r.layout)))
        return true;
      at = r.offset;
      tiled = r.layout;
      continue;
    }
    int64_t d = summedDim(op, i);
    if (d < 0 || d >= (int64_t)r.offset.size())
      continue;
    bool sameRows = !tiled || (tiled->dims.size() > (size_t)d && r.layout.dims.size() > (size_t)d &&
                                tiled->dims[d] == r.layout.dims[d] &&
                                tiled->segmentsOf(d) == r.layout.segmentsOf(d));
    if ((tokensAt && *tokensAt != r.offset[d]) || !sameRows)
      return true;
    tokensAt = r.offset[d];
    tiled = r.layout;
  }
  return false;
}

/// The earlier ref.slice of the same value with the same window as the slice that
/// defines `v`, or null: a microbatch's input cut twice (and another never).
ref::SliceOp Engine::earlierCut(Value v) {
  auto sl = v.getDefiningOp<ref::SliceOp>();
  if (!sl)
    return nullptr;
  for (Operation *user : sl.getInput().getUsers()) {
    auto other = dyn_cast<ref::SliceOp>(user);
    if (other && other != sl && other->getBlock() == sl->getBlock() &&
        other->isBeforeInBlock(sl) && other.getOffsets() == sl.getOffsets() &&
        other.getSizes() == sl.getSizes())
      return other;
  }
  return nullptr;
}

/// Whether `v` is a tile cut again (earlierCut), or a tile computed from one (its
/// one-hot rows, its lookup).
bool Engine::fromRecutTile(Value v, int depth) {
  if (earlierCut(v))
    return true;
  Operation *def = v.getDefiningOp();
  if (!def || depth > kMaxWalkDepth || !isa<ref::RefDialect>(def->getDialect()))
    return false;
  Relation r = exactRelationOf(v);
  if (!r.exact() || r.block.empty())
    return false;
  return llvm::any_of(def->getOperands(), [&](Value o) {
    return isa<RankedTensorType>(o.getType()) && fromRecutTile(o, depth + 1);
  });
}

/// An op that pairs tiles of different microbatches (mixesTiles).
bool Engine::explainMixedTiles(const ExplainSite &site, Violation &viol) {
  if (!mixesTiles(site.op))
    return false;
  std::string tiles;
  for (auto [i, operand] : llvm::enumerate(site.op->getOperands())) {
    Relation r = isa<RankedTensorType>(operand.getType()) ? exactRelationOf(operand) : Relation();
    if (!r.exact() || r.block.empty())
      continue;
    tiles += std::string(tiles.empty() ? "" : ", ") + "operand #" + std::to_string(i) + " `" +
             spec.nameOf(operand) + "` the tile at " + indexStr(r.offset) + " of each rank's block (" +
             r.layout.str(mesh) + ")";
  }
  viol.kind = "sharding";
  viol.message = site.head + "it pairs pieces of different microbatches: " + tiles;
  viol.hint = "give each microbatch's computation the same microbatch of every input";
  return true;
}

} // namespace planproof::engine
