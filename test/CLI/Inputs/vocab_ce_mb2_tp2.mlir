// A vocabulary-parallel cross-entropy written by hand (tp 2, Megatron's: max and sum of
// exponentials all-reduced, the label's logit of x - max picked by the one-hot of the
// rank's classes and all-reduced, loss = log(sum exp) - picked) over two microbatches of
// two tokens, their token sums added and divided by the 4 tokens; the reference is the
// single-device cross-entropy of the whole batch (the label's log-probability picked by
// a one-hot). The layout engine verifies it by the one-hot forms and the row pieces
// together (docs/layout-engine.md); test/CLI/layout.test seeds its near misses.
module {
  func.func @reference(%x: tensor<4x4xf32> {ref.name = "x"},
                       %labels: tensor<4xi64> {ref.name = "labels", ref.bound = 4 : i64})
      -> (tensor<f32> {ref.name = "loss"})
      attributes {ref.reference} {
    %m_raw = ref.reduce_max %x dims [1] : tensor<4x4xf32>
    %m = ref.detach %m_raw : tensor<4xf32>
    %mb = ref.broadcast %m dims [0] : tensor<4xf32> -> tensor<4x4xf32>
    %z = ref.sub %x, %mb : tensor<4x4xf32>
    %e = ref.exp %z : tensor<4x4xf32>
    %s = ref.reduce_sum %e dims [1] : tensor<4x4xf32>
    %ls = ref.log %s : tensor<4xf32>
    %lsb = ref.broadcast %ls dims [0] : tensor<4xf32> -> tensor<4x4xf32>
    %logp = ref.sub %z, %lsb : tensor<4x4xf32>
    %hot = ref.one_hot %labels : tensor<4xi64> -> tensor<4x4xf32>
    %p = ref.mul %hot, %logp : tensor<4x4xf32>
    %picked = ref.reduce_sum %p dims [0, 1] : tensor<4x4xf32>
    %loss = ref.scale %picked by -0.25 : tensor<f32>
    return %loss : tensor<f32>
  }

  dist.mesh @mesh axes = ["tp"] shape = [2]

  func.func @plan(%x: tensor<4x2xf32> {dist.value = "x", dist.layout = #dist.layout<[_, tp]>},
                  %labels: tensor<4xi64> {dist.value = "labels", dist.layout = #dist.layout<[_]>})
      -> (tensor<f32> {dist.value = "loss", dist.layout = #dist.layout<[]>})
      attributes {dist.mesh = @mesh} {
    %r = dist.axis_index "tp" : index
    %two = arith.constant 2 : index
    %first = arith.muli %r, %two : index
    %x0 = ref.slice %x offsets [0, 0] sizes [2, 2] : tensor<4x2xf32>
    %lab0 = ref.slice %labels offsets [0] sizes [2] : tensor<4xi64>
    %local_max0 = ref.reduce_max %x0 dims [1] : tensor<2x2xf32>
    %m_all0 = dist.all_reduce %local_max0 over ["tp"] "max" : tensor<2xf32> -> tensor<2xf32>
    %m0 = ref.detach %m_all0 : tensor<2xf32>
    %mb0 = ref.broadcast %m0 dims [0] : tensor<2xf32> -> tensor<2x2xf32>
    %z0 = ref.sub %x0, %mb0 : tensor<2x2xf32>
    %e0 = ref.exp %z0 : tensor<2x2xf32>
    %local_sum0 = ref.reduce_sum %e0 dims [1] : tensor<2x2xf32>
    %s0 = dist.all_reduce %local_sum0 over ["tp"] "sum" : tensor<2xf32> -> tensor<2xf32>
    %ls0 = ref.log %s0 : tensor<2xf32>
    %hot0 = ref.one_hot %lab0 offset %first : tensor<2xi64> -> tensor<2x2xf32>
    %p0 = ref.mul %hot0, %z0 : tensor<2x2xf32>
    %local_pick0 = ref.reduce_sum %p0 dims [1] : tensor<2x2xf32>
    %picked0 = dist.all_reduce %local_pick0 over ["tp"] "sum" : tensor<2xf32> -> tensor<2xf32>
    %token_loss0 = ref.sub %ls0, %picked0 : tensor<2xf32>
    %sum0 = ref.reduce_sum %token_loss0 dims [0] : tensor<2xf32>
    %x1 = ref.slice %x offsets [2, 0] sizes [2, 2] : tensor<4x2xf32>
    %lab1 = ref.slice %labels offsets [2] sizes [2] : tensor<4xi64>
    %local_max1 = ref.reduce_max %x1 dims [1] : tensor<2x2xf32>
    %m_all1 = dist.all_reduce %local_max1 over ["tp"] "max" : tensor<2xf32> -> tensor<2xf32>
    %m1 = ref.detach %m_all1 : tensor<2xf32>
    %mb1 = ref.broadcast %m1 dims [0] : tensor<2xf32> -> tensor<2x2xf32>
    %z1 = ref.sub %x1, %mb1 : tensor<2x2xf32>
    %e1 = ref.exp %z1 : tensor<2x2xf32>
    %local_sum1 = ref.reduce_sum %e1 dims [1] : tensor<2x2xf32>
    %s1 = dist.all_reduce %local_sum1 over ["tp"] "sum" : tensor<2xf32> -> tensor<2xf32>
    %ls1 = ref.log %s1 : tensor<2xf32>
    %hot1 = ref.one_hot %lab1 offset %first : tensor<2xi64> -> tensor<2x2xf32>
    %p1 = ref.mul %hot1, %z1 : tensor<2x2xf32>
    %local_pick1 = ref.reduce_sum %p1 dims [1] : tensor<2x2xf32>
    %picked1 = dist.all_reduce %local_pick1 over ["tp"] "sum" : tensor<2xf32> -> tensor<2xf32>
    %token_loss1 = ref.sub %ls1, %picked1 : tensor<2xf32>
    %sum1 = ref.reduce_sum %token_loss1 dims [0] : tensor<2xf32>
    %tot = ref.add %sum0, %sum1 : tensor<f32>
    %loss = ref.scale %tot by 0.25 : tensor<f32>
    return %loss : tensor<f32>
  }
}
