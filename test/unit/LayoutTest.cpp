//===- LayoutTest.cpp - meshes, groups and layout index maps ----------------===//
#include "Semantics/Layout.h"

#include <catch2/catch.hpp>

using namespace planproof;

static Mesh mesh2x4() { return Mesh{"m", {"dp", "tp"}, {2, 4}}; }

TEST_CASE("ranks are numbered row-major over the mesh axes", "[layout]") {
  Mesh m = mesh2x4();
  CHECK(m.numRanks() == 8);
  CHECK(m.coords(6) == std::vector<int64_t>{1, 2});
  CHECK(m.rankOf({1, 2}) == 6);
  CHECK(m.rankStr(6) == "(dp=1, tp=2)");
}

TEST_CASE("groups vary only along their axes, in the order given", "[layout]") {
  Mesh m = mesh2x4();
  CHECK(m.group(6, {1}) == std::vector<int64_t>{4, 5, 6, 7});
  CHECK(m.group(6, {0}) == std::vector<int64_t>{2, 6});
  CHECK(m.positionInGroup(6, {0, 1}) == 6);
  CHECK(m.positionInGroup(6, {1, 0}) == 5); // tp major: 2 * 2 + 1
}

TEST_CASE("local blocks and global indices", "[layout]") {
  Mesh m = mesh2x4();
  Layout l;
  l.dims = {{0}, {1}}; // dim 0 over dp, dim 1 over tp
  Shape local;
  REQUIRE(l.localShape(m, {4, 8}, local));
  CHECK(local == Shape{2, 2});
  // Rank (dp=1, tp=2) holds rows 2..3 and columns 4..5.
  CHECK(l.globalIndex(m, 6, local, {1, 0}) == std::vector<int64_t>{3, 4});
  CHECK_FALSE(l.localShape(m, {3, 8}, local));
  Layout twoAxes;
  twoAxes.dims = {{0, 1}};
  REQUIRE(twoAxes.localShape(m, {16}, local));
  CHECK(local == Shape{2});
  CHECK(twoAxes.globalIndex(m, 6, local, {1}) == std::vector<int64_t>{13});
  Layout partial;
  partial.dims = {{}};
  partial.partial = {{1, ReduceKind::Sum}};
  CHECK(partial.str(m) == "partial-sum over tp");
  CHECK(l.str(m) == "sharded on dim 0 over dp, sharded on dim 1 over tp");
}
