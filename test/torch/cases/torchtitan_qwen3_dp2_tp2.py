# torchtitan's own Qwen3 (torchtitan 0.3.0: models.qwen3's layer builder -- RMSNorm on
# every query and key head (qk-norm), grouped-query attention with 4 query heads on 2
# KV heads, CosSinRoPE, FlexAttention, SwiGLU; an untied lm_head) parallelized by its
# own sharding config (set_qwen3_sharding_config, sequence parallelism on) on
# dp_shard=2 x tp=2, forward, backward and an AdamW step, with the loss, inputs and
# FSDP gradient sync of torchtitan_llama3.py. FlexAttention's grouped heads are
# translated as its reference does (repeat_interleave of K and V along the heads; their
# gradients summed over each group: docs/torch.md).
import torch
import torchtitan.models.qwen3 as qwen3
from torchtitan.models.common import CosSinRoPE, Embedding, Linear
from torchtitan.models.qwen3 import Qwen3Model
from torchtitan.models.qwen3.sharding import set_qwen3_sharding_config
from torchtitan_llama3 import DIM, HIDDEN, VOCAB, attention_masks_of, case, fsdp_grad_sync

HEAD_DIM = 4


def qwen3_fn(heads, sp):
    config = Qwen3Model.Config(
        vocab_size=VOCAB, dim=DIM, norm=qwen3._qwen3_norm(DIM), enable_weight_tying=False,
        tok_embeddings=Embedding.Config(num_embeddings=VOCAB, embedding_dim=DIM,
                                        param_init=qwen3._EMBEDDING_INIT),
        lm_head=Linear.Config(in_features=DIM, out_features=VOCAB,
                              param_init=qwen3._LINEAR_INIT),
        layers=qwen3._build_qwen3_layers(
            fuse_qkv=True, n_layers=1, dim=DIM, n_heads=heads, n_kv_heads=heads // 2,
            head_dim=HEAD_DIM, hidden_dim=HIDDEN, attn_backend="flex",
            rope=CosSinRoPE.Config(dim=HEAD_DIM, max_seq_len=64, theta=1000000.0)))
    set_qwen3_sharding_config(config, enable_sp=sp, enable_ep=False)
    torch.manual_seed(0)
    return attention_masks_of(config.build())


def planproof_case():
    return case(dp=2, tp=2, heads=4, grad_sync=fsdp_grad_sync, build=qwen3_fn,
                model="Qwen3 (qk-norm, 4 query heads on 2 KV heads")
