//===- RelationsTest.cpp - relating plan values to reference values ---------===//
#include "Engine/Relations.h"

#include <catch2/catch.hpp>

using namespace planproof;

namespace {
struct Fixture {
  ExprPool pool;
  Mesh mesh{"m", {"tp"}, {2}};
  SymTensor x, y, ref;
  Fixture() {
    x = SymTensor({2}, pool.zero());
    y = SymTensor({2}, pool.zero());
    ref = SymTensor({2}, pool.zero());
    for (int i = 0; i < 2; ++i) {
      x.data[i] = pool.inputPoly(pool.addInput({"x", {i}}));
      y.data[i] = pool.inputPoly(pool.addInput({"y", {i}}));
      ref.data[i] = pool.add(x.data[i], y.data[i]);
    }
  }
};
} // namespace

TEST_CASE("partial sums are recognized", "[relations]") {
  Fixture f;
  RelationFinder finder(f.pool, f.mesh, {{"s", &f.ref}});
  Relation r = finder.find({f.x, f.y});
  REQUIRE(r.exact());
  CHECK(r.layout.partial == std::vector<std::pair<int, ReduceKind>>{{0, ReduceKind::Sum}});
  CHECK(finder.describe(r) == "reference `s` (partial-sum over tp)");
  // The result of a reducing collective is complete by contract.
  CHECK_FALSE(finder.find({f.x, f.y}, {0}).related());
}

TEST_CASE("shards, replicas and scaled values are recognized", "[relations]") {
  Fixture f;
  RelationFinder finder(f.pool, f.mesh, {{"s", &f.ref}});
  SymTensor r0({1}, f.ref.data[0]), r1({1}, f.ref.data[1]);
  Relation shard = finder.find({r0, r1});
  REQUIRE(shard.exact());
  CHECK(shard.layout.dims == std::vector<std::vector<int>>{{0}});
  SymTensor twice({2}, f.pool.zero());
  for (int i = 0; i < 2; ++i)
    twice.data[i] = f.pool.scale(f.ref.data[i], Rational(2));
  Relation scaled = finder.find({twice, twice});
  REQUIRE(scaled.related());
  CHECK_FALSE(scaled.exact());
  CHECK(scaled.scale == Rational(2));
  CHECK(finder.describe(scaled) == "2 x reference `s` (replicated)");
  CHECK_FALSE(finder.find({f.x, f.x}).related());
}

TEST_CASE("gathering partial values reduces over the partial group", "[relations]") {
  Fixture f;
  Layout avg;
  avg.dims = {{}};
  avg.partial = {{0, ReduceKind::Avg}};
  PolyId got;
  REQUIRE(gatherElement(f.pool, f.mesh, avg, {f.x, f.y}, 0, 1, got));
  CHECK(got == f.pool.scale(f.ref.data[1], Rational(1, 2)));
  CHECK(isGroupLeader(f.mesh, avg, 0));
  CHECK_FALSE(isGroupLeader(f.mesh, avg, 1));
}

TEST_CASE("a value equal to several reference values reads as the one with a role",
          "[relations]") {
  Fixture f;
  SymTensor same = f.ref, twice({2}, f.pool.zero());
  for (int i = 0; i < 2; ++i)
    twice.data[i] = f.pool.scale(f.ref.data[i], Rational(2));
  // `count` (a loss's normalizer, ref.role) equals `total` (an nll_loss's own count),
  // which comes first: an exact match reads as `count` ...
  RelationFinder finder(f.pool, f.mesh, {{"total", &f.ref}, {"count", &same, true}});
  Relation r = finder.find({f.x, f.y});
  REQUIRE(r.exact());
  CHECK(finder.describe(r) == "reference `count` (partial-sum over tp)");
  // ... a scaled one still as the first value.
  Relation scaled = finder.find({twice, twice});
  REQUIRE(scaled.related());
  CHECK(finder.describe(scaled) == "2 x reference `total` (replicated)");
  // Without the role, the first value.
  RelationFinder plain(f.pool, f.mesh, {{"total", &f.ref}, {"count", &same}});
  CHECK(plain.describe(plain.find({f.x, f.y})) == "reference `total` (partial-sum over tp)");
}
