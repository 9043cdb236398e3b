//===- DiagnosticTest.cpp - located errors, written and read back ---------===//
//
// lib/Support/Diagnostic: the text form the CLI prints for a loader's Diagnostics, and
// the reader of that text for tools that only have the text (SupportTest covers the
// Diagnostics values themselves).
//
//===----------------------------------------------------------------------===//
#include "Support/Diagnostic.h"

#include <catch2/catch.hpp>

using namespace planproof;

TEST_CASE("formatError writes the place the compilers' way", "[diagnostic]") {
  CHECK(formatError({"a.mlir", 3, 7}, "bad") == "a.mlir:3:7: error: bad\n");
  // An unknown line leaves the file alone; an unknown file takes the fallback.
  CHECK(formatError({"a.json"}, "cannot read file") == "a.json: error: cannot read file\n");
  CHECK(formatError({}, "no place", "spec.mlir") == "spec.mlir: error: no place\n");
}

TEST_CASE("parseDiagnostics reads back what formatError writes", "[diagnostic]") {
  std::string text = formatError({"dir:x/a.mlir", 12, 5}, "first: with a colon") +
                     "  %0 = ref.add %a, %b\n      ^\n" +
                     "dir:x/a.mlir:10:1: note: see the operand here\n" +
                     formatError({"b.json"}, "second") + formatError({"c.hlo", 4, 0}, "third");
  std::vector<Diagnostic> d = parseDiagnostics(text);
  REQUIRE(d.size() == 3);
  CHECK(d[0].at.file == "dir:x/a.mlir");
  CHECK(d[0].at.line == 12);
  CHECK(d[0].at.col == 5);
  CHECK(d[0].message == "first: with a colon");
  REQUIRE(d[0].notes.size() == 1);
  CHECK(d[0].notes[0] == "note: see the operand here");
  CHECK(d[1].at.file == "b.json");
  CHECK(d[1].at.line == 0);
  CHECK(d[1].message == "second");
  CHECK(d[1].notes.empty());
  CHECK(d[2].at.file == "c.hlo");
  CHECK(d[2].at.line == 4);
  CHECK(d[2].at.col == 0);
}

TEST_CASE("parseDiagnostics: FILE:LINE, and text without an error line", "[diagnostic]") {
  std::vector<Diagnostic> d = parseDiagnostics("spec.mlir:9: error: only a line\n");
  REQUIRE(d.size() == 1);
  CHECK(d[0].at.file == "spec.mlir");
  CHECK(d[0].at.line == 9);
  CHECK(d[0].at.col == 0);
  CHECK(parseDiagnostics("a warning only\nspec.mlir: note: stray\n").empty());
  CHECK(parseDiagnostics("").empty());
}
