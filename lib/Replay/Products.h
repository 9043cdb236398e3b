//===- Products.h - the numeric replay's matrix products at machine speed -*- C++ -*-===//
//
// The CPU replay spends nearly all its time in matrix products (ref.matmul,
// ref.batch_matmul). Written element by element through the scalar domain (a vector of
// rounded products per output element, then a sum) they ran at about 0.3 G products per
// second. These kernels compute the same thing in bulk:
//
// - `exactProducts`: the storage-precision runs of the error model. Bit-identical to
//   the domain's definition (OpSemantics.h through NumericDomain): every product
//   rounded to the storage precision, summed in the accumulation precision (fp64 for
//   fp64 storage, fp32 otherwise) in the stated order -- forward, reversed, or as a
//   binary tree -- and the sum rounded to the storage precision. Vectorized across
//   output columns, which keeps each element's order. Returns false (and the caller
//   takes the element-wise path) when an operand is not exactly a float in an fp32 or
//   bf16 run, the one case where the float arithmetic here would round differently.
// - `blasProducts`: the fp64 truth of the error model through the BLAS (dgemm of
//   Debian's single-threaded OpenBLAS: the replay already runs its four reference runs
//   and the plan on threads of their own). A BLAS promises no summation order; the truth needs none:
//   its rounding (about 1e-16 relative per operation) is far below every tolerance,
//   which comes from the storage-precision runs.
//
//===----------------------------------------------------------------------===//
#ifndef PLANPROOF_REPLAY_PRODUCTS_H
#define PLANPROOF_REPLAY_PRODUCTS_H

#include "Device/Device.h"
#include "Semantics/OpSemantics.h"

namespace planproof {
namespace replay {

/// out = round(sum_k round(A[n,i,k] * B[n,k,j])) in `order` (see above); false when an
/// operand is not representable in fp32 in an fp32 or bf16 run (nothing written).
bool exactProducts(ReplayDtype storage, kernels::SumOrder order, const ProductDims &dims, const double *a,
                   const double *b, double *out);

/// out = A * B in fp64 through the BLAS.
void blasProducts(const ProductDims &dims, const double *a, const double *b, double *out);

/// The BLAS the build links (e.g. "OpenBLAS 0.3.21 ..."), for reports and benchmarks.
std::string blasName();

} // namespace replay
} // namespace planproof

#endif
