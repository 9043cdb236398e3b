//===- LayoutEngine.cpp - running the layout engine over a spec -----------===//
//
// The reference is run once over terms, the plan once over states (for all ranks at
// once), and each plan output is compared with its reference output (LayoutEngine.h,
// docs/layout-engine.md).
//
//===----------------------------------------------------------------------===//
#include "LayoutEngine/LayoutEngine.h"
#include "LayoutEngine/Bindings.h"
#include "LayoutEngine/Calls.h"
#include "LayoutEngine/Run.h"
#include "LayoutEngine/LayoutState.h"
#include "Support/Progress.h"

#include "Dist/DistDialect.h"
#include "Engine/RngCheck.h"
#include "Engine/Schedule.h"
#include "Ref/RefDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/BuryPointer.h"

#include <algorithm>
#include <chrono>
#include <set>
#include <unordered_map>

using namespace mlir;
using namespace planproof;
using namespace planproof::layouts;

struct planproof::LayoutCache::Impl {
  /// The reference these hold states of (referenceKey); empty: nothing yet.
  std::vector<uintptr_t> key;
  std::vector<std::string> inputs, outputs;
  std::vector<int64_t> bounds;
  std::vector<bool> nonnegative;
  TermPool terms;
  std::vector<State> argStates, outputStates;
  llvm::DenseMap<Operation *, std::vector<std::string>> identities; // (Run::refIdentities)
  std::vector<std::pair<size_t, State>> maskStates; // dropout masks', by op position
  ReferenceTerms refTerms;
  ReferenceShapes shapes;
  int64_t referenceOps = 0;
  /// Plan op results by memoKey, with the rules that derived them (the proof trace).
  struct Memo {
    State state;
    std::vector<std::string> rules;
  };
  std::unordered_map<StatesKey, Memo, StatesKeyHash> plan;
  static constexpr size_t kMaxPlanStates = 1 << 20; // then start afresh
  /// The last completed plan run: its spec (Spec::serial), plan function, edit
  /// generation and mesh, and every plan value's state. A run on that spec again
  /// re-derives only the ops edited since (Spec::edited) and those an operand whose
  /// state changed reaches; every other state is the one a fresh run would derive, as
  /// each rule reads only the op and its operands' states (and pipeline routes, which
  /// are re-derived always).
  struct Last {
    uint64_t serial = 0, generation = 0;
    Operation *plan = nullptr;
    std::string mesh;
    llvm::DenseMap<Value, State> states;
    llvm::DenseMap<Operation *, std::vector<std::string>> rules;
  } last;
};

planproof::LayoutCache::LayoutCache() : impl(std::make_unique<Impl>()) {}
planproof::LayoutCache::~LayoutCache() = default;

