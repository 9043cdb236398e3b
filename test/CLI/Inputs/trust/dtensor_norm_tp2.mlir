// The gradient norm as DTensor takes it of a tensor-parallel gradient: each rank the
// norm of its shard (sqrt of its sum of squares), squared again, all-reduced, sqrt.
// Correct: sqrt(s)^2 = s for a sum of squares s.
module {
  func.func @reference(%g: tensor<4x4xf32> {ref.name = "g"}) -> (tensor<f32> {ref.name = "norm"})
      attributes {ref.reference} {
    %sq = ref.mul %g, %g : tensor<4x4xf32>
    %s = ref.reduce_sum %sq dims [0, 1] : tensor<4x4xf32>
    %norm = ref.sqrt %s : tensor<f32>
    return %norm : tensor<f32>
  }
  dist.mesh @mesh axes = ["tp"] shape = [2]
  func.func @plan(%g: tensor<4x2xf32> {dist.value = "g", dist.layout = #dist.layout<[_, tp]>})
      -> (tensor<f32> {dist.value = "norm", dist.layout = #dist.layout<[]>})
      attributes {dist.mesh = @mesh} {
    %sq = ref.mul %g, %g : tensor<4x2xf32>
    %s_local = ref.reduce_sum %sq dims [0, 1] : tensor<4x2xf32>
    %n_local = ref.sqrt %s_local : tensor<f32>
    %n_sq = ref.mul %n_local, %n_local : tensor<f32>
    %s = dist.all_reduce %n_sq over ["tp"] "sum" : tensor<f32> -> tensor<f32>
    %norm = ref.sqrt %s : tensor<f32>
    return %norm : tensor<f32>
  }
}
