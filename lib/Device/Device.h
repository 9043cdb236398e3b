//===- Device.h - the primitives the kernel replay backend runs on -*- C++ -*-===//
//
// The kernel backend of the replay (KernelReplay.cpp) lowers every op of a spec to a
// small set of data-parallel primitives, the ones a GPU runs well: elementwise maps,
// strided copies, row reductions, row-wise fused kernels (softmax, norms, rotary,
// cross-entropy), batched matrix products and group reductions for collectives.
// Two devices implement them:
//
//  - the CUDA device (CudaDevice.cu, built when the CUDA toolkit is found): kernels,
//    cuBLAS for matrix products, one stream; NCCL communicators for real ranks;
//  - the host device (HostDevice.cpp): the same primitives as plain loops, so that the
//    lowering, the error model and the localization of the kernel backend are tested
//    on machines without a GPU.
//
// The arithmetic of a primitive: inputs and outputs are stored in the storage precision
// (fp64 buffers for F64, fp32 buffers for F32 and BF16, with BF16 values rounded to
// bfloat16 at the end of every primitive); sums and fused kernels compute in the
// accumulation precision (fp64 for F64, fp32 otherwise), summing in the requested
// order. The meaning of each op is OpSemantics.h's; the unit tests check every
// primitive's lowering against it op by op.
//
//===----------------------------------------------------------------------===//
#ifndef PLANPROOF_REPLAY_DEVICE_H
#define PLANPROOF_REPLAY_DEVICE_H

#include "Device/Numerics.h"
#include "Semantics/Functions.h"
#include "Semantics/Layout.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace planproof {
namespace kernels {

/// The order a primitive sums in (the error model runs the reference in all three).
enum class SumOrder { Forward, Reverse, Pairwise };

struct Arith {
  ReplayDtype dtype = ReplayDtype::F32;
  SumOrder order = SumOrder::Forward;
  bool wide() const { return dtype == ReplayDtype::F64; }
};

/// Device memory: `n` elements of 8 bytes (fp64) or 4 bytes (fp32).
struct Buffer {
  void *ptr = nullptr;
  int64_t n = 0;
  bool wide = false;
};

/// Elementwise maps. Operands broadcast cyclically: element i of an operand of n
/// elements is i % n (a bias over the last dimension, a scalar).
enum class MapKind : uint8_t {
  Copy,      // x
  Add,       // x + y
  Sub,       // x - y
  Mul,       // x * y
  Scale,     // x * p0
  Function,  // fn(x) (Exp, Log, Rsqrt, Recip, Silu, Sqrt, Gelu)
  GeluGrad,  // gelu'(x) * y
  SiluGrad,  // silu'(x) * y
  SgdUpdate, // x - y * p0
  MseGrad,   // (x - y) * p0
  Div,       // x * recip(y)
  Max,       // max(x, y)
  Min,       // min(x, y)
  DropMask,  // dropmask(p0, p1 + i, p2)
};

struct MapArgs {
  MapKind kind = MapKind::Copy;
  Fn fn = Fn::Exp;
  double p0 = 0, p1 = 0, p2 = 0;
};

/// A strided view for copies of up to 8 dimensions: element (i_0..i_k) of the extent
/// is at offset + sum i_d * strides[d].
constexpr int kMaxDims = 8;
struct Strided {
  int64_t offset = 0;
  int64_t strides[kMaxDims] = {0};
};

enum class RowKind : uint8_t { Sum, Max, Mean };

class Device {
public:
  virtual ~Device() = default;
  /// "NVIDIA H200 (cuda:0)", "host emulation".
  virtual std::string name() const = 0;
  virtual bool isHost() const = 0;

  virtual Buffer alloc(int64_t n, bool wide) = 0;
  virtual void release(Buffer &b) = 0;
  virtual void upload(Buffer dst, const std::vector<double> &src) = 0;
  virtual std::vector<double> download(Buffer src) = 0;
  /// Bytes free for this run (device memory), or a large number for the host.
  virtual int64_t freeBytes() = 0;
  /// Waits for all queued work (timings, errors).
  virtual void sync() = 0;

