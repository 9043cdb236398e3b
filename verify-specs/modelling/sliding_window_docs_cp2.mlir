// Attention over packed documents with a causal sliding window (ref.position_mask x
// ref.document_mask, applied with ref.masked_softmax), the queries split over cp: each
// rank passes the global position of its first query to the mask.
module attributes {planproof.expect = {verdict = "verified"}} {
  func.func @reference(%s: tensor<4x4xf32> {ref.name = "s"},
                       %doc: tensor<4xf32> {ref.name = "doc", ref.bound = 2 : i64},
                       %v: tensor<4x2xf32> {ref.name = "v"})
      -> (tensor<4x2xf32> {ref.name = "o"}) attributes {ref.reference} {
    %zero = arith.constant 0 : index
    %pos = ref.position_mask %zero, %zero causal window 2 : tensor<4x4xf32>
    %same = ref.document_mask %doc, %doc : tensor<4xf32>, tensor<4xf32>
    %mask = ref.mul %pos, %same : tensor<4x4xf32>
    %p = ref.masked_softmax %s, %mask : tensor<4x4xf32>, tensor<4x4xf32>
    %o = ref.matmul %p, %v contract(1, 0) : tensor<4x4xf32>, tensor<4x2xf32>
    return %o : tensor<4x2xf32>
  }
  dist.mesh @mesh axes = ["cp"] shape = [2]
  func.func @plan(%s: tensor<2x4xf32> {dist.value = "s", dist.layout = #dist.layout<[cp, _]>},
                  %doc_q: tensor<2xf32> {dist.value = "doc", dist.layout = #dist.layout<[cp]>},
                  %doc_k: tensor<4xf32> {dist.value = "doc", dist.layout = #dist.layout<[_]>},
                  %v: tensor<4x2xf32> {dist.value = "v", dist.layout = #dist.layout<[_, _]>})
      -> (tensor<2x2xf32> {dist.value = "o", dist.layout = #dist.layout<[cp, _]>})
      attributes {dist.mesh = @mesh} {
    %r = dist.axis_index "cp" : index
    %chunk = arith.constant 2 : index
    %q0 = arith.muli %r, %chunk : index
    %k0 = arith.constant 0 : index
    %pos = ref.position_mask %q0, %k0 causal window 2 : tensor<2x4xf32>
    %same = ref.document_mask %doc_q, %doc_k : tensor<2xf32>, tensor<4xf32>
    %mask = ref.mul %pos, %same : tensor<2x4xf32>
    %p = ref.masked_softmax %s, %mask : tensor<2x4xf32>, tensor<2x4xf32>
    %o = ref.matmul %p, %v contract(1, 0) : tensor<2x4xf32>, tensor<4x2xf32>
    return %o : tensor<2x2xf32>
  }
}
