// Row-parallel linear with a bias: the bias is added on tensor-parallel rank 0 only
// (dist.select_on), before the sum all-reduce, so it is counted once.
module attributes {planproof.expect = {verdict = "verified"}} {
  func.func @reference(%x: tensor<2x4xf32> {ref.name = "x"}, %w: tensor<4x4xf32> {ref.name = "w"},
                       %b: tensor<4xf32> {ref.name = "b"})
      -> (tensor<2x4xf32> {ref.name = "y"}) attributes {ref.reference} {
    %y_pre = ref.matmul %x, %w contract(1, 0) : tensor<2x4xf32>, tensor<4x4xf32>
    %y = ref.bias_add %y_pre, %b : tensor<2x4xf32>, tensor<4xf32>
    return %y : tensor<2x4xf32>
  }
  dist.mesh @mesh axes = ["tp"] shape = [2]
  func.func @plan(%x: tensor<2x2xf32> {dist.value = "x", dist.layout = #dist.layout<[_, tp]>},
                  %w: tensor<2x4xf32> {dist.value = "w", dist.layout = #dist.layout<[tp, _]>},
                  %b: tensor<4xf32> {dist.value = "b", dist.layout = #dist.layout<[_]>})
      -> (tensor<2x4xf32> {dist.value = "y", dist.layout = #dist.layout<[_, _]>})
      attributes {dist.mesh = @mesh} {
    %y_part = ref.matmul %x, %w contract(1, 0) : tensor<2x2xf32>, tensor<2x4xf32>
    %zero = ref.constant 0.0 : tensor<4xf32>
    %b_once = dist.select_on %b, %zero on {tp = 0 : i64} : tensor<4xf32>
    %y_part_b = ref.bias_add %y_part, %b_once : tensor<2x4xf32>, tensor<4xf32>
    %y = dist.all_reduce %y_part_b over ["tp"] "sum" : tensor<2x4xf32> -> tensor<2x4xf32>
    return %y : tensor<2x4xf32>
  }
}
