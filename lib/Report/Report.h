//===- Report.h - rendering verification results ---------------*- C++ -*-===//
//
// Renders a VerifyResult as compiler-style text (`file:line:col: error: [kind] ...`
// followed by `note:` lines), as one JSON object, as SARIF 2.1.0 for code-scanning
// CI gates, or as an HTML page for people (Html.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef PLANPROOF_REPORT_REPORT_H
#define PLANPROOF_REPORT_REPORT_H

#include "Engine/Verifier.h"
#include "Replay/Replay.h"
#include "Support/Printable.h"

#include <string>

namespace planproof {

std::string renderText(const Spec &spec, const VerifyResult &result);
std::string renderJson(const Spec &spec, const VerifyResult &result);
std::string renderSarif(const Spec &spec, const VerifyResult &result);
/// One self-contained HTML page (Html.cpp): the verdict, each violation with its plan
/// excerpt, notes, counterexample tables and pictures of the layouts involved.
std::string renderHtml(const Spec &spec, const VerifyResult &result);
/// A replay as one HTML page (ReplayHtml.cpp): within tolerance or not, the first
/// divergence with its plan excerpt, every output's errors and a heat-map of each
/// element's error over its tolerance. `setting`: dtype, reduction order, seed.
std::string renderReplayHtml(const Spec &spec, const ReplayResult &result,
                             const std::string &setting);

/// Bad input (exit status 2): the located errors a loader recorded as one JSON object
/// (verdict "error") or as a SARIF log whose invocation failed, so that a CI gate
/// reading `--format json|sarif` always gets a machine-readable answer.
std::string renderErrorJson(const std::string &path, const Diagnostics &errors);
std::string renderErrorSarif(const std::string &path, const Diagnostics &errors);


/// Source line `line` for a diagnostic snippet, cut to a window of about `width`
/// characters around column `col` (which is moved to stay under the caret); a
/// one-line JSON file must not repeat its whole text in every note.
std::string snippetWindow(const std::string &line, unsigned &col, size_t width = 160);

} // namespace planproof

#endif
