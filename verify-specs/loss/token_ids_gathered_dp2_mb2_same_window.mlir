// BUG: the second microbatch's ids cut at the first one's offset after the gather:
// the first microbatch's tokens looked up twice (against the second's output
// gradients), the second's never.
module attributes {planproof.expect = {verdict = "violated", kind = "sharding", at = "%ids1"}} {
  func.func @reference(%table: tensor<8x4xf32> {ref.name = "table"},
                       %dx: tensor<8x4xf32> {ref.name = "dx"},
                       %ids: tensor<8xi64> {ref.name = "ids", ref.bound = 8 : i64})
      -> (tensor<8x4xf32> {ref.name = "dtable"}, tensor<8x4xf32> {ref.name = "dhot"},
          tensor<f32> {ref.name = "loss"})
      attributes {ref.reference} {
    %dtable = ref.embedding_grad %dx, %ids : tensor<8x4xf32>, tensor<8xi64> -> tensor<8x4xf32>
    %hot = ref.one_hot %ids : tensor<8xi64> -> tensor<8x8xf32>
    %dhot = ref.matmul %hot, %dx contract(0, 0) : tensor<8x8xf32>, tensor<8x4xf32>
    %x = ref.embedding %table, %ids : tensor<8x4xf32>, tensor<8xi64>
    %xx = ref.mul %x, %dx : tensor<8x4xf32>
    %loss = ref.reduce_sum %xx dims [0, 1] : tensor<8x4xf32>
    return %dtable, %dhot, %loss : tensor<8x4xf32>, tensor<8x4xf32>, tensor<f32>
  }

  dist.mesh @mesh axes = ["dp"] shape = [2]

  func.func @plan(%table: tensor<8x4xf32> {dist.value = "table", dist.layout = #dist.layout<[_, _]>},
                  %dx_block: tensor<4x4xf32> {dist.value = "dx", dist.layout = #dist.layout<[dp, _]>},
                  %ids_block: tensor<4xi64> {dist.value = "ids", dist.layout = #dist.layout<[dp]>})
      -> (tensor<8x4xf32> {dist.value = "dtable", dist.layout = #dist.layout<[_, _]>},
          tensor<8x4xf32> {dist.value = "dhot", dist.layout = #dist.layout<[_, _]>},
          tensor<f32> {dist.value = "loss", dist.layout = #dist.layout<[]>})
      attributes {dist.mesh = @mesh} {
    %ids = dist.all_gather %ids_block over ["dp"] dim 0 : tensor<4xi64> -> tensor<8xi64>
    %dx = dist.all_gather %dx_block over ["dp"] dim 0 : tensor<4x4xf32> -> tensor<8x4xf32>
    %ids0 = ref.slice %ids offsets [0] sizes [4] : tensor<8xi64>
    %ids1 = ref.slice %ids offsets [0] sizes [4] : tensor<8xi64>
    %dx0 = ref.slice %dx offsets [0, 0] sizes [4, 4] : tensor<8x4xf32>
    %dx1 = ref.slice %dx offsets [4, 0] sizes [4, 4] : tensor<8x4xf32>
    %g0 = ref.embedding_grad %dx0, %ids0 : tensor<4x4xf32>, tensor<4xi64> -> tensor<8x4xf32>
    %g1 = ref.embedding_grad %dx1, %ids1 : tensor<4x4xf32>, tensor<4xi64> -> tensor<8x4xf32>
    %dtable = ref.add %g0, %g1 : tensor<8x4xf32>
    %hot0 = ref.one_hot %ids0 : tensor<4xi64> -> tensor<4x8xf32>
    %hot1 = ref.one_hot %ids1 : tensor<4xi64> -> tensor<4x8xf32>
    %h0 = ref.matmul %hot0, %dx0 contract(0, 0) : tensor<4x8xf32>, tensor<4x4xf32>
    %h1 = ref.matmul %hot1, %dx1 contract(0, 0) : tensor<4x8xf32>, tensor<4x4xf32>
    %dhot = ref.add %h0, %h1 : tensor<8x4xf32>
    %x0 = ref.embedding %table, %ids0 : tensor<8x4xf32>, tensor<4xi64>
    %x1 = ref.embedding %table, %ids1 : tensor<8x4xf32>, tensor<4xi64>
    %xx0 = ref.mul %x0, %dx0 : tensor<4x4xf32>
    %xx1 = ref.mul %x1, %dx1 : tensor<4x4xf32>
    %l0 = ref.reduce_sum %xx0 dims [0, 1] : tensor<4x4xf32>
    %l1 = ref.reduce_sum %xx1 dims [0, 1] : tensor<4x4xf32>
    %loss = ref.add %l0, %l1 : tensor<f32>
    return %dtable, %dhot, %loss : tensor<8x4xf32>, tensor<8x4xf32>, tensor<f32>
  }
}
