module {
  func.func @reference(%t: tensor<4x2xf32> {ref.name = "t"}, %ids: tensor<2xi64> {ref.name = "ids"})
      -> (tensor<2x2xf32> {ref.name = "x"}) attributes {ref.reference} {
    %x = ref.embedding %t, %ids : tensor<4x2xf32>, tensor<2xi64>
    return %x : tensor<2x2xf32>
  }
  dist.mesh @mesh axes = ["r"] shape = [1]
  func.func @plan(%t: tensor<4x2xf32> {dist.value = "t", dist.layout = #dist.layout<[_, _]>})
      -> (tensor<4x2xf32> {dist.value = "t", dist.layout = #dist.layout<[_, _]>})
      attributes {dist.mesh = @mesh} {
    return %t : tensor<4x2xf32>
  }
}
