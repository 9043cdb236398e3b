//===- InterpTest.cpp - the interpreter layer: checkpoint ops over any element ---===//
//
// Interp/Checkpoint.h is written once for the element engine (polynomials) and the CPU
// replay (numbers). These tests run it with a third element type, plain integers, on the
// dist.save and dist.load ops of a checkpoint spec, and check what it writes, reads and
// reports.
#include "Import/LoadSpec.h"
#include "Interp/Checkpoint.h"
#include "Spec/Spec.h"

#include <catch2/catch.hpp>

#include <string>

using namespace planproof;

namespace {

/// Integers as checkpoint elements: -1 fills, -2 pads, -3 is an unsaved element.
struct IntElements {
  bool offset(const Tensor<int64_t> &v, int64_t &out) {
    out = v.data[0];
    return true;
  }
  int64_t fill() { return -1; }
  int64_t padding(const std::string &, int64_t, int64_t) { return -2; }
  int64_t unsaved(const std::string &, const std::vector<int64_t> &) { return -3; }
};

struct Fixture {
  mlir::MLIRContext ctx;
  Spec spec;
  std::vector<mlir::Operation *> saves, loads; // in program order
  Fixture() {
    registerDialects(ctx);
    Diagnostics errors;
    std::string path = PLANPROOF_SOURCE_DIR "/verify-specs/checkpoint/zero1_dp2_to_zero2_dp4.mlir";
    INFO(errors.str());
    REQUIRE(loadSpec(ctx, path, spec, errors));
    spec.plan->walk([&](dist::SaveOp op) { saves.push_back(op); });
    spec.resume->walk([&](dist::LoadOp op) { loads.push_back(op); });
  }
  mlir::Operation *save(const std::string &key) {
    for (mlir::Operation *op : saves)
      if (llvm::cast<dist::SaveOp>(op).getKey() == key)
        return op;
    FAIL("no dist.save of " << key);
    return nullptr;
  }
  mlir::Operation *load(const std::string &key) {
    for (mlir::Operation *op : loads)
      if (llvm::cast<dist::LoadOp>(op).getKey() == key)
        return op;
    FAIL("no dist.load of " << key);
    return nullptr;
  }
};

/// Each rank's piece of `v` holds base + rank * 100 + element; offsets are rank * piece.
void setPieces(RankValues<int64_t> &values, mlir::Operation *op, const Mesh &mesh, int64_t piece,
               int64_t base = 0) {
  CheckpointAccess a = checkpointAccess(*op);
  for (int64_t r = 0; r < mesh.numRanks(); ++r) {
    for (mlir::Value o : a.offsets) {
      values[o].resize(mesh.numRanks());
      values[o][r] = Tensor<int64_t>({}, r * piece);
    }
    if (a.saving) {
      mlir::Value v = llvm::cast<dist::SaveOp>(op).getValue();
      values[v].resize(mesh.numRanks());
      Tensor<int64_t> t(a.local, 0);
      for (int64_t l = 0; l < (int64_t)t.data.size(); ++l)
        t.data[l] = base + r * 100 + l;
      values[v][r] = t;
    }
  }
}

} // namespace

TEST_CASE("checkpoint ops write pieces at their offsets and read them back", "[interp]") {
  Fixture f;
  // m: 25 elements, padded to 26, ZeRO-1 shards of 13 on dp=2.
  mlir::Operation *save = f.save("m");
  RankValues<int64_t> values;
  setPieces(values, save, f.spec.mesh, 13);
  CheckpointOf<int64_t> ckpt;
  IntElements elems;
  REQUIRE(checkpointOp(*save, f.spec.mesh, values, &ckpt, nullptr, elems) == "");
  const CheckpointEntryOf<int64_t> &e = ckpt.entries.at("m");
  REQUIRE(e.shape == Shape{25});
  CHECK(e.values[0] == 0);
  CHECK(e.values[12] == 12);
  CHECK(e.values[13] == 100); // rank 1's first element
  CHECK(e.values[24] == 111); // rank 1's element 11; its element 12 is padding, not written
  CHECK(e.writer[12] == 0);
  CHECK(e.writer[13] == 1);
  CHECK(ckpt.events.empty());

  // The resuming plan on dp=4 reads pieces of 7: rank 3 reads 21..24 and 3 of padding.
  mlir::Operation *load = f.load("m");
  RankValues<int64_t> resumed;
  setPieces(resumed, load, f.spec.resumeMesh, 7);
  REQUIRE(checkpointOp(*load, f.spec.resumeMesh, resumed, nullptr, &ckpt, elems) == "");
  const Tensor<int64_t> &piece = resumed[load->getResult(0)][3];
  CHECK(piece.data == std::vector<int64_t>{108, 109, 110, 111, -2, -2, -2});
  CHECK(resumed[load->getResult(0)][1].data[5] == 12);
  CHECK(e.read[21]);
  CHECK(ckpt.events.empty());
}

