//===- Limits.h - size caps and overflow-checked size arithmetic -*- C++ -*-===//
//
// The one place that says how large a spec's sizes may be, and the checked arithmetic
// every shape, element-count, offset, stride and index computation uses. A size that
// leaves these bounds is bad input (exit 2), never a wrapped number: wrapped element
// counts once made a 2^40 x 2^40 tensor look empty and "verified with 0 obligations".
//
// Header-only and free of MLIR types, so that the dialects' verifiers, the JSON
// importer, spec validation and the engines all share it.
//
//===----------------------------------------------------------------------===//
#ifndef PLANPROOF_SUPPORT_LIMITS_H
#define PLANPROOF_SUPPORT_LIMITS_H

#include <cstdint>
#include <string>
#include <vector>

namespace planproof {

/// Largest size of one tensor dimension.
constexpr int64_t kMaxDimSize = int64_t(1) << 31;
/// Largest number of elements of one tensor (or checkpoint entry).
constexpr int64_t kMaxElements = int64_t(1) << 40;
/// Largest number of ranks of a mesh, and of one mesh axis.
constexpr int64_t kMaxRanks = int64_t(1) << 40;
constexpr int64_t kMaxAxisSize = int64_t(1) << 20;
/// Largest spec file read (MLIR or JSON); larger inputs are refused before parsing.
constexpr int64_t kMaxInputBytes = int64_t(256) << 20;
/// Deepest nesting of brackets accepted in an input file (JSON arrays/objects, MLIR
/// attributes, regions and types): parsers recurse per level.
constexpr int kMaxNesting = 512;

/// a + b, or false when it overflows int64.
inline bool checkedAdd(int64_t a, int64_t b, int64_t &out) {
  return !__builtin_add_overflow(a, b, &out);
}
/// a * b, or false when it overflows int64.
inline bool checkedMul(int64_t a, int64_t b, int64_t &out) {
  return !__builtin_mul_overflow(a, b, &out);
}

/// The product of `dims` when every factor is in [0, cap] and the product is at most
/// `cap`; -1 otherwise (a negative or dynamic size, or too many elements).
template <class Range> int64_t checkedProduct(const Range &dims, int64_t cap = kMaxElements) {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0 || d > cap || !checkedMul(n, d, n) || n > cap)
      return -1;
  }
  return n;
}

/// Whether [offset, offset + size) lies inside [0, extent), without overflow.
inline bool rangeInside(int64_t offset, int64_t size, int64_t extent) {
  int64_t end;
  return offset >= 0 && size >= 0 && checkedAdd(offset, size, end) && end <= extent;
}

/// Why a tensor shape is outside what planproof supports ("" when it is inside):
/// every dimension static and in [1, kMaxDimSize], at most kMaxElements elements.
/// `dynamic` is the value that marks a dynamic dimension (MLIR's ShapedType::kDynamic).
template <class Range> std::string shapeProblem(const Range &dims, int64_t dynamic) {
  int64_t k = 0;
  for (int64_t d : dims) {
    std::string which = "dimension " + std::to_string(k++);
    if (d == dynamic)
      return which + " is dynamic ('?'): dynamic shapes are not supported; write the sizes";
    if (d < 1)
      return which + " has size " + std::to_string(d) +
             ": sizes must be at least 1 (empty tensors have nothing to verify)";
    if (d > kMaxDimSize)
      return which + " has size " + std::to_string(d) + ", more than 2^31";
  }
  if (checkedProduct(dims) < 0)
    return "more than 2^40 elements";
  return "";
}

} // namespace planproof

#endif
