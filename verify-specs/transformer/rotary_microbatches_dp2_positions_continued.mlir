// BUG: the second microbatch's positions continue the first's (rows 8..15 of the
// tables), as if microbatches were chunks of one sequence: its queries are rotated
// by the wrong angles.
module attributes {planproof.expect = {verdict = "violated", kind = "sharding", at = "%cos1"}} {
  func.func @reference(%x: tensor<4x8x4xf32> {ref.name = "x"},
                       %w: tensor<4x8x4xf32> {ref.name = "w"},
                       %cosall: tensor<16x4xf32> {ref.name = "cos"},
                       %sinall: tensor<16x4xf32> {ref.name = "sin"})
      -> (tensor<f32> {ref.name = "loss"}) attributes {ref.reference} {
    %cos = ref.slice %cosall offsets [0, 0] sizes [8, 4] : tensor<16x4xf32>
    %sin = ref.slice %sinall offsets [0, 0] sizes [8, 4] : tensor<16x4xf32>
    %r = ref.rotary %x, %cos, %sin : tensor<4x8x4xf32>, tensor<8x4xf32>
    %p = ref.mul %r, %w : tensor<4x8x4xf32>
    %loss = ref.reduce_sum %p dims [0, 1, 2] : tensor<4x8x4xf32>
    return %loss : tensor<f32>
  }

  dist.mesh @mesh axes = ["dp"] shape = [2]

  func.func @plan(%x: tensor<2x8x4xf32> {dist.value = "x", dist.layout = #dist.layout<[dp, _, _]>},
                  %w: tensor<2x8x4xf32> {dist.value = "w", dist.layout = #dist.layout<[dp, _, _]>},
                  %cosall: tensor<16x4xf32> {dist.value = "cos", dist.layout = #dist.layout<[_, _]>},
                  %sinall: tensor<16x4xf32> {dist.value = "sin", dist.layout = #dist.layout<[_, _]>})
      -> (tensor<f32> {dist.value = "loss", dist.layout = #dist.layout<[]>})
      attributes {dist.mesh = @mesh} {
    %x0 = ref.slice %x offsets [0, 0, 0] sizes [1, 8, 4] : tensor<2x8x4xf32>
    %w0 = ref.slice %w offsets [0, 0, 0] sizes [1, 8, 4] : tensor<2x8x4xf32>
    %cos0 = ref.slice %cosall offsets [0, 0] sizes [8, 4] : tensor<16x4xf32>
    %sin0 = ref.slice %sinall offsets [0, 0] sizes [8, 4] : tensor<16x4xf32>
    %r0 = ref.rotary %x0, %cos0, %sin0 : tensor<1x8x4xf32>, tensor<8x4xf32>
    %p0 = ref.mul %r0, %w0 : tensor<1x8x4xf32>
    %l0 = ref.reduce_sum %p0 dims [0, 1, 2] : tensor<1x8x4xf32>
    %x1 = ref.slice %x offsets [1, 0, 0] sizes [1, 8, 4] : tensor<2x8x4xf32>
    %w1 = ref.slice %w offsets [1, 0, 0] sizes [1, 8, 4] : tensor<2x8x4xf32>
    %cos1 = ref.slice %cosall offsets [8, 0] sizes [8, 4] : tensor<16x4xf32>
    %sin1 = ref.slice %sinall offsets [8, 0] sizes [8, 4] : tensor<16x4xf32>
    %r1 = ref.rotary %x1, %cos1, %sin1 : tensor<1x8x4xf32>, tensor<8x4xf32>
    %p1 = ref.mul %r1, %w1 : tensor<1x8x4xf32>
    %l1 = ref.reduce_sum %p1 dims [0, 1, 2] : tensor<1x8x4xf32>
    %l = ref.add %l0, %l1 : tensor<f32>
    %loss = dist.all_reduce %l over ["dp"] "sum" : tensor<f32> -> tensor<f32>
    return %loss : tensor<f32>
  }
}
