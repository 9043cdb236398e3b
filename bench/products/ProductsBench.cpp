//===- ProductsBench.cpp - the replay's matrix products, alone -------------===//
//
// The figures beside bench/results-replay.md's replay table:
//
//   planproof-bench-products B H F TP
//
// 1. "BLAS alone": the matrix products one CPU replay of verify-specs/json's TP MLP
//    computes (six products of B x H x F multiply-adds per pass: the forward's two, the
//    backward's four; four reference passes and the plan's pass over TP ranks of F/TP
//    columns each) through the BLAS in fp64 (dgemm) and fp32 (sgemm), spread over all cores.
// 2. Each exact kernel of the replay (lib/Replay/Products.h) on the forward product,
//    one thread: multiply-adds per second.
//
// Prints one JSON object.
//
//===----------------------------------------------------------------------===//
#include "Replay/Products.h"

#include <cblas.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

using namespace planproof;
using namespace planproof::replay;

namespace {

double seconds(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

/// The six products of one pass at (B, H, F): (M, N, K, transposed A, transposed B).
struct Gemm {
  int M, N, K;
  bool ta, tb;
};
std::vector<Gemm> pass(int B, int H, int F) {
  return {{B, F, H, false, false},  // h = x w1
          {B, H, F, false, false},  // y = a w2
          {B, F, H, false, true},   // da = dy w2^T
          {F, H, B, true, false},   // dw2 = a^T dy
          {B, H, F, false, true},   // dx = dh w1^T
          {H, F, B, true, false}};  // dw1 = x^T dh
}

/// Wall time of `gemms` spread over the machine's cores (the BLAS is single-threaded:
/// each core takes every n-th product, with buffers of its own).
template <class T, class Fn> double timeGemms(const std::vector<Gemm> &gemms, Fn gemm) {
  size_t most = 0;
  for (const Gemm &g : gemms)
    most = std::max({most, (size_t)g.M * g.K, (size_t)g.K * g.N, (size_t)g.M * g.N});
  unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::vector<T>> a(cores, std::vector<T>(most, T(0.5))),
      b(cores, std::vector<T>(most, T(0.25))), c(cores, std::vector<T>(most));
  auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < cores; ++t)
    pool.emplace_back([&, t] {
      for (size_t i = t; i < gemms.size(); i += cores)
        gemm(gemms[i], a[t].data(), b[t].data(), c[t].data());
    });
  for (std::thread &t : pool)
    t.join();
  return seconds(t0);
}

} // namespace

int main(int argc, char **argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: planproof-bench-products B H F TP\n");
    return 2;
  }
  int B = std::atoi(argv[1]), H = std::atoi(argv[2]), F = std::atoi(argv[3]),
      tp = std::atoi(argv[4]);
  if (B <= 0 || H <= 0 || F <= 0 || tp <= 0 || F % tp) {
    std::fprintf(stderr, "planproof-bench-products: sizes must be positive, F a multiple of TP\n");
    return 2;
  }
  // One replay: four reference passes at full size, and TP ranks at F / TP.
  std::vector<Gemm> replay;
  for (int k = 0; k < 4; ++k)
    for (const Gemm &g : pass(B, H, F))
      replay.push_back(g);
  for (int r = 0; r < tp; ++r)
    for (const Gemm &g : pass(B, H, F / tp))
      replay.push_back(g);
  double macs = 0;
  for (const Gemm &g : replay)
    macs += (double)g.M * g.N * g.K;
  auto lda = [](const Gemm &g) { return g.ta ? g.M : g.K; };
  auto ldb = [](const Gemm &g) { return g.tb ? g.K : g.N; };
  double dgemm = timeGemms<double>(replay, [&](const Gemm &g, double *a, double *b, double *c) {
    cblas_dgemm(CblasRowMajor, g.ta ? CblasTrans : CblasNoTrans, g.tb ? CblasTrans : CblasNoTrans,
                g.M, g.N, g.K, 1.0, a, lda(g), b, ldb(g), 0.0, c, g.N);
  });
  double sgemm = timeGemms<float>(replay, [&](const Gemm &g, float *a, float *b, float *c) {
    cblas_sgemm(CblasRowMajor, g.ta ? CblasTrans : CblasNoTrans, g.tb ? CblasTrans : CblasNoTrans,
                g.M, g.N, g.K, 1.0f, a, lda(g), b, ldb(g), 0.0f, c, g.N);
  });

  // The exact kernels on the forward product h = x w1, one thread.
  std::mt19937 rng(1);
  std::normal_distribution<double> normal;
  std::vector<double> x((size_t)B * H), w((size_t)H * F), out((size_t)B * F);
  for (double &v : x)
    v = (double)(float)normal(rng);
  for (double &v : w)
    v = (double)(float)normal(rng);
  ProductDims p{1, B, F, H, 0, H, 1, 0, F, 1};
  double fwd = (double)B * H * F;
  std::string kernels;
  const char *names[3] = {"forward", "reverse", "pairwise"};
  const char *dtypes[3] = {"fp64", "fp32", "bf16"};
  ReplayDtype ds[3] = {ReplayDtype::F64, ReplayDtype::F32, ReplayDtype::BF16};
  for (int d = 0; d < 3; ++d)
    for (int o = 0; o < 3; ++o) {
      auto t0 = std::chrono::steady_clock::now();
      exactProducts(ds[d], (kernels::SumOrder)o, p, x.data(), w.data(), out.data());
      double s = seconds(t0);
      char buf[128];
      std::snprintf(buf, sizeof buf, "%s\"%s %s\": %.3f", kernels.empty() ? "" : ", ", dtypes[d],
                    names[o], fwd / s / 1e9);
      kernels += buf;
    }
  auto t0 = std::chrono::steady_clock::now();
  blasProducts(p, x.data(), w.data(), out.data());
  double blas1 = fwd / seconds(t0) / 1e9;
  std::printf("{\"blas\": \"%s\", \"replay_macs\": %.6g, \"dgemm_seconds\": %.4f, "
              "\"sgemm_seconds\": %.4f, \"kernel_gmacs_per_s\": {%s, \"fp64 dgemm 1 thread\": "
              "%.3f}}\n",
              blasName().c_str(), macs, dgemm, sgemm, kernels.c_str(), blas1);
  return 0;
}
