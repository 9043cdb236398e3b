"""FlexAttention's translation reads the mask function and checks the block mask's
tables against it: a BlockMask whose tables skip a block the mask function unmasks (the
kernels would not visit it) is refused, not translated by its mask function alone."""
import sys

import torch
import torch.nn.attention.flex_attention as fa
from torch.fx.experimental.proxy_tensor import make_fx

from planproof.torch.aten import Translator, Unsupported

fa._validate_device = lambda query, key, value: None
B, H, S, D = 1, 1, 4, 2


def translate(block_mask):
    def step(q, k, v):
        return (fa.flex_attention(q, k, v, block_mask=block_mask),)
    args = [torch.randn(B, H, S, D) for _ in range(3)]
    gm = make_fx(step)(*args)
    t = Translator("ref")
    for node, name, a in zip([n for n in gm.graph.nodes if n.op == "placeholder"], "qkv", args):
        t.bind_input(node, name, a.shape)
    try:
        t.run(gm)
        return "translated: " + ",".join(sorted({o["op"] for o in t.ops} & {"causal_softmax", "softmax"}))
    except Unsupported as e:
        return "unsupported: " + e.what


causal = fa.create_block_mask(lambda b, h, q, kv: q >= kv, B, H, S, S, device="cpu", BLOCK_SIZE=2)
print("causal", translate(causal))
full = fa.create_block_mask(lambda b, h, q, kv: q >= 0, B, H, S, S, device="cpu", BLOCK_SIZE=2)
print("full", translate(full))
window = fa.create_block_mask(lambda b, h, q, kv: (q >= kv) & (q - kv < 2), B, H, S, S,
                              device="cpu", BLOCK_SIZE=2)
print("window", translate(window))
# The causal tables (block (0, 1) skipped) with a mask function unmasking everything.
forged = fa.BlockMask.from_kv_blocks(causal.kv_num_blocks, causal.kv_indices,
                                     causal.full_kv_num_blocks, causal.full_kv_indices,
                                     BLOCK_SIZE=2, mask_mod=lambda b, h, q, kv: q >= 0,
                                     seq_lengths=(S, S))
print("forged", translate(forged))


def translate_gqa(kv_heads):
    """Forward and backward with 4 query heads on `kv_heads` KV heads (enable_gqa):
    K and V repeated along the heads (a broadcast each), their gradients summed over
    each group (a reduce_sum each)."""
    def step(q, k, v):
        out = fa.flex_attention(q, k, v, block_mask=causal_any_head, enable_gqa=True)
        return torch.autograd.grad(out.sum(), (q, k, v))
    args = [torch.randn(B, 4, S, D, requires_grad=True)] + [
        torch.randn(B, kv_heads, S, D, requires_grad=True) for _ in range(2)]
    gm = make_fx(step)(*args)
    t = Translator("ref")
    for node, name, a in zip([n for n in gm.graph.nodes if n.op == "placeholder"], "qkv", args):
        t.bind_input(node, name, a.shape)
    t.run(gm)
    count = lambda op: sum(o["op"] == op for o in t.ops)  # noqa: E731
    return f"translated: {count('broadcast')} broadcasts, {count('reduce_sum')} sums"


causal_any_head = fa.create_block_mask(lambda b, h, q, kv: q >= kv, None, None, S, S,
                                       device="cpu", BLOCK_SIZE=2)
print("gqa 4:2", translate_gqa(2))
print("gqa 4:4", translate_gqa(4))
sys.stdout.flush()
