//===- ElementCache.cpp - the element engine's reuse between candidates ---===//
//
// Verifier.h's ElementCache: a planner's candidate plans share their reference, whose
// symbolic execution is most of a small plan's cost. The cache holds the expression
// pool and the reference's values by position (arguments, then each op's results), so
// that a structurally identical reference -- the copy Session::loadPlan makes, with
// other mlir::Values -- takes them over. Sound because the reference's values depend
// only on what referenceKey and the input names, bounds and signs describe, and every
// comparison happens within the one pool.
//
//===----------------------------------------------------------------------===//
#include "Engine/Engine.h"

using namespace planproof;

struct planproof::ElementCache::Impl {
  std::vector<uintptr_t> key;
  std::vector<std::string> inputs;
  std::vector<int64_t> bounds;
  std::vector<bool> nonnegative;
  std::unique_ptr<ExprPool> pool;
  /// The reference's run, once one completed: per argument and per op result (in
  /// order), its value where the run recorded one.
  bool filled = false;
  std::vector<std::optional<SymTensor>> values;
  std::map<std::string, SymTensor> byName;
  /// The pool's terms once the reference had run, and a fresh pool's term budget: a
  /// run on the reused pool gets that budget beyond what earlier candidates left in it
  /// (so a candidate is never inconclusive for a budget a fresh run would not exceed).
  size_t referenceTerms = 0, budget = 0;
  /// Past this many terms left by earlier candidates, the next run starts afresh.
  static constexpr size_t kMaxLeftTerms = 8u << 20;

  bool holds(const Spec &spec, const std::vector<uintptr_t> &k) const {
    return pool && k == key && spec.refInputs == inputs && spec.refInputBounds == bounds &&
           spec.refInputNonnegative == nonnegative &&
           (!filled || pool->numTerms() - referenceTerms <= kMaxLeftTerms);
  }
};

ElementCache::ElementCache() : impl(std::make_unique<Impl>()) {}
ElementCache::~ElementCache() = default;

namespace {

/// The reference's values in order: its arguments, then every op's results.
std::vector<mlir::Value> referenceValues(const Spec &spec) {
  std::vector<mlir::Value> out;
  mlir::Block &body = spec.reference.getBody().front();
  for (mlir::BlockArgument a : body.getArguments())
    out.push_back(a);
  for (mlir::Operation &op : body)
    for (mlir::Value r : op.getResults())
      out.push_back(r);
  return out;
}

} // namespace

namespace planproof::engine {

/// The reference's run: the cache's when it holds this reference's, else a new one,
/// which then fills the cache.
bool Engine::runReferenceCached(RunFailure &failure) {
  ElementCache::Impl &c = *elementCache;
  std::vector<mlir::Value> values = referenceValues(spec);
  if (c.filled && c.values.size() == values.size()) {
    pool.setTermBudget(c.budget + (pool.numTerms() - c.referenceTerms));
    for (size_t i = 0; i < values.size(); ++i)
      if (c.values[i])
        refTrace.values[values[i]] = *c.values[i];
    refTrace.byName = c.byName;
    result.stats.reusedReference = true;
    return true;
  }
  if (!runReference(spec, pool, refTrace, failure, nullptr, "", options.deadline))
    return false;
  c.values.clear();
  for (mlir::Value v : values) {
    auto it = refTrace.values.find(v);
    c.values.push_back(it == refTrace.values.end() ? std::nullopt
                                                   : std::optional<SymTensor>(it->second));
  }
  c.byName = refTrace.byName;
  c.referenceTerms = pool.numTerms();
  c.filled = true;
  return true;
}

} // namespace planproof::engine

VerifyResult planproof::verifySpec(const Spec &spec, const VerifyOptions &options,
                                   ElementCache &cache) {
  std::vector<uintptr_t> key = spec.referenceKey();
  // A resumed step continues from another step's state: not a plain reference run.
  if (key.empty() || spec.resume)
    return verifySpec(spec, options);
  ElementCache::Impl &c = *cache.impl;
  if (!c.holds(spec, key)) {
    c = ElementCache::Impl();
    c.key = std::move(key);
    c.inputs = spec.refInputs;
    c.bounds = spec.refInputBounds;
    c.nonnegative = spec.refInputNonnegative;
    c.pool = std::make_unique<ExprPool>();
    c.budget = c.pool->termBudget();
  }
  try {
    engine::Engine e(spec, options, c.pool.get());
    e.reuse(&c);
    return e.run();
  } catch (const std::exception &e) {
    VerifyResult r;
    r.inconclusiveReasons.push_back(
        {toSourceLoc(spec.plan.getLoc()), std::string("internal error: ") + e.what()});
    return r;
  }
}
