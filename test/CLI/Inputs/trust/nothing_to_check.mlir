// A reference and a plan that return nothing: there is no equality to prove, so the
// verdict cannot be "verified".
module {
  func.func @reference(%x: tensor<4xf32> {ref.name = "x"}) attributes {ref.reference} {
    return
  }
  dist.mesh @mesh axes = ["tp"] shape = [2]
  func.func @plan(%x: tensor<2xf32> {dist.value = "x", dist.layout = #dist.layout<[tp]>})
      attributes {dist.mesh = @mesh} {
    return
  }
}
