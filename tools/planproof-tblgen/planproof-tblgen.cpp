//===- planproof-tblgen.cpp - op facts from ODS for the JSON format -------===//
//
// mlir-tblgen with planproof's own generators, so that what the JSON interchange format
// knows about an op comes from its ODS definition (RefOps.td, DistOps.td) and is never
// written by hand:
//
//   -gen-json-op-table   the JSON attribute table: every op whose record says
//                        `inJsonFormat = 1`, with each inherent attribute's JSON kind
//                        (C++ initializer rows, included by lib/Import/JsonImport.cpp);
//   -gen-json-op-list    the same ops' names as a JSON array (scripts/update_schema.py
//                        writes them into docs/spec.schema.json's op list).
//
// An attribute of a type the JSON format has no kind for is an error here, at build
// time, naming the op and the attribute.
//
//===----------------------------------------------------------------------===//
#include "mlir/TableGen/GenInfo.h"
#include "mlir/TableGen/Operator.h"
#include "mlir/Tools/mlir-tblgen/MlirTblgenMain.h"
#include "llvm/TableGen/Error.h"
#include "llvm/TableGen/Record.h"
#include "llvm/TableGen/TableGenBackend.h"
#include "llvm/Support/raw_ostream.h"

#include <string>
#include <vector>

using namespace mlir::tblgen;

namespace {

/// The JSON kind of an attribute constraint (docs/json-format.md): how the importer
/// reads it and what the schema lets through.
std::string jsonKind(const Operator &op, const mlir::tblgen::NamedAttribute &na) {
  const Attribute &attr = na.attr;
  llvm::StringRef def = attr.isOptional() || attr.hasDefaultValue()
                            ? attr.getBaseAttr().getAttrDefName()
                            : attr.getAttrDefName();
  bool optional = attr.isOptional() || attr.hasDefaultValue();
  std::string kind;
  if (def == "UnitAttr")
    return "flag"; // present or absent: always optional
  if (def == "I64Attr")
    kind = "int";
  else if (def == "F64Attr")
    kind = "float";
  else if (def == "StrAttr")
    kind = "string";
  else if (def == "StrArrayAttr")
    kind = "string[]";
  else if (def == "DenseI64ArrayAttr")
    kind = "int[]";
  else if (def == "DenseF64ArrayAttr")
    kind = "float[]";
  else if (def == "DictionaryAttr")
    kind = "coords"; // mesh axis -> coordinate (dist.select_on)
  else
    llvm::PrintFatalError(op.getLoc(), "attribute '" + na.name + "' of '" +
                                           op.getOperationName() + "' is a " + def +
                                           ", which the JSON format has no kind for "
                                           "(tools/planproof-tblgen)");
  if (optional && kind != "int")
    llvm::PrintFatalError(op.getLoc(), "optional attribute '" + na.name + "' of '" +
                                           op.getOperationName() +
                                           "': the JSON format has optional ints only");
  return optional ? kind + "?" : kind;
}

/// The ops of the JSON format, in the order of their records.
std::vector<Operator> jsonOps(const llvm::RecordKeeper &records) {
  std::vector<Operator> ops;
  for (const llvm::Record *def : records.getAllDerivedDefinitions("Op")) {
    // Only the ops of the dialect this file defines (some in files it includes for
    // it); the ops of other dialects included are theirs.
    const llvm::Record *dialect = Operator(def).getDialect().getDef();
    if (!records.getInputFilename().empty() &&
        llvm::SrcMgr.FindBufferContainingLoc(dialect->getLoc().front()) !=
            llvm::SrcMgr.getMainFileID())
      continue;
    const llvm::RecordVal *in = def->getValue("inJsonFormat");
    if (!in)
      llvm::PrintFatalError(def->getLoc(), "op record without `inJsonFormat`: say whether "
                                           "the JSON format has this op");
    if (def->getValueAsBit("inJsonFormat"))
      ops.emplace_back(def);
  }
  return ops;
}

bool emitTable(const llvm::RecordKeeper &records, llvm::raw_ostream &os) {
  llvm::emitSourceFileHeader("JSON attribute table (from ODS)", os, records);
  for (const Operator &op : jsonOps(records)) {
    os << "{\"" << op.getOperationName() << "\", {";
    bool first = true;
    for (const mlir::tblgen::NamedAttribute &na : op.getAttributes()) {
      os << (first ? "" : ", ") << "{\"" << na.name << "\", \"" << jsonKind(op, na) << "\"}";
      first = false;
    }
    os << "}},\n";
  }
  return false;
}

bool emitList(const llvm::RecordKeeper &records, llvm::raw_ostream &os) {
  os << "[";
  bool first = true;
  for (const Operator &op : jsonOps(records)) {
    os << (first ? "\n" : ",\n") << "  \"" << op.getOperationName() << "\"";
    first = false;
  }
  os << "\n]\n";
  return false;
}

mlir::GenRegistration table("gen-json-op-table", "the JSON format's attribute table",
                            emitTable);
mlir::GenRegistration list("gen-json-op-list", "the JSON format's ops, as a JSON array",
                           emitList);

} // namespace

int main(int argc, char **argv) { return mlir::MlirTblgenMain(argc, argv); }
