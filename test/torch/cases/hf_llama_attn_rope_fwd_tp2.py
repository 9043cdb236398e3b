# HuggingFace-style Llama attention (hf_llama_attn_gqa_tp2.py) whose rotary tables the
# forward computes, as newer HuggingFace versions do: positions by torch.arange converted
# to float, angles their products with the inverse frequencies (a buffer), cos and sin of
# them. TP=2, batch 1. VALID plan.
import torch
from hf_llama_attn_gqa_tp2 import HD, Attn as BufferedAttn, planproof_case as buffered_case


class Attn(BufferedAttn):
    def __init__(self):
        super().__init__()
        inv = 1.0 / (10000 ** (torch.arange(0, HD, 2).float() / HD))
        self.register_buffer("inv", inv, persistent=False)

    def tables(self, s):
        pos = torch.arange(s, device=self.inv.device).float()
        freqs = pos[:, None] * self.inv[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos()[None, None], emb.sin()[None, None]


def planproof_case():
    return dict(buffered_case(), model_fn=Attn)
