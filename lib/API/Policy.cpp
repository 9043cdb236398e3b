//===- Policy.cpp - which engines decide a spec, on which reading ----------===//
//
// Policy.h.
//
//===----------------------------------------------------------------------===//
#include "API/Policy.h"

#include "LayoutEngine/LayoutEngine.h"

using namespace planproof;

std::optional<EngineChoice> planproof::engineNamed(const std::string &name) {
  if (name == "element")
    return EngineChoice::Element;
  if (name == "layout")
    return EngineChoice::Layout;
  if (name == "auto")
    return EngineChoice::Auto;
  return std::nullopt;
}

const char *planproof::engineName(EngineChoice e) {
  return e == EngineChoice::Element ? "element" : e == EngineChoice::Layout ? "layout" : "auto";
}

const Spec *planproof::readKept(KeptReading &slot, bool reduceShapes,
                                const std::function<bool(Spec &, Diagnostics &)> &load) {
  if (!slot.tried) {
    slot.tried = true;
    slot.spec = std::make_unique<Spec>();
    slot.spec->reduceShapes = reduceShapes;
    slot.spec->keepCalls = true;
    Diagnostics ignored;
    bool ok = false;
    try {
      ok = load(*slot.spec, ignored);
    } catch (const std::exception &) {
    }
    if (!ok)
      slot.spec.reset();
  }
  return slot.spec.get();
}

Decision planproof::decideSpec(const SpecReadings &readings, EngineChoice engine,
                               const VerifyOptions &options, const DecideCaches &caches) {
  Decision d;
  auto byLayouts = [&](const Spec &spec, LayoutCache *cache) {
    return cache ? verifyByLayouts(spec, options, *cache) : verifyByLayouts(spec, options);
  };
  if (engine != EngineChoice::Element && readings.kept) {
    if (const Spec *kept = readings.kept()) {
      if (kept->keptCallsRefused.empty()) {
        // Calls the layout engine summarizes: proved once per function and boundary
        // state, or read again expanded. (Not through the caches: their states belong
        // to the expanded reading.)
        VerifyResult r = byLayouts(*kept, nullptr);
        if (r.verdict == Verdict::Verified) {
          d.result = std::move(r);
          d.read = kept;
          return d;
        }
      } else if (kept->keptCallsRefused == kNoCalls) {
        d.read = kept; // no calls: the same spec as the expanded reading
      }
    }
  }
  if (!d.read && readings.expanded)
    d.read = readings.expanded();
  if (!d.read)
    return d;
  const Spec &spec = *d.read;
  auto element = [&] {
    return caches.elements ? verifySpec(spec, options, *caches.elements)
                           : verifySpec(spec, options);
  };
  if (engine == EngineChoice::Element) {
    d.result = element();
  } else {
    VerifyResult layout = byLayouts(spec, caches.layouts);
    d.result = engine == EngineChoice::Layout ? std::move(layout) : verifyAuto(layout, element);
  }
  // The element engine's proof: every output element decided, by canonical forms or
  // past them (the concrete search and Z3 found no difference).
  VerifyResult &r = d.result;
  if (options.proofTrace && r.verdict == Verdict::Verified && r.proof.empty()) {
    VerifyResult::Proof p{"every output", "element", {}};
    p.rules.push_back({"equal canonical forms", r.stats.decidedCanonical});
    if (r.stats.obligations > r.stats.decidedCanonical)
      p.rules.push_back({"decided by Z3 past canonical forms",
                         r.stats.obligations - r.stats.decidedCanonical});
    r.proof.push_back(std::move(p));
  }
  return d;
}
