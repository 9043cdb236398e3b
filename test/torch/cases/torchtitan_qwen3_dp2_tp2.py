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


def qwen3_fn(heads, sp, tied=False):
    config = Qwen3Model.Config(
        vocab_size=VOCAB, dim=DIM, norm=qwen3._qwen3_norm(DIM), enable_weight_tying=tied,
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


def tied_case(dp, grad_sync=None):
    """Qwen3 with its token embedding tied to the lm_head (enable_weight_tying, as
    torchtitan's small Qwen3 configurations have it) on dp_shard=dp x tp=2. The model
    holds one parameter under two names; Module.parallelize distributes each module's
    weight on its own, which unties them, and torchtitan ties them again in
    Decoder.init_states (after parallelizing): done here the same way. The parameter
    then has two uses -- the vocabulary-parallel lookup, which takes its local shard
    (to_local), and the lm_head -- and its gradient is their sum, as DTensor adds them."""
    out = case(dp=dp, tp=2, heads=4, grad_sync=grad_sync,
               build=lambda heads, sp: qwen3_fn(heads, sp, tied=True),
               model="Qwen3 (embedding tied to the lm_head, qk-norm, 4 query heads on 2 "
                     "KV heads")
    parallelize = out["parallelize"]

    def retied(model, mesh):
        model = parallelize(model, mesh)
        model.tok_embeddings.weight = model.lm_head.weight
        return model
    return dict(out, parallelize=retied)
