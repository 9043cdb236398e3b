// RUN: planproof-opt %s -split-input-file -verify-diagnostics
// Invalid IR is rejected with a located diagnostic.

dist.mesh @mesh axes = ["tp"] shape = [2]
func.func @unknown_axis_in_collective(%a: tensor<4xf32>) attributes {dist.mesh = @mesh} {
  // expected-error @+1 {{names mesh axis 'dp', which mesh @mesh does not have}}
  %0 = dist.all_reduce %a over ["dp"] "sum" : tensor<4xf32> -> tensor<4xf32>
  return
}

// -----

dist.mesh @mesh axes = ["tp"] shape = [2]
// expected-error @+1 {{layout names mesh axis 'pp', which mesh @mesh does not have}}
func.func @unknown_axis_in_layout(%a: tensor<4xf32> {dist.value = "a", dist.layout = #dist.layout<[pp]>})
    attributes {dist.mesh = @mesh} {
  return
}

// -----

dist.mesh @mesh axes = ["tp"] shape = [2]
// expected-error @+1 {{layout has 2 dimension entries but the tensor has rank 1}}
func.func @layout_rank(%a: tensor<4xf32> {dist.value = "a", dist.layout = #dist.layout<[tp, _]>})
    attributes {dist.mesh = @mesh} {
  return
}

// -----

// expected-error @+1 {{layout: mesh axis 'tp' is used more than once}}
func.func @axis_twice(%a: tensor<4x4xf32> {dist.layout = #dist.layout<[tp, _], sum = [tp]>}) {
  return
}

// -----

// expected-error @+1 {{unknown partial kind 'prod'}}
func.func @bad_partial_kind(%a: tensor<4xf32> {dist.layout = #dist.layout<[_], prod = [tp]>}) {
  return
}

// -----

dist.mesh @mesh axes = ["tp"] shape = [4]
func.func @does_not_divide(%a: tensor<6x2xf32>) attributes {dist.mesh = @mesh} {
  // expected-error @+1 {{dimension 0 of size 6 does not divide by the 4 ranks of axes ["tp"]}}
  %0 = dist.reduce_scatter %a over ["tp"] dim 0 "sum" : tensor<6x2xf32> -> tensor<1x2xf32>
  return
}

// -----

dist.mesh @mesh axes = ["tp"] shape = [4]
func.func @slice_does_not_divide(%a: tensor<2x6xf32>) attributes {dist.mesh = @mesh} {
  // expected-error @+1 {{dimension 1 of size 6 does not divide by the 4 ranks}}
  %0 = dist.shard_slice %a over ["tp"] dim 1 : tensor<2x6xf32> -> tensor<2x1xf32>
  return
}

// -----

dist.mesh @mesh axes = ["tp"] shape = [2]
func.func @gather_wrong_result(%a: tensor<2x2xf32>) attributes {dist.mesh = @mesh} {
  // expected-error @+1 {{result type 'tensor<2x2xf32>' does not match the expected 'tensor<2x4xf32>'}}
  %0 = dist.all_gather %a over ["tp"] dim 1 : tensor<2x2xf32> -> tensor<2x2xf32>
  return
}

// -----

dist.mesh @mesh axes = ["tp"] shape = [2]
func.func @bad_kind(%a: tensor<2xf32>) attributes {dist.mesh = @mesh} {
  // expected-error @+1 {{has reduction kind 'prod'; expected "sum", "avg" or "max"}}
  %0 = dist.all_reduce %a over ["tp"] "prod" : tensor<2xf32> -> tensor<2xf32>
  return
}

// -----

func.func @collective_outside_plan(%a: tensor<2xf32>) {
  // expected-error @+1 {{must be inside a plan function with a 'dist.mesh' attribute}}
  %0 = dist.all_reduce %a over ["tp"] "sum" : tensor<2xf32> -> tensor<2xf32>
  return
}

// -----

// expected-error @+1 {{'dist.mesh' names @nowhere, which is not a dist.mesh in scope}}
func.func @missing_mesh() attributes {dist.mesh = @nowhere} {
  return
}

// -----

// expected-error @+1 {{axis 'tp' is declared twice}}
dist.mesh @mesh axes = ["tp", "tp"] shape = [2, 2]

// -----

// expected-error @+1 {{axis 'tp' has size 0; sizes must be between 1 and 2^20}}
dist.mesh @mesh axes = ["tp"] shape = [0]

// -----

// expected-error @+1 {{has 2 axis names but 1 axis sizes}}
dist.mesh @mesh axes = ["dp", "tp"] shape = [2]

// -----

dist.mesh @mesh axes = ["tp"] shape = [2]
func.func @axis_index_unknown() attributes {dist.mesh = @mesh} {
  // expected-error @+1 {{names mesh axis 'dp', which mesh @mesh does not have}}
  %0 = dist.axis_index "dp" : index
  return
}

// -----

func.func @matmul_mismatch(%a: tensor<2x4xf32>, %b: tensor<3x4xf32>) {
  // expected-error @+1 {{ref.matmul: contracted dimensions differ: lhs dim 1 has size 4, rhs dim 0 has size 3}}
  %0 = ref.matmul %a, %b contract(1, 0) : tensor<2x4xf32>, tensor<3x4xf32>
  return
}

// -----

func.func @bias_mismatch(%a: tensor<2x4xf32>, %b: tensor<3xf32>) {
  // expected-error @+1 {{bias has 3 elements but the input's last dimension has 4}}
  %0 = ref.bias_add %a, %b : tensor<2x4xf32>, tensor<3xf32>
  return
}

// -----

func.func @reduce_dims(%a: tensor<2x4xf32>) {
  // expected-error @+1 {{'dims' must be sorted, distinct, and within the operand's rank 2}}
  %0 = ref.reduce_sum %a dims [2] : tensor<2x4xf32>
  return
}

// -----

// expected-note @+1 {{prior use here}}
func.func @elementwise_mismatch(%a: tensor<2x4xf32>, %b: tensor<4x2xf32>) {
  // expected-error @+1 {{use of value '%b' expects different type than prior uses}}
  %0 = ref.add %a, %b : tensor<2x4xf32>
  return
}

// -----

func.func @not_f32(%a: tensor<2xi32>) {
  // expected-error @+1 {{must be ranked tensor of 32-bit float values}}
  %0 = ref.gelu %a : tensor<2xi32>
  return
}

// -----

func.func @reshape_count(%a: tensor<2x4xf32>) {
  // expected-error @+1 {{cannot reshape 8 elements into 6}}
  %0 = ref.reshape %a : tensor<2x4xf32> -> tensor<2x3xf32>
  return
}

// -----

func.func @broadcast_dims(%a: tensor<4xf32>) {
  // expected-error @+1 {{operand dim 0 (size 4) does not match result dim 0 (size 2)}}
  %0 = ref.broadcast %a dims [0] : tensor<4xf32> -> tensor<2x4xf32>
  return
}

// -----

func.func @slice_bounds(%a: tensor<2x4xf32>) {
  // expected-error @+1 {{ref.slice: dimension 1: offset 3 and size 2 are out of bounds: the slice must lie inside [0, 4)}}
  %0 = ref.slice %a offsets [0, 3] sizes [2, 2] : tensor<2x4xf32>
  return
}

// -----

func.func @transpose_perm(%a: tensor<2x4xf32>) {
  // expected-error @+1 {{'perm' must be a permutation of 0..1}}
  %0 = ref.transpose %a perm [0, 0] : tensor<2x4xf32>
  return
}

// -----

func.func @causal_shape(%a: tensor<3x2xf32>) {
  // expected-error @+1 {{needs scores [..., Sq, Sk] with Sk >= Sq}}
  %0 = ref.causal_softmax %a : tensor<3x2xf32>
  return
}

// -----

func.func @norm_weight(%a: tensor<2x4xf32>, %w: tensor<3xf32>) {
  // expected-error @+1 {{weight and bias must be 1-D of the last dimension's size 4}}
  %0 = ref.rms_norm %a, %w eps 1.0e-6 : tensor<2x4xf32>, tensor<3xf32>
  return
}

// -----

func.func @rotary_tables(%a: tensor<2x3x4xf32>, %c: tensor<2x4xf32>) {
  // expected-error @+1 {{cos and sin must have shape [S, D] = [3, 4]}}
  %0 = ref.rotary %a, %c, %c : tensor<2x3x4xf32>, tensor<2x4xf32>
  return
}

// -----

func.func @ce_mask(%a: tensor<2x4xf32>, %m: tensor<3xf32>) {
  // expected-error @+1 {{the mask must be [T] with T = 2}}
  %0 = ref.cross_entropy %a, %a, %m : tensor<2x4xf32>, tensor<3xf32>
  return
}

// -----

// expected-error @+1 {{layout: 'in 3' on dimension 0, which no mesh axis splits}}
func.func @segments_unsplit(%a: tensor<6x4xf32> {dist.layout = #dist.layout<[_ in 3, tp]>}) {
  return
}

// -----

func.func @grad_not_scalar(%x: tensor<2xf32>) {
  // expected-error @+1 {{needs a 0-D loss, got 'tensor<2xf32>'}}
  %g = ref.grad %x wrt %x : tensor<2xf32>, tensor<2xf32> -> tensor<2xf32>
  return
}

// -----

func.func @grad_types(%x: tensor<2xf32>, %l: tensor<f32>) {
  // expected-error @+1 {{must have one result per 'wrt' value, of the same type}}
  %g = ref.grad %l wrt %x : tensor<f32>, tensor<2xf32> -> tensor<3xf32>
  return
}

// -----

func.func @embedding_grad_rows(%g: tensor<3x4xf32>, %ids: tensor<3xi64>) {
  // expected-error @+1 {{needs a [tokens, width] gradient, [tokens] ids and a [rows, width] result}}
  %d = ref.embedding_grad %g, %ids : tensor<3x4xf32>, tensor<3xi64> -> tensor<8x5xf32>
  return
}

// -----

func.func @one_hot_tokens(%ids: tensor<3xi64>) {
  // expected-error @+1 {{needs [tokens] ids and a [tokens, classes] result}}
  %h = ref.one_hot %ids : tensor<3xi64> -> tensor<2x8xf32>
  return
}

// -----

func.func @one_hot_rank(%ids: tensor<3xi64>) {
  // expected-error @+1 {{needs [tokens] ids and a [tokens, classes] result}}
  %h = ref.one_hot %ids : tensor<3xi64> -> tensor<3x2x4xf32>
  return
}

// -----

func.func @bad_role(%x: tensor<2xf32>) {
  // expected-error @+1 {{'ref.role' must be a violation kind}}
  %y = ref.gelu %x {ref.role = "speed"} : tensor<2xf32>
  return
}

// -----

func.func @dropout_p(%k: index, %c: index) {
  // expected-error @+1 {{drop probability p must lie in [0, 1), got 1}}
  %m = ref.dropout_mask %k, %c p 1.0 : tensor<2xf32>
  return
}

// -----

func.func @power_not_scalar(%t: index) {
  // expected-error @+1 {{result must be a scalar tensor<f32>}}
  %p = ref.power %t base 0.9 : tensor<2xf32>
  return
}

// -----

func.func @power_base(%t: index) {
  // expected-error @+1 {{base must be positive}}
  %p = ref.power %t base -0.5 : tensor<f32>
  return
}

// -----

dist.mesh @mesh axes = ["tp"] shape = [2]
// expected-error @+1 {{'dist.rng' belongs on a plan func.func and is "exact" or "independent"}}
func.func @rng_mode() attributes {dist.mesh = @mesh, dist.rng = "fast"} {
  return
}

// -----

dist.mesh @mesh axes = ["tp"] shape = [2]
func.func @draws_on_other_op(%x: tensor<2xf32>) attributes {dist.mesh = @mesh} {
  // expected-error @+1 {{'dist.draws' belongs on a plan's ref.dropout_mask}}
  %y = ref.gelu %x {dist.draws = "m"} : tensor<2xf32>
  return
}

// -----

dist.mesh @mesh axes = ["tp"] shape = [2]
func.func @block_offset_rank(%k: index, %c: index) attributes {dist.mesh = @mesh} {
  // expected-error @+1 {{'dist.block_offset' must be array<i64: ...> with one non-negative offset per dimension}}
  %m = ref.dropout_mask %k, %c p 0.1 {dist.draws = "m", dist.block_offset = array<i64: 0>} : tensor<2x2xf32>
  return
}

// -----

dist.mesh @mesh axes = ["tp"] shape = [2]
func.func @draw_layout_axis(%k: index, %c: index) attributes {dist.mesh = @mesh} {
  // expected-error @+1 {{layout names mesh axis 'dp'}}
  %m = ref.dropout_mask %k, %c p 0.1 {dist.draws = "m", dist.layout = #dist.layout<[dp, _]>} : tensor<2x2xf32>
  return
}

// -----

dist.mesh @mesh axes = ["dp"] shape = [2]
func.func @save_offsets(%m: tensor<13xf32>) attributes {dist.mesh = @mesh} {
  // expected-error @+1 {{needs one offset per dimension of the entry (1), got 0}}
  dist.save %m as "m" shape [25] at [] : tensor<13xf32>
  return
}

// -----

dist.mesh @mesh axes = ["dp"] shape = [2]
func.func @load_too_big(%o: index) attributes {dist.mesh = @mesh} {
  // expected-error @+1 {{piece dimension 0 (30) is larger than the entry's (25)}}
  %l = dist.load "m" shape [25] at [%o] : tensor<30xf32>
  return
}

// -----

dist.mesh @mesh axes = ["dp"] shape = [2]
func.func @save_on_axis(%t: index) attributes {dist.mesh = @mesh} {
  // expected-error @+1 {{'on' maps mesh axes of the plan to coordinates, got 'tp'}}
  dist.save %t as "t" shape [] at [] {on = {tp = 0 : i64}} : index
  return
}

// -----

dist.mesh @mesh axes = ["pp"] shape = [2]
func.func @send_without_pipeline(%a: tensor<2xf32>) attributes {dist.mesh = @mesh} {
  // expected-error @+1 {{needs a plan function with 'dist.pipeline' naming the mesh axis of the stages}}
  dist.send %a from 0 to 1 tag "x" : tensor<2xf32>
  return
}

// -----

dist.mesh @mesh axes = ["pp"] shape = [2]
func.func @recv_out_of_range() attributes {dist.mesh = @mesh, dist.pipeline = "pp"} {
  // expected-error @+1 {{stages must be in [0, 2): from 0 to 2}}
  %r = dist.recv from 0 to 2 tag "x" : tensor<2xf32>
  return
}

// -----

dist.mesh @mesh axes = ["pp"] shape = [3]
func.func @select_count(%a: tensor<2xf32>) attributes {dist.mesh = @mesh, dist.pipeline = "pp"} {
  // expected-error @+1 {{takes one value per stage: 3, not 2}}
  %s = dist.stage_select %a, %a : tensor<2xf32>, tensor<2xf32> -> tensor<2xf32>
  return
}

// -----

dist.mesh @mesh axes = ["pp"] shape = [2]
// expected-error @+1 {{'dist.pipeline' names 'tp', which is not an axis of the mesh}}
func.func @pipeline_axis() attributes {dist.mesh = @mesh, dist.pipeline = "tp"} {
  return
}

// -----

dist.mesh @mesh axes = ["pp"] shape = [2]
func.func @stage_range(%a: tensor<2xf32>) attributes {dist.mesh = @mesh, dist.pipeline = "pp"} {
  // expected-error @+1 {{'dist.stage' = 3 is not a stage in [0, 2)}}
  %g = ref.gelu %a {dist.stage = 3} : tensor<2xf32>
  return
}

// -----

dist.mesh @mesh axes = ["cp"] shape = [2]
// expected-error @+1 {{layout: 'zigzag' on dimension 0, which no mesh axis splits}}
func.func @zigzag_unsplit(%a: tensor<8x4xf32> {dist.layout = #dist.layout<[_ zigzag, cp]>}) {
  return
}

// -----

dist.mesh @mesh axes = ["cp"] shape = [2]
func.func @zigzag_not_chunks(%a: tensor<6x4xf32>) attributes {dist.mesh = @mesh} {
  // expected-error @+1 {{zigzag: dimension 0 of size 6 does not divide into 2 x 2 chunks}}
  %0 = dist.shard_slice %a over ["cp"] dim 0 zigzag : tensor<6x4xf32> -> tensor<3x4xf32>
  return
}

// -----

dist.mesh @mesh axes = ["cp"] shape = [2]
func.func @zigzag_gather_odd(%a: tensor<3x4xf32>) attributes {dist.mesh = @mesh} {
  // expected-error @+1 {{zigzag: dimension 0 of size 3 is not two chunks}}
  %0 = dist.all_gather %a over ["cp"] dim 0 zigzag : tensor<3x4xf32> -> tensor<6x4xf32>
  return
}

// -----

func.func @causal_offset_needs_rank2(%a: tensor<4xf32>, %o: index) {
  // expected-error @+1 {{needs scores [..., Sq, Sk]}}
  %0 = ref.causal_softmax %a offset %o : tensor<4xf32>
  return
}

// -----

func.func @topk_too_many(%a: tensor<8x4xf32>) {
  // expected-error @+1 {{k must be between 1 and the size of the last dimension}}
  %0 = ref.topk_mask %a k 5 : tensor<8x4xf32>
  return
}

// -----

func.func @dispatch_groups(%a: tensor<6x4xf32>) {
  // expected-error @+1 {{the 6 tokens must divide into 4 groups}}
  %0 = ref.capacity_dispatch %a capacity 2 groups 4 : tensor<6x4xf32>
  return
}

// -----

dist.mesh @mesh axes = ["ep"] shape = [2]
func.func @all_to_all_split(%a: tensor<3x4xf32>) attributes {dist.mesh = @mesh} {
  // expected-error @+1 {{split_dim 0 of size 3 does not divide by the 2 ranks}}
  %0 = dist.all_to_all %a over ["ep"] split_dim 0 concat_dim 1 : tensor<3x4xf32> -> tensor<1x8xf32>
  return
}
