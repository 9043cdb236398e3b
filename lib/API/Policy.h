//===- Policy.h - which engines decide a spec, on which of its readings ----===//
//
// The one place that says how a spec is decided: the CLI's verify and check-specs, the
// public API's Session::verify and through it the Python package all call decideSpec.
//
// A spec has up to two readings: with its calls kept (Spec::keepCalls: the layout
// engine proves each function once per boundary state, docs/layout-engine.md
// "Repetition") and with its calls expanded (what every engine reads). The policy:
//
//  - element: the element engine on the expanded reading;
//  - layout:  the layout engine on the kept reading when the spec has calls it
//             summarizes; where that does not prove the plan, on the expanded reading;
//  - auto (the default): as layout, then the element engine where the layout engine
//             does not prove the plan (verifyAuto: its verdict, the layout engine's
//             reasons and departures first where both are inconclusive).
//
// Each reading is read at most once and only when the policy needs it; a spec without
// calls is read once (its kept reading is its expanded one).
//
//===----------------------------------------------------------------------===//
#ifndef PLANPROOF_API_POLICY_H
#define PLANPROOF_API_POLICY_H

#include "Engine/Verifier.h"

#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace planproof {

class LayoutCache;
class ElementCache;

enum class EngineChoice { Element, Layout, Auto };

/// The engine --engine NAME (and the Python `engine=`) names: element, layout or auto.
std::optional<EngineChoice> engineNamed(const std::string &name);
const char *engineName(EngineChoice e);

/// The readings of one spec, each made on first use. Either may be empty.
struct SpecReadings {
  /// The spec read with its calls kept, or null where it cannot be read so (no such
  /// reading: a JSON spec, a reference/plan pair, an edited plan; bad input, which the
  /// expanded reading reports). The caller owns what it returns.
  std::function<const Spec *()> kept;
  /// The spec read with its calls expanded, or null for bad input (the caller keeps the
  /// errors). The caller owns what it returns.
  std::function<const Spec *()> expanded;
};

/// A spec's kept reading, read at most once (SpecReadings::kept's usual source).
struct KeptReading {
  std::unique_ptr<Spec> spec;
  bool tried = false;
};

/// The kept reading in `slot`, read by `load` (into a Spec with keepCalls and
/// reduceShapes set) on the first call; null where it cannot be read (its errors are
/// the expanded reading's to report).
const Spec *readKept(KeptReading &slot, bool reduceShapes,
                     const std::function<bool(Spec &, Diagnostics &)> &load);

/// Where a decision reuses earlier work (a Session's caches); null: none.
struct DecideCaches {
  LayoutCache *layouts = nullptr;
  ElementCache *elements = nullptr;
};

struct Decision {
  VerifyResult result;
  /// The reading the result is about (what its reports quote); null when the spec is
  /// bad input.
  const Spec *read = nullptr;
};

/// Decides a spec with `engine` as the file comment says.
Decision decideSpec(const SpecReadings &readings, EngineChoice engine,
                    const VerifyOptions &options, const DecideCaches &caches = {});

} // namespace planproof

#endif
