//===- JsonLocator.cpp - line and column of every JSON value -----*- C++ -*-===//
//
// nlohmann/json does not keep positions, so a small scanner walks the (already valid)
// text once and records where every value starts, by JSON pointer. The importer uses
// it for FileLineColLocs on ops and for located errors.
//
//===----------------------------------------------------------------------===//
#include "Import/JsonImport.h"

using namespace planproof;

namespace {
struct Scanner {
  const std::string &s;
  size_t i = 0;
  unsigned line = 1, col = 1;
  std::map<std::string, std::pair<unsigned, unsigned>> &out;

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
      while (i < s.size() && s[i] != ',' && s[i] != '}' && s[i] != ']' && s[i] != ' ' &&
             s[i] != '\n' && s[i] != '\r' && s[i] != '\t')
        adv();
    }
  }
};
} // namespace

std::map<std::string, std::pair<unsigned, unsigned>>
planproof::locateJsonValues(const std::string &text) {
  std::map<std::string, std::pair<unsigned, unsigned>> out;
  Scanner sc{text, 0, 1, 1, out};
  sc.value("");
  return out;
}

