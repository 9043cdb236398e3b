//===- RefInterfaces.td - op facts of the ref dialect -------*- tablegen -*-===//
//
// The interfaces through which the engines ask a `ref` op what they need to know of it
// (docs/ARCHITECTURE.md, "Op facts"). Their C++ is generated from this file alone
// (mlir-tblgen emits the interfaces of its main file); RefOps.td attaches them to ops.
//
//===----------------------------------------------------------------------===//

#ifndef PLANPROOF_REF_INTERFACES
#define PLANPROOF_REF_INTERFACES

include "mlir/IR/OpBase.td"

//===----------------------------------------------------------------------===//
// Op facts shared by every engine
//===----------------------------------------------------------------------===//

def Ref_NonlinearOpInterface : OpInterface<"NonlinearOp"> {
  let cppNamespace = "::planproof::ref";
  let description = [{
    An op that is not linear in some of its tensor operands: an operand there that is
    still partial (a share of a sum over ranks) must be reduced before the op. The
    diagnosis of a missing reduction (Engine/Explain.cpp) asks this interface.
  }];
  let methods = [
    StaticInterfaceMethod<"Bit i set: the op is not linear in operand i.", "unsigned",
                          "getNonlinearOperands", (ins), [{}], [{ return ~0u; }]>,
  ];
}

def Ref_ScalarFunctionOpInterface : OpInterface<"ScalarFunctionOp"> {
  let cppNamespace = "::planproof::ref";
  let description = [{
    An elementwise op that applies one scalar function of ScalarFunctions.def to every
    element: its value, interval enclosure, domain and sign are defined there once, for
    the symbolic engine, the numeric engines and the device kernels.
  }];
  let methods = [
    StaticInterfaceMethod<"The scalar function applied to every element.",
                          "::planproof::ref::ScalarFunction", "getFunction">,
  ];
}

def Ref_LayoutFactorsOpInterface : OpInterface<"LayoutFactorsOp"> {
  let cppNamespace = "::planproof::ref";
  let description = [{
    The op's layout rule as data (Ref/LayoutFactors.h): the factors of its index space,
    which dimensions of its tensor operands and result index each, and whether a split
    of a factor passes through, becomes a partial sum, mean or maximum, or is not
    allowed. The layout engine propagates splits over them with one generic rule. Every
    ref op has the interface: its rule comes from its family's traits (`Elementwise`,
    `RowWise`) unless the op lists `Ref_OwnLayoutFactors` and writes its own in
    Ref/LayoutFactors.cpp. None: the op has no rule (the engine needs its operands whole).
  }];
  let methods = [
    InterfaceMethod<"The op's factors, or none.",
                    "std::optional<::planproof::ref::LayoutFactors>", "getLayoutFactors",
                    (ins), [{}],
                    [{ return ::planproof::ref::familyFactors($_op.getOperation()); }]>,
  ];
}

//===----------------------------------------------------------------------===//
// Linearity, as traits (their C++ classes are in RefDialect.h). With MLIR's
// `Elementwise` trait they are what the layout engine's transfer rules ask of an op
// (docs/layout-engine.md): which partial (per-rank summand) operands an op can take.
//===----------------------------------------------------------------------===//

// Linear in all its tensor operands together: f(sum_r x_r, sum_r y_r) =
// sum_r f(x_r, y_r) (add, sub, bias_add, reductions, layout ops, scale). Operands
// that are partial sums over the same ranks give a partial sum over them.
def Ref_Linear : NativeOpTrait<"Linear"> {
  let cppNamespace = "::planproof::ref::OpTrait";
}

// Linear in each tensor operand separately, the others fixed (matmul, mul): one
// operand that is a partial sum gives a partial sum. Ops implementing NonlinearOp
// are linear separately in the operands whose bit is clear.
def Ref_Multilinear : NativeOpTrait<"Multilinear"> {
  let cppNamespace = "::planproof::ref::OpTrait";
}

// Row by row over the last dimension: each row of the result (all indices but the
// last) depends only on the same row of the operands of the first operand's rank, and
// on the whole of the lower-rank operands (a norm's weight and bias). The result has
// the first operand's shape (softmax, norms, topk_mask).
def Ref_RowWise : NativeOpTrait<"RowWise"> {
  let cppNamespace = "::planproof::ref::OpTrait";
}

#endif // PLANPROOF_REF_INTERFACES
