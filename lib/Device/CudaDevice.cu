//===- CudaDevice.cu - the device primitives on a CUDA GPU ----------------===//
//
// Each primitive of Device.h as a CUDA kernel calling the shared bodies of Kernels.h
// (one thread per element or per row), cuBLAS for matrix products in forward order
// (DGEMM for fp64, SGEMM for fp32, bf16 inputs with fp32 accumulation for bf16), and
// NCCL for the collectives of real ranks (communicators made with ncclCommInitAll in
// this process). Everything runs on the device's default stream, in program order.
//
//===----------------------------------------------------------------------===//
#include "Device/Device.h"
#include "Device/Kernels.h"

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <map>
#include <stdexcept>
#include <string>
#include <vector>

using namespace planproof;
using namespace planproof::kernels;

namespace {

void check(cudaError_t e, const char *what) {
  if (e != cudaSuccess)
    throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}
void check(cublasStatus_t s, const char *what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string(what) + ": cuBLAS status " + std::to_string((int)s));
}
#define CK(x) check((x), #x)

constexpr int kThreads = 256;
unsigned blocksFor(int64_t n) {
  int64_t b = (n + kThreads - 1) / kThreads;
  return (unsigned)(b < 1 ? 1 : b > 65535 * 8 ? 65535 * 8 : b);
}
#define GRID_LOOP(i, n)                                                                            \
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);                        \
       i += (int64_t)blockDim.x * gridDim.x)

int orderCode(SumOrder o) {
  return o == SumOrder::Forward ? body::kForward : o == SumOrder::Reverse ? body::kReverse : body::kPairwise;
}

struct StridedArgs {
  int rank;
  int64_t extent[kMaxDims];
  int64_t dOff, dStr[kMaxDims], sOff, sStr[kMaxDims];
};

