//===- Slices.cpp - the layout engine's rule for slices of split values --===//
//
// A microbatch is a slice of each rank's block: the same local window on every rank.
// Where the sliced value is split, the ranks' windows together are the pieces of the
// global value at the same place in each block: the result is split as the operand
// is, and its term is the concatenation of those pieces, each the reference's slice
// with global offsets. The reference writes the same pieces (planproof plan's
// references concatenate each data rank's microbatch) and concatenations are
// flattened (TermPool::concat), so the two meet in one term.
//
//===----------------------------------------------------------------------===//
#include "LayoutEngine/LayoutState.h"

#include "Ref/RefDialect.h"

#include "mlir/IR/BuiltinTypes.h"

using namespace mlir;

namespace planproof::layouts {

TermId sliceTerm(RuleContext &c, MLIRContext *ctx, TermId term, const Shape &whole,
                 const std::vector<int64_t> &offsets, const std::vector<int64_t> &sizes) {
  bool all = sizes == whole;
  for (int64_t o : offsets)
    all &= o == 0;
  if (all)
    return term;
  Builder b(ctx);
  auto attrs = b.getDictionaryAttr({b.getNamedAttr("offsets", b.getDenseI64ArrayAttr(offsets)),
                                    b.getNamedAttr("sizes", b.getDenseI64ArrayAttr(sizes))});
  TermId t = c.terms.node(headFrom("ref.slice", attrs, sizes), {term});
  c.terms.setOp(t, OperationName(ref::SliceOp::getOperationName(), ctx), attrs);
  return t;
}

State sliceRule(RuleContext &c, Operation &op, const State &in) {
  auto slice = cast<ref::SliceOp>(op);
  Shape local;
  if (!resultShape(op, local))
    return State::unknown(&op, "`ref.slice` does not have one tensor result");
  if (!in.partialMax.empty())
    return State::unknown(&op, "the operand is each rank's maximum of its block over " +
                                   axesText(c.mesh, in.partialMax) +
                                   ": it must be completed by all_reduce \"max\" first");
  auto inType = cast<RankedTensorType>(slice.getInput().getType());
  ArrayRef<int64_t> off = slice.getOffsets(), size = slice.getSizes(), inLocal = inType.getShape();
  size_t rank = in.global.size();
  if (in.split.size() != rank || off.size() != rank || size.size() != rank)
    return State::unknown(&op, "the slice's rank does not match its operand's layout");
  // At most one split dimension is cut; the others are taken whole.
  int cut = -1;
  for (size_t d = 0; d < rank; ++d) {
    bool whole = off[d] == 0 && size[d] == inLocal[d];
    if (in.split[d].empty() || whole)
      continue;
    if (cut >= 0)
      return State::unknown(&op, "no layout rule for a slice of two split dimensions");
    cut = (int)d;
  }
  State out = in;
  out.broadcast = false;
  out.sourceDims.clear();
  int64_t pieces = cut < 0 ? 1 : c.size(in.split[cut]);
  for (size_t d = 0; d < rank; ++d)
    out.global[d] = in.split[d].empty() ? size[d] : (int)d == cut ? size[d] * pieces : in.global[d];
  std::string why;
  if (!consistent(c, out, local, why))
    return State::unknown(&op, why);
  // Piece s: what the ranks at block s of the cut dimension hold.
  std::vector<TermId> terms;
  for (int64_t s = 0; s < pieces; ++s) {
    std::vector<int64_t> offsets(rank), sizes(rank);
    for (size_t d = 0; d < rank; ++d) {
      bool split = !in.split[d].empty();
      offsets[d] = !split ? off[d] : (int)d == cut ? s * inLocal[d] + off[d] : 0;
      sizes[d] = !split ? size[d] : (int)d == cut ? size[d] : in.global[d];
    }
    terms.push_back(sliceTerm(c, op.getContext(), in.term, in.global, offsets, sizes));
  }
  if (pieces == 1) {
    out.term = terms[0];
    return out;
  }
  Builder b(op.getContext());
  auto dim = b.getDictionaryAttr({b.getNamedAttr("dim", b.getI64IntegerAttr(cut))});
  out.term = c.terms.concat(headFrom("ref.concat", dim, out.global), terms);
  return out;
}

} // namespace planproof::layouts
