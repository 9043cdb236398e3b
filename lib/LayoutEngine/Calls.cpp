//===- Calls.cpp - functions proved once per boundary state ---------------===//
//
// Repetition (docs/layout-engine.md): with its calls kept, a spec states a repeated
// layer once, in the reference (@ref_layer) and in the plan (@plan_layer), with their
// derived vjp functions; this engine then proves each plan function once per boundary
// state instead of once per call.
//
// Reference calls are applications: result k of `call @g(a_1..a_n)` is the term
// call{@g, k}(a_1..a_n) over the operands' terms, complete (replicated) -- an
// uninterpreted function, equal to another term only when the function, the result
// and every operand are equal. That holds of every function: it computes one value
// from its arguments.
//
// A plan call `@f(b_1..b_m)` whose operands hold (known states) terms T_i under their
// layouts and factors is summarized: f's body is run once by the plan's rules on
// states that keep each operand's layout, factor and partial sums, but hold a
// variable X_c in place of its term (operands with equal terms share one; an integer
// input's bound stays with its variable). The rules hold for every value of their
// operands, so the summary's result states, over the variables, hold for any terms put
// in their place -- the T_i. A summary is kept per (function, boundary state) and
// serves every later call with that boundary state.
//
// A result of the summary is then named by the reference: for a reference call `@g`
// whose every operand term is one of the T_i (found by the terms; the function names
// play no part), g's body is run by the reference's rules on the same variables. Where
// the plan's result k holds r x R and g's result k' holds q x Q with R = Q, the plan's
// result holds r/q x (g's result k' on the T_i), which is that reference call's term:
// both sides compute the same function of the same values. A result that is a variable
// is that operand's term; one without variables is itself; any other result without
// such a reference result is unknown (a state nothing may prove from). Nested calls
// are summarized the same way inside bodies.
//
// What is given up, never assumed: a rule that would have read an operand's term (a
// broadcast's source, a one-hot's row sums, the definitions behind a square) sees a
// variable instead and may not apply -- the result is then unknown and the verdict
// inconclusive, and the caller reads the spec expanded instead (tools/planproof).
//
//===----------------------------------------------------------------------===//
#include "LayoutEngine/Calls.h"
#include "LayoutEngine/Bindings.h"

#include "mlir/IR/SymbolTable.h"

#include <algorithm>
#include <set>

using namespace mlir;