namespace planproof::layouts {

void Run::keep(LayoutCache::Impl &cache) {
  cache.last.serial = spec.serial;
  cache.last.generation = spec.generation;
  cache.last.plan = spec.plan.getOperation();
  cache.last.mesh = meshKey;
  cache.last.states = std::move(planStates);
  cache.last.rules = std::move(rulesOf);
}

const ReferenceTerms &Run::referenceTerms() {
  if (refTerms)
    return *refTerms;
  Block &body = spec.reference.getBody().front();
  for (unsigned i = 0; i < body.getNumArguments(); ++i)
    if (const State &s = ref[body.getArgument(i)]; s.known)
      ownRefTerms[s.term].add(s.factor, -1 - (int)i);
  int index = 0;
  for (Operation &op : body) {
    if (op.getNumResults() > 0)
      if (const State &s = ref[op.getResult(0)]; s.known)
        ownRefTerms[s.term].add(s.factor, index);
    ++index;
  }
  refTerms = &ownRefTerms;
  return *refTerms;
}

void Run::reference(VerifyStats &stats) {
  Block &body = spec.reference.getBody().front();
  for (unsigned i = 0; i < body.getNumArguments(); ++i) {
    Type type = body.getArgument(i).getType();
    auto t = dyn_cast<RankedTensorType>(type);
    State s;
    // (The second step of a checkpoint spec: the state it resumes, a fresh batch.)
    std::string name = i < spec.refInputs.size() ? spec.refInputs[i] : "";
    if (auto it = secondInputs.find(name); secondStep && it != secondInputs.end()) {
      ref[body.getArgument(i)] = it->second;
      continue;
    }
    if (secondStep)
      name += "@2";
    if (type.isIndex() && i < spec.refInputs.size()) { // a step counter, a seed: a scalar
      s.known = true;
      s.term = terms.leaf(name, "index");
    } else if (!t || i >= spec.refInputs.size()) {
      s = State::unknown(nullptr, "reference input #" + std::to_string(i) +
                                      " is an index value, which the layout engine does "
                                      "not follow yet");
    } else {
      s.known = true;
      s.global.assign(t.getShape().begin(), t.getShape().end());
      s.split.assign(s.global.size(), {});
      s.term = terms.leaf(name, shapeText(s.global));
      if (i < spec.refInputBounds.size() && spec.refInputBounds[i] > 0)
        terms.setBound(s.term, spec.refInputBounds[i]);
    }
    ref[body.getArgument(i)] = s;
  }
  int64_t done = 0, total = (int64_t)body.getOperations().size();
  for (Operation &op : body) {
    options.deadline.check("the layout engine's reference run");
    Progress::count("the layout engine's reference run", ++done, total);
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      for (Value v : ret.getOperands())
        refOutputs.push_back(ref.lookup(v));
      continue;
    }
    ++stats.referenceOps;
    ctx.identities.clear();
    std::vector<const State *> in;
    for (Value v : op.getOperands())
      in.push_back(&ref[v]);
    if (auto call = dyn_cast<func::CallOp>(op)) {
      for (auto [r, s] : llvm::zip(call.getResults(), calls.reference(call, in)))
        ref[r] = s;
      continue;
    }
    State s;
    if (!definitionRule(
            op, [&](Value v) { return ref.lookup(v); },
            [&](Operation &o, const std::vector<const State *> &i) { return referenceRule(ctx, o, i); },
            s))
      s = referenceRule(ctx, op, in);
    ctx.shapes.note(op, in, s);
    for (Value r : op.getResults())
      ref[r] = s;
    for (const std::string &identity : ctx.identities)
      refIdentities[&op].push_back("reference: " + identity);
  }
}

void Run::reference(VerifyStats &stats, LayoutCache::Impl &cache) {
  const std::vector<uintptr_t> &key = spec.referenceKeyOnce();
  Block &body = spec.reference.getBody().front();
  if (!key.empty() && key == cache.key && spec.refInputs == cache.inputs &&
      spec.refOutputs == cache.outputs && spec.refInputBounds == cache.bounds &&
      spec.refInputNonnegative == cache.nonnegative) {
    for (unsigned i = 0; i < body.getNumArguments(); ++i)
      ref[body.getArgument(i)] = cache.argStates[i];
    for (auto &[pos, s] : cache.maskStates) // (the plan's draws are their pieces)
      ref[std::next(body.begin(), (ptrdiff_t)pos)->getResult(0)] = s;
    refOutputs = cache.outputStates;
    refIdentities = cache.identities;
    refTerms = &cache.refTerms;
    ctx.shapes = cache.shapes;
    stats.referenceOps = cache.referenceOps;
    stats.reusedReference = true;
    return;
  }
  // Another reference: what the cache held no longer applies (the term pool is the
  // cache's, so it is emptied too, before this run fills it).
  cache.key.clear();
  cache.plan.clear();
  cache.last = LayoutCache::Impl::Last();
  cache.terms = TermPool();
  cache.terms.setContext(spec.reference->getContext()); // (as the constructor set it)
  reference(stats);
  cache.argStates.clear();
  for (unsigned i = 0; i < body.getNumArguments(); ++i)
    cache.argStates.push_back(ref[body.getArgument(i)]);
  cache.maskStates.clear();
  for (auto [pos, op] : llvm::enumerate(body))
    if (isa<ref::DropoutMaskOp>(op))
      cache.maskStates.push_back({pos, ref[op.getResult(0)]});
  cache.outputStates = refOutputs;
  cache.identities = refIdentities;
  referenceTerms(); // the reference's states are not kept: its terms are, once
  cache.refTerms = std::move(ownRefTerms);
  refTerms = &cache.refTerms;
  cache.shapes = ctx.shapes;
  cache.referenceOps = stats.referenceOps;
  cache.inputs = spec.refInputs;
  cache.outputs = spec.refOutputs;
  cache.bounds = spec.refInputBounds;
  cache.nonnegative = spec.refInputNonnegative;
  cache.key = key;
}

