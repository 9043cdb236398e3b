//===- Input.h - reading spec files within bounds ----------------*- C++ -*-===//
//
// Every spec file is read through here: at most kMaxInputBytes (so `verify /dev/zero`
// is an error, not an out-of-memory abort), and checked for bracket nesting deeper than
// kMaxNesting before any parser sees it (the MLIR parser and the JSON scanners recurse
// per level; 10^5 nested arrays once overflowed the stack).
//
//===----------------------------------------------------------------------===//
#ifndef PLANPROOF_SUPPORT_INPUT_H
#define PLANPROOF_SUPPORT_INPUT_H

#include "Support/Diagnostic.h"

#include <string>

namespace planproof {

/// Reads `path` into `text`. On failure records the reason at `path` in `diags`.
bool readInputFile(const std::string &path, std::string &text, Diagnostics &diags);

/// The syntax whose brackets checkNesting counts.
enum class Syntax { Json, Mlir };

/// Whether `text` nests brackets at most kMaxNesting deep (outside strings and, for
/// MLIR, comments). On failure records the place where the limit is passed in `diags`.
bool checkNesting(const std::string &path, const std::string &text, Syntax syntax,
                  Diagnostics &diags);

} // namespace planproof

#endif