namespace planproof::layouts {

namespace {
/// The most reference calls tried for one plan call.
constexpr int kMaxCandidates = 256;
/// Nested calls deeper than this are not summarized (the loader refuses recursion).
constexpr int kMaxDepth = 64;

std::string resultHead(func::FuncOp f, unsigned k, const Shape &shape) {
  std::string h = "func.call{callee=@" + f.getSymName().str() + ";result=" + std::to_string(k) +
                  ";}:";
  for (int64_t d : shape)
    h += std::to_string(d) + "x";
  return h;
}

/// The layout and factor of `s` holding `var` in place of its term: every field that
/// names a term (a broadcast's source, row sums) is dropped.
State abstractOf(const State &s, TermId var) {
  State a;
  a.known = true;
  a.term = var;
  a.factor = s.factor;
  a.global = s.global;
  a.split = s.split;
  a.partial = s.partial;
  a.partialMax = s.partialMax;
  a.rankCoeff = s.rankCoeff;
  a.isConst = s.isConst;
  a.constValue = s.constValue;
  return a;
}

std::vector<State> unknownResults(Operation *op, const State &why) {
  State u = why.known ? State::unknown(op, "a call's operand is unknown") : why;
  return std::vector<State>(op->getNumResults(), u);
}
} // namespace

TermId Calls::variable(int index, const State &of) {
  int64_t bound = terms.boundOf(of.term);
  std::string name = "<arg " + std::to_string(index) +
                     (bound > 0 ? " in [0, " + std::to_string(bound) + ")" : "") + ">";
  TermId v = terms.leaf(name, shapeText(of.global));
  if (bound > 0)
    terms.setBound(v, bound);
  variables.insert(v);
  return v;
}

bool Calls::holdsVariable(TermId t) {
  if (variables.count(t))
    return true;
  if (auto it = holds.find(t); it != holds.end())
    return it->second;
  bool any = false;
  for (TermId o : terms.operands(t))
    if ((any = holdsVariable(o)))
      break;
  holds[t] = any;
  return any;
}

std::vector<State> Calls::reference(func::CallOp call, const std::vector<const State *> &in) {
  for (const State *s : in)
    if (!s->known)
      return unknownResults(call, *s);
  auto g = SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(call, call.getCalleeAttr());
  RefCall rc;
  rc.callee = g;
  std::vector<TermId> operands;
  for (const State *s : in) {
    rc.terms.push_back(s->term);
    rc.factors.push_back(s->factor);
    rc.globals.push_back(s->global);
    operands.push_back(terms.scaled(s->term, s->factor));
  }
  std::vector<State> out;
  for (auto [k, r] : llvm::enumerate(call.getResults())) {
    auto t = dyn_cast<RankedTensorType>(r.getType());
    if (!t) {
      rc.applies.push_back(0);
      out.push_back(State::unknown(call, "a call's result that is not a tensor"));
      continue;
    }
    State s;
    s.known = true;
    s.global.assign(t.getShape().begin(), t.getShape().end());
    s.split.assign(s.global.size(), {});
    s.term = terms.node(resultHead(g, k, s.global), operands);
    rc.applies.push_back(s.term);
    out.push_back(s);
  }
  size_t index = refCalls.size();
  refCalls.push_back(std::move(rc));
  std::set<TermId> seen;
  for (TermId t : refCalls.back().terms)
    if (seen.insert(t).second)
      byOperand[t].push_back(index);
  return out;
}

std::vector<State> Calls::runBody(func::FuncOp f, const std::vector<State> &args,
                                  bool planSide) {
  ++bodies;
  llvm::DenseMap<Value, State> st;
  Block &body = f.getBody().front();
  for (unsigned i = 0; i < body.getNumArguments(); ++i)
    st[body.getArgument(i)] = args[i];
  auto rule = [&](Operation &o, const std::vector<const State *> &i) {
    return planSide ? planRule(ctx, o, i) : referenceRule(ctx, o, i);
  };
  for (Operation &op : body) {
    deadline.check("the layout engine's function summaries");
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      std::vector<State> out;
      for (Value v : ret.getOperands())
        out.push_back(st.lookup(v));
      return out;
    }
    std::vector<const State *> in;
    for (Value v : op.getOperands())
      in.push_back(&st[v]);
    if (auto call = dyn_cast<func::CallOp>(op)) {
      std::vector<State> outs = planSide ? plan(call, in) : reference(call, in);
      for (auto [r, s] : llvm::zip(call.getResults(), outs))
        st[r] = s;
      continue;
    }
    // (As the top-level walks: the plan's reads definitions only where its rule does.)
    State s;
    if ((planSide && !readsDefinitions(op)) ||
        !definitionRule(op, [&](Value v) { return st.lookup(v); }, rule, s))
      s = rule(op, in);
    if (!planSide)
      ctx.shapes.note(op, in, s);
    for (Value r : op.getResults())
      st[r] = s;
  }
  return {};
}

const std::vector<State> &Calls::referenceOn(const RefCall &rc, const std::vector<int> &at,
                                             const std::vector<TermId> &vars) {
  func::FuncOp g = rc.callee;
  StatesKey key{g.getSymName().str(), {}, {}};
  std::vector<State> &args = key.states;
  for (size_t j = 0; j < rc.terms.size(); ++j) {
    State a;
    a.known = true;
    a.term = vars[at[j]];
    a.factor = rc.factors[j];
    a.global = rc.globals[j];
    a.split.assign(a.global.size(), {});
    args.push_back(a);
  }
  auto it = refSummaries.find(key);
  if (it != refSummaries.end())
    return it->second;
  ++depth;
  std::vector<State> out = depth > kMaxDepth ? std::vector<State>() : runBody(g, args, false);
  --depth;
  return refSummaries[key] = std::move(out);
}

std::vector<Calls::Candidate> Calls::candidatesFor(const std::vector<const State *> &in) {
  // The reference calls on the same values, fewest-shared operands first.
  std::vector<size_t> order(in.size());
  for (size_t i = 0; i < in.size(); ++i)
    order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return byOperand.lookup(in[a]->term).size() < byOperand.lookup(in[b]->term).size();
  });
  std::vector<Candidate> candidates;
  std::set<size_t> tried;
  for (size_t i : order) {
    for (size_t index : byOperand.lookup(in[i]->term)) {
      if ((int)tried.size() >= kMaxCandidates || !tried.insert(index).second)
        continue;
      const RefCall &rc = refCalls[index];
      std::vector<int> at;
      for (TermId t : rc.terms) {
        int found = -1;
        for (size_t k = 0; k < in.size() && found < 0; ++k)
          if (in[k]->term == t)
            found = (int)k;
        if (found < 0)
          break;
        at.push_back(found);
      }
      if (at.size() == rc.terms.size())
        candidates.push_back({&rc, at});
    }
  }
  return candidates;
}

