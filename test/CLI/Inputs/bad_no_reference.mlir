module {
  dist.mesh @mesh axes = ["tp"] shape = [2]
  func.func @plan(%x: tensor<2xf32> {dist.value = "x", dist.layout = #dist.layout<[_]>})
      attributes {dist.mesh = @mesh} {
    return
  }
}
