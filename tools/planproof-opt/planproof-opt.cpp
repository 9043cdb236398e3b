//===- planproof-opt.cpp - mlir-opt with planproof's dialects ---*- C++ -*-===//
//
// `mlir-opt` with the `ref` and `dist` dialects plus func/arith/tensor/scf registered:
// round-trips, verifies and transforms planproof IR.
//
// The input is read the way the planproof CLI reads a spec (Support/Input.h) before
// MLIR's parser sees it: a regular file or a pipe of at most kMaxInputBytes, brackets
// nested at most kMaxNesting deep, no control, invisible or bidirectional characters
// (MLIR's diagnostics print names and source lines as they are). mlir-opt's own reader
// takes /dev/zero until memory runs out, and its parser recurses per nesting level until
// the stack does; a refused input is an error naming the file (exit status 2), never an
// abort. `--time-limit SECONDS` (default 600) bounds the run (exit 3 past it); MLIR's
// own failures keep mlir-opt's exit status 1.
//
//===----------------------------------------------------------------------===//
#include "Dist/DistDialect.h"
#include "Ref/RefDialect.h"
#include "Support/Input.h"
#include "Support/Limits.h"
#include "Support/Printable.h"
#include "Transforms/Autodiff.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <thread>
#include <unistd.h>
#include <iterator>

namespace {
/// The input as planproof reads inputs; "-" is stdin, read within the same size limit.
bool readBounded(const std::string &path, std::string &text, planproof::Diagnostics &diags) {
  if (path != "-")
    return planproof::readInputFile(path, text, diags);
  char buf[1 << 16];
  while (std::cin.read(buf, sizeof buf) || std::cin.gcount() > 0) {
    if ((int64_t)(text.size() + std::cin.gcount()) > planproof::kMaxInputBytes)
      return diags.error({"<stdin>"}, "the input is larger than " +
                                          std::to_string(planproof::kMaxInputBytes >> 20) +
                                          " MiB");
    text.append(buf, std::cin.gcount());
  }
  return true;
}

/// `--time-limit SECONDS` (default 600), taken out of argv before MLIR's options see
/// it: past it the process ends with exit 3 and says so (a pass pipeline over a huge
/// input must not run without end).
void armTimeLimit(int &argc, char **argv) {
  double seconds = 600;
  int out = 1;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--time-limit" && i + 1 < argc) {
      char *end = nullptr;
      double s = std::strtod(argv[i + 1], &end);
      if (*end || !(s > 0 && s <= 86400)) {
        llvm::errs() << "planproof-opt: error: --time-limit needs a number of seconds in (0, "
                        "86400]\n";
        std::exit(2);
      }
      seconds = s;
      ++i;
      continue;
    }
    argv[out++] = argv[i];
  }
  argc = out;
  std::thread([seconds] {
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
    const char msg[] = "planproof-opt: the time limit was reached; the run was stopped\n";
    ssize_t ignored = ::write(2, msg, sizeof msg - 1);
    (void)ignored;
    ::_exit(3);
  }).detach();
}
} // namespace

int main(int argc, char **argv) {
  armTimeLimit(argc, argv);
  mlir::registerTransformsPasses();
  planproof::registerAutodiffPasses();
  mlir::DialectRegistry registry;
  registry.insert<planproof::ref::RefDialect, planproof::dist::DistDialect,
                  mlir::func::FuncDialect, mlir::arith::ArithDialect,
                  mlir::tensor::TensorDialect, mlir::scf::SCFDialect>();
  auto [input, output] =
      mlir::registerAndParseCLIOptions(argc, argv, "planproof optimizer driver\n", registry);
  mlir::MlirOptMainConfig config = mlir::MlirOptMainConfig::createFromCLOptions();

  std::string text;
  planproof::Diagnostics diags;
  if (!readBounded(input, text, diags) ||
      !planproof::checkNesting(input, text, planproof::Syntax::Mlir, diags)) {
    llvm::errs() << diags.str(); // (escaped: Support/Printable.h)
    return 2;
  }
  // MLIR's diagnostics print the file's name and its source lines as they are: an input
  // holding control, invisible or bidirectional characters (or a name that does) could
  // forge what they show, so it is refused here, where planproof's escaping applies.
  if (size_t bad = planproof::firstEscaped(text); bad != std::string::npos) {
    unsigned line = 1 + (unsigned)std::count(text.begin(), text.begin() + bad, '\n');
    size_t start = text.rfind('\n', bad);
    unsigned col = unsigned(bad - (start == std::string::npos ? 0 : start + 1)) + 1;
    diags.error({input, line, col}, "the input holds a control, invisible or bidirectional "
                                    "character, or bytes that are not UTF-8 (MLIR text has none)");
    llvm::errs() << diags.str();
    return 2;
  }
  std::string error;
  std::unique_ptr<llvm::ToolOutputFile> out = mlir::openOutputFile(output, &error);
  if (!out) {
    llvm::errs() << error << "\n";
    return 2;
  }
  auto buffer = llvm::MemoryBuffer::getMemBufferCopy(text, planproof::printable(input, false));
  if (mlir::failed(mlir::MlirOptMain(out->os(), std::move(buffer), registry, config)))
    return 1;
  out->keep();
  return 0;
}
