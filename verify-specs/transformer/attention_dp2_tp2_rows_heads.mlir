// Attention with several batch rows and several heads on every rank: batch split over
// dp, heads over tp (B = 4, H = 6 on a dp 2 x tp 2 mesh: each rank holds 2 rows x 3 heads).
// Each rank merges its rows and heads into the batch of its products, as PyTorch's SDPA
// and XLA's dot_general do: its (row, head) pairs are not one block of the reference's
// merged batch but runs of it (windows, docs/layout-engine.md).
module attributes {planproof.expect = {verdict = "verified"}} {
  func.func @reference(%q: tensor<4x2x6x2xf32> {ref.name = "q"},
                       %k: tensor<4x2x6x2xf32> {ref.name = "k"},
                       %v: tensor<4x2x6x2xf32> {ref.name = "v"})
      -> (tensor<4x2x6x2xf32> {ref.name = "out"}) attributes {ref.reference} {
    %qt = ref.transpose %q perm [0, 2, 1, 3] : tensor<4x2x6x2xf32>
    %kt = ref.transpose %k perm [0, 2, 1, 3] : tensor<4x2x6x2xf32>
    %vt = ref.transpose %v perm [0, 2, 1, 3] : tensor<4x2x6x2xf32>
    %q3 = ref.reshape %qt : tensor<4x6x2x2xf32> -> tensor<24x2x2xf32>
    %k3 = ref.reshape %kt : tensor<4x6x2x2xf32> -> tensor<24x2x2xf32>
    %v3 = ref.reshape %vt : tensor<4x6x2x2xf32> -> tensor<24x2x2xf32>
    %s = ref.batch_matmul %q3, %k3 contract(2, 2) : tensor<24x2x2xf32>, tensor<24x2x2xf32>
    %p = ref.causal_softmax %s : tensor<24x2x2xf32>
    %o = ref.batch_matmul %p, %v3 contract(2, 1) : tensor<24x2x2xf32>, tensor<24x2x2xf32>
    %o4 = ref.reshape %o : tensor<24x2x2xf32> -> tensor<4x6x2x2xf32>
    %out = ref.transpose %o4 perm [0, 2, 1, 3] : tensor<4x6x2x2xf32>
    return %out : tensor<4x2x6x2xf32>
  }

  dist.mesh @mesh axes = ["dp", "tp"] shape = [2, 2]

  func.func @plan(%q: tensor<2x2x3x2xf32> {dist.value = "q", dist.layout = #dist.layout<[dp, _, tp, _]>},
                  %k: tensor<2x2x3x2xf32> {dist.value = "k", dist.layout = #dist.layout<[dp, _, tp, _]>},
                  %v: tensor<2x2x3x2xf32> {dist.value = "v", dist.layout = #dist.layout<[dp, _, tp, _]>})
      -> (tensor<2x2x3x2xf32> {dist.value = "out", dist.layout = #dist.layout<[dp, _, tp, _]>})
      attributes {dist.mesh = @mesh} {
    %q_t = ref.transpose %q perm [0, 2, 1, 3] : tensor<2x2x3x2xf32>
    %k_t = ref.transpose %k perm [0, 2, 1, 3] : tensor<2x2x3x2xf32>
    %v_t = ref.transpose %v perm [0, 2, 1, 3] : tensor<2x2x3x2xf32>
    %q_3 = ref.reshape %q_t : tensor<2x3x2x2xf32> -> tensor<6x2x2xf32>
    %k_3 = ref.reshape %k_t : tensor<2x3x2x2xf32> -> tensor<6x2x2xf32>
    %v_3 = ref.reshape %v_t : tensor<2x3x2x2xf32> -> tensor<6x2x2xf32>
    %s_p = ref.batch_matmul %q_3, %k_3 contract(2, 2) : tensor<6x2x2xf32>, tensor<6x2x2xf32>
    %p_p = ref.causal_softmax %s_p : tensor<6x2x2xf32>
    %o_p = ref.batch_matmul %p_p, %v_3 contract(2, 1) : tensor<6x2x2xf32>, tensor<6x2x2xf32>
    %o_4 = ref.reshape %o_p : tensor<6x2x2xf32> -> tensor<2x3x2x2xf32>
    %out = ref.transpose %o_4 perm [0, 2, 1, 3] : tensor<2x3x2x2xf32>
    return %out : tensor<2x2x3x2xf32>
  }
}
