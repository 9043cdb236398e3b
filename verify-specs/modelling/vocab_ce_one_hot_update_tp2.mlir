// torchtitan's loss-parallel cross-entropy (tp=2) with integer labels, forward and the
// logits' gradient: the vocabulary split over tp, each rank's one-hot columns from its
// first class. The gradient's update of the picked entries is written as torchtitan's
// backward computes it: the shard's one-hot times ((1 - its row sums) - 1). A row sum
// of a shard's one-hot is 1 exactly where the label is in the shard, so the update is
// minus the one-hot on every rank -- which the layout engine reads from the row sums'
// summands (docs/layout-engine.md, "A one-hot's block times a function of its row
// sums"). Labels are symbolic: the proof covers every label sequence.
module attributes {planproof.expect = {verdict = "verified"}} {
  func.func @reference(%logits: tensor<4x8xf32> {ref.name = "logits"},
                       %labels: tensor<4xi64> {ref.name = "labels", ref.bound = 8 : i64},
                       %mask: tensor<4xf32> {ref.name = "mask"})
      -> (tensor<f32> {ref.name = "loss"}, tensor<4x8xf32> {ref.name = "d_logits"})
      attributes {ref.reference} {
    %row_max = ref.reduce_max %logits dims [1] : tensor<4x8xf32>
    %row_max_c = ref.detach %row_max : tensor<4xf32>
    %row_max_b = ref.broadcast %row_max_c dims [0] : tensor<4xf32> -> tensor<4x8xf32>
    %shifted = ref.sub %logits, %row_max_b : tensor<4x8xf32>
    %exps = ref.exp %shifted : tensor<4x8xf32>
    %sum_exp = ref.reduce_sum %exps dims [1] : tensor<4x8xf32>
    %log_sum = ref.log %sum_exp : tensor<4xf32>
    %hot = ref.one_hot %labels : tensor<4xi64> -> tensor<4x8xf32>
    %label_shifted = ref.mul %hot, %shifted : tensor<4x8xf32>
    %picked = ref.reduce_sum %label_shifted dims [1] : tensor<4x8xf32>
    %token_loss = ref.sub %log_sum, %picked : tensor<4xf32>
    %masked_loss = ref.mul %mask, %token_loss : tensor<4xf32>
    %loss_sum = ref.reduce_sum %masked_loss dims [0] : tensor<4xf32>
    %tokens = ref.reduce_sum %mask dims [0] : tensor<4xf32>
    %loss = ref.div %loss_sum, %tokens : tensor<f32>
    %sum_exp_b = ref.broadcast %sum_exp dims [0] : tensor<4xf32> -> tensor<4x8xf32>
    %probs = ref.div %exps, %sum_exp_b : tensor<4x8xf32>
    %diff = ref.sub %probs, %hot : tensor<4x8xf32>
    %tokens_b = ref.broadcast %tokens dims [] : tensor<f32> -> tensor<4xf32>
    %weight = ref.div %mask, %tokens_b : tensor<4xf32>
    %weight_b = ref.broadcast %weight dims [0] : tensor<4xf32> -> tensor<4x8xf32>
    %d_logits = ref.mul %diff, %weight_b : tensor<4x8xf32>
    return %loss, %d_logits : tensor<f32>, tensor<4x8xf32>
  }

  dist.mesh @mesh axes = ["tp"] shape = [2]

  func.func @plan(%logits: tensor<4x4xf32> {dist.value = "logits", dist.layout = #dist.layout<[_, tp]>},
                  %labels: tensor<4xi64> {dist.value = "labels", dist.layout = #dist.layout<[_]>},
                  %mask: tensor<4xf32> {dist.value = "mask", dist.layout = #dist.layout<[_]>})
      -> (tensor<f32> {dist.value = "loss", dist.layout = #dist.layout<[]>},
          tensor<4x4xf32> {dist.value = "d_logits", dist.layout = #dist.layout<[_, tp]>})
      attributes {dist.mesh = @mesh} {
    %rank = dist.axis_index "tp" : index
    %cols = arith.constant 4 : index
    %three = arith.constant 3 : index
    %zero = arith.constant 0 : index
    %first = arith.muli %rank, %cols : index
    %row_max_local = ref.reduce_max %logits dims [1] : tensor<4x4xf32>
    %row_max = dist.all_reduce %row_max_local over ["tp"] "max" : tensor<4xf32> -> tensor<4xf32>
    %row_max_c = ref.detach %row_max : tensor<4xf32>
    %row_max_b = ref.broadcast %row_max_c dims [0] : tensor<4xf32> -> tensor<4x4xf32>
    %shifted = ref.sub %logits, %row_max_b : tensor<4x4xf32>
    %exps = ref.exp %shifted : tensor<4x4xf32>
    %sum_exp_local = ref.reduce_sum %exps dims [1] : tensor<4x4xf32>
    %sum_exp = dist.all_reduce %sum_exp_local over ["tp"] "sum" : tensor<4xf32> -> tensor<4xf32>
    %log_sum = ref.log %sum_exp : tensor<4xf32>
    // This rank's classes: labels of other shards pick nothing here.
    %hot = ref.one_hot %labels offset %first : tensor<4xi64> -> tensor<4x4xf32>
    %label_shifted = ref.mul %hot, %shifted : tensor<4x4xf32>
    %picked_local = ref.reduce_sum %label_shifted dims [1] : tensor<4x4xf32>
    %picked = dist.all_reduce %picked_local over ["tp"] "sum" : tensor<4xf32> -> tensor<4xf32>
    %token_loss = ref.sub %log_sum, %picked : tensor<4xf32>
    %masked_loss = ref.mul %mask, %token_loss : tensor<4xf32>
    %loss_sum = ref.reduce_sum %masked_loss dims [0] : tensor<4xf32>
    %tokens = ref.reduce_sum %mask dims [0] : tensor<4xf32>
    %loss = ref.div %loss_sum, %tokens : tensor<f32>
    // The logits' gradient, softmax minus the one-hot: each rank its own columns.
    %sum_exp_b = ref.broadcast %sum_exp dims [0] : tensor<4xf32> -> tensor<4x4xf32>
    %probs = ref.div %exps, %sum_exp_b : tensor<4x4xf32>
    // torchtitan's update of the picked entries: the one-hot times (1 - its row sum) - 1.
    %in_shard = ref.reduce_sum %hot dims [1] : tensor<4x4xf32>
    %one = ref.constant 1.0 : tensor<4xf32>
    %keep = ref.sub %one, %in_shard : tensor<4xf32>
    %update = ref.sub %keep, %one : tensor<4xf32>
    %update_b = ref.broadcast %update dims [0] : tensor<4xf32> -> tensor<4x4xf32>
    %minus_hot = ref.mul %hot, %update_b : tensor<4x4xf32>
    %diff = ref.add %probs, %minus_hot : tensor<4x4xf32>
    %tokens_b = ref.broadcast %tokens dims [] : tensor<f32> -> tensor<4xf32>
    %weight = ref.div %mask, %tokens_b : tensor<4xf32>
    %weight_b = ref.broadcast %weight dims [0] : tensor<4xf32> -> tensor<4x4xf32>
    %d_logits = ref.mul %diff, %weight_b : tensor<4x4xf32>
    return %loss, %d_logits : tensor<f32>, tensor<4x4xf32>
  }
}
