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

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"

#include <algorithm>

using namespace mlir;

namespace planproof::layouts {

bool sliceParts(const TermPool &terms, TermId t, TermId &input, std::vector<int64_t> &offsets,
                std::vector<int64_t> &sizes) {
  DictionaryAttr attrs;
  if (!terms.isOp<ref::SliceOp>(t) || terms.operands(t).size() != 1 ||
      terms.opNameOf(t, attrs) != ref::SliceOp::getOperationName())
    return false;
  auto o = attrs.getAs<DenseI64ArrayAttr>("offsets");
  auto z = attrs.getAs<DenseI64ArrayAttr>("sizes");
  if (!o || !z || o.size() != z.size())
    return false;
  input = terms.operands(t)[0];
  offsets.assign(o.asArrayRef().begin(), o.asArrayRef().end());
  sizes.assign(z.asArrayRef().begin(), z.asArrayRef().end());
  return true;
}

bool concatDim(const TermPool &terms, TermId t, int64_t &dim) {
  const TermPool::HeadData &h = terms.headData(t);
  if (h.concat)
    dim = h.params[0];
  return h.concat;
}

std::string concatHead(MLIRContext *ctx, int64_t dim, const Shape &shape) {
  Builder b(ctx);
  return headFrom("ref.concat",
                  b.getDictionaryAttr({b.getNamedAttr("dim", b.getI64IntegerAttr(dim))}), shape);
}

TermId sliceTerm(TermPool &terms, MLIRContext *ctx, TermId term, const Shape &whole,
                 const std::vector<int64_t> &offsets, const std::vector<int64_t> &sizes) {
  bool all = sizes == whole;
  for (int64_t o : offsets)
    all &= o == 0;
  if (all)
    return term;
  size_t rank = whole.size();
  // A slice of a slice is one slice of the first one's input.
  TermId input;
  std::vector<int64_t> off0, size0;
  if (sliceParts(terms, term, input, off0, size0) && off0.size() == rank &&
      offsets.size() == rank) {
    for (size_t d = 0; d < rank; ++d)
      off0[d] += offsets[d];
    return sliceTerm(terms, ctx, input, terms.shapeOf(input), off0, sizes);
  }
  // A slice along a concatenation's dimension, whole along the others, of rows inside
  // one operand is that operand's slice; of a run of whole operands, their
  // concatenation.
  int64_t cd;
  if (concatDim(terms, term, cd) && cd < (int64_t)rank && offsets.size() == rank) {
    bool wholeElsewhere = true;
    for (size_t d = 0; d < rank; ++d)
      wholeElsewhere &= (int64_t)d == cd || (offsets[d] == 0 && sizes[d] == whole[d]);
    auto ops = terms.operands(term);
    int64_t from = offsets[cd], to = offsets[cd] + sizes[cd], start = 0;
    for (size_t i = 0; wholeElsewhere && i < ops.size(); ++i) {
      Shape part = terms.shapeOf(ops[i]);
      if (part.size() != rank)
        break;
      int64_t end = start + part[cd];
      if (from >= start && to <= end) {
        std::vector<int64_t> shifted = offsets;
        shifted[cd] -= start;
        return sliceTerm(terms, ctx, ops[i], part, shifted, sizes);
      }
      if (from == start) {
        int64_t e = start;
        for (size_t j = i; j < ops.size(); ++j) {
          Shape pj = terms.shapeOf(ops[j]);
          if (pj.size() != rank)
            break;
          e += pj[cd];
          if (e == to)
            return terms.concat(concatHead(ctx, cd, sizes),
                                std::vector<TermId>(ops.begin() + i, ops.begin() + j + 1));
          if (e > to)
            break;
        }
      }
      start = end;
    }
  }
  Builder b(ctx);
  auto attrs = b.getDictionaryAttr({b.getNamedAttr("offsets", b.getDenseI64ArrayAttr(offsets)),
                                    b.getNamedAttr("sizes", b.getDenseI64ArrayAttr(sizes))});
  TermId t = terms.node(headFrom("ref.slice", attrs, sizes), {term});
  terms.setOp(t, OperationName(ref::SliceOp::getOperationName(), ctx), attrs);
  return t;
}

TermId joinedConcat(TermPool &terms, MLIRContext *ctx, const std::string &head,
                    const std::vector<TermId> &operands) {
  if (operands.size() == 1)
    return operands[0];
  TermId t = terms.concat(head, operands);
  int64_t cd;
  if (!concatDim(terms, t, cd))
    return t;
  std::vector<TermId> ops(terms.operands(t).begin(), terms.operands(t).end()), out;
  bool joined = false;
  for (TermId u : ops) {
    TermId a, b;
    std::vector<int64_t> ao, as, bo, bs;
    if (!out.empty() && sliceParts(terms, out.back(), a, ao, as) &&
        sliceParts(terms, u, b, bo, bs) && a == b && cd < (int64_t)ao.size() &&
        ao.size() == bo.size()) {
      bool adjacent = ao[cd] + as[cd] == bo[cd];
      for (size_t d = 0; d < ao.size(); ++d)
        adjacent &= (int64_t)d == cd || (ao[d] == bo[d] && as[d] == bs[d]);
      if (adjacent) {
        as[cd] += bs[cd];
        out.back() = sliceTerm(terms, ctx, a, terms.shapeOf(a), ao, as);
        joined = true;
        continue;
      }
    }
    out.push_back(u);
  }
  if (!joined)
    return t;
  if (out.size() == 1)
    return out[0];
  return terms.concat(head, out);
}

State sliceRule(RuleContext &c, Operation &op, const State &in) {
  auto slice = cast<ref::SliceOp>(op);
  Shape local;
  if (!resultShape(op, local))
    return State::unknown(&op, "`ref.slice` does not have one tensor result");
  auto inType = cast<RankedTensorType>(slice.getInput().getType());
  return sliceState(c, op, in, slice.getOffsets(), slice.getSizes(), inType.getShape(), local);
}

State sliceState(RuleContext &c, Operation &op, const State &in, ArrayRef<int64_t> off,
                 ArrayRef<int64_t> size, ArrayRef<int64_t> inLocal, const Shape &local) {
  if (!in.partialMax.empty())
    return State::unknown(&op, "the operand is each rank's maximum of its block over " +
                                   axesText(c.mesh, in.partialMax) +
                                   ": it must be completed by all_reduce \"max\" first");
  size_t rank = in.global.size();
  if (in.split.size() != rank || off.size() != rank || size.size() != rank ||
      inLocal.size() != rank)
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
  // A broadcast cut (if at all) along a copied dimension: every piece is copies of one
  // slice of the source -- taken whole along its split dimensions -- and so is the
  // result (the slice of the broadcast is the broadcast of the source's slice).
  bool copiedCut = cut < 0 || std::find(in.sourceDims.begin(), in.sourceDims.end(),
                                        (int64_t)cut) == in.sourceDims.end();
  if (in.broadcast && copiedCut && in.copies()) {
    std::vector<int64_t> whole, offsets, sizes;
    for (int64_t d : in.sourceDims) {
      bool split = !in.split[d].empty();
      whole.push_back(in.global[d]);
      offsets.push_back(split ? 0 : off[d]);
      sizes.push_back(split ? in.global[d] : size[d]);
    }
    out.broadcast = true;
    out.sourceDims = in.sourceDims;
    out.source = sliceTerm(c.terms, op.getContext(), in.source, whole, offsets, sizes);
    out.term = c.terms.broadcast(out.global, out.sourceDims, out.source);
    return out;
  }
  // Piece s: what the ranks at block s of the cut dimension hold.
  std::vector<TermId> terms;
  for (int64_t s = 0; s < pieces; ++s) {
    std::vector<int64_t> offsets(rank), sizes(rank);
    for (size_t d = 0; d < rank; ++d) {
      bool split = !in.split[d].empty();
      offsets[d] = !split ? off[d] : (int)d == cut ? s * inLocal[d] + off[d] : 0;
      sizes[d] = !split ? size[d] : (int)d == cut ? size[d] : in.global[d];
    }
    terms.push_back(sliceTerm(c.terms, op.getContext(), in.term, in.global, offsets, sizes));
  }
  if (pieces == 1) {
    out.term = terms[0];
    return out;
  }
  out.term = joinedConcat(c.terms, op.getContext(),
                          concatHead(op.getContext(), cut, out.global),
                          terms);
  return out;
}

} // namespace planproof::layouts
