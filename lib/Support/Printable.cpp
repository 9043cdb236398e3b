//===- Printable.cpp - text from an input made safe to print ---------------===//
#include "Support/Printable.h"

#include <cctype>
#include <cstdio>

using namespace planproof;

namespace {
/// The length of the UTF-8 sequence at s[i] and its code point, or 0 when it is not
/// well-formed UTF-8.
size_t decode(const std::string &s, size_t i, unsigned &cp) {
  auto b = [&](size_t k) { return (unsigned char)s[k]; };
  unsigned c = b(i);
  size_t len;
  if (c < 0x80) {
    cp = c;
    return 1;
  } else if (c >= 0xC2 && c <= 0xDF) {
    len = 2, cp = c & 0x1F;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3, cp = c & 0x0F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4, cp = c & 0x07;
  } else {
    return 0;
  }
  if (i + len > s.size())
    return 0;
  for (size_t k = 1; k < len; ++k) {
    if ((b(i + k) & 0xC0) != 0x80)
      return 0;
    cp = (cp << 6) | (b(i + k) & 0x3F);
  }
  // Overlong forms, surrogates and code points past U+10FFFF are not UTF-8.
  if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
      (cp >= 0xD800 && cp <= 0xDFFF))
    return 0;
  return len;
}

bool hiding(unsigned cp) {
  return (cp >= 0x80 && cp <= 0x9F) || cp == 0x061C || cp == 0x200E || cp == 0x200F ||
         (cp >= 0x202A && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069);
}
} // namespace

std::string planproof::printable(const std::string &text, bool keepNewlines) {
  std::string out;
  out.reserve(text.size());
  char buf[16];
  for (size_t i = 0; i < text.size();) {
    unsigned cp = 0;
    size_t len = decode(text, i, cp);
    if (len == 0) {
      std::snprintf(buf, sizeof buf, "\\x%02x", (unsigned)(unsigned char)text[i]);
      out += buf;
      ++i;
      continue;
    }
    if ((cp < 0x20 && cp != '\t' && !(keepNewlines && cp == '\n')) || cp == 0x7f) {
      std::snprintf(buf, sizeof buf, "\\x%02x", cp);
      out += buf;
    } else if (hiding(cp)) {
      std::snprintf(buf, sizeof buf, "\\u{%04x}", cp);
      out += buf;
    } else {
      out.append(text, i, len);
    }
    i += len;
  }
  return out;
}

bool planproof::needsEscape(const std::string &text) {
  return printable(text, false) != text;
}

std::string planproof::uriEncode(const std::string &text) {
  std::string out;
  char buf[4];
  for (unsigned char c : text) {
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
        c == '-' || c == '.' || c == '_' || c == '~' || c == '/') {
      out += (char)c;
    } else {
      std::snprintf(buf, sizeof buf, "%%%02X", c);
      out += buf;
    }
  }
  return out;
}

std::string planproof::jsonEscapeHidden(const std::string &json) {
  std::string out;
  out.reserve(json.size());
  char buf[16];
  for (size_t i = 0; i < json.size();) {
    unsigned cp = 0;
    size_t len = decode(json, i, cp);
    if (len > 1 && hiding(cp)) {
      std::snprintf(buf, sizeof buf, "\\u%04x", cp);
      out += buf;
      i += len;
    } else {
      size_t n = len ? len : 1;
      out.append(json, i, n);
      i += n;
    }
  }
  return out;
}

std::string planproof::nameProblem(const std::string &name) {
  if (name.empty())
    return "it is empty";
  if (name.size() > 256)
    return "it is longer than 256 bytes";
  if (needsEscape(name))
    return "it holds a control, invisible or bidirectional character, or bytes that are not "
           "UTF-8";
  for (char c : name)
    if (c == ' ' || c == '\t' || c == '"' || c == '\'' || c == '\\')
      return "it holds whitespace, a quote or a backslash";
  return "";
}

std::string planproof::validUtf8(const std::string &text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    unsigned cp = 0;
    size_t len = decode(text, i, cp);
    if (len == 0) {
      out += "\xEF\xBF\xBD";
      ++i;
    } else {
      out.append(text, i, len);
      i += len;
    }
  }
  return out;
}

size_t planproof::firstEscaped(const std::string &text) {
  for (size_t i = 0; i < text.size();) {
    unsigned cp = 0;
    size_t len = decode(text, i, cp);
    if (len == 0 || (cp < 0x20 && cp != '\t' && cp != '\n' && cp != '\r') || cp == 0x7f ||
        hiding(cp))
      return i;
    i += len;
  }
  return std::string::npos;
}

std::string planproof::axisNameProblem(const std::string &name) {
  if (name.empty() || name == "_")
    return "axis names must be non-empty and not '_'";
  bool ok = name.size() <= 64 && (std::isalpha((unsigned char)name[0]) || name[0] == '_');
  for (char c : name)
    ok = ok && (std::isalnum((unsigned char)c) || c == '_' || c == '$' || c == '.');
  if (!ok)
    return "axis name '" + printable(name, false) +
           "' is not an identifier (a letter or '_', then letters, digits, '_', '$' or '.'; "
           "at most 64 characters)";
  return "";
}