  virtual void fill(const Arith &a, Buffer out, double v) = 0;
  /// out[i] = inputValue(seed, stream, first + i, bound) * scale, rounded to storage.
  virtual void random(const Arith &a, Buffer out, uint64_t seed, uint64_t stream, uint64_t first,
                      int64_t bound, double scale) = 0;
  virtual void map(const Arith &a, const MapArgs &m, Buffer out, Buffer x, Buffer y) = 0;
  /// dst[view] = src[view] over `extent` (rank <= kMaxDims).
  virtual void copy(const Arith &a, Buffer dst, const Strided &d, Buffer src, const Strided &s,
                    const Shape &extent) = 0;
  /// out[r] = reduction of in[r, 0..len) for r < rows.
  virtual void reduceRows(const Arith &a, RowKind k, Buffer out, Buffer in, int64_t rows,
                          int64_t len) = 0;
  /// out[n] = A[n] (I x K) * B[n] (K x J) for n < batch, with A stored [I, K] (lhsK =
  /// true) or [K, I], and B stored [K, J] (rhsK = true) or [J, K].
  virtual void gemm(const Arith &a, Buffer out, Buffer A, Buffer B, int64_t batch, int64_t I,
                    int64_t J, int64_t K, bool lhsK, bool rhsK) = 0;
  /// Softmax of each row of [rows, cols]; causal: row r sees
  /// scalar::causalAllowed(r % sq, offset, cols) leading columns, the rest are 0.
  virtual void softmaxRows(const Arith &a, Buffer out, Buffer in, int64_t rows, int64_t cols,
                           int64_t sq, bool causal, int64_t offset) = 0;
  /// RMSNorm (bias empty) or LayerNorm of each row of [rows, width].
  virtual void normRows(const Arith &a, Buffer out, Buffer x, Buffer w, Buffer b, int64_t rows,
                        int64_t width, double eps, bool layer) = 0;
  /// Rotary embedding of x [.., S, width] with cos/sin [S, width].
  virtual void rotary(const Arith &a, Buffer out, Buffer x, Buffer cs, Buffer sn, int64_t S,
                      int64_t width) = 0;
  /// Per token t: mask[t] * (logsumexp(x[t]) - sum_v labels[t, v] x[t, v]).
  virtual void crossEntropyRows(const Arith &a, Buffer out, Buffer x, Buffer labels, Buffer mask,
                                int64_t T, int64_t V) = 0;
  /// Embedding lookup (out [T, W] from table [rows, W]) or its gradient (out [rows, W]
  /// from grad [T, W]): row v is global row offset + v.
  virtual void embedding(const Arith &a, bool lookup, Buffer out, Buffer dense, Buffer ids,
                         int64_t T, int64_t rows, int64_t W, int64_t offset) = 0;
  /// A collective's reduction over a group living on this device: out[i] = the group
  /// sum (in `order`, as NumericDomain::groupSum), average or max of ins[p][i].
  virtual void reduceGroup(const Arith &a, ReduceKind k, ReduceOrder order, Buffer out,
                           const std::vector<Buffer> &ins) = 0;
};

/// The host device (always available).
std::unique_ptr<Device> makeHostDevice();

/// Whether this build has the CUDA backend.
bool cudaBuilt();
/// The CUDA device for GPU `index`, or null with the reason (no CUDA in this build, no
/// driver, no GPU).
std::unique_ptr<Device> makeCudaDevice(int index, std::string &why);
/// Number of GPUs visible (0 with the reason when none).
int cudaDeviceCount(std::string &why);

/// NCCL: one communicator per group of real ranks (one GPU each), created in one
/// process with ncclCommInitAll.
class Collectives {
public:
  virtual ~Collectives() = default;
  /// outs[p] = the reduction over ins of the group (all on their own GPUs), by NCCL.
  /// `bf16`: the fp32 buffers hold bfloat16 values; the sums are rounded back.
  virtual std::string allReduce(const std::vector<int> &gpus, ReduceKind k, bool bf16,
                                const std::vector<Buffer> &ins, const std::vector<Buffer> &outs) = 0;
  /// outs[p] = the concatenation of ins in group order (flat, contiguous).
  virtual std::string allGather(const std::vector<int> &gpus, const std::vector<Buffer> &ins,
                                const std::vector<Buffer> &outs) = 0;
};
/// NCCL collectives over the given devices, or null with the reason.
std::unique_ptr<Collectives> makeNcclCollectives(std::string &why);

/// The NCCL smoke test: a communicator over every visible GPU (ncclCommInitAll), an
/// all-reduce and an all-gather of known values, checked. Returns "" or what failed.
std::string ncclSmokeTest(std::string &report);

/// The CUDA backend is a module of its own (libplanproof-cuda.so, CudaDevice.cu), loaded
/// on the first call of the functions above (CudaLoader.cpp): a run that never asks for
/// a GPU does not load the CUDA runtime, cuBLAS or NCCL, whose initialization costs
/// every process about 0.15 s. The module's one exported symbol,
/// `planproof_cuda_entry_points`, returns this table.
struct CudaEntryPoints {
  int version; // kCudaEntryVersion of the module's build
  int (*deviceCount)(std::string &why);
  std::unique_ptr<Device> (*makeDevice)(int index, std::string &why);
  std::unique_ptr<Collectives> (*makeCollectives)(std::string &why);
  std::string (*smokeTest)(std::string &report);
};
constexpr int kCudaEntryVersion = 1;

} // namespace kernels
} // namespace planproof

#endif
