//===- Tensor.h - dense tensors of any scalar domain ------------*- C++ -*-===//
//
// A row-major dense tensor whose elements are values of an engine's scalar domain:
// canonical polynomials for the element engine, doubles for numeric replay.
//
//===----------------------------------------------------------------------===//
#ifndef PLANPROOF_SEMANTICS_TENSOR_H
#define PLANPROOF_SEMANTICS_TENSOR_H

#include <cstdint>
#include <string>
#include <vector>

namespace planproof {

using Shape = std::vector<int64_t>;

inline int64_t numElements(const Shape &s) {
  int64_t n = 1;
  for (int64_t d : s)
    n *= d;
  return n;
}

inline std::string shapeStr(const Shape &s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i)
    r += (i ? "x" : "") + std::to_string(s[i]);
  return r + "]";
}

/// Row-major linear position of `idx` in `shape`, and its inverse. Tensors index their
/// elements this way, and meshes number their ranks this way.
inline int64_t linearIndex(const Shape &shape, const std::vector<int64_t> &idx) {
  int64_t l = 0;
  for (size_t d = 0; d < shape.size(); ++d)
    l = l * shape[d] + idx[d];
  return l;
}

inline std::vector<int64_t> unravelIndex(const Shape &shape, int64_t l) {
  std::vector<int64_t> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = l % shape[d];
    l /= shape[d];
  }
  return idx;
}

template <class V> struct Tensor {
  Shape shape;
  std::vector<V> data;

  Tensor() = default;
  Tensor(Shape s, V fill) : shape(std::move(s)), data(numElements(shape), fill) {}

  int64_t linear(const std::vector<int64_t> &idx) const { return linearIndex(shape, idx); }
  std::vector<int64_t> unravel(int64_t l) const { return unravelIndex(shape, l); }
  V &at(const std::vector<int64_t> &idx) { return data[linear(idx)]; }
  const V &at(const std::vector<int64_t> &idx) const { return data[linear(idx)]; }
};

inline std::string indexStr(const std::vector<int64_t> &idx) {
  std::string r = "[";
  for (size_t i = 0; i < idx.size(); ++i)
    r += (i ? "," : "") + std::to_string(idx[i]);
  return r + "]";
}

} // namespace planproof

#endif
