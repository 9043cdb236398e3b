//===- fuzz_xla.cpp - fuzzing the XLA importer ------------------*- C++ -*-===//
//
// Input: the two HLO dumps of `planproof import-xla`, the module before partitioning
// and the one after, separated by a line `// AFTER` (without it, the text is both).
// Imported; when the import gives a spec, that spec is loaded and verified, so what the
// importer writes must also be safe for the JSON importer and every engine.
//
//===----------------------------------------------------------------------===//
#include "FuzzTarget.h"

#include "Import/XlaImport.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string text((const char *)data, size), before = text, after = text;
  size_t cut = text.find("\n// AFTER\n");
  if (cut != std::string::npos) {
    before = text.substr(0, cut + 1);
    after = text.substr(cut + 10);
  }
  nlohmann::ordered_json spec;
  planproof::Diagnostics message;
  planproof::XlaImportOptions options;
  if (planproof::importXla("before.hlo", before, "after.hlo", after, options, spec, message) !=
      planproof::XlaImportStatus::Ok)
    return 0;
  planproof::fuzz::loadAndVerify("fuzz.json", spec.dump(1));
  return 0;
}
