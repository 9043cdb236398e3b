module {
  func.func @reference(%x: tensor<2xf32> {ref.name = "x"}) -> (tensor<2xf32> {ref.name = "y"})
      attributes {ref.reference} {
    %y = ref.gelu %x : tensor<2xf32>
    return %y : tensor<2xf32>
  // missing closing brace of the function
}
