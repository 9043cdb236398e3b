//===- KernelTest.cpp - the kernel backend's lowering against OpSemantics.h -===//
//
// Every ref op of the spec catalogue, on random operands of its own types, evaluated
// by the one definition (evalRefOp in fp64) and by the kernel backend's lowering on a
// device: the host device always, the CUDA device when a GPU is present ([cuda] tests,
// run by the `cuda` ctest entry, which reports *skipped* without one).
//
//===----------------------------------------------------------------------===//
#include "Import/JsonImport.h"
#include "Import/LoadSpec.h"
#include "Device/Device.h"
#include "Device/Kernels.h"
#include "Replay/ReplayInternal.h"
#include "Semantics/OpSemantics.h"
#include "Spec/Spec.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <set>

using namespace planproof;
using replay::NumTensor;

namespace {

struct ExactDomain {
  using Value = double;
  Value constant(const Rational &c) { return c.toDouble(); }
  bool integer(const Value &v, int64_t &out) {
    out = (int64_t)std::llround(v);
    return (double)out == v;
  }
  Value add(Value a, Value b) { return a + b; }
  Value sub(Value a, Value b) { return a - b; }
  Value mul(Value a, Value b) { return a * b; }
  Value sum(const std::vector<Value> &v) {
    double s = 0;
    for (double x : v)
      s += x;
    return s;
  }
  Value scale(Value a, const Rational &c) { return a * c.toDouble(); }
  Value apply(Fn f, std::vector<Value> args) { return evalFn(f, args); }
};

Shape shapeOf(mlir::Type t) {
  auto r = mlir::cast<mlir::RankedTensorType>(t);
  return Shape(r.getShape().begin(), r.getShape().end());
}

/// Random operands for `op`: normal values, integer ids in range for embeddings,
/// small integers for index operands.
void operandsFor(mlir::Operation *op, uint64_t seed, std::vector<NumTensor> &ins,
                 std::vector<double> &idx) {
  uint64_t stream = 0;
  for (mlir::Value v : op->getOperands()) {
    if (v.getType().isIndex()) {
      idx.push_back((double)(int64_t)(scalar::inputValue(seed, stream++, 0, 7)));
      continue;
    }
    Shape s = shapeOf(v.getType());
    NumTensor t(s, 0.0);
    bool ids = mlir::isa<ref::EmbeddingOp, ref::EmbeddingGradOp>(op) && ins.size() == 1;
    int64_t rows = 0;
    if (ids)
      rows = mlir::isa<ref::EmbeddingOp>(op) ? ins[0].shape[0] : resultShape(op)[0];
    for (size_t l = 0; l < t.data.size(); ++l)
      t.data[l] = ids ? scalar::inputValue(seed, stream, l, rows + 2) // some ids out of range
                      : scalar::inputValue(seed, stream, l, 0);
    ++stream;
    ins.push_back(std::move(t));
  }
}

bool close(double want, double got, double rel) {
  if (std::isnan(want) || std::isnan(got))
    return std::isnan(want) && std::isnan(got);
  if (std::isinf(want) || std::isinf(got))
    return want == got;
  return std::fabs(want - got) <= rel * std::max(1.0, std::fabs(want));
}

/// Every spec of the catalogue (MLIR and JSON) but those stated for the layout engine
/// (production-sized), and the specs of the autodiff and CLI tests that load (the others
/// are bad-input tests), loaded.
template <class F> void forEachSpec(mlir::MLIRContext &ctx, F f) {
  for (const char *dir : {"/verify-specs", "/test/Autodiff", "/test/CLI/Inputs"}) {
    std::vector<std::string> paths;
    for (auto &e : std::filesystem::recursive_directory_iterator(std::string(PLANPROOF_SOURCE_DIR) + dir))
      if ((e.path().extension() == ".mlir" || e.path().extension() == ".json") &&
          e.path().parent_path().filename() != "models") // model configurations, not specs
        paths.push_back(e.path().string());
    std::sort(paths.begin(), paths.end());
    bool catalogue = std::string(dir) == "/verify-specs";
    for (const std::string &p : paths) {
      Spec spec;
      Diagnostics errors;
      if (!loadSpec(ctx, p, spec, errors)) {
        if (catalogue)
          FAIL(p << ": " << errors.str());
        continue;
      }
      if (spec.expect.engine == "layout")
        continue; // (production-sized: its tensors are past any element-wise run)
      f(p, spec);
    }
  }
}

/// Compares every ref op of the catalogue on `dev` with evalRefOp; returns the op names
/// exercised.
std::set<std::string> conformance(kernels::Device &dev, ReplayDtype dtype, double rel) {
  mlir::MLIRContext ctx;
  registerDialects(ctx);
  std::set<std::string> seen;
  uint64_t seed = 11;
  forEachSpec(ctx, [&](const std::string &path, Spec &spec) {
    for (mlir::func::FuncOp fn : {spec.reference, spec.plan}) {
      if (!fn)
        continue;
      for (mlir::Operation &op : fn.getBody().front()) {
        if (!mlir::isa<ref::RefDialect>(op.getDialect()))
          continue;
        std::string name = op.getName().getStringRef().str();
        std::vector<NumTensor> ins;
        std::vector<double> idx;
        operandsFor(&op, ++seed, ins, idx);
        std::vector<const NumTensor *> ptrs;
        for (const NumTensor &t : ins)
          ptrs.push_back(&t);
        NumTensor want, got;
        ExactDomain d;
        std::string why = evalRefOp(d, &op, ptrs, want, idx);
        std::string err = replay::evalRefOnDevice(dev, dtype, &op, ins, idx, got);
        INFO(path << ": " << name << " on " << dev.name());
        if (!why.empty()) {
          // An op without semantics (an unexpanded gradient) has no lowering either.
          REQUIRE(!err.empty());
          continue;
        }
        REQUIRE(err.empty());
        REQUIRE(got.shape == want.shape);
        // Errors relative to the output's magnitude: a long fp32 sum that cancels is
        // off by its rounding relative to its terms, not to its result.
        double scale = 1;
        for (double x : want.data)
          if (std::isfinite(x))
            scale = std::max(scale, std::fabs(x));
        // Values past the fp32 range (a constant of 1e308) have no fp32 result to compare.
        if (dtype == ReplayDtype::F32 && scale > 1e38)
          continue;
        for (size_t l = 0; l < want.data.size(); ++l) {
          INFO("element " << l << ": " << want.data[l] << " vs " << got.data[l]);
          REQUIRE(close(want.data[l] / scale, got.data[l] / scale, rel));
        }
        seen.insert(name);
      }
    }
  });
  return seen;
}

} // namespace