State Run::bindingState(const Binding &b) {
  auto it = std::find(spec.refInputs.begin(), spec.refInputs.end(), b.refName);
  if (it == spec.refInputs.end())
    return State::unknown(nullptr, "plan input `" + b.refName + "` is not a reference input");
  return layoutOf(ctx, spec.plan.getContext(),
                  ref[spec.reference.getArgument(it - spec.refInputs.begin())], b.layout,
                  b.refName);
}

bool Run::resume(LayoutCache::Impl &cache, llvm::DenseSet<Operation *> &dirty) {
  LayoutCache::Impl::Last &last = cache.last;
  bool same = spec.serial != 0 && last.serial == spec.serial &&
              last.plan == spec.plan.getOperation() && last.mesh == meshKey &&
              last.generation <= spec.generation;
  if (same) {
    // (Appended in generation order: the edits since are the last ones.)
    for (auto it = spec.edited.rbegin(); it != spec.edited.rend() && it->first > last.generation;
         ++it)
      dirty.insert(it->second);
    planStates = std::move(last.states);
    rulesOf = std::move(last.rules);
  }
  last = LayoutCache::Impl::Last(); // (until this run completes)
  return same;
}

void Run::plan(VerifyStats &stats, LayoutCache::Impl *cache) {
  Block &body = spec.plan.getBody().front();
  std::string &mesh = meshKey;
  llvm::DenseSet<Operation *> dirty;
  llvm::DenseSet<Value> changed;
  bool resumed = false;
  if (cache) {
    if (cache->plan.size() > LayoutCache::Impl::kMaxPlanStates)
      cache->plan.clear();
    for (size_t a = 0; a < spec.mesh.shape.size(); ++a)
      mesh += spec.mesh.axes[a] + "=" + std::to_string(spec.mesh.shape[a]) + ",";
    mesh += "@" + std::to_string(spec.pipelineAxis) + "|";
    resumed = resume(*cache, dirty);
  }
  // (Edits never change bindings: a resumed run keeps the inputs' states.)
  for (const Binding &b : resumed ? std::vector<Binding>() : spec.planInputs) {
    State s = bindingState(b);
    if (spec.pipelineAxis >= 0 && s.known && overPipeline(s))
      s = State::unknown(nullptr, "plan input `" + b.refName +
                                      "` is split or summed over the pipeline axis");
    planStates[body.getArgument(b.index)] = s;
  }
  std::vector<Operation *> ops = spec.planOps();
  int64_t done = 0;
  for (Operation *op : ops) {
    ++done;
    if (isa<func::ReturnOp>(op))
      continue;
    ++stats.planOps;
    // (A square of a value by itself or a magnitude reads the definitions of that
    // value, not only its state: definitionRule. It is derived again on every run.)
    bool square = readsDefinitions(*op);
    if (resumed && !square && !dirty.count(op) && !isa<dist::RecvOp, dist::StageSelectOp>(op) &&
        llvm::none_of(op->getOperands(), [&](Value v) { return changed.count(v); })) {
      ++stats.reusedStates; // its rule's input is unchanged
      continue;
    }
    options.deadline.check("the layout engine's plan run");
    Progress::count("the layout engine's plan run", done, (int64_t)ops.size());
    std::vector<const State *> in;
    for (Value v : op->getOperands())
      in.push_back(&planStates[v]);
    ctx.fired.clear();
    if (auto call = dyn_cast<func::CallOp>(op)) {
      std::vector<State> results = calls.plan(call, in);
      rulesOf[op] = ctx.fired;
      for (auto [r, s] : llvm::zip(call.getResults(), results)) {
        if (spec.pipelineAxis >= 0 && s.known && overPipeline(s))
          s = State::unknown(op, "the value is split or summed over the pipeline axis");
        planStates[r] = s;
      }
      stats.functionBodies = calls.bodies;
      stats.summarizedCalls = calls.summarized;
      continue;
    }
    State s;
    if (isa<dist::LoadOp>(op)) {
      ctx.fire("checkpoint: a load under the layout its offsets give");
      s = loadState(*op);
    } else if (isa<dist::RecvOp, dist::StageSelectOp>(op)) {
      ctx.fire("pipeline: a message from the stage that sends it");
      s = route(*op);
    } else if (auto d = draws.find(op); d != draws.end()) {
      const DrawBinding &b = *d->second;
      ctx.fire("random draw: the piece of the reference's mask it stands for");
      s = drawRule(ctx, *op, ref.lookup(b.refMask), b.layout, b.blockShape, b.blockOffset);
    } else if (square &&
               definitionRule(
                   *op, [&](Value v) { return planStates.lookup(v); },
                   [&](Operation &o, const std::vector<const State *> &i) { return planRule(ctx, o, i); },
                   s)) {
      // (not memoized: the rule read more than the operands' states)
      ctx.fire("squares: a square of square roots, or a magnitude, read off definitions");
    } else if (std::optional<StatesKey> key = cache ? memoKey(mesh, *op, in) : std::nullopt) {
      auto it = cache->plan.find(*key);
      if (it != cache->plan.end()) {
        s = it->second.state;
        ctx.fired = it->second.rules;
        ++stats.reusedStates;
      } else {
        s = planRule(ctx, *op, in);
        if (s.known)
          cache->plan.emplace(std::move(*key), LayoutCache::Impl::Memo{s, ctx.fired});
      }
    } else {
      s = planRule(ctx, *op, in);
    }
    rulesOf[op] = ctx.fired;
    // On a pipelined plan, the ranks of other stages hold copies of what a stage's
    // ranks computed (with their other coordinates): a state that varies along the
    // pipeline axis would not describe them. (A stage_select of different values is
    // the one exception: a partial sum over the pipeline axis, see route.)
    if (spec.pipelineAxis >= 0 && s.known && overPipeline(s) && !isa<dist::StageSelectOp>(op))
      s = State::unknown(op, "the value is split or summed over the pipeline axis");
    for (Value r : op->getResults()) {
      State &old = planStates[r];
      if (resumed && !(old == s))
        changed.insert(r);
      old = s;
    }
  }
}

