// A causal offset read from a step input: not a rank-determined integer, so the
// element engine cannot fix the mask (inconclusive, never a verdict).
module {
  func.func @reference(%s: tensor<1x4x4xf32> {ref.name = "s"}, %n: index {ref.name = "n"})
      -> (tensor<1x4x4xf32> {ref.name = "p"}) attributes {ref.reference} {
    %p = ref.causal_softmax %s : tensor<1x4x4xf32>
    return %p : tensor<1x4x4xf32>
  }
  dist.mesh @mesh axes = ["cp"] shape = [2]
  func.func @plan(%s: tensor<1x4x4xf32> {dist.value = "s", dist.layout = #dist.layout<[_, _, _]>},
                  %n: index {dist.value = "n"})
      -> (tensor<1x4x4xf32> {dist.value = "p", dist.layout = #dist.layout<[_, _, _]>})
      attributes {dist.mesh = @mesh} {
    %p = ref.causal_softmax %s offset %n : tensor<1x4x4xf32>
    return %p : tensor<1x4x4xf32>
  }
}
