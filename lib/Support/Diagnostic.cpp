//===- Diagnostic.cpp - located errors of an input -----------------------===//
#include "Support/Diagnostic.h"
#include "Support/Printable.h"

#include <cctype>
#include <sstream>

using namespace planproof;

std::string planproof::formatError(const SourceLoc &at, const std::string &message,
                                   const std::string &fallback) {
  // One line, whatever the file's name or the message holds (Printable.h).
  std::string place = at.file.empty() ? fallback : at.str();
  return printable(place, false) + ": error: " + printable(message, false) + "\n";
}

bool Diagnostics::error(SourceLoc at, std::string message, const std::string &fallbackFile) {
  if (at.file.empty())
    at = SourceLoc{fallbackFile};
  list_.push_back(Diagnostic{std::move(at), std::move(message), {}, ""});
  return false;
}

void Diagnostics::note(std::string text) {
  if (!list_.empty())
    list_.back().notes.push_back(std::move(text));
}

void Diagnostics::append(const Diagnostics &other) {
  list_.insert(list_.end(), other.list_.begin(), other.list_.end());
}

std::string Diagnostics::str() const {
  std::string out;
  for (const Diagnostic &d : list_) {
    out += formatError(d.at, d.message);
    // Excerpts and notes are lines already (noteText escapes a note's own parts);
    // what is left to escape are their controls.
    out += printable(d.excerpt);
    for (const std::string &n : d.notes)
      out += printable(n) + (n.empty() || n.back() != '\n' ? "\n" : "");
  }
  return out;
}

namespace {

/// Takes a trailing ":DIGITS" off `place` into `out`; false (place unchanged) if none.
bool takeNumber(std::string &place, unsigned &out) {
  size_t colon = place.rfind(':');
  if (colon == std::string::npos || colon + 1 == place.size() || place.size() - colon > 10)
    return false;
  for (size_t i = colon + 1; i < place.size(); ++i)
    if (!std::isdigit((unsigned char)place[i]))
      return false;
  out = (unsigned)std::stoul(place.substr(colon + 1));
  place.resize(colon);
  return true;
}

SourceLoc parsePlace(std::string place) {
  SourceLoc at;
  unsigned last = 0, before = 0;
  if (takeNumber(place, last)) {
    if (takeNumber(place, before)) {
      at.line = before;
      at.col = last;
    } else {
      at.line = last;
    }
  }
  at.file = place;
  return at;
}

} // namespace

std::vector<Diagnostic> planproof::parseDiagnostics(const std::string &text) {
  std::vector<Diagnostic> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    size_t tag = line.find(": error: ");
    if (tag == std::string::npos) {
      size_t note = line.find(": note: ");
      if (!out.empty() && note != std::string::npos)
        out.back().notes.push_back(line.substr(note + 2));
      continue;
    }
    Diagnostic d;
    d.at = parsePlace(line.substr(0, tag));
    d.message = line.substr(tag + 9);
    out.push_back(std::move(d));
  }
  return out;
}
