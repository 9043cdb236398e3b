//===- HostDevice.cpp - the device primitives as host loops ---------------===//
//
// The kernel backend's primitives on the host: the same bodies (Kernels.h) the CUDA
// kernels run, called in loops. It makes the kernel backend's lowering, error model and
// localization testable without a GPU, and is the oracle the CUDA device is compared
// with on a machine that has one.
//
//===----------------------------------------------------------------------===//
#include "Device/Device.h"
#include "Device/Kernels.h"

#include <cstring>
#include <limits>

using namespace planproof;
using namespace planproof::kernels;

namespace {

template <class F> void forTypes(bool wide, F f) {
  if (wide)
    f(double(), double());
  else
    f(float(), float());
}

int orderCode(SumOrder o) {
  return o == SumOrder::Forward ? body::kForward : o == SumOrder::Reverse ? body::kReverse : body::kPairwise;
}

class HostDevice final : public Device {
public:
  std::string name() const override { return "host emulation of the CUDA device"; }
  bool isHost() const override { return true; }

  Buffer alloc(int64_t n, bool wide) override {
    Buffer b;
    b.n = n;
    b.wide = wide;
    b.ptr = std::calloc(std::max<int64_t>(n, 1), wide ? 8 : 4);
    if (!b.ptr)
      throw std::bad_alloc();
    return b;
  }
  void release(Buffer &b) override {
    std::free(b.ptr);
    b.ptr = nullptr;
  }
  void upload(Buffer dst, const std::vector<double> &src) override {
    for (int64_t i = 0; i < dst.n; ++i) {
      if (dst.wide)
        static_cast<double *>(dst.ptr)[i] = src[i];
      else
        static_cast<float *>(dst.ptr)[i] = (float)src[i];
    }
  }
  std::vector<double> download(Buffer src) override {
    std::vector<double> out(src.n);
    for (int64_t i = 0; i < src.n; ++i)
      out[i] = src.wide ? static_cast<double *>(src.ptr)[i] : static_cast<float *>(src.ptr)[i];
    return out;
  }
  int64_t freeBytes() override { return std::numeric_limits<int64_t>::max() / 4; }
  void sync() override {}

