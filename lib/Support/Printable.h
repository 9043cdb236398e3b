//===- Printable.h - text from an input made safe to print -------*- C++ -*-===//
//
// Names, messages and file names that come from an input (a spec, a dump, a file
// name) are printed to terminals, CI logs and reports. Printed raw they can forge
// what a reader trusts: a newline followed by "FILE:1:1: error: ..." or a CI
// annotation ("::error ..."), terminal escapes that move the cursor or recolour
// lines, Unicode bidirectional overrides that reorder what is shown ("Trojan
// source"). printable() writes each such character as a visible escape; every text
// report and diagnostic passes its input-derived strings through it.
//
//===----------------------------------------------------------------------===//
#ifndef PLANPROOF_SUPPORT_PRINTABLE_H
#define PLANPROOF_SUPPORT_PRINTABLE_H

#include <string>

namespace planproof {

/// `text` with every character that can forge or hide output escaped: C0 controls
/// other than tab (and newline when `keepNewlines`) and DEL as \xNN; C1 controls and
/// the bidirectional formatting characters (U+061C, U+200E-F, U+202A-E, U+2066-9) as
/// \u{NNNN}; bytes that are not UTF-8 as \xNN. Everything else is kept.
std::string printable(const std::string &text, bool keepNewlines = true);

/// A dumped JSON text with the bidirectional formatting and C1 control characters of
/// its strings written as \uNNNN escapes (the JSON means the same; a terminal or
/// viewer showing it cannot be made to reorder it). Controls below 0x20 are escaped
/// by the JSON writer itself.
std::string jsonEscapeHidden(const std::string &json);

/// Why `name` is not a name an input may give a value, a tensor or a model ("" when it
/// is one): 1 to 256 bytes of UTF-8, none of them whitespace, a quote, a backslash or
/// a character printable() escapes. (Mesh axis names are stricter: identifiers, as the
/// dist.mesh verifier says, since layouts write them bare.)
std::string nameProblem(const std::string &name);

/// `text` as valid UTF-8: each byte that starts no well-formed UTF-8 character
/// replaced by U+FFFD. The public API returns only such strings (a Python binding
/// decoding a spec's non-UTF-8 name must not fail).
std::string validUtf8(const std::string &text);

/// The offset of the first character of `text` printable() would escape (newlines,
/// tabs and carriage returns allowed), or npos.
size_t firstEscaped(const std::string &text);

/// Why `name` is not a mesh axis name ("" when it is one): an identifier, as MLIR's
/// bare identifiers are (a letter or '_', then letters, digits, '_', '$' or '.'), of at
/// most 64 characters, and not '_' (a layout's "not split"). Layouts write axis names
/// bare: any other name would be read back as something else ("tp in 2", "tp]").
std::string axisNameProblem(const std::string &name);

/// Whether `text` holds a character printable() would escape (with newlines escaped).
bool needsEscape(const std::string &text);

/// `text` percent-encoded as a URI reference (RFC 3986): every byte other than the
/// unreserved characters and '/' as %XX. For SARIF's artifact URIs.
std::string uriEncode(const std::string &text);

} // namespace planproof

#endif
