//===- fuzz_xla.cpp - fuzzing the XLA importer ------------------*- C++ -*-===//
//
// Input: the two HLO dumps of `planproof import-xla`, the module before partitioning
// and the one after, separated by a line `// AFTER` (without it, the text is both),
// and optionally, after a line `// REFERENCE`, a shard_map step's single-device
// module (`--reference`). Imported; when the import gives a spec, that spec is loaded
// and verified, so what the importer writes must also be safe for the JSON importer
// and every engine.
//
//===----------------------------------------------------------------------===//
#include "FuzzTarget.h"

#include "Import/XlaImport.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string text((const char *)data, size), reference;
  size_t ref = text.find("\n// REFERENCE\n");
  if (ref != std::string::npos) {
    reference = text.substr(ref + 14);
    text.resize(ref + 1);
  }
  std::string before = text, after = text;
  size_t cut = text.find("\n// AFTER\n");
  if (cut != std::string::npos) {
    before = text.substr(0, cut + 1);
    after = text.substr(cut + 10);
  }
  nlohmann::ordered_json spec;
  planproof::Diagnostics message;
  planproof::XlaImportOptions options;
  if (ref != std::string::npos) {
    options.referencePath = "reference.hlo";
    options.referenceText = reference;
  }
  if (planproof::importXla("before.hlo", before, "after.hlo", after, options, spec, message) !=
      planproof::XlaImportStatus::Ok)
    return 0;
  planproof::fuzz::loadAndVerify("fuzz.json", spec.dump(1));
  return 0;
}
