//===- Input.cpp - reading spec files within bounds --------------*- C++ -*-===//
#include "Support/Input.h"
#include "Support/Diagnostic.h"
#include "Support/Limits.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <sys/stat.h>

using namespace planproof;

bool planproof::readInputFile(const std::string &path, std::string &text, Diagnostics &diags) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    return diags.error({path}, std::string("cannot read file: ") + std::strerror(errno));
  }
  if (S_ISDIR(st.st_mode)) {
    return diags.error({path}, "cannot read file: it is a directory");
  }
  std::FILE *f = std::fopen(path.c_str(), "rb");
  if (!f) {
    return diags.error({path}, std::string("cannot read file: ") + std::strerror(errno));
  }
  text.clear();
  char buf[1 << 16];
  size_t n;
  bool tooLarge = false;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) {
    if ((int64_t)(text.size() + n) > kMaxInputBytes) {
      tooLarge = true;
      break;
    }
    text.append(buf, n);
  }
  bool failed = std::ferror(f);
  std::fclose(f);
  if (tooLarge) {
    return diags.error({path}, "the input is larger than " +
                                      std::to_string(kMaxInputBytes >> 20) + " MiB");
  }
  if (failed) {
    return diags.error({path}, "cannot read file");
  }
  return true;
}

bool planproof::checkNesting(const std::string &path, const std::string &text, Syntax syntax,
                             Diagnostics &diags) {
  int depth = 0;
  unsigned line = 1, col = 1;
  bool mlir = syntax == Syntax::Mlir;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '"') {
      // A string: skip to its closing quote (escapes skip one character).
      for (++i, ++col; i < text.size() && text[i] != '"'; ++i, ++col) {
        if (text[i] == '\\')
          ++i, ++col;
        if (i < text.size() && text[i] == '\n')
          ++line, col = 0;
      }
    } else if (mlir && c == '/' && i + 1 < text.size() && text[i + 1] == '/') {
      while (i < text.size() && text[i] != '\n')
        ++i;
      ++line;
      col = 1;
      continue;
    } else if (c == '[' || c == '{' || (mlir && (c == '(' || c == '<'))) {
      if (++depth > kMaxNesting) {
        return diags.error({path, line, col}, "brackets nest more than " +
                                                   std::to_string(kMaxNesting) +
                                                   " levels deep here");
      }
    } else if (c == ']' || c == '}' || (mlir && (c == ')' || (c == '>' && (i == 0 || text[i - 1] != '-'))))) {
      if (depth > 0)
        --depth;
    }
    if (c == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return true;
}
