// RUN: planproof-opt %s | planproof-opt | FileCheck %s
// Round-trip of the mesh, the layout attribute in all its forms, and every dist op.

// CHECK: dist.mesh @mesh axes = ["dp", "tp"] shape = [2, 2]
dist.mesh @mesh axes = ["dp", "tp"] shape = [2, 2]

// CHECK-LABEL: func.func @plan
// CHECK-SAME: dist.layout = #dist.layout<[_, tp]>
// CHECK-SAME: dist.layout = #dist.layout<[(dp, tp), _]>
// CHECK-SAME: dist.layout = #dist.layout<[_, _], sum = [tp]>
// CHECK-SAME: dist.layout = #dist.layout<[], avg = [dp]>
// CHECK-SAME: dist.layout = #dist.layout<[dp], sum = [tp]>
// CHECK-SAME: dist.layout = #dist.layout<[_, tp in 3]>
// CHECK-SAME: attributes {dist.mesh = @mesh}
func.func @plan(%a: tensor<4x2xf32> {dist.value = "a", dist.layout = #dist.layout<[_, tp]>},
                %b: tensor<1x4xf32> {dist.value = "b", dist.layout = #dist.layout<[(dp, tp), _]>})
    -> (tensor<4x4xf32> {dist.value = "c", dist.layout = #dist.layout<[_, _], sum = [tp]>},
        tensor<f32> {dist.value = "d", dist.layout = #dist.layout<[], avg = [dp]>},
        tensor<2xf32> {dist.value = "e", dist.layout = #dist.layout<[dp], sum = [tp], max = []>},
        tensor<4x6xf32> {dist.value = "f", dist.layout = #dist.layout<[_, tp in 3]>})
    attributes {dist.mesh = @mesh} {
  // CHECK: dist.axis_index "tp" : index
  %i = dist.axis_index "tp" : index
  // CHECK: dist.all_gather %{{.*}} over ["tp"] dim 1 : tensor<4x2xf32> -> tensor<4x4xf32>
  %g = dist.all_gather %a over ["tp"] dim 1 : tensor<4x2xf32> -> tensor<4x4xf32>
  // CHECK: dist.all_reduce %{{.*}} over ["dp", "tp"] "sum" : tensor<4x4xf32> -> tensor<4x4xf32>
  %r = dist.all_reduce %g over ["dp", "tp"] "sum" : tensor<4x4xf32> -> tensor<4x4xf32>
  // CHECK: dist.reduce_scatter %{{.*}} over ["tp"] dim 0 "avg" : tensor<4x4xf32> -> tensor<2x4xf32>
  %s = dist.reduce_scatter %r over ["tp"] dim 0 "avg" : tensor<4x4xf32> -> tensor<2x4xf32>
  // CHECK: dist.shard_slice %{{.*}} over ["dp", "tp"] dim 1 : tensor<4x4xf32> -> tensor<4x1xf32>
  %l = dist.shard_slice %r over ["dp", "tp"] dim 1 : tensor<4x4xf32> -> tensor<4x1xf32>
  // CHECK: dist.all_reduce %{{.*}} over ["dp"] "max" : tensor<f32> -> tensor<f32>
  %z = ref.mse_loss %r, %r : tensor<4x4xf32>
  %m = dist.all_reduce %z over ["dp"] "max" : tensor<f32> -> tensor<f32>
  %e = ref.reduce_sum %s dims [1] : tensor<2x4xf32>
  %f = ref.concat %r, %s dim 0 : tensor<4x4xf32>, tensor<2x4xf32>
  %f2 = ref.transpose %f perm [1, 0] : tensor<6x4xf32>
  %f3 = ref.transpose %f2 perm [1, 0] : tensor<4x6xf32>
  return %r, %m, %e, %f2 : tensor<4x4xf32>, tensor<f32>, tensor<2xf32>, tensor<4x6xf32>
}

// CHECK-LABEL: func.func @independent_draws
// CHECK-SAME: dist.rng = "independent"
func.func @independent_draws(%seed: index, %offset: index) attributes {dist.mesh = @mesh, dist.rng = "independent"} {
  // CHECK: ref.dropout_mask %{{.*}}, %{{.*}} p 1.000000e-01 {dist.block_offset = array<i64: 2, 0>, dist.draws = "m", dist.layout = #dist.layout<[tp, _]>} : tensor<2x4xf32>
  %m = ref.dropout_mask %seed, %offset p 0.1 {dist.draws = "m", dist.layout = #dist.layout<[tp, _]>, dist.block_offset = array<i64: 2, 0>} : tensor<2x4xf32>
  return
}

// CHECK-LABEL: func.func @checkpoint_ops
func.func @checkpoint_ops(%m: tensor<13xf32>, %t: index) attributes {dist.mesh = @mesh} {
  %r = dist.axis_index "dp" : index
  // CHECK: dist.save %{{.*}} as "m" shape [25] at [%{{.*}}] : tensor<13xf32>
  dist.save %m as "m" shape [25] at [%r] : tensor<13xf32>
  // CHECK: dist.save %{{.*}} as "t" shape [] at [] {on = {dp = 0 : i64}} : index
  dist.save %t as "t" shape [] at [] {on = {dp = 0 : i64}} : index
  // CHECK: dist.load "m" shape [25] at [%{{.*}}] : tensor<13xf32>
  %l = dist.load "m" shape [25] at [%r] : tensor<13xf32>
  // CHECK: dist.load "t" shape [] at [] : index
  %lt = dist.load "t" shape [] at [] : index
  return
}

// CHECK: dist.mesh @pmesh axes = ["dp", "pp"] shape = [2, 2]
dist.mesh @pmesh axes = ["dp", "pp"] shape = [2, 2]

// CHECK-LABEL: func.func @pipeline_ops
// CHECK-SAME: dist.stage = 0
// CHECK-SAME: dist.pipeline = "pp"
func.func @pipeline_ops(%x: tensor<2x4xf32> {dist.value = "x", dist.layout = #dist.layout<[dp, _]>, dist.stage = 0})
    attributes {dist.mesh = @pmesh, dist.pipeline = "pp"} {
  // CHECK: ref.gelu %{{.*}} {dist.stage = 0 : i64} : tensor<2x4xf32>
  %a = ref.gelu %x {dist.stage = 0} : tensor<2x4xf32>
  // CHECK: dist.send %{{.*}} from 0 to 1 tag "act/mb0" : tensor<2x4xf32>
  dist.send %a from 0 to 1 tag "act/mb0" : tensor<2x4xf32>
  // CHECK: dist.recv from 0 to 1 tag "act/mb0" {batch = 2 : i64} : tensor<2x4xf32>
  %h = dist.recv from 0 to 1 tag "act/mb0" {batch = 2} : tensor<2x4xf32>
  // CHECK: dist.stage_select %{{.*}}, %{{.*}} : tensor<2x4xf32>, tensor<2x4xf32> -> tensor<2x4xf32>
  %s = dist.stage_select %a, %h : tensor<2x4xf32>, tensor<2x4xf32> -> tensor<2x4xf32>
  return
}

// Context parallelism: the zigzag layout and zigzag collectives.
// CHECK: dist.mesh @cpmesh axes = ["dp", "cp"] shape = [2, 2]
dist.mesh @cpmesh axes = ["dp", "cp"] shape = [2, 2]
// CHECK-LABEL: func.func @cp
// CHECK-SAME: dist.layout = #dist.layout<[dp, cp zigzag, _]>
// CHECK-SAME: dist.layout = #dist.layout<[(dp, cp) zigzag, _]>
func.func @cp(%x: tensor<1x4x2xf32> {dist.value = "x", dist.layout = #dist.layout<[dp, cp zigzag, _]>},
              %y: tensor<4x2xf32> {dist.value = "y", dist.layout = #dist.layout<[(dp, cp) zigzag, _]>})
    attributes {dist.mesh = @cpmesh} {
  // CHECK: dist.all_gather %{{.*}} over ["cp"] dim 1 zigzag : tensor<1x4x2xf32> -> tensor<1x8x2xf32>
  %g = dist.all_gather %x over ["cp"] dim 1 zigzag : tensor<1x4x2xf32> -> tensor<1x8x2xf32>
  // CHECK: dist.reduce_scatter %{{.*}} over ["cp"] dim 1 zigzag "sum" : tensor<1x8x2xf32> -> tensor<1x4x2xf32>
  %s = dist.reduce_scatter %g over ["cp"] dim 1 zigzag "sum" : tensor<1x8x2xf32> -> tensor<1x4x2xf32>
  // CHECK: dist.shard_slice %{{.*}} over ["cp"] dim 1 zigzag : tensor<1x8x2xf32> -> tensor<1x4x2xf32>
  %k = dist.shard_slice %g over ["cp"] dim 1 zigzag : tensor<1x8x2xf32> -> tensor<1x4x2xf32>
  // Expert parallelism: slots of every expert to the rank holding it, and back.
  // CHECK: dist.all_to_all %{{.*}} over ["cp"] split_dim 1 concat_dim 2 : tensor<1x8x2xf32> -> tensor<1x4x4xf32>
  %a = dist.all_to_all %g over ["cp"] split_dim 1 concat_dim 2 : tensor<1x8x2xf32> -> tensor<1x4x4xf32>
  return
}
