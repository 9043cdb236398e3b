//===- ProductsTest.cpp - the replay's bulk matrix products ------------------===//
//
// The numeric replay computes ref.matmul / ref.batch_matmul with the kernels of
// lib/Replay/Products.h. They must be bit-identical to the element-wise definition
// (OpSemantics.h's evalProducts through NumericDomain's mul and sum) in every storage
// precision and summation order, on every shape (block edges, K = 0, 1, odd), every
// operand layout, and special values; the fp64 truth through the BLAS must agree to
// fp64 rounding.
//
//===----------------------------------------------------------------------===//
#include "Replay/ReplayInternal.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <random>

using namespace planproof;
using namespace planproof::replay;

namespace {

bool sameBits(double x, double y) {
  if (std::isnan(x) || std::isnan(y))
    return std::isnan(x) && std::isnan(y);
  return std::memcmp(&x, &y, sizeof x) == 0;
}

/// Operands of `dims` drawn in the storage precision, with some special values.
std::vector<double> draw(std::mt19937 &rng, size_t n, ReplayDtype dtype, bool specials) {
  NumericDomain round{dtype, ReduceOrder::Rank};
  std::normal_distribution<double> normal;
  std::vector<double> v(n);
  for (double &x : v)
    x = round.round(normal(rng));
  if (specials && n > 8) {
    const double s[] = {0.0, -0.0, INFINITY, -INFINITY, NAN, 3e38, 1e-40, -7e-39};
    std::uniform_int_distribution<size_t> at(0, n - 1);
    for (double x : s)
      v[at(rng)] = round.round(x);
  }
  return v;
}

struct Case {
  ProductDims p;
  size_t aSize, bSize;
};

/// Every layout evalRefOp builds: matmul with each contracted-dim pair, and batched.
std::vector<Case> layouts(int64_t N, int64_t I, int64_t J, int64_t K) {
  std::vector<Case> cases;
  for (int ld = 0; ld < 2; ++ld)
    for (int rd = 0; rd < 2; ++rd) {
      int64_t as = ld == 1 ? K : I, bs = rd == 0 ? J : K;
      ProductDims p{N, I, J, K, I * K, ld == 1 ? as : 1, ld == 1 ? 1 : as,
                    K * J, rd == 0 ? bs : 1, rd == 0 ? 1 : bs};
      cases.push_back({p, (size_t)(N * I * K), (size_t)(N * K * J)});
    }
  return cases;
}

void checkExact(ReplayDtype dtype, int order, int64_t N, int64_t I, int64_t J, int64_t K,
                bool specials) {
  std::mt19937 rng((unsigned)(I * 131 + J * 17 + K * 7 + N + order));
  for (const Case &c : layouts(N, I, J, K)) {
    std::vector<double> a = draw(rng, c.aSize, dtype, specials),
                        b = draw(rng, c.bSize, dtype, specials);
    NumericDomain bulk{dtype, ReduceOrder::Rank, order == 1, order == 2};
    NumericDomain each = bulk;
    each.bulk = false;
    std::vector<double> fast(N * I * J, -1.0), slow(N * I * J, -2.0);
    REQUIRE(bulk.products(c.p, a.data(), b.data(), fast.data()));
    evalProducts(each, c.p, a.data(), b.data(), slow.data());
    for (size_t e = 0; e < fast.size(); ++e) {
      INFO("dtype " << dtypeName(dtype) << " order " << order << " N" << N << " I" << I << " J"
                    << J << " K" << K << " element " << e << ": " << fast[e] << " vs "
                    << slow[e]);
      REQUIRE(sameBits(fast[e], slow[e]));
    }
  }
}

} // namespace

TEST_CASE("bulk products are bit-identical to the element-wise definition", "[products]") {
  const ReplayDtype dtypes[] = {ReplayDtype::F64, ReplayDtype::F32, ReplayDtype::BF16};
  for (ReplayDtype dtype : dtypes)
    for (int order = 0; order < 3; ++order) {
      // Block edges (4 rows, 256 columns), K = 0, 1, odd and not a power of two.
      for (int64_t K : {0, 1, 2, 3, 5, 7, 64, 100, 257})
        checkExact(dtype, order, 1, 5, 3, K, false);
      checkExact(dtype, order, 1, 9, 300, 33, false);
      checkExact(dtype, order, 3, 4, 257, 19, false);
      // Infinities, NaN, overflow of fp32 and bf16, subnormal products.
      checkExact(dtype, order, 2, 7, 260, 45, true);
    }
}

TEST_CASE("bulk products fall back where fp32 arithmetic would round differently",
          "[products]") {
  // 0.1 is not a float: an fp32 run computing it as one would round a product twice.
  ProductDims p{1, 1, 1, 2, 0, 2, 1, 0, 1, 1};
  double a[2] = {0.1, 1.0}, b[2] = {3.0, 1.0}, out = -1;
  NumericDomain fp32{ReplayDtype::F32, ReduceOrder::Rank};
  CHECK_FALSE(fp32.products(p, a, b, &out));
  CHECK(out == -1);
  double viaDefinition;
  evalProducts(fp32, p, a, b, &viaDefinition);
  NumericDomain each = fp32;
  each.bulk = false;
  double expected;
  evalProducts(each, p, a, b, &expected);
  CHECK(sameBits(viaDefinition, expected));
}

TEST_CASE("the fp64 truth through the BLAS agrees to fp64 rounding", "[products]") {
  std::mt19937 rng(7);
  for (const Case &c : layouts(2, 33, 70, 129)) {
    std::vector<double> a = draw(rng, c.aSize, ReplayDtype::F64, false),
                        b = draw(rng, c.bSize, ReplayDtype::F64, false);
    NumericDomain truth{ReplayDtype::F64, ReduceOrder::Rank};
    truth.blas = true;
    NumericDomain each = truth;
    each.bulk = false;
    std::vector<double> fast(2 * 33 * 70), slow(fast.size()), mag(fast.size());
    REQUIRE(truth.products(c.p, a.data(), b.data(), fast.data()));
    evalProducts(each, c.p, a.data(), b.data(), slow.data());
    std::vector<double> absA(a.size()), absB(b.size());
    for (size_t i = 0; i < a.size(); ++i)
      absA[i] = std::fabs(a[i]);
    for (size_t i = 0; i < b.size(); ++i)
      absB[i] = std::fabs(b[i]);
    evalProducts(each, c.p, absA.data(), absB.data(), mag.data());
    for (size_t e = 0; e < fast.size(); ++e)
      REQUIRE(std::fabs(fast[e] - slow[e]) <= 129 * 1.2e-16 * mag[e]);
  }
}
