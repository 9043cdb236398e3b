//===- DistOps.td - the distribution (parallel plan) dialect -*- tablegen -*-===//
//
// The `dist` dialect: meshes, layouts, and the collectives of SPMD parallel plans.
// A plan is one `func.func` for all ranks (SPMD), parametric in the rank's mesh
// coordinates; its arguments and results say which reference value they hold and how
// it is laid out over the mesh.
//
//===----------------------------------------------------------------------===//

#ifndef PLANPROOF_DIST_OPS
#define PLANPROOF_DIST_OPS

include "mlir/IR/OpBase.td"
include "mlir/IR/CommonTypeConstraints.td"

def PP_F32RankedTensor : RankedTensorOf<[F32]>;
// f32 values, or a vector of token ids (all_gather and all_to_all, which only move
// elements, take both).
def PP_F32OrIdsTensorD : AnyTypeOf<[RankedTensorOf<[F32]>, 1DTensorOf<[I64]>],
                                   "f32 ranked tensor or 1-D tensor of i64 token ids">;
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/BuiltinAttributes.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Dist_Dialect : Dialect {
  let name = "dist";
  let cppNamespace = "::planproof::dist";
  let summary = "Parallel plans: meshes, layouts, SPMD programs and collectives";
  let description = [{
    A parallel plan runs a training step on a *mesh* of devices with named axes
    (`dp`, `tp`, ...). It is written as a single `func.func` executed by every rank
    (SPMD), with the attribute `dist.mesh = @mesh` naming its mesh. Each argument and
    result carries

    * `dist.value = "name"`: the reference value (a `ref.name` of the reference program)
      whose piece this rank holds, and
    * `dist.layout = #dist.layout<...>`: how that value is laid out over the mesh.

    The argument and result *types* are the rank-local (shard) types. The verifier
    checks that, for every input, gathering each plan output through its layout gives
    the reference value it claims to be.

    Rank-local computation uses the `ref` ops; communication uses the collectives of
    this dialect. Every collective names the mesh axes it runs over; the ranks that
    take part are those whose coordinates agree on all other axes.
  }];
  let useDefaultAttributePrinterParser = 1;
  let hasRegionArgAttrVerify = 1;
  let hasRegionResultAttrVerify = 1;
  let hasOperationAttrVerify = 1;
}

//===----------------------------------------------------------------------===//
// Layout attribute
//===----------------------------------------------------------------------===//

def Dist_LayoutAttr : AttrDef<Dist_Dialect, "Layout"> {
  let mnemonic = "layout";
  let summary = "how a global tensor is laid out over the mesh";
  let description = [{
    For each tensor dimension, the mesh axes that split it (major to minor), then the
    mesh axes over which the local values are *partial* and still to be reduced, by
    kind (`sum`, `avg`, `max`). Mesh axes named nowhere hold replicas.

    ```mlir
    #dist.layout<[_, tp]>                 // dim 1 split over tp, replicated over the rest
    #dist.layout<[(dp, tp), _]>           // dim 0 split over dp then tp (dp major)
    #dist.layout<[_, _], sum = [tp]>      // every rank of a tp group holds a partial sum
    #dist.layout<[], avg = [dp]>          // a scalar to be averaged over dp
    #dist.layout<[_, tp in 3]>            // dim 1 is 3 equal segments, each split over tp
    #dist.layout<[cp zigzag, _]>          // dim 0 in 2*|cp| chunks; rank i holds i, 2*|cp|-1-i
    ```

    `in k` makes a split *interleaved*: the dimension is viewed as `k` equal segments
    (say the Q, K and V columns of a fused QKV weight) and each segment is split over
    the axes, so every rank holds its block of every segment, in segment order.

    A rank at coordinate `c` of the axes `(a1, ..., an)` splitting a dimension of size
    `D` holds the block `[s * D', (s + 1) * D')` where `D' = D / (|a1| * ... * |an|)`
    and `s` is the row-major index of `c` over those axes. With `in k`, it holds that
    block of each of the `k` segments of size `D / k`, concatenated in segment order.

    `zigzag` is the load-balanced split of causal context parallelism: the dimension
    is viewed as `2n` equal chunks over the `n` ranks of the axes, and the rank at
    position `s` holds chunk `s` followed by chunk `2n - 1 - s`, so every rank gets
    the same share of a causal attention's work. (Stored as segment count -2.)
  }];
  let parameters = (ins
    "::mlir::ArrayAttr":$dims,  // per dim: ArrayAttr of StringAttr (axis names)
    "::mlir::ArrayAttr":$sum,   // StringAttr axis names
    "::mlir::ArrayAttr":$avg,
    "::mlir::ArrayAttr":$max,
    "::mlir::DenseI64ArrayAttr":$segments  // per dim: interleaved segments (empty: all 1)
  );
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
}