TEST_CASE("checkpoint ops report conflicts, pieces outside the entry and unsaved reads",
          "[interp]") {
  Fixture f;
  IntElements elems;
  mlir::Operation *save = f.save("m");
  CheckpointOf<int64_t> ckpt;

  SECTION("two ranks writing different values to one element") {
    RankValues<int64_t> values;
    setPieces(values, save, f.spec.mesh, 12); // rank 1 overlaps rank 0 at element 12
    REQUIRE(checkpointOp(*save, f.spec.mesh, values, &ckpt, nullptr, elems) == "");
    REQUIRE(ckpt.events.size() == 1);
    CHECK(ckpt.events[0].kind == CheckpointEvent::Conflict);
    CHECK(ckpt.events[0].rank == 1);
    CHECK(ckpt.events[0].otherRank == 0);
    CHECK(ckpt.events[0].index == std::vector<int64_t>{12});
  }
  SECTION("a piece starting before the entry") {
    RankValues<int64_t> values;
    setPieces(values, save, f.spec.mesh, -13);
    REQUIRE(checkpointOp(*save, f.spec.mesh, values, &ckpt, nullptr, elems) == "");
    REQUIRE(!ckpt.events.empty());
    CHECK(ckpt.events[0].kind == CheckpointEvent::OutOfRange);
    CHECK(ckpt.events[0].rank == 1);
  }
  SECTION("reading what was never saved") {
    mlir::Operation *load = f.load("v");
    RankValues<int64_t> resumed;
    setPieces(resumed, load, f.spec.resumeMesh, 7);
    REQUIRE(checkpointOp(*load, f.spec.resumeMesh, resumed, nullptr, &ckpt, elems) == "");
    CHECK(resumed[load->getResult(0)][0].data[0] == -3);
    REQUIRE(!ckpt.events.empty());
    CHECK(ckpt.events[0].kind == CheckpointEvent::Unsaved);
  }
  SECTION("a load outside a resumed step, a save when not collecting") {
    mlir::Operation *load = f.load("m");
    RankValues<int64_t> values;
    setPieces(values, load, f.spec.resumeMesh, 7);
    CHECK(checkpointOp(*load, f.spec.resumeMesh, values, nullptr, nullptr, elems) ==
          "dist.load outside a resumed step: this spec has no saving plan");
    setPieces(values, save, f.spec.mesh, 13);
    CHECK(checkpointOp(*save, f.spec.mesh, values, nullptr, nullptr, elems) == "");
  }
}

TEST_CASE("a rank outside `on` relies on its saver holding the same value", "[interp]") {
  mlir::MLIRContext ctx;
  registerDialects(ctx);
  Spec spec;
  Diagnostics errors;
  REQUIRE(loadSpec(ctx,
                   PLANPROOF_SOURCE_DIR
                   "/verify-specs/checkpoint/zero1_dp2_to_zero2_dp4_rank0_only.mlir",
                   spec, errors));
  mlir::Operation *save = nullptr;
  spec.plan->walk([&](dist::SaveOp op) {
    if (op.getKey() == "m")
      save = op;
  });
  REQUIRE(save);
  RankValues<int64_t> values;
  setPieces(values, save, spec.mesh, 13);
  CheckpointOf<int64_t> ckpt;
  IntElements elems;
  REQUIRE(checkpointOp(*save, spec.mesh, values, &ckpt, nullptr, elems) == "");
  REQUIRE(ckpt.events.size() == 1);
  CHECK(ckpt.events[0].kind == CheckpointEvent::DroppedReplica);
  CHECK(ckpt.events[0].rank == 1);
  CHECK(ckpt.events[0].otherRank == 0);
  CHECK(ckpt.entries.at("m").writer[13] == -1); // rank 1's piece is not in the checkpoint

  // With equal values on both ranks, relying on rank 0 is sound.
  values[llvm::cast<dist::SaveOp>(save).getValue()][1] =
      values[llvm::cast<dist::SaveOp>(save).getValue()][0];
  CheckpointOf<int64_t> again;
  REQUIRE(checkpointOp(*save, spec.mesh, values, &again, nullptr, elems) == "");
  CHECK(again.events.empty());
}
