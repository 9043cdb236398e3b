func.func @reference(%x: tensor<2x4xf32> {ref.name = "x"}, %w: tensor<4x2xf32> {ref.name = "w"})
    -> (tensor<2x2xf32> {ref.name = "y"}) attributes {ref.reference} {
  %y = ref.matmul %x, %w contract(1, 0) : tensor<2x4xf32>, tensor<4x2xf32>
  return %y : tensor<2x2xf32>
}
