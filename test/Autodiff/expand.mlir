// RUN: planproof-opt %s --ref-expand-grad | FileCheck %s
// The derived backward pass of a linear layer with GeLU and MSE, as ref ops.

// CHECK-LABEL: func.func @mlp
func.func @mlp(%x: tensor<2x4xf32>, %w: tensor<4x3xf32>, %t: tensor<2x3xf32>)
    -> (tensor<4x3xf32>, tensor<2x4xf32>) {
  %h = ref.matmul %x, %w contract(1, 0) : tensor<2x4xf32>, tensor<4x3xf32>
  %a = ref.gelu %h : tensor<2x3xf32>
  %l = ref.mse_loss %a, %t : tensor<2x3xf32>
  // CHECK-NOT: ref.grad
  // CHECK: %[[ONE:.*]] = ref.constant 1.000000e+00 : tensor<f32>
  // CHECK: %[[DA0:.*]] = ref.mse_loss_grad
  // CHECK: %[[SEED:.*]] = ref.broadcast %[[ONE]] dims [] : tensor<f32> -> tensor<2x3xf32>
  // CHECK: %[[DA:.*]] = ref.mul %[[SEED]], %[[DA0]]
  // CHECK: %[[DH:.*]] = ref.gelu_grad %{{.*}}, %[[DA]]
  // CHECK-DAG: ref.matmul %[[DH]], %{{.*}} contract(1, 1) : tensor<2x3xf32>, tensor<4x3xf32>
  // CHECK-DAG: ref.matmul %{{.*}}, %[[DH]] contract(0, 0) : tensor<2x4xf32>, tensor<2x3xf32>
  %dw, %dx = ref.grad %l wrt %w, %x : tensor<f32>, tensor<4x3xf32>, tensor<2x4xf32> -> tensor<4x3xf32>, tensor<2x4xf32>
  return %dw, %dx : tensor<4x3xf32>, tensor<2x4xf32>
}