std::vector<VerifyResult::ProofRule>
Run::rulesOnWay(Value v, const llvm::DenseMap<Operation *, std::vector<std::string>> &rules,
                llvm::ArrayRef<Operation *> order) {
  // The ops `v` depends on, each once (iteratively: plans are deep), then their rules
  // counted in the program's order.
  llvm::DenseSet<Operation *> seen;
  std::vector<Value> stack{v};
  while (!stack.empty()) {
    Value x = stack.back();
    stack.pop_back();
    Operation *def = x.getDefiningOp();
    if (!def || !seen.insert(def).second)
      continue;
    for (Value o : def->getOperands())
      stack.push_back(o);
  }
  std::vector<VerifyResult::ProofRule> out;
  std::map<std::string, size_t> at;
  for (Operation *op : order)
    if (seen.count(op))
      if (auto r = rules.find(op); r != rules.end())
        for (const std::string &rule : r->second) {
          auto [it, fresh] = at.emplace(rule, out.size());
          if (fresh)
            out.push_back({rule, 0});
          ++out[it->second].count;
        }
  return out;
}

std::vector<VerifyResult::ProofRule> Run::rulesOnWay(Value v,
                                                     const std::vector<std::string> &also) {
  if (planOrder.empty())
    planOrder = spec.planOps();
  std::vector<VerifyResult::ProofRule> out = rulesOnWay(v, rulesOf, planOrder);
  for (const std::string &rule : also)
    if (llvm::none_of(out, [&](const VerifyResult::ProofRule &r) { return r.rule == rule; }))
      out.push_back({rule, 0});
  return out;
}

