// A replicated weight cut with dist.shard_slice inside the differentiated region: the
// derived backward pass gives each rank its block's share (dist.shard_pad), and the
// plan sums the shares over tp to the whole gradient.
module attributes {planproof.expect = {verdict = "verified"}} {
  func.func @reference(%x: tensor<2x4xf32> {ref.name = "x"}, %w: tensor<4x4xf32> {ref.name = "w"})
      -> (tensor<f32> {ref.name = "loss"}, tensor<4x4xf32> {ref.name = "dw"})
      attributes {ref.reference} {
    %y = ref.matmul %x, %w contract(1, 0) : tensor<2x4xf32>, tensor<4x4xf32>
    %a = ref.gelu %y : tensor<2x4xf32>
    %loss = ref.reduce_sum %a dims [0, 1] : tensor<2x4xf32>
    %dw = ref.grad %loss wrt %w : tensor<f32>, tensor<4x4xf32> -> tensor<4x4xf32>
    return %loss, %dw : tensor<f32>, tensor<4x4xf32>
  }
  dist.mesh @mesh axes = ["tp"] shape = [2]
  func.func @plan(%x: tensor<2x4xf32> {dist.value = "x", dist.layout = #dist.layout<[_, _]>},
                  %w: tensor<4x4xf32> {dist.value = "w", dist.layout = #dist.layout<[_, _]>})
      -> (tensor<f32> {dist.value = "loss", dist.layout = #dist.layout<[], sum = [tp]>},
          tensor<4x4xf32> {dist.value = "dw", dist.layout = #dist.layout<[_, _]>})
      attributes {dist.mesh = @mesh} {
    %w_local = dist.shard_slice %w over ["tp"] dim 1 : tensor<4x4xf32> -> tensor<4x2xf32>
    %y = ref.matmul %x, %w_local contract(1, 0) : tensor<2x4xf32>, tensor<4x2xf32>
    %a = ref.gelu %y : tensor<2x2xf32>
    %loss = ref.reduce_sum %a dims [0, 1] : tensor<2x2xf32>
    %dw_share = ref.grad %loss wrt %w : tensor<f32>, tensor<4x4xf32> -> tensor<4x4xf32>
    %dw = dist.all_reduce %dw_share over ["tp"] "sum" : tensor<4x4xf32> -> tensor<4x4xf32>
    return %loss, %dw : tensor<f32>, tensor<4x4xf32>
  }
}
