//===- fuzz_mlir.cpp - fuzzing the MLIR loader ------------------*- C++ -*-===//
//
// Input: an MLIR spec. Parsed, verified by the dialects, validated and, when it
// loads, verified.
//
//===----------------------------------------------------------------------===//
#include "FuzzTarget.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  planproof::fuzz::loadAndVerify("fuzz.mlir", std::string((const char *)data, size));
  return 0;
}
