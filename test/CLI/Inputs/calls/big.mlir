// 40 levels of functions each calling the next twice: 2^40 ops once expanded, past
// the limit, so inconclusive -- measured before anything is expanded (in well under a
// second and 100 MiB, where expanding first would take minutes and gigabytes).
module attributes {planproof.expect = {verdict = "inconclusive"}} {
  func.func private @ref_layer(%x: tensor<2x4xf32>, %w1: tensor<4x4xf32>, %w2: tensor<4x4xf32>)
      -> tensor<2x4xf32> {
    %h = ref.matmul %x, %w1 contract(1, 0) : tensor<2x4xf32>, tensor<4x4xf32>
    %a = ref.gelu %h : tensor<2x4xf32>
    %y = ref.matmul %a, %w2 contract(1, 0) : tensor<2x4xf32>, tensor<4x4xf32>
    return %y : tensor<2x4xf32>
  }
  func.func private @f0(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %a = func.call @f1(%x) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %b = func.call @f1(%a) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %b : tensor<2x4xf32>
  }
  func.func private @f1(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %a = func.call @f2(%x) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %b = func.call @f2(%a) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %b : tensor<2x4xf32>
  }
  func.func private @f2(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %a = func.call @f3(%x) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %b = func.call @f3(%a) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %b : tensor<2x4xf32>
  }
  func.func private @f3(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %a = func.call @f4(%x) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %b = func.call @f4(%a) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %b : tensor<2x4xf32>
  }
  func.func private @f4(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %a = func.call @f5(%x) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %b = func.call @f5(%a) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %b : tensor<2x4xf32>
  }
  func.func private @f5(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %a = func.call @f6(%x) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %b = func.call @f6(%a) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %b : tensor<2x4xf32>
  }
  func.func private @f6(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %a = func.call @f7(%x) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %b = func.call @f7(%a) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %b : tensor<2x4xf32>
  }
  func.func private @f7(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %a = func.call @f8(%x) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %b = func.call @f8(%a) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %b : tensor<2x4xf32>
  }
  func.func private @f8(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %a = func.call @f9(%x) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %b = func.call @f9(%a) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %b : tensor<2x4xf32>
  }
  func.func private @f9(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %a = func.call @f10(%x) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %b = func.call @f10(%a) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %b : tensor<2x4xf32>
  }
  func.func private @f10(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %a = func.call @f11(%x) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %b = func.call @f11(%a) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %b : tensor<2x4xf32>
  }
  func.func private @f11(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %a = func.call @f12(%x) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %b = func.call @f12(%a) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %b : tensor<2x4xf32>
  }
  func.func private @f12(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %a = func.call @f13(%x) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %b = func.call @f13(%a) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %b : tensor<2x4xf32>
  }
  func.func private @f13(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %a = func.call @f14(%x) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %b = func.call @f14(%a) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %b : tensor<2x4xf32>
  }
  func.func private @f14(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %a = func.call @f15(%x) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %b = func.call @f15(%a) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %b : tensor<2x4xf32>
  }
  func.func private @f15(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %a = func.call @f16(%x) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %b = func.call @f16(%a) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %b : tensor<2x4xf32>
  }
  func.func private @f16(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %a = func.call @f17(%x) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %b = func.call @f17(%a) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %b : tensor<2x4xf32>
  }
  func.func private @f17(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %a = func.call @f18(%x) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %b = func.call @f18(%a) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %b : tensor<2x4xf32>
  }
  func.func private @f18(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %a = func.call @f19(%x) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %b = func.call @f19(%a) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %b : tensor<2x4xf32>
  }
  func.func private @f19(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %a = func.call @f20(%x) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %b = func.call @f20(%a) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %b : tensor<2x4xf32>
  }
  func.func private @f20(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %a = func.call @f21(%x) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %b = func.call @f21(%a) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %b : tensor<2x4xf32>
  }
  func.func private @f21(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %a = func.call @f22(%x) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %b = func.call @f22(%a) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %b : tensor<2x4xf32>
  }
  func.func private @f22(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %a = func.call @f23(%x) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %b = func.call @f23(%a) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %b : tensor<2x4xf32>
  }
  func.func private @f23(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %a = func.call @f24(%x) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %b = func.call @f24(%a) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %b : tensor<2x4xf32>
  }
  func.func private @f24(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %a = func.call @f25(%x) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %b = func.call @f25(%a) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %b : tensor<2x4xf32>
  }
  func.func private @f25(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %a = func.call @f26(%x) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %b = func.call @f26(%a) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %b : tensor<2x4xf32>
  }
  func.func private @f26(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %a = func.call @f27(%x) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %b = func.call @f27(%a) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %b : tensor<2x4xf32>
  }
  func.func private @f27(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %a = func.call @f28(%x) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %b = func.call @f28(%a) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %b : tensor<2x4xf32>
  }
  func.func private @f28(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %a = func.call @f29(%x) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %b = func.call @f29(%a) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %b : tensor<2x4xf32>
  }
  func.func private @f29(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %a = func.call @f30(%x) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %b = func.call @f30(%a) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %b : tensor<2x4xf32>
  }
  func.func private @f30(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %a = func.call @f31(%x) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %b = func.call @f31(%a) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %b : tensor<2x4xf32>
  }
  func.func private @f31(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %a = func.call @f32(%x) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %b = func.call @f32(%a) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %b : tensor<2x4xf32>
  }
  func.func private @f32(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %a = func.call @f33(%x) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %b = func.call @f33(%a) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %b : tensor<2x4xf32>
  }
  func.func private @f33(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %a = func.call @f34(%x) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %b = func.call @f34(%a) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %b : tensor<2x4xf32>
  }
  func.func private @f34(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %a = func.call @f35(%x) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %b = func.call @f35(%a) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %b : tensor<2x4xf32>
  }
  func.func private @f35(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %a = func.call @f36(%x) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %b = func.call @f36(%a) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %b : tensor<2x4xf32>
  }
  func.func private @f36(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %a = func.call @f37(%x) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %b = func.call @f37(%a) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %b : tensor<2x4xf32>
  }
  func.func private @f37(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %a = func.call @f38(%x) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %b = func.call @f38(%a) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %b : tensor<2x4xf32>
  }
  func.func private @f38(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %a = func.call @f39(%x) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %b = func.call @f39(%a) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %b : tensor<2x4xf32>
  }
  func.func private @f39(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %a = func.call @f40(%x) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %b = func.call @f40(%a) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %b : tensor<2x4xf32>
  }
  func.func private @f40(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %y = ref.gelu %x : tensor<2x4xf32>
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
    %big = func.call @f0(%l1) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %big : tensor<2x4xf32>
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
