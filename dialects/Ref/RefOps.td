//===- RefOps.td - the reference (single-device step) dialect -*- tablegen -*-===//
//
// The `ref` dialect: the ops of a single-device training step, forward and backward,
// on ranked f32 tensors. Plans reuse these ops for their rank-local computation, so
// each op has exactly one meaning (lib/Semantics/OpSemantics.h) shared by every engine.
//
//===----------------------------------------------------------------------===//

#ifndef PLANPROOF_REF_OPS
#define PLANPROOF_REF_OPS

include "mlir/IR/OpBase.td"
include "mlir/IR/CommonTypeConstraints.td"

def PP_F32RankedTensor : RankedTensorOf<[F32]>;
include "mlir/IR/BuiltinAttributes.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Ref_Dialect : Dialect {
  let name = "ref";
  let cppNamespace = "::planproof::ref";
  let summary = "The single-device reference training step";
  let description = [{
    The `ref` dialect holds the ops of a single-device training step: the forward pass,
    the loss, the backward pass and the optimizer update. A reference program is a
    `func.func` carrying the unit attribute `ref.reference`; its arguments and results
    are named with `ref.name` string attributes, and those names are what a plan's
    layouts refer to.

    Parallel plans (the `dist` dialect) use the same ops for the computation each rank
    does on its local shards. That is deliberate: an op means one thing, defined once in
    `lib/Semantics`, whether it runs on a full tensor or on a shard.

    All ops are pure and work on ranked tensors of `f32`; result types are inferred.
  }];
}

class Ref_Op<string mnemonic, list<Trait> traits = []>
    : Op<Ref_Dialect, mnemonic,
         !listconcat(traits, [Pure, DeclareOpInterfaceMethods<InferTypeOpInterface>])>;



// Elementwise binary ops on two tensors of one shape.
class Ref_ElementwiseBinaryOp<string mnemonic, string what>
    : Ref_Op<mnemonic, [SameOperandsAndResultType]> {
  let summary = "elementwise " # what;
  let arguments = (ins PP_F32RankedTensor:$lhs, PP_F32RankedTensor:$rhs);
  let results = (outs PP_F32RankedTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($result)";
}

def Ref_AddOp : Ref_ElementwiseBinaryOp<"add", "sum"> {
  let description = [{
    `result[i] = lhs[i] + rhs[i]`. Residual adds, gradient accumulation. Its backward
    passes the output gradient to both operands unchanged.

    ```mlir
    %r = ref.add %a, %b : tensor<4x8xf32>
    ```
  }];
}

def Ref_SubOp : Ref_ElementwiseBinaryOp<"sub", "difference"> {
  let description = [{ `result[i] = lhs[i] - rhs[i]`. }];
}

def Ref_MulOp : Ref_ElementwiseBinaryOp<"mul", "product"> {
  let description = [{
    `result[i] = lhs[i] * rhs[i]`. Backward: `d lhs = d result * rhs` and symmetrically.
  }];
}

def Ref_MatmulOp : Ref_Op<"matmul"> {
  let summary = "matrix product with explicit contraction dimensions";
  let description = [{
    Contracts dimension `lhs_dim` of the 2-D `lhs` with dimension `rhs_dim` of the 2-D
    `rhs`. The result is `[free dim of lhs, free dim of rhs]`:

        result[i, j] = sum_k lhs[.. i, k ..] * rhs[.. k, j ..]

    Explicit contraction dimensions let one op express the forward product and both
    backward products without transposes, e.g. for `y = x @ w` (x: BxH, w: HxF):
    `dw = matmul(x, dy) contract(0, 0)` and `dx = matmul(dy, w) contract(1, 1)`.
    Under tensor parallelism the contraction dimension is where partial sums come from,
    which is why the verifier cares which dimension it is.

    ```mlir
    %y = ref.matmul %x, %w contract(1, 0) : tensor<2x4xf32>, tensor<4x8xf32>
    ```
  }];
  let arguments = (ins PP_F32RankedTensor:$lhs, PP_F32RankedTensor:$rhs, I64Attr:$lhs_dim, I64Attr:$rhs_dim);
  let results = (outs PP_F32RankedTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs `contract` `(` $lhs_dim `,` $rhs_dim `)` attr-dict `:` type($lhs) `,` type($rhs)
  }];
}

def Ref_BiasAddOp : Ref_Op<"bias_add"> {
  let summary = "adds a 1-D bias along the last dimension";
  let description = [{
    `result[..., j] = input[..., j] + bias[j]`. Its backward for the bias is
    `ref.reduce_sum` of the output gradient over the leading dimensions.
    Adding a bias to a *partial* value on every rank counts the bias once per rank,
    a classic row-parallel mistake the verifier reports.

    ```mlir
    %y = ref.bias_add %x, %b : tensor<2x8xf32>, tensor<8xf32>
    ```
  }];
  let arguments = (ins PP_F32RankedTensor:$input, PP_F32RankedTensor:$bias);
  let results = (outs PP_F32RankedTensor:$result);
  let assemblyFormat = "$input `,` $bias attr-dict `:` type($input) `,` type($bias)";
}