  void fill(const Arith &a, Buffer out, double v) override {
    forTypes(out.wide, [&](auto t, auto) {
      using T = decltype(t);
      T x = body::store<T>(v, a.dtype == ReplayDtype::BF16);
      for (int64_t i = 0; i < out.n; ++i)
        static_cast<T *>(out.ptr)[i] = x;
    });
  }
  void random(const Arith &a, Buffer out, uint64_t seed, uint64_t stream, uint64_t first,
              int64_t bound, double scale) override {
    forTypes(out.wide, [&](auto t, auto) {
      using T = decltype(t);
      for (int64_t i = 0; i < out.n; ++i)
        static_cast<T *>(out.ptr)[i] = (T)body::randomElement(
            scale, seed, stream, first + i, bound, a.wide(), a.dtype == ReplayDtype::BF16);
    });
  }
  void map(const Arith &a, const MapArgs &m, Buffer out, Buffer x, Buffer y) override {
    forTypes(out.wide, [&](auto t, auto) {
      using T = decltype(t);
      for (int64_t i = 0; i < out.n; ++i)
        static_cast<T *>(out.ptr)[i] = body::mapElement<T>(
            (int)m.kind, (int)m.fn, m.p0, m.p1, m.p2, static_cast<const T *>(x.ptr), x.n,
            static_cast<const T *>(y.ptr), y.n, i, a.dtype == ReplayDtype::BF16);
    });
  }
  void copy(const Arith &a, Buffer dst, const Strided &d, Buffer src, const Strided &s,
            const Shape &extent) override {
    int64_t total = numElements(extent);
    forTypes(dst.wide, [&](auto t, auto) {
      using T = decltype(t);
      T *out = static_cast<T *>(dst.ptr);
      const T *in = static_cast<const T *>(src.ptr);
      for (int64_t l = 0; l < total; ++l) {
        int64_t rest = l, di = d.offset, si = s.offset;
        for (size_t k = extent.size(); k-- > 0;) {
          int64_t i = rest % extent[k];
          rest /= extent[k];
          di += i * d.strides[k];
          si += i * s.strides[k];
        }
        out[di] = in[si];
      }
    });
  }
  void reduceRows(const Arith &a, RowKind k, Buffer out, Buffer in, int64_t rows,
                  int64_t len) override {
    forTypes(out.wide, [&](auto t, auto acc) {
      using T = decltype(t);
      using Acc = decltype(acc);
      for (int64_t r = 0; r < rows; ++r)
        static_cast<T *>(out.ptr)[r] = body::reduceRow<T, Acc>(
            (int)k, orderCode(a.order), static_cast<const T *>(in.ptr) + r * len, len,
            a.dtype == ReplayDtype::BF16);
    });
  }
  void gemm(const Arith &a, Buffer out, Buffer A, Buffer B, int64_t batch, int64_t I, int64_t J,
            int64_t K, bool lhsK, bool rhsK) override {
    forTypes(out.wide, [&](auto t, auto acc) {
      using T = decltype(t);
      using Acc = decltype(acc);
      T *o = static_cast<T *>(out.ptr);
      for (int64_t n = 0; n < batch; ++n)
        for (int64_t i = 0; i < I; ++i)
          for (int64_t j = 0; j < J; ++j)
            o[(n * I + i) * J + j] = body::gemmElement<T, Acc>(
                orderCode(a.order), static_cast<const T *>(A.ptr), static_cast<const T *>(B.ptr),
                n, i, j, I, J, K, lhsK, rhsK, a.dtype == ReplayDtype::BF16);
    });
  }
  void softmaxRows(const Arith &a, Buffer out, Buffer in, int64_t rows, int64_t cols, int64_t sq,
                   bool causal, int64_t offset) override {
    forTypes(out.wide, [&](auto t, auto acc) {
      using T = decltype(t);
      using Acc = decltype(acc);
      for (int64_t r = 0; r < rows; ++r) {
        int64_t allowed = causal ? scalar::causalAllowed(r % sq, offset, cols) : cols;
        body::softmaxRow<T, Acc>(orderCode(a.order), static_cast<const T *>(in.ptr) + r * cols,
                                 static_cast<T *>(out.ptr) + r * cols, cols, allowed,
                                 a.dtype == ReplayDtype::BF16);
      }
    });
  }
  void normRows(const Arith &a, Buffer out, Buffer x, Buffer w, Buffer b, int64_t rows,
                int64_t width, double eps, bool layer) override {
    forTypes(out.wide, [&](auto t, auto acc) {
      using T = decltype(t);
      using Acc = decltype(acc);
      for (int64_t r = 0; r < rows; ++r)
        body::normRow<T, Acc>(orderCode(a.order), static_cast<const T *>(x.ptr) + r * width,
                              static_cast<const T *>(w.ptr), static_cast<const T *>(b.ptr),
                              static_cast<T *>(out.ptr) + r * width, width, eps, layer,
                              a.dtype == ReplayDtype::BF16);
    });
  }
  void rotary(const Arith &a, Buffer out, Buffer x, Buffer cs, Buffer sn, int64_t S,
              int64_t width) override {
    forTypes(out.wide, [&](auto t, auto) {
      using T = decltype(t);
      for (int64_t l = 0; l < out.n; ++l)
        static_cast<T *>(out.ptr)[l] = body::rotaryElement<T>(
            static_cast<const T *>(x.ptr), static_cast<const T *>(cs.ptr),
            static_cast<const T *>(sn.ptr), l, S, width, a.dtype == ReplayDtype::BF16);
    });
  }
  void crossEntropyRows(const Arith &a, Buffer out, Buffer x, Buffer labels, Buffer mask,
                        int64_t T_, int64_t V) override {
    forTypes(out.wide, [&](auto t, auto acc) {
      using T = decltype(t);
      using Acc = decltype(acc);
      for (int64_t r = 0; r < T_; ++r)
        static_cast<T *>(out.ptr)[r] = body::crossEntropyRow<T, Acc>(
            orderCode(a.order), static_cast<const T *>(x.ptr), static_cast<const T *>(labels.ptr),
            static_cast<const T *>(mask.ptr), r, V, a.dtype == ReplayDtype::BF16);
    });
  }
  void embedding(const Arith &a, bool lookup, Buffer out, Buffer dense, Buffer ids, int64_t T_,
                 int64_t rows, int64_t W, int64_t offset) override {
    forTypes(out.wide, [&](auto t, auto acc) {
      using T = decltype(t);
      using Acc = decltype(acc);
      int64_t A = lookup ? T_ : rows;
      for (int64_t i = 0; i < A; ++i)
        for (int64_t w = 0; w < W; ++w)
          static_cast<T *>(out.ptr)[i * W + w] = body::embeddingElement<T, Acc>(
              orderCode(a.order), lookup, static_cast<const T *>(dense.ptr),
              static_cast<const T *>(ids.ptr), i, w, T_, rows, W, offset,
              a.dtype == ReplayDtype::BF16);
    });
  }
  void reduceGroup(const Arith &a, ReduceKind k, ReduceOrder order, Buffer out,
                   const std::vector<Buffer> &ins) override {
    forTypes(out.wide, [&](auto t, auto acc) {
      using T = decltype(t);
      using Acc = decltype(acc);
      std::vector<const T *> ptrs;
      for (const Buffer &b : ins)
        ptrs.push_back(static_cast<const T *>(b.ptr));
      int kind = k == ReduceKind::Sum ? body::kGroupSum : k == ReduceKind::Avg ? body::kGroupAvg : body::kGroupMax;
      int ord = order == ReduceOrder::Rank ? body::kOrderRank : order == ReduceOrder::Ring ? body::kOrderRing : body::kOrderTree;
      for (int64_t i = 0; i < out.n; ++i)
        static_cast<T *>(out.ptr)[i] = body::groupElement<T, Acc>(
            kind, ord, ptrs.data(), (int64_t)ptrs.size(), i, a.dtype == ReplayDtype::BF16);
    });
  }
};

} // namespace

std::unique_ptr<Device> planproof::kernels::makeHostDevice() {
  return std::make_unique<HostDevice>();
}