bool Run::overPipeline(const State &s) const {
  std::vector<int> axes = s.splitAxes();
  axes.insert(axes.end(), s.partial.begin(), s.partial.end());
  axes.insert(axes.end(), s.partialMax.begin(), s.partialMax.end());
  for (auto [a, k] : s.rankCoeff)
    axes.push_back(a);
  return std::find(axes.begin(), axes.end(), spec.pipelineAxis) != axes.end();
}

State Run::route(Operation &op) {
  // A pipeline stage's ops run on its ranks and (docs/pipeline.md, Interp/PlanWalk.h)
  // every other rank holds what the stage's rank with its other coordinates computed;
  // the pipeline analysis and the schedule check make sure that no rank uses a value
  // it has not computed or received. So states do not depend on stages, and a message
  // carries its operand's state -- unless that state is split or summed over the
  // pipeline axis, whose coordinate the message changes.
  if (auto sel = dyn_cast<dist::StageSelectOp>(op)) {
    // Each stage takes its own value: one state when they all hold the same; else,
    // where they are laid out alike, a partial sum over the pipeline axis (the ranks
    // of stage s hold value s, so a sum over the axis is the sum of the values), which
    // only a reduction over that axis completes -- any other use leaves a state over
    // the pipeline axis, which the run refuses.
    const State &first = planStates[sel.getValues()[0]];
    bool same = true;
    std::vector<std::pair<TermId, Rational>> summands;
    for (Value v : sel.getValues()) {
      const State &s = planStates[v];
      if (!s.known)
        return s;
      if (overPipeline(s) || s.split != first.split || s.global != first.global ||
          s.partial != first.partial || !s.partialMax.empty())
        return State::unknown(&op, "the stages select values the layout engine does not show "
                                   "equal, nor laid out alike (" + ctx.show(s) + " and " +
                                   ctx.show(first) + ")");
      same &= s.term == first.term && s.factor == first.factor;
      summands.push_back({s.term, s.factor});
    }
    if (same)
      return first;
    State sum = first;
    std::tie(sum.term, sum.factor) = terms.sum(
        headFrom("ref.add", DictionaryAttr::get(op.getContext()), first.global), summands);
    sum.broadcast = false;
    sum.partial = sortedUnion(first.partial, {spec.pipelineAxis});
    return sum;
  }
  auto match = spec.recvFrom.find(&op);
  if (match == spec.recvFrom.end())
    return State::unknown(&op, "a receive without its send");
  const State &sent = planStates[match->second->getOperand(0)];
  if (sent.known && overPipeline(sent))
    return State::unknown(&op, "the message's value is split or summed over the pipeline axis");
  return sent;
}

