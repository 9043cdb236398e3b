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

#endif // PLANPROOF_REF_INTERFACES
