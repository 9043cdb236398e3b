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
// f32 values, or a vector of token ids (the ops that only move elements take both).
def PP_F32OrIdsTensor : AnyTypeOf<[RankedTensorOf<[F32]>, 1DTensorOf<[I64]>],
                                  "f32 ranked tensor or 1-D tensor of i64 token ids">;
include "mlir/IR/BuiltinAttributes.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/IR/OpAsmInterface.td"
include "Ref/RefInterfaces.td"

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

    An op may carry `ref.role = "grad-norm"` (or another violation kind): violations
    around the value it computes are then reported with that kind.
  }];
  let hasOperationAttrVerify = 1;
}

// An op whose layout rule is its own (Ref/LayoutFactors.cpp) rather than its family's.
def Ref_OwnLayoutFactors
    : DeclareOpInterfaceMethods<Ref_LayoutFactorsOpInterface, ["getLayoutFactors"]>;

// Every ref op has a layout rule: its family's, or its own.
class Ref_WithLayoutFactors<list<Trait> traits> {
  list<Trait> all = !listconcat(traits,
      !if(!empty(!filter(t, traits, !eq(t, Ref_OwnLayoutFactors))),
          [Ref_LayoutFactorsOpInterface], []));
}

class Ref_Op<string mnemonic, list<Trait> traits = []>
    : Op<Ref_Dialect, mnemonic,
         !listconcat(Ref_WithLayoutFactors<traits>.all,
                     [Pure, DeclareOpInterfaceMethods<InferTypeOpInterface>])> {
  // Whether the JSON interchange format has this op (docs/json-format.md): its
  // attribute table and the schema's op list are generated from the ops that do
  // (tools/planproof-tblgen).
  bit inJsonFormat = 1;
}

// The op facts shared by every engine (interfaces) are in RefInterfaces.td.