//===----------------------------------------------------------------------===//
// Ops
//===----------------------------------------------------------------------===//

class Dist_Op<string mnemonic, list<Trait> traits = []>
    : Op<Dist_Dialect, mnemonic, traits> {
  // Whether the JSON interchange format has this op (docs/json-format.md): its
  // attribute table and the schema's op list are generated from the ops that do
  // (tools/planproof-tblgen). The mesh and rank coordinates have JSON forms of their
  // own; checkpoint and pipeline ops are MLIR only (docs/checkpoint.md, docs/pipeline.md).
  bit inJsonFormat = 1;
}

def Dist_CollectiveOpInterface : OpInterface<"CollectiveOp"> {
  let cppNamespace = "::planproof::dist";
  let description = [{
    An op whose result on a rank depends on its position in the groups of mesh `axes`:
    the collectives, and the local `shard_slice` / `shard_pad` that keep or place this
    rank's block. Every engine evaluates them with all ranks' operands at once
    (lib/Semantics/OpSemantics.h, evalCollective).
  }];
  let methods = [
    InterfaceMethod<"The mesh axes whose groups the op runs over.", "::mlir::ArrayAttr",
                    "getAxesAttr">,
    StaticInterfaceMethod<"Whether the op exchanges data between ranks (false for the "
                          "local shard_slice and shard_pad).", "bool", "communicates">,
    InterfaceMethod<"The reduction (sum, avg, max) the op applies over its groups, or "
                    "none.", "::std::optional<::llvm::StringRef>", "getReduction">,
  ];
}