std::vector<State> Calls::plan(func::CallOp call, const std::vector<const State *> &in) {
  // The proof trace: the call's rules are the summary's, made when the body ran (the
  // reference bodies run on the way add none).
  std::vector<std::string> outer = std::move(ctx.fired);
  ctx.fired.clear();
  StatesKey key;
  std::vector<State> out = summarize(call, in, key);
  ctx.fired = std::move(outer);
  ctx.fire("calls: a function's summary, matched with a reference call");
  if (auto r = summaryRules.find(key); r != summaryRules.end())
    for (const std::string &name : r->second)
      ctx.fire(name);
  return out;
}

std::vector<State> Calls::summarize(func::CallOp call, const std::vector<const State *> &in,
                                    StatesKey &key) {
  for (const State *s : in)
    if (!s->known)
      return unknownResults(call, *s);
  auto f = SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(call, call.getCalleeAttr());
  if (depth >= kMaxDepth)
    return unknownResults(call, State::unknown(call, "calls nested too deeply"));
  // The boundary state: each operand's layout and factor on a variable.
  std::vector<TermId> vars(in.size());
  std::vector<State> args;
  key.context = f.getSymName().str();
  for (size_t i = 0; i < in.size(); ++i) {
    size_t c = i; // (the first operand with the same term)
    for (size_t k = 0; k < i; ++k)
      if (in[k]->term == in[i]->term) {
        c = k;
        break;
      }
    vars[i] = variable((int)c, *in[i]);
    args.push_back(abstractOf(*in[i], vars[i]));
    key.states.push_back(args.back());
  }
  std::vector<Candidate> candidates = candidatesFor(in);
  // (The reference body first: the shapes it takes steer the plan's rules.)
  if (!candidates.empty())
    referenceOn(*candidates[0].first, candidates[0].second, vars);
  auto it = planSummaries.find(key);
  if (it == planSummaries.end()) {
    ++depth;
    ctx.fired.clear();
    std::vector<State> made = runBody(f, args, true);
    summaryRules[key] = ctx.fired;
    ctx.fired.clear();
    --depth;
    it = planSummaries.emplace(key, std::move(made)).first;
  }
  ++summarized;
  const std::vector<State> summary = it->second; // (a copy: nested calls may rehash)
  std::vector<State> out(call.getNumResults());
  std::vector<size_t> pending;
  for (size_t k = 0; k < out.size(); ++k) {
    const State &r = k < summary.size() ? summary[k] : State::unknown(call, "no summary");
    if (!r.known) {
      out[k] = State::unknown(call, "in @" + f.getSymName().str() + ": " + r.reason());
      continue;
    }
    // What names a term besides the state's own: kept only where it is free of the
    // variables (a fact of the summary's world, not of this call's).
    State s = r;
    if (s.rowSums && holdsVariable(s.rowSums->of))
      s.rowSums.reset();
    if (s.broadcast && (holdsVariable(s.source) || holdsVariable(s.term))) {
      s.broadcast = false;
      s.source = 0;
      s.sourceDims.clear();
    }
    auto v = std::find(vars.begin(), vars.end(), r.term);
    if (v != vars.end()) { // an operand passed through, moved or scaled
      s.term = in[v - vars.begin()]->term;
      out[k] = s;
    } else if (!holdsVariable(r.term)) {
      out[k] = s;
    } else {
      out[k] = s;
      pending.push_back(k);
    }
  }
  std::vector<bool> named(out.size(), false);
  size_t left = pending.size();
  for (auto &[rc, at] : candidates) {
    if (!left)
      break;
    const std::vector<State> &q = referenceOn(*rc, at, vars);
    for (size_t k : pending) {
      if (named[k])
        continue;
      for (size_t j = 0; j < q.size() && j < rc->applies.size(); ++j)
        if (q[j].known && q[j].term == out[k].term && !q[j].factor.isZero() && rc->applies[j]) {
          out[k].term = rc->applies[j];
          out[k].factor = out[k].factor / q[j].factor;
          named[k] = true;
          --left;
          break;
        }
    }
  }
  for (size_t k : pending)
    if (!named[k])
      out[k] = State::unknown(
          call, "the plan's @" + f.getSymName().str() + " computes a result #" +
                    std::to_string(k) + " (" + terms.str(out[k].term) +
                    ") that no reference call on the same values computes" +
                    (candidates.empty() ? " (no reference call takes these values)" : ""));
  return out;
}

} // namespace planproof::layouts
