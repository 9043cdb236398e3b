//===- JsonExport.h - specs back to the JSON interchange format -*- C++ -*-===//
//
// Writes a loaded spec in the JSON interchange format (docs/json-format.md): what a
// planner's author reads to see the format of a plan written in MLIR, and the other half
// of a round trip that tests the importer on the whole spec catalogue.
//
//===----------------------------------------------------------------------===//
#ifndef PLANPROOF_IMPORT_JSONEXPORT_H
#define PLANPROOF_IMPORT_JSONEXPORT_H

#include <cstdint>
#include <string>

namespace planproof {

struct Spec;

/// The most ops (reference and plan, calls expanded) an exported spec holds: each a
/// JSON object of a few hundred bytes, well under the input limit a reader applies.
constexpr uint64_t kMaxExportOps = 1'000'000;

/// Renders `spec` as JSON. Returns false with `error` set for what the JSON format cannot
/// express (rank-coordinate arithmetic, ops with several results).
bool exportJsonSpec(const Spec &spec, std::string &out, std::string &error);

} // namespace planproof

#endif
