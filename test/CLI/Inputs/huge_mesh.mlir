module {
  func.func @reference(%x: tensor<4xf32> {ref.name = "x"}) -> (tensor<4xf32> {ref.name = "y"})
      attributes {ref.reference} {
    %y = ref.gelu %x : tensor<4xf32>
    return %y : tensor<4xf32>
  }
  dist.mesh @mesh axes = ["a", "b", "c", "d"] shape = [1024, 1024, 1024, 1024]
  func.func @plan(%x: tensor<4xf32> {dist.value = "x", dist.layout = #dist.layout<[_]>})
      -> (tensor<4xf32> {dist.value = "y", dist.layout = #dist.layout<[_]>})
      attributes {dist.mesh = @mesh} {
    %y = ref.gelu %x : tensor<4xf32>
    return %y : tensor<4xf32>
  }
}
