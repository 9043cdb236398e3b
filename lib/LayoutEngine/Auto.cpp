//===- Auto.cpp - the layout engine, then the element engine ----------------===//
//
// `--engine auto`: the layout engine's verdict where it has one; else the element
// engine's, with the layout engine's reasons and departures first where both are
// inconclusive (LayoutEngine.h).
//
//===----------------------------------------------------------------------===//
#include "LayoutEngine/LayoutEngine.h"

using namespace planproof;

VerifyResult planproof::verifyAuto(const VerifyResult &layout,
                                   const std::function<VerifyResult()> &element) {
  if (layout.verdict != Verdict::Inconclusive)
    return layout;
  VerifyResult r = element();
  if (r.verdict == Verdict::Inconclusive) {
    r.inconclusiveReasons.insert(r.inconclusiveReasons.begin(),
                                 layout.inconclusiveReasons.begin(),
                                 layout.inconclusiveReasons.end());
    r.departures.insert(r.departures.begin(), layout.departures.begin(),
                        layout.departures.end());
  }
  return r;
}
