// max has no derivative rule (a subgradient choice would be an unproved assumption).
module {
  func.func @reference(%x: tensor<2x3xf32> {ref.name = "x"})
      -> (tensor<2x3xf32> {ref.name = "dx"}) attributes {ref.reference} {
    %s = ref.exp %x : tensor<2x3xf32>
    %m = ref.reduce_max %s dims [0, 1] : tensor<2x3xf32>
    %dx = ref.grad %m wrt %x : tensor<f32>, tensor<2x3xf32> -> tensor<2x3xf32>
    return %dx : tensor<2x3xf32>
  }
  dist.mesh @mesh axes = ["r"] shape = [1]
  func.func @plan(%x: tensor<2x3xf32> {dist.value = "x", dist.layout = #dist.layout<[_, _]>})
      -> (tensor<2x3xf32> {dist.value = "dx", dist.layout = #dist.layout<[_, _]>})
      attributes {dist.mesh = @mesh} {
    return %x : tensor<2x3xf32>
  }
}
