dist.mesh @mesh axes = ["tp"] shape = [2]
func.func @plan(%x: tensor<2x4xf32> {dist.value = "x", dist.layout = #dist.layout<[_, _]>},
                %w: tensor<4x1xf32> {dist.value = "w", dist.layout = #dist.layout<[_, tp]>})
    -> (tensor<2x1xf32> {dist.value = "y", dist.layout = #dist.layout<[_, tp]>})
    attributes {dist.mesh = @mesh} {
  %y_local = ref.matmul %x, %w contract(1, 0) : tensor<2x4xf32>, tensor<4x1xf32>
  %y = dist.all_reduce %y_local over ["tp"] "sum" : tensor<2x1xf32> -> tensor<2x1xf32>
  return %y : tensor<2x1xf32>
}
