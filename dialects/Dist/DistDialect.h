//===- DistDialect.h - the distribution dialect -----------------*- C++ -*-===//
//
// Declarations of the `dist` dialect: the mesh op, the layout attribute and the
// collectives (generated from DistOps.td), plus the helpers that give one definition of
// the collectives' shape rules to the verifier and the importers.
//
//===----------------------------------------------------------------------===//
#ifndef PLANPROOF_DIALECTS_DIST_DISTDIALECT_H
#define PLANPROOF_DIALECTS_DIST_DISTDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "Dist/DistDialect.h.inc"
#include "Dist/DistOpInterfaces.h.inc"

#define GET_ATTRDEF_CLASSES
#include "Dist/DistAttrs.h.inc"

#define GET_OP_CLASSES
#include "Dist/DistOps.h.inc"

namespace planproof::dist {
/// Function attribute naming the plan's mesh (a FlatSymbolRefAttr).
constexpr const char *kMeshAttr = "dist.mesh";
/// Argument/result attribute: the reference value this plan value holds a piece of.
constexpr const char *kValueAttr = "dist.value";
/// Argument/result attribute: the LayoutAttr of that piece.
constexpr const char *kLayoutAttr = "dist.layout";
/// Plan function attribute: how the plan's random draws are checked, "exact" (the
/// default: every element draws the reference's (key, counter)) or "independent"
/// (distinct elements draw distinct pairs, replicas the same pair).
constexpr const char *kRngAttr = "dist.rng";
/// Argument/result attribute (unit): the layout's split dimensions are padded to a
/// multiple of their ranks (ZeRO/FSDP flat buffers whose size does not divide).
constexpr const char *kPaddedAttr = "dist.padded";
/// Function attribute (unit): this plan function resumes from the checkpoint the other
/// plan function saves.
constexpr const char *kResumeAttr = "dist.resume";
/// Attribute of a plan's ref.dropout_mask: the reference mask (SSA name) it draws a
/// piece of, with `dist.layout` and optionally `dist.block_offset` (the position of
/// this piece inside the rank's block, for a microbatch of the block).
constexpr const char *kDrawsAttr = "dist.draws";
/// Plan function attribute: the mesh axis whose coordinate is the pipeline stage.
constexpr const char *kPipelineAttr = "dist.pipeline";
/// Op, argument and result attribute (i64): the pipeline stage that executes the op,
/// or holds the argument or result.
constexpr const char *kStageAttr = "dist.stage";
constexpr const char *kBlockOffsetAttr = "dist.block_offset";
/// The segment count that encodes a *zigzag* split in a layout's `segments`: the
/// dimension is 2n chunks over n ranks, and the rank at position p holds chunks p and
/// 2n-1-p (the load-balanced order of causal context parallelism).
constexpr int64_t kZigzagSegments = -2;

/// The mesh of the plan function that (transitively) contains `op`, or null with no
/// diagnostic when there is none.
MeshOp lookupMesh(mlir::Operation *op);

/// The mesh named by a plan function's `dist.mesh` attribute, or null.
MeshOp lookupMeshOfFunc(mlir::Operation *func);

/// The result type a collective must have given its operand, attributes and mesh.
/// One definition shared by the op verifiers and the importers. Emits at `op`'s
/// location on failure.
mlir::FailureOr<mlir::RankedTensorType> expectedResultType(mlir::Operation *op);

/// Checks a layout against a mesh and a rank: known axes, each used once, as many
/// dimension entries as the tensor has dimensions. Emits at `loc` on failure.
mlir::LogicalResult verifyLayout(LayoutAttr layout, MeshOp mesh, int64_t rank,
                                 mlir::Location loc, llvm::StringRef what);
} // namespace planproof::dist

#endif
