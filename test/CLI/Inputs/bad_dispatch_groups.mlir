// 6 tokens cannot form 4 capacity groups.
module {
  func.func @reference(%m: tensor<6x4xf32> {ref.name = "m"}) -> (tensor<6x4x8xf32> {ref.name = "d"})
      attributes {ref.reference} {
    %d = ref.capacity_dispatch %m capacity 2 groups 4 : tensor<6x4xf32>
    return %d : tensor<6x4x8xf32>
  }
}
