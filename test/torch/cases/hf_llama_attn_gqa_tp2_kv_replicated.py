# SEEDED BUG: hf_llama_attn_gqa_tp2, but k_proj and v_proj are left replicated (only q_proj
# colwise): each rank has 2 query heads and both KV heads, so n_rep = 1 locally and query
# head h pairs with KV head h mod 2, instead of KV head h // 2 (rank 0: q0-kv0 ok, q1-kv1
# WRONG). Expected: violated.
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
import hf_llama_attn_gqa_tp2 as b


def parallelize(model, mesh):
    return parallelize_module(model, mesh, {"q_proj": ColwiseParallel(), "o_proj": RowwiseParallel()})


def planproof_case():
    return dict(b.planproof_case(), parallelize=parallelize)
