//===- ScalarFunctions.h - the scalar functions of elementwise ops -*- C++ -*-===//
//
// The enumeration of the ref dialect's scalar functions (ScalarFunctions.def): what an
// elementwise function op (ScalarFunctionOpInterface) applies to every element. Plain
// C++, no MLIR: the engines and the device code number the same list the same way.
//
//===----------------------------------------------------------------------===//
#ifndef PLANPROOF_DIALECTS_REF_SCALARFUNCTIONS_H
#define PLANPROOF_DIALECTS_REF_SCALARFUNCTIONS_H

#include <cstdint>

namespace planproof::ref {
enum class ScalarFunction : uint8_t {
#define PLANPROOF_SCALAR_FUNCTION(Name, ...) Name,
#include "Ref/ScalarFunctions.def"
};
} // namespace planproof::ref

#endif