bool Run::outputs(std::vector<std::pair<SourceLoc, std::string>> &reasons, int64_t &checked,
                  std::vector<VerifyResult::Departure> &found) {
  Operation *ret = spec.plan.getBody().front().getTerminator();
  std::set<Operation *> explained;
  bool all = true;
  // Outputs with the declared layout but other terms are compared by pieces
  // (Pieces.cpp), all in one comparison whose cuts come from every one of them: a
  // first pass finds them, the second decides every output.
  PieceComparison pieces(terms, spec.plan.getContext(), options.deadline);
  bool anyPieces = false;
  // Where the plan departs, and the outputs it reaches: one report per departure;
  // of the outputs it explains, only the first one's difference is reported too.
  std::unique_ptr<DepartureFinder> departures;
  struct Departed {
    DepartureFinder::Found at;
    std::vector<std::string> outputs;
  };
  std::vector<Departed> departed;
  std::map<Operation *, size_t> departedIndex;
  std::vector<Check> checks;
  for (const Binding &b : spec.planOutputs)
    checks.push_back({b, ret->getOperand(b.index), "output `" + b.refName + "`"});
  checks.insert(checks.end(), extraChecks.begin(), extraChecks.end());
  for (int pass = 0; pass < 2; ++pass)
  for (const Check &check : checks) {
    const Binding &b = check.b;
    auto it = std::find(spec.refOutputs.begin(), spec.refOutputs.end(), b.refName);
    size_t k = it - spec.refOutputs.begin();
    State want = State::unknown(nullptr, "it is not an output of the reference");
    if (it != spec.refOutputs.end() && k < refOutputs.size())
      want = refOutputs[k];
    State got = planStates[check.value];
    std::string out = check.label + ": ";
    if (pass == 1)
      ++checked;
    if (!want.known || !got.known) {
      if (pass == 0)
        continue;
      const State &u = want.known ? got : want;
      all = false;
      if (u.origin && !explained.insert(u.origin).second)
        continue;
      SourceLoc at = u.origin ? toSourceLoc(u.origin->getLoc()) : toSourceLoc(b.loc);
      std::string what = u.origin ? "`" + u.origin->getName().getStringRef().str() + "`" : "";
      reasons.push_back({at, out + (want.known ? "" : "the reference: ") + what +
                                 (what.empty() ? "" : ": ") + u.reason() +
                                 (want.known ? partialSince(u) : "")});
      if (want.known && u.origin && u.partialOperand >= 0 && u.origin->getNumResults())
        found.push_back({at, spec.nameOf(u.origin->getResult(0)) + " = " + opName(*u.origin),
                         reasons.back().second, u.origin}); // (a partial sum's total needed)
      continue;
    }
    State expected = want;
    expected.split.assign(b.layout.dims.size(), {});
    bool modelled = true;
    for (size_t d = 0; d < b.layout.dims.size() && d < want.global.size(); ++d) {
      std::string why;
      modelled &= !(b.layout.zigzagAt(d) && b.layout.padded) &&
                  layoutDim(spec.mesh, b.layout, d, want.global[d], expected.split[d], why);
    }
    // A padded output: the reference's value, then padding whose content does not
    // matter -- the plan's value must begin with the reference's (compared by pieces).
    int padDim = b.layout.padded ? paddedDim(spec.mesh, b.layout, want.global) : -1;
    bool padOk = padDim != -2 && modelled; // padding in several dimensions: not modelled
    if (!padOk)
      padDim = -1;
    if (padDim >= 0)
      expected.global[padDim] = paddedSize(spec.mesh, b.layout, want.global, padDim);
    expected.partial.clear();
    bool sums = true; // (a partial average: the ranks' values sum to n times the value)
    for (auto [axis, kind] : b.layout.partial) {
      sums &= kind != ReduceKind::Max;
      if (spec.mesh.shape[axis] > 1) {
        expected.partial.push_back(axis);
        if (kind == ReduceKind::Avg)
          expected.factor = expected.factor * Rational(spec.mesh.shape[axis]);
      }
    }
    std::sort(expected.partial.begin(), expected.partial.end());
    std::vector<std::string> compared; // (what the comparison used: the proof trace)
    // Held under another global shape (a reshape made dimensions of local size 1): so
    // described under the reference's where that gives the same blocks (placedAs).
    if (State placed; got.global != expected.global && padDim < 0 &&
                      placedAs(ctx, *ret, got, expected.global, placed)) {
      got = std::move(placed);
      compared.push_back("placement: the output described under the reference's shape");
    }
    for (size_t d = 0; d < got.split.size() && d < expected.split.size(); ++d)
      if (State plain; windowsAsBlocks(ctx, spec.plan.getContext(), got, d, expected.split[d], plain)) {
        got = std::move(plain); // (rows chosen per rank: as the declared blocks)
        compared.push_back("windows: rows chosen per rank, as the declared blocks");
      }
    bool layoutSame = sums && padOk && got.partialMax.empty() && got.rankCoeff.empty() && got.split == expected.split &&
                      got.partial == expected.partial && got.global == expected.global;
    bool same = layoutSame && padDim < 0 && got.term == expected.term &&
                got.factor == expected.factor;
    // The same layout, other terms: perhaps the same value computed by other row
    // pieces (a whole-batch reference against microbatches).
    if (pass == 0) {
      if (layoutSame && !same) {
        pieces.add(got.term);
        pieces.add(expected.term);
        anyPieces = true;
      }
      continue;
    }
    if (layoutSame && !same && padDim >= 0) {
      same = pieces.equalPrefix(got.term, got.factor, expected.term, expected.factor, padDim,
                                want.global[padDim]);
      compared.push_back("padding: the value begins the padded buffer, compared by pieces");
      compared.insert(compared.end(), pieces.lastRules.begin(), pieces.lastRules.end());
    } else if (layoutSame && !same && anyPieces) {
      same = pieces.equal(got.term, got.factor, expected.term, expected.factor);
      compared.push_back("pieces: the same value over the row pieces the inputs' slices cut");
      compared.insert(compared.end(), pieces.lastRules.begin(), pieces.lastRules.end());
    }
    if (same && options.proofTrace) {
      std::vector<VerifyResult::ProofRule> rules = rulesOnWay(check.value, compared);
      Operation *refReturn = spec.reference.getBody().front().getTerminator();
      if (!refIdentities.empty() && it != spec.refOutputs.end() &&
          k < refReturn->getNumOperands()) {
        std::vector<Operation *> order;
        for (Operation &op : spec.reference.getBody().front())
          order.push_back(&op);
        std::vector<VerifyResult::ProofRule> more =
            rulesOnWay(refReturn->getOperand(k), refIdentities, order);
        rules.insert(rules.end(), more.begin(), more.end());
      }
      proof.push_back({out.substr(0, out.size() - 2), "layout", std::move(rules)});
    }
    if (!same) {
      all = false;
      if (!departures)
        departures = std::make_unique<DepartureFinder>(spec, terms, planStates,
                                                       referenceTerms());
      DepartureFinder::Found d = departures->of(check.value);
      if (d.op) {
        auto [it, fresh] = departedIndex.emplace(d.op, departed.size());
        if (fresh)
          departed.push_back({d, {}});
        departed[it->second].outputs.push_back(b.refName);
        if (!fresh)
          continue;
      }
      // At the op computing the output, where there is one: the multiple of the
      // reference's value it holds, compared piece by piece, where no departure is
      // found (a microbatch's pieces are no values the walk can meet).
      Operation *def = check.value.getDefiningOp();
      SourceLoc at = def ? toSourceLoc(def->getLoc()) : toSourceLoc(b.loc);
      std::string scaled = layoutSame && padDim < 0 && anyPieces
                               ? pieces.scaling(got.term, got.factor, expected.term, expected.factor)
                               : "";
      reasons.push_back({at, out + (!scaled.empty() ? scaled
                                    : "the layout engine finds " + describe(got) +
                                          " where the reference's is " + describe(expected) +
                                          " (not shown equal" + termDifference(got, expected) +
                                          ")" + layoutHint(got, expected))});
    }
  }
  size_t firstFound = found.size();
  for (const Departed &d : departed) {
    std::string names;
    for (size_t i = 0; i < d.outputs.size() && i < 6; ++i)
      names += (i ? ", `" : "`") + d.outputs[i] + "`";
    if (d.outputs.size() > 6)
      names += " and " + std::to_string(d.outputs.size() - 6) + " more";
    std::string op = spec.nameOf(d.at.op->getResult(0)) + " = " + opName(*d.at.op);
    found.push_back({toSourceLoc(d.at.op->getLoc()), op,
                     "`" + spec.nameOf(d.at.op->getResult(0)) + "` = " + opName(*d.at.op) +
                         ": on the way to output" + (d.outputs.size() > 1 ? "s " : " ") +
                         names + ", the plan departs from the reference here: " + d.at.why,
                     d.at.op});
  }
  // The departures head the reasons.
  std::vector<std::pair<SourceLoc, std::string>> first;
  for (size_t i = firstFound; i < found.size(); ++i)
    first.push_back({found[i].location, found[i].message});
  reasons.insert(reasons.begin(), first.begin(), first.end());
  return all;
}

} // namespace planproof::layouts

