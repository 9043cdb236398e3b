// The per-rank random streams are saved, but the resuming plan never reads them back.
module {
  func.func @reference(%x: tensor<4x3xf32> {ref.name = "x"},
                       %seed: index {ref.name = "seed"},
                       %offset: index {ref.name = "offset"})
      -> (tensor<4x3xf32> {ref.name = "y"},
          index {ref.name = "offset_next", ref.updates = "offset"})
      attributes {ref.reference} {
    %m = ref.dropout_mask %seed, %offset p 0.1 : tensor<4x3xf32>
    %y = ref.mul %x, %m : tensor<4x3xf32>
    %n = arith.constant 12 : index
    %offset_next = arith.addi %offset, %n : index
    return %y, %offset_next : tensor<4x3xf32>, index
  }

  dist.mesh @mesh axes = ["dp", "tp"] shape = [2, 2]
  dist.mesh @mesh_b axes = ["dp"] shape = [2]

  func.func @plan(%x: tensor<2x3xf32> {dist.value = "x", dist.layout = #dist.layout<[dp, _]>},
                  %seed: index {dist.value = "seed"},
                  %offset: index {dist.value = "offset"})
      -> (tensor<2x3xf32> {dist.value = "y", dist.layout = #dist.layout<[dp, _]>},
          index {dist.value = "offset_next"})
      attributes {dist.mesh = @mesh} {
    // Each data rank has its own stream: counters from offset + 6 * dp rank (the tp
    // ranks of a data rank share it: the activation is replicated over tp).
    %r = dist.axis_index "dp" : index
    %six = arith.constant 6 : index
    %skip = arith.muli %r, %six : index
    %stream = arith.addi %offset, %skip : index
    %m = ref.dropout_mask %seed, %stream p 0.1 : tensor<2x3xf32>
    %y = ref.mul %x, %m : tensor<2x3xf32>
    %n = arith.constant 12 : index
    %offset_next = arith.addi %offset, %n : index
    %stream_next = arith.addi %offset_next, %skip : index
    // Save the shared counter once, and every data rank's own stream.
    dist.save %offset_next as "offset" shape [] at [] {on = {dp = 0 : i64, tp = 0 : i64}} : index
    dist.save %stream_next as "rng" shape [2] at [%r] {on = {tp = 0 : i64}} : index
    return %y, %offset_next : tensor<2x3xf32>, index
  }

  func.func @resume(%x: tensor<2x3xf32> {dist.value = "x", dist.layout = #dist.layout<[dp, _]>},
                    %seed: index {dist.value = "seed"})
      -> (tensor<2x3xf32> {dist.value = "y", dist.layout = #dist.layout<[dp, _]>},
          index {dist.value = "offset_next"})
      attributes {dist.mesh = @mesh_b, dist.resume} {
    %r = dist.axis_index "dp" : index
    %offset = dist.load "offset" shape [] at [] : index
    %six = arith.constant 6 : index
    %skip = arith.muli %r, %six : index
    %stream = arith.addi %offset, %skip : index
    %m = ref.dropout_mask %seed, %stream p 0.1 : tensor<2x3xf32>
    %y = ref.mul %x, %m : tensor<2x3xf32>
    %n = arith.constant 12 : index
    %offset_next = arith.addi %offset, %n : index
    return %y, %offset_next : tensor<2x3xf32>, index
  }
}