template <class T> __global__ void kFill(T *out, int64_t n, T v) {
  GRID_LOOP(i, n) out[i] = v;
}
template <class T>
__global__ void kRandom(T *out, int64_t n, double scale, uint64_t seed, uint64_t stream,
                        uint64_t first, int64_t bound, bool wide, bool bf16) {
  GRID_LOOP(i, n) out[i] = (T)body::randomElement(scale, seed, stream, first + i, bound, wide, bf16);
}
template <class T>
__global__ void kMap(T *out, int64_t n, int kind, int fn, double p0, double p1, double p2,
                     const T *x, int64_t nx, const T *y, int64_t ny, bool bf16) {
  GRID_LOOP(i, n) out[i] = body::mapElement<T>(kind, fn, p0, p1, p2, x, nx, y, ny, i, bf16);
}
template <class T> __global__ void kCopy(T *dst, const T *src, StridedArgs a, int64_t total) {
  GRID_LOOP(l, total) {
    int64_t rest = l, di = a.dOff, si = a.sOff;
    for (int k = a.rank - 1; k >= 0; --k) {
      int64_t i = rest % a.extent[k];
      rest /= a.extent[k];
      di += i * a.dStr[k];
      si += i * a.sStr[k];
    }
    dst[di] = src[si];
  }
}
template <class T, class Acc>
__global__ void kReduceRows(T *out, const T *in, int64_t rows, int64_t len, int kind, int order,
                            bool bf16) {
  GRID_LOOP(r, rows) out[r] = body::reduceRow<T, Acc>(kind, order, in + r * len, len, bf16);
}
template <class T, class Acc>
__global__ void kGemm(T *out, const T *A, const T *B, int64_t batch, int64_t I, int64_t J,
                      int64_t K, bool lhsK, bool rhsK, int order, bool bf16) {
  GRID_LOOP(l, batch * I * J) {
    int64_t j = l % J, i = (l / J) % I, n = l / (I * J);
    out[l] = body::gemmElement<T, Acc>(order, A, B, n, i, j, I, J, K, lhsK, rhsK, bf16);
  }
}
template <class T, class Acc>
__global__ void kSoftmax(T *out, const T *in, int64_t rows, int64_t cols, int64_t sq, bool causal,
                         int64_t offset, int order, bool bf16) {
  GRID_LOOP(r, rows) {
    int64_t allowed = causal ? scalar::causalAllowed(r % sq, offset, cols) : cols;
    body::softmaxRow<T, Acc>(order, in + r * cols, out + r * cols, cols, allowed, bf16);
  }
}
template <class T, class Acc>
__global__ void kNorm(T *out, const T *x, const T *w, const T *b, int64_t rows, int64_t width,
                      double eps, bool layer, int order, bool bf16) {
  GRID_LOOP(r, rows) body::normRow<T, Acc>(order, x + r * width, w, b, out + r * width, width, eps, layer, bf16);
}
template <class T>
__global__ void kRotary(T *out, const T *x, const T *cs, const T *sn, int64_t n, int64_t S,
                        int64_t width, bool bf16) {
  GRID_LOOP(l, n) out[l] = body::rotaryElement<T>(x, cs, sn, l, S, width, bf16);
}
template <class T, class Acc>
__global__ void kCrossEntropy(T *out, const T *x, const T *labels, const T *mask, int64_t T_,
                              int64_t V, int order, bool bf16) {
  GRID_LOOP(t, T_) out[t] = body::crossEntropyRow<T, Acc>(order, x, labels, mask, t, V, bf16);
}
template <class T, class Acc>
__global__ void kEmbedding(T *out, const T *dense, const T *ids, bool lookup, int64_t T_,
                           int64_t rows, int64_t W, int64_t offset, int order, bool bf16) {
  int64_t A = lookup ? T_ : rows;
  GRID_LOOP(l, A * W) {
    out[l] = body::embeddingElement<T, Acc>(order, lookup, dense, ids, l / W, l % W, T_, rows, W,
                                            offset, bf16);
  }
}
template <class T, class Acc>
__global__ void kGroup(T *out, const T *const *ins, int64_t members, int64_t n, int kind,
                       int order, bool bf16) {
  GRID_LOOP(i, n) out[i] = body::groupElement<T, Acc>(kind, order, ins, members, i, bf16);
}
__global__ void kToBf16(__nv_bfloat16 *out, const float *in, int64_t n) {
  GRID_LOOP(i, n) out[i] = __float2bfloat16(in[i]);
}
__global__ void kRoundBf16(float *x, int64_t n) {
  GRID_LOOP(i, n) x[i] = scalar::roundBf16(x[i]);
}

template <class T> T *as(Buffer b) { return static_cast<T *>(b.ptr); }

