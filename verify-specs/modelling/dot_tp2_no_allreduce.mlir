// dot_tp2 with its all_reduce forgotten: each rank returns its partial dot.
module attributes {planproof.expect = {verdict = "violated", kind = "reduction", at = "%part"}} {
  func.func @reference(%a: tensor<8xf32> {ref.name = "a"}, %b: tensor<8xf32> {ref.name = "b"})
      -> (tensor<f32> {ref.name = "score"}, tensor<8xf32> {ref.name = "da"})
      attributes {ref.reference} {
    %s = ref.dot %a, %b : tensor<8xf32>
    %da = ref.grad %s wrt %a : tensor<f32>, tensor<8xf32> -> tensor<8xf32>
    return %s, %da : tensor<f32>, tensor<8xf32>
  }

  dist.mesh @mesh axes = ["tp"] shape = [2]

  func.func @plan(%a: tensor<4xf32> {dist.value = "a", dist.layout = #dist.layout<[tp]>},
                  %b: tensor<4xf32> {dist.value = "b", dist.layout = #dist.layout<[tp]>})
      -> (tensor<f32> {dist.value = "score", dist.layout = #dist.layout<[]>},
          tensor<4xf32> {dist.value = "da", dist.layout = #dist.layout<[tp]>})
      attributes {dist.mesh = @mesh} {
    %part = ref.dot %a, %b : tensor<4xf32>
    return %part, %b : tensor<f32>, tensor<4xf32>
  }
}
