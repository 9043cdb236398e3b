// A loss divided by a token count and multiplied back (gradient accumulation that
// undoes a per-microbatch mean): recip(t) * t = 1 where t is known non-zero (a count of
// 0/1 mask entries plus one).
module {
  func.func @reference(%x: tensor<4xf32> {ref.name = "x"},
                       %m: tensor<4xf32> {ref.name = "m", ref.bound = 2 : i64})
      -> (tensor<f32> {ref.name = "loss"}) attributes {ref.reference} {
    %s = ref.reduce_sum %x dims [0] : tensor<4xf32>
    return %s : tensor<f32>
  }
  dist.mesh @mesh axes = ["dp"] shape = [2]
  func.func @plan(%x: tensor<2xf32> {dist.value = "x", dist.layout = #dist.layout<[dp]>},
                  %m: tensor<2xf32> {dist.value = "m", dist.layout = #dist.layout<[dp]>})
      -> (tensor<f32> {dist.value = "loss", dist.layout = #dist.layout<[], sum = [dp]>})
      attributes {dist.mesh = @mesh} {
    %s = ref.reduce_sum %x dims [0] : tensor<2xf32>
    %count0 = ref.reduce_sum %m dims [0] : tensor<2xf32>
    %one = ref.constant 1.0 : tensor<f32>
    %count = ref.add %count0, %one : tensor<f32>
    %mean = ref.div %s, %count : tensor<f32>
    %back = ref.mul %mean, %count : tensor<f32>
    return %back : tensor<f32>
  }
}
