//===- planproof-opt.cpp - mlir-opt with planproof's dialects ---*- C++ -*-===//
//
// `mlir-opt` with the `ref` and `dist` dialects plus func/arith/tensor/scf registered:
// round-trips, verifies and transforms planproof IR.
//
//===----------------------------------------------------------------------===//
#include "Dist/DistDialect.h"
#include "Ref/RefDialect.h"
#include "Transforms/Autodiff.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::registerTransformsPasses();
  planproof::registerAutodiffPasses();
  mlir::DialectRegistry registry;
  registry.insert<planproof::ref::RefDialect, planproof::dist::DistDialect,
                  mlir::func::FuncDialect, mlir::arith::ArithDialect,
                  mlir::tensor::TensorDialect, mlir::scf::SCFDialect>();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "planproof optimizer driver\n", registry));
}
