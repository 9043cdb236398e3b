module {
  func.func @reference(%x: tensor<4xf32> {ref.name = "x"}) -> (tensor<4xf32> {ref.name = "y"})
      attributes {ref.reference} {
    %y = ref.gelu %x : tensor<4xf32>
    return %y : tensor<4xf32>
  }
  dist.mesh @mesh axes = ["tp"] shape = [2]
  func.func @plan(%x: tensor<4xf32> {dist.value = "x", dist.layout = #dist.layout<[_]>})
      -> (tensor<4xf32> {dist.value = "y", dist.layout = #dist.layout<[_]>})
      attributes {dist.mesh = @mesh} {
    %c = arith.constant dense<0.0> : tensor<4xf32>
    %s = ref.add %x, %c : tensor<4xf32>
    %y = ref.gelu %s : tensor<4xf32>
    return %y : tensor<4xf32>
  }
}
