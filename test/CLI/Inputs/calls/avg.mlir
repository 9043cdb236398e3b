// Two MLP layers, each stated once as a function and called twice, in the reference
// and in the plan (TP=2, column- then row-parallel): the all_reduce of the plan's
// layer averages partial sums that need a sum, so both layers are wrong.
module attributes {planproof.expect = {verdict = "violated", kind = "reduction", at = "%l0"}} {
  func.func private @ref_layer(%x: tensor<2x4xf32>, %w1: tensor<4x4xf32>, %w2: tensor<4x4xf32>)
      -> tensor<2x4xf32> {
    %h = ref.matmul %x, %w1 contract(1, 0) : tensor<2x4xf32>, tensor<4x4xf32>
    %a = ref.gelu %h : tensor<2x4xf32>
    %y = ref.matmul %a, %w2 contract(1, 0) : tensor<2x4xf32>, tensor<4x4xf32>
    return %y : tensor<2x4xf32>
  }
  func.func @reference(%x: tensor<2x4xf32> {ref.name = "x"},
                       %l0_w1: tensor<4x4xf32> {ref.name = "l0_w1"},
                       %l0_w2: tensor<4x4xf32> {ref.name = "l0_w2"},
                       %l1_w1: tensor<4x4xf32> {ref.name = "l1_w1"},
                       %l1_w2: tensor<4x4xf32> {ref.name = "l1_w2"})
      -> (tensor<2x4xf32> {ref.name = "y"}) attributes {ref.reference} {
    %l0 = func.call @ref_layer(%x, %l0_w1, %l0_w2) : (tensor<2x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %l1 = func.call @ref_layer(%l0, %l1_w1, %l1_w2) : (tensor<2x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    return %l1 : tensor<2x4xf32>
  }

  dist.mesh @mesh axes = ["tp"] shape = [2]

  func.func private @plan_layer(%x: tensor<2x4xf32>, %w1: tensor<4x2xf32>, %w2: tensor<2x4xf32>)
      -> tensor<2x4xf32> attributes {dist.mesh = @mesh} {
    %h = ref.matmul %x, %w1 contract(1, 0) : tensor<2x4xf32>, tensor<4x2xf32>
    %a = ref.gelu %h : tensor<2x2xf32>
    %y_part = ref.matmul %a, %w2 contract(1, 0) : tensor<2x2xf32>, tensor<2x4xf32>
    %y = dist.all_reduce %y_part over ["tp"] "avg" : tensor<2x4xf32> -> tensor<2x4xf32>
    return %y : tensor<2x4xf32>
  }
  func.func @plan(%x: tensor<2x4xf32> {dist.value = "x", dist.layout = #dist.layout<[_, _]>},
                  %l0_w1: tensor<4x2xf32> {dist.value = "l0_w1", dist.layout = #dist.layout<[_, tp]>},
                  %l0_w2: tensor<2x4xf32> {dist.value = "l0_w2", dist.layout = #dist.layout<[tp, _]>},
                  %l1_w1: tensor<4x2xf32> {dist.value = "l1_w1", dist.layout = #dist.layout<[_, tp]>},
                  %l1_w2: tensor<2x4xf32> {dist.value = "l1_w2", dist.layout = #dist.layout<[tp, _]>})
      -> (tensor<2x4xf32> {dist.value = "y", dist.layout = #dist.layout<[_, _]>})
      attributes {dist.mesh = @mesh} {
    %l0 = func.call @plan_layer(%x, %l0_w1, %l0_w2) : (tensor<2x4xf32>, tensor<4x2xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    %l1 = func.call @plan_layer(%l0, %l1_w1, %l1_w2) : (tensor<2x4xf32>, tensor<4x2xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    return %l1 : tensor<2x4xf32>
  }
}
