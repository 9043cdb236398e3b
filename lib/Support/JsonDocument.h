//===- JsonDocument.h - a JSON input with a place for every value --*- C++ -*-===//
//
// Every JSON file planproof reads -- specs, model configurations, generated-spec
// recipes -- is read through JsonDocument, so that each one is checked the same way
// and each error names its file, line and column and its JSON path:
//   - syntax errors and numbers outside the doubles, at the byte where they are;
//   - integer literals outside the 64-bit signed range. nlohmann/json keeps
//     2^63..2^64-1 as unsigned numbers, which a reader asking for an int64 gets wrapped
//     to a negative value (a scale factor of 2^64-1 read as -1 once verified a wrong
//     plan), and larger ones as doubles, rounded; no field of any planproof format
//     takes such a number, so they are refused at the parse.
// nlohmann/json keeps no positions: a small scanner walks the (valid) text once and
// records where every value starts, by JSON pointer.
//
//===----------------------------------------------------------------------===//
#ifndef PLANPROOF_SUPPORT_JSONDOCUMENT_H
#define PLANPROOF_SUPPORT_JSONDOCUMENT_H

#include "Support/Diagnostic.h"

#include <nlohmann/json.hpp>

#include <map>
#include <optional>
#include <string>
#include <utility>

namespace planproof {

/// Line and column (1-based) of every value in a JSON text, by JSON pointer
/// ("/plan/ops/3"). The text must be valid JSON. With `badInteger`: the pointer of the
/// first integer literal (no fraction or exponent) outside int64, in document order.
std::map<std::string, std::pair<unsigned, unsigned>>
locateJsonValues(const std::string &text, std::optional<std::string> *badInteger = nullptr);

/// A JSON pointer as a reader writes a path: "/plan/ops/3/op" -> "plan.ops[3].op".
std::string readableJsonPath(const std::string &pointer);

class JsonDocument {
public:
  std::string path;
  nlohmann::json root;

  /// Parses `text`, read from `path`. False, with one located error in `diags`, for
  /// malformed JSON, a number outside the doubles, or an integer outside int64.
  bool parse(const std::string &path, const std::string &text, Diagnostics &diags);
  /// Where the value at `pointer` starts (its nearest located enclosing value's place
  /// where it has none of its own: a missing member is reported at its object).
  SourceLoc at(const std::string &pointer) const;
  /// Records "PATH: MESSAGE" at `pointer`'s place; returns false.
  bool error(Diagnostics &diags, const std::string &pointer, const std::string &message) const;

private:
  std::map<std::string, std::pair<unsigned, unsigned>> positions;
};

} // namespace planproof

#endif
