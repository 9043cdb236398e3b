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

#include <optional>
#include <string>
#include <vector>

namespace planproof {

/// How long a pipe given as an input may stay silent before the read gives up; the
/// process's setting (inputWaitMs) may be shorter (the CLI's --time-limit).
constexpr int kMaxInputWaitMs = 60'000;
int &inputWaitMs();

/// Reads `path` into `text`: a regular file, or a pipe (waited on for at most
/// kMaxInputWaitMs between chunks); devices and sockets are refused. On failure records
/// the reason at `path` in `diags`.
bool readInputFile(const std::string &path, std::string &text, Diagnostics &diags);

/// Whether a diagnostic may show lines of `file`, a user source a spec names (a JSON
/// op's "loc"): only when it lies in the folder of the spec `specPath` (or below), or
/// in a folder the user named (`--source-root`, sourceRoots()), both compared by real
/// path. A spec must not make a report print any file it likes (/etc/passwd).
bool sourceExcerptAllowed(const std::string &specPath, const std::string &file);
/// The folders the user named whose files diagnostics may show (process-wide: the CLI
/// fills it from --source-root).
std::vector<std::string> &sourceRoots();

/// The syntax whose brackets checkNesting counts.
enum class Syntax { Json, Mlir };

/// Whether `text` nests brackets at most kMaxNesting deep (outside strings and, for
/// MLIR, comments). On failure records the place where the limit is passed in `diags`.
bool checkNesting(const std::string &path, const std::string &text, Syntax syntax,
                  Diagnostics &diags);

/// Where `text` stops being UTF-8 (its first such byte, as an error), if it does.
std::optional<Diagnostic> utf8Problem(const std::string &path, const std::string &text);
/// Whether `text` is UTF-8; on failure records the line and column of the first byte
/// that is not in `diags`.
bool checkUtf8(const std::string &path, const std::string &text, Diagnostics &diags);

/// The offset of the first byte of `text` that is not part of well-formed UTF-8
/// (overlong forms, surrogates and code points past U+10FFFF included), or npos. Text
/// that reaches a JSON string (names, locations, messages) must be UTF-8: a dump of
/// anything else throws.
size_t firstInvalidUtf8(const std::string &text);

} // namespace planproof

#endif
