//===- RefTokenOps.td - ref ops on integer token ids ------*- tablegen -*-===//
//
// Lookups by symbolic integer token id: embedding rows, one-hot rows and the table
// gradient, each with an optional offset that names a vocabulary shard's first row or
// class. Included by RefOps.td (which defines Ref_Op and the type constraints used
// here), so these are ops of the `ref` dialect like the others.
//
//===----------------------------------------------------------------------===//

def PP_I64Vector : 1DTensorOf<[I64]>;

def Ref_EmbeddingOp : Ref_Op<"embedding", [Ref_OwnLayoutFactors, Ref_NonlinearOpInterface]> {
  // Linear in the table (or the gradient), not in the ids.
  let extraClassDeclaration = [{
    static unsigned getNonlinearOperands() { return ~1u; }
  }];
  let summary = "looks up rows of a table by integer token id";
  let description = [{
    `result[t, :] = table[ids[t] - offset, :]` when `0 <= ids[t] - offset < rows`, and
    zero otherwise; `offset` (an `index`, default 0) says which global row the table's
    first row is. Without an offset this is the ordinary embedding lookup; a vocabulary-
    parallel plan passes its shard's first row (computed from `dist.axis_index`), so
    tokens outside the shard give zeros and an all_reduce(sum) completes the lookup.
    Token ids are symbolic: a reference argument of integer type carries
    `ref.bound = N` (ids lie in `[0, N)`), and proofs hold for every id sequence.

    ```mlir
    %x = ref.embedding %table, %ids : tensor<8x4xf32>, tensor<3xi64>
    %x_part = ref.embedding %shard, %ids offset %first : tensor<4x4xf32>, tensor<3xi64>
    ```
  }];
  let arguments = (ins PP_F32RankedTensor:$table, PP_I64Vector:$ids, Optional<Index>:$offset);
  let results = (outs PP_F32RankedTensor:$result);
  let assemblyFormat = "$table `,` $ids (`offset` $offset^)? attr-dict `:` type($table) `,` type($ids)";
}

def Ref_OneHotOp : Ref_ExplicitTypeOp<"one_hot", [Ref_OwnLayoutFactors]> {
  let summary = "the rows of the identity selected by integer token id";
  let description = [{
    `result[t, j] = 1` when `ids[t] == offset + j`, and `0` otherwise; `offset` (an
    `index`, default 0) says which global class column `j` is, and the result type
    gives the columns. The same as `ref.embedding` of the `[classes, classes]`
    identity with that offset, without writing the identity out (a vocabulary of 128k
    classes would take 16 billion values): the labels of a cross-entropy, and the
    columns of them that a vocabulary-parallel rank holds (its offset the first class
    of its shard, computed from `dist.axis_index`). Ids outside the columns give rows
    of zeros.

    ```mlir
    %hot = ref.one_hot %labels : tensor<3xi64> -> tensor<3x8xf32>
    %hot_part = ref.one_hot %labels offset %first : tensor<3xi64> -> tensor<3x4xf32>
    ```
  }];
  let arguments = (ins PP_I64Vector:$ids, Optional<Index>:$offset);
  let results = (outs PP_F32RankedTensor:$result);
  let assemblyFormat = [{
    $ids (`offset` $offset^)? attr-dict `:` type($ids) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Ref_EmbeddingGradOp : Ref_ExplicitTypeOp<"embedding_grad", [Ref_OwnLayoutFactors, Ref_NonlinearOpInterface]> {
  // Linear in the table (or the gradient), not in the ids.
  let extraClassDeclaration = [{
    static unsigned getNonlinearOperands() { return ~1u; }
  }];
  let summary = "gradient of an embedding lookup with respect to its table";
  let description = [{
    `result[v, :] = sum_t [ids[t] == offset + v] * grad[t, :]`: each token's output
    gradient is added to its row (a scatter-add). The result type gives the rows.

    ```mlir
    %dtable = ref.embedding_grad %dx, %ids : tensor<3x4xf32>, tensor<3xi64> -> tensor<8x4xf32>
    ```
  }];
  let arguments = (ins PP_F32RankedTensor:$grad, PP_I64Vector:$ids, Optional<Index>:$offset);
  let results = (outs PP_F32RankedTensor:$result);
  let assemblyFormat = [{
    $grad `,` $ids (`offset` $offset^)? attr-dict `:` type($grad) `,` type($ids) `->` type($result)
  }];
  let hasVerifier = 1;
}

