//===- Departure.cpp - where a plan first leaves its reference -----------===//
//
// When an output is not shown equal, the layout engine names the op where the plan
// departs from the reference on that output's way: back from the output through
// values the reference does not compute, to the op whose inputs all hold values the
// reference computes and whose result does not -- a term the reference never
// computes, or a reference term times a factor the reference never gives it (an "avg"
// where a "sum" belongs, a sum over a replicated value). It is a diagnostic: it
// changes no verdict, and the message states what is found, not why.
//
//===----------------------------------------------------------------------===//
#include "LayoutEngine/LayoutState.h"
#include "Spec/Spec.h"

#include "Dist/DistDialect.h"
#include "Ref/RefDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <algorithm>
#include <cstdint>

using namespace mlir;

namespace planproof::layouts {

DepartureFinder::DepartureFinder(const Spec &spec, TermPool &terms,
                                 const llvm::DenseMap<Value, State> &planStates,
                                 const ReferenceTerms &ref)
    : spec(spec), terms(terms), planStates(planStates), ref(ref) {}

/// The first nonzero factor the reference gives a term (null: it has only zeros).
static const std::pair<Rational, int> *nonzeroUse(const ReferenceValue &v) {
  for (const auto &u : v.uses)
    if (!u.first.isZero())
      return &u;
  return nullptr;
}

bool DepartureFinder::accounted(const State &s) const {
  if (!s.known)
    return false;
  // A value the reference computes in another shape (a reshape of one, or the value
  // a reference reshape reads) departs from nothing: frameworks choose their shapes.
  if (!reshapedIndexed) {
    for (const auto &[t, v] : ref)
      if (terms.isOp<ref::ReshapeOp>(t) && terms.operands(t).size() == 1)
        reshapedRef.insert(terms.operands(t)[0]);
    reshapedIndexed = true;
  }
  auto fromReference = [&](TermId t) {
    return ref.count(t) || terms.isLeaf(t) || reshapedRef.count(t) ||
           (terms.isOp<ref::ReshapeOp>(t) && terms.operands(t).size() == 1 &&
            ref.count(terms.operands(t)[0]));
  };
  // A term the reference computes only as zero, held times a nonzero factor, is no
  // value the reference computes.
  if (auto it = ref.find(s.term);
      it != ref.end() && !s.factor.isZero() && !nonzeroUse(it->second))
    return false;
  if (fromReference(s.term) || !s.rankCoeff.empty() || s.isConst)
    return true;
  return s.broadcast && (fromReference(s.source) || s.source == terms.one());
}

Rational DepartureFinder::ratio(const State &s) const {
  auto it = ref.find(s.term);
  if (it == ref.end())
    return Rational(1);
  for (const auto &[f, index] : it->second.uses)
    if (f == s.factor)
      return Rational(1);
  const auto *u = nonzeroUse(it->second);
  return u ? s.factor / u->first : Rational(1);
}

/// The values `op` reads: its operands, and for a receive the value its send sent.
static std::vector<Value> inputsOf(const Spec &spec, Operation *op) {
  if (isa<dist::RecvOp>(op)) {
    auto it = spec.recvFrom.find(op);
    if (it != spec.recvFrom.end() && it->second->getNumOperands() > 0)
      return {it->second->getOperand(0)};
    return {};
  }
  return std::vector<Value>(op->getOperands().begin(), op->getOperands().end());
}

bool DepartureFinder::departed(Value v) const {
  auto it = planStates.find(v);
  if (it == planStates.end() || !it->second.known || v.getType().isIndex())
    return false;
  // A constant departs from nothing: it reads no value the reference computes (a
  // factor it gives is its user's departure).
  if (Operation *op = v.getDefiningOp(); op && inputsOf(spec, op).empty() &&
                                          !isa<dist::RecvOp>(op))
    return false;
  return !accounted(it->second) || !ratio(it->second).isOne();
}

Value DepartureFinder::departedInput(Operation *op) const {
  if (isa<dist::StageSelectOp>(op))
    return {}; // a sum over the pipeline axis of the stages' values: not followed
  // A value the reference never computes before one that is off by a factor only: a
  // factor may be a deliberate share that a later sum completes (a loss scaled by
  // 1/tp on every tp rank), another term never comes back.
  // Among inputs off by factors only, the one whose factor is the rarest over the
  // plan: where every microbatch's gradient carries one share (1/tp of the
  // reference's) and one carries another, that one left the pattern.
  Value best;
  size_t fewest = SIZE_MAX;
  for (Value v : inputsOf(spec, op)) {
    if (!departed(v))
      continue;
    const State &s = planStates.find(v)->second;
    if (!accounted(s))
      return v;
    size_t n = frequency(ratio(s));
    if (n < fewest) {
      fewest = n;
      best = v;
    }
  }
  return best;
}

size_t DepartureFinder::frequency(const Rational &r) const {
  if (ratioCounts.empty()) {
    ratioCounts[""] = 0; // counted
    for (const auto &[v, s] : planStates)
      if (s.known && accounted(s))
        if (Rational q = ratio(s); !q.isOne())
          ++ratioCounts[q.str()];
  }
  auto it = ratioCounts.find(r.str());
  return it == ratioCounts.end() ? 0 : it->second;
}

/// The mesh axes of size n, where r is 1/n (none: r is no such share).
static std::vector<std::string> shareAxes(const Mesh &mesh, const Rational &r) {
  std::vector<std::string> out;
  if (!r.isSmall() || r.numerator() != 1 || r.denominator() < 2)
    return out;
  for (size_t a = 0; a < mesh.shape.size(); ++a)
    if (mesh.shape[a] == r.denominator())
      out.push_back(mesh.axes[a]);
  return out;
}

/// "[tp]", or "[dp] or [tp]" where several axes have the share's size.
static std::string axesChoice(const std::vector<std::string> &axes) {
  std::string out;
  for (size_t i = 0; i < axes.size(); ++i)
    out += (i ? " or [" : "[") + axes[i] + "]";
  return out;
}

/// A sum over axes (all_reduce or reduce_scatter "sum"): its axes' names.
static bool sumsOver(Operation *op, std::vector<std::string> &axes) {
  ArrayAttr names;
  if (auto ar = dyn_cast<dist::AllReduceOp>(op)) {
    if (ar.getKind() != "sum")
      return false;
    names = ar.getAxes();
  } else if (auto rs = dyn_cast<dist::ReduceScatterOp>(op)) {
    names = rs.getAxes();
  } else {
    return false;
  }
  for (Attribute a : names)
    if (auto s = dyn_cast<StringAttr>(a))
      axes.push_back(s.str());
  return true;
}

std::string DepartureFinder::why(Operation *op) const {
  const State &s = planStates.find(op->getResult(0))->second;
  if (!accounted(s))
    return "its value " + terms.str(s.term) +
           " is no value the reference computes, while its operands are";
  Rational r = ratio(s);
  const auto *use = nonzeroUse(ref.find(s.term)->second);
  std::string text = "its value is " + r.str() + " times the reference's `" +
                     referenceName(use ? use->second : -1 - (1 << 30)) + "`";
  if (Value in = departedInput(op)) {
    Rational q = ratio(planStates.find(in)->second);
    return text + ", where its operand is " + q.str() + " times the reference's value" +
           (q.isZero() ? "" : ": it changes the factor by " + (r / q).str());
  }
  text += ", while its operands hold the reference's values";
  // A deliberate share (a loss scaled by 1/|axis| on every rank of an axis, whose
  // gradients a sum over that axis completes): name the axis.
  std::vector<std::string> axes =
      op->getDialect() == op->getContext()->getLoadedDialect<dist::DistDialect>()
          ? std::vector<std::string>{}
          : shareAxes(spec.mesh, r);
  if (!axes.empty())
    text += " (a share " + r.str() + " over " + axesChoice(axes) + ", which no sum over " +
            axesChoice(axes) + " completes on this way)";
  return text;
}

std::string DepartureFinder::referenceName(int index) const {
  Block &body = spec.reference.getBody().front();
  if (index < 0)
    return -1 - index < (int)body.getNumArguments()
               ? spec.nameOf(body.getArgument(-1 - index))
               : "?";
  if (referenceOps.empty())
    for (Operation &op : body)
      referenceOps.push_back(&op);
  if (index >= (int)referenceOps.size() || referenceOps[index]->getNumResults() == 0)
    return "?";
  return spec.nameOf(referenceOps[index]->getResult(0));
}

DepartureFinder::Found DepartureFinder::of(Value out) {
  // Back from the output through departed values, to the op whose result departs
  // while none of its inputs does. Each value is walked once (memo).
  std::vector<Value> path;
  Operation *found = nullptr;
  Value v = out;
  while (true) {
    auto m = memo.find(v);
    if (m != memo.end()) {
      found = m->second;
      break;
    }
    Operation *def = v.getDefiningOp();
    if (!def || !departed(v) || def->getNumResults() != 1)
      break; // an argument, a value the reference computes, or not followed
    path.push_back(v);
    Value next = departedInput(def);
    // The output's own collective changes its operand's factor, and not to the
    // reference's (an "avg" of a value every rank holds 1/tp of): the last chance to
    // complete the share is where it goes wrong, not where the share was made. (Inside
    // the plan, collectives change shares legitimately: the adjoint of an "avg".)
    if (next && v == out &&
        isa<dist::AllReduceOp, dist::ReduceScatterOp, dist::AllGatherOp, dist::AllToAllOp>(def)) {
      const State &vs = planStates.find(v)->second, &ns = planStates.find(next)->second;
      if (accounted(vs) && accounted(ns) && ratio(vs) != ratio(ns)) {
        found = def;
        break;
      }
    }
    // A microbatch's cut of a plan input holds pieces the reference computes whole:
    // where its users depart the walk cannot tell (PieceComparison compares such
    // values piece by piece), so nothing is named.
    if (!next) {
      bool cut = isa<ref::SliceOp>(def) && isa<BlockArgument>(def->getOperand(0));
      if (!isa<dist::StageSelectOp>(def) && !cut)
        found = def;
      break;
    }
    v = next;
  }
  for (Value p : path)
    memo[p] = found;
  if (!found)
    return {};
  // An output that is the reference's value times 1/|axis|, that factor a share made
  // at `found` (a loss scaled by 1/tp, the adjoint of an "avg" over tp) on its way
  // through a sum over other axes: that sum, the closest to the output, is where the
  // axis that would complete the share is missing.
  const State &s = planStates.find(found->getResult(0))->second;
  const State &o = planStates.find(out)->second;
  std::vector<std::string> candidates =
      accounted(s) ? shareAxes(spec.mesh, ratio(s)) : std::vector<std::string>{};
  if (!candidates.empty() && accounted(o) && ratio(o) == ratio(s)) {
    Value w = out;
    for (int step = 0; step < 64 && w && w.getDefiningOp() && departed(w); ++step) {
      Operation *def = w.getDefiningOp();
      std::vector<std::string> axes;
      if (def != found && sumsOver(def, axes)) {
        // The share's axes this sum leaves out (several axes may have its size).
        std::vector<std::string> missing;
        for (const std::string &a : candidates)
          if (std::find(axes.begin(), axes.end(), a) == axes.end())
            missing.push_back(a);
        if (missing.empty())
          break;
        std::string over;
        for (const std::string &x : axes)
          over += (over.empty() ? "" : ", ") + x;
        return {def, "it sums over [" + over + "] and its value is " + ratio(s).str() +
                         " times the reference's: the share " + ratio(s).str() + " over " +
                         axesChoice(missing) + " made at `" + spec.nameOf(found->getResult(0)) +
                         "` (line " + std::to_string(toSourceLoc(found->getLoc()).line) +
                         ") is not completed: a sum over " + axesChoice(missing) +
                         " is missing"};
      }
      if (def->getNumResults() != 1)
        break;
      w = departedInput(def);
    }
  }
  // A value of the plan's own way (no reference value) that later meets a complete
  // value on every rank while still a partial sum: the reduction it needed is missing
  // there, not at `found`. (Bounded: the ops of the way, from `found` on.)
  if (!accounted(s)) {
    std::vector<Operation *> way;
    for (Value w = out; w && w.getDefiningOp() && departed(w) && way.size() < 256;) {
      Operation *def = w.getDefiningOp();
      way.push_back(def);
      if (def == found || def->getNumResults() != 1)
        break;
      w = departedInput(def);
    }
    for (auto it = way.rbegin(); it != way.rend(); ++it)
      if (Found c = countedPerRank(*it); c.op)
        return c;
  }
  // Values the reference computes, paired as it never does: where they part.
  if (!accounted(s))
    if (Found c = crossed(found); c.op)
      return c;
  return {found, why(found)};
}

/// A sum (add, sub, bias_add) of a partial sum over axes A and a value complete over
/// A on every rank: the rule reads it as a partial sum in which the complete value
/// counts once per rank of A (Rules.cpp). Unless that value is a share (1/|A| of the
/// reference's), that is a bias added before its all-reduce, or a value of the
/// plan's own computed on every rank without the reduction of its partial operand.
DepartureFinder::Found DepartureFinder::countedPerRank(Operation *op) const {
  if (!isa<ref::AddOp, ref::SubOp, ref::BiasAddOp>(op) || op->getNumOperands() != 2)
    return {};
  auto stateOf = [&](Value v) -> const State * {
    auto it = planStates.find(v);
    return it == planStates.end() || !it->second.known ? nullptr : &it->second;
  };
  const State *out = stateOf(op->getResult(0));
  if (!out || out->partial.empty())
    return {};
  for (unsigned p = 0; p < 2; ++p) {
    const State *partial = stateOf(op->getOperand(p)), *complete = stateOf(op->getOperand(1 - p));
    if (!partial || !complete || partial->partial != out->partial || !complete->partial.empty() ||
        !accounted(*complete))
      continue;
    int64_t n = spec.mesh.groupSize(out->partial);
    if (ratio(*complete) * Rational(n) == Rational(1))
      continue; // a share: the sum over the axes completes it
    std::string axes;
    for (int a : out->partial)
      axes += (axes.empty() ? "" : ", ") + spec.mesh.axes[a];
    std::string pn = spec.nameOf(op->getOperand(p)), cn = spec.nameOf(op->getOperand(1 - p));
    return {op, "operand #" + std::to_string(p) + " `" + pn + "` is a partial sum over [" +
                    axes + "] and operand #" + std::to_string(1 - p) + " `" + cn +
                    "` is complete on every rank: summed over [" + axes + "], the result "
                    "counts `" + cn + "` " + std::to_string(n) + " times -- a reduction over [" +
                    axes + "] of `" + pn + "` (dist.all_reduce) is likely missing before this op"};
  }
  return {};
}

/// What the layout engine does not model yet: the whole spec is then inconclusive.
std::string layoutUncovered(const Spec &spec) {
  (void)spec; // (everything a spec states is read; what a rule does not cover is reported there)
  return "";
}

} // namespace planproof::layouts
