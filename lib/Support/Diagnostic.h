//===- Diagnostic.h - located errors of an input -------------------*- C++ -*-===//
//
// The one form of a located error in planproof: a place in an input file and a
// message, with the notes that explain it. Loaders write diagnostics as text lines,
// "FILE:LINE:COL: error: MESSAGE" (MLIR's own diagnostics have that form too, and that
// is what the CLI prints); `formatError` writes one, `parseDiagnostics` reads them back
// for the JSON and SARIF reports and the library's Error values.
//
//===----------------------------------------------------------------------===//
#ifndef PLANPROOF_SUPPORT_DIAGNOSTIC_H
#define PLANPROOF_SUPPORT_DIAGNOSTIC_H

#include <string>
#include <vector>

namespace planproof {

/// A place in an input file: 1-based line and column (0 where unknown).
struct SourceLoc {
  std::string file;
  unsigned line = 0, col = 0;
  bool known() const { return !file.empty() && line > 0; }
  /// "file:line:col" when the line is known, else the file.
  std::string str() const {
    return known() ? file + ":" + std::to_string(line) + ":" + std::to_string(col) : file;
  }
};

/// One located error, and the notes printed after it (each "note: ...").
struct Diagnostic {
  SourceLoc at;
  std::string message;
  std::vector<std::string> notes;
};

/// "FILE:LINE:COL: error: MESSAGE\n" (FILE alone where the line is unknown; `fallback`
/// where the file is).
std::string formatError(const SourceLoc &at, const std::string &message,
                        const std::string &fallback = "");

/// The errors of a diagnostics text, in order: each "PLACE: error: MESSAGE" line, PLACE
/// being FILE, FILE:LINE or FILE:LINE:COL (read from the right: a file name may hold
/// ':'), with the "...: note: ..." lines after it as its notes. Lines of neither kind
/// (source excerpts, carets) are skipped. Empty when the text has no error line.
std::vector<Diagnostic> parseDiagnostics(const std::string &text);

} // namespace planproof

#endif
