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

TEST_CASE("interleaved splits hold one block of every segment", "[layout]") {
  Mesh m{"m", {"tp"}, {2}};
  Layout qkv;
  qkv.dims = {{}, {0}};
  qkv.segments = {1, 3}; // [Q | K | V], 4 columns each, split over tp
  Shape local;
  REQUIRE(qkv.localShape(m, {2, 12}, local));
  CHECK(local == Shape{2, 6});
  // Rank 1 holds Q[2:4], K[2:4], V[2:4] = global columns 2,3, 6,7, 10,11.
  std::vector<int64_t> cols;
  for (int64_t c = 0; c < 6; ++c)
    cols.push_back(qkv.globalIndex(m, 1, local, {0, c})[1]);
  CHECK(cols == std::vector<int64_t>{2, 3, 6, 7, 10, 11});
  CHECK_FALSE(qkv.localShape(m, {2, 9}, local)); // 9 columns: 3 segments of 3 do not split in 2
  CHECK(qkv.str(m) == "sharded on dim 1 over tp in 3 interleaved segments");
}
