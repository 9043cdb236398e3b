# The fix of ce_pad_class_dp2.py: each rank sums its counted tokens' losses
# (`reduction="sum"`, the PAD-labelled tokens skipped) and divides by the number of
# counted tokens of the whole batch -- `labels != PAD` summed and all-reduced over dp --
# and the gradients are summed: the single-device mean over the counted tokens, whatever
# ranks the padding falls on.
import torch
import torch.distributed._functional_collectives as funcol
import torch.nn.functional as F
from torch.distributed.tensor import Partial, Shard

from ce_pad_class_dp2 import LM, PAD, V, loss_fn


def plan_loss_fn(model, mesh, ids, labels):
    tokens = funcol.all_reduce((labels != PAD).sum(), "sum", mesh)
    logits = model(ids).reshape(-1, V)
    return F.cross_entropy(logits, labels.reshape(-1), ignore_index=PAD,
                           reduction="sum") / tokens


def sum_grads(grads, mesh):
    return {n: funcol.all_reduce(g, "sum", mesh) for n, g in grads.items()}


def planproof_case():
    return dict(model_fn=LM, loss_fn=loss_fn, plan_loss_fn=plan_loss_fn,
                inputs={"ids": torch.tensor([[1, 5, 0, 7], [3, 2, 6, 4]]),
                        "labels": torch.tensor([[5, 0, 7, 2], [0, 0, 4, 1]])},
                input_placements={"ids": [Shard(0)], "labels": [Shard(0)]},
                mesh_shape=(2,), mesh_dim_names=("dp",), parallelize=lambda m, mesh: m,
                grad_sync=sum_grads, loss_placements=[Partial("sum")])