static VerifyResult verifyWith(const Spec &spec, const VerifyOptions &options,
                               LayoutCache::Impl *cache) {
  auto start = std::chrono::steady_clock::now();
  VerifyResult r;
  r.verdict = Verdict::Inconclusive;
  r.stats.ranks = spec.mesh.numRanks();
  auto finish = [&]() {
    r.stats.milliseconds =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
            .count();
    return r;
  };
  std::string why = !spec.undecidable.empty() ? spec.undecidable : layoutUncovered(spec);
  if (!why.empty()) {
    r.inconclusiveReasons.push_back({spec.undecidableAt.file.empty() ? SourceLoc{spec.path}
                                                                      : spec.undecidableAt,
                                     why});
    return finish();
  }
  // (Structural facts, reported by both engines.)
  r.warnings = discardedCollectives(spec);
  r.violations = missingOutputs(spec);
  try {
    // A pipelined plan's structure and schedule first: the states below assume every
    // message matched and no deadlock. Engine/Schedule.h decides both exactly, at the
    // plan's own degrees, without values: what it finds is a violation here as in the
    // element engine (the same check, the same report).
    checkSchedule(spec, r);
    // Independent random streams: the same check as the element engine's (Z3, over
    // symbolic ranks and elements); what it finds is a violation, and a stream it does
    // not decide leaves the verdict inconclusive. The plan's draws are then renamed to
    // the pieces of the reference's masks they stand for (drawRule).
    if (spec.rngIndependent && r.violations.empty()) {
      options.deadline.check("checking random streams");
      checkRandomStreams(spec, SolverBudget{options.solverBudget, &options.deadline}, r);
    }
    if (!r.violations.empty()) {
      // (Fix hints are shown only once re-verified, which is the element engine's;
      // the layout engine shows none.)
      for (Violation &v : r.violations) {
        v.hint.clear();
        v.fix.reset();
      }
      r.verdict = Verdict::Violated;
      return finish();
    }
    if (spec.resume) { // (a checkpoint spec: two steps, Checkpoints.cpp)
      auto own = std::make_unique<TermPool>();
      verifyCheckpointByLayouts(spec, options, *own, r);
      r.stats.decidedCanonical = r.verdict == Verdict::Verified ? r.stats.obligations : 0;
      if (options.keepMemory)
        llvm::BuryPointer(std::move(own));
      return finish();
    }
    const bool streamsOpen = !r.inconclusiveReasons.empty();
    auto own = std::make_unique<TermPool>();
    auto runPtr = std::make_unique<Run>(spec, options, cache ? cache->terms : *own);
    Run &run = *runPtr;
    if (cache)
      run.reference(r.stats, *cache);
    else
      run.reference(r.stats);
    run.plan(r.stats, cache);
    bool shown = run.outputs(r.inconclusiveReasons, r.stats.obligations, r.departures);
    if (r.stats.obligations == 0) // (no vacuous proofs, as in the element engine)
      r.inconclusiveReasons.push_back({toSourceLoc(spec.plan.getLoc()), kNothingToCheck});
    else if (shown && !streamsOpen) {
      r.verdict = Verdict::Verified;
      r.proof = std::move(run.proof);
    }
    if (cache)
      run.keep(*cache);
    r.stats.decidedCanonical = r.verdict == Verdict::Verified ? r.stats.obligations : 0;
    if (options.keepMemory) {
      llvm::BuryPointer(std::move(runPtr));
      llvm::BuryPointer(std::move(own));
    }
  } catch (const TimeLimit &t) {
    r.inconclusiveReasons.push_back({SourceLoc{spec.path}, t.what()});
  } catch (const std::exception &e) {
    r.inconclusiveReasons.push_back({SourceLoc{spec.path},
                                     std::string("the layout engine stopped: ") + e.what()});
  }
  return finish();
}

VerifyResult planproof::verifyByLayouts(const Spec &spec, const VerifyOptions &options) {
  return verifyWith(spec, options, nullptr);
}

VerifyResult planproof::verifyByLayouts(const Spec &spec, const VerifyOptions &options,
                                        LayoutCache &cache) {
  return verifyWith(spec, options, cache.impl.get());
}
