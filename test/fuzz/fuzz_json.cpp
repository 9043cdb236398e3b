//===- fuzz_json.cpp - fuzzing the JSON importer ----------------*- C++ -*-===//
//
// Input: a JSON spec. Loaded (parse, import, validation) and, when it loads, verified.
//
//===----------------------------------------------------------------------===//
#include "FuzzTarget.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  planproof::fuzz::loadAndVerify("fuzz.json", std::string((const char *)data, size));
  return 0;
}
