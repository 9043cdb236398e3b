// BUG: the second microbatch's mask is built with query positions 6..11, as if its
// sequences continued the first microbatch's: its queries are masked as if they came
// late in a longer sequence.
module attributes {planproof.expect = {verdict = "violated", kind = "masking", at = "%pos1"}} {
  func.func @reference(%s: tensor<4x6x6xf32> {ref.name = "s"},
                       %w: tensor<4x6x6xf32> {ref.name = "w"})
      -> (tensor<f32> {ref.name = "loss"}) attributes {ref.reference} {
    %zero = arith.constant 0 : index
    %pos = ref.position_mask %zero, %zero causal window 3 : tensor<6x6xf32>
    %p = ref.masked_softmax %s, %pos : tensor<4x6x6xf32>, tensor<6x6xf32>
    %q = ref.mul %p, %w : tensor<4x6x6xf32>
    %loss = ref.reduce_sum %q dims [0, 1, 2] : tensor<4x6x6xf32>
    return %loss : tensor<f32>
  }
  dist.mesh @mesh axes = ["dp"] shape = [2]
  func.func @plan(%s: tensor<2x6x6xf32> {dist.value = "s", dist.layout = #dist.layout<[dp, _, _]>},
                  %w: tensor<2x6x6xf32> {dist.value = "w", dist.layout = #dist.layout<[dp, _, _]>})
      -> (tensor<f32> {dist.value = "loss", dist.layout = #dist.layout<[]>})
      attributes {dist.mesh = @mesh} {
    %zero = arith.constant 0 : index
    %pos = ref.position_mask %zero, %zero causal window 3 : tensor<6x6xf32>
    %s0 = ref.slice %s offsets [0, 0, 0] sizes [1, 6, 6] : tensor<2x6x6xf32>
    %w0 = ref.slice %w offsets [0, 0, 0] sizes [1, 6, 6] : tensor<2x6x6xf32>
    %p0 = ref.masked_softmax %s0, %pos : tensor<1x6x6xf32>, tensor<6x6xf32>
    %q0 = ref.mul %p0, %w0 : tensor<1x6x6xf32>
    %l0 = ref.reduce_sum %q0 dims [0, 1, 2] : tensor<1x6x6xf32>
    %s1 = ref.slice %s offsets [1, 0, 0] sizes [1, 6, 6] : tensor<2x6x6xf32>
    %w1 = ref.slice %w offsets [1, 0, 0] sizes [1, 6, 6] : tensor<2x6x6xf32>
    %six = arith.constant 6 : index
    %pos1 = ref.position_mask %six, %zero causal window 3 : tensor<6x6xf32>
    %p1 = ref.masked_softmax %s1, %pos1 : tensor<1x6x6xf32>, tensor<6x6xf32>
    %q1 = ref.mul %p1, %w1 : tensor<1x6x6xf32>
    %l1 = ref.reduce_sum %q1 dims [0, 1, 2] : tensor<1x6x6xf32>
    %l = ref.add %l0, %l1 : tensor<f32>
    %loss = dist.all_reduce %l over ["dp"] "sum" : tensor<f32> -> tensor<f32>
    return %loss : tensor<f32>
  }
}