class CudaDevice final : public Device {
public:
  explicit CudaDevice(int index) : index(index) {
    CK(cudaSetDevice(index));
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, index));
    label = std::string(prop.name) + " (cuda:" + std::to_string(index) + ")";
    check(cublasCreate(&blas), "cublasCreate");
  }
  ~CudaDevice() override {
    cudaSetDevice(index);
    cublasDestroy(blas);
  }
  std::string name() const override { return label; }
  bool isHost() const override { return false; }

  Buffer alloc(int64_t n, bool wide) override {
    on();
    Buffer b;
    b.n = n;
    b.wide = wide;
    size_t bytes = (size_t)std::max<int64_t>(n, 1) * (wide ? 8 : 4);
    if (cudaMalloc(&b.ptr, bytes) != cudaSuccess) {
      cudaGetLastError();
      throw std::bad_alloc();
    }
    CK(cudaMemset(b.ptr, 0, bytes));
    return b;
  }
  void release(Buffer &b) override {
    if (!b.ptr)
      return;
    on();
    cudaFree(b.ptr);
    b.ptr = nullptr;
  }
  void upload(Buffer dst, const std::vector<double> &src) override {
    on();
    if (dst.wide) {
      CK(cudaMemcpy(dst.ptr, src.data(), dst.n * 8, cudaMemcpyHostToDevice));
    } else {
      std::vector<float> f(src.begin(), src.begin() + dst.n);
      CK(cudaMemcpy(dst.ptr, f.data(), dst.n * 4, cudaMemcpyHostToDevice));
    }
  }
  std::vector<double> download(Buffer src) override {
    on();
    std::vector<double> out(src.n);
    if (src.wide) {
      CK(cudaMemcpy(out.data(), src.ptr, src.n * 8, cudaMemcpyDeviceToHost));
    } else {
      std::vector<float> f(src.n);
      CK(cudaMemcpy(f.data(), src.ptr, src.n * 4, cudaMemcpyDeviceToHost));
      out.assign(f.begin(), f.end());
    }
    return out;
  }
  int64_t freeBytes() override {
    on();
    size_t free = 0, total = 0;
    CK(cudaMemGetInfo(&free, &total));
    return (int64_t)free;
  }
  void sync() override {
    on();
    CK(cudaDeviceSynchronize());
  }

  void fill(const Arith &a, Buffer out, double v) override {
    on();
    bool bf16 = a.dtype == ReplayDtype::BF16;
    if (out.wide)
      kFill<double><<<blocksFor(out.n), kThreads>>>(as<double>(out), out.n, body::store<double>(v, bf16));
    else
      kFill<float><<<blocksFor(out.n), kThreads>>>(as<float>(out), out.n, body::store<float>(v, bf16));
    launched("fill");
  }
  void random(const Arith &a, Buffer out, uint64_t seed, uint64_t stream, uint64_t first,
              int64_t bound, double scale) override {
    on();
    bool bf16 = a.dtype == ReplayDtype::BF16;
    if (out.wide)
      kRandom<double><<<blocksFor(out.n), kThreads>>>(as<double>(out), out.n, scale, seed, stream,
                                                       first, bound, a.wide(), bf16);
    else
      kRandom<float><<<blocksFor(out.n), kThreads>>>(as<float>(out), out.n, scale, seed, stream,
                                                      first, bound, a.wide(), bf16);
    launched("random");
  }
  void map(const Arith &a, const MapArgs &m, Buffer out, Buffer x, Buffer y) override {
    on();
    bool bf16 = a.dtype == ReplayDtype::BF16;
    if (out.wide)
      kMap<double><<<blocksFor(out.n), kThreads>>>(as<double>(out), out.n, (int)m.kind, (int)m.fn,
                                                    m.p0, m.p1, m.p2, as<double>(x), x.n,
                                                    as<double>(y), y.n, bf16);
    else
      kMap<float><<<blocksFor(out.n), kThreads>>>(as<float>(out), out.n, (int)m.kind, (int)m.fn,
                                                   m.p0, m.p1, m.p2, as<float>(x), x.n,
                                                   as<float>(y), y.n, bf16);
    launched("map");
  }
  void copy(const Arith &a, Buffer dst, const Strided &d, Buffer src, const Strided &s,
            const Shape &extent) override {
    on();
    StridedArgs args;
    args.rank = (int)extent.size();
    args.dOff = d.offset;
    args.sOff = s.offset;
    for (int k = 0; k < kMaxDims; ++k) {
      args.extent[k] = k < args.rank ? extent[k] : 1;
      args.dStr[k] = d.strides[k];
      args.sStr[k] = s.strides[k];
    }
    int64_t total = numElements(extent);
    if (dst.wide)
      kCopy<double><<<blocksFor(total), kThreads>>>(as<double>(dst), as<double>(src), args, total);
    else
      kCopy<float><<<blocksFor(total), kThreads>>>(as<float>(dst), as<float>(src), args, total);
    launched("copy");
  }
  void reduceRows(const Arith &a, RowKind k, Buffer out, Buffer in, int64_t rows,
                  int64_t len) override {
    on();
    bool bf16 = a.dtype == ReplayDtype::BF16;
    if (out.wide)
      kReduceRows<double, double><<<blocksFor(rows), kThreads>>>(as<double>(out), as<double>(in), rows,
                                                                 len, (int)k, orderCode(a.order), bf16);
    else
      kReduceRows<float, float><<<blocksFor(rows), kThreads>>>(as<float>(out), as<float>(in), rows,
                                                               len, (int)k, orderCode(a.order), bf16);
    launched("reduce");
  }
  void gemm(const Arith &a, Buffer out, Buffer A, Buffer B, int64_t batch, int64_t I, int64_t J,
            int64_t K, bool lhsK, bool rhsK) override {
    on();
    bool bf16 = a.dtype == ReplayDtype::BF16;
    if (a.order != SumOrder::Forward || K == 0) {
      // The error model's other summation orders: one thread per output element.
      int64_t n = batch * I * J;
      if (out.wide)
        kGemm<double, double><<<blocksFor(n), kThreads>>>(as<double>(out), as<double>(A), as<double>(B),
                                                          batch, I, J, K, lhsK, rhsK,
                                                          orderCode(a.order), bf16);
      else
        kGemm<float, float><<<blocksFor(n), kThreads>>>(as<float>(out), as<float>(A), as<float>(B),
                                                        batch, I, J, K, lhsK, rhsK,
                                                        orderCode(a.order), bf16);
      launched("gemm");
      return;
    }
    // Row-major C [I, J] = A B is column-major C^T = B^T A^T: cuBLAS computes
    // (J x I) = op(B) (J x K) * op(A) (K x I).
    cublasOperation_t opB = rhsK ? CUBLAS_OP_N : CUBLAS_OP_T;
    cublasOperation_t opA = lhsK ? CUBLAS_OP_N : CUBLAS_OP_T;
    int ldb = (int)(rhsK ? J : K), lda = (int)(lhsK ? K : I);
    long long sA = I * K, sB = K * J, sC = I * J;
    if (out.wide) {
      double one = 1, zero = 0;
      check(cublasDgemmStridedBatched(blas, opB, opA, (int)J, (int)I, (int)K, &one, as<double>(B),
                                      ldb, sB, as<double>(A), lda, sA, &zero, as<double>(out),
                                      (int)J, sC, (int)batch),
            "cublasDgemmStridedBatched");
    } else if (!bf16) {
      float one = 1, zero = 0;
      check(cublasSgemmStridedBatched(blas, opB, opA, (int)J, (int)I, (int)K, &one, as<float>(B),
                                      ldb, sB, as<float>(A), lda, sA, &zero, as<float>(out),
                                      (int)J, sC, (int)batch),
            "cublasSgemmStridedBatched");
    } else {
      // bf16 operands, fp32 accumulation and output, rounded back to bf16.
      __nv_bfloat16 *a16 = nullptr, *b16 = nullptr;
      CK(cudaMalloc(&a16, std::max<int64_t>(A.n, 1) * 2));
      CK(cudaMalloc(&b16, std::max<int64_t>(B.n, 1) * 2));
      kToBf16<<<blocksFor(A.n), kThreads>>>(a16, as<float>(A), A.n);
      kToBf16<<<blocksFor(B.n), kThreads>>>(b16, as<float>(B), B.n);
      float one = 1, zero = 0;
      check(cublasGemmStridedBatchedEx(blas, opB, opA, (int)J, (int)I, (int)K, &one, b16,
                                       CUDA_R_16BF, ldb, sB, a16, CUDA_R_16BF, lda, sA, &zero,
                                       as<float>(out), CUDA_R_32F, (int)J, sC, (int)batch,
                                       CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
            "cublasGemmStridedBatchedEx(bf16)");
      kRoundBf16<<<blocksFor(out.n), kThreads>>>(as<float>(out), out.n);
      launched("gemm");
      CK(cudaFree(a16));
      CK(cudaFree(b16));
    }
  }
  void softmaxRows(const Arith &a, Buffer out, Buffer in, int64_t rows, int64_t cols, int64_t sq,
                   bool causal, int64_t offset) override {
    on();
    bool bf16 = a.dtype == ReplayDtype::BF16;
    if (out.wide)
      kSoftmax<double, double><<<blocksFor(rows), kThreads>>>(as<double>(out), as<double>(in), rows,
                                                              cols, sq, causal, offset, orderCode(a.order), bf16);
    else
      kSoftmax<float, float><<<blocksFor(rows), kThreads>>>(as<float>(out), as<float>(in), rows, cols,
                                                            sq, causal, offset, orderCode(a.order), bf16);
    launched("softmax");
  }
  void normRows(const Arith &a, Buffer out, Buffer x, Buffer w, Buffer b, int64_t rows,
                int64_t width, double eps, bool layer) override {
    on();
    bool bf16 = a.dtype == ReplayDtype::BF16;
    if (out.wide)
      kNorm<double, double><<<blocksFor(rows), kThreads>>>(as<double>(out), as<double>(x), as<double>(w),
                                                           as<double>(b), rows, width, eps, layer,
                                                           orderCode(a.order), bf16);
    else
      kNorm<float, float><<<blocksFor(rows), kThreads>>>(as<float>(out), as<float>(x), as<float>(w),
                                                         as<float>(b), rows, width, eps, layer,
                                                         orderCode(a.order), bf16);
    launched("norm");
  }
  void rotary(const Arith &a, Buffer out, Buffer x, Buffer cs, Buffer sn, int64_t S,
              int64_t width) override {
    on();
    bool bf16 = a.dtype == ReplayDtype::BF16;
    if (out.wide)
      kRotary<double><<<blocksFor(out.n), kThreads>>>(as<double>(out), as<double>(x), as<double>(cs),
                                                      as<double>(sn), out.n, S, width, bf16);
    else
      kRotary<float><<<blocksFor(out.n), kThreads>>>(as<float>(out), as<float>(x), as<float>(cs),
                                                     as<float>(sn), out.n, S, width, bf16);
    launched("rotary");
  }
  void crossEntropyRows(const Arith &a, Buffer out, Buffer x, Buffer labels, Buffer mask,
                        int64_t T_, int64_t V) override {
    on();
    bool bf16 = a.dtype == ReplayDtype::BF16;
    if (out.wide)
      kCrossEntropy<double, double><<<blocksFor(T_), kThreads>>>(
          as<double>(out), as<double>(x), as<double>(labels), as<double>(mask), T_, V,
          orderCode(a.order), bf16);
    else
      kCrossEntropy<float, float><<<blocksFor(T_), kThreads>>>(
          as<float>(out), as<float>(x), as<float>(labels), as<float>(mask), T_, V,
          orderCode(a.order), bf16);
    launched("cross_entropy");
  }
  void embedding(const Arith &a, bool lookup, Buffer out, Buffer dense, Buffer ids, int64_t T_,
                 int64_t rows, int64_t W, int64_t offset) override {
    on();
    bool bf16 = a.dtype == ReplayDtype::BF16;
    int64_t n = (lookup ? T_ : rows) * W;
    if (out.wide)
      kEmbedding<double, double><<<blocksFor(n), kThreads>>>(as<double>(out), as<double>(dense),
                                                             as<double>(ids), lookup, T_, rows, W,
                                                             offset, orderCode(a.order), bf16);
    else
      kEmbedding<float, float><<<blocksFor(n), kThreads>>>(as<float>(out), as<float>(dense),
                                                           as<float>(ids), lookup, T_, rows, W,
                                                           offset, orderCode(a.order), bf16);
    launched("embedding");
  }
  void reduceGroup(const Arith &a, ReduceKind k, ReduceOrder order, Buffer out,
                   const std::vector<Buffer> &ins) override {
    on();
    bool bf16 = a.dtype == ReplayDtype::BF16;
    std::vector<void *> ptrs;
    for (const Buffer &b : ins)
      ptrs.push_back(b.ptr);
    void **dptrs = nullptr;
    CK(cudaMalloc(&dptrs, ptrs.size() * sizeof(void *)));
    CK(cudaMemcpy(dptrs, ptrs.data(), ptrs.size() * sizeof(void *), cudaMemcpyHostToDevice));
    int kind = k == ReduceKind::Sum ? body::kGroupSum : k == ReduceKind::Avg ? body::kGroupAvg : body::kGroupMax;
    int ord = order == ReduceOrder::Rank ? body::kOrderRank : order == ReduceOrder::Ring ? body::kOrderRing : body::kOrderTree;
    if (out.wide)
      kGroup<double, double><<<blocksFor(out.n), kThreads>>>(
          as<double>(out), reinterpret_cast<const double *const *>(dptrs), (int64_t)ins.size(), out.n,
          kind, ord, bf16);
    else
      kGroup<float, float><<<blocksFor(out.n), kThreads>>>(
          as<float>(out), reinterpret_cast<const float *const *>(dptrs), (int64_t)ins.size(), out.n,
          kind, ord, bf16);
    launched("group reduction");
    CK(cudaFree(dptrs));
  }

private:
  int index;
  std::string label;
  cublasHandle_t blas = nullptr;
  void on() { CK(cudaSetDevice(index)); }
  void launched(const char *what) {
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
      throw std::runtime_error(std::string(what) + " kernel: " + cudaGetErrorString(e));
  }
};

