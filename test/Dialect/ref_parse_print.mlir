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

// CHECK-LABEL: func.func @transformer_ops
func.func @transformer_ops(%x: tensor<2x4xf32>, %v: tensor<4xf32>, %q: tensor<2x3x4xf32>,
                           %cs: tensor<3x4xf32>, %lab: tensor<2x4xf32>, %m: tensor<2xf32>) {
  // CHECK: ref.constant 1.000000e+00 : tensor<4xf32>
  %ones = ref.constant 1.0 : tensor<4xf32>
  // CHECK: ref.exp %{{.*}} : tensor<2x4xf32>
  %0 = ref.exp %x : tensor<2x4xf32>
  // CHECK: ref.log %{{.*}} : tensor<2x4xf32>
  %1 = ref.log %0 : tensor<2x4xf32>
  // CHECK: ref.rsqrt %{{.*}} : tensor<2x4xf32>
  %2 = ref.rsqrt %0 : tensor<2x4xf32>
  // CHECK: ref.recip %{{.*}} : tensor<2x4xf32>
  %3 = ref.recip %0 : tensor<2x4xf32>
  // CHECK: ref.silu %{{.*}} : tensor<2x4xf32>
  %4 = ref.silu %x : tensor<2x4xf32>
  // CHECK: ref.silu_grad %{{.*}}, %{{.*}} : tensor<2x4xf32>
  %5 = ref.silu_grad %x, %4 : tensor<2x4xf32>
  // CHECK: ref.div %{{.*}}, %{{.*}} : tensor<2x4xf32>
  %6 = ref.div %x, %0 : tensor<2x4xf32>
  // CHECK: ref.maximum %{{.*}}, %{{.*}} : tensor<2x4xf32>
  %7 = ref.maximum %x, %6 : tensor<2x4xf32>
  // CHECK: ref.transpose %{{.*}} perm [1, 0] : tensor<2x4xf32>
  %8 = ref.transpose %x perm [1, 0] : tensor<2x4xf32>
  // CHECK: ref.reshape %{{.*}} : tensor<2x4xf32> -> tensor<2x2x2xf32>
  %9 = ref.reshape %x : tensor<2x4xf32> -> tensor<2x2x2xf32>
  // CHECK: ref.broadcast %{{.*}} dims [1] : tensor<4xf32> -> tensor<2x4xf32>
  %10 = ref.broadcast %v dims [1] : tensor<4xf32> -> tensor<2x4xf32>
  // CHECK: ref.slice %{{.*}} offsets [0, 2] sizes [2, 2] : tensor<2x4xf32>
  %11 = ref.slice %x offsets [0, 2] sizes [2, 2] : tensor<2x4xf32>
  // CHECK: ref.concat %{{.*}}, %{{.*}} dim 1 : tensor<2x4xf32>, tensor<2x2xf32>
  %12 = ref.concat %x, %11 dim 1 : tensor<2x4xf32>, tensor<2x2xf32>
  // CHECK: ref.reduce_max %{{.*}} dims [1] : tensor<2x4xf32>
  %13 = ref.reduce_max %x dims [1] : tensor<2x4xf32>
  // CHECK: ref.reduce_mean %{{.*}} dims [0, 1] : tensor<2x4xf32>
  %14 = ref.reduce_mean %x dims [0, 1] : tensor<2x4xf32>
  // CHECK: ref.batch_matmul %{{.*}}, %{{.*}} contract(2, 2) : tensor<2x3x4xf32>, tensor<2x3x4xf32>
  %15 = ref.batch_matmul %q, %q contract(2, 2) : tensor<2x3x4xf32>, tensor<2x3x4xf32>
  // CHECK: ref.softmax %{{.*}} : tensor<2x3x3xf32>
  %16 = ref.softmax %15 : tensor<2x3x3xf32>
  // CHECK: ref.causal_softmax %{{.*}} : tensor<2x3x3xf32>
  %17 = ref.causal_softmax %15 : tensor<2x3x3xf32>
  // A context-parallel chunk: queries from global position 4 on, among 8 keys.
  // CHECK: ref.causal_softmax %{{.*}} offset %{{.*}} : tensor<2x2x8xf32>
  %qstart = arith.constant 4 : index
  %cz = ref.slice %17 offsets [0, 0, 0] sizes [2, 2, 3] : tensor<2x3x3xf32>
  %cz8 = ref.concat %cz, %cz, %cz dim 2 : tensor<2x2x3xf32>, tensor<2x2x3xf32>, tensor<2x2x3xf32>
  %cz8b = ref.slice %cz8 offsets [0, 0, 0] sizes [2, 2, 8] : tensor<2x2x9xf32>
  %c17 = ref.causal_softmax %cz8b offset %qstart : tensor<2x2x8xf32>
  // CHECK: ref.rms_norm %{{.*}}, %{{.*}} eps 9.9999999999999995E-7 : tensor<2x4xf32>, tensor<4xf32>
  %18 = ref.rms_norm %x, %v eps 1.0e-6 : tensor<2x4xf32>, tensor<4xf32>
  // CHECK: ref.layer_norm %{{.*}}, %{{.*}}, %{{.*}} eps 1.000000e-05 : tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>
  %19 = ref.layer_norm %x, %v, %v eps 1.0e-5 : tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>
  // CHECK: ref.rotary %{{.*}}, %{{.*}}, %{{.*}} : tensor<2x3x4xf32>, tensor<3x4xf32>
  %20 = ref.rotary %q, %cs, %cs : tensor<2x3x4xf32>, tensor<3x4xf32>
  // CHECK: ref.cross_entropy %{{.*}}, %{{.*}}, %{{.*}} : tensor<2x4xf32>, tensor<2xf32>
  %21 = ref.cross_entropy %x, %lab, %m : tensor<2x4xf32>, tensor<2xf32>
  return
}

