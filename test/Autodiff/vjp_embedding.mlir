// The derived table gradient of an embedding lookup against a hand-written scatter-add.
// RUN: planproof verify %s | FileCheck %s
// CHECK: verified
module attributes {planproof.expect = {verdict = "verified"}} {
  func.func @reference(%table: tensor<5x2xf32> {ref.name = "table"},
                       %ids: tensor<3xi64> {ref.name = "ids", ref.bound = 5 : i64},
                       %c: tensor<3x2xf32> {ref.name = "c"})
      -> (tensor<5x2xf32> {ref.name = "d_table"}) attributes {ref.reference} {
    %y = ref.embedding %table, %ids : tensor<5x2xf32>, tensor<3xi64>
    %yc = ref.mul %y, %c : tensor<3x2xf32>
    %loss = ref.reduce_sum %yc dims [0, 1] : tensor<3x2xf32>
    %d = ref.grad %loss wrt %table : tensor<f32>, tensor<5x2xf32> -> tensor<5x2xf32>
    return %d : tensor<5x2xf32>
  }
  dist.mesh @mesh axes = ["r"] shape = [1]
  func.func @plan(%table: tensor<5x2xf32> {dist.value = "table", dist.layout = #dist.layout<[_, _]>},
                  %ids: tensor<3xi64> {dist.value = "ids", dist.layout = #dist.layout<[_]>},
                  %c: tensor<3x2xf32> {dist.value = "c", dist.layout = #dist.layout<[_, _]>})
      -> (tensor<5x2xf32> {dist.value = "d_table", dist.layout = #dist.layout<[_, _]>})
      attributes {dist.mesh = @mesh} {
    %d = ref.embedding_grad %c, %ids : tensor<3x2xf32>, tensor<3xi64> -> tensor<5x2xf32>
    return %d : tensor<5x2xf32>
  }
}
