// max(a, b) computed as max(a - b, 0) + b: equal for all reals, with different canonical
// forms, so Z3 decides it.
module {
  func.func @reference(%a: tensor<2xf32> {ref.name = "a"}, %b: tensor<2xf32> {ref.name = "b"})
      -> (tensor<2xf32> {ref.name = "y"}) attributes {ref.reference} {
    %y = ref.maximum %a, %b : tensor<2xf32>
    return %y : tensor<2xf32>
  }
  dist.mesh @mesh axes = ["tp"] shape = [2]
  func.func @plan(%a: tensor<1xf32> {dist.value = "a", dist.layout = #dist.layout<[tp]>},
                  %b: tensor<1xf32> {dist.value = "b", dist.layout = #dist.layout<[tp]>})
      -> (tensor<1xf32> {dist.value = "y", dist.layout = #dist.layout<[tp]>})
      attributes {dist.mesh = @mesh} {
    %zero = ref.scale %a by 0.0 : tensor<1xf32>
    %d = ref.sub %a, %b : tensor<1xf32>
    %m = ref.maximum %d, %zero : tensor<1xf32>
    %y = ref.add %m, %b : tensor<1xf32>
    return %y : tensor<1xf32>
  }
}
