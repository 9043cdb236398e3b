// BUG: the vocabulary-parallel cross-entropy of vocab_ce_pick_logit_tp2.mlir without the
// all-reduce of the label's picked logit: each rank subtracts its own share (the logit
// where the label is one of its classes, else 0) from the log-sum-exp. The picked
// logit of x - max is a value of the plan's own (the reference picks log-probabilities),
// so the walk back from the loss ends there; the op named is the subtraction, where
// the pick, reduced over tp, would give the reference's negated log-probability.
module attributes {planproof.expect = {verdict = "violated", kind = "reduction", at = "%token_loss"}} {
  func.func @reference(%x: tensor<3x4xf32> {ref.name = "x"},
                       %labels: tensor<3xi64> {ref.name = "labels", ref.bound = 4 : i64})
      -> (tensor<f32> {ref.name = "loss"})
      attributes {ref.reference} {
    %m_raw = ref.reduce_max %x dims [1] : tensor<3x4xf32>
    %m = ref.detach %m_raw : tensor<3xf32>
    %mb = ref.broadcast %m dims [0] : tensor<3xf32> -> tensor<3x4xf32>
    %z = ref.sub %x, %mb : tensor<3x4xf32>
    %e = ref.exp %z : tensor<3x4xf32>
    %s = ref.reduce_sum %e dims [1] : tensor<3x4xf32>
    %ls = ref.log %s : tensor<3xf32>
    %lsb = ref.broadcast %ls dims [0] : tensor<3xf32> -> tensor<3x4xf32>
    %logp = ref.sub %z, %lsb : tensor<3x4xf32>
    %hot = ref.one_hot %labels : tensor<3xi64> -> tensor<3x4xf32>
    %p = ref.mul %hot, %logp : tensor<3x4xf32>
    %picked = ref.reduce_sum %p dims [0, 1] : tensor<3x4xf32>
    %loss = ref.scale %picked by -0.33333333333333331 : tensor<f32>
    return %loss : tensor<f32>
  }

  dist.mesh @mesh axes = ["tp"] shape = [2]

  func.func @plan(%x: tensor<3x2xf32> {dist.value = "x", dist.layout = #dist.layout<[_, tp]>},
                  %labels: tensor<3xi64> {dist.value = "labels", dist.layout = #dist.layout<[_]>})
      -> (tensor<f32> {dist.value = "loss", dist.layout = #dist.layout<[]>})
      attributes {dist.mesh = @mesh} {
    %local_max = ref.reduce_max %x dims [1] : tensor<3x2xf32>
    %m_all = dist.all_reduce %local_max over ["tp"] "max" : tensor<3xf32> -> tensor<3xf32>
    %m = ref.detach %m_all : tensor<3xf32>
    %mb = ref.broadcast %m dims [0] : tensor<3xf32> -> tensor<3x2xf32>
    %z = ref.sub %x, %mb : tensor<3x2xf32>
    %e = ref.exp %z : tensor<3x2xf32>
    %local_sum = ref.reduce_sum %e dims [1] : tensor<3x2xf32>
    %s = dist.all_reduce %local_sum over ["tp"] "sum" : tensor<3xf32> -> tensor<3xf32>
    %ls = ref.log %s : tensor<3xf32>
    %r = dist.axis_index "tp" : index
    %two = arith.constant 2 : index
    %first = arith.muli %r, %two : index
    %hot = ref.one_hot %labels offset %first : tensor<3xi64> -> tensor<3x2xf32>
    %p = ref.mul %hot, %z : tensor<3x2xf32>
    %local_pick = ref.reduce_sum %p dims [1] : tensor<3x2xf32>
    %token_loss = ref.sub %ls, %local_pick : tensor<3xf32>
    %loss = ref.reduce_mean %token_loss dims [0] : tensor<3xf32>
    return %loss : tensor<f32>
  }
}