TEST_CASE("the kernel lowering computes every ref op as OpSemantics.h does (host device)",
          "[kernels]") {
  auto dev = kernels::makeHostDevice();
  std::set<std::string> seen = conformance(*dev, ReplayDtype::F64, 1e-12);
  // Every op the importer knows is exercised by some spec of the catalogue.
  for (auto &[name, attrs] : jsonOpAttributes()) {
    if (name.rfind("ref.", 0) != 0)
      continue;
    INFO(name << " is in no spec of verify-specs/ or test/, so its lowering is not checked");
    CHECK(seen.count(name) == 1);
  }
  // fp32 storage stays within fp32 rounding of the definition.
  conformance(*dev, ReplayDtype::F32, 1e-4);
}

TEST_CASE("ordered sums: forward, reverse and pairwise add the same terms", "[kernels]") {
  std::vector<double> v = {1e8, 1, -1e8, 3, 0.5, 7, 2, 9, 4};
  auto get = [&](int64_t i) { return v[i]; };
  double f = kernels::body::orderedSum<double>(9, kernels::body::kForward, get);
  double r = kernels::body::orderedSum<double>(9, kernels::body::kReverse, get);
  double p = kernels::body::orderedSum<double>(9, kernels::body::kPairwise, get);
  CHECK(f == Approx(26.5));
  CHECK(r == Approx(26.5));
  CHECK(p == Approx(26.5));
  // Pairwise over 4 terms is (a + b) + (c + d).
  std::vector<float> w = {1e8f, 1.f, -1e8f, 1.f};
  float pw = kernels::body::orderedSum<float>(4, kernels::body::kPairwise,
                                              [&](int64_t i) { return w[i]; });
  CHECK(pw == (1e8f + 1.f) + (-1e8f + 1.f));
}

TEST_CASE("the CUDA device computes every ref op as the host device does", "[cuda]") {
  std::string why;
  auto dev = kernels::makeCudaDevice(0, why);
  if (!dev) {
    WARN("skipped: " << why);
    return;
  }
  conformance(*dev, ReplayDtype::F64, 1e-9);
  conformance(*dev, ReplayDtype::F32, 1e-4);
}

TEST_CASE("NCCL smoke test over every GPU", "[cuda]") {
  std::string why;
  if (!kernels::makeCudaDevice(0, why)) {
    WARN("skipped: " << why);
    return;
  }
  std::string report, err = kernels::ncclSmokeTest(report);
  INFO(report);
  CHECK(err.empty());
}
