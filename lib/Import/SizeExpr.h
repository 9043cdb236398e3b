//===- SizeExpr.h - size expressions of parametric specs ---------*- C++ -*-===//
//
// Sizes in parametric specs are expressions over dimension symbols: integers,
// decimals, names, + - * / and parentheses, evaluated exactly (docs/shape-reduction.md).
//
//===----------------------------------------------------------------------===//
#ifndef PLANPROOF_IMPORT_SIZEEXPR_H
#define PLANPROOF_IMPORT_SIZEEXPR_H

#include "Support/Rational.h"

#include <cstdint>
#include <map>
#include <string>

namespace planproof {

/// Evaluates `text` with `symbols`; on failure returns false with the reason in `why`.
bool evalSizeExpr(const std::string &text, const std::map<std::string, int64_t> &symbols,
                  Rational &out, std::string &why);

} // namespace planproof

#endif
