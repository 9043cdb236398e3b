//===- SeededDriver.cpp - a deterministic driver for the fuzzing harnesses -===//
//
// Where libFuzzer is not built (g++, or PLANPROOF_LIBFUZZER off), each harness links
// this driver: `harness [--runs N] [--seed S] [--timeout SECONDS] FILE|DIR...` runs every
// seed file, then N inputs mutated from them (byte flips, insertions and deletions of
// spans, splices of two seeds, interesting numbers and tokens), reproducibly from S. An
// input that runs past the timeout aborts with its bytes written to
// fuzz-hang.input; a crash writes its input to fuzz-crash.input. Used by `make test`
// for a short seeded run.
//
//===----------------------------------------------------------------------===//
#include "FuzzTarget.h"

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

namespace {
std::string current;
unsigned timeoutSeconds = 60;

void onAlarm(int) {
  static const char msg[] = "fuzz: an input ran past the timeout (a hang); written to "
                            "fuzz-hang.input\n";
  if (FILE *f = std::fopen("fuzz-hang.input", "wb")) {
    std::fwrite(current.data(), 1, current.size(), f);
    std::fclose(f);
  }
  ssize_t ignored = ::write(2, msg, sizeof msg - 1);
  (void)ignored;
  std::abort();
}

/// A crash (an abort, an uncaught exception, a fault): the input is kept to reproduce it.
void onCrash(int sig) {
  static const char msg[] = "fuzz: an input crashed; written to fuzz-crash.input\n";
  if (FILE *f = std::fopen("fuzz-crash.input", "wb")) {
    std::fwrite(current.data(), 1, current.size(), f);
    std::fclose(f);
  }
  ssize_t ignored = ::write(2, msg, sizeof msg - 1);
  (void)ignored;
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

std::string mutate(std::mt19937_64 &rng, const std::vector<std::string> &seeds) {
  std::string s = seeds[rng() % seeds.size()];
  static const char *tokens[] = {"0", "-1", "1", "2", "4294967296", "9223372036854775807",
                                 "-9223372036854775808", "1e308", "1e-320", "nan", "1e999",
                                 "\"tp\"", "\"dp\"", "null", "[]", "{}", "\"sum\"", "\"avg\"",
                                 "%x", "?", "tensor<2x?xf32>", "0.5", "[[[[", "}}}}", "\"\\u0000\""};
  int edits = 1 + rng() % 4;
  for (int e = 0; e < edits && !s.empty(); ++e) {
    size_t at = rng() % s.size();
    switch (rng() % 6) {
    case 0: // flip a byte
      s[at] = (char)(s[at] ^ (1 << (rng() % 8)));
      break;
    case 1: { // delete a span
      size_t n = 1 + rng() % 16;
      s.erase(at, std::min(n, s.size() - at));
      break;
    }
    case 2: { // duplicate a span
      size_t n = 1 + rng() % 32;
      s.insert(at, s.substr(at, n));
      break;
    }
    case 3: // insert a token
      s.insert(at, tokens[rng() % (sizeof tokens / sizeof *tokens)]);
      break;
    case 4: { // replace a number by a token
      size_t d = s.find_first_of("0123456789", at);
      if (d != std::string::npos) {
        size_t end = s.find_first_not_of("0123456789.e-", d);
        s.replace(d, (end == std::string::npos ? s.size() : end) - d,
                  tokens[rng() % 9]);
      }
      break;
    }
    default: { // splice with another seed
      const std::string &o = seeds[rng() % seeds.size()];
      if (!o.empty())
        s = s.substr(0, at) + o.substr(rng() % o.size());
    }
    }
  }
  return s;
}

void runOne(const std::string &input) {
  current = input;
  ::alarm(timeoutSeconds);
  LLVMFuzzerTestOneInput((const uint8_t *)input.data(), input.size());
  ::alarm(0);
}
} // namespace

int main(int argc, char **argv) {
  uint64_t runs = 100, seed = 1;
  std::vector<std::string> paths;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if ((a == "--runs" || a == "--seed" || a == "--timeout") && i + 1 < argc) {
      uint64_t v = std::strtoull(argv[++i], nullptr, 10);
      if (a == "--runs")
        runs = v;
      else if (a == "--seed")
        seed = v;
      else
        timeoutSeconds = (unsigned)std::max<uint64_t>(1, v);
    } else {
      paths.push_back(a);
    }
  }
  std::vector<std::string> seeds;
  for (const std::string &p : paths) {
    std::vector<std::filesystem::path> files;
    if (std::filesystem::is_directory(p)) {
      for (auto &e : std::filesystem::recursive_directory_iterator(p))
        if (e.is_regular_file())
          files.push_back(e.path());
    } else {
      files.push_back(p);
    }
    std::sort(files.begin(), files.end());
    for (auto &f : files) {
      std::ifstream in(f, std::ios::binary);
      std::stringstream ss;
      ss << in.rdbuf();
      seeds.push_back(ss.str());
    }
  }
  if (seeds.empty()) {
    std::cerr << "usage: " << argv[0] << " [--runs N] [--seed S] [--timeout SECONDS] FILE|DIR...\n";
    return 2;
  }
  // The CLI harness silences stdout and stderr; the summary goes to the original ones.
  int out = ::dup(1);
  std::signal(SIGALRM, onAlarm);
  for (int sig : {SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL})
    std::signal(sig, onCrash);
  for (const std::string &s : seeds)
    runOne(s);
  std::mt19937_64 rng(seed);
  for (uint64_t i = 0; i < runs; ++i)
    runOne(mutate(rng, seeds));
  std::string summary = "fuzz: " + std::to_string(seeds.size()) + " seeds and " +
                        std::to_string(runs) + " mutated inputs, no crash and no hang\n";
  ssize_t ignored = ::write(out, summary.data(), summary.size());
  (void)ignored;
  return 0;
}