def Dist_MeshOp : Dist_Op<"mesh", [Symbol]> {
  let inJsonFormat = 0;
  let summary = "declares a device mesh with named axes";
  let description = [{
    A mesh of `product(shape)` ranks, with one named axis per entry of `shape`. Ranks
    are numbered row-major over the axes in the order written.

    ```mlir
    dist.mesh @mesh axes = ["dp", "tp"] shape = [2, 4]
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, StrArrayAttr:$axes,
                       DenseI64ArrayAttr:$shape);
  let assemblyFormat = "$sym_name `axes` `=` $axes `shape` `=` $shape attr-dict";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The index of `axis` in this mesh, or -1.
    int64_t axisIndex(::llvm::StringRef axis);
    int64_t numRanks();
  }];
}

def Dist_AxisIndexOp : Dist_Op<"axis_index", [Pure]> {
  let inJsonFormat = 0;
  let summary = "the executing rank's coordinate along a mesh axis";
  let description = [{
    Returns this rank's coordinate along `axis` of the plan's mesh; it is what makes one
    SPMD program behave differently on different ranks.

    ```mlir
    %r = dist.axis_index "tp" : index
    ```
  }];
  let arguments = (ins StrAttr:$axis);
  let results = (outs Index:$result);
  let assemblyFormat = "$axis attr-dict `:` type($result)";
  let hasVerifier = 1;
}

// Collectives: every one names the mesh axes it runs over.
class Dist_CollectiveOp<string mnemonic, bit communicating = 1, bit reducing = 0>
    : Dist_Op<mnemonic, [Pure, Dist_CollectiveOpInterface]> {
  let extraClassDeclaration = [{
    static bool communicates() { return }] # !if(communicating, "true", "false") # [{; }
    ::std::optional<::llvm::StringRef> getReduction() {
      return }] # !if(reducing, "getKind()", "::std::nullopt") # [{;
    }
  }];
  // Result shapes depend on the mesh axis sizes, which live on the mesh, so the result
  // type is written out and checked by the verifier (dist::expectedResultType).
  let results = (outs PP_F32RankedTensor:$result);
  let hasVerifier = 1;
}

def Dist_AllReduceOp : Dist_CollectiveOp<"all_reduce", 1, 1> {
  let summary = "reduces across the ranks of the given mesh axes";
  let description = [{
    Every rank receives the reduction (`sum`, `avg` or `max`) of `input` over the
    ranks that differ from it only along `axes`. Turns a value that is *partial* over
    `axes` (of the same kind) into a complete, replicated one.

    ```mlir
    %y = dist.all_reduce %y_partial over ["tp"] "sum" : tensor<2x4xf32> -> tensor<2x4xf32>
    ```
  }];
  let arguments = (ins PP_F32RankedTensor:$input, StrArrayAttr:$axes, StrAttr:$kind);
  let assemblyFormat = "$input `over` $axes $kind attr-dict `:` type($input) `->` type($result)";
}

def Dist_AllGatherOp : Dist_CollectiveOp<"all_gather"> {
  let summary = "concatenates the shards of the given mesh axes along a dimension";
  let description = [{
    Every rank receives the concatenation along `dim` of `input` from the ranks that
    differ from it only along `axes`, ordered row-major over `axes`. Turns a value
    split along `dim` over `axes` into one replicated over them.

    ```mlir
    %full = dist.all_gather %shard over ["tp"] dim 1 : tensor<2x2xf32> -> tensor<2x4xf32>
    ```

    With `zigzag`, `dim` is viewed as `2n` chunks for the `n` ranks of the group, and the
    rank at position `p` contributes chunks `p` and `2n - 1 - p` (its block of a
    `#dist.layout<[.. zigzag ..]>` value): the result is in global chunk order. The same
    unit attribute on `reduce_scatter` and `shard_slice` keeps those two chunks.

    A vector of token ids (`tensor<Nxi64>`) is gathered alike: every rank receives the
    ids of the whole group (XLA gathers a data-parallel batch's ids before a loop over
    microbatches).
  }];
  let arguments = (ins PP_F32OrIdsTensorD:$input, StrArrayAttr:$axes, I64Attr:$dim, UnitAttr:$zigzag);
  let results = (outs PP_F32OrIdsTensorD:$result);
  let assemblyFormat = "$input `over` $axes `dim` $dim (`zigzag` $zigzag^)? attr-dict `:` type($input) `->` type($result)";
}

def Dist_ReduceScatterOp : Dist_CollectiveOp<"reduce_scatter", 1, 1> {
  let summary = "reduces across mesh axes and keeps this rank's block of a dimension";
  let description = [{
    Reduces `input` (`sum`, `avg` or `max`) over the ranks that differ only along
    `axes`, then keeps the block of dimension `dim` that belongs to this rank (row-major
    over `axes`). The size of `dim` must divide by the number of ranks in the group.
    The data-parallel gradient reduction of ZeRO-2 and Megatron sequence parallelism.

    ```mlir
    %g = dist.reduce_scatter %partial over ["dp"] dim 0 "sum" : tensor<8x4xf32> -> tensor<4x4xf32>
    ```
  }];
  let arguments = (ins PP_F32RankedTensor:$input, StrArrayAttr:$axes, I64Attr:$dim, UnitAttr:$zigzag, StrAttr:$kind);
  let assemblyFormat = "$input `over` $axes `dim` $dim (`zigzag` $zigzag^)? $kind attr-dict `:` type($input) `->` type($result)";
}