// Elementwise binary ops on two tensors of one shape.
class Ref_ElementwiseBinaryOp<string mnemonic, string what, list<Trait> traits = []>
    : Ref_Op<mnemonic, !listconcat(traits, [SameOperandsAndResultType, Elementwise])> {
  let summary = "elementwise " # what;
  let arguments = (ins PP_F32RankedTensor:$lhs, PP_F32RankedTensor:$rhs);
  let results = (outs PP_F32RankedTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($result)";
}

def Ref_AddOp : Ref_ElementwiseBinaryOp<"add", "sum", [Ref_Linear]> {
  let description = [{
    `result[i] = lhs[i] + rhs[i]`. Residual adds, gradient accumulation. Its backward
    passes the output gradient to both operands unchanged.

    ```mlir
    %r = ref.add %a, %b : tensor<4x8xf32>
    ```
  }];
}

def Ref_SubOp : Ref_ElementwiseBinaryOp<"sub", "difference", [Ref_Linear]> {
  let description = [{ `result[i] = lhs[i] - rhs[i]`. }];
}

def Ref_MulOp : Ref_ElementwiseBinaryOp<"mul", "product", [Ref_Multilinear]> {
  let description = [{
    `result[i] = lhs[i] * rhs[i]`. Backward: `d lhs = d result * rhs` and symmetrically.
  }];
}

def Ref_MatmulOp : Ref_Op<"matmul", [Ref_OwnLayoutFactors, Ref_Multilinear]> {
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

def Ref_DotOp : Ref_Op<"dot", [Ref_OwnLayoutFactors, Ref_Multilinear, AllTypesMatch<["lhs", "rhs"]>]> {
  let summary = "inner product of two vectors";
  let description = [{
    `result = sum_k lhs[k] * rhs[k]` for 1-D `lhs` and `rhs` of one shape; the result is
    a 0-D tensor (PyTorch's `torch.dot`). With the vectors split over a mesh axis, each
    rank's dot is a partial sum of the whole dot.

    ```mlir
    %s = ref.dot %a, %b : tensor<8xf32>
    ```
  }];
  let arguments = (ins PP_F32RankedTensor:$lhs, PP_F32RankedTensor:$rhs);
  let results = (outs PP_F32RankedTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($lhs)";
}

def Ref_BiasAddOp : Ref_Op<"bias_add", [Ref_OwnLayoutFactors, Ref_Linear]> {
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

// Ops whose result shape is not a function of operands and attributes (reshape,
// broadcast): the result type is written out and checked by a verifier.
class Ref_ExplicitTypeOp<string mnemonic, list<Trait> traits = []>
    : Op<Ref_Dialect, mnemonic, !listconcat(Ref_WithLayoutFactors<traits>.all, [Pure])> {
  bit inJsonFormat = 1;
}

class Ref_UnaryOp<string mnemonic, list<Trait> traits = []>
    : Ref_Op<mnemonic, !listconcat(traits, [SameOperandsAndResultType])> {
  let arguments = (ins PP_F32RankedTensor:$input);
  let results = (outs PP_F32RankedTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

def Ref_GeluOp : Ref_UnaryOp<"gelu", [Ref_NonlinearOpInterface, Ref_ScalarFunctionOpInterface, Elementwise]> {
  let extraClassDeclaration = [{
    static ::planproof::ref::ScalarFunction getFunction() {
      return ::planproof::ref::ScalarFunction::Gelu;
    }
  }];
  let summary = "GeLU activation";
  let description = [{
    `result[i] = gelu(input[i])` with `gelu(x) = x * Phi(x)` (exact, erf-based). The
    symbolic engine treats `gelu` as an uninterpreted function; proofs never need more
    than congruence (equal arguments give equal results). The numeric engines use the
    formula.
  }];
}

def Ref_GeluGradOp : Ref_Op<"gelu_grad", [SameOperandsAndResultType, Ref_NonlinearOpInterface, Elementwise]> {
  let extraClassDeclaration = [{
    static unsigned getNonlinearOperands() { return 0b01; }
  }];
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

def Ref_DetachOp : Ref_UnaryOp<"detach", [Ref_Linear, Elementwise]> {
  let summary = "the identity, with zero derivative (stop-gradient)";
  let description = [{
    `result = input`, but `ref.grad` does not differentiate through it. A plan's
    hand-written backward pass uses it to take an upstream gradient as given when it
    differentiates one local segment (`ref.grad` of `sum(segment_output * upstream)`),
    the way frameworks compose backward passes across collectives.
  }];
}

def Ref_ScaleOp : Ref_UnaryOp<"scale", [Ref_Linear, Elementwise]> {
  let summary = "multiplies by a constant";
  let description = [{
    `result[i] = factor * input[i]`. Constants are read as exact rationals (the closest
    simple fraction to the written decimal), so `0.5` is exactly one half in proofs.
  }];
  let arguments = (ins PP_F32RankedTensor:$input, F64Attr:$factor);
  let assemblyFormat = "$input `by` $factor attr-dict `:` type($result)";
}

class Ref_ReduceOp<string mnemonic, string what, list<Trait> traits = []>
    : Ref_Op<mnemonic, traits> {
  let summary = what # " over the given dimensions, removing them";
  let arguments = (ins PP_F32RankedTensor:$input, DenseI64ArrayAttr:$dims);
  let results = (outs PP_F32RankedTensor:$result);
  let assemblyFormat = "$input `dims` $dims attr-dict `:` type($input)";
}

def Ref_ReduceSumOp : Ref_ReduceOp<"reduce_sum", "sums", [Ref_OwnLayoutFactors, Ref_Linear]> {
  let description = [{
    Sums `input` over `dims` (sorted, distinct); the result has those dimensions
    removed. Bias gradients are `reduce_sum` of the output gradient over the batch.

    ```mlir
    %db = ref.reduce_sum %dy dims [0] : tensor<2x8xf32>
    ```
  }];
}

def Ref_MseLossOp : Ref_Op<"mse_loss", [Ref_OwnLayoutFactors, AllTypesMatch<["prediction", "target"]>, Ref_NonlinearOpInterface]> {
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

def Ref_MseLossGradOp : Ref_Op<"mse_loss_grad", [Ref_OwnLayoutFactors, AllTypesMatch<["prediction", "target", "result"]>]> {
  let summary = "gradient of ref.mse_loss with respect to the prediction";
  let description = [{
    `result[i] = (2/N) * (prediction[i] - target[i])`, the gradient of `ref.mse_loss`
    for an upstream gradient of 1.
  }];
  let arguments = (ins PP_F32RankedTensor:$prediction, PP_F32RankedTensor:$target);
  let results = (outs PP_F32RankedTensor:$result);
  let assemblyFormat = "$prediction `,` $target attr-dict `:` type($prediction)";
}

def Ref_SgdUpdateOp : Ref_Op<"sgd_update", [AllTypesMatch<["param", "grad", "result"]>, Ref_Linear, Elementwise]> {
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


def Ref_DropoutMaskOp : Ref_ExplicitTypeOp<"dropout_mask"> {
  let summary = "a dropout mask drawn from a counter-based random stream";
  let description = [{
    `result[i] = dropmask(key, counter + i, p)` for the row-major linear index `i`:
    `1 / (1 - p)` with probability `1 - p` and `0` otherwise, drawn like a
    counter-based generator (Philox) from the pair `(key, counter + i)`. The random
    state is explicit: `key` and `counter` are `index` values (function arguments of
    the step, or arithmetic on them and on `dist.axis_index` in plans), so which pair
    each element draws is part of the program and can be checked. A dropout is
    `ref.mul %x, %mask`; its gradient is the same product.

    ```mlir
    %mask = ref.dropout_mask %seed, %offset p 0.1 : tensor<4x8xf32>
    ```
  }];
  let arguments = (ins Index:$key, Index:$counter, F64Attr:$p);
  let results = (outs PP_F32RankedTensor:$result);
  let assemblyFormat = "$key `,` $counter `p` $p attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Ref_TopkMaskOp : Ref_Op<"topk_mask", [Ref_NonlinearOpInterface, Ref_RowWise]> {
  let summary = "the 0/1 mask of each row's k largest entries (a router's expert choice)";
  let description = [{
    `result[.., e] = 1` when `input[.., e]` is among the `k` largest entries of its row
    (ties go to the lower index), else `0`. Routing decisions stay symbolic: the
    element engine treats each element as the function `topk(row, e, k)` of the row's
    values (equal rows choose equally), which the solver encodes exactly; its
    derivative is zero (a router learns through its gates).

    ```mlir
    %chosen = ref.topk_mask %logits k 2 : tensor<8x4xf32>
    ```
  }];
  let arguments = (ins PP_F32RankedTensor:$input, I64Attr:$k);
  let results = (outs PP_F32RankedTensor:$result);
  let assemblyFormat = "$input `k` $k attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def Ref_CapacityDispatchOp : Ref_Op<"capacity_dispatch", [Ref_OwnLayoutFactors, Ref_NonlinearOpInterface]> {
  let summary = "token-to-(expert, slot) dispatch mask under an expert capacity";
  let description = [{
    For a 0/1 routing mask `[T, E]`, the dispatch mask `[T, E, G * C]` of a capacity
    of `C` tokens per expert in each of `G` groups of `T / G` consecutive tokens
    (GShard's groups; a data rank's tokens): token `t` of group `g` routed to expert
    `e` takes slot `g * C + p`, where `p` is the number of earlier tokens of its group
    routed to `e`, and is dropped when `p >= C`. `result[t, e, s] = 1` for its slot,
    else `0`. Dispatching is `matmul` of the mask with the tokens; combining is `matmul`
    of the gate-weighted mask with the experts' outputs.

    Leading dimensions are batch dimensions: a mask `[N..., T, E]` gives
    `[N..., T, E, G * C]`, each batch index dispatched on its own. With a leading
    dimension of groups (`[G, T / G, E]`, `groups 1`) the mask holds each group's slots
    only (`[G, T / G, E, C]`, GShard's grouped einsums) instead of every group's.

    ```mlir
    %dispatch = ref.capacity_dispatch %chosen capacity 3 groups 2 : tensor<8x4xf32>
    %grouped = ref.capacity_dispatch %chosen_g capacity 3 groups 1 : tensor<2x4x4xf32>
    ```
  }];
  let arguments = (ins PP_F32RankedTensor:$input, I64Attr:$capacity, I64Attr:$groups);
  let results = (outs PP_F32RankedTensor:$result);
  let assemblyFormat = "$input `capacity` $capacity `groups` $groups attr-dict `:` type($input)";
}

def Ref_PowerOp : Ref_ExplicitTypeOp<"power"> {
  let summary = "a constant base raised to an integer step count";
  let description = [{
    `result = base ^ exponent` for an `index` exponent (a step counter), as a scalar
    tensor: Adam's bias corrections `1 - beta ^ t`. The symbolic engine treats the
    power as an uninterpreted function of `(base, exponent)`.

    ```mlir
    %b1t = ref.power %step base 0.9 : tensor<f32>
    ```
  }];
  let arguments = (ins Index:$exponent, F64Attr:$base);
  let results = (outs PP_F32RankedTensor:$result);
  let assemblyFormat = "$exponent `base` $base attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Ref_ConstantOp : Ref_ExplicitTypeOp<"constant"> {
  let summary = "a tensor filled with one constant";
  let description = [{
    Every element is `value` (read as an exact fraction). Ones for a weight-free
    normalization, zeros to start an accumulation.

    ```mlir
    %ones = ref.constant 1.0 : tensor<4xf32>
    ```
  }];
  let arguments = (ins F64Attr:$value);
  let results = (outs PP_F32RankedTensor:$result);
  let assemblyFormat = "$value attr-dict `:` type($result)";
}

def Ref_LiteralOp : Ref_ExplicitTypeOp<"literal"> {
  let summary = "a tensor written out element by element";
  let description = [{
    The elements of the result in row-major order, each read as the exact rational it
    denotes (like every constant, docs/semantics.md). For the plan's own data that is
    not one value: 0/1 masks (which parameters get weight decay, which positions are
    padding), small tables.

    ```mlir
    %decay = ref.literal [1.0, 1.0, 0.0, 0.0] : tensor<2x2xf32>
    ```
  }];
  let arguments = (ins DenseF64ArrayAttr:$values);
  let results = (outs PP_F32RankedTensor:$result);
  let assemblyFormat = "$values attr-dict `:` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Non-polynomial elementwise functions
//===----------------------------------------------------------------------===//

// An elementwise function op: `fn` names its entry in ScalarFunctions.def, which
// defines the function once (value, enclosure, domain, sign, solver treatment).
class Ref_FnOp<string mnemonic, string fn>
    : Ref_UnaryOp<mnemonic, [Ref_NonlinearOpInterface, Ref_ScalarFunctionOpInterface, Elementwise]> {
  let summary = "elementwise " # mnemonic;
  let description = [{
    `result[i] = }] # mnemonic # [{(input[i])`. The symbolic engine treats the function
    as uninterpreted (congruence only, plus the identities listed in docs/semantics.md);
    the numeric engines use its definition.
  }];
  let extraClassDeclaration = [{
    static ::planproof::ref::ScalarFunction getFunction() {
      return ::planproof::ref::ScalarFunction::}] # fn # [{;
    }
  }];
}

def Ref_ExpOp : Ref_FnOp<"exp", "Exp">;
def Ref_LogOp : Ref_FnOp<"log", "Log">;
def Ref_RsqrtOp : Ref_FnOp<"rsqrt", "Rsqrt">;
def Ref_RecipOp : Ref_FnOp<"recip", "Recip">;
def Ref_SiluOp : Ref_FnOp<"silu", "Silu">;
def Ref_SqrtOp : Ref_FnOp<"sqrt", "Sqrt">;
def Ref_TanhOp : Ref_FnOp<"tanh", "Tanh">;
/// `logistic(x) = 1 / (1 + exp(-x))`, the sigmoid (XLA's `logistic`, PyTorch's `sigmoid`).
def Ref_LogisticOp : Ref_FnOp<"logistic", "Logistic">;
/// `step(x) = 1` when `x > 0`, else 0 (Heaviside): the mask of ReLU's backward
/// (`threshold_backward`) and of comparisons of data (`x > c` is `step(x - c)`). Its
/// derivative is taken as 0 (everywhere but at 0, where it has none), as PyTorch and
/// JAX do.
def Ref_StepOp : Ref_FnOp<"step", "Step">;
/// `erf(x) = 2/sqrt(pi) * integral from 0 to x of exp(-t^2) dt`, the error function: exact
/// GeLU written out (XLA's `erf`, PyTorch's `aten.erf`).
def Ref_ErfOp : Ref_FnOp<"erf", "Erf">;
/// `sin(x)` and `cos(x)`, x in radians: rotary position tables computed in the step from
/// the positions (XLA's `sine`/`cosine`, PyTorch's `aten.sin`/`aten.cos`).
def Ref_SinOp : Ref_FnOp<"sin", "Sin">;
def Ref_CosOp : Ref_FnOp<"cos", "Cos">;

def Ref_SiluGradOp : Ref_Op<"silu_grad", [SameOperandsAndResultType, Ref_NonlinearOpInterface, Elementwise]> {
  let extraClassDeclaration = [{
    static unsigned getNonlinearOperands() { return 0b01; }
  }];
  let summary = "backward of SiLU";
  let description = [{ `result[i] = silu'(input[i]) * grad[i]`, `silu'` uninterpreted. }];
  let arguments = (ins PP_F32RankedTensor:$input, PP_F32RankedTensor:$grad);
  let results = (outs PP_F32RankedTensor:$result);
  let assemblyFormat = "$input `,` $grad attr-dict `:` type($result)";
}

def Ref_DivOp : Ref_ElementwiseBinaryOp<"div", "quotient", [Ref_NonlinearOpInterface]> {
  let extraClassDeclaration = [{
    static unsigned getNonlinearOperands() { return 0b10; }
  }];
  let description = [{ `result[i] = lhs[i] * recip(rhs[i])`. }];
}

def Ref_MaximumOp : Ref_ElementwiseBinaryOp<"maximum", "maximum", [Ref_NonlinearOpInterface]> {
  let description = [{ `result[i] = max(lhs[i], rhs[i])`, decided exactly by Z3. }];
}

def Ref_MinimumOp : Ref_ElementwiseBinaryOp<"minimum", "minimum", [Ref_NonlinearOpInterface]> {
  let description = [{
    `result[i] = min(lhs[i], rhs[i])` (as `-max(-lhs, -rhs)`), decided exactly by Z3.
    Gradient clipping's coefficient is `minimum(1, max_norm / (norm + eps))`.
  }];
}

//===----------------------------------------------------------------------===//
// Layout-changing ops
//===----------------------------------------------------------------------===//

def Ref_TransposeOp : Ref_Op<"transpose", [Ref_OwnLayoutFactors, Ref_Linear]> {
  let summary = "permutes dimensions";
  let description = [{
    Result dimension `k` is input dimension `perm[k]`: the element at result index
    `(j_0, ..., j_n-1)` is the input element whose index has `j_k` at position `perm[k]`.

    ```mlir
    %t = ref.transpose %x perm [1, 0] : tensor<2x4xf32>
    ```
  }];
  let arguments = (ins PP_F32RankedTensor:$input, DenseI64ArrayAttr:$perm);
  let results = (outs PP_F32RankedTensor:$result);
  let assemblyFormat = "$input `perm` $perm attr-dict `:` type($input)";
}

def Ref_ReshapeOp : Ref_ExplicitTypeOp<"reshape", [Ref_Linear]> {
  let summary = "reinterprets the row-major elements under a new shape";
  let description = [{
    Same elements in the same row-major order, new shape (same number of elements).
    Splitting the hidden dimension into heads is a reshape.

    ```mlir
    %h = ref.reshape %x : tensor<2x8xf32> -> tensor<2x2x4xf32>
    ```
  }];
  let arguments = (ins PP_F32RankedTensor:$input);
  let results = (outs PP_F32RankedTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Ref_BroadcastOp : Ref_ExplicitTypeOp<"broadcast", [Ref_Linear]> {
  let summary = "broadcasts into a larger shape";
  let description = [{
    Operand dimension `k` becomes result dimension `dims[k]` (same size); the other
    result dimensions repeat the operand.

    ```mlir
    %b = ref.broadcast %v dims [1] : tensor<4xf32> -> tensor<2x4xf32>
    ```
  }];
  let arguments = (ins PP_F32RankedTensor:$input, DenseI64ArrayAttr:$dims);
  let results = (outs PP_F32RankedTensor:$result);
  let assemblyFormat = "$input `dims` $dims attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Ref_SliceOp : Ref_Op<"slice", [Ref_Linear]> {
  let summary = "a static slice";
  let description = [{
    `result[i] = input[offsets + i]` for `i` in `sizes` (stride 1). The input is f32, or
    a vector of token ids (i64): a microbatch's ids are a slice of a rank's (gradient
    accumulation over token inputs); the result has the input's element type.

    ```mlir
    %s = ref.slice %x offsets [0, 2] sizes [2, 2] : tensor<2x4xf32>
    %mb_ids = ref.slice %ids offsets [4] sizes [4] : tensor<8xi64>
    ```
  }];
  let arguments = (ins PP_F32OrIdsTensor:$input, DenseI64ArrayAttr:$offsets,
                       DenseI64ArrayAttr:$sizes);
  let results = (outs PP_F32OrIdsTensor:$result);
  let assemblyFormat = "$input `offsets` $offsets `sizes` $sizes attr-dict `:` type($input)";
}

def Ref_ConcatOp : Ref_Op<"concat", [Ref_Linear]> {
  let summary = "concatenates along a dimension";
  let description = [{
    The operands are f32, or all vectors of token ids (i64): a rank's ids put back
    together from runs moved separately (XLA exchanges a view of a rank's microbatches
    one leading index at a time); the result has the operands' element type.

    ```mlir
    %c = ref.concat %a, %b dim 1 : tensor<2x2xf32>, tensor<2x2xf32>
    ```
  }];
  let arguments = (ins Variadic<PP_F32OrIdsTensor>:$inputs, I64Attr:$dim);
  let results = (outs PP_F32OrIdsTensor:$result);
  let assemblyFormat = "$inputs `dim` $dim attr-dict `:` type($inputs)";
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//


def Ref_ReduceMaxOp : Ref_ReduceOp<"reduce_max", "maximum", [Ref_OwnLayoutFactors, Ref_NonlinearOpInterface]> {
  let description = [{ The maximum over `dims` (sorted, distinct), which are removed. }];
}

def Ref_ReduceMeanOp : Ref_ReduceOp<"reduce_mean", "mean", [Ref_OwnLayoutFactors, Ref_Linear]> {
  let description = [{ The mean over `dims` (sorted, distinct), which are removed. }];
}

//===----------------------------------------------------------------------===//
// Composite ops of transformer blocks
//===----------------------------------------------------------------------===//

def Ref_BatchMatmulOp : Ref_Op<"batch_matmul", [Ref_OwnLayoutFactors, Ref_Multilinear]> {
  let summary = "matmul batched over a leading dimension";
  let description = [{
    For 3-D operands with the same leading (batch) dimension, a `ref.matmul` per batch
    entry, contracting `lhs_dim` of the lhs with `rhs_dim` of the rhs (1 or 2). Attention
    scores (`Q K^T`) and the weighted sum (`P V`) per head.

    ```mlir
    %s = ref.batch_matmul %q, %k contract(2, 2) : tensor<2x4x8xf32>, tensor<2x4x8xf32>
    ```
  }];
  let arguments = (ins PP_F32RankedTensor:$lhs, PP_F32RankedTensor:$rhs, I64Attr:$lhs_dim,
                       I64Attr:$rhs_dim);
  let results = (outs PP_F32RankedTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs `contract` `(` $lhs_dim `,` $rhs_dim `)` attr-dict `:` type($lhs) `,` type($rhs)
  }];
}

def Ref_SoftmaxOp : Ref_UnaryOp<"softmax", [Ref_NonlinearOpInterface, Ref_RowWise]> {
  let summary = "softmax over the last dimension, max-shifted";
  let description = [{
    `result[.., j] = exp(x[.., j] - m) / sum_k exp(x[.., k] - m)` with `m` the maximum of
    the row, as every stable implementation computes it.
  }];
}

def Ref_CausalSoftmaxOp : Ref_Op<"causal_softmax", [Ref_OwnLayoutFactors, Ref_NonlinearOpInterface]> {
  let hasVerifier = 1;
  let summary = "softmax over the last dimension with a causal mask";
  let description = [{
    For scores `[..., Sq, Sk]`, row `i` attends to columns `j <= offset + i` only (the
    others get probability exactly 0), max-shifted over the allowed columns. `offset`
    (an `index`) is the position of the first query among the keys; without it the
    queries are the last `Sq` keys (`offset = Sk - Sq`). A context-parallel plan whose
    rank holds a chunk of the queries and all keys passes the chunk's *global* start
    (computed from `dist.axis_index`). A row with no allowed column is all zeros.

    ```mlir
    %p = ref.causal_softmax %scores : tensor<2x4x4xf32>
    %p_chunk = ref.causal_softmax %scores_chunk offset %start : tensor<2x2x8xf32>
    ```
  }];
  let arguments = (ins PP_F32RankedTensor:$input, Optional<Index>:$offset);
  let results = (outs PP_F32RankedTensor:$result);
  let assemblyFormat = "$input (`offset` $offset^)? attr-dict `:` type($input)";
}

def Ref_PositionMaskOp : Ref_ExplicitTypeOp<"position_mask", [Ref_NonlinearOpInterface]> {
  let hasVerifier = 1;
  let summary = "the 0/1 attention mask of query and key positions (causal, sliding window)";
  let description = [{
    For a result `[Sq, Sk]`, query `i` sits at position `qp = q_offset + i` and key `j`
    at `kp = k_offset + j`; element `[i, j]` is 1 when the key is visible and 0
    otherwise. With `causal`, visible means `kp <= qp`; with `window W > 0`, also
    `qp - kp < W` (and, without `causal`, `kp - qp < W`): a sliding window. The offsets
    are `index` values -- global positions, so a context-parallel rank holding a chunk of
    the queries passes its chunk's start (from `dist.axis_index`). Multiply with a
    `ref.document_mask` for packed documents, and apply with `ref.masked_softmax`.

    ```mlir
    %m = ref.position_mask %q0, %k0 causal window 4 : tensor<8x8xf32>
    ```
  }];
  let arguments = (ins Index:$q_offset, Index:$k_offset, UnitAttr:$causal,
                       DefaultValuedAttr<I64Attr, "0">:$window);
  let results = (outs PP_F32RankedTensor:$result);
  let assemblyFormat = "$q_offset `,` $k_offset (`causal` $causal^)? (`window` $window^)? attr-dict `:` type($result)";
}

def Ref_DocumentMaskOp : Ref_Op<"document_mask", [Ref_OwnLayoutFactors, Ref_NonlinearOpInterface]> {
  let summary = "the 0/1 mask of queries and keys in the same document";
  let description = [{
    `result[i, j] = [q_doc[i] == k_doc[j]]` for document ids `q_doc [Sq]` and
    `k_doc [Sk]` (ids are data: typically an input with `ref.bound`): packed sequences
    attend within their own document only.

    ```mlir
    %d = ref.document_mask %doc, %doc : tensor<8xf32>, tensor<8xf32>
    ```
  }];
  let arguments = (ins PP_F32RankedTensor:$q_doc, PP_F32RankedTensor:$k_doc);
  let results = (outs PP_F32RankedTensor:$result);
  let assemblyFormat = "$q_doc `,` $k_doc attr-dict `:` type($q_doc) `,` type($k_doc)";
}

def Ref_MaskedSoftmaxOp : Ref_Op<"masked_softmax", [Ref_OwnLayoutFactors, Ref_NonlinearOpInterface]> {
  let summary = "softmax over the last dimension, restricted by a mask";
  let description = [{
    `result[.., j] = mask[.., j] exp(x[.., j] - m) / sum_k mask[.., k] exp(x[.., k] - m)`
    for a mask of the input's shape (the last two dimensions of a mask may also be the
    whole mask, broadcast over the leading ones), with `m` the row maximum over the
    columns whose mask is not known to be 0 (the value does not depend on `m`). With a
    0/1 mask it is the softmax over the visible columns; a row whose mask is known to be
    all zeros is zeros.

    ```mlir
    %p = ref.masked_softmax %scores, %mask : tensor<2x8x8xf32>, tensor<8x8xf32>
    ```
  }];
  let arguments = (ins PP_F32RankedTensor:$input, PP_F32RankedTensor:$mask);
  let results = (outs PP_F32RankedTensor:$result);
  let assemblyFormat = "$input `,` $mask attr-dict `:` type($input) `,` type($mask)";
}

def Ref_RmsNormOp : Ref_Op<"rms_norm", [Ref_NonlinearOpInterface, Ref_RowWise]> {
  let summary = "RMSNorm over the last dimension";
  let description = [{
    `result[.., j] = x[.., j] * rsqrt(mean_k x[.., k]^2 + eps) * weight[j]`.
  }];
  let arguments = (ins PP_F32RankedTensor:$input, PP_F32RankedTensor:$weight, F64Attr:$eps);
  let results = (outs PP_F32RankedTensor:$result);
  let assemblyFormat = "$input `,` $weight `eps` $eps attr-dict `:` type($input) `,` type($weight)";
}

def Ref_LayerNormOp : Ref_Op<"layer_norm", [Ref_NonlinearOpInterface, Ref_RowWise]> {
  let summary = "LayerNorm over the last dimension";
  let description = [{
    `result[.., j] = (x[.., j] - mu) * rsqrt(var + eps) * weight[j] + bias[j]`, with the
    mean `mu` and the (biased) variance `var` of the row.
  }];
  let arguments = (ins PP_F32RankedTensor:$input, PP_F32RankedTensor:$weight,
                       PP_F32RankedTensor:$bias, F64Attr:$eps);
  let results = (outs PP_F32RankedTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight `,` $bias `eps` $eps attr-dict `:` type($input) `,` type($weight) `,` type($bias)
  }];
}

def Ref_RotaryOp : Ref_Op<"rotary", [Ref_OwnLayoutFactors, AllTypesMatch<["cos", "sin"]>, Ref_NonlinearOpInterface]> {
  // Linear in the input with the tables fixed (x cos + rotate_half(x) sin), not in the
  // tables (the two terms).
  let extraClassDeclaration = [{
    static unsigned getNonlinearOperands() { return ~1u; }
  }];
  let summary = "rotary position embedding (rotate-half form)";
  let description = [{
    For `x[..., S, D]` (D even) and tables `cos`, `sin` of shape `[S, D]`:
    `result = x * cos + rotate_half(x) * sin`, with
    `rotate_half(x)[.., d] = -x[.., d + D/2]` for `d < D/2` and `x[.., d - D/2]` otherwise.
    The tables are inputs, so positions are whatever the caller's tables say.
  }];
  let arguments = (ins PP_F32RankedTensor:$input, PP_F32RankedTensor:$cos,
                       PP_F32RankedTensor:$sin);
  let results = (outs PP_F32RankedTensor:$result);
  let assemblyFormat = "$input `,` $cos `,` $sin attr-dict `:` type($input) `,` type($cos)";
}

def Ref_CrossEntropyOp : Ref_Op<"cross_entropy", [AllTypesMatch<["logits", "labels"]>, Ref_NonlinearOpInterface]> {
  let summary = "token-mean cross-entropy with one-hot labels and an ignore mask";
  let description = [{
    For logits `[T, V]`, one-hot labels `[T, V]` and a 0/1 mask `[T]` (0 for ignored
    tokens, e.g. padding or the ignore index):

        loss = sum_t mask[t] * (lse(logits[t]) - sum_v labels[t, v] * logits[t, v])
               / sum_t mask[t]

    with `lse(x) = m + log(sum_v exp(x_v - m))`, `m = max_v x_v`. Labels and mask are
    symbolic inputs, so proofs hold for every labelling and every ignore pattern.
  }];
  let arguments = (ins PP_F32RankedTensor:$logits, PP_F32RankedTensor:$labels,
                       PP_F32RankedTensor:$mask);
  let results = (outs PP_F32RankedTensor:$result);
  let assemblyFormat = "$logits `,` $labels `,` $mask attr-dict `:` type($logits) `,` type($mask)";
}

def Ref_CrossEntropySumOp : Ref_Op<"cross_entropy_sum", [Ref_OwnLayoutFactors, AllTypesMatch<["logits", "labels"]>, Ref_NonlinearOpInterface]> {
  let summary = "summed cross-entropy over the non-ignored tokens (no normalization)";
  let description = [{
    `loss = sum_t mask[t] * (lse(logits[t]) - sum_v labels[t, v] * logits[t, v])`: the
    numerator of `ref.cross_entropy` (PyTorch's `reduction="sum"`). Plans with gradient
    accumulation sum it per microbatch and divide once by the global token count.
  }];
  let arguments = (ins PP_F32RankedTensor:$logits, PP_F32RankedTensor:$labels,
                       PP_F32RankedTensor:$mask);
  let results = (outs PP_F32RankedTensor:$result);
  let assemblyFormat = "$logits `,` $labels `,` $mask attr-dict `:` type($logits) `,` type($mask)";
}

// Ops on integer token ids (embedding, one_hot, embedding_grad).
include "Ref/RefTokenOps.td"

//===----------------------------------------------------------------------===//
// Automatic differentiation
//===----------------------------------------------------------------------===//

def Ref_GradOp : Op<Ref_Dialect, "grad", [Pure, DeclareOpInterfaceMethods<OpAsmOpInterface, ["getAsmResultNames"]>]> {
  // Several results: not an op of the JSON format, which writes a backward pass out.
  bit inJsonFormat = 0;
  let summary = "gradients of a scalar loss, derived automatically";
  let description = [{
    The gradients of the 0-D `loss` with respect to each value in `wrt` (inputs or
    intermediates computed before this op), one result per `wrt` value, of the same
    type. A reference written with `ref.grad` gives only its forward pass and loss;
    planproof derives the single-device backward pass (`planproof-opt
    --ref-expand-grad` shows it) by reverse-mode differentiation over the ref ops, and
    checks the plan's own backward pass against it. Ops without a derivative rule make
    the spec *inconclusive*.

    ```mlir
    %dw1, %db1 = ref.grad %loss wrt %w1, %b1
        : tensor<f32>, tensor<4x4xf32>, tensor<4xf32> -> tensor<4x4xf32>, tensor<4xf32>
    ```

    When printed, a `ref.grad` whose location is fused with a list of names as its
    metadata (as `planproof plan` builds it) gives each result its name.
  }];
  let arguments = (ins PP_F32RankedTensor:$loss, Variadic<PP_F32RankedTensor>:$wrt);
  let results = (outs Variadic<PP_F32RankedTensor>:$grads);
  let assemblyFormat = "$loss `wrt` $wrt attr-dict `:` type($loss) `,` type($wrt) `->` type($grads)";
  let hasVerifier = 1;
  let builders = [OpBuilder<(ins "::mlir::Value":$loss, "::mlir::ValueRange":$wrt), [{
    $_state.addOperands(loss);
    $_state.addOperands(wrt);
    $_state.addTypes(wrt.getTypes());
  }]>];
}

#endif // PLANPROOF_REF_OPS
