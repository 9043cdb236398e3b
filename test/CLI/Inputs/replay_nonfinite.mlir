// A reference that is not finite anywhere, whatever its inputs (a division by zero):
// a replay compares nothing, so it must not say "within tolerance".
module {
  func.func @reference(%x: tensor<4xf32> {ref.name = "x"}) -> (tensor<4xf32> {ref.name = "y"})
      attributes {ref.reference} {
    %zero = ref.constant 0.0 : tensor<4xf32>
    %y = ref.div %x, %zero : tensor<4xf32>
    return %y : tensor<4xf32>
  }
  dist.mesh @mesh axes = ["tp"] shape = [2]
  func.func @plan(%x: tensor<2xf32> {dist.value = "x", dist.layout = #dist.layout<[tp]>})
      -> (tensor<2xf32> {dist.value = "y", dist.layout = #dist.layout<[tp]>})
      attributes {dist.mesh = @mesh} {
    %zero = ref.constant 0.0 : tensor<2xf32>
    %y = ref.div %x, %zero : tensor<2xf32>
    return %y : tensor<2xf32>
  }
}
