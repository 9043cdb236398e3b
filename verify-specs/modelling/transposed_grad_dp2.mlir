// A data-parallel weight gradient computed transposed (dW^T = dy^T x, the other
// contraction), summed over dp, and transposed back before the update.
module attributes {planproof.expect = {verdict = "verified"}} {
  func.func @reference(%x: tensor<4x4xf32> {ref.name = "x"}, %dy: tensor<4x4xf32> {ref.name = "dy"},
                       %w: tensor<4x4xf32> {ref.name = "w"})
      -> (tensor<4x4xf32> {ref.name = "w_next", ref.updates = "w"}) attributes {ref.reference} {
    %dw = ref.matmul %x, %dy contract(0, 0) : tensor<4x4xf32>, tensor<4x4xf32>
    %w_next = ref.sgd_update %w, %dw lr 0.1 : tensor<4x4xf32>
    return %w_next : tensor<4x4xf32>
  }
  dist.mesh @mesh axes = ["dp"] shape = [2]
  func.func @plan(%x: tensor<2x4xf32> {dist.value = "x", dist.layout = #dist.layout<[dp, _]>},
                  %dy: tensor<2x4xf32> {dist.value = "dy", dist.layout = #dist.layout<[dp, _]>},
                  %w: tensor<4x4xf32> {dist.value = "w", dist.layout = #dist.layout<[_, _]>})
      -> (tensor<4x4xf32> {dist.value = "w_next", dist.layout = #dist.layout<[_, _]>})
      attributes {dist.mesh = @mesh} {
    %dw_t_local = ref.matmul %dy, %x contract(0, 0) : tensor<2x4xf32>, tensor<2x4xf32>
    %dw_t = dist.all_reduce %dw_t_local over ["dp"] "sum" : tensor<4x4xf32> -> tensor<4x4xf32>
    %dw = ref.transpose %dw_t perm [1, 0] : tensor<4x4xf32>
    %w_next = ref.sgd_update %w, %dw lr 0.1 : tensor<4x4xf32>
    return %w_next : tensor<4x4xf32>
  }
}
