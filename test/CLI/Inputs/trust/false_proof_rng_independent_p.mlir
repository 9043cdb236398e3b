module {
  func.func @reference(%x: tensor<4x8xf32> {ref.name = "x"},
                       %seed: index {ref.name = "seed"},
                       %offset: index {ref.name = "offset"})
      -> (tensor<4x8xf32> {ref.name = "y"},
          index {ref.name = "offset_next", ref.updates = "offset"})
      attributes {ref.reference} {
    %m = ref.dropout_mask %seed, %offset p 0.1 : tensor<4x8xf32>
    %y = ref.mul %x, %m : tensor<4x8xf32>
    %n = arith.constant 32 : index
    %offset_next = arith.addi %offset, %n : index
    return %y, %offset_next : tensor<4x8xf32>, index
  }

  dist.mesh @mesh axes = ["tp"] shape = [2]

  func.func @plan(%x: tensor<2x8xf32> {dist.value = "x", dist.layout = #dist.layout<[tp, _]>},
                  %seed: index {dist.value = "seed"},
                  %offset: index {dist.value = "offset"})
      -> (tensor<2x8xf32> {dist.value = "y", dist.layout = #dist.layout<[tp, _]>},
          index {dist.value = "offset_next"})
      attributes {dist.mesh = @mesh, dist.rng = "independent"} {
    %rank = dist.axis_index "tp" : index
    %block = arith.constant 16 : index
    %skip = arith.muli %rank, %block : index
    %key = arith.addi %seed, %rank : index
    %zero = arith.constant 0 : index
    %ctr = arith.addi %offset, %zero : index
    %m = ref.dropout_mask %key, %ctr p 0.9 {dist.draws = "m", dist.layout = #dist.layout<[tp, _]>} : tensor<2x8xf32>
    %y = ref.mul %x, %m : tensor<2x8xf32>
    %n = arith.constant 32 : index
    %offset_next = arith.addi %offset, %n : index
    return %y, %offset_next : tensor<2x8xf32>, index
  }
}
