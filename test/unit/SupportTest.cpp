//===- SupportTest.cpp - bounded input, size caps, deadlines, diagnostics --===//
//
// lib/Support alone: the guards every loader and engine relies on before anything
// else runs (Input.h, Limits.h, Deadline.h) and the error values of Diagnostic.h.
//
//===----------------------------------------------------------------------===//
#include "Support/Deadline.h"
#include "Support/Diagnostic.h"
#include "Support/Input.h"
#include "Support/Limits.h"

#include <catch2/catch.hpp>

#include <cstdio>
#include <fstream>
#include <thread>
#include <unistd.h>

using namespace planproof;
using Catch::Matchers::Contains;

namespace {
std::string tempPath(const char *tail) {
  return "/tmp/planproof-support-" + std::to_string(::getpid()) + tail;
}
} // namespace

TEST_CASE("readInputFile: a file, a missing file, a directory", "[support]") {
  std::string path = tempPath(".mlir");
  {
    std::ofstream(path) << "module {}\n";
  }
  std::string text;
  Diagnostics diags;
  REQUIRE(readInputFile(path, text, diags));
  CHECK(text == "module {}\n");
  CHECK(diags.empty());
  std::remove(path.c_str());

  CHECK_FALSE(readInputFile(path, text, diags));
  REQUIRE(diags.size() == 1);
  CHECK(diags.list()[0].at.file == path);
  CHECK_THAT(diags.list()[0].message, Contains("cannot read file"));

  Diagnostics dir;
  CHECK_FALSE(readInputFile("/tmp", text, dir));
  REQUIRE(dir.size() == 1);
  CHECK(dir.list()[0].message == "cannot read file: it is a directory");
}

TEST_CASE("checkNesting: the depth that passes, the bracket that does not", "[support]") {
  Diagnostics ok;
  std::string deepOk(kMaxNesting, '[');
  deepOk += std::string(kMaxNesting, ']');
  CHECK(checkNesting("a.json", deepOk, Syntax::Json, ok));
  CHECK(ok.empty());

  // One level more fails at the bracket that passes the limit: line 2, its column.
  std::string tooDeep = "{\n" + std::string(kMaxNesting, '[');
  Diagnostics deep;
  CHECK_FALSE(checkNesting("a.json", tooDeep, Syntax::Json, deep));
  REQUIRE(deep.size() == 1);
  CHECK(deep.list()[0].at.str() == "a.json:2:" + std::to_string(kMaxNesting));

  // Brackets inside strings, and in MLIR comments, are text, not nesting; MLIR's '->'
  // closes nothing and '(' and '<' count in MLIR only.
  std::string quoted = "\"" + std::string(2 * kMaxNesting, '[') + "\"";
  Diagnostics q;
  CHECK(checkNesting("a.json", quoted, Syntax::Json, q));
  std::string comment = "// " + std::string(2 * kMaxNesting, '{') + "\nmodule {}\n";
  CHECK(checkNesting("a.mlir", comment, Syntax::Mlir, q));
  std::string parens(kMaxNesting + 1, '(');
  CHECK(checkNesting("a.json", parens, Syntax::Json, q));
  CHECK(q.empty());
  CHECK_FALSE(checkNesting("a.mlir", parens, Syntax::Mlir, q));
}

TEST_CASE("UTF-8: well-formed text passes, the first bad byte is located", "[support]") {
  using namespace std::string_literals;
  CHECK(firstInvalidUtf8("plain ascii\n") == std::string::npos);
  CHECK(firstInvalidUtf8("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80") == std::string::npos);
  CHECK(firstInvalidUtf8("ab\xff") == 2);                // never a UTF-8 byte
  CHECK(firstInvalidUtf8("a\xc3") == 1);                 // cut short
  CHECK(firstInvalidUtf8("a\xf0y") == 1);                // continuation missing
  CHECK(firstInvalidUtf8("\xc0\xaf") == 0);             // overlong '/'
  CHECK(firstInvalidUtf8("\xe0\x80\xaf") == 0);        // overlong, three bytes
  CHECK(firstInvalidUtf8("\xed\xa0\x80") == 0);        // a surrogate
  CHECK(firstInvalidUtf8("\xf4\x90\x80\x80") == 0);   // past U+10FFFF
  CHECK(firstInvalidUtf8("x\0y"s) == std::string::npos);  // NUL is UTF-8
  Diagnostics diags;
  CHECK_FALSE(checkUtf8("f.mlir", "line one\nab\xfe", diags));
  REQUIRE(diags.list().size() == 1);
  CHECK(diags.list()[0].at.str() == "f.mlir:2:3");
  CHECK(diags.list()[0].message == "not UTF-8 text: byte 0xFE starts no UTF-8 character");
  CHECK(checkUtf8("f.mlir", "fine", diags));
}

