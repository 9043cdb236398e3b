// The derived backward pass runs where its ref.grad runs: on a pipelined plan's stage,
// every op ref.grad expands into carries the grad op's dist.stage (otherwise the ops
// would run on every stage and read values of stage 1 that no message carries).
// RUN: planproof-opt --ref-expand-grad %s | FileCheck %s
// CHECK-LABEL: func.func @staged
// CHECK:      ref.reduce_sum
// CHECK-NEXT: ref.constant 1.000000e+00 {dist.stage = 1 : i64}
// CHECK-NEXT: ref.broadcast %{{.*}} dims [] {dist.stage = 1 : i64}
// CHECK-NEXT: ref.gelu_grad %{{.*}} {dist.stage = 1 : i64}
// CHECK-NEXT: ref.matmul %arg0, %{{.*}} contract(0, 0) {dist.stage = 1 : i64}
// CHECK-NEXT: return
dist.mesh @mesh axes = ["pp"] shape = [2]
func.func @staged(%h: tensor<2x4xf32>, %w: tensor<4x4xf32>) -> tensor<4x4xf32>
    attributes {dist.mesh = @mesh, dist.pipeline = "pp"} {
  %z = ref.matmul %h, %w contract(1, 0) {dist.stage = 1} : tensor<2x4xf32>, tensor<4x4xf32>
  %a = ref.gelu %z {dist.stage = 1} : tensor<2x4xf32>
  %l = ref.reduce_sum %a dims [0, 1] {dist.stage = 1} : tensor<2x4xf32>
  %dw = ref.grad %l wrt %w {dist.stage = 1} : tensor<f32>, tensor<4x4xf32> -> tensor<4x4xf32>
  return %dw : tensor<4x4xf32>
}