def Dist_AllToAllOp : Dist_CollectiveOp<"all_to_all"> {
  let summary = "exchanges blocks: block j of split_dim goes to the j-th rank of the group";
  let description = [{
    Each rank cuts `split_dim` of `input` into `n` blocks (the `n` ranks of `axes`, in
    group order) and sends block `j` to the `j`-th rank; it receives one block from
    every rank and concatenates them along `concat_dim` in group order. The dispatch
    and combine of expert parallelism: tokens' slots for every expert go to the rank
    that holds the expert, and the experts' outputs come back.

    ```mlir
    %to_experts = dist.all_to_all %slots over ["ep"] split_dim 0 concat_dim 1
        : tensor<4x3x8xf32> -> tensor<2x6x8xf32>
    ```

    A vector of token ids (`tensor<Nxi64>`, split_dim = concat_dim = 0) is exchanged
    alike: XLA re-lays a data-parallel batch's ids out as microbatches that every rank
    shares this way.
  }];
  let arguments = (ins PP_F32OrIdsTensorD:$input, StrArrayAttr:$axes, I64Attr:$split_dim,
                       I64Attr:$concat_dim);
  let results = (outs PP_F32OrIdsTensorD:$result);
  let assemblyFormat = [{
    $input `over` $axes `split_dim` $split_dim `concat_dim` $concat_dim attr-dict `:`
    type($input) `->` type($result)
  }];
}

def Dist_ShardSliceOp : Dist_CollectiveOp<"shard_slice", 0> {
  let summary = "keeps this rank's block of a replicated value (no communication)";
  let description = [{
    The local counterpart of `all_gather`: from a value replicated over `axes`, keeps the
    block of dimension `dim` that belongs to this rank (row-major over `axes`). The size
    of `dim` must divide by the number of ranks in the group.

    ```mlir
    %w_local = dist.shard_slice %w over ["tp"] dim 1 : tensor<4x8xf32> -> tensor<4x4xf32>
    ```
  }];
  let arguments = (ins PP_F32RankedTensor:$input, StrArrayAttr:$axes, I64Attr:$dim, UnitAttr:$zigzag);
  let assemblyFormat = "$input `over` $axes `dim` $dim (`zigzag` $zigzag^)? attr-dict `:` type($input) `->` type($result)";
}

def Dist_ShardPadOp : Dist_CollectiveOp<"shard_pad", 0> {
  let summary = "places this rank's block in a zero value of the whole (no communication)";
  let description = [{
    The adjoint of `shard_slice`: the result has the shape of the whole (dimension `dim`
    times the number of ranks in the group of `axes`), holds the operand at the block of
    `dim` that belongs to this rank (row-major over `axes`, or the zigzag chunks) and
    zeros elsewhere. It is what the derived backward pass of a plan (`ref.grad`) gives a
    replicated value that `shard_slice` cut: each rank's share of its gradient, partial
    over `axes` until they are summed.

    ```mlir
    %dw = dist.shard_pad %dw_local over ["tp"] dim 1 : tensor<4x4xf32> -> tensor<4x8xf32>
    ```
  }];
  let arguments = (ins PP_F32RankedTensor:$input, StrArrayAttr:$axes, I64Attr:$dim, UnitAttr:$zigzag);
  let assemblyFormat = "$input `over` $axes `dim` $dim (`zigzag` $zigzag^)? attr-dict `:` type($input) `->` type($result)";
}