std::string ncclError(ncclResult_t r) { return ncclGetErrorString(r); }

class NcclCollectives final : public Collectives {
public:
  ~NcclCollectives() override {
    for (auto &[gpus, comms] : cache)
      for (ncclComm_t c : comms)
        ncclCommDestroy(c);
  }
  std::string allReduce(const std::vector<int> &gpus, ReduceKind k, bool bf16,
                        const std::vector<Buffer> &ins, const std::vector<Buffer> &outs) override {
    std::vector<ncclComm_t> *comms = nullptr;
    std::string err = commsFor(gpus, comms);
    if (!err.empty())
      return err;
    ncclRedOp_t op = k == ReduceKind::Sum ? ncclSum : k == ReduceKind::Avg ? ncclAvg : ncclMax;
    ncclResult_t r = ncclGroupStart();
    for (size_t p = 0; p < gpus.size() && r == ncclSuccess; ++p) {
      cudaSetDevice(gpus[p]);
      r = ncclAllReduce(ins[p].ptr, outs[p].ptr, (size_t)ins[p].n,
                        ins[p].wide ? ncclDouble : ncclFloat, op, (*comms)[p], 0);
    }
    ncclResult_t e = ncclGroupEnd();
    if (r != ncclSuccess || e != ncclSuccess)
      return ncclError(r != ncclSuccess ? r : e);
    for (size_t p = 0; p < gpus.size(); ++p) {
      cudaSetDevice(gpus[p]);
      if (bf16 && !outs[p].wide)
        kRoundBf16<<<blocksFor(outs[p].n), kThreads>>>(static_cast<float *>(outs[p].ptr), outs[p].n);
      if (cudaDeviceSynchronize() != cudaSuccess)
        return "synchronizing after the all-reduce";
    }
    return "";
  }
  std::string allGather(const std::vector<int> &gpus, const std::vector<Buffer> &ins,
                        const std::vector<Buffer> &outs) override {
    std::vector<ncclComm_t> *comms = nullptr;
    std::string err = commsFor(gpus, comms);
    if (!err.empty())
      return err;
    ncclResult_t r = ncclGroupStart();
    for (size_t p = 0; p < gpus.size() && r == ncclSuccess; ++p) {
      cudaSetDevice(gpus[p]);
      r = ncclAllGather(ins[p].ptr, outs[p].ptr, (size_t)ins[p].n,
                        ins[p].wide ? ncclDouble : ncclFloat, (*comms)[p], 0);
    }
    ncclResult_t e = ncclGroupEnd();
    if (r != ncclSuccess || e != ncclSuccess)
      return ncclError(r != ncclSuccess ? r : e);
    for (int g : gpus) {
      cudaSetDevice(g);
      if (cudaDeviceSynchronize() != cudaSuccess)
        return "synchronizing after the all-gather";
    }
    return "";
  }

private:
  std::map<std::vector<int>, std::vector<ncclComm_t>> cache;
  std::string commsFor(const std::vector<int> &gpus, std::vector<ncclComm_t> *&out) {
    auto it = cache.find(gpus);
    if (it == cache.end()) {
      std::vector<ncclComm_t> comms(gpus.size());
      ncclResult_t r = ncclCommInitAll(comms.data(), (int)gpus.size(), gpus.data());
      if (r != ncclSuccess)
        return "ncclCommInitAll: " + ncclError(r);
      it = cache.emplace(gpus, std::move(comms)).first;
    }
    out = &it->second;
    return "";
  }
};

} // namespace

