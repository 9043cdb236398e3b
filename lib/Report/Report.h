//===- Report.h - rendering verification results ---------------*- C++ -*-===//
//
// Renders a VerifyResult as compiler-style text (`file:line:col: error: [kind] ...`
// followed by `note:` lines), as one JSON object, or as SARIF 2.1.0 for code-scanning
// CI gates.
//
//===----------------------------------------------------------------------===//
#ifndef PLANPROOF_REPORT_REPORT_H
#define PLANPROOF_REPORT_REPORT_H

#include "Engine/Verifier.h"

#include <string>

namespace planproof {

std::string renderText(const Spec &spec, const VerifyResult &result);
std::string renderJson(const Spec &spec, const VerifyResult &result);
std::string renderSarif(const Spec &spec, const VerifyResult &result);

} // namespace planproof

#endif
