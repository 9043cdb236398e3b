// A cross-entropy (log-softmax over the classes, the label's log-probability picked by a
// one-hot) summed over 2 microbatches whose rows an all_to_all gathered (dp=2): rank r
// holds rows [2r, 2r + 2) of microbatch 0 (rows 0-3) and of microbatch 1 (rows 4-7),
// runs the loss of each, adds them and all-reduces; the reference takes the whole
// batch's mean. The microbatches' row sums are sums over pieces of the batch that tile
// it (a windowed layout of the exchanged rows): their sum is the batch's.
module attributes {planproof.expect = {verdict = "verified"}} {
  func.func @reference(%x: tensor<8x4xf32> {ref.name = "x"},
                       %labels: tensor<8xi64> {ref.name = "labels", ref.bound = 4 : i64})
      -> (tensor<f32> {ref.name = "loss"})
      attributes {ref.reference} {
    %m_raw = ref.reduce_max %x dims [1] : tensor<8x4xf32>
    %m = ref.detach %m_raw : tensor<8xf32>
    %mb = ref.broadcast %m dims [0] : tensor<8xf32> -> tensor<8x4xf32>
    %z = ref.sub %x, %mb : tensor<8x4xf32>
    %e = ref.exp %z : tensor<8x4xf32>
    %s = ref.reduce_sum %e dims [1] : tensor<8x4xf32>
    %ls = ref.log %s : tensor<8xf32>
    %lsb = ref.broadcast %ls dims [0] : tensor<8xf32> -> tensor<8x4xf32>
    %logp = ref.sub %z, %lsb : tensor<8x4xf32>
    %hot = ref.one_hot %labels : tensor<8xi64> -> tensor<8x4xf32>
    %p = ref.mul %hot, %logp : tensor<8x4xf32>
    %picked = ref.reduce_sum %p dims [0, 1] : tensor<8x4xf32>
    %loss = ref.scale %picked by -0.125 : tensor<f32>
    return %loss : tensor<f32>
  }

  dist.mesh @mesh axes = ["dp"] shape = [2]

  func.func @plan(%xb: tensor<4x4xf32> {dist.value = "x", dist.layout = #dist.layout<[dp, _]>},
                  %lb: tensor<4xi64> {dist.value = "labels", dist.layout = #dist.layout<[dp]>})
      -> (tensor<f32> {dist.value = "loss", dist.layout = #dist.layout<[]>})
      attributes {dist.mesh = @mesh} {
    %x = dist.all_to_all %xb over ["dp"] split_dim 0 concat_dim 0 : tensor<4x4xf32> -> tensor<4x4xf32>
    %l = dist.all_to_all %lb over ["dp"] split_dim 0 concat_dim 0 : tensor<4xi64> -> tensor<4xi64>
    %x0 = ref.slice %x offsets [0, 0] sizes [2, 4] : tensor<4x4xf32>
    %x1 = ref.slice %x offsets [2, 0] sizes [2, 4] : tensor<4x4xf32>
    %l0 = ref.slice %l offsets [0] sizes [2] : tensor<4xi64>
    %l1 = ref.slice %l offsets [2] sizes [2] : tensor<4xi64>
    %m_raw0 = ref.reduce_max %x0 dims [1] : tensor<2x4xf32>
    %m0 = ref.detach %m_raw0 : tensor<2xf32>
    %mb0 = ref.broadcast %m0 dims [0] : tensor<2xf32> -> tensor<2x4xf32>
    %z0 = ref.sub %x0, %mb0 : tensor<2x4xf32>
    %e0 = ref.exp %z0 : tensor<2x4xf32>
    %s0 = ref.reduce_sum %e0 dims [1] : tensor<2x4xf32>
    %ls0 = ref.log %s0 : tensor<2xf32>
    %lsb0 = ref.broadcast %ls0 dims [0] : tensor<2xf32> -> tensor<2x4xf32>
    %logp0 = ref.sub %z0, %lsb0 : tensor<2x4xf32>
    %hot0 = ref.one_hot %l0 : tensor<2xi64> -> tensor<2x4xf32>
    %p0 = ref.mul %hot0, %logp0 : tensor<2x4xf32>
    %c0 = ref.reduce_sum %p0 dims [0, 1] : tensor<2x4xf32>
    %m_raw1 = ref.reduce_max %x1 dims [1] : tensor<2x4xf32>
    %m1 = ref.detach %m_raw1 : tensor<2xf32>
    %mb1 = ref.broadcast %m1 dims [0] : tensor<2xf32> -> tensor<2x4xf32>
    %z1 = ref.sub %x1, %mb1 : tensor<2x4xf32>
    %e1 = ref.exp %z1 : tensor<2x4xf32>
    %s1 = ref.reduce_sum %e1 dims [1] : tensor<2x4xf32>
    %ls1 = ref.log %s1 : tensor<2xf32>
    %lsb1 = ref.broadcast %ls1 dims [0] : tensor<2xf32> -> tensor<2x4xf32>
    %logp1 = ref.sub %z1, %lsb1 : tensor<2x4xf32>
    %hot1 = ref.one_hot %l1 : tensor<2xi64> -> tensor<2x4xf32>
    %p1 = ref.mul %hot1, %logp1 : tensor<2x4xf32>
    %c1 = ref.reduce_sum %p1 dims [0, 1] : tensor<2x4xf32>
    %c = ref.add %c0, %c1 : tensor<f32>
    %t = dist.all_reduce %c over ["dp"] "sum" : tensor<f32> -> tensor<f32>
    %loss = ref.scale %t by -0.125 : tensor<f32>
    return %loss : tensor<f32>
  }
}
