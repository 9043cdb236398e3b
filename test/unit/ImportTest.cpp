//===- ImportTest.cpp - the JSON importer's tables and positions ------------===//
#include "Import/JsonImport.h"
#include "Support/JsonDocument.h"
#include "Spec/Spec.h"

#include "mlir/IR/OperationSupport.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <fstream>
#include <set>

using namespace planproof;

TEST_CASE("JSON op attributes match the dialects' op definitions", "[import]") {
  mlir::MLIRContext ctx;
  registerDialects(ctx);
  for (auto &[name, attrs] : jsonOpAttributes()) {
    INFO(name);
    auto op = mlir::RegisteredOperationName::lookup(name, &ctx);
    REQUIRE(op.has_value());
    std::set<std::string> inherent, table;
    for (mlir::StringAttr a : op->getAttributeNames())
      inherent.insert(a.getValue().str());
    for (auto &[k, v] : attrs)
      table.insert(k);
    CHECK(inherent == table);
  }
  // Every ref and dist op with one tensor result is importable (ref.grad has several
  // results; the mesh and rank coordinates are not ops of the JSON op list; checkpoint
  // specs are MLIR only, docs/checkpoint.md, and so are pipelined plans, docs/pipeline.md).
  for (mlir::RegisteredOperationName op : ctx.getRegisteredOperations()) {
    llvm::StringRef ns = op.getDialectNamespace();
    if ((ns == "ref" || ns == "dist") && op.getStringRef() != "dist.mesh" &&
        op.getStringRef() != "dist.axis_index" && op.getStringRef() != "ref.grad" &&
        op.getStringRef() != "dist.save" && op.getStringRef() != "dist.load" &&
        op.getStringRef() != "dist.send" && op.getStringRef() != "dist.recv" &&
        op.getStringRef() != "dist.stage_select") {
      INFO(op.getStringRef().str());
      CHECK(jsonOpAttributes().count(op.getStringRef().str()) == 1);
    }
  }
}

TEST_CASE("JSON values are located by pointer", "[import]") {
  std::string text = "{\n  \"a\": [1,\n    {\"b\": \"x\"}],\n  \"c/d\": null\n}\n";
  auto pos = locateJsonValues(text);
  CHECK(pos.at("") == std::make_pair(1u, 1u));
  CHECK(pos.at("/a") == std::make_pair(2u, 8u));
  CHECK(pos.at("/a/0") == std::make_pair(2u, 9u));
  CHECK(pos.at("/a/1") == std::make_pair(3u, 5u));
  CHECK(pos.at("/a/1/b") == std::make_pair(3u, 11u));
  CHECK(pos.at("/c~1d") == std::make_pair(4u, 10u));
}

TEST_CASE("the published JSON schema lists exactly the importable ops", "[import]") {
  // docs/spec.schema.json's op list is written by `make schema` from the ops' ODS
  // definitions (scripts/update_schema.py): every op of the JSON format, qualified and
  // bare, and the index ops the importer builds itself.
  std::ifstream in(PLANPROOF_SOURCE_DIR "/docs/spec.schema.json");
  REQUIRE(in.good());
  nlohmann::json schema = nlohmann::json::parse(in);
  std::set<std::string> listed, expected = {"dist.axis_index", "axis_index", "arith.constant",
                                            "arith.addi", "arith.subi", "arith.muli"};
  for (auto &o : schema["$defs"]["op"]["properties"]["op"]["enum"])
    listed.insert(o.get<std::string>());
  for (auto &[name, attrs] : jsonOpAttributes()) {
    expected.insert(name);
    expected.insert(name.substr(name.find('.') + 1)); // bare form
  }
  INFO("run `make schema` after adding or removing an op of the JSON format");
  CHECK(listed == expected);
}

TEST_CASE("integers outside int64 are bad input at their place", "[import]") {
  // nlohmann/json keeps 2^63..2^64-1 unsigned (an int64 reader wraps them negative)
  // and larger ones as rounded doubles: both refused, named by line and path.
  for (const char *big : {"9223372036854775808", "18446744073709551615",
                          "18446744073709551617", "-9223372036854775809", "1" "00000000000000000000000"}) {
    std::string text = std::string("{\"a\": 1,\n \"b\": [2, ") + big + "]}";
    JsonDocument doc;
    Diagnostics diags;
    CHECK_FALSE(doc.parse("x.json", text, diags));
    REQUIRE(diags.size() == 1);
    CHECK(diags.list()[0].at.line == 2);
    CHECK(diags.list()[0].at.col == 11);
    CHECK(diags.list()[0].message.rfind("b[1]: ", 0) == 0);
  }
  // The bounds themselves, fractions and exponents are numbers as before.
  for (const char *fine : {"9223372036854775807", "-9223372036854775808", "1e30", "0.5"}) {
    JsonDocument doc;
    Diagnostics diags;
    CHECK(doc.parse("x.json", std::string("{\"b\": ") + fine + "}", diags));
  }
}