TEST_CASE("Limits: checked arithmetic never wraps", "[support]") {
  int64_t out = 0;
  CHECK(checkedMul(int64_t(1) << 31, int64_t(1) << 31, out));
  CHECK(out == int64_t(1) << 62);
  CHECK_FALSE(checkedMul(int64_t(1) << 32, int64_t(1) << 32, out));
  CHECK_FALSE(checkedAdd(INT64_MAX, 1, out));
  // 2^40 x 2^40 once wrapped to an empty tensor.
  CHECK(checkedProduct(std::vector<int64_t>{int64_t(1) << 40, int64_t(1) << 40}) == -1);
  CHECK(checkedProduct(std::vector<int64_t>{1024, 1024, 1024}) == int64_t(1) << 30);
  CHECK(checkedProduct(std::vector<int64_t>{4, -1}) == -1);
  CHECK(checkedProduct(std::vector<int64_t>{}) == 1);
  CHECK(rangeInside(2, 3, 5));
  CHECK_FALSE(rangeInside(3, 3, 5));
  CHECK_FALSE(rangeInside(INT64_MAX, 2, INT64_MAX));
  CHECK_FALSE(rangeInside(-1, 1, 5));
}

TEST_CASE("Limits: shapeProblem names the dimension", "[support]") {
  const int64_t dyn = INT64_MIN;
  CHECK(shapeProblem(std::vector<int64_t>{4, 8}, dyn).empty());
  CHECK_THAT(shapeProblem(std::vector<int64_t>{4, dyn}, dyn), Contains("dimension 1 is dynamic"));
  CHECK_THAT(shapeProblem(std::vector<int64_t>{0}, dyn), Contains("dimension 0 has size 0"));
  CHECK_THAT(shapeProblem(std::vector<int64_t>{kMaxDimSize + 1}, dyn), Contains("more than 2^31"));
  CHECK(shapeProblem(std::vector<int64_t>{kMaxDimSize, kMaxDimSize}, dyn) ==
        "more than 2^40 elements");
}

TEST_CASE("Deadline: unlimited, spent, and capped solver budgets", "[support]") {
  Deadline none;
  CHECK_FALSE(none.isLimited());
  CHECK_FALSE(none.expired());
  CHECK_NOTHROW(none.check("anything"));
  CHECK(none.cap(500) == 500);

  Deadline spent(0.0);
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  CHECK(spent.expired());
  CHECK(spent.remainingMs() == 0);
  // A solver is never given 0 ms (Z3 reads 0 as no limit).
  CHECK(spent.cap(500) == 1);
  try {
    spent.check("deciding obligations");
    FAIL("check() on a spent budget must throw");
  } catch (const TimeLimit &t) {
    CHECK(t.phase == "deciding obligations");
    CHECK_THAT(std::string(t.what()), Contains("during deciding obligations"));
  }
  CHECK(std::string(Deadline::currentPhase().load()) == "deciding obligations");

  Deadline hour(3600);
  CHECK_FALSE(hour.expired());
  CHECK(hour.cap(500) == 500);
  CHECK(hour.remainingMs() > 3590u * 1000);
}

TEST_CASE("Diagnostics: errors are values, the text is what the CLI prints", "[support]") {
  Diagnostics d;
  d.note("dropped: no error yet");
  CHECK(d.empty());
  CHECK_FALSE(d.error({"a.mlir", 3, 5}, "first"));
  d.note("a.mlir:1:1: note: declared here");
  CHECK_FALSE(d.error({}, "second", "spec.json"));
  REQUIRE(d.size() == 2);
  CHECK(d.list()[0].notes.size() == 1);
  CHECK(d.list()[1].at.file == "spec.json");
  CHECK(d.str() == "a.mlir:3:5: error: first\n"
                   "a.mlir:1:1: note: declared here\n"
                   "spec.json: error: second\n");
  // The text reads back into the same places and messages.
  std::vector<Diagnostic> back = parseDiagnostics(d.str());
  REQUIRE(back.size() == 2);
  CHECK(back[0].at.str() == "a.mlir:3:5");
  CHECK(back[1].message == "second");
  Diagnostics more;
  more.error({"b.json"}, "third");
  d.append(more);
  CHECK(d.size() == 3);
}
