//===- SizeExpr.cpp - size expressions of parametric specs -------*- C++ -*-===//
#include "Import/SizeExpr.h"

#include <cctype>
#include <cstdlib>

using namespace planproof;

namespace {
/// Recursive-descent evaluation of size expressions: integers, decimals, dimension
/// symbols, + - * / and parentheses, in exact rationals.
struct ExprParser {
  const std::string &text;
  const std::map<std::string, int64_t> &symbols;
  size_t i = 0;
  std::string error;

  void ws() {
    while (i < text.size() && text[i] == ' ')
      ++i;
  }
  bool atom(Rational &out) {
    ws();
    if (i < text.size() && text[i] == '(') {
      ++i;
      if (!sum(out))
        return false;
      ws();
      if (i >= text.size() || text[i] != ')')
        return (error = "expected ')'", false);
      ++i;
      return true;
    }
    auto is = [&](int (*pred)(int)) { return i < text.size() && pred((unsigned char)text[i]); };
    if (is(isdigit) || (i < text.size() && text[i] == '.')) {
      size_t start = i;
      while (is(isdigit) || (i < text.size() && text[i] == '.'))
        ++i;
      std::string num = text.substr(start, i - start);
      // The decimal exactly as written.
      return Rational::fromDecimal(num, out, error);
    }
    if (is(isalpha) || (i < text.size() && text[i] == '_')) {
      size_t start = i;
      while (is(isalnum) || (i < text.size() && text[i] == '_'))
        ++i;
      std::string name = text.substr(start, i - start);
      auto it = symbols.find(name);
      if (it == symbols.end())
        return (error = "unknown dimension '" + name + "' (declare it in \"dims\")", false);
      out = Rational(it->second);
      return true;
    }
    return (error = "expected a number, a dimension name or '('", false);
  }
  bool product(Rational &out) {
    if (!atom(out))
      return false;
    for (ws(); i < text.size() && (text[i] == '*' || text[i] == '/'); ws()) {
      char op = text[i++];
      Rational rhs;
      if (!atom(rhs))
        return false;
      if (op == '/' && rhs.isZero())
        return (error = "division by zero", false);
      out = op == '*' ? out * rhs : out / rhs;
    }
    return true;
  }
  bool sum(Rational &out) {
    if (!product(out))
      return false;
    for (ws(); i < text.size() && (text[i] == '+' || text[i] == '-'); ws()) {
      char op = text[i++];
      Rational rhs;
      if (!product(rhs))
        return false;
      out = op == '+' ? out + rhs : out - rhs;
    }
    return true;
  }
};
} // namespace


bool planproof::evalSizeExpr(const std::string &text,
                             const std::map<std::string, int64_t> &symbols, Rational &out,
                             std::string &why) {
  ExprParser parser{text, symbols};
  try {
    if (!parser.sum(out)) {
      why = parser.error;
      return false;
    }
  } catch (const NumericLimit &e) {
    why = e.what();
    return false;
  }
  parser.ws();
  if (parser.i != text.size()) {
    why = "unexpected '" + text.substr(parser.i) + "'";
    return false;
  }
  return true;
}
