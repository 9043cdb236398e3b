//===- Input.cpp - reading spec files within bounds --------------*- C++ -*-===//
#include "Support/Input.h"
#include "Support/Diagnostic.h"
#include "Support/Limits.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace planproof;

bool planproof::readInputFile(const std::string &path, std::string &text, Diagnostics &diags) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    return diags.error({path}, std::string("cannot read file: ") + std::strerror(errno));
  }
  if (S_ISDIR(st.st_mode)) {
    return diags.error({path}, "cannot read file: it is a directory");
  }
  // A regular file, or a pipe (a FIFO, `<(...)`): never a device or a socket, which
  // can be read forever (/dev/zero, a terminal).
  bool pipe = S_ISFIFO(st.st_mode);
  if (!S_ISREG(st.st_mode) && !pipe) {
    return diags.error({path}, "cannot read file: it is not a regular file or a pipe");
  }
  // Without O_NONBLOCK, opening a FIFO nobody writes to waits for a writer forever.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | (pipe ? O_NONBLOCK : 0));
  if (fd < 0) {
    return diags.error({path}, std::string("cannot read file: ") + std::strerror(errno));
  }
  text.clear();
  char buf[1 << 16];
  bool tooLarge = false, failed = false, stalled = false;
  while (true) {
    // (A FIFO without a writer reads as empty at once.)
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 && errno == EAGAIN) {
      // A writer that has not written yet, or stopped without closing: waited for,
      // within a bound (the run's time limit, when it is shorter).
      struct pollfd p = {fd, POLLIN, 0};
      int ready = ::poll(&p, 1, inputWaitMs());
      if (ready == 0) {
        stalled = true;
        break;
      }
      continue;
    }
    if (n < 0) {
      failed = true;
      break;
    }
    if (n == 0)
      break;
    if ((int64_t)(text.size() + n) > kMaxInputBytes) {
      tooLarge = true;
      break;
    }
    text.append(buf, n);
  }
  ::close(fd);
  if (tooLarge) {
    return diags.error({path}, "the input is larger than " +
                                      std::to_string(kMaxInputBytes >> 20) + " MiB");
  }
  if (stalled) {
    return diags.error({path}, "cannot read file: the pipe gave no data for " +
                                   std::to_string(inputWaitMs() / 1000) + " s");
  }
  if (pipe && text.empty()) {
    return diags.error({path}, "cannot read file: the pipe has no writer, or its writer "
                               "closed it without writing");
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

size_t planproof::firstInvalidUtf8(const std::string &text) {
  const auto *b = reinterpret_cast<const unsigned char *>(text.data());
  size_t n = text.size(), i = 0;
  while (i < n) {
    unsigned c = b[i];
    size_t len;
    unsigned lo = 0x80, hi = 0xBF;  // the second byte's range
    if (c < 0x80) {
      ++i;
      continue;
    } else if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      lo = c == 0xE0 ? 0xA0 : 0x80;  // no overlong forms
      hi = c == 0xED ? 0x9F : 0xBF;  // no surrogates
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      lo = c == 0xF0 ? 0x90 : 0x80;
      hi = c == 0xF4 ? 0x8F : 0xBF;  // at most U+10FFFF
    } else {
      return i;
    }
    if (i + len > n || b[i + 1] < lo || b[i + 1] > hi)
      return i;
    for (size_t k = 2; k < len; ++k)
      if (b[i + k] < 0x80 || b[i + k] > 0xBF)
        return i;
    i += len;
  }
  return std::string::npos;
}

std::optional<Diagnostic> planproof::utf8Problem(const std::string &path,
                                                 const std::string &text) {
  size_t bad = firstInvalidUtf8(text);
  if (bad == std::string::npos)
    return std::nullopt;
  size_t nl = bad == 0 ? std::string::npos : text.rfind('\n', bad - 1);
  unsigned line = 1 + (unsigned)std::count(text.begin(), text.begin() + bad, '\n');
  unsigned col = unsigned(bad - (nl == std::string::npos ? 0 : nl + 1)) + 1;
  char hex[8];
  std::snprintf(hex, sizeof hex, "0x%02X", (unsigned)(unsigned char)text[bad]);
  Diagnostic d;
  d.at = {path, line, col};
  d.message = std::string("not UTF-8 text: byte ") + hex + " starts no UTF-8 character";
  return d;
}

bool planproof::checkUtf8(const std::string &path, const std::string &text,
                          Diagnostics &diags) {
  std::optional<Diagnostic> d = utf8Problem(path, text);
  if (!d)
    return true;
  diags.add(std::move(*d));
  return false;
}

std::vector<std::string> &planproof::sourceRoots() {
  static std::vector<std::string> roots;
  return roots;
}

bool planproof::sourceExcerptAllowed(const std::string &specPath, const std::string &file) {
  auto real = [](const std::string &p) {
    char buf[PATH_MAX];
    return ::realpath(p.c_str(), buf) ? std::string(buf) : std::string();
  };
  std::string target = real(file);
  if (target.empty())
    return false;
  auto inside = [&](const std::string &folder) {
    std::string f = real(folder.empty() ? "." : folder);
    if (f.empty())
      return false;
    if (f.back() != '/')
      f += '/';
    return target.compare(0, f.size(), f) == 0;
  };
  std::string specFolder = specPath;
  size_t slash = specFolder.rfind('/');
  specFolder = slash == std::string::npos ? "." : specFolder.substr(0, slash + 1);
  if (inside(specFolder))
    return true;
  for (const std::string &root : sourceRoots())
    if (inside(root))
      return true;
  return false;
}

int &planproof::inputWaitMs() {
  static int ms = kMaxInputWaitMs;
  return ms;
}
