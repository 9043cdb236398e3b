//===- JsonDocument.cpp - a JSON input with a place for every value --------===//
//
// The parse (nlohmann's DOM builder, every error kept with its byte), the range check
// of integers, and the scanner that locates every value by JSON pointer.
//
//===----------------------------------------------------------------------===//
#include "Support/JsonDocument.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstdint>
#include <sstream>

using namespace planproof;
using nlohmann::json;

namespace {
/// nlohmann's DOM builder, with every error kept with its byte position: syntax errors
/// and numbers outside the doubles (1e999), which json::parse reports without one.
struct LocatingDomParser : nlohmann::detail::json_sax_dom_parser<json> {
  using Base = nlohmann::detail::json_sax_dom_parser<json>;
  explicit LocatingDomParser(json &root) : Base(root, /*allow_exceptions=*/false) {}
  size_t errorByte = 0;
  std::string message;
  bool parse_error(std::size_t position, const std::string &token,
                   const nlohmann::detail::exception &ex) {
    errorByte = position;
    std::string what = ex.what();
    if (ex.id == 406)
      message = "the number " + token.substr(0, 40) + " is outside the range of doubles";
    else
      message = what.find("parse error") != std::string::npos ? what.substr(what.find("parse error"))
                                                               : what;
    return false;
  }
};

struct Scanner {
  const std::string &s;
  size_t i = 0;
  unsigned line = 1, col = 1;
  std::map<std::string, std::pair<unsigned, unsigned>> &out;
  /// The first integer literal (no fraction, no exponent) outside int64, by pointer.
  std::optional<std::string> badInteger;

  void adv() {
    if (s[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
    ++i;
  }
  void ws() {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\n' || s[i] == '\t' || s[i] == '\r'))
      adv();
  }
  std::string str() {
    std::string r;
    adv(); // opening quote
    while (i < s.size() && s[i] != '"') {
      if (s[i] == '\\') {
        adv();
        if (i < s.size())
          r += s[i];
      } else {
        r += s[i];
      }
      adv();
    }
    if (i < s.size())
      adv();
    return r;
  }
  static std::string escape(const std::string &k) {
    std::string r;
    for (char c : k)
      r += c == '~' ? "~0" : c == '/' ? "~1" : std::string(1, c);
    return r;
  }
  void value(const std::string &path) {
    ws();
    if (i >= s.size())
      return;
    out[path] = {line, col};
    char c = s[i];
    if (c == '{' || c == '[') {
      // Members of an object ("key": value) or elements of an array, comma-separated.
      char close = c == '{' ? '}' : ']';
      adv();
      ws();
      for (size_t k = 0; i < s.size() && s[i] != close; ++k) {
        std::string key = std::to_string(k);
        if (c == '{') {
          key = escape(str());
          ws();
          if (i < s.size() && s[i] == ':')
            adv();
        }
        value(path + "/" + key);
        ws();
        if (i < s.size() && s[i] == ',') {
          adv();
          ws();
        }
      }
      if (i < s.size())
        adv();
    } else if (c == '"') {
      str();
    } else {
      size_t start = i;
      while (i < s.size() && s[i] != ',' && s[i] != '}' && s[i] != ']' && s[i] != ' ' &&
             s[i] != '\n' && s[i] != '\r' && s[i] != '\t')
        adv();
      std::string token = s.substr(start, i - start);
      if (!badInteger && !token.empty() && (token[0] == '-' || std::isdigit((unsigned char)token[0])) &&
          token.find_first_of(".eE") == std::string::npos) {
        errno = 0;
        (void)std::strtoll(token.c_str(), nullptr, 10);
        if (errno == ERANGE)
          badInteger = path;
      }
    }
  }
};
} // namespace

std::map<std::string, std::pair<unsigned, unsigned>>
planproof::locateJsonValues(const std::string &text, std::optional<std::string> *badInteger) {
  std::map<std::string, std::pair<unsigned, unsigned>> out;
  Scanner sc{text, 0, 1, 1, out, std::nullopt};
  sc.value("");
  if (badInteger)
    *badInteger = sc.badInteger;
  return out;
}


std::string planproof::readableJsonPath(const std::string &pointer) {
  std::string out, part;
  std::stringstream ss(pointer);
  std::getline(ss, part, '/');
  while (std::getline(ss, part, '/')) {
    bool index = !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit);
    out += index ? "[" + part + "]" : (out.empty() ? "" : ".") + part;
  }
  return out.empty() ? "(top level)" : out;
}

bool JsonDocument::parse(const std::string &file, const std::string &text, Diagnostics &diags) {
  path = file;
  root = json();
  positions.clear();
  LocatingDomParser handler(root);
  bool ok = false;
  try {
    ok = json::sax_parse(text, &handler, json::input_format_t::json, /*strict=*/true);
  } catch (const json::exception &e) {
    handler.message = e.what();
  }
  if (!ok) {
    unsigned line = 1, col = 1;
    for (size_t k = 0; k + 1 < handler.errorByte && k < text.size(); ++k) {
      if (text[k] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    root = json();
    return diags.error({path, line, col}, "malformed JSON: " + (handler.message.empty()
                                                                    ? std::string("syntax error")
                                                                    : handler.message));
  }
  std::optional<std::string> bad;
  positions = locateJsonValues(text, &bad);
  if (bad)
    return error(diags, *bad,
                 "an integer outside the 64-bit signed range [-2^63, 2^63): no field of "
                 "planproof's formats takes one, and reading it would wrap or round it");
  return true;
}

SourceLoc JsonDocument::at(const std::string &pointer) const {
  std::string p = pointer;
  while (true) {
    auto it = positions.find(p);
    if (it != positions.end())
      return {path, it->second.first, it->second.second};
    if (p.empty())
      return {path};
    p.erase(p.rfind('/'));
  }
}

bool JsonDocument::error(Diagnostics &diags, const std::string &pointer,
                         const std::string &message) const {
  return diags.error(at(pointer), readableJsonPath(pointer) + ": " + message);
}
