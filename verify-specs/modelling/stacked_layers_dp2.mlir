// Three stacked layers of one shape, data parallel (dp=2): the plan runs each layer on
// its rows of the batch with that layer's weight.
module attributes {planproof.expect = {verdict = "verified"}} {
  func.func @reference(%x: tensor<4x4xf32> {ref.name = "x"},
                       %w1: tensor<4x4xf32> {ref.name = "w1"},
                       %w2: tensor<4x4xf32> {ref.name = "w2"},
                       %w3: tensor<4x4xf32> {ref.name = "w3"})
      -> (tensor<4x4xf32> {ref.name = "y"}) attributes {ref.reference} {
    %p1 = ref.matmul %x, %w1 contract(1, 0) : tensor<4x4xf32>, tensor<4x4xf32>
    %h1 = ref.tanh %p1 : tensor<4x4xf32>
    %p2 = ref.matmul %h1, %w2 contract(1, 0) : tensor<4x4xf32>, tensor<4x4xf32>
    %h2 = ref.tanh %p2 : tensor<4x4xf32>
    %p3 = ref.matmul %h2, %w3 contract(1, 0) : tensor<4x4xf32>, tensor<4x4xf32>
    %y = ref.tanh %p3 : tensor<4x4xf32>
    return %y : tensor<4x4xf32>
  }

  dist.mesh @mesh axes = ["dp"] shape = [2]

  func.func @plan(%x: tensor<2x4xf32> {dist.value = "x", dist.layout = #dist.layout<[dp, _]>},
                  %w1: tensor<4x4xf32> {dist.value = "w1", dist.layout = #dist.layout<[_, _]>},
                  %w2: tensor<4x4xf32> {dist.value = "w2", dist.layout = #dist.layout<[_, _]>},
                  %w3: tensor<4x4xf32> {dist.value = "w3", dist.layout = #dist.layout<[_, _]>})
      -> (tensor<2x4xf32> {dist.value = "y", dist.layout = #dist.layout<[dp, _]>})
      attributes {dist.mesh = @mesh} {
    %p1 = ref.matmul %x, %w1 contract(1, 0) : tensor<2x4xf32>, tensor<4x4xf32>
    %h1 = ref.tanh %p1 : tensor<2x4xf32>
    %p2 = ref.matmul %h1, %w2 contract(1, 0) : tensor<2x4xf32>, tensor<4x4xf32>
    %h2 = ref.tanh %p2 : tensor<2x4xf32>
    %p3 = ref.matmul %h2, %w3 contract(1, 0) : tensor<2x4xf32>, tensor<4x4xf32>
    %y = ref.tanh %p3 : tensor<2x4xf32>
    return %y : tensor<2x4xf32>
  }
}
