# gqa_attention_tp2.py's attention with the KV heads not repeated by hand: SDPA's
# `enable_gqa=True` on 4 query heads and 2 key/value heads (the CPU kernels take them as
# they are; query head h reads KV head h // 2). At TP=2 each rank holds 2 query heads
# and their 1 key/value head.
import torch.nn.functional as F

import gqa_attention_tp2 as base


class GQAttentionSDPA(base.GQAttention):
    def forward(self, x):
        bs, seqlen, _ = x.shape
        xq, xk, xv = self.heads(x)
        xq, keys, values = (t.transpose(1, 2) for t in (xq, xk, xv))
        out = F.scaled_dot_product_attention(xq, keys, values, is_causal=True, enable_gqa=True)
        return self.wo(out.transpose(1, 2).contiguous().view(bs, seqlen, -1))


def planproof_case():
    return dict(base.planproof_case(), model_fn=GQAttentionSDPA)
