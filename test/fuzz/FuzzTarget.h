//===- FuzzTarget.h - what every fuzzing harness shares ----------*- C++ -*-===//
//
// The harnesses (fuzz_json.cpp, fuzz_mlir.cpp, fuzz_cli.cpp) each define
// LLVMFuzzerTestOneInput. Built with clang and -fsanitize=fuzzer they are libFuzzer
// targets (PLANPROOF_LIBFUZZER=ON, scripts/fuzz.sh); built with any compiler they link
// SeededDriver.cpp instead, a deterministic mutation driver that `make test` runs for a
// short seeded run over the catalogue (test/CMakeLists.txt, ctest entry `fuzz-seeded`).
// Either way a crash is a crash, and an input that runs past the per-input limit is a
// hang.
//
//===----------------------------------------------------------------------===//
#ifndef PLANPROOF_TEST_FUZZ_FUZZTARGET_H
#define PLANPROOF_TEST_FUZZ_FUZZTARGET_H

#include "Engine/Verifier.h"
#include "Import/LoadSpec.h"
#include "LayoutEngine/LayoutEngine.h"
#include "Spec/Spec.h"

#include "mlir/IR/MLIRContext.h"

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

namespace planproof::fuzz {

/// Loads `text` as a spec named `name` and, when it loads, verifies it within a short
/// time budget: what the importer accepts must also be safe for every engine.
inline void loadAndVerify(const std::string &name, const std::string &text) {
  mlir::MLIRContext ctx;
  // Diagnostics go to the error string, never to stderr.
  ctx.printOpOnDiagnostic(false);
  registerDialects(ctx);
  Spec spec;
  planproof::Diagnostics errors;
  if (!loadSpecText(ctx, name, text, spec, errors))
    return;
  VerifyOptions options;
  options.threads = 1;
  options.solverBudget = 1'000'000;
  options.deadline = Deadline(2.0);
  verifySpec(spec, options);
  // The layout engine too (its rules read attributes, shapes and layouts the element
  // engine reads differently), with a budget of its own.
  options.deadline = Deadline(2.0);
  verifyByLayouts(spec, options);
  // With calls, the layout engine's kept reading as well (calls not expanded, backward
  // passes derived through vjp functions, functions summarized).
  if (text.find("call @") == std::string::npos)
    return;
  Spec kept;
  kept.keepCalls = true;
  planproof::Diagnostics keptErrors;
  if (!loadSpecText(ctx, name, text, kept, keptErrors) || !kept.keptCallsRefused.empty())
    return;
  options.deadline = Deadline(2.0);
  verifyByLayouts(kept, options);
}

} // namespace planproof::fuzz

#endif