// CHECK-LABEL: func.func @grad
func.func @grad(%x: tensor<2x4xf32>, %w: tensor<4xf32>) {
  %l = ref.mse_loss %x, %x : tensor<2x4xf32>
  // CHECK: ref.grad %{{.*}} wrt %{{.*}}, %{{.*}} : tensor<f32>, tensor<2x4xf32>, tensor<4xf32> -> tensor<2x4xf32>, tensor<4xf32>
  %g:2 = ref.grad %l wrt %x, %w : tensor<f32>, tensor<2x4xf32>, tensor<4xf32> -> tensor<2x4xf32>, tensor<4xf32>
  return
}

// CHECK-LABEL: func.func @embedding
func.func @embedding(%t: tensor<8x4xf32>, %ids: tensor<3xi64>, %g: tensor<3x4xf32>, %off: index) {
  // CHECK: ref.embedding %{{.*}}, %{{.*}} : tensor<8x4xf32>, tensor<3xi64>
  %x = ref.embedding %t, %ids : tensor<8x4xf32>, tensor<3xi64>
  // CHECK: ref.embedding %{{.*}}, %{{.*}} offset %{{.*}} : tensor<8x4xf32>, tensor<3xi64>
  %y = ref.embedding %t, %ids offset %off : tensor<8x4xf32>, tensor<3xi64>
  // CHECK: ref.embedding_grad %{{.*}}, %{{.*}} offset %{{.*}} : tensor<3x4xf32>, tensor<3xi64> -> tensor<8x4xf32>
  %d = ref.embedding_grad %g, %ids offset %off : tensor<3x4xf32>, tensor<3xi64> -> tensor<8x4xf32>
  // CHECK: ref.one_hot %{{.*}} : tensor<3xi64> -> tensor<3x8xf32>
  %h = ref.one_hot %ids : tensor<3xi64> -> tensor<3x8xf32>
  // CHECK: ref.one_hot %{{.*}} offset %{{.*}} : tensor<3xi64> -> tensor<3x4xf32>
  %hp = ref.one_hot %ids offset %off : tensor<3xi64> -> tensor<3x4xf32>
  return
}

// CHECK-LABEL: func.func @detach
func.func @detach(%x: tensor<2xf32>) {
  // CHECK: ref.detach %{{.*}} : tensor<2xf32>
  %d = ref.detach %x : tensor<2xf32>
  return
}

// CHECK-LABEL: func.func @norm_ops
func.func @norm_ops(%x: tensor<2xf32>) {
  // CHECK: ref.sqrt %{{.*}} {ref.role = "grad-norm"} : tensor<2xf32>
  %s = ref.sqrt %x {ref.role = "grad-norm"} : tensor<2xf32>
  // CHECK: ref.minimum %{{.*}}, %{{.*}} : tensor<2xf32>
  %m = ref.minimum %x, %s : tensor<2xf32>
  return
}

// CHECK-LABEL: func.func @random_and_step_ops
func.func @random_and_step_ops(%seed: index, %offset: index, %step: index) {
  // CHECK: ref.dropout_mask %{{.*}}, %{{.*}} p 1.000000e-01 : tensor<2x4xf32>
  %m = ref.dropout_mask %seed, %offset p 0.1 : tensor<2x4xf32>
  // CHECK: ref.power %{{.*}} base 9.000000e-01 : tensor<f32>
  %b = ref.power %step base 0.9 : tensor<f32>
  return
}

// Routing: a router's top-k choice and the capacity dispatch mask.
// CHECK-LABEL: func.func @routing
func.func @routing(%logits: tensor<8x4xf32>) {
  // CHECK: ref.topk_mask %{{.*}} k 2 : tensor<8x4xf32>
  %chosen = ref.topk_mask %logits k 2 : tensor<8x4xf32>
  // CHECK: ref.capacity_dispatch %{{.*}} capacity 3 groups 2 : tensor<8x4xf32>
  %d = ref.capacity_dispatch %chosen capacity 3 groups 2 : tensor<8x4xf32>
  %e = ref.reshape %d : tensor<8x4x6xf32> -> tensor<8x24xf32>
  return
}
