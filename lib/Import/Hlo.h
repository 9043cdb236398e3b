//===- Hlo.h - XLA's text HLO, as its dumps write it -------------*- C++ -*-===//
//
// A reader for the text form of an HloModule as XLA writes it with
// --xla_dump_hlo_as_text: the module header, the source tables (FileNames,
// FunctionNames, FileLocations, StackFrames), and computations of one instruction per
// line. It keeps each instruction's result shape, opcode, operand names, raw operand
// text (constants' literals) and attributes as raw text; the XLA importer
// (XlaImport.cpp) gives them meaning. Nothing here is evaluated.
//
// Errors name the file, line and column. The reader never recurses over the input's
// nesting (brackets are counted), and every number is range-checked.
//
//===----------------------------------------------------------------------===//
#ifndef PLANPROOF_IMPORT_HLO_H
#define PLANPROOF_IMPORT_HLO_H

#include "Support/Diagnostic.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace planproof::hlo {

/// An array shape (`f32[4,8]{1,0}`) or a tuple of shapes.
struct Shape {
  std::string type;              // element type ("f32", "s32", "pred", ...); "" for a tuple
  std::vector<int64_t> dims;     // array dims
  std::vector<Shape> elements;   // tuple elements
  bool isTuple() const { return type.empty(); }
  std::string str() const;
};

/// A user source location (from the StackFrames tables or source_file/source_line).
struct SourceLoc {
  std::string file;
  int64_t line = 0, col = 0;
  std::string opName;            // the framework's op name (metadata op_name)
};

struct Instruction {
  std::string name;              // without the leading '%'
  Shape shape;
  std::string opcode;
  std::vector<std::string> operands;   // operand instruction names
  std::string rawOperands;             // the text between the parentheses
  std::map<std::string, std::string> attrs;  // key -> raw value text
  bool root = false;
  unsigned line = 0, col = 0;          // where it is written
  SourceLoc loc;                       // where it comes from (empty file when unknown)
};

struct Computation {
  std::string name;
  bool entry = false;
  unsigned line = 0;
  /// The parameter shapes its header declares, `NAME (p: f32[2], q: s32[]) -> ...`
  /// (checked against its parameter instructions when the computation closes).
  std::vector<Shape> signature;
  bool hasSignature = false;
  std::vector<Instruction> insts;
  std::map<std::string, size_t> byName;
  const Instruction *root() const;
  const Instruction *find(const std::string &n) const {
    auto it = byName.find(n);
    return it == byName.end() ? nullptr : &insts[it->second];
  }
};

struct Module {
  std::string path;
  std::string name;
  std::map<std::string, std::string> attrs;  // header attributes, raw
  /// Where each header attribute's value is written (line, column), for errors about it.
  std::map<std::string, std::pair<unsigned, unsigned>> attrAt;
  std::vector<Computation> computations;
  std::map<std::string, size_t> byName;
  const Computation *entry() const;
  const Computation *find(const std::string &n) const {
    auto it = byName.find(n);
    return it == byName.end() ? nullptr : &computations[it->second];
  }
};

/// The binary op a reduction computation (a reduce's, a collective's or a scatter's
/// `to_apply`) applies: its opcode when the computation is exactly that op of its two
/// parameters -- `root = OP(p0, p1)` with p0 and p1 distinct scalar parameters numbered
/// 0 and 1 of the root's type, in either order for a commutative OP, and nothing else.
/// "" otherwise, with `why`: `add(p0, p0)` or `subtract(p1, p0)` is not a sum, and
/// reading a computation by its root's opcode alone once verified such a plan.
std::string reducerOpcode(const Module &m, const std::string &toApply, std::string &why);

/// Parses the text of one dump. On failure fills `err` and returns false. Comments
/// (`// ...` to the end of the line, `/* ... */`, as XLA's own HLO lexer takes them)
/// are skipped outside quoted strings. The header's num_partitions and replica_count
/// must be decimal integers in [1, 2^31], each written once.
bool parseModule(const std::string &path, const std::string &text, Module &m, Diagnostic &err);

/// Splits a raw attribute or list text at top-level commas (outside brackets, braces,
/// parentheses and quotes), trimming spaces.
std::vector<std::string> splitTopLevel(const std::string &text, char sep = ',');

/// Parses `{1,0,2}` or `1,0,2` (an integer list); false when malformed or out of range.
bool parseIntList(const std::string &text, std::vector<int64_t> &out);

} // namespace planproof::hlo

#endif