class Ref_UnaryOp<string mnemonic, list<Trait> traits = []>
    : Ref_Op<mnemonic, !listconcat(traits, [SameOperandsAndResultType])> {
  let arguments = (ins PP_F32RankedTensor:$input);
  let results = (outs PP_F32RankedTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

def Ref_GeluOp : Ref_UnaryOp<"gelu"> {
  let summary = "GeLU activation";
  let description = [{
    `result[i] = gelu(input[i])` with `gelu(x) = x * Phi(x)` (exact, erf-based). The
    symbolic engine treats `gelu` as an uninterpreted function; proofs never need more
    than congruence (equal arguments give equal results). The numeric engines use the
    formula.
  }];
}

def Ref_GeluGradOp : Ref_Op<"gelu_grad", [SameOperandsAndResultType]> {
  let summary = "backward of GeLU";
  let description = [{
    `result[i] = gelu'(input[i]) * grad[i]`, where `input` is the forward input of
    `ref.gelu` and `grad` the gradient of its output. `gelu'` is uninterpreted in the
    symbolic engine, like `gelu`.
  }];
  let arguments = (ins PP_F32RankedTensor:$input, PP_F32RankedTensor:$grad);
  let results = (outs PP_F32RankedTensor:$result);
  let assemblyFormat = "$input `,` $grad attr-dict `:` type($result)";
}

def Ref_ScaleOp : Ref_UnaryOp<"scale"> {
  let summary = "multiplies by a constant";
  let description = [{
    `result[i] = factor * input[i]`. Constants are read as exact rationals (the closest
    simple fraction to the written decimal), so `0.5` is exactly one half in proofs.
  }];
  let arguments = (ins PP_F32RankedTensor:$input, F64Attr:$factor);
  let assemblyFormat = "$input `by` $factor attr-dict `:` type($result)";
}

def Ref_ReduceSumOp : Ref_Op<"reduce_sum"> {
  let summary = "sums over the given dimensions, removing them";
  let description = [{
    Sums `input` over `dims` (sorted, distinct); the result has those dimensions
    removed. Bias gradients are `reduce_sum` of the output gradient over the batch.

    ```mlir
    %db = ref.reduce_sum %dy dims [0] : tensor<2x8xf32>
    ```
  }];
  let arguments = (ins PP_F32RankedTensor:$input, DenseI64ArrayAttr:$dims);
  let results = (outs PP_F32RankedTensor:$result);
  let assemblyFormat = "$input `dims` $dims attr-dict `:` type($input)";
}

def Ref_MseLossOp : Ref_Op<"mse_loss", [AllTypesMatch<["prediction", "target"]>]> {
  let summary = "mean squared error over all elements";
  let description = [{
    `result = (1/N) * sum_i (prediction[i] - target[i])^2` with `N` the number of
    elements; the result is a 0-D tensor. Under data parallelism a rank that applies it
    to its local batch computes a mean over the *local* elements, so the plan must
    average, not sum, across data-parallel ranks.
  }];
  let arguments = (ins PP_F32RankedTensor:$prediction, PP_F32RankedTensor:$target);
  let results = (outs PP_F32RankedTensor:$result);
  let assemblyFormat = "$prediction `,` $target attr-dict `:` type($prediction)";
}

def Ref_MseLossGradOp : Ref_Op<"mse_loss_grad", [AllTypesMatch<["prediction", "target", "result"]>]> {
  let summary = "gradient of ref.mse_loss with respect to the prediction";
  let description = [{
    `result[i] = (2/N) * (prediction[i] - target[i])`, the gradient of `ref.mse_loss`
    for an upstream gradient of 1.
  }];
  let arguments = (ins PP_F32RankedTensor:$prediction, PP_F32RankedTensor:$target);
  let results = (outs PP_F32RankedTensor:$result);
  let assemblyFormat = "$prediction `,` $target attr-dict `:` type($prediction)";
}

def Ref_SgdUpdateOp : Ref_Op<"sgd_update", [AllTypesMatch<["param", "grad", "result"]>]> {
  let summary = "plain SGD parameter update";
  let description = [{
    `result[i] = param[i] - lr * grad[i]`: the next value of a parameter.

    ```mlir
    %w_next = ref.sgd_update %w, %dw lr 0.1 : tensor<4x8xf32>
    ```
  }];
  let arguments = (ins PP_F32RankedTensor:$param, PP_F32RankedTensor:$grad, F64Attr:$lr);
  let results = (outs PP_F32RankedTensor:$result);
  let assemblyFormat = "$param `,` $grad `lr` $lr attr-dict `:` type($param)";
}

#endif // PLANPROOF_REF_OPS
