// RUN: planproof-opt %s | planproof-opt | FileCheck %s
// Round-trip of every ref op through the custom assembly formats.

// CHECK-LABEL: func.func @all_ref_ops
func.func @all_ref_ops(%x: tensor<2x4xf32>, %w: tensor<4x3xf32>, %b: tensor<3xf32>,
                       %t: tensor<2x3xf32>) {
  // CHECK: ref.matmul %{{.*}}, %{{.*}} contract(1, 0) : tensor<2x4xf32>, tensor<4x3xf32>
  %y = ref.matmul %x, %w contract(1, 0) : tensor<2x4xf32>, tensor<4x3xf32>
  // CHECK: ref.matmul %{{.*}}, %{{.*}} contract(0, 0) : tensor<2x4xf32>, tensor<2x3xf32>
  %dw = ref.matmul %x, %t contract(0, 0) : tensor<2x4xf32>, tensor<2x3xf32>
  // CHECK: ref.bias_add %{{.*}}, %{{.*}} : tensor<2x3xf32>, tensor<3xf32>
  %yb = ref.bias_add %y, %b : tensor<2x3xf32>, tensor<3xf32>
  // CHECK: ref.add %{{.*}}, %{{.*}} : tensor<2x3xf32>
  %s = ref.add %yb, %t : tensor<2x3xf32>
  // CHECK: ref.sub %{{.*}}, %{{.*}} : tensor<2x3xf32>
  %d = ref.sub %s, %t : tensor<2x3xf32>
  // CHECK: ref.mul %{{.*}}, %{{.*}} : tensor<2x3xf32>
  %m = ref.mul %d, %t : tensor<2x3xf32>
  // CHECK: ref.gelu %{{.*}} : tensor<2x3xf32>
  %g = ref.gelu %m : tensor<2x3xf32>
  // CHECK: ref.gelu_grad %{{.*}}, %{{.*}} : tensor<2x3xf32>
  %gg = ref.gelu_grad %m, %g : tensor<2x3xf32>
  // CHECK: ref.scale %{{.*}} by 5.000000e-01 : tensor<2x3xf32>
  %h = ref.scale %gg by 0.5 : tensor<2x3xf32>
  // CHECK: ref.reduce_sum %{{.*}} dims [0] : tensor<2x3xf32>
  %r = ref.reduce_sum %h dims [0] : tensor<2x3xf32>
  // CHECK: ref.mse_loss %{{.*}}, %{{.*}} : tensor<2x3xf32>
  %l = ref.mse_loss %h, %t : tensor<2x3xf32>
  // CHECK: ref.mse_loss_grad %{{.*}}, %{{.*}} : tensor<2x3xf32>
  %dl = ref.mse_loss_grad %h, %t : tensor<2x3xf32>
  // CHECK: ref.sgd_update %{{.*}}, %{{.*}} lr 1.000000e-01 : tensor<4x3xf32>
  %wn = ref.sgd_update %w, %w lr 0.1 : tensor<4x3xf32>
  return
}
