// A zigzag split of 6 positions over cp=2 needs 4 equal chunks.
module {
  func.func @reference(%x: tensor<6x2xf32> {ref.name = "x"}) -> (tensor<6x2xf32> {ref.name = "y"})
      attributes {ref.reference} {
    %y = ref.scale %x by 2.0 : tensor<6x2xf32>
    return %y : tensor<6x2xf32>
  }
  dist.mesh @mesh axes = ["cp"] shape = [2]
  func.func @plan(%x: tensor<3x2xf32> {dist.value = "x", dist.layout = #dist.layout<[cp zigzag, _]>})
      -> (tensor<3x2xf32> {dist.value = "y", dist.layout = #dist.layout<[cp zigzag, _]>})
      attributes {dist.mesh = @mesh} {
    %y = ref.scale %x by 2.0 : tensor<3x2xf32>
    return %y : tensor<3x2xf32>
  }
}
