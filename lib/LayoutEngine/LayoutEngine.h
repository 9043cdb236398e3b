//===- LayoutEngine.h - proofs by layouts, not elements ----------*- C++ -*-===//
//
// The layout engine (docs/layout-engine.md): a second engine that proves a plan equal
// to its reference without executing any element or enumerating any rank. Each plan
// value is known by what it holds on every rank at once -- a reference term (a
// hash-consed expression over the reference's inputs), a rational factor, a split of
// each dimension over mesh axes and the mesh axes over which it is a partial sum --
// and every op moves those states by a transfer rule (Rules.cpp) that states its side
// conditions. A plan is verified when every output holds its reference output's term
// with factor 1 under the output's declared layout. Where no rule applies, the run is
// *inconclusive* at that op, with the rule's reason. Its only violations are a
// pipelined plan's schedule's, from the exact check it shares with the element engine
// (Engine/Schedule.h); the element engine finds and explains the others.
//
// Its cost is linear in the number of ops and independent of tensor sizes and of the
// number of ranks (but for a slice of a split value: one term piece per block).
//
//===----------------------------------------------------------------------===//
#ifndef PLANPROOF_LAYOUTENGINE_LAYOUTENGINE_H
#define PLANPROOF_LAYOUTENGINE_LAYOUTENGINE_H

#include "Engine/Verifier.h"
#include "Spec/Spec.h"

#include <functional>
#include <memory>

namespace planproof {

/// Decides `spec` by layouts: Verified, or Inconclusive with located reasons (never
/// Violated). Never throws; honours options.deadline.
VerifyResult verifyByLayouts(const Spec &spec, const VerifyOptions &options = {});

/// What the layout engine keeps between runs on specs that share their reference (a
/// planner's candidate plans): the reference's terms and states, and each plan op's
/// result state keyed by the op (name, attributes, operand and result types), the
/// mesh and its operands' states -- a rule's whole input -- so that a candidate
/// re-derives only the states its changes reach (docs/layout-engine.md, "Reuse").
/// Attributes and types are compared by identity: one cache serves specs of one
/// MLIRContext only, and a spec of another reference or context replaces what it holds.
class LayoutCache {
public:
  LayoutCache();
  ~LayoutCache();
  LayoutCache(const LayoutCache &) = delete;
  LayoutCache &operator=(const LayoutCache &) = delete;
  struct Impl;
  std::unique_ptr<Impl> impl;
};

/// verifyByLayouts, reusing and filling `cache`; the same verdict and reasons as
/// without it. stats.reusedStates counts the plan states taken from the cache.
VerifyResult verifyByLayouts(const Spec &spec, const VerifyOptions &options, LayoutCache &cache);

/// `--engine auto`: the layout engine's result `layout` where it decided (verified, or
/// a schedule violation); else the element engine's, run by `element` -- and where that
/// is inconclusive too (a production-sized plan past its budget), with the layout
/// engine's located reasons first: where the plan departs from its reference is the
/// report's most useful line.
VerifyResult verifyAuto(const VerifyResult &layout,
                        const std::function<VerifyResult()> &element);

} // namespace planproof

#endif
