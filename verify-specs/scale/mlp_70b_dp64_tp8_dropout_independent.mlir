// Megatron-style MLP at Llama3-70B's sizes (hidden 8192, FFN 28672) on dp 64 x tp 8, in
// RNG mode independent: the tensor-parallel region's mask draws from the model-parallel
// stream (key seed + 2718 + tp rank), each data-parallel rank from its own counter
// range (offset + dp rank x its block's elements); the replicated output's mask from the
// default stream (key seed) past the first mask's counters. The element engine cannot
// run it (about 10^10 elements); the layout engine proves the streams apart with Z3 over
// symbolic ranks and elements and renames each draw to its block of the reference's mask.
// Its seeded bug: ..._same_counter_over_dp.mlir.
module attributes {planproof.expect = {verdict = "verified", engine = "layout"}} {
  func.func @reference(%x: tensor<262144x8192xf32> {ref.name = "x"},
                       %w1: tensor<8192x28672xf32> {ref.name = "w1"},
                       %w2: tensor<28672x8192xf32> {ref.name = "w2"},
                       %seed: index {ref.name = "seed"},
                       %offset: index {ref.name = "offset"})
      -> (tensor<262144x8192xf32> {ref.name = "out"},
          index {ref.name = "offset_next", ref.updates = "offset"})
      attributes {ref.reference} {
    %h = ref.matmul %x, %w1 contract(1, 0) : tensor<262144x8192xf32>, tensor<8192x28672xf32>
    %a = ref.gelu %h : tensor<262144x28672xf32>
    %m1 = ref.dropout_mask %seed, %offset p 0.1 : tensor<262144x28672xf32>
    %ad = ref.mul %a, %m1 : tensor<262144x28672xf32>
    %y = ref.matmul %ad, %w2 contract(1, 0) : tensor<262144x28672xf32>, tensor<28672x8192xf32>
    %n1 = arith.constant 7516192768 : index
    %offset2 = arith.addi %offset, %n1 : index
    %m2 = ref.dropout_mask %seed, %offset2 p 0.1 : tensor<262144x8192xf32>
    %out = ref.mul %y, %m2 : tensor<262144x8192xf32>
    %n = arith.constant 9663676416 : index
    %offset_next = arith.addi %offset, %n : index
    return %out, %offset_next : tensor<262144x8192xf32>, index
  }

  dist.mesh @mesh axes = ["dp", "tp"] shape = [64, 8]

  func.func @plan(%x: tensor<4096x8192xf32> {dist.value = "x", dist.layout = #dist.layout<[dp, _]>},
                  %w1: tensor<8192x3584xf32> {dist.value = "w1", dist.layout = #dist.layout<[_, tp]>},
                  %w2: tensor<3584x8192xf32> {dist.value = "w2", dist.layout = #dist.layout<[tp, _]>},
                  %seed: index {dist.value = "seed"},
                  %offset: index {dist.value = "offset"})
      -> (tensor<4096x8192xf32> {dist.value = "out", dist.layout = #dist.layout<[dp, _]>},
          index {dist.value = "offset_next"})
      attributes {dist.mesh = @mesh, dist.rng = "independent"} {
    %d = dist.axis_index "dp" : index
    %t = dist.axis_index "tp" : index
    %h = ref.matmul %x, %w1 contract(1, 0) : tensor<4096x8192xf32>, tensor<8192x3584xf32>
    %a = ref.gelu %h : tensor<4096x3584xf32>
    %fork = arith.constant 2718 : index
    %mp = arith.addi %seed, %fork : index
    %key1 = arith.addi %mp, %t : index
    %blk1 = arith.constant 14680064 : index
    %skip1 = arith.muli %d, %blk1 : index
    %ctr1 = arith.addi %offset, %skip1 : index
    %m1 = ref.dropout_mask %key1, %ctr1 p 0.1 {dist.draws = "m1", dist.layout = #dist.layout<[dp, tp]>} : tensor<4096x3584xf32>
    %ad = ref.mul %a, %m1 : tensor<4096x3584xf32>
    %y_part = ref.matmul %ad, %w2 contract(1, 0) : tensor<4096x3584xf32>, tensor<3584x8192xf32>
    %y = dist.all_reduce %y_part over ["tp"] "sum" : tensor<4096x8192xf32> -> tensor<4096x8192xf32>
    %n1 = arith.constant 7516192768 : index
    %base2 = arith.addi %offset, %n1 : index
    %blk2 = arith.constant 33554432 : index
    %skip2 = arith.muli %d, %blk2 : index
    %ctr2 = arith.addi %base2, %skip2 : index
    %m2 = ref.dropout_mask %seed, %ctr2 p 0.1 {dist.draws = "m2", dist.layout = #dist.layout<[dp, _]>} : tensor<4096x8192xf32>
    %out = ref.mul %y, %m2 : tensor<4096x8192xf32>
    %n = arith.constant 9663676416 : index
    %offset_next = arith.addi %offset, %n : index
    return %out, %offset_next : tensor<4096x8192xf32>, index
  }
}
