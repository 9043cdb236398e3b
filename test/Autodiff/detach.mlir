// ref.detach is the identity with zero derivative: d/dx sum(detach(x) * x) = x, not 2x.
// RUN: planproof verify %s | FileCheck %s
// CHECK: verified
module attributes {planproof.expect = {verdict = "verified"}} {
  func.func @reference(%x: tensor<3xf32> {ref.name = "x"}) -> (tensor<3xf32> {ref.name = "dx"})
      attributes {ref.reference} {
    %d = ref.detach %x : tensor<3xf32>
    %p = ref.mul %d, %x : tensor<3xf32>
    %l = ref.reduce_sum %p dims [0] : tensor<3xf32>
    %dx = ref.grad %l wrt %x : tensor<f32>, tensor<3xf32> -> tensor<3xf32>
    return %dx : tensor<3xf32>
  }
  dist.mesh @mesh axes = ["r"] shape = [1]
  func.func @plan(%x: tensor<3xf32> {dist.value = "x", dist.layout = #dist.layout<[_]>})
      -> (tensor<3xf32> {dist.value = "dx", dist.layout = #dist.layout<[_]>})
      attributes {dist.mesh = @mesh} {
    return %x : tensor<3xf32>
  }
}