namespace {

int deviceCount(std::string &why) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    cudaGetLastError();
    why = std::string("no usable GPU (") + cudaGetErrorString(e) + ")";
    return 0;
  }
  if (n == 0)
    why = "no GPU is visible";
  return n;
}

std::unique_ptr<Device> makeDevice(int index, std::string &why) {
  int n = deviceCount(why);
  if (index >= n) {
    if (n > 0)
      why = "GPU " + std::to_string(index) + " does not exist (" + std::to_string(n) + " visible)";
    return nullptr;
  }
  try {
    return std::make_unique<CudaDevice>(index);
  } catch (const std::exception &e) {
    why = e.what();
    return nullptr;
  }
}

std::unique_ptr<Collectives> makeCollectives(std::string &why) {
  if (deviceCount(why) <= 0)
    return nullptr;
  return std::make_unique<NcclCollectives>();
}

std::string smokeTest(std::string &report) {
  std::string why;
  int n = deviceCount(why);
  if (n <= 0) {
    report = why;
    return why;
  }
  int version = 0;
  ncclGetVersion(&version);
  try {
    std::vector<std::unique_ptr<Device>> devs;
    std::vector<Buffer> ins, sums, gathered;
    const int64_t count = 1024;
    Arith a{ReplayDtype::F32, SumOrder::Forward};
    for (int g = 0; g < n; ++g) {
      devs.push_back(std::make_unique<CudaDevice>(g));
      ins.push_back(devs[g]->alloc(count, false));
      sums.push_back(devs[g]->alloc(count, false));
      gathered.push_back(devs[g]->alloc(count * n, false));
      devs[g]->fill(a, ins[g], (double)(g + 1));
    }
    NcclCollectives nccl;
    std::vector<int> gpus;
    for (int g = 0; g < n; ++g)
      gpus.push_back(g);
    std::string err = nccl.allReduce(gpus, ReduceKind::Sum, false, ins, sums);
    if (err.empty())
      err = nccl.allGather(gpus, ins, gathered);
    if (!err.empty()) {
      report = "NCCL " + std::to_string(version) + " over " + std::to_string(n) + " GPU(s): " + err;
      return err;
    }
    double want = n * (n + 1) / 2.0;
    std::string bad;
    for (int g = 0; g < n; ++g) {
      for (double v : devs[g]->download(sums[g]))
        if (v != want)
          bad = "all_reduce gave " + std::to_string(v) + " instead of " + std::to_string(want);
      std::vector<double> all = devs[g]->download(gathered[g]);
      for (int64_t i = 0; i < (int64_t)all.size(); ++i)
        if (all[i] != (double)(i / count + 1))
          bad = "all_gather misplaced element " + std::to_string(i);
      devs[g]->release(ins[g]);
      devs[g]->release(sums[g]);
      devs[g]->release(gathered[g]);
    }
    report = "NCCL " + std::to_string(version) + ", ncclCommInitAll over " + std::to_string(n) +
             " GPU(s) (" + devs[0]->name() + "): all_reduce and all_gather of " +
             std::to_string(count) + " floats " + (bad.empty() ? "correct" : "WRONG: " + bad);
    return bad;
  } catch (const std::exception &e) {
    report = e.what();
    return report;
  }
}

} // namespace

/// The module's entry (Device.h, CudaEntryPoints).
extern "C" __attribute__((visibility("default"))) const CudaEntryPoints *
planproof_cuda_entry_points() {
  static const CudaEntryPoints entry{kCudaEntryVersion, deviceCount, makeDevice, makeCollectives,
                                     smokeTest};
  return &entry;
}
