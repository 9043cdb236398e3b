//===- fuzz_cli.cpp - fuzzing the command line ------------------*- C++ -*-===//
//
// Input: a command line and a file. The first line holds the arguments (split at
// spaces; "@" stands for the file), the rest is the file's contents, written as a
// .json file when it starts with '{', else as a .mlir file. The whole CLI
// runs in-process with a short --time-limit; its exit status must be 0 to 3.
//
//===----------------------------------------------------------------------===//
#include "FuzzTarget.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fcntl.h>
#include <sstream>
#include <unistd.h>
#include <vector>

namespace planproof {
int cliMain(int argc, char **argv, bool watchdog);
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static bool quiet = [] {
    // The CLI's reports are not what is being tested: silence them. Under libFuzzer,
    // whose statistics and crash reports go to stderr, scripts/fuzz.sh passes
    // -close_fd_mask=3 instead (libFuzzer keeps a copy of stderr for itself).
#ifndef PLANPROOF_FUZZ_LIBFUZZER
    int null = ::open("/dev/null", O_WRONLY);
    if (null >= 0 && !std::getenv("PLANPROOF_FUZZ_VERBOSE")) {
      ::dup2(null, 1);
      ::dup2(null, 2);
    }
#endif
    return true;
  }();
  (void)quiet;
  std::string input((const char *)data, size);
  size_t nl = input.find('\n');
  std::string line = input.substr(0, nl), body = nl == std::string::npos ? "" : input.substr(nl + 1);
  if (line.size() > 512)
    return 0;
  size_t first = body.find_first_not_of(" \t\r\n");
  bool json = first != std::string::npos && body[first] == '{';
  char path[] = "/tmp/planproof-fuzz-XXXXXX";
  int fd = ::mkstemp(path);
  if (fd < 0)
    return 0;
  std::string file = std::string(path) + (json ? ".json" : ".mlir");
  ::close(fd);
  ::unlink(path);
  if (FILE *f = std::fopen(file.c_str(), "wb")) {
    std::fwrite(body.data(), 1, body.size(), f);
    std::fclose(f);
  }
  // Commands and options as given; every other word (a path: "@", a directory, an
  // output file) becomes the fuzzed file, so that no run reads or writes elsewhere.
  static const std::vector<std::string> commands = {"verify", "check-specs", "import", "export",
                                                    "replay", "plan", "shrink", "--help", "--version"};
  std::vector<std::string> args{"planproof"};
  std::istringstream words(line);
  for (std::string w; words >> w && args.size() < 24;) {
    bool keep = (args.size() == 1 && std::find(commands.begin(), commands.end(), w) != commands.end()) ||
                (!w.empty() && w[0] == '-') || w.find_first_not_of("0123456789.,=_abcdefghijklmnopqrstuvwxyz") == std::string::npos;
    args.push_back(keep && w != "@" ? w : file);
  }
  // Every run is bounded: the fuzzer's own time limit catches what the CLI does not.
  if (args.size() > 1 && (args[1] == "verify" || args[1] == "replay" || args[1] == "check-specs" ||
                          args[1] == "shrink")) {
    args.push_back("--time-limit");
    args.push_back("2");
  }
  std::vector<char *> argv;
  for (std::string &a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  int rc = planproof::cliMain((int)args.size(), argv.data(), /*watchdog=*/false);
  std::remove(file.c_str());
  if (rc < 0 || rc > 3)
    std::abort(); // an exit status a CI gate cannot read
  return 0;
}
