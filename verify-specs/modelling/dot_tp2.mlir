// A similarity score as torch.dot of two tensor-parallel vectors (each rank holds half
// of both): each rank's ref.dot is a partial sum of the whole dot, completed by one
// all_reduce. ref.dot was added to the dialect with its layout factors alone (a summed
// factor): no file of lib/LayoutEngine names it.
module attributes {planproof.expect = {verdict = "verified"}} {
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
    %s = dist.all_reduce %part over ["tp"] "sum" : tensor<f32> -> tensor<f32>
    return %s, %b : tensor<f32>, tensor<4xf32>
  }
}
