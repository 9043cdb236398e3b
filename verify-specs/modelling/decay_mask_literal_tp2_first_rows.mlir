// BUG variant of decay_mask_literal_tp2.mlir: every rank uses the first rows of the decay
// mask instead of its own.
module attributes {planproof.expect = {verdict = "violated", kind = "sharding", at = "%mask"}} {
  func.func @reference(%w: tensor<4x2xf32> {ref.name = "w"}, %g: tensor<4x2xf32> {ref.name = "g"})
      -> (tensor<4x2xf32> {ref.name = "w_next", ref.updates = "w"}) attributes {ref.reference} {
    %mask = ref.literal [1.0, 1.0, 0.0, 1.0, 0.0, 0.0, 1.0, 1.0] : tensor<4x2xf32>
    %wm = ref.mul %w, %mask : tensor<4x2xf32>
    %decay = ref.scale %wm by 0.1 : tensor<4x2xf32>
    %upd = ref.add %g, %decay : tensor<4x2xf32>
    %w_next = ref.sgd_update %w, %upd lr 0.01 : tensor<4x2xf32>
    return %w_next : tensor<4x2xf32>
  }
  dist.mesh @mesh axes = ["dp"] shape = [2]
  func.func @plan(%w: tensor<2x2xf32> {dist.value = "w", dist.layout = #dist.layout<[dp, _]>},
                  %g: tensor<2x2xf32> {dist.value = "g", dist.layout = #dist.layout<[dp, _]>})
      -> (tensor<2x2xf32> {dist.value = "w_next", dist.layout = #dist.layout<[dp, _]>})
      attributes {dist.mesh = @mesh} {
    %mask_all = ref.literal [1.0, 1.0, 0.0, 1.0, 0.0, 0.0, 1.0, 1.0] : tensor<4x2xf32>
    // BUG: every rank takes the first rows of the mask.
    %mask = ref.slice %mask_all offsets [0, 0] sizes [2, 2] : tensor<4x2xf32>
    %wm = ref.mul %w, %mask : tensor<2x2xf32>
    %decay = ref.scale %wm by 0.1 : tensor<2x2xf32>
    %upd = ref.add %g, %decay : tensor<2x2xf32>
    %w_next = ref.sgd_update %w, %upd lr 0.01 : tensor<2x2xf32>
    return %w_next : tensor<2x2xf32>
  }
}
