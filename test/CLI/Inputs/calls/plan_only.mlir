// Two MLP layers: the reference written out, the plan's layer stated once as a
// function and called twice (TP=2, column- then row-parallel). With the calls kept, no
// reference call names the plan's summaries: the spec is read again expanded.
module attributes {planproof.expect = {verdict = "verified"}} {
  func.func @reference(%x: tensor<2x4xf32> {ref.name = "x"},
                       %l0_w1: tensor<4x4xf32> {ref.name = "l0_w1"},
                       %l0_w2: tensor<4x4xf32> {ref.name = "l0_w2"},
                       %l1_w1: tensor<4x4xf32> {ref.name = "l1_w1"},
                       %l1_w2: tensor<4x4xf32> {ref.name = "l1_w2"})
      -> (tensor<2x4xf32> {ref.name = "y"}) attributes {ref.reference} {
    %h0 = ref.matmul %x, %l0_w1 contract(1, 0) : tensor<2x4xf32>, tensor<4x4xf32>
    %a0 = ref.gelu %h0 : tensor<2x4xf32>
    %l0 = ref.matmul %a0, %l0_w2 contract(1, 0) : tensor<2x4xf32>, tensor<4x4xf32>
    %h1 = ref.matmul %l0, %l1_w1 contract(1, 0) : tensor<2x4xf32>, tensor<4x4xf32>
    %a1 = ref.gelu %h1 : tensor<2x4xf32>
    %l1 = ref.matmul %a1, %l1_w2 contract(1, 0) : tensor<2x4xf32>, tensor<4x4xf32>
    return %l1 : tensor<2x4xf32>
  }

  dist.mesh @mesh axes = ["tp"] shape = [2]

  func.func private @plan_layer(%x: tensor<2x4xf32>, %w1: tensor<4x2xf32>, %w2: tensor<2x4xf32>)
      -> tensor<2x4xf32> attributes {dist.mesh = @mesh} {
    %h = ref.matmul %x, %w1 contract(1, 0) : tensor<2x4xf32>, tensor<4x2xf32>
    %a = ref.gelu %h : tensor<2x2xf32>
    %y_part = ref.matmul %a, %w2 contract(1, 0) : tensor<2x2xf32>, tensor<2x4xf32>
    %y = dist.all_reduce %y_part over ["tp"] "sum" : tensor<2x4xf32> -> tensor<2x4xf32>
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
