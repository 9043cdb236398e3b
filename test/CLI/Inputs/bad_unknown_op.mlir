module {
  func.func @reference(%x: tensor<2xf32> {ref.name = "x"}) -> (tensor<2xf32> {ref.name = "y"})
      attributes {ref.reference} {
    %y = ref.conv2d %x : tensor<2xf32>
    return %y : tensor<2xf32>
  }
}
