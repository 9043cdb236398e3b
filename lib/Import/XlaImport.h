//===- XlaImport.h - XLA's SPMD partitioner, checked -------------*- C++ -*-===//
//
// Translation validation of XLA's SPMD partitioner. XLA, run with
//   --xla_dump_to=DIR --xla_dump_hlo_as_text --xla_dump_hlo_pass_re=spmd-partitioning
// writes the module entering its partitioner (the whole program, each instruction with
// its sharding) and the module leaving it (the per-device program with its
// collectives). This importer reads both: the first becomes planproof's reference step
// (its parameters' and results' shardings become the plan's input and output layouts),
// the second the plan, run by every partition. The device assignments of all shardings
// and replica groups are factored into one mesh of named axes; `partition-id`
// arithmetic and its constant tables are evaluated per partition and become
// rank-dependent slices (`dist.shard_slice`). The result is a spec in planproof's JSON
// interchange format (docs/json-format.md), which `planproof verify` decides.
//
// What is outside the covered op set (docs/xla.md) makes the import *unsupported*,
// naming the HLO op, its line and the user's source line: the verdict is then
// inconclusive, never verified.
//
//===----------------------------------------------------------------------===//
#ifndef PLANPROOF_IMPORT_XLAIMPORT_H
#define PLANPROOF_IMPORT_XLAIMPORT_H

#include "Support/Diagnostic.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace planproof {

struct XlaImportOptions {
  /// Names for the mesh axes, major to minor (`--mesh dp=2,tp=4`); their product must be
  /// the number of partitions. Axes the shardings split further are named `dp_0`, ...
  std::vector<std::pair<std::string, int64_t>> mesh;
  /// A separate reference program (text HLO of the single-device step, e.g. the
  /// `before_optimizations` dump of the unsharded jit): for shard_map programs, whose
  /// module before partitioning already computes per shard. Empty: the module before
  /// partitioning is the reference.
  std::string referencePath, referenceText;
  /// Written into the spec's "description".
  std::string description;
  /// Names for the step's results, in order (`--output-names`; planproof.xla writes the
  /// results' pytree paths): each reference result is a value of that name, so reports
  /// say which result is wrong. Empty: results are named by their HLO values.
  std::vector<std::string> outputNames;
};

enum class XlaImportStatus { Ok, BadInput, Unsupported };

/// Imports the module before the partitioner (`before`) and after it (`after`) into a
/// JSON spec. On BadInput or Unsupported, `diags` holds the located reason (for
/// Unsupported, what the import does not cover).
XlaImportStatus importXla(const std::string &beforePath, const std::string &beforeText,
                          const std::string &afterPath, const std::string &afterText,
                          const XlaImportOptions &options, nlohmann::ordered_json &spec,
                          Diagnostics &diags);

/// Parses `--output-names a,b,...`: identifiers ([A-Za-z_][A-Za-z0-9_]*), distinct;
/// false with a reason when malformed.
bool parseOutputNames(const std::string &text, std::vector<std::string> &names, std::string &why);

/// Parses `--mesh dp=2,tp=4`; false with a reason when malformed.
bool parseMeshOption(const std::string &text, std::vector<std::pair<std::string, int64_t>> &mesh,
                     std::string &why);

} // namespace planproof

#endif