def Dist_SelectOnOp : Dist_Op<"select_on", [Pure, AllTypesMatch<["when", "otherwise", "result"]>]> {
  let summary = "one value on the ranks at given mesh coordinates, another elsewhere";
  let description = [{
    On the ranks whose coordinates equal `on` (a dictionary from mesh axes to
    coordinates), `when`; on every other rank, `otherwise`. What a plan computes only on
    some ranks: a bias added on tensor-parallel rank 0 before a sum all-reduce, a loss
    kept on the last pipeline stage, a term counted once per data-parallel group.

    ```mlir
    %zero = ref.constant 0.0 : tensor<4xf32>
    %b_once = dist.select_on %b, %zero on {tp = 0 : i64} : tensor<4xf32>
    ```
  }];
  let arguments = (ins AnyType:$when, AnyType:$otherwise, DictionaryAttr:$on);
  let results = (outs AnyType:$result);
  let assemblyFormat = "$when `,` $otherwise `on` $on attr-dict `:` type($result)";
  let hasVerifier = 1;
}


//===----------------------------------------------------------------------===//
// Checkpoints
//===----------------------------------------------------------------------===//

def Dist_CheckpointOpInterface : OpInterface<"CheckpointOp"> {
  let cppNamespace = "::planproof::dist";
  let description = [{
    A checkpoint op: a piece of entry `key` (global shape `shape`) at the global
    `offsets`, written by the saving plan (`dist.save`) or read by the resuming one
    (`dist.load`). Every engine gives these ops the checkpoint semantics of
    docs/checkpoint.md.
  }];
  let methods = [
    InterfaceMethod<"The checkpoint entry.", "::llvm::StringRef", "getKey">,
    InterfaceMethod<"The entry's global shape.", "::llvm::ArrayRef<int64_t>", "getShape">,
    InterfaceMethod<"Where this piece starts, one index per dimension.",
                    "::mlir::OperandRange", "getOffsets">,
    StaticInterfaceMethod<"Whether the op writes the checkpoint (else it reads it).",
                          "bool", "saves">,
  ];
}

def Dist_SaveOp : Dist_Op<"save", [Dist_CheckpointOpInterface]> {
  let inJsonFormat = 0;
  let summary = "writes this rank's piece of a checkpoint entry at its global offsets";
  let description = [{
    Like `torch.distributed.checkpoint`: the entry `key` of the checkpoint has the
    global shape `shape`; this rank writes its local `value` at the global `offsets`
    (one `index` per dimension, usually computed from `dist.axis_index`). Elements past
    the end of the global shape are padding and are not written. An `index` value (a
    step count, a random counter, a data position) is saved with shape `[]`, or as one
    element of a per-rank entry (`shape [2] at [%dp_rank]`). With `on = {dp = 0}` only
    the ranks with those mesh coordinates save. The saving plan's checkpoint is read by
    the resuming plan's `dist.load` (docs/checkpoint.md).

    ```mlir
    dist.save %m_shard as "m" shape [25] at [%off] : tensor<13xf32>
    dist.save %t as "t" shape [] at [] : index
    ```
  }];
  let arguments = (ins AnyType:$value, StrAttr:$key, DenseI64ArrayAttr:$shape,
                       Variadic<Index>:$offsets, OptionalAttr<DictionaryAttr>:$on);
  let assemblyFormat = [{
    $value `as` $key `shape` $shape `at` ` ` `[` $offsets `]` attr-dict `:` type($value)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    static bool saves() { return true; }
  }];
}

def Dist_LoadOp : Dist_Op<"load", [Dist_CheckpointOpInterface]> {
  let inJsonFormat = 0;
  let summary = "reads this rank's piece of a checkpoint entry from its global offsets";
  let description = [{
    The counterpart of `dist.save` in the resuming plan: reads the elements of entry
    `key` (global shape `shape`) at `offsets`, in the shape of the result. Reading an
    element nobody saved is a checkpoint violation.

    ```mlir
    %m = dist.load "m" shape [25] at [%zero] : tensor<25xf32>
    %t = dist.load "t" shape [] at [] : index
    ```
  }];
  let arguments = (ins StrAttr:$key, DenseI64ArrayAttr:$shape, Variadic<Index>:$offsets);
  let results = (outs AnyType:$result);
  let assemblyFormat = [{
    $key `shape` $shape `at` ` ` `[` $offsets `]` attr-dict `:` type($result)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    static bool saves() { return false; }
  }];
}

