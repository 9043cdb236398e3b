//===- Calls.h - functions proved once per boundary state -------*- C++ -*-===//
//
// A spec loaded with its calls kept (Spec::keepCalls: a layer stated once as a private
// function, called per layer and microbatch, its backward passes vjp functions) is
// read by the layout engine without expanding the calls (Calls.cpp,
// docs/layout-engine.md "Repetition").
//
//===----------------------------------------------------------------------===//
#ifndef PLANPROOF_LAYOUTENGINE_CALLS_H
#define PLANPROOF_LAYOUTENGINE_CALLS_H

#include "LayoutEngine/LayoutState.h"
#include "Support/Deadline.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

#include <deque>
#include <unordered_map>

namespace planproof::layouts {

class Calls {
public:
  Calls(RuleContext &ctx, const Deadline &deadline) : ctx(ctx), terms(ctx.terms), deadline(deadline) {}

  /// A reference call's result states: result k of `@g` on the operands' values is the
  /// term call{@g, k}(operands) -- an application of a function nothing looks into --,
  /// complete on every rank. Recorded for the plan's calls to find.
  std::vector<State> reference(mlir::func::CallOp call, const std::vector<const State *> &in);
  /// A plan call's result states, from the function's summary: its body run once per
  /// boundary state (the operands' layouts and factors, their terms replaced by
  /// variables), each result then matched with a result of a reference call on the
  /// same values whose body, run on the same variables, gives the same term.
  std::vector<State> plan(mlir::func::CallOp call, const std::vector<const State *> &in);

  int64_t bodies = 0;     // function bodies run (plan summaries and reference bodies)
  int64_t summarized = 0; // plan calls whose results came from a summary

private:
  /// plan() without its proof trace; `key` gets the summary's boundary state.
  std::vector<State> summarize(mlir::func::CallOp call, const std::vector<const State *> &in,
                               StatesKey &key);
  struct RefCall {
    mlir::func::FuncOp callee;
    std::vector<TermId> terms;   // the operands' terms (unscaled)
    std::vector<Rational> factors;
    std::vector<Shape> globals;
    std::vector<TermId> applies; // per result (0: not a tensor)
  };
  /// A reference call whose every operand's term is a plan operand's, and for each of
  /// its operands that plan operand.
  using Candidate = std::pair<const RefCall *, std::vector<int>>;
  std::vector<Candidate> candidatesFor(const std::vector<const State *> &in);
  TermId variable(int index, const State &of);
  bool holdsVariable(TermId t);
  /// f's body run by the plan's rules (`planSide`) or the reference's, from `args`.
  std::vector<State> runBody(mlir::func::FuncOp f, const std::vector<State> &args,
                             bool planSide);
  /// The reference body of `rc`'s callee on the variables of the plan operands its
  /// operands are (`at[j]`: the plan operand of operand j).
  const std::vector<State> &referenceOn(const RefCall &rc, const std::vector<int> &at,
                                        const std::vector<TermId> &vars);

  RuleContext &ctx;
  TermPool &terms;
  const Deadline &deadline;
  std::deque<RefCall> refCalls;
  llvm::DenseMap<TermId, std::vector<size_t>> byOperand; // operand term -> refCalls
  /// Summaries by callee and boundary states.
  std::unordered_map<StatesKey, std::vector<State>, StatesKeyHash> planSummaries, refSummaries;
  /// The rules that made each plan summary (the proof trace).
  std::unordered_map<StatesKey, std::vector<std::string>, StatesKeyHash> summaryRules;
  llvm::DenseSet<TermId> variables;
  llvm::DenseMap<TermId, bool> holds; // holdsVariable, memoized
  int depth = 0;
};

} // namespace planproof::layouts

#endif
