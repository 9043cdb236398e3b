// discarded_allreduce.mlir with a second bug after the first: the fix of the first (read
// the all_reduce's result) does not make the output right, so it is not shown.
module {
  func.func @reference(%x: tensor<2x4xf32> {ref.name = "x"}, %w: tensor<4x4xf32> {ref.name = "w"})
      -> (tensor<2x4xf32> {ref.name = "y"}) attributes {ref.reference} {
    %y = ref.matmul %x, %w contract(1, 0) : tensor<2x4xf32>, tensor<4x4xf32>
    %z = ref.gelu %y : tensor<2x4xf32>
    return %z : tensor<2x4xf32>
  }
  dist.mesh @mesh axes = ["tp"] shape = [2]
  func.func @plan(%x: tensor<2x2xf32> {dist.value = "x", dist.layout = #dist.layout<[_, tp]>},
                  %w: tensor<2x4xf32> {dist.value = "w", dist.layout = #dist.layout<[tp, _]>})
      -> (tensor<2x4xf32> {dist.value = "y", dist.layout = #dist.layout<[_, _]>})
      attributes {dist.mesh = @mesh} {
    %y_part = ref.matmul %x, %w contract(1, 0) : tensor<2x2xf32>, tensor<2x4xf32>
    %y = dist.all_reduce %y_part over ["tp"] "sum" : tensor<2x4xf32> -> tensor<2x4xf32>
    %z = ref.gelu %y_part : tensor<2x4xf32>
    // A second bug downstream: reading the reduction is not the whole fix.
    %z2 = ref.scale %z by 2.0 : tensor<2x4xf32>
    return %z2 : tensor<2x4xf32>
  }
}
