//===- RefDialect.h - the reference dialect ---------------------*- C++ -*-===//
//
// Declarations of the `ref` dialect and its ops (generated from RefOps.td).
//
//===----------------------------------------------------------------------===//
#ifndef PLANPROOF_DIALECTS_REF_REFDIALECT_H
#define PLANPROOF_DIALECTS_REF_REFDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "Ref/LayoutFactors.h"
#include "Ref/ScalarFunctions.h"

#include "Ref/RefDialect.h.inc"
#include "Ref/RefOpInterfaces.h.inc"

namespace planproof::ref::OpTrait {
/// Linear in all tensor operands together (RefInterfaces.td, Ref_Linear).
template <typename ConcreteType>
class Linear : public mlir::OpTrait::TraitBase<ConcreteType, Linear> {};
/// Linear in each tensor operand separately (RefInterfaces.td, Ref_Multilinear).
template <typename ConcreteType>
class Multilinear : public mlir::OpTrait::TraitBase<ConcreteType, Multilinear> {};
/// Row by row over the last dimension (RefInterfaces.td, Ref_RowWise).
template <typename ConcreteType>
class RowWise : public mlir::OpTrait::TraitBase<ConcreteType, RowWise> {};
} // namespace planproof::ref::OpTrait

#define GET_OP_CLASSES
#include "Ref/RefOps.h.inc"

namespace planproof::ref {
/// Name of the unit attribute marking the reference step function.
constexpr const char *kReferenceAttr = "ref.reference";
/// Name of the string attribute naming a reference argument or result.
constexpr const char *kNameAttr = "ref.name";
} // namespace planproof::ref

#endif