//===----------------------------------------------------------------------===//
// Pipeline parallelism: stages, point-to-point messages
//===----------------------------------------------------------------------===//

def Dist_SendOp : Dist_Op<"send"> {
  let inJsonFormat = 0;
  let summary = "sends a value from one pipeline stage to another (blocking)";
  let description = [{
    In a pipelined plan (function attribute `dist.pipeline = "pp"` naming the mesh
    axis of the stages), every rank of stage `from` sends `value` to the rank of stage
    `to` with the same coordinates on the other axes. The message is identified by
    `tag` (a microbatch's activation, a gradient): it matches the `dist.recv` with the
    same stages and tag (the n-th send with the n-th recv). Sends and receives are
    blocking (rendezvous): a stage waits at a send until the receiving stage reaches
    the matching recv, and at a recv until the sending stage reaches the send. Each
    stage executes its own ops (`dist.stage = k`, and its sends and receives) in the
    order written: the schedule (docs/pipeline.md). Consecutive sends and receives of
    a stage with the same `batch` number are posted together and complete together
    (`torch.distributed.batch_isend_irecv`, Megatron's `send_forward_recv_backward`).

    ```mlir
    dist.send %h from 0 to 1 tag "act/mb0" : tensor<2x4xf32>
    dist.send %a from 0 to 1 tag "act/mb1" {batch = 3} : tensor<2x4xf32>
    %g = dist.recv from 1 to 0 tag "grad/mb0" {batch = 3} : tensor<2x4xf32>
    ```
  }];
  let arguments = (ins AnyType:$value, I64Attr:$from, I64Attr:$to, StrAttr:$tag,
                       OptionalAttr<I64Attr>:$batch);
  let assemblyFormat = "$value `from` $from `to` $to `tag` $tag attr-dict `:` type($value)";
  let hasVerifier = 1;
}

def Dist_RecvOp : Dist_Op<"recv"> {
  let inJsonFormat = 0;
  let summary = "receives a value sent from another pipeline stage (blocking)";
  let description = [{
    The counterpart of `dist.send`: every rank of stage `to` receives the value the
    rank of stage `from` with the same other coordinates sends with the same `tag`.

    ```mlir
    %h = dist.recv from 0 to 1 tag "act/mb0" : tensor<2x4xf32>
    ```
  }];
  let arguments = (ins I64Attr:$from, I64Attr:$to, StrAttr:$tag, OptionalAttr<I64Attr>:$batch);
  let results = (outs AnyType:$result);
  let assemblyFormat = "`from` $from `to` $to `tag` $tag attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Dist_StageSelectOp : Dist_Op<"stage_select", [Pure]> {
  let inJsonFormat = 0;
  let summary = "the value of this rank's stage, among one value per stage";
  let description = [{
    On a rank of pipeline stage k, the k-th operand (a value of stage k). It joins what
    each stage holds into one value that a collective over the pipeline axis (or a
    result held by every stage) can take -- the per-stage sums of squares of a global
    gradient norm, say.

    ```mlir
    %ss = dist.stage_select %ss0, %ss1 : tensor<f32>, tensor<f32> -> tensor<f32>
    %total = dist.all_reduce %ss over ["pp"] "sum" : tensor<f32> -> tensor<f32>
    ```
  }];
  let arguments = (ins Variadic<AnyType>:$values);
  let results = (outs AnyType:$result);
  let assemblyFormat = "$values attr-dict `:` type($values) `->` type($result)";
  let hasVerifier = 1;
}

#endif // PLANPROOF_DIST_OPS
