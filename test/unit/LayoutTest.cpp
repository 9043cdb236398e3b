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

TEST_CASE("a block's runs are its consecutive elements, padding in none", "[layout]") {
  using Run = Layout::Run;
  Mesh cp{"m", {"cp"}, {2}};
  // Zigzag over cp=2 on 8 positions: rank 0 holds chunks 0 and 3, rank 1 chunks 1 and 2
  // (which are adjacent: one run).
  Layout zig;
  zig.dims = {{0}};
  zig.segments = {-2};
  CHECK(zig.runs(cp, 0, {4}, 0, 8) == std::vector<Run>{{0, 0, 2}, {2, 6, 2}});
  CHECK(zig.runs(cp, 1, {4}, 0, 8) == std::vector<Run>{{0, 2, 4}});
  // Interleaved segments [Q | K | V] of 4 columns over tp=2: one run per segment.
  Layout qkv;
  qkv.dims = {{}, {0}};
  qkv.segments = {1, 3};
  CHECK(qkv.runs(cp, 1, {2, 6}, 1, 12) == std::vector<Run>{{0, 2, 2}, {2, 6, 2}, {4, 10, 2}});
  CHECK(qkv.runs(cp, 1, {2, 6}, 0, 2) == std::vector<Run>{{0, 0, 2}});
  // A padded shard: 25 elements in blocks of 13; rank 1's last element is padding.
  Layout padded;
  padded.dims = {{0}};
  padded.padded = true;
  CHECK(padded.runs(cp, 1, {13}, 0, 25) == std::vector<Run>{{0, 13, 12}});
  CHECK(padded.runs(cp, 0, {13}, 0, 25) == std::vector<Run>{{0, 0, 13}});
  // Every element of every rank's block lies in exactly the run globalCoord puts it in.
  Mesh m{"m", {"dp", "cp"}, {2, 2}};
  Layout two;
  two.dims = {{0, 1}};
  two.segments = {-2};
  for (int64_t r = 0; r < m.numRanks(); ++r) {
    std::vector<Run> rs = two.runs(m, r, {4}, 0, 16);
    int64_t covered = 0;
    for (const Run &run : rs)
      for (int64_t i = 0; i < run.len; ++i, ++covered)
        CHECK(two.globalCoord(m, r, {4}, 0, run.local + i) == run.global + i);
    CHECK(covered == 4);
  }
}
