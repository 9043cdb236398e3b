//===- Rules.cpp - the layout engine's transfer rules --------------------===//
//
// One rule per op family, each with its side conditions; docs/layout-engine.md gives
// the argument for each and for why the rules together prove a plan. A rule that
// cannot show its side conditions returns an unknown state that says which one fails;
// it never guesses.
//
// The terms and states are in Terms.cpp, the ops' split rules in Splits.cpp, the
// collectives' in Collectives.cpp, index values' in Index.cpp.
// Facts about ops come from ODS (dialects/Ref/RefInterfaces.td): MLIR's `Elementwise`
// trait, ref's `Linear` and `Multilinear` traits and the NonlinearOp interface.
//
//===----------------------------------------------------------------------===//
#include "LayoutEngine/LayoutState.h"

#include "Dist/DistDialect.h"
#include "Ref/RefDialect.h"
#include "Support/Limits.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>

using namespace mlir;

namespace planproof::layouts {

namespace {

//===----------------------------------------------------------------------===//
// Op facts (ODS) and the combination of terms
//===----------------------------------------------------------------------===//

unsigned tensorOperands(Operation &op) {
  unsigned n = 0;
  for (Value v : op.getOperands())
    n += isa<RankedTensorType>(v.getType());
  return n;
}

/// f(sum_r x_r, sum_r y_r, ...) = sum_r f(x_r, y_r, ...).
bool linearTogether(Operation &op) { return op.hasTrait<ref::OpTrait::Linear>(); }

/// f is linear in operand i with the others fixed.
bool linearIn(Operation &op, unsigned i) {
  if (op.hasTrait<ref::OpTrait::Multilinear>())
    return true;
  if (linearTogether(op) && tensorOperands(op) == 1)
    return true;
  if (auto n = dyn_cast<ref::NonlinearOp>(&op))
    return !((n.getNonlinearOperands() >> i) & 1);
  return false;
}


/// What broadcast `b` of a value in state `x` copies: x's own source when x is a
/// broadcast (the dimensions composed), else x's term.
void broadcastSource(const State &x, ref::BroadcastOp b, TermId &source,
                     std::vector<int64_t> &dims) {
  auto opDims = b.getDims();
  dims.clear();
  if (x.broadcast) {
    source = x.source;
    for (int64_t d : x.sourceDims)
      dims.push_back(opDims[d]);
  } else {
    source = x.term;
    dims.assign(opDims.begin(), opDims.end());
  }
}

bool combine(TermPool &terms, Operation &op, const Shape &global,
             const std::vector<const State *> &in, Combined &out, std::string &why,
             int depth = 0);

/// Whether elementwise `op` takes only uniform operands of a non-scalar shape (each a
/// scalar's copies): then `scalar` and `factor` are the op applied to their scalars.
bool uniformOfUniforms(TermPool &terms, Operation &op, const Shape &global,
                       const std::vector<const State *> &in, TermId &scalar, Rational &factor,
                       std::string &why, int depth) {
  if (depth > 0 || global.empty() || in.empty() ||
      !op.hasTrait<mlir::OpTrait::Elementwise>() || op.getNumResults() != 1)
    return false;
  for (const State *s : in)
    if (!s->broadcast || !s->sourceDims.empty() || !terms.shapeOf(s->source).empty())
      return false;
  std::vector<State> scalars(in.size());
  std::vector<const State *> at;
  for (size_t i = 0; i < in.size(); ++i) {
    State &s = scalars[i];
    s.known = true;
    s.term = in[i]->source;
    s.factor = in[i]->factor;
    if (s.term == terms.one()) { // the constants stay uniform ones (combine's identities)
      s.broadcast = true;
      s.source = s.term;
    }
    at.push_back(&s);
  }
  Combined k;
  if (!combine(terms, op, Shape(), at, k, why, depth + 1))
    return false;
  scalar = k.term;
  factor = k.factor;
  return true;
}

/// The term and factor of `op` applied to `in`: factors stay outside the term as far
/// as linearity allows (the same function for reference and plan, so that the same
/// computation gives the same term whichever way its constants were grouped).
bool combine(TermPool &terms, Operation &op, const Shape &global,
             const std::vector<const State *> &in, Combined &out, std::string &why,
             int depth) {
  if (auto s = dyn_cast<ref::ScaleOp>(op)) {
    Rational f;
    if (!exactConstant(s.getFactorAttr().getValueAsDouble(), f, why))
      return false;
    out = {in[0]->term, in[0]->factor * f};
    return true;
  }
  if (isa<ref::DetachOp>(op)) {
    out = {in[0]->term, in[0]->factor};
    return true;
  }
  if (auto k = dyn_cast<ref::ConstantOp>(op)) {
    Rational v;
    if (!exactConstant(k.getValueAttr().getValueAsDouble(), v, why))
      return false;
    out = {terms.broadcast(global, {}, terms.one()), v};
    return true;
  }
  if (auto b = dyn_cast<ref::BroadcastOp>(op)) {
    TermId source;
    std::vector<int64_t> dims;
    broadcastSource(*in[0], b, source, dims);
    out = {terms.broadcast(global, dims, source), in[0]->factor};
    return true;
  }
  {
    TermId source;
    std::vector<int64_t> dims;
    double uniform;
    bool isUniform;
    if (literalView(terms, op, source, dims, uniform, isUniform)) {
      if (!isUniform) {
        out = {terms.broadcast(global, dims, source), Rational(1)};
        return true;
      }
      Rational v;
      if (!exactConstant(uniform, v, why))
        return false;
      out = {terms.broadcast(global, {}, terms.one()), v};
      return true;
    }
  }
  if (TermId source; concatOfBroadcasts(terms, op, global, in, source) && in[0]->copies()) {
    out = {terms.broadcast(global, in[0]->sourceDims, source), in[0]->factor};
    return true;
  }
  if (auto sl = dyn_cast<ref::SliceOp>(op); sl && in.size() == 1 && !in[0]->isSplit() &&
                                             !(sliceOfBroadcast(op, in) && in[0]->copies())) {
    std::vector<int64_t> offsets(sl.getOffsets().begin(), sl.getOffsets().end()),
        sizes(sl.getSizes().begin(), sl.getSizes().end());
    out = {sliceTerm(terms, op.getContext(), in[0]->term, in[0]->global, offsets, sizes),
           in[0]->factor};
    return true;
  }
  if (sliceOfBroadcast(op, in) && in[0]->copies()) {
    TermId source = slicedSource(terms, op, *in[0]);
    out = {terms.broadcast(global, in[0]->sourceDims, source), in[0]->factor};
    return true;
  }
  if (layoutNormalForm(terms, op, global, in, out))
    return true;
  if (isa<ref::MulOp>(op))
    for (unsigned i = 0; i < 2; ++i)
      if (in[i]->uniformOne(terms.one())) {
        out = {in[1 - i]->term, in[0]->factor * in[1]->factor};
        return true;
      }
  // A quotient by a uniform nonzero constant is a scale (exact rationals).
  if (isa<ref::DivOp>(op) && in.size() == 2 && in[1]->uniformOne(terms.one()) &&
      !in[1]->factor.isZero()) {
    out = {in[0]->term, in[0]->factor / in[1]->factor};
    return true;
  }
  // An elementwise op of uniform values (every element one scalar: constants,
  // broadcasts of scalars) is uniform, the op of the scalars copied: op(copies of a,
  // copies of b) = copies of op(a, b), element by element (exact). Its term is that
  // broadcast, whatever shape and split the copies were made at.
  if (TermId scalar; uniformOfUniforms(terms, op, global, in, scalar, out.factor, why, depth)) {
    out.term = terms.broadcast(global, {}, scalar);
    return true;
  }
  // An elementwise op of values reshaped alike is the reshape of the op (Reshapes.cpp).
  Shape inner;
  std::vector<State> lifted;
  if (depth < 2 && elementwiseOfReshapes(terms, op, global, in, inner, lifted)) {
    std::vector<const State *> at;
    for (const State &s : lifted)
      at.push_back(&s);
    Combined c;
    if (combine(terms, op, inner, at, c, why, depth + 1)) {
      out = {reshapeTerm(terms, op, c.term, global), c.factor};
      return true;
    }
  }
  if (TermId t; in.size() == 2 && batchOfOneProduct(terms, op, global, *in[0], *in[1], t)) {
    out = {t, in[0]->factor * in[1]->factor};
    return true;
  }
  const std::string &head = terms.head(op.getName(), op.getAttrDictionary(), global);
  // The normal form of sums (TermPool::sum); a difference is the sum with the second
  // summand's weight negated, a - b = a + (-1) b (exact).
  if (isa<ref::AddOp, ref::SubOp>(op)) {
    std::vector<std::pair<TermId, Rational>> weighted;
    for (const State *s : in)
      weighted.push_back({s->term, s->factor});
    if (isa<ref::SubOp>(op) && weighted.size() == 2)
      weighted[1].second = Rational(0) - weighted[1].second;
    MLIRContext *ctx = op.getContext();
    const std::string &sumHead =
        isa<ref::SubOp>(op) ? terms.head(OperationName(ref::AddOp::getOperationName(), ctx),
                                         DictionaryAttr::get(ctx), global)
                            : head;
    auto [t, f] = terms.sum(sumHead, weighted);
    out = {t, f};
    return true;
  }
  std::vector<TermId> ts;
  Rational factor(1);
  if (linearTogether(op) && !in.empty() && !in[0]->factor.isZero()) {
    factor = in[0]->factor;
    for (const State *s : in)
      ts.push_back(terms.scaled(s->term, s->factor / factor));
  } else {
    for (unsigned i = 0; i < in.size(); ++i) {
      if (linearIn(op, i)) {
        factor = factor * in[i]->factor;
        ts.push_back(in[i]->term);
      } else {
        ts.push_back(terms.scaled(in[i]->term, in[i]->factor));
      }
    }
  }
  if (isa<ref::ConcatOp>(op)) {
    out = {joinedConcat(terms, op.getContext(), head, ts), factor};
  } else {
    out = {terms.node(head, ts), factor};
    terms.setOp(out.term, op.getName(), op.getAttrDictionary());
  }
  return true;
}

/// Marks `out` a broadcast where `op` makes one: a constant, a broadcast, a product
/// with the uniform one, a scale or detach of a broadcast.
void markBroadcast(TermPool &terms, Operation &op, const std::vector<const State *> &in,
                   State &out) {
  auto inherit = [&](const State &from) {
    out.broadcast = from.broadcast;
    out.source = from.source;
    out.sourceDims = from.sourceDims;
  };
  if (isa<ref::ConstantOp>(op)) {
    out.broadcast = true;
    out.source = terms.one();
    out.sourceDims.clear();
  } else if (isa<ref::LiteralOp>(op)) {
    // combine gave a literal with copies (literalView) its broadcast term: read it back.
    out.broadcast = terms.broadcastOf(out.term, out.sourceDims, out.source);
  } else if (auto b = dyn_cast<ref::BroadcastOp>(op)) {
    out.broadcast = true;
    broadcastSource(*in[0], b, out.source, out.sourceDims);
  } else if (isa<ref::MulOp>(op) && in[0]->uniformOne(terms.one())) {
    inherit(*in[1]);
  } else if (isa<ref::MulOp>(op) && in[1]->uniformOne(terms.one())) {
    inherit(*in[0]);
  } else if (isa<ref::ScaleOp, ref::DetachOp>(op) ||
             (isa<ref::DivOp>(op) && in.size() == 2 && in[1]->uniformOne(terms.one()) &&
              !in[1]->factor.isZero())) {
    inherit(*in[0]);
  } else if (isa<ref::ReshapeOp>(op) && in.size() == 1 && in[0]->broadcast &&
             in[0]->sourceDims.empty()) {
    inherit(*in[0]); // a reshape of a uniform value: the same value everywhere
  } else if (op.hasTrait<mlir::OpTrait::Elementwise>() && !in.empty() &&
             llvm::all_of(in, [](const State *s) {
               return s->broadcast && s->sourceDims.empty();
             })) {
    // An elementwise op of uniform values (combine: uniformOfUniforms).
    out.broadcast = terms.broadcastOf(out.term, out.sourceDims, out.source) &&
                    out.sourceDims.empty();
  } else if (in.size() == 1 && (isa<ref::ReshapeOp>(op) || unitTranspose(op, in[0]->global))) {
    out.broadcast = unitReshape(*in[0], out.global, out.source, out.sourceDims);
  } else if (concatOfBroadcasts(terms, op, out.global, in, out.source)) {
    out.broadcast = true;
    out.sourceDims = in[0]->sourceDims;
  } else if (sliceOfBroadcast(op, in)) {
    out.broadcast = true;
    out.source = slicedSource(terms, op, *in[0]);
    out.sourceDims = in[0]->sourceDims;
  }
}

/// The tensor operands' states, or an unknown state (the first unknown operand's, or
/// one for an operand that is not a tensor).
bool operandStates(Operation &op, const std::vector<const State *> &in, State &unknown) {
  for (unsigned i = 0; i < op.getNumOperands(); ++i) {
    if (!isa<RankedTensorType>(op.getOperand(i).getType()) &&
        !op.getOperand(i).getType().isIndex()) {
      unknown = State::unknown(&op, "`" + opName(op) + "` takes an operand of a type the "
                                    "layout engine does not follow");
      return false;
    }
    if (!in[i]->known) {
      unknown = *in[i];
      return false;
    }
    if (!in[i]->rankCoeff.empty()) {
      unknown = State::unknown(&op, "`" + opName(op) + "` takes an index value that differs "
                                    "from rank to rank, which the layout engine does not "
                                    "follow here");
      return false;
    }
  }
  return true;
}

} // namespace

//===----------------------------------------------------------------------===//
// The reference
//===----------------------------------------------------------------------===//

State referenceRule(RuleContext &c, Operation &op, const std::vector<const State *> &in) {
  if (isa<arith::ArithDialect>(op.getDialect()))
    return indexRule(c, op, in);
  if (State out; referenceOneHot(c, op, in, out))
    return out;
  State bad;
  if (!operandStates(op, in, bad))
    return bad;
  Shape local;
  if (!isa<ref::RefDialect>(op.getDialect()) || !resultShape(op, local))
    return State::unknown(&op, "the reference op `" + opName(op) +
                                   "` is not a ref op with one tensor result");
  Combined k;
  std::string why;
  c.terms.takeApplied();
  bool combined = combine(c.terms, op, local, in, k, why);
  c.fireApplied();
  if (!combined)
    return State::unknown(&op, why);
  State out;
  out.known = true;
  out.term = k.term;
  out.factor = k.factor;
  out.global = local;
  out.split.assign(local.size(), {});
  markBroadcast(c.terms, op, in, out);
  return out;
}

//===----------------------------------------------------------------------===//
// Ref ops in the plan
//===----------------------------------------------------------------------===//

namespace {


/// The axes the result is a partial sum over, from the operands' (linearity), or why
/// the op cannot take them.
bool operandPartials(RuleContext &c, Operation &op, const std::vector<const State *> &in,
                     std::vector<int> &partial, std::string &why, int &culprit) {
  std::vector<unsigned> which;
  for (unsigned i = 0; i < in.size(); ++i)
    if (!in[i]->partial.empty())
      which.push_back(i);
  partial.clear();
  if (which.empty())
    return true;
  bool allAlike = which.size() == in.size();
  for (unsigned i : which)
    allAlike &= in[i]->partial == in[which[0]]->partial;
  if (allAlike && linearTogether(op))
    partial = in[0]->partial;
  else if (which.size() == 1 && linearIn(op, which[0]))
    partial = in[which[0]]->partial;
  else {
    unsigned i = which[0];
    culprit = (int)i;
    why = "operand #" + std::to_string(i) + " is a partial sum over " +
          axesText(c.mesh, in[i]->partial) + " and `" + opName(op) +
          "` is not linear in it (with its other operands as they are): it must be "
          "reduced first";
    return false;
  }
  for (const State *s : in)
    if (intersects(s->splitAxes(), partial)) {
      why = "the partial sum over " + axesText(c.mesh, partial) +
            " meets an operand split over the same axes";
      return false;
    }
  return true;
}

State refOpRuleLed(RuleContext &c, Operation &op, const std::vector<const State *> &operands,
                   int preferred);

/// The name of the generic rule's family for `op` in the proof trace, read off its op
/// facts (ODS traits); an op of no family is named itself.
std::string ruleFamily(Operation &op) {
  if (op.hasTrait<mlir::OpTrait::Elementwise>())
    return "elementwise";
  if (op.hasTrait<ref::OpTrait::Multilinear>())
    return "contraction";
  if (isa<ref::ReduceSumOp, ref::ReduceMeanOp, ref::ReduceMaxOp>(op))
    return "reduction";
  if (isa<ref::TransposeOp, ref::ReshapeOp, ref::BroadcastOp, ref::SliceOp, ref::ConcatOp>(op))
    return "layout op";
  if (op.hasTrait<ref::OpTrait::RowWise>())
    return "row-wise";
  return "op `" + opName(op) + "`";
}

/// refOpRule with operand `preferred` leading the placement of an elementwise op's
/// operands (-1: the first plain one).
State refOpRule(RuleContext &c, Operation &op, const std::vector<const State *> &operands) {
  size_t mark = c.fired.size(); // (the trace keeps the rules of the state returned)
  State first = refOpRuleLed(c, op, operands, -1);
  // Where an elementwise op's operands hold their blocks under different global shapes
  // (a reshape's unit dimensions left a choice) and the result under the first's is no
  // value the reference computes, each other one is tried as the lead: every
  // placement that fits is a true description, so this only chooses which.
  if (!op.hasTrait<mlir::OpTrait::Elementwise>() || !first.known ||
      c.shapes.terms.count(first.term))
    return first;
  std::vector<std::string> firstFired(c.fired.begin() + mark, c.fired.end());
  for (size_t i = 1; i < operands.size(); ++i)
    if (operands[i]->known && operands[0]->known && operands[i]->global != operands[0]->global) {
      c.fired.resize(mark);
      State alt = refOpRuleLed(c, op, operands, (int)i);
      if (alt.known && c.shapes.terms.count(alt.term))
        return alt;
    }
  c.fired.resize(mark);
  c.fired.insert(c.fired.end(), firstFired.begin(), firstFired.end());
  return first;
}

State refOpRuleLed(RuleContext &c, Operation &op, const std::vector<const State *> &operands,
                   int preferred) {
  // A broadcast operand's block under a split of its copied dimensions is a broadcast
  // of the same source: for an elementwise op it takes the split and global shape of
  // the first operand that is not a broadcast, where its source dimensions are split
  // alike (its copied ones take any split: a block of copies is copies).
  std::vector<const State *> in = operands;
  std::vector<State> adopted;
  adopted.reserve(3 * in.size()); // pointers into it stay valid: at most three per operand
  // An elementwise operand holding its blocks under another global shape than the
  // first plain operand (where a reshape made dimensions of local size 1, the global
  // shape is a choice) is described under that one's (placedAs), where that gives the
  // same split: the same blocks on every rank.
  // (A broadcast that copies nothing -- a reshape adding dimensions of size 1 -- is
  // such an operand too.)
  // A concatenation's operands likewise, but along the concatenated dimension, where
  // each keeps its own rows (its local extent there, times the lead's split of it).
  auto cat = dyn_cast<ref::ConcatOp>(op);
  if (op.hasTrait<mlir::OpTrait::Elementwise>() || cat) {
    auto plain = [](const State *s) { return s->known && !(s->broadcast && s->copies()); };
    const State *lead = nullptr;
    if (preferred >= 0 && plain(in[preferred]))
      lead = in[preferred];
    for (const State *s : in)
      if (!lead && plain(s))
        lead = s;
    for (size_t i = 0; lead && i < in.size(); ++i) {
      const State &b = *in[i];
      State moved;
      Shape target = lead->global;
      if (cat) {
        int64_t d = cat.getDim();
        auto type = dyn_cast<RankedTensorType>(op.getOperand(i).getType());
        if (!plain(&b) || d < 0 || d >= (int64_t)target.size() || !type ||
            type.getRank() != (int64_t)target.size() || !lead->split[d].windows.empty())
          continue;
        target[d] = type.getDimSize(d) * c.size(lead->split[d]);
      }
      if (in[i] == lead || !b.known || b.global == target)
        continue;
      // (A broadcast with copies: its source so described; the adoption below gives
      // its copied dimensions the lead's split.)
      if (plain(&b) ? placedAs(c, op, b, target, moved) && moved.split == lead->split
                    : broadcastPlacedAs(c, op, b, target, moved)) {
        c.fire("placement: an operand described under its partner's global shape");
        adopted.push_back(std::move(moved));
        in[i] = &adopted.back();
      }
    }
  }
  // (A concatenation likewise along a dimension no operand splits: a constant piece
  // takes the others' split and global sizes but along that dimension.)
  auto concat = dyn_cast<ref::ConcatOp>(op);
  if (op.hasTrait<mlir::OpTrait::Elementwise>() || concat) {
    // (Where every operand is a broadcast, the one with the most source dimensions
    // leads: a reshape's unit dimensions make broadcasts of plain values too.)
    const State *lead = nullptr;
    for (const State *s : in)
      if (!lead || (lead->broadcast && (!s->broadcast ||
                                        s->sourceDims.size() > lead->sourceDims.size())))
        lead = s;
    for (size_t i = 0; lead && i < in.size(); ++i) {
      const State &b = *in[i];
      if (!b.broadcast || b.split == lead->split || b.split.size() != lead->split.size())
        continue;
      bool fits = true;
      for (size_t d = 0; d < b.split.size(); ++d) {
        bool fromSource = std::find(b.sourceDims.begin(), b.sourceDims.end(), (int64_t)d) !=
                          b.sourceDims.end();
        // A copied dimension's block is copies under any split: it takes the lead's
        // (but not rows of zeros).
        bool zeros = false;
        for (const Window &w : lead->split[d].windows)
          zeros |= w.zero;
        fits &= fromSource ? b.split[d] == lead->split[d] && b.global[d] == lead->global[d]
                           : !zeros;
      }
      if (!fits)
        continue;
      if (concat && (!b.sourceDims.empty() || (int64_t)concat.getDim() >= (int64_t)b.global.size()))
        continue;
      State u = b;
      u.split = lead->split;
      u.global = lead->global;
      if (concat) {
        // Along a dimension the lead splits in plain blocks, every rank holds the whole
        // piece: copies of one scalar, the blocks of copies |axes| times as long.
        int64_t d = concat.getDim();
        auto type = dyn_cast<RankedTensorType>(op.getOperand(i).getType());
        u.global[d] = !lead->split[d].empty() && lead->split[d].windows.empty() && type
                          ? type.getDimSize(d) * c.size(lead->split[d])
                          : b.global[d];
      }
      // (The same global shape is the same value: its term stays.)
      if (u.global != b.global)
        u.term = c.terms.broadcast(u.global, u.sourceDims, u.source);
      c.fire("placement: a broadcast's copies take the lead operand's split");
      adopted.push_back(u);
      in[i] = &adopted.back();
    }
  }
  // A transpose's operand whose global shape is a choice is described under the shape
  // the reference transposes with the same permutation -- one the reference reshapes
  // to or from the operand's -- where that gives the same blocks on every rank
  // (placedAs): its result then has the reference's shape.
  if (auto t = dyn_cast<ref::TransposeOp>(op); t && in.size() == 1 && in[0]->known) {
    auto it = c.shapes.transposes.find(std::vector<int64_t>(t.getPerm().begin(), t.getPerm().end()));
    auto related = [&](const Shape &a, const Shape &b) {
      auto r = c.shapes.reshapes.find(a);
      return r != c.shapes.reshapes.end() && r->second.count(b);
    };
    State moved;
    if (it != c.shapes.transposes.end() && !it->second.count(in[0]->global))
      for (const Shape &target : it->second)
        if (target.size() == in[0]->global.size() &&
            (related(target, in[0]->global) || related(in[0]->global, target)) &&
            placedAs(c, op, *in[0], target, moved)) {
          c.fire("placement: a transpose's operand under the reference's shape");
          adopted.push_back(std::move(moved));
          in[0] = &adopted.back();
          break;
        }
  }
  // An op linear in all its operands together, some of them partial sums over axes
  // the others are replicated on: the rank-wise results sum, over those axes, to the
  // op of the sums, in which a replicated operand counts once per rank of the group
  // -- it is a partial sum whose value is the group's size times its own.
  if (linearTogether(op)) {
    std::vector<int> all;
    for (const State *s : in)
      all = sortedUnion(all, s->partial);
    for (size_t i = 0; i < in.size() && !all.empty(); ++i) {
      std::vector<int> missing;
      for (int a : all)
        if (std::find(in[i]->partial.begin(), in[i]->partial.end(), a) == in[i]->partial.end())
          missing.push_back(a);
      if (missing.empty() || intersects(missing, in[i]->splitAxes()) ||
          !in[i]->partialMax.empty())
        continue; // as they are: operandPartials says why they do not combine
      State u = *in[i];
      u.partial = all;
      u.factor = u.factor * Rational(c.size(missing));
      c.fire("linearity: a replicated operand counted once per rank of a partial sum");
      adopted.push_back(u);
      in[i] = &adopted.back();
    }
  }
  Shape local;
  if (!resultShape(op, local))
    return State::unknown(&op, "`" + opName(op) + "` does not have one tensor result");
  std::string why;
  for (size_t i = 0; i < in.size(); ++i)
    if (!in[i]->partialMax.empty())
      return State::unknown(&op, "operand #" + std::to_string(i) + " is each rank's maximum of "
                                 "its block over " + axesText(c.mesh, in[i]->partialMax) +
                                 ": it must be completed by all_reduce \"max\" first");
  std::vector<int> partial;
  int culprit = -1;
  if (!operandPartials(c, op, in, partial, why, culprit)) {
    State s = State::unknown(&op, why);
    s.partialOperand = culprit;
    return s;
  }
  SplitResult sr = splitRule(c, op, in, local);
  if (!sr.why.empty())
    return State::unknown(&op, sr.why);
  State out;
  out.known = true;
  out.split = sr.split;
  out.global = sr.global;
  if (intersects(partial, sr.contracted))
    return State::unknown(&op, "a contraction sums over axes its operand is already partial over");
  if (sr.maxOver.empty()) {
    out.partial = sortedUnion(partial, sr.contracted);
  } else {
    out.partial = partial; // empty: reduce_max takes no partial sum (NonlinearOp)
    out.partialMax = sortedUnion({}, sr.maxOver);
  }
  if (!consistent(c, out, local, why))
    return State::unknown(&op, why);
  Combined k;
  c.terms.takeApplied();
  bool combined = combine(c.terms, op, out.global, in, k, why);
  c.fireApplied();
  if (!combined)
    return State::unknown(&op, why);
  out.term = k.term;
  out.factor = k.factor * sr.factor;
  markBroadcast(c.terms, op, in, out);
  c.fire(ruleFamily(op));
  if (!sr.contracted.empty() && sr.maxOver.empty())
    c.fire("partial sum: contracted over split blocks");
  if (!sr.maxOver.empty())
    c.fire("partial maximum: each rank's maximum of its block");
  return out;
}

} // namespace

namespace {
State planRuleOf(RuleContext &c, Operation &op, const std::vector<const State *> &in);

} // namespace

State planRule(RuleContext &c, Operation &op, const std::vector<const State *> &in) {
  State out;
  if (oneHotTimesRowSums(c, op, in, out)) {
    c.fire("row sums: a one-hot's block times a function of its row sums");
    return out;
  }
  out = planRuleOf(c, op, in);
  annotateRowSums(c, op, in, out);
  return out;
}

namespace {
State planRuleOf(RuleContext &c, Operation &op, const std::vector<const State *> &in) {
  if (isa<dist::AxisIndexOp>(op) || isa<arith::ArithDialect>(op.getDialect())) {
    c.fire("index: affine in the rank's coordinates");
    return indexRule(c, op, in);
  }
  if (isa<dist::DistDialect>(op.getDialect())) {
    for (const State *s : in)
      if (!s->known)
        return *s;
    c.fire("collective `" + opName(op) + "`");
    return collectiveRule(c, op, in);
  }
  if (!isa<ref::RefDialect>(op.getDialect()))
    return State::unknown(&op, "no layout rule for `" + opName(op) + "`");
  if (isa<ref::DropoutMaskOp>(op)) {
    c.fire("dropout: an exact stream's piece");
    return dropoutRule(c, op, in);
  }
  auto generic = [&](const std::vector<const State *> &operands) {
    return refOpRule(c, op, operands);
  };
  auto windows = [&] {
    c.fire("windows: rows chosen per rank");
    return windowRule(c, op, in, generic);
  };
  // A causal offset or a mask's positions differ from rank to rank (a context-parallel
  // chunk's start).
  if (auto cs = dyn_cast<ref::CausalSoftmaxOp>(op); cs && cs.getOffset())
    return windows();
  if (isa<ref::PositionMaskOp>(op))
    for (const State *s : in)
      if (s->known && !s->rankCoeff.empty())
        return windows();
  // A vocabulary shard's first row (or class).
  if (isa<ref::EmbeddingOp, ref::EmbeddingGradOp>(op) && op.getNumOperands() == 3)
    return windows();
  if (isa<ref::OneHotOp>(op) && op.getNumOperands() == 2)
    return windows();
  State bad;
  if (!operandStates(op, in, bad))
    return bad;
  if (State out; throughMaxima(c, op, in, out)) {
    c.fire("maxima: a partial maximum through an op that commutes with it");
    return out;
  }
  for (const State *s : in)
    if (s->windowed())
      return windows();
  if (isa<ref::SliceOp>(op) && c.terms.kindIs(in[0]->term, TermPool::HeadData::Stack)) {
    c.fire("stacks: a slice of stacked pieces");
    return stackSlice(c, op, *in[0]);
  }
  if (State s; concatOfUnitSlices(c, op, in, s)) {
    c.fire("views: unit slices stacked");
    return s;
  }
  if (auto slice = dyn_cast<ref::SliceOp>(op); slice && in[0]->isSplit()) {
    c.fire("slices: a slice of a split value");
    return sliceRule(c, op, *in[0]);
  }
  if (std::vector<State> merged; batchIntoRows(c, op, in, merged)) {
    c.fire("reshapes: a batch merged into contracted rows");
    return refOpRule(c, op, {&merged[0], &merged[1]});
  }
  return refOpRule(c, op, in);
}
} // namespace

} // namespace planproof::layouts
