//===- Diagnostic.h - located errors of an input -------------------*- C++ -*-===//
//
// The one form of a located error in planproof: a place in an input file and a
// message, with the notes that explain it. Every loader (file reading, the MLIR parser
// and verifiers, the JSON importer, spec validation) records its errors as values in a
// Diagnostics list; the CLI prints the list's text ("FILE:LINE:COL: error: MESSAGE",
// the compilers' form, which MLIR's diagnostics have too), the JSON and SARIF reports
// and the library's Error values read the values themselves. `parseDiagnostics` reads
// that text back, for tools that only have the text.
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

/// One located error, and the notes printed after it (each "note: ..." or, for a note
/// with a place of its own, "PLACE: note: ...").
struct Diagnostic {
  SourceLoc at;
  std::string message;
  std::vector<std::string> notes;
  /// Lines printed under the error line (the source line and a caret), "" if none.
  std::string excerpt;
};

/// The errors of loading one input, in the order found: the one error channel of
/// every loader. A loader appends and returns false; its caller passes the list on.
class Diagnostics {
public:
  /// Records an error at `at` (at `fallbackFile` when `at` has no file); returns
  /// false, so that a loader can `return diags.error(...)`.
  bool error(SourceLoc at, std::string message, const std::string &fallbackFile = "");
  /// Adds a note to the last error (ignored when there is none).
  void note(std::string text);
  void add(Diagnostic d) { list_.push_back(std::move(d)); }
  void append(const Diagnostics &other);

  bool empty() const { return list_.empty(); }
  size_t size() const { return list_.size(); }
  const std::vector<Diagnostic> &list() const { return list_; }
  std::vector<Diagnostic>::const_iterator begin() const { return list_.begin(); }
  std::vector<Diagnostic>::const_iterator end() const { return list_.end(); }

  /// The text the CLI prints: per error its formatError line, its excerpt, its notes.
  std::string str() const;

private:
  std::vector<Diagnostic> list_;
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
